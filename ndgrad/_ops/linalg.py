"""Linear algebra: matmul (batched, broadcasting, 1-D cases), mm, bmm, addmm, dot, outer,
einsum and the ``linalg`` namespace (inv, det, slogdet, solve, cholesky, qr, svd, svdvals, eigh,
eigvalsh, matrix_norm, norm, vecdot, multi_dot, ...).

Batch dimensions broadcast in the forward; the engine sums gradients back to each input's shape.
"""

from __future__ import annotations

import collections
import functools
import warnings

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._backend import cublas as _cublas
from .. import return_types
from .registry import PROMOTE_COMMON as COMMON
from .._tensor import Tensor, _wrap_dim
from .factory import eye as _eye
from .factory import ones as _ones
from .jvp import plus, product
from .registry import NAMESPACES, defcomposite, defop, write_out
from .samples import nc, sample
from .shape import cat


_nd = np.ndarray


def _matmul(x, y):
    if x.ndim == 0 or y.ndim == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {x.ndim}D and {y.ndim}D"
        )
    try:
        # A CUDA-graph capture on CuPy arrays: CuPy refuses cuBLAS there (_backend/cublas.py).
        # NumPy arrays pay one type check.
        if type(x) is not _nd and _cublas.capturing[0]:
            return _cublas.matmul(x, y)
        if x.ndim > 2 and y.ndim == 2 and x.flags.c_contiguous:  # one GEMM, not one per matrix
            return np.matmul(x.reshape(-1, x.shape[-1]), y).reshape(x.shape[:-1] + y.shape[-1:])
        return np.matmul(x, y)
    except ValueError:
        a = (1, x.shape[0]) if x.ndim == 1 else x.shape[-2:]
        b = (y.shape[0], 1) if y.ndim == 1 else y.shape[-2:]
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a[0]}x{a[1]} and {b[0]}x{b[1]})"
        ) from None


# Each input's formula reads only the other input (and shapes, strides), so a node saves a
# value only when the gradient that needs it will be computed (``x @ W``, only W requiring grad:
# x alone), as PyTorch.
def _matmul_self(grad, self_shape, other):
    if other.dim() == 1:
        if len(self_shape) == 1:
            return grad * other
        return grad.unsqueeze(-1) * other
    if len(self_shape) == 1:
        return (grad.unsqueeze(-2) @ other.mT).squeeze(-2)
    return grad @ other.mT


def _matmul_other(grad, self, other_shape, other_strides):
    if self.dim() == 1:
        if len(other_shape) == 1:
            return grad * self
        return self.unsqueeze(-1) * grad.unsqueeze(-2)
    if len(other_shape) == 1:
        return (self.mT @ grad.unsqueeze(-1)).squeeze(-1)
    if len(other_shape) == 2 and self.dim() > 2:  # a weight shared by a batch: one GEMM over all rows
        return _weight_grad(self.reshape(-1, self.shape[-1]), grad.reshape(-1, grad.shape[-1]), other_strides)
    return self.mT @ grad


def _weight_grad(mat1, grad, mat2_strides):
    """``mat1.mT @ grad``, the gradient of ``mat2`` in ``mat1 @ mat2``, laid out as ``mat2`` is
    (as PyTorch does): a weight used as ``w.t()`` (every Linear) then gets its gradient back
    C-contiguous, which ``.grad`` keeps without a copy and the optimizer reads at full speed.
    Only ``mat2``'s strides are read, so ``mat2`` itself need not be saved."""
    if mat2_strides[0] < mat2_strides[1]:  # column-major
        return grad.mT.mm(mat1).mT
    return mat1.mT.mm(grad)


defop("matmul(Tensor self, Tensor other) -> Tensor", _matmul,
      {"self": _matmul_self, "other": _matmul_other},
      jvp=lambda self_p, self_t, other_p, other_t:
          product(Tensor.matmul, self_p, self_t, other_p, other_t),
      promote=COMMON,
      extra={"node_variants": {(2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 1): "DotBackward0"}},
      samples=lambda rng: [
          sample("mm", rng.standard_normal((3, 4)), rng.standard_normal((4, 2))),
          sample("vv", rng.standard_normal((4,)), rng.standard_normal((4,))),
          sample("mv", rng.standard_normal((3, 4)), rng.standard_normal((4,))),
          sample("vm", rng.standard_normal((4,)), rng.standard_normal((4, 2))),
          sample("batched", rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 2))),
          sample("bcast", rng.standard_normal((2, 1, 3, 4)), rng.standard_normal((3, 4, 2))),
          sample("bv", rng.standard_normal((2, 3, 4)), rng.standard_normal((4,))),
          sample("vb", rng.standard_normal((3,)), rng.standard_normal((2, 3, 4))),
          sample("nc", nc(rng.standard_normal((3, 4))), rng.standard_normal((2, 4)).T)])


def _mm(x, y):
    if x.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if y.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return _matmul(x, y)


defop("mm(Tensor self, Tensor mat2) -> Tensor", _mm,
      {"self": lambda grad, mat2: grad @ mat2.mT,
       "mat2": lambda grad, self, mat2_strides: _weight_grad(self, grad, mat2_strides)},
      jvp=lambda self_p, self_t, mat2_p, mat2_t:
          product(Tensor.mm, self_p, self_t, mat2_p, mat2_t),
      promote=COMMON,
      samples=lambda rng: [sample("2d", rng.standard_normal((3, 4)), rng.standard_normal((4, 5))),
                           sample("nc", rng.standard_normal((4, 3)).T, nc(rng.standard_normal((4, 2))))])


# --- helpers: dtype names, argument checks, LinAlgError ---
class LinAlgError(RuntimeError):
    """Raised when a decomposition or inversion fails (a singular or non-PD input)."""


LinAlgError.__module__ = "ndgrad.linalg"


def _tname(a) -> str:
    """PyTorch's short type name of an array's dtype (``Float``, ``Long``)."""
    return D.SHORT_NAMES[a.dtype]


def _check_float(name: str, a) -> None:
    if a.dtype.kind not in "fc":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got {_tname(a)}")


def _check_square(name: str, a, arg: str = "A") -> None:
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor {arg} must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{name}: {arg} must be batches of square matrices, "
                           f"but they are {a.shape[-2]} by {a.shape[-1]} matrices")


def _batch_prefix(a, flat: int) -> str:
    return f"(Batch element {flat}): " if a.ndim > 2 else ""


def _each_matrix(a):
    """(flat batch index, matrix) for every matrix of a batch."""
    m = a.reshape((-1,) + a.shape[-2:])
    return enumerate(m)


def _zero_pivot(m) -> int:
    """1-based index of the first zero pivot of LU with partial pivoting (0 if none), as getrf."""
    m = m.astype(np.complex128 if m.dtype.kind == "c" else np.float64)
    for k in range(m.shape[0]):
        p = k + int(np.argmax(np.abs(m[k:, k])))
        if m[p, k] == 0:
            return k + 1
        m[[k, p]] = m[[p, k]]
        m[k + 1:, k:] -= np.outer(m[k + 1:, k] / m[k, k], m[k, k:])
    return 0


# --- bmm, addmm, dot, outer ---
def _same_dtype(a, b, msg: str):
    if a.dtype != b.dtype:
        raise RuntimeError(msg.format(_tname(a), _tname(b)))


def _bmm(x, y):
    if x.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if y.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if y.shape[:2] != (x.shape[0], x.shape[2]):
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{x.shape[0]}, {x.shape[2]}] but got: [{y.shape[0]}, {y.shape[1]}].")
    _same_dtype(x, y, "expected scalar type {} but found {}")
    if type(x) is not _nd and _cublas.capturing[0]:  # a CUDA-graph capture (see _matmul)
        return _cublas.matmul(x, y)
    return np.matmul(x, y)


defop("bmm(Tensor self, Tensor mat2) -> Tensor", _bmm,
      {"self": lambda grad, mat2: grad.bmm(mat2.mT), "mat2": lambda grad, self: self.mT.bmm(grad)},
      jvp=lambda self_p, self_t, mat2_p, mat2_t:
          product(Tensor.bmm, self_p, self_t, mat2_p, mat2_t),
      samples=lambda rng: [
          sample("3d", rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))),
          sample("nc", nc(rng.standard_normal((2, 3, 4))), rng.standard_normal((2, 5, 4)).transpose(0, 2, 1)),
          sample("empty_batch", rng.standard_normal((0, 3, 4)), rng.standard_normal((0, 4, 2))),
          sample("int", np.arange(24).reshape(2, 3, 4), np.arange(16).reshape(2, 4, 2))])


