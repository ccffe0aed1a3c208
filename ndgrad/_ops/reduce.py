"""Reductions: sum, mean, prod, max/min, var/std, norms, logsumexp, cumulative ops, softmax, ...

``dim`` arguments accept an int, a sequence or None (all dims); the backward formulas put the
reduced dims back with ``unsqueeze`` before expanding, whatever ``keepdim`` was.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _backend
from .. import _dtype as D
from .. import return_types
from .._tensor import Tensor, _wrap_dim
from .pointwise import where
from .factory import arange, ones_like
from .factory import eye as _eye
from .jvp import plus
from .registry import NAMESPACES, OPS, defcomposite, defop, write_out
from .samples import nc, sample
from .shape import dims_arg


_ROW_VECTORS: dict = {}  # (length, dtype, scale) -> a constant vector: a row sum as one gemv


def sum_keep(a, axis, scale=None):
    """``a.sum(axis, keepdims=True)`` (times ``scale``) on arrays. Over the last axis of a
    C-contiguous float32/64 NumPy array it is one BLAS matrix-vector product with a constant
    vector: NumPy's reduction along a short contiguous axis costs ~5x more (30 us against 6 for
    512 rows of 128), and softmax, norms and cross-entropy reduce rows in every layer."""
    if type(axis) is tuple:
        if len(axis) != 1:
            s = a.sum(axis=axis, keepdims=True)
            return s if scale is None else s * scale
        axis = axis[0]
    n = a.ndim
    if (axis in (-1, n - 1) and n >= 2 and type(a) is np.ndarray and a.dtype.char in "fd"
            and a.flags.c_contiguous):
        d = a.shape[-1]
        return (a.reshape(-1, d) @ _constant(d, a.dtype, scale)).reshape(a.shape[:-1] + (1,))
    s = a.sum(axis=axis, keepdims=True)
    return s if scale is None else s * scale


def _constant(n, dtype, scale=None):
    key = (n, dtype, scale)
    w = _ROW_VECTORS.get(key)
    if w is None:
        w = _ROW_VECTORS[key] = np.full(n, 1.0 if scale is None else scale, dtype)
    return w


_EXP_FLOOR = 1e-20  # see shifted_exp


def shifted_exp(x, cdim):
    """``(z, e, s)``: ``z`` is ``x`` less a shift constant along ``cdim``, ``e = exp(z)`` and ``s``
    its sums over ``cdim`` (dim kept). The shift is the maximum of all of ``x`` where every row's
    sum stays above ``_EXP_FLOOR``: one scalar subtraction instead of a row maximum and a
    broadcast subtraction (a third of cross-entropy's time). At that floor the entries that count in a
    row are still normal float32 numbers, so nothing is lost; below it (rows of very different
    scale, inf or nan) each row's own maximum is the shift, as usual."""
    if x.dtype.char in "fd" and x.size:
        z = x - x.max()
        e = np.exp(z)
        s = sum_keep(e, cdim)
        if s.min() >= _EXP_FLOOR:
            return z, e, s
    z = x - x.max(cdim, keepdims=True)
    e = np.exp(z)
    return z, e, sum_keep(e, cdim)


def reduced_dtype(x, dtype):
    """PyTorch's sum/prod dtype: integer and bool inputs accumulate in int64."""
    if dtype is not None:
        return D.to_dtype(dtype).np
    return np.dtype(np.int64) if x.dtype.kind in "biu" else x.dtype


def unreduce(grad, shape, dim, keepdim):
    """Broadcast a reduced gradient back to ``shape`` (the input's)."""
    if not keepdim and dim is not None and len(shape):
        for d in dims_arg(dim, len(shape)) or ():  # an empty dim list means all dims
            grad = grad.unsqueeze(d)
    return grad.expand(shape)


def _sum(x, dim, keepdim, dtype):
    axis = dims_arg(dim, x.ndim) if x.ndim else None
    if (axis is not None and len(axis) < x.ndim and dtype is None and type(x) is np.ndarray
            and x.dtype.char in "fd" and x.flags.c_contiguous and x.size):
        out = _sum_gemv(x, axis, keepdim)
        if out is not None:
            return out
    return np.sum(x, axis=axis, keepdims=keepdim, dtype=reduced_dtype(x, dtype))


_GEMV_COLS = 4096  # longest trailing run summed by gemv (NumPy sums a contiguous run pairwise)


def _sum_gemv(x, axis, keepdim):
    """The sum over leading dims and/or trailing dims of a C-contiguous array as matrix-vector
    products with ones, or None for other dims. Bias gradients sum over the batch (leading), a
    convolution's over batch and pixels (both): 2-3x NumPy's sum for wide rows, 15x for narrow
    ones. NumPy too sums a leading axis row after row, so the rounding is alike."""
    n, k = x.ndim, len(axis)
    a = 0
    while a < k and axis[a] == a:
        a += 1
    b = k - a
    if axis[a:] != tuple(range(n - b, n)):
        return None
    shape = x.shape
    cols = math.prod(shape[n - b:])
    if cols > _GEMV_COLS:
        return None
    y = x.reshape(-1, cols) @ _constant(cols, x.dtype) if b else x
    if a:
        rows = math.prod(shape[:a])
        y = _constant(rows, x.dtype) @ y.reshape(rows, -1)
    mid = shape[a:n - b]
    return y.reshape((1,) * a + mid + (1,) * b if keepdim else mid)


def _sum_all(x, dtype):
    return np.sum(x, dtype=reduced_dtype(x, dtype))


# PyTorch's overloads, which name the nodes: x.sum() is SumBackward0, x.sum(dim) SumBackward1.
sum_all = defop("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", _sum_all,
                {"self": lambda grad, self_shape: grad.expand(self_shape)}, jvp="linear",
                api=False, method=False, torch="torch.sum",
                samples=lambda rng: [sample("2d", rng.standard_normal((3, 4))),
                                     sample("0d", rng.standard_normal(())),
                                     sample("int", np.arange(6).reshape(2, 3)),
                                     sample("dtype", rng.standard_normal((2, 3)), dtype=D.float64)]).call
sum_dim = defop(
    "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    _sum, {"self": lambda grad, self_shape, dim, keepdim: unreduce(grad, self_shape, dim, keepdim)},
    jvp="linear", api=False, method=False, node_name="SumBackward1", torch="torch.sum",
    samples=lambda rng: [sample("all", rng.standard_normal((3, 4)), None),
                         sample("dim", rng.standard_normal((3, 4)), 1),
                         sample("dims_keep", rng.standard_normal((2, 3, 4)), (0, 2), True),
                         sample("lead", rng.standard_normal((3, 4, 2)), (0, 1)),
                         sample("neg_nc", nc(rng.standard_normal((3, 4))), -1),
                         sample("0d", rng.standard_normal(()), 0),
                         sample("int", np.arange(6).reshape(2, 3), 0)]).call
_NO_DIM = object()  # ``x.sum()`` and ``x.sum(dim=None)`` are different overloads in PyTorch


def _out_dtype(dtype, out):
    """sum and prod with ``out=`` compute in out's dtype (the input is cast first, as PyTorch)."""
    return dtype if dtype is not None or not isinstance(out, Tensor) else out.dtype


def _sum_front(input, dim=_NO_DIM, keepdim=False, out=None, *, dtype=None):
    if out is not None:
        return write_out("sum", lambda: _sum_front(input, dim, keepdim, dtype=_out_dtype(dtype, out)),
                         (input,), out)
    if dim is _NO_DIM:
        return sum_all(input, dtype=dtype)
    return sum_dim(input, dim, keepdim, dtype=dtype)


def _mean(x, dim, keepdim, dtype):
    if dtype is None and x.dtype.kind not in "fc":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {D.SHORT_NAMES[x.dtype]}"
        )
    axis = dims_arg(dim, x.ndim) if x.ndim else None
    dt = x.dtype if dtype is None else D.to_dtype(dtype).np
    out = np.mean(x, axis=axis, keepdims=keepdim, dtype=None if dtype is None else dt)
    return out.astype(dt, copy=False)  # astype, not np.asarray: keeps a device result there


