"""Numeric functions PyTorch has beyond the core table: clamp_min/max, NaN-aware reductions,
aminmax, sign and exponent helpers (copysign, signbit, ldexp, frexp, nextafter), xlogy, sinc,
i0, float_power, mvlgamma, vander, counting (bincount, histc, isin, argwhere), renorm and the
trapezoid rules.

Composites where the primitives give the right gradient; primitives (with formulas) where a
composite would be wrong (copysign's zero gradient for ``other``) or has no array to build on
(i0, frexp, bincount, histc). Indexing ops live in ``scatter.py``.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _backend, return_types
from .. import _dtype as D
from .._factories import as_tensor
from .._tensor import Tensor, _wrap_dim
from .registry import NAMESPACES, defcomposite, defop
from .registry import PROMOTE_COMMON as COMMON
from .registry import PROMOTE_FLOAT as FLOAT
from .samples import binary, nc, sample, unary

_ns = NAMESPACES[""]


def _r(rng, *shape):
    return rng.standard_normal(shape)


def _float(t):
    """``t`` itself when floating or complex, else converted to the default dtype."""
    return t if (t.is_floating_point() or t.is_complex()) else t.to(D.get_default_dtype())


# --- clamps ---
def clamp_min(input, min):
    return input.clamp(min=min)


def clamp_max(input, max):
    return input.clamp(max=max)


Tensor.clamp_min_ = lambda self, min: self.clamp_(min=min)
Tensor.clamp_max_ = lambda self, max: self.clamp_(max=max)


# --- NaN-aware reductions, aminmax ---
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    if input.is_floating_point() or input.is_complex():
        input = _ns["where"](input.isnan(), 0, input)  # a where: NaN positions get zero gradient
    return input.sum(dim, keepdim, dtype=dtype) if dim is not None else \
        (input.sum(dtype=dtype) if not keepdim else input.sum(tuple(range(input.dim())), True, dtype=dtype))


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    if not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got "
                           f"{D.SHORT_NAMES[input._data.dtype]}")
    count = nansum((~input.isnan()).to(input.dtype if dtype is None else dtype), dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count


return_types.aminmax = return_types._structseq("aminmax", ("min", "max"))


def aminmax(input, *, dim=None, keepdim=False):
    if dim is None:
        dims = tuple(range(input.dim()))
        mn, mx = input.amin(dims, keepdim), input.amax(dims, keepdim)
    else:
        mn, mx = input.amin(dim, keepdim), input.amax(dim, keepdim)
    return return_types.aminmax(mn, mx)


def argwhere(input):
    return input.nonzero()


# --- signs and exponents ---
defop("copysign.Tensor(Tensor self, Tensor other) -> Tensor", "copysign",
      {"self": lambda grad, self, result: grad * self.sgn() * result.sgn(),  # |x|' times the new sign
       "other": lambda grad: grad.new_zeros(grad.shape)},  # NOTE(pytorch): a zero gradient, not None
      jvp="elementwise", promote=FLOAT, inplace="copysign_",
      samples=binary(scalar_rhs=-1.5))


defop("signbit(Tensor self) -> Tensor", "signbit", None,
      samples=lambda rng: [sample("f", np.array([-1.0, 0.0, -0.0, 2.0, -np.inf])),
                           sample("int", np.array([[-3, 0], [2, -1]]))])


def _heaviside(x, values):
    if x.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    xp = _backend.namespace_of(x)
    return xp.where(x == 0, values, (x > 0).astype(x.dtype)).astype(x.dtype)


defop("heaviside(Tensor self, Tensor values) -> Tensor", _heaviside, None, inplace="heaviside_",
      samples=lambda rng: [sample("f", np.array([-1.5, 0.0, 2.0]), np.array([0.5])),
                           sample("int", np.array([[0, 3], [-2, 0]]), np.array([7, 8]))])


def _nextafter(x, y):
    if x.dtype.kind != "f":
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{D.SHORT_NAMES[x.dtype]}'")
    return _backend.namespace_of(x).nextafter(x, y)


defop("nextafter(Tensor self, Tensor other) -> Tensor", _nextafter, None, promote=COMMON,
      inplace="nextafter_",
      samples=lambda rng: [sample("up", _r(rng, 3, 4), np.full((3, 4), 10.0), no_grad=(0, 1)),
                           sample("bcast_down", _r(rng, 3, 4), np.array([-10.0]), no_grad=(0, 1))])


def ldexp(input, other):
    return input * _ns["pow"](2.0, other)


def _frexp(x):
    if x.dtype.kind != "f":
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    mantissa, exponent = _backend.namespace_of(x).frexp(x)
    return mantissa, exponent.astype(np.int32)


return_types.frexp = return_types._structseq("frexp", ("mantissa", "exponent"))
_frexp_rec = defop("frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)", _frexp,
                   {"self": lambda grad, exponent: grad / exponent.exp2()},
                   api=False, method=False, torch="torch.frexp",
                   samples=lambda rng: [sample("2d", 10 * _r(rng, 3, 4)), sample("0d", np.array(0.375))])


def frexp(input, *, out=None):
    return return_types.frexp(*_frexp_rec.call(input))


NAMESPACES[""]["frexp"] = Tensor.frexp = frexp


# --- special functions ---
def _i1(x):
    """The modified Bessel function I1, from SciPy (CuPy's for device arrays)."""
    if isinstance(x, np.ndarray):  # NumPy's arrays and the logging test device's
        from scipy.special import i1
    else:
        from cupyx.scipy.special import i1
    return i1(x).astype(x.dtype)


# I1'(x) = I0(x) - I1(x) / x, 1/2 at 0.
def _i1_grad(grad, self, result):
    zero = self == 0
    return grad * _ns["where"](zero, 0.5, _ns["i0"](self) - result / _ns["where"](zero, 1.0, self))


_i1_op = defop("_special_i1(Tensor self) -> Tensor", _i1, {"self": _i1_grad}, jvp="elementwise",
               promote=FLOAT, api=False, method=False).call


defop("i0(Tensor self) -> Tensor", lambda x: _backend.namespace_of(x).i0(x).astype(x.dtype),
      {"self": lambda grad, self: grad * _i1_op(self)}, jvp="elementwise", promote=FLOAT, inplace="i0_",
      samples=unary(domain=(-3, 3)))


def sinc(input):
    """sin(pi x) / (pi x), and 1 at 0."""
    x = _float(input)
    zero = x == 0
    safe = _ns["where"](zero, 1.0, x) * math.pi  # the unused branch must not make 0/0 gradients
    return _ns["where"](zero, 1.0, safe.sin() / safe)


def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is NaN)."""
    if not isinstance(input, Tensor):
        input = _ns["scalar_tensor"](input, dtype=other.dtype if other.is_floating_point() else None,
                                     device=other.device)
    if not isinstance(other, Tensor):
        other = _ns["scalar_tensor"](other, dtype=input.dtype if input.is_floating_point() else None,
                                     device=input.device)
    out = input * other.log()
    return _ns["where"]((input == 0) & ~other.isnan(), 0, out)


def float_power(input, exponent):
    """pow in double precision (complex128 when either operand is complex)."""
    cplx = any(isinstance(a, complex) or (isinstance(a, Tensor) and a.is_complex()) for a in (input, exponent))
    dt = D.complex128 if cplx else D.float64
    base, exp = (a.to(dt) if isinstance(a, Tensor) else a for a in (input, exponent))
    if not isinstance(base, Tensor):
        return _ns["pow"](base, exp)
    return base.pow(exp)


def mvlgamma(input, p):
    """The multivariate log-gamma of dimension p: sum of lgamma(x - i/2) plus a constant."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = _float(input)
    shifts = _ns["arange"](p, dtype=x.dtype, device=x.device) / 2
    return (x.unsqueeze(-1) - shifts).lgamma().sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