def _addmm(x, m1, m2, beta, alpha):
    for arg, m in (("mat1", m1), ("mat2", m2)):
        if m.ndim != 2:
            raise RuntimeError(f"{arg} must be a matrix, got {m.ndim}-D tensor")
    _same_dtype(m1, m2, "mat1 and mat2 must have the same dtype, but got {} and {}")
    _same_dtype(x, m2, "self and mat2 must have the same dtype, but got {} and {}")
    prod = _matmul(m1, m2)
    if x.ndim > 2:
        raise RuntimeError(f"expand(ndgrad.{D._FROM_NP[x.dtype].legacy}{{{list(x.shape)}}}, size={list(prod.shape)}): "
                           f"the number of sizes provided (2) must be greater or equal to the number of "
                           f"dimensions in the tensor ({x.ndim})")
    try:
        x = np.broadcast_to(x, prod.shape)
    except ValueError:
        d = next(i for i in range(-1, -x.ndim - 1, -1) if x.shape[i] not in (1, prod.shape[i]))
        raise RuntimeError(
            f"The expanded size of the tensor ({prod.shape[d]}) must match the existing size ({x.shape[d]}) "
            f"at non-singleton dimension {d + 2}.  Target sizes: {list(prod.shape)}.  "
            f"Tensor sizes: {list(x.shape)}") from None
    if alpha != 1:
        prod *= alpha
    if beta == 0:  # NOTE(pytorch): beta=0 ignores self, so nan/inf in it do not propagate
        return prod
    if beta == 1 and prod.ndim == 2 and prod.dtype == x.dtype:
        prod += x  # prod is fresh: add the bias in place (every Linear layer)
        return prod
    return prod + (x if beta == 1 else beta * x)


def _scaled(g, s):
    return g if s == 1 else g * s


def _addmm_jvp(self_t, mat1_p, mat1_t, mat2_p, mat2_t, beta, alpha):
    r = product(Tensor.mm, mat1_p, mat1_t, mat2_p, mat2_t)
    r = None if r is None else _scaled(r, alpha)
    return r if self_t is None or beta == 0 else plus(r, _scaled(self_t, beta))


defop("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", _addmm,
      # self's gradient summed here, before the products push grad out of the caches (a bias's
      # gradient, 3x faster than when the engine reduces it afterwards)
      {"self": lambda grad, self_shape, beta: _scaled(grad.sum_to_size(self_shape), beta),
       "mat1": lambda grad, mat2, alpha: _scaled(grad.mm(mat2.mT), alpha),
       "mat2": lambda grad, mat1, mat2_strides, alpha: _scaled(_weight_grad(mat1, grad, mat2_strides), alpha)},
      jvp=_addmm_jvp,
      samples=lambda rng: [
          sample("2d", rng.standard_normal((3, 5)), rng.standard_normal((3, 4)), rng.standard_normal((4, 5))),
          sample("bcast", rng.standard_normal((5,)), rng.standard_normal((3, 4)), rng.standard_normal((4, 5))),
          sample("bcast_col", rng.standard_normal((3, 1)), nc(rng.standard_normal((3, 4))),
                 rng.standard_normal((5, 4)).T),
          sample("0d", rng.standard_normal(()), rng.standard_normal((2, 3)), rng.standard_normal((3, 2))),
          sample("scaled", rng.standard_normal((3, 5)), rng.standard_normal((3, 4)),
                 rng.standard_normal((4, 5)), beta=0.5, alpha=-2.0),
          sample("beta0", rng.standard_normal((3, 5)), rng.standard_normal((3, 4)),
                 rng.standard_normal((4, 5)), beta=0, alpha=2)])


def _dot(x, y):
    if x.ndim != 1 or y.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {x.ndim}D and {y.ndim}D tensors")
    if x.shape[0] != y.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{x.shape[0]}] and src [{y.shape[0]}] "
                           f"to have the same number of elements, but got {x.shape[0]} and {y.shape[0]} "
                           "elements respectively")
    _same_dtype(x, y, "dot : expected both vectors to have same dtype, but found {} and {}")
    if type(x) is not _nd and _cublas.capturing[0]:  # a CUDA-graph capture (see _matmul)
        return _cublas.matmul(x, y)
    return np.dot(x, y)


defop("dot(Tensor self, Tensor tensor) -> Tensor", _dot,
      {"self": lambda grad, tensor: grad * tensor, "tensor": lambda grad, self: grad * self},
      jvp=lambda self_p, self_t, tensor_p, tensor_t:
          product(Tensor.dot, self_p, self_t, tensor_p, tensor_t),
      samples=lambda rng: [sample("1d", rng.standard_normal((5,)), rng.standard_normal((5,))),
                           sample("nc", nc(rng.standard_normal((4,))), rng.standard_normal((4,))),
                           sample("int", np.arange(4), np.arange(4) + 1)])


def _mv(x, y):
    if x.ndim != 2 or y.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {x.ndim}, {y.ndim}")
    if x.shape[1] != y.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({x.shape[0]}), mat ({x.shape[0]}x{x.shape[1]}), "
                           f"vec ({y.shape[0]})")
    if x.dtype != y.dtype:  # NOTE(pytorch): named after addmv, the kernel mv runs on
        r = D.SHORT_NAMES[np.result_type(x, y)]
        raise RuntimeError("addmv input tensors must have the same dtype, but got "
                           f"{r}, {_tname(x)}, and {_tname(y)}")
    return _matmul(x, y)


defop("mv(Tensor self, Tensor vec) -> Tensor", _mv,
      {"self": lambda grad, vec: grad.unsqueeze(-1) * vec, "vec": lambda grad, self: self.mT.mv(grad)},
      jvp=lambda self_p, self_t, vec_p, vec_t: product(Tensor.mv, self_p, self_t, vec_p, vec_t),
      samples=lambda rng: [sample("2d", rng.standard_normal((3, 4)), rng.standard_normal((4,))),
                           sample("nc", nc(rng.standard_normal((4, 3))), nc(rng.standard_normal((3,))))])


def _outer(x, y):
    for arg, v in (("self", x), ("vec2", y)):
        if v.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {arg}, but got {v.ndim}-D")
    return np.multiply.outer(x, y)


defop("outer(Tensor self, Tensor vec2) -> Tensor", _outer,
      {"self": lambda grad, vec2: grad.matmul(vec2), "vec2": lambda grad, self: self.matmul(grad)},
      jvp=lambda self_p, self_t, vec2_p, vec2_t:
          product(Tensor.outer, self_p, self_t, vec2_p, vec2_t),
      promote=COMMON, node_name="MulBackward0",
      samples=lambda rng: [sample("1d", rng.standard_normal((3,)), rng.standard_normal((4,))),
                           sample("nc", nc(rng.standard_normal((3,))), rng.standard_normal((2,))),
                           sample("int_float", np.arange(3), rng.standard_normal((2,)))])


# --- einsum ---
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _einsum_terms(eq: str, nops: int):
    """Split an equation into operand terms and the output term (None when implicit)."""
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > nops:
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < nops:
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    pos = 0
    parsed = []
    for k, term in enumerate(terms + ([rhs] if arrow else [])):
        labels, ell, i = [], None, 0
        who = f"operand {k}" if k < nops else "output"
        while i < len(term):
            ch = term[i]
            if ch == ".":
                if term[i:i + 3] != "...":
                    raise RuntimeError(f"einsum(): found '.' for {who} that is not part of any ellipsis")
                if ell is not None:
                    raise RuntimeError(f"einsum(): found '.' for {who} for which an ellipsis was already found")
                ell = len(labels)
                i += 3
                continue
            if ch not in _LETTERS and ch != " ":
                raise RuntimeError(f"einsum(): invalid subscript given at index {pos + i} in the equation "
                                   "string, subscripts must be in [a-zA-Z]")
            if ch != " ":
                labels.append(ch)
            i += 1
        parsed.append((labels, ell))
        pos += len(term) + (1 if k < len(terms) - 1 else 2)
    return parsed[:nops], (parsed[nops] if arrow else None)


