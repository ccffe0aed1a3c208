"""Composite ops (plain functions of primitives), conversions and Python operators.

A composite is registered with ``defcomposite`` so that it sits in the op-info table and is
gradchecked like a primitive; its backward is whatever its primitives record.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._factories import as_tensor
from .factory import full as _full
from .._tensor import Tensor
from ..autograd.grad_mode import state as _grad_state
from .index import index_adv
from .registry import NAMESPACES, OPS, defcomposite, defop, write_out
from .samples import nc, sample
from .shape import cat, size_arg

def _call(name):
    return OPS[name].call


# --- copies and conversions ---
defop("clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor", lambda x, memory_format: x.copy(),
      {"self": lambda grad: grad}, jvp="linear",
      samples=lambda rng: [sample("2d", rng.standard_normal((3, 4))), sample("nc", nc(rng.standard_normal((3, 4))))])

def _copy_to(x, dtype, device):
    y = x.astype(D.to_dtype(dtype).np) if dtype is not None else None
    if device is not None and _backend.device_of(x) != device:
        return _backend.to_device(x if y is None else y, device)
    return x.copy() if y is None else y


_to_copy = defop("_to_copy(Tensor self, *, ScalarType? dtype=None, Device? device=None) -> Tensor", _copy_to,
                 {"self": lambda grad, self_device: grad if grad.device == self_device else grad.to(self_device)},
                 jvp="linear", method=False, api=False,
                 samples=lambda rng: [sample("to_f32", rng.standard_normal((3,)), dtype=D.float32),
                                      sample("same", rng.standard_normal((3,)), dtype=D.float64)]).call


def _parse_to(args, kwargs):
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() received an invalid combination of arguments - got unexpected {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, (str, _backend.Device)):
            device = a
        elif isinstance(a, bool):
            copy = a
        elif a is not None:
            dtype = D.to_dtype(a)
    return dtype, device, copy


def to(self, *args, **kwargs):
    """``Tensor.to(dtype)``, ``.to(device)``, ``.to(other)``; returns self when nothing changes."""
    dtype, device, copy = _parse_to(args, dict(kwargs))
    if device is not None:
        device = _backend.check_device(device)
        if device.type != "cpu":
            device = _backend.device_type(device).normalize(device)
        if device == self.device:
            device = None
    if dtype is not None:
        dtype = D.to_dtype(dtype)
        if dtype.np == self._data.dtype:
            dtype = None
    if dtype is not None or device is not None:
        return _to_copy(self, dtype=dtype, device=device)
    return _to_copy(self) if copy else self


def _caster(dt):
    def cast(self, memory_format=None):
        return to(self, dt)

    return cast


def _cpu(self, memory_format=None):
    return to(self, "cpu")


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    dev = _backend.Device("cuda", None) if device is None else _backend.as_device(device)
    return to(self, dev if dev.type == "cuda" else _backend.Device("cuda", dev.index))


Tensor.to = to
Tensor.cpu = _cpu
Tensor.cuda = _cuda
Tensor.float = _caster(D.float32)
Tensor.double = _caster(D.float64)
Tensor.half = _caster(D.float16)
Tensor.int = _caster(D.int32)
Tensor.long = _caster(D.int64)
Tensor.short = _caster(D.int16)
Tensor.bool = _caster(D.bool_)
Tensor.byte = _caster(D.uint8)
Tensor.char = _caster(D.int8)
Tensor.cfloat = _caster(D.complex64)
Tensor.cdouble = _caster(D.complex128)
if D.bfloat16 is not None:  # ml_dtypes installed
    Tensor.bfloat16 = _caster(D.bfloat16)


def type_as(self, other):
    return to(self, other.dtype)


Tensor.type_as = type_as


def contiguous(self, memory_format=None):
    return self if self._data.flags.c_contiguous else OPS["clone"].call(self)


Tensor.contiguous = contiguous

_copy_from = defop("_copy_from(Tensor self, Tensor src, bool non_blocking=False) -> Tensor",
                   lambda x, src, non_blocking: _copy_values(x, src),
                   {"self": lambda grad: grad * 0,
                    "src": lambda grad, src_device: grad if grad.device == src_device else grad.to(src_device)},
                   jvp="linear",
                   method=False, api=False, inplace="copy_", extra={"cross_device": True},
                   samples=lambda rng: [sample("same", rng.standard_normal((3, 4)), rng.standard_normal((3, 4))),
                                        sample("bcast", rng.standard_normal((3, 4)), rng.standard_normal((4,)))])


def _copy_values(x, src):
    # copy_ crosses devices (src moves to x's); a Python value becomes an array there
    src = _backend.to_device(src, _backend.device_of(x)) if hasattr(src, "dtype") else _backend.namespace_of(x).asarray(src)
    if src.dtype.kind == "c" and x.dtype.kind != "c":
        src = src.real
    try:
        return np.broadcast_to(src, x.shape).astype(x.dtype)
    except ValueError:
        raise RuntimeError(
            f"The size of tensor a ({x.shape[-1] if x.ndim else 1}) must match the size of tensor b "
            f"({src.shape[-1] if src.ndim else 1}) at non-singleton dimension {max(x.ndim - 1, 0)}"
        ) from None


defop("_fill(Tensor self, Tensor value) -> Tensor",
      lambda x, value: _fill_values(x, value),
      {"self": lambda grad: grad * 0, "value": lambda grad: grad.sum()}, jvp="linear",
      method=False, api=False, inplace="fill_",
      samples=lambda rng: [sample("scalar", rng.standard_normal((3, 4)), 1.5),
                           sample("tensor", rng.standard_normal((3, 4)), rng.standard_normal(()))])


def _fill_values(x, value):
    v = _backend.namespace_of(x).asarray(value)
    if v.ndim:
        raise RuntimeError(
            f"fill_ only supports 0-dimension value tensor but got tensor with {v.ndim} dimensions."
        )
    return np.broadcast_to(v, x.shape).astype(x.dtype)  # np.full would copy v into a host array


def zero_(self):
    return self.fill_(0)


Tensor.zero_ = zero_


# --- shapes ---
def reshape(self, *shape):
    shape = size_arg(shape)
    try:
        return self.view(shape)
    except RuntimeError as e:
        if "not compatible" not in str(e):
            raise
    return contiguous(self).view(shape)


defcomposite(reshape, samples=lambda rng: [
    sample("view", rng.standard_normal((3, 4)), (4, 3)),
    sample("copy", rng.standard_normal((4, 3)).T, (12,)),
    sample("infer", rng.standard_normal((2, 3, 4)), (-1, 4))])


def sum_to_size(self, *size):
    """Sum ``self`` down to ``size`` (which must broadcast to ``self.shape``)."""
    shape = size_arg(size)
    have = self._data.shape
    if have == shape:
        return self
    lead = len(have) - len(shape)
    if lead < 0 or any(s != 1 and s != h for s, h in zip(shape, have[lead:])):
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size {{{list(have)}}}.")
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and have[lead + i] != 1)
    out = self.sum(dims, keepdim=True) if dims else self
    return out.view(shape) if lead else out


defcomposite(sum_to_size, api=False, samples=lambda rng: [
    sample("lead", rng.standard_normal((2, 3, 4)), (3, 4)),
    sample("keep1", rng.standard_normal((3, 4)), (3, 1)),
    sample("both", rng.standard_normal((2, 3, 4)), (1, 4))])


# --- indexing ---
# NOTE(pytorch): basic indexing records one view node per indexed dim, as PyTorch's
# applySlicing does: select for an int, slice for a slice (skipped inside a tuple when it spans
# the whole dim), unsqueeze for None, and alias when nothing else was recorded (``x[...]``).
_select = OPS["select.int"].call
_slice = OPS["slice.Tensor"].call
_unsqueeze = OPS["unsqueeze"].call
_alias = OPS["alias"].call
_ZERO_DIM_INDEX = ("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                   "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")


def _int_index(k):
    """``k`` as an int when it is an integer index (not a bool), else None."""
    if type(k) is int:
        return k
    if isinstance(k, (np.integer, int)) and not isinstance(k, (bool, np.bool_)):
        return int(k)
    return None


def _slice_args(s):
    start, stop, step = s.start, s.stop, s.step
    if start is not None and type(start) is not int:
        start = start.__index__()
    if stop is not None and type(stop) is not int:
        stop = stop.__index__()
    if step is None:
        step = 1
    elif type(step) is not int:
        step = step.__index__()
    if step <= 0:
        msg = "slice step cannot be zero" if step == 0 else "step must be greater than zero"
        raise ValueError(msg)
    return start, stop, step


def _out_of_bounds(k, pos, size):
    return IndexError(f"index {k} is out of bounds for dimension {pos} with size {size}")


def _getitem_tuple(self, key):
    """A tuple of ints, slices, None and Ellipsis, or None when it holds anything else."""
    n_real = 0
    for k in key:
        if k is None or k is Ellipsis:
            continue
        tk = type(k)
        if tk is not int and tk is not slice and _int_index(k) is None:
            return None
        n_real += 1
    ndim = self._data.ndim
    if n_real > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    out, dim = self, 0
    for pos, k in enumerate(key):
        if type(k) is slice:
            start, stop, step = _slice_args(k)
            size = out._data.shape[dim]
            whole = step == 1 and not start and (stop is None or stop >= size)
            if not whole:
                out = _slice(out, dim, start, stop, step)
            dim += 1
        elif k is None:
            out = _unsqueeze(out, dim)
            dim += 1
        elif k is Ellipsis:
            dim += ndim - n_real
        else:
            if type(k) is not int:
                k = _int_index(k)
            size = out._data.shape[dim]
            if not -size <= k < size:
                raise _out_of_bounds(k, pos, size)
            out = _select(out, dim, k)
    return _alias(self) if out is self else out


def getitem(self, key):
    """``x[key]``: a view for ints, slices, None and Ellipsis; advanced indexing otherwise."""
    tk = type(key)
    if tk is int:  # x[i]
        shape = self._data.shape
        if not shape:
            raise IndexError(_ZERO_DIM_INDEX)
        if not -shape[0] <= key < shape[0]:
            raise _out_of_bounds(key, 0, shape[0])
        return _select(self, 0, key)
    if tk is slice:  # x[a:b]: recorded even when it spans the whole dim, as in PyTorch
        return _slice(self, 0, *_slice_args(key))
    if tk is tuple:
        out = _getitem_tuple(self, key)
        if out is not None:
            return out
    elif key is None:
        return _unsqueeze(self, 0)
    elif key is Ellipsis:
        return _alias(self)
    elif _int_index(key) is not None:
        return getitem(self, int(key))
    return index_adv(*_advanced(self, key))


def _as_index(k):
    """An advanced index as a tensor (a list or array becomes one, as in PyTorch)."""
    return k if isinstance(k, Tensor) else as_tensor(np.asarray(k))


def _advanced(self, key):
    """``(view, indices)`` for a key with advanced parts: ints, slices and None become views as
    in ``_getitem_tuple`` (PyTorch's applySlicing), the rest one ``index`` list with None where
    a dim is taken whole. So ``x[0, :, idx]`` is ``x[0][:, idx]``, as in PyTorch."""
    items = [k if k is None or k is Ellipsis or type(k) is slice or _int_index(k) is not None
             else _as_index(k) for k in (key if type(key) is tuple else (key,))]
    n_real = sum(0 if k is None or k is Ellipsis else k._data.ndim if isinstance(k, Tensor)
                 and k._data.dtype.kind == "b" else 1 for k in items)
    ndim = self._data.ndim
    if n_real > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    out, dim, indices = self, 0, []
    for pos, k in enumerate(items):
        if type(k) is slice:
            start, stop, step = _slice_args(k)
            size = out._data.shape[dim]
            if not (step == 1 and not start and (stop is None or stop >= size)):
                out = _slice(out, dim, start, stop, step)
            indices.append(None)
            dim += 1
        elif k is None:
            out = _unsqueeze(out, dim)
            indices.append(None)
            dim += 1
        elif k is Ellipsis:
            indices += [None] * (ndim - n_real)
            dim += ndim - n_real
        elif isinstance(k, Tensor):
            indices.append(k)
            dim += k._data.ndim if k._data.dtype.kind == "b" else 1
        else:
            k = _int_index(k)
            size = out._data.shape[dim]
            if not -size <= k < size:
                raise _out_of_bounds(k, pos, size)
            out = _select(out, dim, k)
    while indices and indices[-1] is None:
        indices.pop()
    return out, indices


defcomposite(getitem, name="__getitem__", api=False, method=False, torch="Tensor.__getitem__",
             samples=lambda rng: [
                 sample("int", rng.standard_normal((3, 4)), 1),
                 sample("neg_int_nc", nc(rng.standard_normal((3, 4))), -1),
                 sample("slice_step", rng.standard_normal((6, 4)), (slice(1, None, 2), slice(None, 3))),
                 sample("none_ellipsis", rng.standard_normal((2, 3, 4)), (Ellipsis, None, 1)),
                 sample("neg", rng.standard_normal((5,)), slice(-3, None)),
                 sample("slice_int", rng.standard_normal((3, 4)), (slice(1, 2), 1)),
                 sample("full_slices", rng.standard_normal((3, 4)), (slice(None), slice(0, 4))),
                 sample("ellipsis_0d", rng.standard_normal(()), Ellipsis),
                 sample("none", rng.standard_normal((3,)), None),
                 sample("ints_0d_out", rng.standard_normal((2, 3)), (1, -2)),
                 sample("empty", rng.standard_normal((3, 2)), slice(5, None)),
                 sample("adv_array", rng.standard_normal((5, 3)), np.array([0, 2, 2, 4])),
                 sample("adv_mask", rng.standard_normal((3, 4)), rng.standard_normal((3, 4)) > 0),
                 sample("adv_int_slice_array", rng.standard_normal((3, 4, 2)),
                        (0, slice(None), np.array([1, 0]))),
                 sample("adv_apart", rng.standard_normal((3, 4, 2)),
                        (np.array([0, 2]), slice(1, 3), np.array([1, 0]))),
                 sample("adv_none_ellipsis", rng.standard_normal((3, 4, 2)),
                        (None, Ellipsis, np.array([1, 0])))])


def setitem(self, key, value):
    if type(key) is int or type(key) is slice or _is_basic(key):
        getitem(self, key).copy_(value)
    else:
        out, indices = _advanced(self, key)
        out.index_put_(indices, value)


def _is_basic(key) -> bool:
    if type(key) is tuple:
        return all(k is None or k is Ellipsis or type(k) is slice or _int_index(k) is not None
                   for k in key)
    return key is None or key is Ellipsis or _int_index(key) is not None


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem


# --- functions torch spells out that are compositions of primitives ---
def square(input):
    return input.pow(2)  # as torch: a PowBackward0 node


def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 * tensor2``."""
    prod = tensor1 * tensor2
    return input + (prod if value == 1 else prod * value)


def _check_addcdiv(tensor1, tensor2) -> None:
    if not (tensor1.is_floating_point() or tensor1.is_complex()) and not (
            tensor2.is_floating_point() or tensor2.is_complex()):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will "
            "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
            "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer "
            "inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
            "behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all dtypes.")