def _mean_grad(grad, self_shape, dim, keepdim):
    n = 1
    if dim is None or not len(self_shape):
        for s in self_shape:
            n *= s
    else:
        for d in dims_arg(dim, len(self_shape)):
            n *= self_shape[d]
    return unreduce(grad, self_shape, dim, keepdim) / n


mean_all = defop("mean(Tensor self, *, ScalarType? dtype=None) -> Tensor",
                 lambda x, dtype: _mean(x, None, False, dtype),
                 {"self": lambda grad, self_shape: _mean_grad(grad, self_shape, None, False)},
                 jvp="linear", api=False, method=False, torch="torch.mean",
                 samples=lambda rng: [sample("2d", rng.standard_normal((3, 4))),
                                      sample("0d", rng.standard_normal(()))]).call
mean_dim = defop(
    "mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    _mean, {"self": _mean_grad}, jvp="linear",
    api=False, method=False, node_name="MeanBackward1", torch="torch.mean",
    samples=lambda rng: [sample("all", rng.standard_normal((3, 4)), None),
                         sample("dim", rng.standard_normal((3, 4)), 0),
                         sample("dims_keep", rng.standard_normal((2, 3, 4)), (1, 2), True),
                         sample("0d", rng.standard_normal(()), 0)]).call


def _mean_front(input, dim=_NO_DIM, keepdim=False, out=None, *, dtype=None):
    if out is not None:
        return write_out("mean", lambda: _mean_front(input, dim, keepdim, dtype=dtype), (input,), out)
    if dim is _NO_DIM:
        return mean_all(input, dtype=dtype)
    return mean_dim(input, dim, keepdim, dtype=dtype)


# --- helpers shared by the reductions below ---
def _axis(x, dim):
    """NumPy's axis for ``dim`` (validated like PyTorch; a 0-d tensor accepts dim 0 and -1)."""
    axis = dims_arg(dim, x.ndim)
    return axis if x.ndim else None


def _count(shape, dim) -> int:
    """How many elements each output element reduces over."""
    n = 1
    for d in (range(len(shape)) if dim is None or not len(shape) else dims_arg(dim, len(shape))):
        n *= shape[d]
    return n


def _type_name(x) -> str:
    return D.SHORT_NAMES[x.dtype]


def _publish(name: str, fn, ns: str = "", method: bool = True):
    """Publish a Python front end that picks among several records (PyTorch's overloads)."""
    fn.__name__ = fn.__qualname__ = name
    NAMESPACES[ns][name] = fn
    if method:
        setattr(Tensor, name, fn)


def _even_grad(grad, self, result, dim, keepdim):
    """Gradient of a value-selecting reduction split evenly among ties (amax, amin, max())."""
    mask = self == unreduce(result, self.shape, dim, keepdim)
    count = mask.sum(dims_arg(dim, self.dim()) if self.dim() else None, keepdim=True)
    return unreduce(grad, self.shape, dim, keepdim) * mask / count


def _even_jvp(self_t, self, result, dim, keepdim):
    """Tangent of a value-selecting reduction: the mean of the tangents at the ties."""
    mask = self == unreduce(result, self.shape, dim, keepdim)
    return (self_t * mask).sum(dim, keepdim) / mask.sum(dim, keepdim)


def _rev_cumsum(g, dim):
    """``g`` summed from each position to the end of ``dim`` (linear, so twice differentiable)."""
    return g - g.cumsum(dim) + g.sum(dim, keepdim=True)