@functools.lru_cache(maxsize=512)
def _einsum_plan(eq: str, shapes: tuple):
    """Normalise an equation for these operand shapes: ellipses become fresh letters.

    Returns ``(ins, out, sizes)``: one label string per operand, the output labels and the size of
    every label after broadcasting."""
    terms, out_term = _einsum_terms(eq, len(shapes))
    used = set(eq)
    fresh = [c for c in _LETTERS if c not in used]
    n_ell = 0
    for k, ((labels, ell), shape) in enumerate(zip(terms, shapes, strict=True)):
        if ell is None and len(labels) != len(shape):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(labels)}) does not "
                               f"match the number of dimensions ({len(shape)}) for operand {k} and no "
                               "ellipsis was given")
        if ell is not None and len(labels) > len(shape):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(labels)}) is more "
                               f"than the number of dimensions ({len(shape)}) for operand {k}")
        if ell is not None:
            n_ell = max(n_ell, len(shape) - len(labels))
    ell_labels = "".join(fresh[:n_ell])
    ins, sizes = [], {}
    for k, ((labels, ell), shape) in enumerate(zip(terms, shapes, strict=True)):
        if ell is not None:
            d = len(shape) - len(labels)
            labels = labels[:ell] + list(ell_labels[n_ell - d:]) + labels[ell:]
        seen = {}
        for lab, n in zip(labels, shape, strict=True):
            if lab in seen and seen[lab] != n:
                raise RuntimeError(f"einsum(): subscript {lab} is repeated for operand {k} but the sizes "
                                   f"don't match, {n} != {seen[lab]}")
            seen[lab] = n
            old = sizes.get(lab, 1)
            if n != 1 and old != 1 and n != old:
                if lab in ell_labels:
                    raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes "
                                       f"(original->remapped): {list(shape)}")
                raise RuntimeError(f"einsum(): subscript {lab} has size {n} for operand {k} which does not "
                                   f"broadcast with previously seen size {old}")
            sizes[lab] = max(old, n) if n else 0
        ins.append("".join(labels))
    if out_term is None:  # implicit output: the ellipsis, then labels seen once, sorted
        counts = collections.Counter("".join("".join(labels) for labels, _ in terms))
        out = ell_labels + "".join(sorted(c for c, n in counts.items() if n == 1))
    else:
        labels, ell = out_term
        for lab in labels:
            if labels.count(lab) > 1:
                raise RuntimeError(f"einsum(): output subscript {lab} appears more than once in the output")
            if lab not in sizes:
                raise RuntimeError(f"einsum(): output subscript {lab} does not appear in the equation for "
                                   "any input operand")
        out = "".join(labels if ell is None else labels[:ell] + list(ell_labels) + labels[ell:])
    return tuple(ins), out, sizes


def _einsum(equation, tensors):
    for t in tensors[1:]:
        if t.dtype != tensors[0].dtype:
            raise RuntimeError(f"expected scalar type {_tname(tensors[0])} but found {_tname(t)}")
    ins, out, _ = _einsum_plan(equation, tuple(t.shape for t in tensors))
    res = np.einsum(",".join(ins) + "->" + out, *tensors, optimize=len(tensors) > 2)
    if any(np.may_share_memory(res, t) for t in tensors):  # numpy returns views for 'ii->i', 'ij->ji'
        res = res.copy()
    return res


def _einsum_backward(grad, equation, tensors, needs):
    """Each operand's gradient is one more einsum: the other operands and ``grad`` contracted to
    the operand's labels. A repeated label gets an identity matrix (the gradient lives on the
    diagonal); a label that nothing else carries at full size gets a vector of ones."""
    ins, out, sizes = _einsum_plan(equation, tuple(tuple(t.shape) for t in tensors))
    used = set("".join(ins) + out)
    spare = [c for c in _LETTERS if c not in used]
    res = []
    for k, target in enumerate(ins):
        if not needs[k]:
            res.append(None)
            continue
        terms = [ins[j] for j in range(len(ins)) if j != k] + [out]
        ops = [tensors[j] for j in range(len(ins)) if j != k] + [grad]
        shape = tensors[k].shape
        labels, seen = [], {}
        for lab, n in zip(target, shape, strict=True):
            if lab in seen:
                new = spare.pop(0)
                terms.append(lab + new)
                ops.append(_eye(n, dtype=grad.dtype, device=grad.device))
                lab = new
            seen[lab] = n
            labels.append(lab)
        for lab in dict.fromkeys(labels):
            have = max((op.shape[t.index(lab)] for t, op in zip(terms, ops, strict=True) if lab in t), default=0)
            if have < seen[lab]:
                terms.append(lab)
                ops.append(_ones(seen[lab], dtype=grad.dtype, device=grad.device))
        res.append(_einsum_op(",".join(terms) + "->" + "".join(labels), ops))
    return res


def _einsum_jvp(equation, tensors_p, tensors_t):
    """Multilinear: a term per operand with a tangent, the einsum with that operand replaced."""
    r = None
    for i, t in enumerate(tensors_t):
        if t is not None:
            r = plus(r, _einsum_op(equation, [t if j == i else x for j, x in enumerate(tensors_p)]))
    return r


_einsum_op = defop(
    "einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor",
    lambda equation, tensors, path: _einsum(equation, tensors),
    {"tensors": _einsum_backward}, jvp=_einsum_jvp, api=False, method=False, torch="torch.einsum",
    samples=lambda rng: [
        sample("mm", "ij,jk->ik", [rng.standard_normal((2, 3)), rng.standard_normal((3, 4))]),
        sample("implicit", "ij,jk", [rng.standard_normal((2, 3)), nc(rng.standard_normal((3, 4)))]),
        sample("bmm", "bij,bjk->bik", [rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 3, 2))]),
        sample("ellipsis_bcast", "...ij,...jk->...ik",
               [rng.standard_normal((2, 1, 2, 3)), rng.standard_normal((3, 3, 2))]),
        sample("trace", "ii->", [rng.standard_normal((3, 3))]),
        sample("diagonal", "ii->i", [rng.standard_normal((3, 3))]),
        sample("batch_diag", "...ii->...i", [rng.standard_normal((2, 3, 3))]),
        sample("outer", "i,j->ij", [rng.standard_normal((3,)), rng.standard_normal((4,))]),
        sample("sum", "ij->", [rng.standard_normal((3, 4))]),
        sample("row_sum", "ij->i", [rng.standard_normal((3, 4))]),
        sample("transpose", "ij->ji", [rng.standard_normal((3, 4))]),
        sample("bilinear", "i,ij,j->", [rng.standard_normal((3,)), rng.standard_normal((3, 4)),
                                        rng.standard_normal((4,))]),
        sample("bcast_label", "ij,jk->ik", [rng.standard_normal((2, 1)), rng.standard_normal((3, 4))]),
        sample("upper_spaces", "B a, a B", [rng.standard_normal((2, 3)), rng.standard_normal((3, 2))]),
        sample("ellipsis_sum", "i...->i", [rng.standard_normal((2, 3, 2))]),
        sample("int", "ij,j->i", [np.arange(6).reshape(2, 3), np.arange(3)])]).call