def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 / tensor2`` (floating tensors only, as PyTorch now requires)."""
    _check_addcdiv(tensor1, tensor2)
    q = tensor1 / tensor2
    return input + (q if value == 1 else q * value)


def _addcmul_(self, tensor1, tensor2, *, value=1):
    return self.add_(tensor1 * tensor2, alpha=value)


def _addcdiv_(self, tensor1, tensor2, *, value=1):
    _check_addcdiv(tensor1, tensor2)
    return self.add_(tensor1 / tensor2, alpha=value)


Tensor.addcmul_ = _addcmul_
Tensor.addcdiv_ = _addcdiv_


def deg2rad(input):
    return input * (np.pi / 180.0)


def rad2deg(input):
    return input * (180.0 / np.pi)


def sgn(input):
    return input.sign()  # real tensors; complex sgn (z / |z|) is not supported


def diag(input, diagonal=0):
    """A 1-D input's values on a matrix diagonal; a matrix's diagonal as a new 1-D tensor."""
    if input.dim() == 1:
        return input.diag_embed(diagonal)
    if input.dim() != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")
    return input.diagonal(diagonal).clone()


def trace(input):
    if input.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    return input.diagonal().sum()


def swapaxes(input, axis0, axis1):
    return input.transpose(axis0, axis1)


def swapdims(input, dim0, dim1):
    return input.transpose(dim0, dim1)


def broadcast_to(input, size):
    return input.expand(size)


def take_along_dim(input, indices, dim=None):
    """``gather`` with broadcasting of ``input`` and ``indices`` outside ``dim`` (both flattened
    when ``dim`` is None)."""
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    d = dim % max(input.dim(), 1)
    shape_i, shape_x = list(indices.shape), list(input.shape)
    shape_i[d] = shape_x[d] = 1
    common = list(np.broadcast_shapes(tuple(shape_i), tuple(shape_x)))
    ix, xx = list(common), list(common)
    ix[d], xx[d] = indices.shape[d], input.shape[d]
    return input.expand(xx).gather(d, indices.expand(ix))


def _repeat_counts(counts, output_size):
    """Indices 0, 1, ... repeated by ``counts`` (drawn on the host: the output size is the data)."""
    host = _backend.to_device(counts, _backend.cpu) if type(counts) is not np.ndarray else counts
    idx = np.repeat(np.arange(host.shape[0]), host)
    return idx if type(counts) is np.ndarray else _backend.to_device(idx, _backend.device_of(counts))


_repeat_op = defop("repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor",
                   _repeat_counts, method=False, api=False, torch="torch.repeat_interleave",
                   samples=lambda rng: [sample("counts", np.array([1, 0, 3, 2])),
                                        sample("zeros", np.array([0, 0]))]).call


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along ``dim``) repeated ``repeats`` times; with only an integer
    tensor ``repeats``, the indices 0, 1, ... repeated by its counts."""
    if repeats is None:  # torch.repeat_interleave(repeats)
        return _repeat_op(input, output_size=output_size)
    if dim is None:
        input, dim = input.reshape(-1), 0
    d = dim % max(input.dim(), 1)
    n = input.shape[d]
    if isinstance(repeats, Tensor):
        counts = repeats.reshape(-1)
        if counts.shape[0] not in (1, n):
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{counts.shape[0]} and input.size(0) = {n}")
        counts = counts.expand(n)
    else:
        counts = _full((n,), int(repeats), dtype=D.int64, device=input.device)
    return input.index_select(d, _repeat_op(counts, output_size=output_size))


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim`` (after joining ``prepend`` and ``append``)."""
    if prepend is not None or append is not None:
        parts = [t if t.dim() else t.expand(tuple(input.shape[:-1]) + (1,)) for t in (prepend, input, append)
                 if t is not None]
        input = _call("cat")(parts, dim)
    for _ in range(n):
        m = input.shape[dim]
        input = input.narrow(dim, 1, max(m - 1, 0)) - input.narrow(dim, 0, max(m - 1, 0))
    return input


def floor_divide(input, other):
    return _call("div.Tensor_mode")(input, other, rounding_mode="floor")


def var_mean(input, dim=None, *, correction=None, keepdim=False, unbiased=None):
    c = correction if unbiased is None else int(unbiased)
    return input.var(dim, correction=c, keepdim=keepdim), input.mean(dim, keepdim=keepdim)


def std_mean(input, dim=None, *, correction=None, keepdim=False, unbiased=None):
    c = correction if unbiased is None else int(unbiased)
    return input.std(dim, correction=c, keepdim=keepdim), input.mean(dim, keepdim=keepdim)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors (``'ij'``: matrix indexing, the default, with PyTorch's
    warning when not named; ``'xy'``: Cartesian, the first two dims swapped)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
                      "argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    ts = list(tensors)
    if indexing == "xy" and len(ts) >= 2:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.numel() for t in ts)
    n = len(ts)
    grids = [t.reshape((1,) * i + (-1,) + (1,) * (n - i - 1)).expand(shape) for i, t in enumerate(ts)]
    if indexing == "xy" and n >= 2:  # the grids of the swapped inputs, handed back in input order
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """Pairwise ``p``-norm distances between the rows of ``x1`` (..., P, M) and ``x2`` (..., R, M)."""
    for name, t in (("X1", x1), ("X2", x2)):
        if t.dim() < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {t.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, dim=-1)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    prod = batch1.bmm(batch2)
    prod = prod if alpha == 1 else prod * alpha
    return prod if beta == 0 else prod + (input if beta == 1 else input * beta)


def tensordot(a, b, dims=2, out=None):
    """Contract ``dims`` (a count of trailing/leading dims, or two lists) of ``a`` and ``b``."""
    if isinstance(dims, int):
        da, db = list(range(a.dim() - dims, a.dim())), list(range(dims))
    elif isinstance(dims, Tensor):
        return tensordot(a, b, dims.tolist() if dims.dim() else int(dims.item()))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    da, db = [d % a.dim() for d in da], [d % b.dim() for d in db]
    fa = [d for d in range(a.dim()) if d not in da]
    fb = [d for d in range(b.dim()) if d not in db]
    k = 1
    for d in da:
        k *= a.shape[d]
    am = a.permute(fa + da).reshape(-1, k)
    bm = b.permute(db + fb).reshape(k, -1)
    return am.mm(bm).reshape([a.shape[d] for d in fa] + [b.shape[d] for d in fb])


def _r(rng, *s):
    return rng.standard_normal(s)


for _fn, _samples in (
    (square, lambda rng: [sample("2d", _r(rng, 3, 4)), sample("0d", _r(rng)), sample("int", np.arange(4))]),
    (addcmul, lambda rng: [sample("bcast", _r(rng, 3, 4), _r(rng, 4), _r(rng, 3, 1)),
                           sample("value", nc(_r(rng, 3, 4)), _r(rng, 3, 4), _r(rng, 3, 4), value=-0.5)]),
    (addcdiv, lambda rng: [sample("bcast", _r(rng, 3, 4), _r(rng, 4), rng.uniform(1, 2, (3, 1))),
                           sample("value", _r(rng, 3, 4), _r(rng, 3, 4), rng.uniform(1, 2, (3, 4)), value=2.0)]),
    (deg2rad, lambda rng: [sample("2d", _r(rng, 3, 4))]),
    (rad2deg, lambda rng: [sample("2d", nc(_r(rng, 3, 4)))]),
    (sgn, lambda rng: [sample("2d", _r(rng, 3, 4), no_grad=(0,))]),  # torch's grad: a ZeroTensor
    (diag, lambda rng: [sample("vec", _r(rng, 3)), sample("vec_off", _r(rng, 3), -1),
                        sample("mat", _r(rng, 3, 4)), sample("mat_off_nc", nc(_r(rng, 3, 4)), 1)]),
    (trace, lambda rng: [sample("sq", _r(rng, 3, 3)), sample("rect", _r(rng, 2, 4))]),
    (swapaxes, lambda rng: [sample("3d", _r(rng, 2, 3, 4), 0, -1)]),
    (swapdims, lambda rng: [sample("3d", _r(rng, 2, 3, 4), 1, 2)]),
    (broadcast_to, lambda rng: [sample("rows", _r(rng, 1, 4), (3, 4)), sample("new", _r(rng, 4), (2, 4))]),
    (take_along_dim, lambda rng: [
        sample("dim1", _r(rng, 3, 4), np.array([[0, 3], [1, 1], [2, 0]]), 1),
        sample("bcast", _r(rng, 3, 4), np.array([[0, 2, 1, 0]]), 0),
        sample("flat", _r(rng, 3, 4), np.array([11, 0, 5]))]),
    (repeat_interleave, lambda rng: [sample("int", _r(rng, 2, 3), 2),
                                     sample("dim_tensor", _r(rng, 3, 2), np.array([1, 0, 2]), 0),
                                     sample("neg_dim", nc(_r(rng, 2, 3)), 3, -1)]),
    (diff, lambda rng: [sample("1", _r(rng, 3, 5)), sample("n2_dim0", _r(rng, 4, 3), 2, 0),
                        sample("pre_app", _r(rng, 3, 4), 1, -1, _r(rng, 3, 2), _r(rng, 3, 1))]),
    (floor_divide, lambda rng: [sample("int", np.arange(-3, 9).reshape(3, 4), np.array([2, -3, 4, 5])),
                                sample("float_scalar", np.arange(-3, 9).reshape(3, 4) + 0.5, 2, no_grad=(0,))]),
    (var_mean, lambda rng: [sample("dim", _r(rng, 3, 4), 1), sample("all_c0", _r(rng, 3, 4), correction=0)]),
    (std_mean, lambda rng: [sample("keep", nc(_r(rng, 3, 4)), 0, keepdim=True)]),
    (meshgrid, lambda rng: [sample("ij", _r(rng, 3), _r(rng, 2), indexing="ij"),
                            sample("xy3", _r(rng, 3), _r(rng, 2), _r(rng, 4), indexing="xy")]),
    (cdist, lambda rng: [sample("p2", _r(rng, 3, 4), _r(rng, 2, 4)),
                         sample("p1_batched", _r(rng, 2, 3, 4), _r(rng, 2, 5, 4), 1.0)]),
    (baddbmm, lambda rng: [sample("scaled", _r(rng, 2, 3, 4), _r(rng, 2, 3, 5), _r(rng, 2, 5, 4), beta=0.5, alpha=2.0),
                           sample("bcast", _r(rng, 4), _r(rng, 2, 3, 5), _r(rng, 2, 5, 4))]),
    (tensordot, lambda rng: [sample("int", _r(rng, 2, 3, 4), _r(rng, 3, 4, 5)),
                             sample("lists", _r(rng, 2, 3, 4), _r(rng, 4, 3, 5), ([1, 2], [1, 0]))]),
):
    defcomposite(_fn, samples=_samples)


# --- Python operators ---
_rsub_scalar = _call("rsub.Scalar")
_pow = _call("pow")


def _rsub(self, other):
    t = type(other)
    if t is int or t is float:
        return _rsub_scalar(self, other)
    if isinstance(other, Tensor):
        return _call("rsub.Tensor")(self, other)
    return _rsub_scalar(self, other.item() if isinstance(other, np.generic) else other)


def _rdiv(self, other):
    return _call("div.Tensor_mode")(other, self)


def _floordiv(self, other):
    return _call("div.Tensor_mode")(self, other, rounding_mode="floor")


def _rfloordiv(self, other):
    return _call("div.Tensor_mode")(other, self, rounding_mode="floor")


def _rpow(self, other):
    return _pow(other, self)


def _rmod(self, other):
    return _call("remainder.Tensor")(other, self)


T = Tensor
T.__matmul__ = _call("matmul")
T.__rmatmul__ = lambda self, other: _call("matmul")(other, self)
T.mT = property(lambda self: self.transpose(-2, -1))
T.T = property(lambda self: self.permute(tuple(range(self.dim() - 1, -1, -1))))
T.mH = property(lambda self: self.transpose(-2, -1).conj())
T.H = property(lambda self: self.mH if self.dim() == 2 else _h_error(self))


def _h_error(t):
    raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {t.dim()}-D tensor. "
                       "For batches of matrices, consider using tensor.mH")
T.__add__ = T.__radd__ = _call("add.Tensor")
T.__sub__ = _call("sub.Tensor")
T.__rsub__ = _rsub
T.__mul__ = T.__rmul__ = _call("mul.Tensor")
T.__truediv__ = T.__div__ = _call("div.Tensor_mode")
T.__rtruediv__ = _rdiv
T.__floordiv__ = _floordiv
T.__rfloordiv__ = _rfloordiv
T.__mod__ = _call("remainder.Tensor")
T.__rmod__ = _rmod
T.__pow__ = _pow
T.__rpow__ = _rpow
T.__neg__ = _call("neg")
T.__abs__ = _call("abs")
T.__pos__ = lambda self: self
T.__eq__ = _call("eq.Tensor")
T.__ne__ = _call("ne.Tensor")
T.__lt__ = _call("lt.Tensor")
T.__le__ = _call("le.Tensor")
T.__gt__ = _call("gt.Tensor")
T.__ge__ = _call("ge.Tensor")
T.__and__ = T.__rand__ = _call("bitwise_and.Tensor")
T.__or__ = T.__ror__ = _call("bitwise_or.Tensor")
T.__xor__ = T.__rxor__ = _call("bitwise_xor.Tensor")
T.__invert__ = _call("bitwise_not")
T.__iadd__ = T.add_
T.__isub__ = T.sub_
T.__imul__ = T.mul_
T.__itruediv__ = T.div_
T.__hash__ = object.__hash__



# --- aliases and in-place forms of composites (their results written with copy_) ---
def _inplace_of(fn, name: str):
    def inplace(self, *args, **kwargs):
        # The composite may save self for backward: it reads a copy when a graph is recorded.
        src = self.clone() if self.requires_grad and _grad_state.grad_enabled else self
        return self.copy_(fn(src, *args, **kwargs))

    inplace.__name__ = inplace.__qualname__ = name
    inplace.__doc__ = f"``Tensor.{name}``: the out-of-place result written into ``self``."
    return inplace


for _name in ("square", "sgn", "deg2rad", "rad2deg", "floor_divide"):
    if not hasattr(Tensor, _name + "_"):
        setattr(Tensor, _name + "_", _inplace_of(getattr(Tensor, _name), _name + "_"))
for _other, _name in (("divide", "div"), ("true_divide", "div")):
    NAMESPACES[""].setdefault(_other, NAMESPACES[""][_name])
    if not hasattr(Tensor, _other):
        setattr(Tensor, _other, getattr(Tensor, _name))
    if not hasattr(Tensor, _other + "_"):
        setattr(Tensor, _other + "_", getattr(Tensor, _name + "_"))
for _name in ("logical_not", "bitwise_not"):
    if not hasattr(Tensor, _name + "_"):
        setattr(Tensor, _name + "_", _inplace_of(OPS[_name].call, _name + "_"))


# --- kron, block_diag, cov, corrcoef ---
def kron(input, other, *, out=None):
    """The Kronecker product: each element of ``input`` scales a copy of ``other``."""
    if out is not None:
        return write_out("kron", lambda: kron(input, other), (input, other), out)
    n = max(input.dim(), other.dim())
    a = input.reshape((1,) * (n - input.dim()) + tuple(input.shape))
    b = other.reshape((1,) * (n - other.dim()) + tuple(other.shape))
    ab = a.reshape([s for d in a.shape for s in (d, 1)]) * b.reshape([s for d in b.shape for s in (1, d)])
    return ab.reshape([x * y for x, y in zip(a.shape, b.shape, strict=True)])


def block_diag(*tensors):
    """The tensors (each 0-, 1- or 2-D) along the diagonal of a matrix of zeros."""
    mats = []
    for i, t in enumerate(tensors):
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t.dim()} dimensions")
        mats.append(t.reshape(1, -1) if t.dim() < 2 else t)
    dtype = D.result_type(list(tensors)) if tensors else D._default[0]
    cols = sum(m.shape[1] for m in mats)
    if not mats:
        return _full((1, 0), 0, dtype=dtype)
    rows, left = [], 0
    for m in mats:
        r, c = m.shape
        z = m.new_zeros
        rows.append(cat([z((r, left), dtype=dtype), m.to(dtype), z((r, cols - left - c), dtype=dtype)], 1))
        left += c
    return cat(rows, 0)


def _check_weights(name, w, n, integral):
    if w.dim() > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} "
                           f"with {w.dim()} dimensions")
    if w.numel() != n:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations "
                           f"in the input but got {w.numel()} != {n}")
    kind = D.to_dtype(w.dtype).np.kind
    if integral and kind not in "iub":
        raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                           f"{D.SHORT_NAMES[D.to_dtype(w.dtype).np]} dtype")
    if not integral and not D.to_dtype(w.dtype).is_floating_point:
        raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights "
                           f"with {D.SHORT_NAMES[D.to_dtype(w.dtype).np]} dtype")
    if bool((w < 0).any()):
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the rows (variables) of ``input`` over its columns (observations)."""
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input "
                           f"with {input.dim()} dimensions")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    if not x.is_floating_point() and not x.is_complex():
        x = x.to(D._default[0])
    n = x.shape[1]
    w = None
    if fweights is not None:
        _check_weights("fweights", fweights, n, True)
        w = fweights
    if aweights is not None:
        _check_weights("aweights", aweights, n, False)
        w = aweights if w is None else w * aweights
    if w is None:
        w_sum = n
        avg = x.mean(1)
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
    if w is None:
        norm = w_sum - correction
    elif correction == 0:
        norm = w_sum
    elif aweights is None:
        norm = w_sum - correction
    else:
        norm = w_sum - correction * (w * aweights).sum() / w_sum
    if float(norm) <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      "number of observations.", UserWarning, stacklevel=2)
        norm = norm * 0 if isinstance(norm, Tensor) else 0
    xm = x - avg.unsqueeze(1)
    xw = xm if w is None else xm * w
    return (xw @ xm.mT / norm).squeeze()