# --- prod ---
def _prod_others(x, dim):
    """Product of all other elements along ``dim``, for each element; exact when zeros occur."""
    if x.ndim == 0:
        return np.ones_like(x)
    x = np.moveaxis(x, dim, -1)
    one = _backend.namespace_of(x).ones(x.shape[:-1] + (1,), x.dtype)
    left = np.cumprod(np.concatenate([one, x[..., :-1]], -1), -1)
    right = np.cumprod(np.concatenate([one, x[..., :0:-1]], -1), -1)[..., ::-1]
    return np.moveaxis(left * right, -1, dim)


def _without_self(self, dim):
    """``self`` moved to the last dim and repeated as Y[..., i, k]: x_k, with 1 where k == i."""
    n = self.shape[dim]
    eye = _eye(n, dtype=self.dtype, device=self.device)  # a factory op: a capture sees it
    return self.transpose(dim, -1).unsqueeze(-2) * (1 - eye) + eye, eye


def _prod_others_grad(grad, self, dim):
    # d/dx_j of prod_{k != i} x_k is prod_{k != i, j} x_k (i != j): the others-product of each row
    # of Y, whose diagonal (j == i) does not belong in the sum.
    if self.dim() == 0:
        return grad * 0
    y, eye = _without_self(self, dim)
    q = prod_others(y, -1) * (1 - eye)
    return (grad.transpose(dim, -1).unsqueeze(-1) * q).sum(-2).transpose(dim, -1)


prod_others = defop("_prod_others(Tensor self, int dim) -> Tensor", _prod_others,
                    {"self": _prod_others_grad}, method=False, api=False).call


def _prod_all(x, dtype):
    return np.prod(x, dtype=reduced_dtype(x, dtype))


def _prod_all_grad(grad, self, result):
    if not (self == 0).any():  # data-dependent, as PyTorch's prod backward
        return grad * result / self
    return grad * prod_others(self.reshape(-1), 0).reshape(self.shape)


def _prod_dim(x, dim, keepdim, dtype):
    return np.prod(x, axis=_axis(x, dim), keepdims=keepdim, dtype=reduced_dtype(x, dtype))


def _prod_dim_grad(grad, self, result, dim, keepdim):
    g = unreduce(grad, self.shape, dim, keepdim)
    if not (self == 0).any():  # data-dependent, as PyTorch's prod backward
        return g * unreduce(result, self.shape, dim, keepdim) / self
    return g * prod_others(self, dim if self.dim() else 0)


def _prod_samples(rng):
    z = rng.uniform(0.5, 1.5, (3, 4))
    z[0, 1] = 0.0
    z[2, 0] = z[2, 3] = 0.0
    return [sample("all", rng.uniform(0.5, 1.5, (3, 4))),
            sample("neg_dim_keep", rng.uniform(-1.5, 1.5, (2, 3, 4)), -2, True),
            sample("nc", nc(rng.uniform(0.5, 1.5, (3, 4))), 1),
            sample("0d", rng.standard_normal(())),
            sample("zeros_all", z), sample("zeros_dim", z, 1),
            sample("one_zero_all", np.array([[1.5, 0.0], [2.0, -0.7]])),
            sample("int", np.arange(1, 7).reshape(2, 3), 0),
            sample("dtype", rng.uniform(0.5, 1.5, (3,)), 0, dtype=D.float64)]


# A reduction's tangent: the tangent times d result / d self (the VJP of ones), summed.
prod_all = defop("prod(Tensor self, *, ScalarType? dtype=None) -> Tensor", _prod_all,
                 {"self": _prod_all_grad},
                 jvp=lambda self_p, self_t, result:
                     (self_t * _prod_all_grad(1.0, self_p, result)).sum(),
                 api=False, method=False, torch="torch.prod",
                 samples=lambda rng: [s for s in _prod_samples(rng) if len(s.args) == 1]).call
def _prod_dim_jvp(self_p, self_t, result, dim, keepdim):
    return (self_t * _prod_dim_grad(ones_like(result), self_p, result, dim, keepdim)).sum(dim, keepdim)


prod_dim = defop("prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                 _prod_dim, {"self": _prod_dim_grad},
                 jvp=_prod_dim_jvp,
                 api=False, method=False, node_name="ProdBackward1",
                 torch="torch.prod",
                 samples=lambda rng: [s for s in _prod_samples(rng) if len(s.args) > 1]
                 + [sample("0d_dim", rng.standard_normal(()), 0)]).call


def prod(input, dim=None, keepdim=False, out=None, *, dtype=None):
    if out is not None:
        return write_out("prod", lambda: prod(input, dim, keepdim, dtype=_out_dtype(dtype, out)),
                         (input,), out)
    if dim is None:
        return prod_all(input, dtype=dtype)
    if not isinstance(dim, (int, np.integer)):
        raise TypeError(f"prod() received an invalid combination of arguments - got ({type(dim).__name__})")
    return prod_dim(input, dim, keepdim, dtype=dtype)


_publish("prod", prod)
_publish("sum", _sum_front)
_publish("mean", _mean_front)


# --- max / min (full, with dim, binary), amax / amin, argmax / argmin ---
def _select_backward(grad, indices, dim, shape, keepdim):
    if not shape:
        return grad.copy()
    out = _backend.namespace_of(grad).zeros(shape, grad.dtype)
    if not keepdim:
        grad, indices = np.expand_dims(grad, dim), np.expand_dims(indices, dim)
    np.put_along_axis(out, indices, grad, dim % len(shape))
    return out


def _take_along(x, indices, dim, keepdim):
    if x.ndim == 0:
        return x.copy()
    if not keepdim:
        indices = np.expand_dims(indices, dim)
    out = np.take_along_axis(x, indices, dim % x.ndim)
    return out if keepdim else np.squeeze(out, dim)


select_backward = defop(
    "_select_backward(Tensor grad, Tensor indices, int dim, int[] shape, bool keepdim) -> Tensor",
    _select_backward, {"grad": lambda grad, indices, dim, keepdim: take_along(grad, indices, dim, keepdim)},
    jvp="linear", method=False, api=False).call