def einsum(equation: str, *operands):
    """einsum(equation, *operands) -> Tensor: sums products of operand elements over the indices
    the equation names (Einstein summation); operands may also be given as one list.

    >>> import ndgrad
    >>> ndgrad.einsum("ij,jk->ik", ndgrad.ones(2, 3), ndgrad.ones(3, 2)).tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    return _einsum_op(equation, list(operands))


NAMESPACES[""]["einsum"] = einsum


# --- linalg: inv, det, slogdet, solve ---
def _spd(rng, shape):
    """A well-conditioned matrix (or batch): random plus n times the identity."""
    n = shape[-1]
    return rng.standard_normal(shape) + n * np.eye(n)


def _square_samples(rng):
    return [sample("2d", _spd(rng, (3, 3))),
            sample("batched", _spd(rng, (2, 3, 3))),
            sample("nc", nc(_spd(rng, (3, 3)))),
            sample("T", _spd(rng, (4, 4)).T),
            sample("1x1", _spd(rng, (1, 1))),
            sample("empty_batch", np.zeros((0, 2, 2)))]


def _inv(a):
    _check_square("linalg.inv", a)
    _check_float("linalg.inv", a)
    try:
        with _backend.linalg_errors(a):
            return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        for b, m in _each_matrix(a):
            k = _zero_pivot(m)
            if k:
                raise LinAlgError(f"linalg.inv: {_batch_prefix(a, b)}The diagonal element {k} is zero, the "
                                  "inversion could not be completed because the input matrix is singular.") from None
        raise


_inv_op = defop("linalg_inv(Tensor A) -> Tensor", _inv,
                {"A": lambda grad, result: -(result.mT @ grad @ result.mT)},
                jvp=lambda A_t, result: -(result @ A_t @ result),
                api="linalg.inv", method=False, node_name="LinalgInvExBackward0",
                samples=_square_samples).call


def _det(a):
    _check_square("linalg.det", a)
    _check_float("linalg.det", a)
    return np.linalg.det(a)


# d det(A) = det(A) tr(A^-1 dA): the gradient is grad * det(A) * A^-T (A invertible).
_det_op = defop("linalg_det(Tensor A) -> Tensor", _det,
                {"A": lambda grad, A, result: (grad * result)[..., None, None] * _inv_op(A).mT},
                jvp=lambda A_p, A_t, result: result * (_inv_op(A_p).mT * A_t).sum((-2, -1)),
                api="linalg.det", method=False, node_name="LinalgDetBackward0",
                samples=_square_samples).call

slogdet_result = return_types._structseq("linalg_slogdet", ("sign", "logabsdet"))
return_types.linalg_slogdet = slogdet_result


def _slogdet(a):
    _check_square("linalg.slogdet", a)
    _check_float("linalg.slogdet", a)
    sign, logabsdet = np.linalg.slogdet(a)
    return sign, logabsdet


# The sign is piecewise constant: only logabsdet carries a gradient, grad * A^-T.
_slogdet_rec = defop("linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)", _slogdet,
                     {"A": lambda grads, A: grads[1][..., None, None] * _inv_op(A).mT},
                     jvp=lambda A_p, A_t: (None, (_inv_op(A_p).mT * A_t).sum((-2, -1))),
                     api="linalg.slogdet", method=False, node_name="LinalgSlogdetBackward0",
                     samples=_square_samples)
_slogdet_raw = _slogdet_rec.call


def slogdet(A):
    """linalg.slogdet(A) -> (sign, logabsdet): the sign and the log of the absolute value of the
    determinant of a square matrix (or batch).

    >>> import ndgrad
    >>> round(ndgrad.linalg.slogdet(2 * ndgrad.eye(2)).logabsdet.item(), 4)
    1.3863
    """
    return slogdet_result(*_slogdet_raw(A))


_slogdet_rec.call = slogdet
NAMESPACES["linalg"]["slogdet"] = slogdet

# torch.det / torch.inverse and their Tensor methods are linalg.det / linalg.inv.
defcomposite(lambda input: _det_op(input), name="det", torch="torch.det", samples=_square_samples)
defcomposite(lambda input: _inv_op(input), name="inverse", torch="torch.inverse",
             samples=_square_samples)


def _solve_is_vector(a, b) -> bool:
    """NOTE(pytorch): B is a (batch of) vector(s) when 1-D or when its shape is A's minus the last dim."""
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])


def _solve(a, b, left):
    _check_float("linalg.solve", a)
    _check_square("linalg.solve", a)
    if a.dtype != b.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{_tname(a)} and B of type {_tname(b)} instead")
    vec = left and _solve_is_vector(a, b)
    bm = b[..., None] if vec else b
    n = a.shape[-1]
    if bm.ndim < 2 or (bm.shape[-2] if left else bm.shape[-1]) != n:
        rows, cols = (bm.shape[-2], bm.shape[-1]) if bm.ndim >= 2 else (b.shape[-1], 1)
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {rows}x{cols})")
    try:
        with _backend.linalg_errors(a):
            if left:
                x = np.linalg.solve(a, bm)
            else:
                x = np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(bm, -1, -2)), -1, -2)
    except np.linalg.LinAlgError:
        raise LinAlgError("torch.linalg.solve: The solver failed because the input matrix is singular.") from None
    except ValueError as e:
        try:  # batch dims that do not broadcast: PyTorch's message
            np.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
        except ValueError:
            sa, sb = a.shape[:-2], bm.shape[:-2]
            d = max(len(sa), len(sb))
            sa, sb = (1,) * (d - len(sa)) + sa, (1,) * (d - len(sb)) + sb
            i = next(i for i in range(d - 1, -1, -1) if sa[i] != sb[i] and 1 not in (sa[i], sb[i]))
            raise RuntimeError(f"The size of tensor a ({sb[i]}) must match the size of tensor b ({sa[i]}) "
                               f"at non-singleton dimension {i}") from None
        raise RuntimeError(str(e)) from None
    return x[..., 0] if vec else x


def _solve_backward(grad, A, left, result, needs):
    """X = A^-1 B: gB = A^-T grad, gA = -gB X^T (left); XA = B: gB = grad A^-T, gA = -X^T gB."""
    gB = _solve_op(A.mT, grad, left=left)
    gA = None
    if needs[0]:
        if not left:
            gA = -(result.mT @ gB)
        elif _solve_is_vector(A, grad):
            gA = -(gB[..., :, None] * result[..., None, :])
        else:
            gA = -(gB @ result.mT)
    return gA, (gB if needs[1] else None)


def _solve_jvp(A_p, A_t, B_p, B_t, result, left):
    """dX = A^-1 (dB - dA X) (left); dX = (dB - X dA) A^-1 (right)."""
    rhs = B_t
    if A_t is not None:
        if not left:
            ax = result @ A_t
        elif _solve_is_vector(A_p._data, B_p._data):
            ax = (A_t @ result.unsqueeze(-1)).squeeze(-1)
        else:
            ax = A_t @ result
        rhs = -ax if rhs is None else rhs - ax
    return _solve_op(A_p, rhs, left=left)


_solve_op = defop("linalg_solve(Tensor A, Tensor B, *, bool left=True) -> Tensor", _solve,
                  {("A", "B"): _solve_backward}, jvp=_solve_jvp,
                  api="linalg.solve", method=False, node_name="LinalgSolveExBackward0",
                  samples=lambda rng: [
                      sample("mat", _spd(rng, (3, 3)), rng.standard_normal((3, 2))),
                      sample("vec", _spd(rng, (3, 3)), rng.standard_normal((3,))),
                      sample("batched_vec", _spd(rng, (2, 3, 3)), rng.standard_normal((2, 3))),
                      sample("bcast_vec", _spd(rng, (2, 3, 3)), rng.standard_normal((3,))),
                      sample("bcast_mat", _spd(rng, (2, 3, 3)), nc(rng.standard_normal((3, 3)))),
                      sample("bcast_A", _spd(rng, (3, 3)).T, rng.standard_normal((2, 3, 2))),
                      sample("right", _spd(rng, (3, 3)), rng.standard_normal((2, 3)), left=False),
                      sample("right_batched", _spd(rng, (2, 3, 3)), rng.standard_normal((4, 3)), left=False)]
                  ).call

NAMESPACES["linalg"]["LinAlgError"] = LinAlgError


# --- linalg: cholesky, qr, svdvals ---
def _cholesky(a, upper):
    _check_square("linalg.cholesky", a)
    _check_float("linalg.cholesky", a)
    try:
        with _backend.linalg_errors(a):
            L = np.linalg.cholesky(a)  # reads the lower triangle, as PyTorch does
    except np.linalg.LinAlgError:
        for b, m in _each_matrix(a):
            for k in range(1, m.shape[0] + 1):  # error path only: find the failing leading minor
                try:
                    with _backend.linalg_errors(m):
                        np.linalg.cholesky(m[:k, :k])
                except np.linalg.LinAlgError:
                    raise LinAlgError(
                        f"linalg.cholesky: {_batch_prefix(a, b)}The factorization could not be completed "
                        f"because the input is not positive-definite (the leading minor of order {k} is "
                        "not positive-definite).") from None
        raise
    return np.swapaxes(L, -1, -2).conj() if upper else L


def _cholesky_backward(grad, result, upper):
    """A = L L^T gives L^-1 dA L^-T = P + P^T with P = L^-1 dL lower triangular, so
    gA = L^-T phi(L^T gL) L^-1, phi = lower triangle with the diagonal halved; symmetrised, as the
    input is taken to be symmetric."""
    L, gL = (result.mT, grad.mT) if upper else (result, grad)
    P = L.mT @ gL
    P = 0.5 * (P.tril() + P.tril(-1))
    Linv = _inv_op(L)
    gA = Linv.mT @ P @ Linv
    return 0.5 * (gA + gA.mT)


def _spd_samples(rng):
    def spd(shape):
        b = rng.standard_normal(shape)
        return b @ np.swapaxes(b, -1, -2) + shape[-1] * np.eye(shape[-1])
    return [sample("2d", spd((3, 3))), sample("batched", spd((2, 3, 3))),
            sample("upper", spd((3, 3)), upper=True), sample("nc", nc(spd((3, 3))))]


# NOTE(pytorch): the forward reads only the lower triangle while the gradient is the symmetric
# one (test_ops gradchecks through a symmetrising wrapper), so single-entry finite differences
# cannot match; tests/ops/test_linalg.py gradchecks cholesky(X X^T + n I) instead.
defop("linalg_cholesky(Tensor A, *, bool upper=False) -> Tensor", _cholesky,
      {"A": _cholesky_backward}, api="linalg.cholesky", method=False,
      node_name="LinalgCholeskyExBackward0", gradcheck=False, samples=_spd_samples)