def isreal(input):
    if input.is_complex():
        return _ns["view_as_real"](input).select(-1, 1) == 0
    return _ns["ones_like"](input, dtype=D.bool_)


def vander(x, N=None, increasing=False):
    """Columns x**0, x**1, ... (decreasing powers unless ``increasing``) of a 1-D tensor."""
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if not (x.is_floating_point() or x.is_complex()):
        x = x.to(D.int64)
    cols = [x.new_ones((x.shape[0], min(n, 1)))]
    if n > 1:
        cols.append(x.unsqueeze(1).expand(x.shape[0], n - 1).cumprod(1))
    out = _ns["cat"](cols, 1)
    return out if increasing else out.flip(1)


# --- counting ---
def _bincount(x, weights, minlength):
    if x.ndim != 1 or x.dtype.kind not in "iu" or (x.size and x.min() < 0):
        if x.dtype.kind == "f":
            raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{D.SHORT_NAMES[x.dtype]}'")
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != x.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    xp = _backend.namespace_of(x)
    if weights is None:
        return xp.bincount(x, minlength=minlength).astype(np.int64)
    dt = weights.dtype if weights.dtype.kind == "f" else np.float64
    return xp.bincount(x, weights.astype(np.float64), minlength=minlength).astype(dt)


defop("bincount(Tensor self, Tensor? weights=None, int minlength=0) -> Tensor", _bincount, None,
      samples=lambda rng: [sample("plain", np.array([0, 1, 1, 3, 1])),
                           sample("weights", np.array([2, 0, 2]), rng.uniform(0, 1, 3), no_grad=(1,)),
                           sample("minlength", np.array([1, 1]), None, 5),
                           sample("empty", np.zeros(0, np.int64))])