take_along = defop(
    "_take_along(Tensor self, Tensor indices, int dim, bool keepdim) -> Tensor", _take_along,
    {"self": lambda grad, indices, dim, self_shape, keepdim: select_backward(grad, indices, dim, self_shape, keepdim)},
    jvp="linear", method=False, api=False).call


def _extreme_all(name, f):
    def fwd(x):
        if x.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                "reduction dim with the 'dim' argument."
            )
        return f(x)

    return fwd


def _check_nonempty(name, x, axis):
    for d in axis if axis is not None else ():
        if x.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _extreme_dim(name, argf):
    def fwd(x, dim, keepdim):
        d = _wrap_dim(dim, x.ndim)
        if x.ndim == 0:
            return x.copy(), _backend.namespace_of(x).zeros((), np.int64)
        _check_nonempty(name, x, (d,))
        idx = argf(x, axis=d, keepdims=True)
        vals = np.take_along_axis(x, idx, d)
        if not keepdim:
            vals, idx = np.squeeze(vals, d), np.squeeze(idx, d)
        return vals, idx.astype(np.int64, copy=False)

    return fwd


def _extreme_samples(rng):
    return [sample("2d", rng.standard_normal((3, 4))),
            sample("nc", nc(rng.standard_normal((3, 4)))),
            sample("0d", rng.standard_normal(())),
            sample("int", np.array([[3, 1], [4, 1]], np.int64))]


def _extreme_dim_samples(rng):
    return [sample("dim", rng.standard_normal((3, 4)), 1),
            sample("neg_keep", rng.standard_normal((2, 3, 4)), -2, True),
            sample("nc", nc(rng.standard_normal((3, 4))), 0),
            sample("0d", rng.standard_normal(()), 0),
            sample("int", np.array([[3, 1], [4, 1]], np.int64), 1)]


def _amax_samples(rng):
    return [sample("all", rng.standard_normal((3, 4))),
            sample("dim", rng.standard_normal((3, 4)), 1),
            sample("dims_keep", rng.standard_normal((2, 3, 4)), (0, -1), True),
            sample("nc", nc(rng.standard_normal((3, 4))), -1),
            sample("0d", rng.standard_normal(())),
            sample("int", np.array([[3, 1], [4, 1]], np.int64), 0)]


def _amax_fwd(name, f):
    def fwd(x, dim, keepdim):
        axis = _axis(x, dim)
        if axis is None and x.size == 0 and x.ndim:
            axis = tuple(range(x.ndim))
        _check_nonempty(name, x, axis)
        return f(x, axis=axis, keepdims=keepdim)

    return fwd


def _argext(name, f):
    def fwd(x, dim, keepdim):
        if x.dtype == np.bool_:
            raise RuntimeError(f"{name}(): does not support bool input")
        if dim is None:
            if x.size == 0:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
            out = f(x).astype(np.int64)
            return out.reshape((1,) * x.ndim) if keepdim else out
        d = _wrap_dim(dim, x.ndim)
        if x.ndim == 0:
            return _backend.namespace_of(x).zeros((), np.int64)
        _check_nonempty(name, x, (d,))
        return f(x, axis=d, keepdims=keepdim).astype(np.int64, copy=False)

    return fwd


_ext = {}
for _name, _f, _argf in (("max", np.max, np.argmax), ("min", np.min, np.argmin)):
    _ext[_name] = (
        defop(f"{_name}(Tensor self) -> Tensor", _extreme_all(_name, _f),
              {"self": lambda grad, self, result: _even_grad(grad, self, result, None, False)},
              jvp=lambda self_t, self, result: _even_jvp(self_t, self, result, None, False),
              api=False, method=False, torch=f"torch.{_name}", node_name=f"{_name.capitalize()}Backward1",
              samples=_extreme_samples).call,
        defop(f"{_name}.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
              _extreme_dim(_name, _argf),
              {"self": lambda grad, indices, dim, self_shape, keepdim:
                   select_backward(grad, indices, dim, self_shape, keepdim)},
              jvp=lambda self_t, indices, dim, keepdim:
                  (take_along(self_t, indices, dim, keepdim), None),
              api=False, method=False, torch=f"torch.{_name}", samples=_extreme_dim_samples).call,
    )
    defop(f"a{_name}(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", _amax_fwd(f"a{_name}", _f),
          {"self": lambda grad, self, result, dim, keepdim: _even_grad(grad, self, result, dim, keepdim)},
          jvp=_even_jvp,
          samples=_amax_samples)
    defop(f"arg{_name}(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", _argext(f"arg{_name}", _argf),
          samples=lambda rng: [sample("all", rng.standard_normal((3, 4))),
                               sample("all_keep", rng.standard_normal((3, 4)), None, True),
                               sample("dim", rng.standard_normal((3, 4)), 1),
                               sample("neg_keep", nc(rng.standard_normal((3, 4))), -1, True),
                               sample("0d", rng.standard_normal(()), 0),
                               sample("int", np.array([[3, 1], [4, 1]], np.int64), 0)])


def _extreme_front(name, binary):
    full, by_dim = _ext[name]
    rtype = getattr(return_types, name)

    def front(input, dim=None, keepdim=False, out=None):  # out positional: see fastpath.signature
        if out is not None:
            return write_out(name, lambda: front(input, dim, keepdim), (input, dim), out)
        if dim is None:
            return full(input)
        if isinstance(dim, Tensor):
            return binary(input, dim)
        return rtype(*by_dim(input, dim, keepdim))

    front.__doc__ = (f"{name}(input) -> Tensor; {name}(input, dim, keepdim=False) -> (values, indices); "
                     f"{name}(input, other) -> Tensor (the elementwise {'maximum' if name == 'max' else 'minimum'})")
    return front


_publish("max", _extreme_front("max", OPS["maximum"].call))
_publish("min", _extreme_front("min", OPS["minimum"].call))