qr_result = return_types._structseq("linalg_qr", ("Q", "R"))
return_types.linalg_qr = qr_result


def _qr(a, mode):
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                           "(default), 'r', or 'complete'")
    if a.ndim < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    _check_float("linalg.qr", a)
    if mode == "r":
        return _backend.namespace_of(a).zeros((0,), a.dtype), np.linalg.qr(a, mode="r")
    return np.linalg.qr(a, mode=mode)


def _qr_backward(grads, A_shape, mode, Q, R):
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                           "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
                           "through linalg.qr.")
    gQ, gR = grads
    m, n = A_shape[-2], A_shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    if m >= n:
        return _qr_tall_backward(gQ, gR, Q, R)
    # Wide A = [X | Y], R = [U | V], Y = Q V: Q and U come from X alone, V = Q^T Y.
    U, V, gU, gV = R[..., :m], R[..., m:], gR[..., :m], gR[..., m:]
    Y = Q @ V
    gX = _qr_tall_backward(gQ + Y @ gV.mT, gU, Q, U)
    return cat([gX, Q @ gV], -1)


def _qr_tall_backward(gQ, gR, Q, R):
    """A = QR, Q^T Q = I, R upper: with M = R gR^T - gQ^T Q, gA = (gQ + Q sym(M)) R^-T, where
    sym(M) copies M's strict lower triangle onto the upper one."""
    M = R @ gR.mT - gQ.mT @ Q
    low = M.tril(-1)
    sym = low + low.mT + (M - M.tril(-1) - M.triu(1))
    X = gQ + Q @ sym
    return _solve_op(R, X.mT).mT


def _qr_samples(rng):
    return [sample("tall", rng.standard_normal((4, 3))),
            sample("square", rng.standard_normal((3, 3))),
            sample("batched", rng.standard_normal((2, 4, 2))),
            sample("nc", nc(rng.standard_normal((4, 3)))),
            sample("wide", rng.standard_normal((2, 4))),
            sample("complete_square", rng.standard_normal((3, 3)), "complete"),
            sample("complete_tall", rng.standard_normal((4, 2)), "complete", no_grad=(0,)),
            sample("r", rng.standard_normal((4, 3)), mode="r", no_grad=(0,))]


_qr_rec = defop("linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)", _qr,
                {"A": _qr_backward}, api="linalg.qr", method=False, node_name="LinalgQrBackward0",
                samples=_qr_samples)
_qr_raw = _qr_rec.call


def qr(A, mode: str = "reduced"):
    """linalg.qr(A, mode='reduced') -> (Q, R): the QR decomposition of a matrix (or batch).

    >>> import ndgrad
    >>> Q, R = ndgrad.linalg.qr(ndgrad.eye(2))
    >>> R.abs().tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    return qr_result(*_qr_raw(A, mode))


_qr_rec.call = qr
NAMESPACES["linalg"]["qr"] = qr


def _svd_backward(grads, U, S, Vh):
    """Reduced real SVD (Townsend, "Differentiating the singular value decomposition"):
    gA = U [F o (U^T gU - gU^T U) S + diag(gS) + S F o (V^T gV - gV^T V)] V^T
         + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T),  F_ij = 1 / (s_j^2 - s_i^2), F_ii = 0.
    Needs distinct, nonzero singular values."""
    gU, gS, gVh = grads
    V, gV = Vh.mT, gVh.mT
    k = S.shape[-1]
    eye = _eye(k, dtype=S.dtype, device=S.device)  # a factory op: a capture sees it
    s2 = S * S
    F = (s2[..., None, :] - s2[..., :, None] + eye).reciprocal() * (1 - eye)
    J = F * (U.mT @ gU - gU.mT @ U)
    K = F * (V.mT @ gV - gV.mT @ V)
    Sm = S[..., None, :]  # right-multiplying by diag(S) scales columns
    inner = J * Sm + gS.diag_embed() + S[..., :, None] * K
    gA = U @ inner @ Vh
    Sinv = S.reciprocal()[..., None, :]
    gA = gA + (gU - U @ (U.mT @ gU)) * Sinv @ Vh
    gA = gA + U @ ((Sinv.mT * gV.mT) - (Sinv.mT * gV.mT) @ V @ Vh)
    return gA


# Reduced SVD with a backward for all three outputs: what svdvals' formula differentiates
# through, so that its double backward works.
_svd_uv = defop("_linalg_svd(Tensor A) -> (Tensor U, Tensor S, Tensor Vh)",
                lambda a: np.linalg.svd(a, full_matrices=False),
                {"A": _svd_backward}, api=False, method=False, node_name="LinalgSvdBackward0").call


def _svdvals(a):
    if a.ndim < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    _check_float("linalg.svd", a)
    return np.linalg.svd(a, compute_uv=False)


def _svdvals_backward(grad, A):
    """dS_i = u_i^T dA v_i, so gA = U diag(gS) V^T (U, V recomputed, differentiable)."""
    U, _, Vh = _svd_uv(A)
    return (U * grad[..., None, :]) @ Vh


defop("linalg_svdvals(Tensor A) -> Tensor", _svdvals, {"A": _svdvals_backward},
      api="linalg.svdvals", method=False, node_name="LinalgSvdBackward0",
      samples=lambda rng: [sample("tall", rng.standard_normal((4, 3))),
                           sample("wide", rng.standard_normal((2, 4))),
                           sample("square", rng.standard_normal((3, 3))),
                           sample("batched", rng.standard_normal((2, 3, 2))),
                           sample("nc", nc(rng.standard_normal((3, 4))))])


# --- linalg.svd, svd ---
def _svd(a, full_matrices, driver):
    if a.ndim < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    _check_float("linalg.svd", a)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA "
                           "inputs with cuSOLVER backend.")
    return np.linalg.svd(a, full_matrices=full_matrices)


def _linalg_svd_backward(grads, U, S, Vh):
    """The reduced SVD's gradient; with full_matrices, the columns past k = min(m, n) of U (rows
    of Vh) do not enter it, as in PyTorch (their gradients are dropped)."""
    if U.is_complex():  # the phase gauge term and conjugate transposes are not written yet
        raise NotImplementedError("ndgrad: the gradient of linalg.svd for complex inputs is not "
                                  "implemented")
    k = S.shape[-1]
    gU, gS, gVh = grads
    if U.shape[-1] != k:
        U, gU = U[..., :k], gU[..., :k]
    if Vh.shape[-2] != k:
        Vh, gVh = Vh[..., :k, :], gVh[..., :k, :]
    return _svd_backward((gU, gS, gVh), U, S, Vh)


svd_result = return_types._structseq("linalg_svd", ("U", "S", "Vh"))
return_types.linalg_svd = svd_result
_linalg_svd_rec = defop(
    "linalg_svd(Tensor A, bool full_matrices=True, *, str? driver=None) -> (Tensor U, Tensor S, Tensor Vh)",
    _svd, {"A": lambda grads, U, S, Vh: _linalg_svd_backward(grads, U, S, Vh)},
    # No generic oracle: LAPACK builds pick other signs for the singular vectors of non-square
    # inputs; tests/ops/test_missing_ops.py compares with torch up to those signs.
    api=False, method=False,
    samples=lambda rng: [sample("tall", rng.standard_normal((4, 3)), False),
                         sample("wide", rng.standard_normal((2, 4)), False),
                         sample("square_full", rng.standard_normal((3, 3))),
                         sample("batched_nc", nc(rng.standard_normal((2, 3, 2))), False)])


def linalg_svd(A, full_matrices=True, *, driver=None, out=None):
    """``torch.linalg.svd``: ``A = U diag(S) Vh``, singular values in descending order."""
    if out is not None:
        return write_out("linalg_svd", lambda: linalg_svd(A, full_matrices, driver=driver), (A,), out)
    return svd_result(*_linalg_svd_rec.call(A, full_matrices, driver=driver))


NAMESPACES["linalg"]["svd"] = linalg_svd
svd_old_result = return_types._structseq("svd", ("U", "S", "V"))
return_types.svd = svd_old_result


def svd(input, some=True, compute_uv=True, *, out=None):
    """``torch.svd`` (deprecated in PyTorch for ``linalg.svd``): ``(U, S, V)`` with V not
    transposed; ``compute_uv=False`` gives zero-filled full U and V."""
    if out is not None:
        return write_out("svd", lambda: svd(input, some, compute_uv), (input,), out)
    if input.dim() < 2:
        raise RuntimeError(f"linalg.svd: input should have at least 2 dimensions, but has "
                           f"{input.dim()} dimensions instead")
    if not compute_uv:
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        S = NAMESPACES["linalg"]["svdvals"](input)
        return svd_old_result(input.new_zeros(batch + (m, m)), S, input.new_zeros(batch + (n, n)))
    U, S, Vh = _linalg_svd_rec.call(input, not some)
    return svd_old_result(U, S, Vh.mT)


defcomposite(svd, samples=lambda rng: [sample("square", rng.standard_normal((3, 3))),
                                       sample("full", rng.standard_normal((3, 3)), False),
                                       sample("no_uv", rng.standard_normal((4, 3)), True, False),
                                       sample("batched", rng.standard_normal((2, 2, 2)))])


# --- cross products ---
def _linalg_cross(x, y, dim):
    if x.ndim != y.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = _wrap_dim(dim, x.ndim)
    if x.shape[d] != 3 or y.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{x.shape[d]} and {y.shape[d]}")
    if x.dtype != y.dtype:
        raise RuntimeError(f"expected scalar type {_tname(x)} but found {_tname(y)}")
    return np.cross(x, y, axis=d)


defop("linalg_cross(Tensor self, Tensor other, *, int dim=-1) -> Tensor", _linalg_cross,
      {"self": lambda grad, other, dim: linalg_cross(other, grad, dim=dim),
       "other": lambda grad, self, dim: linalg_cross(grad, self, dim=dim)},
      jvp=lambda self_p, self_t, other_p, other_t, dim: plus(
          None if self_t is None else linalg_cross(self_t, other_p, dim=dim),
          None if other_t is None else linalg_cross(self_p, other_t, dim=dim)),
      api="linalg.cross", method=False,
      samples=lambda rng: [sample("last", rng.standard_normal((4, 3)), rng.standard_normal((4, 3))),
                           sample("dim0_nc", nc(rng.standard_normal((3, 4))),
                                  rng.standard_normal((3, 4)), dim=0),
                           sample("bcast", rng.standard_normal((2, 1, 3)),
                                  rng.standard_normal((1, 4, 3))),
                           sample("1d", rng.standard_normal(3), rng.standard_normal(3))])
linalg_cross = NAMESPACES["linalg"]["cross"]


def cross(input, other, dim=None, *, out=None):
    """``torch.cross``: the cross product along ``dim``; without ``dim``, along the first
    dimension of size 3 (deprecated in PyTorch, with its warning)."""
    if out is not None:
        return write_out("cross", lambda: cross(input, other, dim), (input, other), out)
    if dim is None:
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the "
            "dim explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to "
            "agree with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        if input.dim() != other.dim():
            raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
        shape = [max(a, b) for a, b in zip(input.shape, other.shape, strict=True)]
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=dim)


defcomposite(cross, samples=lambda rng: [
    sample("dim", rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), 0),
    sample("default", rng.standard_normal((2, 3)), rng.standard_normal((2, 3)))])


def vdot(input, other):
    """The dot product of two 1-D tensors, the first conjugated (``input`` is not for real ones)."""
    if input.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.dim()}D and {other.dim()}D tensors")
    return (input.conj() if input.is_complex() else input).dot(other)


defcomposite(vdot, samples=lambda rng: [
    sample("real", rng.standard_normal(4), rng.standard_normal(4)),
    sample("complex", rng.standard_normal(3) + 1j * rng.standard_normal(3),
           rng.standard_normal(3) - 1j * rng.standard_normal(3))])


# --- linalg: matrix and general norms, vecdot, multi_dot ---
_MATRIX_ORDS = ("fro", "nuc", float("inf"), float("-inf"), 1, -1, 2, -2)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """``torch.linalg.matrix_norm``: Frobenius, nuclear, max/min absolute column (1, -1) or row
    (inf, -inf) sum, largest or smallest singular value (2, -2), over the two dims ``dim``."""
    if out is not None:
        return write_out("linalg_matrix_norm", lambda: matrix_norm(A, ord, dim, keepdim, dtype=dtype), (A,), out)
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if isinstance(ord, str) and ord not in ("fro", "nuc"):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if not isinstance(ord, str) and ord not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    dim = tuple(dim)
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(str(d) for d in dim)}")
    d0, d1 = (_wrap_dim(d, A.dim()) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if dtype is not None:
        A = A.to(dtype)
    vector_norm = NAMESPACES["linalg"]["vector_norm"]
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):  # from the singular values, dims moved last
        rest = [d for d in range(A.dim()) if d not in (d0, d1)]
        s = NAMESPACES["linalg"]["svdvals"](A.permute(rest + [d0, d1]))
        r = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            for d in sorted((d0, d1)):
                r = r.unsqueeze(d)
        return r
    # 1 / -1: column sums (over rows, d0); inf / -inf: row sums (over columns, d1)
    over, then = (d0, d1) if abs(ord) == 1 else (d1, d0)
    sums = A.abs().sum(over, keepdim=True)
    r = sums.amax(then, keepdim=True) if ord > 0 else sums.amin(then, keepdim=True)
    return r if keepdim else r.squeeze((d0, d1))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """``torch.linalg.norm``: a vector norm over one dim (or the flattened tensor), a matrix norm
    over two; without ``dim``, ``ord`` decides from ``A``'s dims (1-D vector, 2-D matrix)."""
    if out is not None:
        return write_out("linalg_norm", lambda: norm(A, ord, dim, keepdim, dtype=dtype), (A,), out)
    vector_norm = NAMESPACES["linalg"]["vector_norm"]
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            if isinstance(ord, str):
                raise RuntimeError(f"linalg.vector_norm: Order {ord} not supported.")
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.dim() == 1 and not isinstance(ord, str):
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.dim() in (1, 2):  # (a string order is a matrix norm's: a 1-D input is refused there)
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                       f"{A.dim()}D.")