def _histc(x, bins, min, max):
    if x.dtype.kind != "f":
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{D.SHORT_NAMES[x.dtype]}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    xp = _backend.namespace_of(x)
    counts, _ = xp.histogram(x.reshape(-1), bins=bins, range=(lo, hi))
    return counts.astype(x.dtype)


defop("histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor", _histc, None,
      samples=lambda rng: [sample("range", _r(rng, 20), 4, -1.0, 1.0, no_grad=(0,)),
                           sample("auto", nc(_r(rng, 3, 4)), 5, no_grad=(0,))])


def _isin(elements, test, assume_unique, invert):
    return _backend.namespace_of(elements).isin(elements, test, invert=invert)


_isin_rec = defop("isin.Tensor_Tensor(Tensor elements, Tensor test_elements, *, bool assume_unique=False, "
                  "bool invert=False) -> Tensor", _isin, None, api=False, method=False, torch="torch.isin",
                  samples=lambda rng: [sample("int", np.array([[1, 2], [3, 4]]), np.array([2, 3, 7])),
                                       sample("invert", np.array([1.0, 2.5]), np.array([2.5]), invert=True,
                                              no_grad=(0, 1))])


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    if not isinstance(elements, Tensor):
        elements = as_tensor(elements, device=test_elements.device)
    if not isinstance(test_elements, Tensor):
        test_elements = as_tensor(test_elements, device=elements.device)
    return _isin_rec.call(elements, test_elements, assume_unique=assume_unique, invert=invert)


NAMESPACES[""]["isin"] = isin