# --- var / std ---
def _moment(name, f):
    def fwd(x, dim, correction, keepdim):
        if x.dtype.kind not in "fc":
            raise RuntimeError("std and var only support floating point and complex dtypes")
        axis = _axis(x, dim)
        c = 1 if correction is None else correction
        if _count(x.shape, axis) <= c:  # inf/nan results, as in PyTorch, with its warning
            warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than "
                          "the reduction factor (input numel divided by output numel).", stacklevel=3)
            with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                return f(x, axis=axis, ddof=c, keepdims=keepdim)
        return f(x, axis=axis, ddof=c, keepdims=keepdim)

    return fwd


def _var_grad(grad, self, dim, correction, keepdim):
    n = _count(self.shape, dim) - (1 if correction is None else correction)
    dims = dims_arg(dim, self.dim()) if self.dim() else None
    scale = 2.0 / n if n else float("inf")
    return unreduce(grad, self.shape, dim, keepdim) * scale * (self - self.mean(dims, keepdim=True))


def _std_grad(grad, self, result, dim, correction, keepdim):
    # d std = d var / (2 std); where std is 0 the gradient is taken as 0, as PyTorch does.
    return _var_grad(where(result == 0, 0.0, grad / (2 * result)), self, dim, correction, keepdim)


def _var_jvp(self_p, self_t, dim, correction, keepdim):
    n = _count(self_p.shape, dim) - (1 if correction is None else correction)
    dims = dims_arg(dim, self_p.dim()) if self_p.dim() else None
    d = ((self_p - self_p.mean(dims, keepdim=True)) * self_t).sum(dim, keepdim)
    return d * (2.0 / n if n else float("inf"))


def _std_jvp(self_p, self_t, result, dim, correction, keepdim):
    d = _var_jvp(self_p, self_t, dim, correction, keepdim)
    return where(result == 0, 0.0, d / (2 * result))  # 0 where std is 0, as _std_grad


def _moment_samples(rng):
    return [sample("all", rng.standard_normal((3, 4))),
            sample("dim", rng.standard_normal((3, 4)), 1),
            sample("dims_keep", rng.standard_normal((2, 3, 4)), (0, -1), keepdim=True),
            sample("correction0", nc(rng.standard_normal((3, 4))), -1, correction=0),
            sample("correction2", rng.standard_normal((5, 2)), 0, correction=2),
            sample("float_correction", rng.standard_normal((4,)), correction=0.5)]


var_rec = defop("var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
                _moment("var", np.var), {"self": _var_grad}, jvp=_var_jvp,
                api=False, method=False, torch="torch.var",
                samples=_moment_samples)
std_rec = defop("std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
                _moment("std", np.std), {"self": _std_grad},
                jvp=_std_jvp,
                api=False, method=False, torch="torch.std",
                samples=_moment_samples)


def _moment_front(name, rec):
    call = rec.call

    def front(input, dim=None, unbiased=None, keepdim=False, out=None, *, correction=None):
        if out is not None:
            return write_out(name, lambda: front(input, dim, unbiased, keepdim, correction=correction),
                             (input,), out)
        if isinstance(dim, bool):  # var(input, unbiased)
            dim, unbiased = None, dim
        if unbiased is not None:
            if correction is not None:
                raise TypeError(f"{name}() received an invalid combination of arguments - got both "
                                "'unbiased' and 'correction'")
            correction = 1 if unbiased else 0
        return call(input, dim, correction=correction, keepdim=keepdim)

    return front


_publish("var", _moment_front("var", var_rec))
_publish("std", _moment_front("std", std_rec))


# --- norms ---
def _vector_norm(x, ord, dim, keepdim, dtype):
    if x.dtype.kind not in "fc":
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {_type_name(x)}")
    if dtype is not None:
        x = x.astype(D.to_dtype(dtype).np)
    a = np.abs(x)
    axis = _axis(x, dim)
    if np.isinf(ord):
        if a.size == 0:
            raise RuntimeError("linalg.vector_norm cannot compute the inf norm on an empty tensor because "
                               "the operation does not have an identity")
        return (np.max if ord > 0 else np.min)(a, axis=axis, keepdims=keepdim)
    if ord == 0:
        return np.sum(a != 0, axis=axis, keepdims=keepdim).astype(a.dtype)
    if ord == 1:
        return np.sum(a, axis=axis, keepdims=keepdim)
    if ord == 2:
        return np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdim))
    with np.errstate(divide="ignore"):
        return np.sum(a**ord, axis=axis, keepdims=keepdim) ** (1.0 / ord)


def _vector_norm_grad(grad, self, result, ord, dim, keepdim):
    g = unreduce(grad, self.shape, dim, keepdim)
    r = unreduce(result, self.shape, dim, keepdim)
    if ord == 0:
        return self * 0
    if ord == 1:
        return g * self.sign()
    if ord == 2:
        return self * where(r == 0, 0.0, g / r)
    if np.isinf(ord):  # the largest (smallest) |x| selects; ties share the gradient
        mask = self.abs() == r
        count = mask.sum(dims_arg(dim, self.dim()) if self.dim() else None, keepdim=True)
        return g * self.sign() * mask / count
    scale = where(r == 0, 0.0, g / r ** (ord - 1))
    if ord < 2:  # |x|^(p-1) blows up at 0 for p < 1; the gradient there is taken as 0
        return where(self == 0, 0.0, self.sign() * self.abs() ** (ord - 1)) * scale
    return self * self.abs() ** (ord - 2) * scale


def _vector_norm_jvp(self_p, self_t, result, ord, dim, keepdim):
    d = _vector_norm_grad(ones_like(result), self_p, result, ord, dim, keepdim)
    return (self_t * d).sum(dim, keepdim)


