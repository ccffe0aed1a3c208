"""Matrix products and matrix functions as composites of ``linalg.py``'s primitives: ``ger``,
``inner``, ``chain_matmul``, ``addmv``, ``addr``, ``addbmm``, ``matrix_power``, ``logdet``,
``slogdet``, ``matrix_exp``, ``pinverse``.

Gradients are those of the matmuls, decompositions and pointwise ops they are made of.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _dtype as D
from .. import return_types
from .registry import NAMESPACES, defcomposite
from .samples import nc, sample

_ns = NAMESPACES[""]
_bool = D.bool_


def _r(rng, *shape):
    return rng.standard_normal(shape)


def _spd(rng, *shape):
    return rng.standard_normal(shape) + shape[-1] * np.eye(shape[-1])


def _check_square(fn: str, A, what: str = "A"):
    if A.dim() < 2:
        raise RuntimeError(f"{fn}: The input tensor {what} must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fn}: {what} must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _scaled_sum(input, prod, beta, alpha):
    """``beta * input + alpha * prod``; beta == 0 ignores ``input`` (its NaNs too), as BLAS does."""
    prod = prod if alpha == 1 else prod * alpha
    if beta == 0:  # a where, not a multiply: input's NaNs stay out, its gradient is zeros
        return _ns["where"](prod.new_ones((), dtype=_bool), prod, input)
    return prod + (input if beta == 1 else input * beta)


# --- products ---
def _vec(fn, name, t):
    if t.dim() != 1:
        raise RuntimeError(f"{fn}: Expected 1-D argument {name}, but got {t.dim()}-D")


def ger(input, vec2):
    _vec("outer", "self", input)
    _vec("outer", "vec2", vec2)
    return _ns["outer"](input, vec2)


def inner(input, other):
    """Sum over the last dimensions of both; a 0-d operand multiplies."""
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got "
                           f"shapes {list(input.shape)} and {list(other.shape)}")
    return _ns["tensordot"](input, other, ([-1], [-1]))


def chain_matmul(*matrices, out=None):
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. "
                  "Use torch.linalg.multi_dot instead, which accepts a list of two or more tensors "
                  "rather than multiple parameters.", UserWarning, stacklevel=2)
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    if len(matrices) == 1:
        return matrices[0].clone()
    result = matrices[0]
    for m in matrices[1:]:
        result = result.mm(m)
    return result


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    if mat.dim() != 2 or vec.dim() != 1 or input.dim() > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.dim()}, {mat.dim()}, {vec.dim()}")
    if mat.shape[1] != vec.shape[0] or (input.dim() == 1 and input.shape[0] not in (1, mat.shape[0])):
        raise RuntimeError(f"size mismatch, got input ({input.shape[0] if input.dim() else 1}), "
                           f"mat ({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})")
    return _scaled_sum(input, mat.mv(vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    _vec("addr", "vec1", vec1)
    _vec("addr", "vec2", vec2)
    return _scaled_sum(input, _ns["outer"](vec1, vec2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    for name, b in (("batch1", batch1), ("batch2", batch2)):
        if b.dim() != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    return _scaled_sum(input, batch1.bmm(batch2).sum(0), beta, alpha)


# --- matrix functions ---
def matrix_power(input, n):
    """``input`` multiplied by itself ``n`` times (its inverse ``-n`` times for negative ``n``)."""
    _check_square("linalg.matrix_power", input)
    if n == 0:
        eye = _ns["eye"](input.shape[-1], dtype=input.dtype, device=input.device)
        return _ns["where"](input.new_ones((), dtype=_bool), eye, input)  # zero gradient, as torch
    base = input if n > 0 else input.inverse()
    n = abs(n)
    result = None
    while n:  # square and multiply: about log2(n) matmuls
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def logdet(input):
    """log(det(input)): NaN for a negative determinant, -inf for a singular matrix."""
    _check_square("logdet", input)
    sign, logabs = NAMESPACES["linalg"]["slogdet"](input)
    if input.is_complex():
        return sign.log() + logabs
    return _ns["where"](sign < 0, math.nan, logabs)


slogdet_result = return_types._structseq("slogdet", ("sign", "logabsdet"))
return_types.slogdet = slogdet_result


def slogdet(input):
    return slogdet_result(*NAMESPACES["linalg"]["slogdet"](input))


def matrix_exp(input):
    """exp(input) by scaling and squaring: Taylor series of degree 18 on input / 2**s with
    |input / 2**s| <= 1/2, squared s times (every step a matmul, so gradients follow)."""
    _check_square("linalg.matrix_exp", input)
    n = input.shape[-1]
    if input.numel() == 0:
        return input.clone()
    norm = float(np.max(np.abs(input.detach().cpu().numpy()).sum(-1), initial=0.0))
    s = max(0, math.ceil(math.log2(norm / 0.5))) if norm > 0.5 else 0
    a = input / (2.0 ** s) if s else input
    eye = _ns["eye"](n, dtype=input.dtype, device=input.device).expand(input.shape)
    term, result = eye, eye
    for k in range(1, 19):
        term = (term @ a) / k
        result = result + term
    for _ in range(s):
        result = result @ result
    return result


def pinverse(input, rcond=1e-15):
    """Moore-Penrose pseudo-inverse through the SVD; singular values below rcond * max are dropped."""
    if input.dim() < 2 or not (input.is_floating_point() or input.is_complex()):
        kind = {"float32": "Float", "float64": "Double", "complex64": "ComplexFloat",
                "complex128": "ComplexDouble"}.get(str(input.dtype).split(".")[-1], "Long")
        raise RuntimeError(f"linalg.pinv({kind}{{{list(input.shape)}}}): expected a tensor with 2 or "
                           "more dimensions of float, double, cfloat or cdouble types")
    if input.numel() == 0:
        return input.new_zeros(input.shape[:-2] + (input.shape[-1], input.shape[-2]))
    u, s, vh = NAMESPACES["linalg"]["svd"](input, full_matrices=False)
    sd = s.detach()  # the cut-off selects values; it carries no gradient
    keep = sd > rcond * sd.amax(-1, keepdim=True)
    s_inv = _ns["where"](keep, 1 / _ns["where"](keep, s, 1.0), 0.0)
    v, uh = (vh.mT.conj(), u.mT.conj()) if input.is_complex() else (vh.mT, u.mT)
    return (v * s_inv.unsqueeze(-2).to(vh.dtype)) @ uh


for _fn, _samples, _method in (
    (ger, lambda rng: [sample("vv", _r(rng, 3), _r(rng, 4))], True),
    (inner, lambda rng: [sample("1d", _r(rng, 3), _r(rng, 3)), sample("nd", _r(rng, 2, 3), nc(_r(rng, 4, 3))),
                         sample("0d", _r(rng), _r(rng, 2))], True),
    (chain_matmul, lambda rng: [sample("3", _r(rng, 2, 3), _r(rng, 3, 4), _r(rng, 4, 2)),
                                sample("1", _r(rng, 2, 2))], False),
    (addmv, lambda rng: [sample("plain", _r(rng, 2), _r(rng, 2, 3), _r(rng, 3)),
                         sample("scaled", _r(rng, 1), nc(_r(rng, 2, 3)), _r(rng, 3), beta=0.5, alpha=2.0),
                         sample("beta0", _r(rng), _r(rng, 2, 3), _r(rng, 3), beta=0)], True),
    (addr, lambda rng: [sample("plain", _r(rng, 2, 3), _r(rng, 2), _r(rng, 3)),
                        sample("bcast", _r(rng, 3), _r(rng, 2), _r(rng, 3), beta=2, alpha=0.5)], True),
    (addbmm, lambda rng: [sample("plain", _r(rng, 2, 4), _r(rng, 3, 2, 5), _r(rng, 3, 5, 4)),
                          sample("scaled", _r(rng, 4), _r(rng, 2, 2, 3), _r(rng, 2, 3, 4), beta=0.5, alpha=-1)],
     True),
    (matrix_power, lambda rng: [sample("3", _r(rng, 3, 3) / 2, 3), sample("0", _r(rng, 2, 2, 2), 0),
                                sample("neg", _spd(rng, 3, 3), -2), sample("1_nc", nc(_r(rng, 3, 3)), 1)], True),
    (logdet, lambda rng: [sample("spd", _spd(rng, 3, 3)), sample("batched", _spd(rng, 2, 3, 3)),
                          sample("neg_entries", -_spd(rng, 2, 2))], True),
    (slogdet, lambda rng: [sample("2d", _spd(rng, 3, 3)), sample("neg", -_spd(rng, 3, 3))], True),
    (matrix_exp, lambda rng: [sample("small", _r(rng, 3, 3) / 4), sample("big", 2 * _r(rng, 2, 3, 3)),
                              sample("1x1", _r(rng, 1, 1))], True),
    (pinverse, lambda rng: [sample("tall", _r(rng, 4, 3)), sample("wide", _r(rng, 2, 3)),
                            sample("batched", _spd(rng, 2, 3, 3))], True),
):
    defcomposite(_fn, samples=_samples, method=_method)
NAMESPACES["linalg"]["matrix_power"] = matrix_power
NAMESPACES["linalg"]["matrix_exp"] = matrix_exp