def corrcoef(input):
    """Pearson correlation coefficients of the rows of ``input`` (``cov`` normalised)."""
    c = cov(input)
    if c.dim() == 0:
        return c / c
    d = c.diagonal()
    std = d.sqrt()
    c = c / std.unsqueeze(1)
    c = c / std.unsqueeze(0)
    return c.clamp(-1, 1) if not c.is_complex() else c


for _fn, _samples in (
    (kron, lambda rng: [sample("2d", _r(rng, 2, 3), _r(rng, 3, 2)),
                        sample("mixed_nc", nc(_r(rng, 2, 3)), _r(rng, 4)),
                        sample("0d", _r(rng), _r(rng, 2))]),
    (cov, lambda rng: [sample("2d", _r(rng, 3, 5)), sample("1d", _r(rng, 5)),
                       sample("c0_nc", nc(_r(rng, 2, 4)), correction=0),
                       sample("fw", _r(rng, 3, 5), fweights=np.array([1, 2, 1, 3, 1])),
                       sample("aw", _r(rng, 2, 4), aweights=rng.uniform(0.5, 2, 4), no_grad=(1,)),
                       sample("both", _r(rng, 2, 4), correction=2, fweights=np.array([1, 2, 2, 1]),
                              aweights=rng.uniform(0.5, 2, 4))]),
    (corrcoef, lambda rng: [sample("2d", _r(rng, 3, 5)), sample("1d", _r(rng, 4)),
                            sample("int", np.array([[1, 2, 3], [3, 2, 1]]))]),
):
    defcomposite(_fn, samples=_samples)

defcomposite(block_diag, method=False, samples=lambda rng: [
    sample("mixed", _r(rng, 2, 3), _r(rng), _r(rng, 2), nc(_r(rng, 3, 2))),
    sample("one", _r(rng, 2, 2)),
    sample("int", np.arange(4).reshape(2, 2), _r(rng, 1, 2))])