vector_norm = defop(
    "vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    _vector_norm, {"self": _vector_norm_grad},
    jvp=_vector_norm_jvp,
    api="linalg.vector_norm", method=False,
    node_name="LinalgVectorNormBackward0",
    samples=lambda rng: [sample("all", rng.standard_normal((3, 4))),
                         sample("dim", rng.standard_normal((3, 4)), 2, 1),
                         sample("ord1_keep", rng.standard_normal((2, 3, 4)), 1, (0, -1), True),
                         sample("inf", nc(rng.standard_normal((3, 4))), float("inf"), -1),
                         sample("neg_inf", rng.standard_normal((3, 4)), float("-inf"), 0),
                         sample("ord3", rng.standard_normal((4, 3)), 3, 1),
                         sample("ord0.5", rng.uniform(0.2, 2, (5,)) * np.sign(rng.standard_normal(5)), 0.5),
                         sample("ord0", rng.standard_normal((3, 4)), 0, 1),
                         sample("0d", rng.standard_normal(())),
                         sample("dtype", rng.standard_normal((3,)), dtype=D.float64)]).call


def _nuclear_norm(x, dim, keepdim, dtype):
    """The sum of singular values over two dims (``linalg.svdvals``, registered in linalg.py)."""
    svdvals = NAMESPACES["linalg"].get("svdvals")
    if svdvals is None:
        raise NotImplementedError("norm(p='nuc') needs linalg.svdvals")
    nd_ = x.dim()
    if dim is None:
        if nd_ != 2:
            raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
        dim = (0, 1)
    d0, d1 = (_wrap_dim(d, nd_) for d in dim)
    if dtype is not None:
        x = x.to(dtype)
    rest = [d for d in range(nd_) if d not in (d0, d1)]
    out = svdvals(x.permute(rest + [d0, d1])).sum(-1)
    if keepdim:
        for d in sorted((d0, d1)):
            out = out.unsqueeze(d)
    return out


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """``Tensor.norm``/``ndgrad.norm``: vector norms over ``dim``; 'fro' is the 2-norm over it."""
    if isinstance(p, str):
        if p == "nuc":
            return _nuclear_norm(input, dim, keepdim, dtype)
        if p != "fro":
            raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
        p = 2
    return vector_norm(input, 2 if p is None else p, dim, keepdim, dtype=dtype)


defcomposite(norm, samples=lambda rng: [
    sample("default", rng.standard_normal((3, 4))),
    sample("fro_dims", rng.standard_normal((2, 3, 4)), "fro", (1, 2)),
    sample("p1_keep", rng.standard_normal((3, 4)), 1, 0, True),
    sample("inf", rng.standard_normal((3, 4)), float("inf"), 1),
    sample("p3", nc(rng.standard_normal((3, 4))), 3, -1),
    sample("0d", rng.standard_normal(()))])


# --- logsumexp ---
def _logsumexp(x, dim, keepdim):
    if x.dtype.kind not in "fc":
        x = x.astype(D._default[0].np)
    axis = _axis(x, dim)
    if x.size:
        m = np.max(x, axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)  # all -inf (or inf) slices: no shift
    else:
        m = _backend.namespace_of(x).zeros((1,) * x.ndim, x.dtype)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdim or axis is None and not x.ndim else np.squeeze(out, axis if axis is not None else None)


defop("logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor", _logsumexp,
      {"self": lambda grad, self, result, dim, keepdim:
           unreduce(grad, self.shape, dim, keepdim) * (self - unreduce(result, self.shape, dim, keepdim)).exp()},
      jvp=lambda self_p, self_t, result, dim, keepdim: (
          self_t * (self_p - unreduce(result, self_p.shape, dim, keepdim)).exp()).sum(dim, keepdim),
      samples=lambda rng: [sample("dim", rng.standard_normal((3, 4)), 1),
                           sample("dims_keep", rng.standard_normal((2, 3, 4)), (0, -1), True),
                           sample("nc", nc(rng.standard_normal((3, 4)) * 30), -1),
                           sample("big", np.array([[1000.0, 1001.0], [-3.0, 2.0]]), 1),
                           sample("0d", rng.standard_normal(()), 0),
                           sample("int", np.arange(6).reshape(2, 3), 0)])


# --- cumulative ---
def _cumulative(f):
    def fwd(x, dim, dtype):
        d = _wrap_dim(dim, x.ndim)
        dt = reduced_dtype(x, dtype)
        if x.ndim == 0:
            return x.astype(dt)
        return f(x, axis=d, dtype=dt)

    return fwd


def _cumsum_grad(grad, dim):
    return _rev_cumsum(grad, dim) if grad.dim() else grad


def _cumprod_grad(grad, self, result, dim):
    if self.dim() == 0:
        return grad
    if not (self == 0).any():  # data-dependent, as PyTorch's prod backward
        return _rev_cumsum(grad * result, dim) / self
    # With zeros: d y_k / d x_j = prod_{m <= k, m != j} x_m, the cumprod of row j of Y (x with
    # x_j replaced by 1), summed against grad over k >= j.
    y, eye = _without_self(self, dim)
    k = arange(eye.shape[0], device=eye.device)
    upper = (k.unsqueeze(1) <= k).to(eye.dtype)  # triu of ones, from ops
    return (grad.transpose(dim, -1).unsqueeze(-2) * y.cumprod(-1) * upper).sum(-1).transpose(dim, -1)


def _cumulative_samples(rng, zeros=False):
    out = [sample("dim", rng.standard_normal((3, 4)), 1),
           sample("neg", rng.standard_normal((2, 3, 4)), -2),
           sample("nc", nc(rng.standard_normal((3, 4))), 0),
           sample("0d", rng.standard_normal(()), 0),
           sample("dtype", rng.standard_normal((3,)), 0, dtype=D.float64),
           sample("int", np.arange(6).reshape(2, 3), 1),
           sample("bool", np.array([True, False, True]), 0)]
    if zeros:
        z = rng.uniform(0.5, 1.5, (3, 4))
        z[0, 1] = z[2, 0] = z[2, 2] = 0.0
        out += [sample("zeros", z, 1), sample("zeros_dim0", z, 0)]
    return out