def vecdot(x, y, *, dim=-1, out=None):
    """``torch.linalg.vecdot``: ``sum(x.conj() * y, dim)`` (the conjugate only for complex ``x``)."""
    if out is not None:
        return write_out("linalg_vecdot", lambda: vecdot(x, y, dim=dim), (x, y), out)
    return ((x.conj() if x.is_complex() else x) * y).sum(dim)


def multi_dot(tensors, *, out=None):
    """``torch.linalg.multi_dot``: the product of a chain of matrices (the first may be a row
    vector, the last a column vector) in the order that needs the fewest multiplications."""
    if out is not None:
        return write_out("linalg_multi_dot", lambda: multi_dot(tensors), tuple(tensors), out)
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    ts = list(tensors)
    for i, t in enumerate(ts):
        ok = t.dim() == 2 or (t.dim() == 1 and i in (0, n - 1))
        if not ok:
            where = "first" if i == 0 else "last" if i == n - 1 else None
            if where is not None:
                raise RuntimeError(f"multi_dot(): the {where} tensor must be 1D or 2D but got {t.dim()}D")
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.dim()}D")
    first_1d, last_1d = ts[0].dim() == 1, ts[-1].dim() == 1
    if first_1d:
        ts[0] = ts[0].unsqueeze(0)
    if last_1d:
        ts[-1] = ts[-1].unsqueeze(-1)
    for i in range(n - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and "
                f"{list(tensors[i + 1].shape)} cannot be multiplied")
    if n == 2:
        out = ts[0] @ ts[1]
    else:
        # the matrix-chain order: cost[i][j] of the cheapest product of ts[i..j], split[i][j]
        p = [ts[0].shape[0]] + [t.shape[1] for t in ts]
        cost = [[0] * n for _ in range(n)]
        split = [[0] * n for _ in range(n)]
        for length in range(1, n):
            for i in range(n - length):
                j = i + length
                cost[i][j] = None
                for k in range(i, j):
                    c = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                    if cost[i][j] is None or c < cost[i][j]:
                        cost[i][j], split[i][j] = c, k

        def product(i, j):
            if i == j:
                return ts[i]
            k = split[i][j]
            return product(i, k) @ product(k + 1, j)

        out = product(0, n - 1)
    if first_1d:
        out = out.squeeze(0)
    if last_1d:
        out = out.squeeze(-1)
    return out


defcomposite(matrix_norm, api="linalg.matrix_norm", method=False, samples=lambda rng: [
    sample(f"ord_{o}", rng.standard_normal((3, 4)), o) for o in ("fro", "nuc", 1, -1, 2, -2)] + [
    sample("inf_batched", rng.standard_normal((2, 3, 4)), float("inf")),
    sample("minf_dims_keep", nc(rng.standard_normal((3, 4, 2))), float("-inf"), (0, 2), True),
    sample("nuc_dims", rng.standard_normal((2, 3, 3)), "nuc", (2, 0))])