# --- renorm and the trapezoid rules ---
def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to norm ``maxnorm``."""
    dim = _wrap_dim(dim, input.dim())
    dims = [d for d in range(input.dim()) if d != dim]
    norm = NAMESPACES["linalg"]["vector_norm"](input, p, dims, True)
    factor = _ns["where"](norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return input * factor


def _trapezoid_parts(y, x, dx, dim, fn):
    """(sum of neighbouring pairs along dim, spacing) of the trapezoid rule."""
    dim = _wrap_dim(dim, y.dim())
    n = y.shape[dim]
    pairs = y.narrow(dim, 1, max(n - 1, 0)) + y.narrow(dim, 0, max(n - 1, 0))
    if isinstance(x, Tensor):
        if x.dim() == 1:
            if x.shape[0] != n:
                raise RuntimeError(f"{fn}: There must be one `x` value for each sample point")
            spacing = x.diff().reshape([-1 if d == dim else 1 for d in range(y.dim())])
        else:
            spacing = x.diff(dim=dim)
    else:
        spacing = 1 if (x is None and dx is None) else (x if x is not None else dx)
    return _float(pairs), spacing


def trapezoid(y, x=None, *, dx=None, dim=-1):
    pairs, spacing = _trapezoid_parts(y, x, dx, dim, "trapezoid")
    return (pairs * spacing).sum(dim) / 2


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    pairs, spacing = _trapezoid_parts(y, x, dx, dim, "cumulative_trapezoid")
    return (pairs * spacing).cumsum(dim) / 2


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


_METHODS = {"clamp_min", "clamp_max", "nansum", "nanmean", "aminmax", "argwhere", "ldexp", "sinc",
            "xlogy", "float_power", "mvlgamma", "isreal", "renorm"}
for _fn, _samples in (
    (clamp_min, lambda rng: [sample("scalar", _r(rng, 3, 4), 0.2),
                             sample("tensor", _r(rng, 3, 4), rng.uniform(-2, 2, (4,)) + 5)]),
    (clamp_max, lambda rng: [sample("scalar", nc(_r(rng, 3, 4)), -0.3)]),
    (nansum, lambda rng: [sample("all", np.array([[1.0, np.nan], [2.0, 3.5]])),
                          sample("dim", np.array([[1.0, np.nan, 2.0], [np.nan, 0.5, 3.5]]), 1),
                          sample("keep", _r(rng, 2, 3), (0, 1), True),
                          sample("int", np.array([1, 2, 3]))]),
    (nanmean, lambda rng: [sample("all", np.array([[1.0, np.nan], [2.0, 3.5]])),
                           sample("dim_keep", np.array([[1.0, np.nan, 2.0], [np.nan, 0.5, 3.5]]), 0, True)]),
    (aminmax, lambda rng: [sample("all", _r(rng, 3, 4)), sample("dim", nc(_r(rng, 3, 4)), dim=1),
                           sample("keep", _r(rng, 3, 4), dim=0, keepdim=True)]),
    (argwhere, lambda rng: [sample("2d", np.array([[0.0, 1.5], [2.0, 0.0]]), no_grad=(0,)),
                            sample("0d", np.array(5))]),
    # NOTE(pytorch): torch's gradient is 0 for negative integer exponents (2**-k in integers)
    (ldexp, lambda rng: [sample("int_exp", _r(rng, 3, 4), np.array([1, 2, 0, 3])),
                         sample("float_exp", _r(rng, 3), rng.uniform(-2, 2, 3))]),
    (sinc, lambda rng: [sample("zero", np.array([0.0, 0.3, -1.2, 2.5]), no_grad=(0,)),
                        sample("2d", nc(_r(rng, 3, 4))),
                        sample("int", np.array([0, 1, 2]))]),
    (xlogy, lambda rng: [sample("zero", np.array([0.0, 1.5, -2.0]), rng.uniform(0.5, 2, 3), no_grad=(0, 1)),
                         sample("f", np.array([0.7, 1.5, -2.0]), rng.uniform(0.5, 2, 3)),
                         sample("bcast", _r(rng, 3, 4), rng.uniform(0.5, 2, 4)),
                         sample("int", np.array([0, 1, 2]), np.array([0, 2, 3]))]),
    (float_power, lambda rng: [sample("t_t", rng.uniform(0.5, 2, (3, 4)), rng.uniform(-1, 2, (3, 4))),
                               sample("int_scalar", np.array([1, 2, 3]), 2),
                               sample("scalar_base", 1.5, rng.uniform(-1, 1, 3))]),
    (mvlgamma, lambda rng: [sample("p1", rng.uniform(0.5, 3, (3,)), 1), sample("p3", rng.uniform(1.5, 4, (2, 3)), 3)]),
    (isreal, lambda rng: [sample("f", _r(rng, 3)), sample("c", np.array([1 + 0j, 2 - 1j]))]),
    # no_grad: torch's own backward of vander fails (an in-place cumprod); gradcheck in
    # tests/test_namespace_extra.py
    (vander, lambda rng: [sample("f", rng.uniform(0.5, 2, 3), no_grad=(0,)),
                          sample("N_inc", rng.uniform(0.5, 2, 3), 4, True, no_grad=(0,)),
                          sample("int", np.array([1, 2, 3], np.int32)), sample("N0", _r(rng, 2), 0)]),
    (renorm, lambda rng: [sample("p2_dim0", _r(rng, 3, 4), 2, 0, 1.5), sample("p1_dim1", nc(_r(rng, 3, 4)), 1, 1, 2.0),
                          sample("3d", _r(rng, 2, 3, 2), 3, -1, 1.0)]),
    (trapezoid, lambda rng: [sample("dx1", _r(rng, 3, 5)), sample("dx", _r(rng, 3, 5), dx=0.5, dim=0),
                             sample("x1d", _r(rng, 2, 4), np.sort(rng.uniform(0, 3, 4))),
                             sample("xnd", _r(rng, 2, 4), np.sort(rng.uniform(0, 3, (2, 4)))),
                             sample("int", np.array([1, 2, 3]))]),
    (cumulative_trapezoid, lambda rng: [sample("dx1", _r(rng, 3, 5)),
                                        sample("x1d", _r(rng, 4, 2), np.sort(rng.uniform(0, 3, 4)), dim=0)]),
):
    defcomposite(_fn, samples=_samples, method=_fn.__name__ in _METHODS)
NAMESPACES[""]["trapz"] = trapz