defop("cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", _cumulative(np.cumsum),
      {"self": _cumsum_grad}, jvp="linear", samples=_cumulative_samples)
defop("cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", _cumulative(np.cumprod),
      {"self": _cumprod_grad}, samples=lambda rng: _cumulative_samples(rng, zeros=True))


# --- softmax / log_softmax ---
def _softmax_input(x, dim, dtype):
    if dtype is not None:
        x = x.astype(D.to_dtype(dtype).np)
    elif x.dtype.kind not in "fc":
        kernel = "softmax_lastdim_kernel_impl" if x.ndim <= 1 or dim in (-1, x.ndim - 1) else "softmax_kernel_impl"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_type_name(x)}'")
    d = _wrap_dim(dim, x.ndim)
    return x, (None if x.ndim == 0 else d)


def _softmax(x, dim, dtype):
    x, d = _softmax_input(x, dim, dtype)
    if d is None:  # 0-d: exp(x) / sum(exp(x))
        e = np.exp(x - x)
        return e / e
    _, e, s = shifted_exp(x, d)
    e /= s  # e is fresh: work in place
    return e


def _log_softmax(x, dim, dtype):
    x, d = _softmax_input(x, dim, dtype)
    if d is None:
        return x - x
    z, _, s = shifted_exp(x, d)
    return z - np.log(s)


def _softmax_samples(rng):
    return [sample("dim", rng.standard_normal((3, 4)), 1),
            sample("neg", rng.standard_normal((2, 3, 4)), -2),
            sample("nc", nc(rng.standard_normal((3, 4))), 0),
            sample("big", np.array([[1000.0, 1001.0], [-3.0, 2.0]]), 1),
            sample("0d", rng.standard_normal(()), 0),
            sample("dtype", rng.standard_normal((3,)), 0, dtype=D.float64),
            sample("int_dtype", np.arange(6).reshape(2, 3), 1, dtype=D.float64)]


def _softmax_backward(g, y, dim, input_dtype):
    """``y * (g - sum(g * y))`` over ``dim`` in two array passes (a 0-d tensor is one row).
    NOTE(pytorch): ``input_dtype`` is in the schema only; the CPU kernel keeps ``g``'s dtype."""
    out = g - (g * y if y.ndim == 0 else sum_keep(g * y, _wrap_dim(dim, y.ndim)))
    out *= y
    return out


def _log_softmax_backward(g, y, dim, input_dtype):
    """``g - exp(y) * sum(g)`` over ``dim`` (``input_dtype`` as in ``_softmax_backward``)."""
    e = np.exp(y)
    e *= g if y.ndim == 0 else sum_keep(g, _wrap_dim(dim, y.ndim))
    return g - e


def _softmax_backward_samples(rng):
    def s(*shape):  # positive rows summing to 1, as softmax outputs are
        e = rng.uniform(0.1, 1.0, shape)
        return e / e.sum(-1, keepdims=True)

    return [sample("dim", rng.standard_normal((3, 4)), s(3, 4), 1, D.float64),
            sample("neg_nc", nc(rng.standard_normal((2, 3, 4))), s(2, 3, 4), -2, D.float64),
            sample("0d", rng.standard_normal(()), rng.uniform(0.1, 1.0, ()), 0, D.float64)]


def _log_softmax_backward_samples(rng):
    return [sample(s.name, s.args[0], np.asarray(np.log(s.args[1])), *s.args[2:])
            for s in _softmax_backward_samples(rng)]


def _softmax_backward_jvp(grad_output_p, grad_output_t, output_p, output_t, dim, input_dtype):
    """The product rule on ``y * (g - sum(g * y))``."""
    g, y = grad_output_p, output_p
    r = None if grad_output_t is None else softmax_backward_data(grad_output_t, y, dim, input_dtype)
    if output_t is not None:
        s, st = (g * y).sum(dim, keepdim=True), (g * output_t).sum(dim, keepdim=True)
        r = plus(r, output_t * (g - s) - y * st)
    return r


def _log_softmax_backward_jvp(grad_output_p, grad_output_t, output_p, output_t, dim, input_dtype):
    """The product rule on ``g - exp(y) * sum(g)``."""
    g, y = grad_output_p, output_p
    r = None
    if grad_output_t is not None:
        r = log_softmax_backward_data(grad_output_t, y, dim, input_dtype)
    if output_t is not None:
        r = plus(r, -output_t * y.exp() * g.sum(dim, keepdim=True))
    return r


# Fused backward kernels (two array passes instead of four dispatches per node); the Jacobian of
# softmax is symmetric, so the gradient's own vjp in ``grad_output`` is the same op (and
# softmax's JVP is its VJP with the tangent as gradient).
softmax_backward_data = defop(
    "_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
    _softmax_backward,
    {"grad_output": lambda grad, output, dim, input_dtype: softmax_backward_data(grad, output, dim, input_dtype),
     "output": lambda grad, grad_output, output, dim:
        grad * (grad_output - (grad_output * output).sum(dim, keepdim=True))
        - grad_output * (grad * output).sum(dim, keepdim=True)}, jvp=_softmax_backward_jvp,
    method=False, api=False, torch="torch.ops.aten._softmax_backward_data",
    samples=_softmax_backward_samples).call
log_softmax_backward_data = defop(
    "_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
    _log_softmax_backward,
    {"grad_output": lambda grad, output, dim: grad - (grad * output.exp()).sum(dim, keepdim=True),
     "output": lambda grad, grad_output, output, dim: -grad * output.exp() * grad_output.sum(dim, keepdim=True)},
    jvp=_log_softmax_backward_jvp,
    method=False, api=False, torch="torch.ops.aten._log_softmax_backward_data",
    samples=_log_softmax_backward_samples).call