defcomposite(norm, name="linalg_norm", api="linalg.norm", method=False, samples=lambda rng: [
    sample("flat", rng.standard_normal((2, 3, 4))), sample("vector_ord3", rng.standard_normal(5), 3),
    sample("matrix_ord1", rng.standard_normal((3, 4)), 1), sample("dim1", rng.standard_normal((3, 4)), 1.5, 1),
    sample("dims_nuc_keep", rng.standard_normal((2, 3, 4)), "nuc", (1, 2), True)])
defcomposite(vecdot, name="linalg_vecdot", api="linalg.vecdot", method=False, samples=lambda rng: [
    sample("last", rng.standard_normal((3, 4)), rng.standard_normal((3, 4))),
    sample("dim0_bcast", rng.standard_normal((3, 1)), rng.standard_normal((3, 2)), dim=0),
    sample("complex", rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3)),
           rng.standard_normal((2, 3)) - 1j * rng.standard_normal((2, 3)))])
defcomposite(multi_dot, name="linalg_multi_dot", api="linalg.multi_dot", method=False, samples=lambda rng: [
    sample("two", [rng.standard_normal((3, 4)), rng.standard_normal((4, 2))]),
    sample("four", [rng.standard_normal((5, 2)), rng.standard_normal((2, 6)), rng.standard_normal((6, 3)),
                    rng.standard_normal((3, 4))]),
    sample("vectors", [rng.standard_normal(3), rng.standard_normal((3, 4)), rng.standard_normal((4, 2)),
                       rng.standard_normal(2)])])


# --- linalg.eigh, eigvalsh: the symmetric (Hermitian) eigendecomposition ---
def _eigh(a, UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    _check_square("linalg.eigh", a)
    if a.dtype.kind not in "fc":
        raise RuntimeError(f'"linalg_eigh_cpu" not implemented for \'{_tname(a).replace("Tensor", "")}\'')
    return np.linalg.eigh(a, UPLO)  # eigenvalues ascending, from the one triangle


def _eigh_backward(grads, L, V):
    """gA = V (diag(gL) + skew(V^T gV) / E) V^T, E_ij = l_j - l_i (PyTorch's: the input is taken
    to be symmetric, the gradient is not symmetrised). Needs distinct eigenvalues."""
    if V.is_complex():
        raise NotImplementedError("ndgrad: the gradient of linalg.eigh for complex inputs is not implemented")
    gL, gV = grads
    k = L.shape[-1]
    eye = _eye(k, dtype=L.dtype, device=L.device)
    E = L[..., None, :] - L[..., :, None] + eye  # (the skew part's diagonal is zero)
    VtgV = V.mT @ gV
    inner = 0.5 * (VtgV - VtgV.mT) / E + gL.diag_embed()
    return V @ inner @ V.mT


eigh_result = return_types._structseq("linalg_eigh", ("eigenvalues", "eigenvectors"))
return_types.linalg_eigh = eigh_result
_eigh_rec = defop(
    "linalg_eigh(Tensor A, str UPLO=\"L\") -> (Tensor eigenvalues, Tensor eigenvectors)", _eigh,
    {"A": lambda grads, eigenvalues, eigenvectors: _eigh_backward(grads, eigenvalues, eigenvectors)},
    # No generic oracle (LAPACK builds may pick other signs for the eigenvectors) and no generic
    # gradcheck (only one triangle is read): tests/ops/test_linalg.py checks both on symmetric input.
    api=False, method=False, node_name="LinalgEighBackward0", gradcheck=False,
    samples=lambda rng: [sample("sym", _sym(rng, 3)), sample("upper", _sym(rng, 3), "U"),
                         sample("batched", np.stack([_sym(rng, 2), _sym(rng, 2)]))])


def _sym(rng, n):
    a = rng.standard_normal((n, n))
    return a + a.T


def linalg_eigh(A, UPLO="L", *, out=None):
    """``torch.linalg.eigh``: eigenvalues (ascending) and orthonormal eigenvectors of a symmetric
    (Hermitian) matrix, read from its lower (``UPLO="L"``) or upper triangle."""
    if out is not None:
        return write_out("linalg_eigh", lambda: linalg_eigh(A, UPLO), (A,), out)
    return eigh_result(*_eigh_rec.call(A, UPLO))


NAMESPACES["linalg"]["eigh"] = linalg_eigh


def _eigvalsh(a, UPLO):
    return _eigh(a, UPLO)[0]


defop("linalg_eigvalsh(Tensor A, str UPLO=\"L\") -> Tensor", _eigvalsh,
      # dL_i = v_i^T dA v_i: gA = V diag(gL) V^T (V recomputed, differentiable)
      {"A": lambda grad, A, UPLO: (lambda V: (V * grad[..., None, :]) @ V.mT)(_eigh_rec.call(A, UPLO)[1])},
      api="linalg.eigvalsh", method=False, node_name="LinalgEighBackward0", gradcheck=False,
      samples=lambda rng: [sample("sym", _sym(rng, 3)), sample("upper", _sym(rng, 4), "U"),
                           sample("batched_nc", nc(np.stack([_sym(rng, 3), _sym(rng, 3)])))])


# --- linalg: pinv, matrix_rank, solve_triangular, cholesky_ex, inv_ex, lstsq ---
def _cutoff(s, shape, atol, rtol):
    """PyTorch's singular-value cutoff for singular values ``s`` (an array, last dim) of a matrix
    of ``shape``: max(atol, rtol * largest), rtol defaulting to eps * max(m, n) when neither is
    given (0 when only atol is)."""
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else np.finfo(s.dtype).eps * max(shape[-2:])
    tol = (s.max(-1, keepdims=True) if s.shape[-1] else np.zeros(s.shape[:-1] + (1,), s.dtype)) * rtol
    return np.maximum(tol, atol) if atol is not None else tol


def _tolerance(S, A, atol, rtol):
    """``_cutoff`` of the (detached) singular values ``S`` of ``A``, as a tensor."""
    return Tensor._make(_cutoff(S._data, A.shape, atol, rtol), None, 0, None)


def _pinv(a, atol, rtol, hermitian):
    _check_float("linalg.pinv", a)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    tol = _cutoff(s, a.shape, atol, rtol)
    keep = s > tol
    s_inv = np.where(keep, 1 / np.where(keep, s, 1), 0)
    return np.matmul(np.swapaxes(vh, -1, -2).conj() * s_inv[..., None, :], np.swapaxes(u, -1, -2).conj())


def _pinv_backward(G, P, A):
    """The gradient of the pseudo-inverse at constant rank (dP = -P dA P + P P^T dA^T (I - A P)
    + (I - P A) dA^T P^T P): gA = -P^T G P^T + (I - A P) G^T P P^T + P^T P G^T (I - P A)."""
    if P.is_complex():
        raise NotImplementedError("ndgrad: the gradient of linalg.pinv for complex inputs is not implemented")
    Pt, Gt = P.mT, G.mT
    return -(Pt @ G @ Pt) + (Gt - A @ (P @ Gt)) @ (P @ Pt) + (Pt @ P) @ (Gt - (Gt @ P) @ A)


_pinv_rec = defop(
    "linalg_pinv(Tensor A, *, float? atol=None, float? rtol=None, bool hermitian=False) -> Tensor", _pinv,
    {"A": lambda grad, A, result: _pinv_backward(grad, result, A)},
    api=False, method=False, node_name="LinalgPinvBackward0",
    # (the gradient is the constant-rank one, PyTorch's: samples that drop a singular value
    # are compared with torch in tests/ops/test_linalg.py, not gradchecked)
    samples=lambda rng: [sample("tall", rng.standard_normal((4, 3))),
                         sample("wide_batched", rng.standard_normal((2, 2, 5))),
                         sample("rtol", rng.standard_normal((4, 3)), rtol=1e-6),
                         sample("atol", rng.standard_normal((3, 3)), atol=1e-3)])


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """``torch.linalg.pinv``: the Moore-Penrose pseudo-inverse from the SVD (singular values at or
    below max(atol, rtol * largest) treated as zero); ``rcond`` is the older name of ``rtol``."""
    if out is not None:
        return write_out("linalg_pinv", lambda: pinv(A, rcond, hermitian, atol=atol, rtol=rtol), (A,), out)
    if rcond is not None:
        if rtol is not None:
            raise RuntimeError("linalg.pinv: rcond and rtol cannot both be set")
        rtol = rcond
    if A.dim() < 2:
        raise RuntimeError("linalg.pinv(" + _tname(A._data) + "{" + str(list(A.shape))
                           + "}): expected a tensor with 2 or more dimensions of float, double, cfloat or "
                             "cdouble types")
    return _pinv_rec.call(A, atol=atol, rtol=rtol, hermitian=hermitian)


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """``torch.linalg.matrix_rank``: the number of singular values above the cutoff (int64)."""
    if out is not None:
        return write_out("linalg_matrix_rank", lambda: matrix_rank(A, tol, hermitian, atol=atol, rtol=rtol),
                         (A,), out)
    if tol is not None:
        atol, rtol = tol, 0.0
    S = NAMESPACES["linalg"]["svdvals"](A.detach())
    return (S > _tolerance(S, A, atol, rtol)).sum(-1)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """``torch.linalg.solve_triangular``: ``X`` with ``A X = B`` (``X A = B`` for ``left=False``)
    reading only ``A``'s upper or lower triangle (its diagonal taken as ones when
    ``unitriangular``); the gradient flows to that triangle alone."""
    if out is not None:
        return write_out("linalg_solve_triangular", lambda: solve_triangular(
            A, B, upper=upper, left=left, unitriangular=unitriangular), (A, B), out)
    T = A.triu() if upper else A.tril()
    if unitriangular:
        T = (T.triu(1) if upper else T.tril(-1)) + _eye(A.shape[-1], dtype=A.dtype, device=A.device)
    solve = NAMESPACES["linalg"]["solve"]
    if left:
        return solve(T, B)
    return solve(T.mT, B.mT).mT


cholesky_ex_result = return_types._structseq("linalg_cholesky_ex", ("L", "info"))
return_types.linalg_cholesky_ex = cholesky_ex_result
inv_ex_result = return_types._structseq("linalg_inv_ex", ("inverse", "info"))
return_types.linalg_inv_ex = inv_ex_result


def _info(A, op) -> Tensor:
    """``info`` of an ``_ex`` function: zeros, or after ``op`` failed on ``A``, per matrix 0 or
    the order (element) its own error names."""
    import re

    from .factory import zeros

    info = zeros(tuple(A.shape[:-2]), dtype=D.int32)
    if op is None:  # it succeeded
        return info
    flat, mats = info.reshape(-1), A.reshape((-1,) + tuple(A.shape[-2:]))
    for b in range(mats.shape[0]):
        try:
            op(mats[b])
        except LinAlgError as e:
            k = re.search(r"(?:order|element) (\d+)", str(e))
            flat[b] = int(k.group(1)) if k else 1
    return info


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """``torch.linalg.cholesky_ex``: ``(L, info)`` without raising unless ``check_errors``; info
    is 0, or the order of the first leading minor that is not positive-definite."""
    if out is not None:
        return write_out("linalg_cholesky_ex", lambda: cholesky_ex(A, upper=upper, check_errors=check_errors),
                         (A,), out)
    cholesky = NAMESPACES["linalg"]["cholesky"]
    try:
        return cholesky_ex_result(cholesky(A, upper=upper), _info(A, None))
    except LinAlgError as e:
        if check_errors:
            raise LinAlgError(str(e).replace("linalg.cholesky:", "linalg.cholesky_ex:")) from None
    return cholesky_ex_result(A.new_full(A.shape, float("nan")), _info(A, cholesky))


def inv_ex(A, *, check_errors=False, out=None):
    """``torch.linalg.inv_ex``: ``(inverse, info)`` without raising unless ``check_errors``; info
    is 0, or the first zero diagonal element of the LU factorisation."""
    if out is not None:
        return write_out("linalg_inv_ex", lambda: inv_ex(A, check_errors=check_errors), (A,), out)
    try:
        return inv_ex_result(_inv_op(A), _info(A, None))
    except LinAlgError as e:
        if check_errors:
            raise LinAlgError(str(e).replace("linalg.inv:", "linalg.inv_ex:")) from None
    return inv_ex_result(A.new_full(A.shape, float("nan")), _info(A, _inv_op))


lstsq_result = return_types._structseq("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
return_types.linalg_lstsq = lstsq_result
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """``torch.linalg.lstsq``: the least-squares solution of ``A X = B`` (minimum norm, singular
    values below ``rcond`` times the largest dropped), as the pseudo-inverse gives it; with the
    driver's extras as PyTorch fills them on the CPU: ``rank`` (not for ``gels``), residuals for a
    tall full-rank ``A`` (not for ``gelsy``, the default), singular values (``gelsd``, ``gelss``)."""
    if driver is None:
        driver = "gelsy"
    if driver not in _DRIVERS:
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of ({', '.join(_DRIVERS)})")
    if A.dim() < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    vector = B.dim() == A.dim() - 1
    Bm = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2:]
    X = pinv(A, rtol=rcond if rcond is not None and rcond > 0 else None) @ Bm
    S = NAMESPACES["linalg"]["svdvals"](A.detach())
    rank = (S > _tolerance(S, A, None, rcond if rcond is not None and rcond > 0 else None)).sum(-1)
    empty = A.new_zeros((0,))
    residuals = empty
    if driver != "gelsy" and m > n and bool((rank == n).all()):
        residuals = ((A @ X - Bm) ** 2).sum(-2)  # (a vector b keeps its column: shape (1,))
    singular_values = S if driver in ("gelsd", "gelss") else empty
    return lstsq_result(X.squeeze(-1) if vector else X, residuals,
                        rank if driver != "gels" else rank.new_zeros((0,)), singular_values)


NAMESPACES["linalg"].update(pinv=pinv, matrix_rank=matrix_rank, solve_triangular=solve_triangular,
                            cholesky_ex=cholesky_ex, inv_ex=inv_ex, lstsq=lstsq)


# --- from a Cholesky factor; linalg.diagonal, linalg.cond ---
def cholesky_solve(B, L, upper=False, *, out=None):
    """``torch.cholesky_solve``: ``X`` with ``A X = B`` for ``A = L L^T`` (``U^T U`` when
    ``upper``)."""
    if out is not None:
        return write_out("cholesky_solve", lambda: cholesky_solve(B, L, upper), (B, L), out)
    # A formed from the whole of L (no triangle masked): the gradient reaches all of L, as PyTorch's
    A = L.mT.conj() @ L if upper else L @ L.mT.conj()
    return NAMESPACES["linalg"]["solve"](A, B)


def cholesky_inverse(L, upper=False, *, out=None):
    """``torch.cholesky_inverse``: the inverse of ``A = L L^T`` (``U^T U`` when ``upper``)."""
    if out is not None:
        return write_out("cholesky_inverse", lambda: cholesky_inverse(L, upper), (L,), out)
    eye = _eye(L.shape[-1], dtype=L.dtype, device=L.device)
    return cholesky_solve(eye.expand(L.shape), L, upper)


def linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.linalg.diagonal``: ``torch.diagonal`` over the last two dims by default."""
    return A.diagonal(offset, dim1, dim2)


def cond(A, p=None, *, out=None):
    """``torch.linalg.cond``: ``||A||_p ||A^-1||_p``; for ``p`` None, 2 or -2 the ratio of the
    extreme singular values (any shape), else from ``matrix_norm`` and the inverse (square)."""
    if out is not None:
        return write_out("linalg_cond", lambda: cond(A, p), (A,), out)
    if p in (None, 2, -2):
        s = NAMESPACES["linalg"]["svdvals"](A)
        hi, lo = s[..., 0], s[..., -1]
        return hi / lo if p in (None, 2) else lo / hi
    return matrix_norm(A, p) * matrix_norm(_inv_op(A), p)


def _chol_factor(rng, shape):
    """The lower Cholesky factor of a symmetric positive-definite matrix (or batch)."""
    x = rng.standard_normal(shape)
    return np.linalg.cholesky(x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1]))


defcomposite(cholesky_solve, method="cholesky_solve", samples=lambda rng: [
    sample("lower", rng.standard_normal((3, 2)), _chol_factor(rng, (3, 3))),
    sample("upper_batched", rng.standard_normal((2, 3, 1)), np.swapaxes(_chol_factor(rng, (2, 3, 3)), -1, -2),
           True)])
defcomposite(cholesky_inverse, method="cholesky_inverse", samples=lambda rng: [
    sample("lower", _chol_factor(rng, (3, 3))), sample("upper", _chol_factor(rng, (3, 3)).T, True)])
# (the other orders: torch 2.13's own backward fails on them, see tests/ops/test_linalg.py)
defcomposite(cond, name="linalg_cond", api="linalg.cond", method=False, samples=lambda rng: [
    sample("default", rng.standard_normal((3, 3))), sample("tall_minus2", rng.standard_normal((4, 3)), -2),
    sample("batched", _spd(rng, (2, 3, 3)), 2)])
NAMESPACES["linalg"]["diagonal"] = linalg_diagonal