# (the gradient comes in the output's dtype; the engine casts it to the input's, as for dtype=)
softmax = defop("softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", _softmax,
                {"self": lambda grad, result, dim: softmax_backward_data(grad, result, dim, result.dtype)},
                jvp=lambda self_t, result, dim:
                    softmax_backward_data(self_t, result, dim, result.dtype),
                node_name="SoftmaxBackward0", samples=_softmax_samples).call
log_softmax = defop("log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", _log_softmax,
                    {"self": lambda grad, result, dim: log_softmax_backward_data(grad, result, dim, result.dtype)},
                    jvp=lambda self_t, result, dim:
                        self_t - (self_t * result.exp()).sum(dim, keepdim=True),
                    node_name="LogSoftmaxBackward0", samples=_softmax_samples).call


def _functional(op, name):
    def f(input, dim=None, _stacklevel=3, dtype=None):
        if dim is None:  # PyTorch's legacy implicit choice (it also warns)
            warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
                          "include dim=X as an argument.", stacklevel=_stacklevel)
            dim = 0 if input.dim() in (0, 1, 3) else 1
        return op(input, dim, dtype)

    return f


_publish("softmax", _functional(softmax, "softmax"), ns="nn.functional", method=False)
_publish("log_softmax", _functional(log_softmax, "log_softmax"), ns="nn.functional", method=False)


# --- all / any ---
def _logical_reduce(f):
    def fwd(x, dim, keepdim):
        out = f(x, axis=_axis(x, dim), keepdims=keepdim)
        return out.astype(np.uint8) if x.dtype == np.uint8 else out  # uint8 in, uint8 out (PyTorch)

    return fwd


def _logical_samples(rng):
    return [sample("all", rng.standard_normal((3, 4)) > 0),
            sample("dim", rng.standard_normal((3, 4)) > -1, 1),
            sample("dims_keep", rng.standard_normal((2, 3, 4)) > 0, (0, -1), True),
            sample("float", rng.standard_normal((3, 4)), 0),
            sample("zeros", np.array([[0.0, 1.0], [0.0, 0.0]]), -1),
            sample("uint8", np.array([0, 3, 1], np.uint8)),
            sample("0d", np.array(True))]


defop("all.dims(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor", _logical_reduce(np.all),
      samples=_logical_samples)
defop("any.dims(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor", _logical_reduce(np.any),
      samples=_logical_samples)


# --- cummax, cummin, logcumsumexp ---
def _cumulative_extreme(ufunc):
    def fwd(x, dim):
        d = _wrap_dim(dim, x.ndim)
        xp = _backend.namespace_of(x)
        if x.ndim == 0 or x.size == 0:
            return x.copy(), xp.zeros(x.shape, np.int64)
        values = ufunc.accumulate(x, axis=d)  # NaN propagates, as in PyTorch
        pos = xp.arange(x.shape[d]).reshape([-1 if i == d else 1 for i in range(x.ndim)])
        hit = x == values  # ties take the later index, as in PyTorch
        if x.dtype.kind in "fc":
            hit |= xp.isnan(x)
        return values, xp.maximum.accumulate(xp.where(hit, pos, 0), axis=d).astype(np.int64)

    return fwd


def _cumulative_extreme_grad(grad, self, dim, indices):  # saves self and indices, as PyTorch
    return grad.new_zeros(self.shape).scatter_add(dim, indices, grad) if self.dim() else grad


def _cumext_samples(rng):
    # Ties (not differentiable by finite differences) are tested in tests/ops/test_missing_ops.py.
    return [sample("dim1", rng.standard_normal((3, 4)), 1),
            sample("dim0_nc", nc(rng.standard_normal((3, 4))), 0),
            sample("0d", rng.standard_normal(()), 0),
            sample("int", np.array([3, 1, 4, 1, 5]), 0)]


for _name, _uf in (("cummax", np.maximum), ("cummin", np.minimum)):
    setattr(return_types, _name, return_types._structseq(_name, ("values", "indices")))
    defop(f"{_name}(Tensor self, int dim) -> (Tensor values, Tensor indices)",
          _cumulative_extreme(_uf), {"self": _cumulative_extreme_grad},
          api=False, method=False, torch=f"torch.{_name}", samples=_cumext_samples)


def _cumext_front(name):
    call, rtype = OPS[name].call, getattr(return_types, name)

    def front(input, dim, *, out=None):
        if out is not None:
            return write_out(name, lambda: front(input, dim), (input,), out)
        return rtype(*call(input, dim))

    return front


_publish("cummax", _cumext_front("cummax"))
_publish("cummin", _cumext_front("cummin"))


def _logcumsumexp(x, dim):
    if x.dtype.kind not in "fc":
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{_type_name(x)}'")
    return x.copy() if x.ndim == 0 else np.logaddexp.accumulate(x, axis=_wrap_dim(dim, x.ndim))


def _logcumsumexp_grad(grad, self, result, dim):
    """grad_i = sum_{j >= i} grad_j exp(x_i - out_j): every weight is at most 1 (out_j >= x_i),
    so the (n, n) weights per line are formed directly; O(n^2) per line, stable, differentiable."""
    if self.dim() == 0:
        return grad
    x, y, g = self.transpose(dim, -1), result.transpose(dim, -1), grad.transpose(dim, -1)
    n = x.shape[-1]
    k = arange(n, device=x.device)
    upper = k.unsqueeze(1) <= k  # [i, j]: j >= i
    w = where(upper, x.unsqueeze(-1) - y.unsqueeze(-2), -math.inf).exp()
    return (w * g.unsqueeze(-2)).sum(-1).transpose(dim, -1)


defop("logcumsumexp(Tensor self, int dim) -> Tensor", _logcumsumexp,
      {"self": _logcumsumexp_grad},
      samples=lambda rng: [sample("dim1", rng.standard_normal((3, 4)), 1),
                           sample("dim0_nc", nc(rng.standard_normal((3, 4))), 0),
                           sample("big", rng.uniform(-50, 50, (2, 5)), -1),
                           sample("0d", rng.standard_normal(()), 0)])
