"""Indexing ops: advanced indexing, index_put_, gather/scatter, index_select/add, masks.

Advanced indexing is PyTorch's ``index.Tensor(self, indices)``: one index tensor (or None, the
whole dim) per leading dim; index tensors are never differentiable. Basic indexing (ints, slices, None, Ellipsis) is a chain of the view ops
``select.int``, ``slice.Tensor``, ``unsqueeze`` and ``alias``, built as PyTorch builds it by
``getitem`` in ``composite.py``, which picks basic or advanced indexing.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _backend
from .._tensor import Tensor, _wrap_dim
from .pointwise import where
from .registry import NAMESPACES, OPS, definplace, defop
from .samples import nc, sample


def _key(indices, x):
    """PyTorch's index list (one entry per leading dim, None for a whole dim) as a NumPy key,
    its host arrays moved to ``x``'s device (a device kernel reads them)."""
    for a in indices:
        if a is not None and a.dtype.kind not in "biu":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    key = tuple(slice(None) if a is None else a for a in indices)
    if type(x) is np.ndarray:
        return key
    dev = _backend.device_of(x)
    return tuple(_backend.to_device(k, dev) if isinstance(k, np.ndarray) else k for k in key)


def _index_backward(grad, shape, indices):
    out = _backend.namespace_of(grad).zeros(shape, grad.dtype)
    # repeated indices accumulate (np.add.at reaches CuPy's ufunc.at from CuPy 12.1)
    np.add.at(out, _key(indices, grad), grad)
    return out


index_backward = defop("_index_backward(Tensor grad, int[] shape, Tensor?[] indices) -> Tensor",
                       _index_backward, {"grad": lambda grad, indices: index_adv(grad, indices)},
                       jvp="linear", method=False, api=False).call


def _index(x, indices):
    try:
        return x[_key(indices, x)]
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None


# Index tensors are arguments (never constants), so a capture sees where they come from.
index_adv = defop("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", _index,
                  {"self": lambda grad, self_shape, indices: index_backward(grad, self_shape, indices)},
                  jvp="linear", method=False, api=False, torch="torch.ops.aten.index.Tensor",
                  samples=lambda rng: [
                      sample("int_array", rng.standard_normal((5, 3)), [np.array([0, 2, 2, 4])]),
                      sample("bool_mask", rng.standard_normal((3, 4)), [rng.standard_normal((3, 4)) > 0]),
                      sample("mixed", rng.standard_normal((3, 4, 2)), [None, np.array([[0, 1], [3, 3]])]),
                      sample("apart", rng.standard_normal((3, 4, 2)), [np.array([0, 2]), None, np.array([1, 0])]),
                      sample("two_arrays", rng.standard_normal((3, 4)), [np.array([0, 2]), np.array([1, 3])])]).call


def _index_put(x, indices, values, accumulate):
    out = x.copy()
    key = _key(indices, x)
    if accumulate:
        np.add.at(out, key, values)
    else:
        out[key] = values
    return out


def _index_put_self_grad(grad, indices, accumulate):
    return grad if accumulate else index_put(grad, indices, 0.0)


index_put = defop(
    "index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor", _index_put,
    {"self": _index_put_self_grad, "values": lambda grad, indices: index_adv(grad, indices)}, jvp="linear",
    promote=1, promote_args=("self",), inplace="index_put_",
    samples=lambda rng: [
        sample("put", rng.standard_normal((5, 3)), [np.array([0, 3])], rng.standard_normal((2, 3))),
        sample("accumulate", rng.standard_normal((5,)), [np.array([1, 1, 2])], rng.standard_normal((3,)), True),
        sample("bcast_value", rng.standard_normal((4, 3)), [np.array([2])], rng.standard_normal((3,)))]).call


# --- gather / scatter ---
_INT_INDEX = (np.dtype(np.int32), np.dtype(np.int64))
_C_NAMES = {"b": "bool", "i1": "signed char", "u1": "unsigned char", "i2": "short int", "i4": "int",
            "i8": "long int", "f2": "c10::Half", "f4": "float", "f8": "double"}
_TYPE = {"i1": "Char", "u1": "Byte", "i2": "Short", "i4": "Int", "i8": "Long", "f2": "Half",
         "f4": "Float", "f8": "Double", "b1": "Bool"}


def _tname(a) -> str:
    return _TYPE.get(a.dtype.str[1:], str(a.dtype))


def _coords(x, dim, index, who, src=None):
    """The advanced-index tuple that addresses ``x`` at ``index`` along ``dim`` (PyTorch's checks).

    0-d tensors count as 1-d (as in PyTorch), so the tuple indexes ``x.reshape(-1)`` then."""
    if index.dtype not in _INT_INDEX:
        raise RuntimeError(f"{who}(): Expected dtype int32/int64 for index")
    d = _wrap_dim(dim, x.ndim)
    xs, ixs = x.shape or (1,), index.shape or (1,)
    if len(ixs) != len(xs):
        what = "input" if who == "gather" else "self"
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {what} tensor")
    if src is not None and len(src.shape or (1,)) != len(xs):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    for k, n in enumerate(ixs):
        if src is None and k != d and n > xs[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index {list(ixs)} to be no "
                               f"larger than self {list(xs)} apart from dimension {d}")
        if src is not None and (k != d and n > xs[k] or n > (src.shape or (1,))[k]):
            raise RuntimeError(f"Expected index {list(ixs)} to be no larger than self {list(xs)} apart from "
                               f"dimension {d} and to be no larger size than src {list(src.shape or (1,))}")
    ia = index.reshape(ixs)
    bad = (ia < 0) | (ia >= xs[d])
    if bad.any():
        raise RuntimeError(f"index {int(ia[bad].flat[0])} is out of bounds for dimension {d} with size {xs[d]}")
    xp = _backend.namespace_of(ia)
    coords = list(xp.ix_(*(xp.arange(n) for n in ixs)))  # sparse np.indices (CuPy's is dense)
    coords[d] = ia
    return tuple(coords)


def _gather(x, dim, index, sparse_grad):
    key = _coords(x, dim, index, "gather")
    return x.reshape(x.shape or (1,))[key].reshape(index.shape)


gather = defop(
    "gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", _gather,
    {"self": lambda grad, self_shape, dim, index: scatter_add(grad.new_zeros(self_shape), dim, index, grad)},
    jvp="linear", samples=lambda rng: [
        sample("dim1", rng.standard_normal((3, 4)), 1, np.array([[0, 1, 1], [3, 3, 0], [2, 0, 1]])),
        sample("neg_dim_small", nc(rng.standard_normal((3, 4))), -2, np.array([[2, 0], [2, 2]])),
        sample("int32", rng.standard_normal((2, 3, 2)), 2, np.array([[[1], [0]]], np.int32)),
        sample("0d", rng.standard_normal(()), 0, np.array(0))]).call


def _src_values(src, index):
    return src.reshape(src.shape or (1,))[tuple(slice(0, n) for n in (index.shape or (1,)))]


def _multiply_at(out, key, vals) -> None:
    """``np.multiply.at(out, key, vals)`` on any array library (CuPy has no ``multiply.at``):
    off NumPy, positions named more than once are multiplied in rounds, each round taking one
    pending value per position. ``out`` is C-contiguous."""
    if type(out) is np.ndarray:
        np.multiply.at(out, key, vals)
        return
    xp = _backend.namespace_of(out)
    keys = xp.broadcast_arrays(*key)
    flat = xp.ravel_multi_index(tuple(k.reshape(-1) for k in keys), out.shape)
    v = vals.reshape(-1)
    o = out.reshape(-1)
    while flat.size:
        _, first = xp.unique(flat, return_index=True)
        o[flat[first]] *= v[first]
        rest = xp.ones(flat.size, bool)
        rest[first] = False
        flat, v = flat[rest], v[rest]


def _scatter(x, dim, index, src, reduce=None):
    if not isinstance(src, (int, float, complex, np.generic)):  # a tensor's array (any device)
        if src.dtype != x.dtype:
            raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
        key = _coords(x, dim, index, "scatter", src)
        vals = _src_values(src, index)
    else:
        key = _coords(x, dim, index, "scatter")
        vals = _backend.namespace_of(x).asarray(src, dtype=x.dtype)
    out = x.reshape(x.shape or (1,)).copy()
    if reduce is None:
        out[key] = vals
    elif reduce in ("add", "multiply"):  # ufunc.at: duplicate indices accumulate
        vals = np.broadcast_to(vals, np.broadcast_shapes(*(k.shape for k in key)))
        if reduce == "add":
            np.add.at(out, key, vals)
        else:
            _multiply_at(out, key, vals)
    else:
        raise RuntimeError("reduce argument must be either add or multiply.")
    return out.reshape(x.shape)


def _scatter_no_grad(grad):
    raise RuntimeError("derivative for aten::scatter is not implemented")


def _scatter_samples(value):
    def make(rng):
        other = (lambda shape: 1.5) if value else (lambda shape: rng.standard_normal(shape))
        return [
            sample("dim1", rng.standard_normal((3, 4)), 1, np.array([[0, 3], [2, 1], [1, 2]]), other((3, 2))),
            sample("dim0_nc", nc(rng.standard_normal((3, 4))), 0, np.array([[2, 0, 1, 1]]), other((1, 4))),
            sample("neg_dim", rng.standard_normal((2, 5)), -1, np.array([[4], [0]]), other((2, 1))),
            sample("0d", rng.standard_normal(()), 0, np.array(0), other(()))]
    return make


def _scatter_self_grad(grad, dim, index):
    return grad.scatter(dim, index, 0.0)


scatter_src = defop(
    "scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", _scatter,
    {"self": _scatter_self_grad, "src": lambda grad, dim, index: grad.gather(dim, index)},
    jvp="linear", api=False, method=False, torch="torch.scatter", samples=_scatter_samples(False))
scatter_value = defop(
    "scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor", _scatter,
    {"self": _scatter_self_grad},
    jvp=lambda self_t, dim, index: scatter_value.call(self_t, dim, index, 0),
    api=False, method=False, torch="torch.scatter", samples=_scatter_samples(True))
# NOTE(pytorch): scatter with reduce= has no derivative (torch raises at backward, so do we).
scatter_reduce_src = defop(
    "scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor", _scatter,
    {"self": _scatter_no_grad, "src": _scatter_no_grad}, api=False, method=False, gradcheck=False,
    torch="torch.scatter", node_name="ScatterBackward1",
    samples=lambda rng: [
        sample(f"{r}_dup", rng.standard_normal((3, 4)), 1, np.array([[0, 0], [2, 1], [1, 1]]),
               rng.standard_normal((3, 2)), reduce=r, no_grad=(0, 3)) for r in ("add", "multiply")])
scatter_reduce_value = defop(
    "scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce) -> Tensor",
    _scatter, {"self": _scatter_no_grad}, api=False, method=False, gradcheck=False,
    torch="torch.scatter", node_name="ScatterBackward2",
    samples=lambda rng: [sample(f"{r}_dup", rng.standard_normal((3, 4)), 0, np.array([[0, 0, 2], [0, 1, 1]]),
                                2.5, reduce=r, no_grad=(0,)) for r in ("add", "multiply")])
_SCATTER_IP = {rec: definplace(rec, rec.name.replace("scatter", "scatter_")) for rec in
               (scatter_src, scatter_value, scatter_reduce_src, scatter_reduce_value)}


def _scatter_rec(src, value, reduce):
    if (src is None) == (value is None):
        raise TypeError("scatter() received an invalid combination of arguments - expected one of "
                        "src (Tensor) or value (Number)")
    if isinstance(src if value is None else value, Tensor):
        return scatter_src if reduce is None else scatter_reduce_src
    return scatter_value if reduce is None else scatter_reduce_value


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """``torch.scatter(input, dim, index, src|value, *, reduce=None)``."""
    rec = _scatter_rec(src, value, reduce)
    v = src if value is None else value
    return rec.call(input, dim, index, v) if reduce is None else rec.call(input, dim, index, v, reduce=reduce)


def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    rec = _SCATTER_IP[_scatter_rec(src, value, reduce)]
    v = src if value is None else value
    return rec.call(self, dim, index, v) if reduce is None else rec.call(self, dim, index, v, reduce=reduce)


def _scatter_add(x, dim, index, src):
    if src.dtype != x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    key = _coords(x, dim, index, "scatter", src)
    out = x.reshape(x.shape or (1,)).copy()
    np.add.at(out, key, _src_values(src, index))  # duplicate indices accumulate
    return out.reshape(x.shape)


scatter_add = defop(
    "scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", _scatter_add,
    {"self": lambda grad: grad, "src": lambda grad, dim, index: grad.gather(dim, index)},
    jvp="linear", inplace="scatter_add_",
    samples=lambda rng: [
        sample("dup", rng.standard_normal((3, 4)), 1, np.array([[0, 0, 3], [2, 2, 2], [1, 0, 1]]),
               rng.standard_normal((3, 3))),
        sample("dim0_nc", nc(rng.standard_normal((3, 4))), 0, np.array([[2, 0, 2, 2], [2, 1, 0, 2]]),
               nc(rng.standard_normal((2, 4)))),
        sample("small_index", rng.standard_normal((4, 3)), -2, np.array([[3], [3]]), rng.standard_normal((2, 1))),
        sample("0d", rng.standard_normal(()), 0, np.array([0, 0]), rng.standard_normal((2,)))]).call


# --- index_select / index_add ---
def _index_vector(x, dim, index, who):
    """``(dim, index as a 1-d array)`` for index_select / index_add, with PyTorch's checks."""
    if index.ndim > 1:
        if who == "index_select":
            raise IndexError("index_select(): Index is supposed to be a vector")
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{_tname(index)} and size: {list(index.shape)}")
    return _wrap_dim(dim, x.ndim), index.reshape(-1)


def _index_select(x, dim, index):
    if index.dtype not in _INT_INDEX:
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    d, idx = _index_vector(x, dim, index, "index_select")
    size = x.shape[d] if x.ndim else 1
    if x.ndim == 0 and idx.size != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {idx.size} value(s)")
    bad = (idx < 0) | (idx >= size)
    if bad.any():
        raise RuntimeError(f"INDICES element is out of DATA bounds, id={int(idx[bad][0])} axis_dim={size}")
    return x.copy() if x.ndim == 0 else np.take(x, idx, axis=d)


index_select = defop(
    "index_select(Tensor self, int dim, Tensor index) -> Tensor", _index_select,
    {"self": lambda grad, self_shape, dim, index: grad.new_zeros(self_shape).index_add(dim, index, grad)},
    jvp="linear", samples=lambda rng: [
        sample("dup", rng.standard_normal((3, 4)), 1, np.array([0, 3, 3, 1, 0])),
        sample("nc_neg_dim", nc(rng.standard_normal((3, 4))), -2, np.array([2, 0])),
        sample("int32_0d_index", rng.standard_normal((4, 2)), 0, np.array(3, np.int32)),
        sample("0d", rng.standard_normal(()), 0, np.array([0]))]).call


def _index_add(x, dim, index, source, alpha):
    if index.dtype not in _INT_INDEX:
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: {_tname(index)}")
    d, idx = _index_vector(x, dim, index, "index_add")
    if source.dtype != x.dtype:
        raise RuntimeError(f"index_add_(): self ({_tname(x)}) and source ({_tname(source)}) must have the same "
                           "scalar type")
    xs, ss = x.shape or (1,), source.shape or (1,)
    if (source.ndim > 1 or source.size != 1) if x.ndim == 0 else source.ndim != x.ndim or any(
            a != b for k, (a, b) in enumerate(zip(xs, ss)) if k != d):
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(x.shape)} source.shape = {list(source.shape)}")
    if idx.size != ss[d]:
        raise RuntimeError(f"index_add_(): Number of indices ({idx.size}) should be equal to source.size(dim): "
                           f"({ss[d]}), for dim: {d}")
    bad = (idx < 0) | (idx >= xs[d])
    if bad.any():
        raise RuntimeError(f"index {int(idx[bad][0])} is out of bounds for dimension {d} with size {xs[d]}")
    vals = source.reshape(ss) if alpha == 1 else (source.reshape(ss) * alpha).astype(x.dtype)
    out = x.reshape(xs).copy()
    _add_rows(np.moveaxis(out, d, 0), idx, np.moveaxis(vals, d, 0))
    return out.reshape(x.shape)


def _add_rows(out, idx, vals) -> None:
    """``out[idx[k]] += vals[k]`` along axis 0, repeated indices accumulating. Floats into a
    C-contiguous ``out``: one ``add.at`` over flat positions (NumPy's fast 1-d path, CuPy's
    scatter-add; 5x a float64 ``bincount`` table, 2x sorting and ``reduceat``), accumulated in the
    array's dtype as PyTorch's CPU kernel does. Otherwise the rows sorted by index and summed per
    index in one ``reduceat`` (still much faster than ``np.add.at`` for rows)."""
    if not idx.size:
        return
    if vals.dtype.kind == "f" and out.flags.c_contiguous:
        inner = math.prod(out.shape[1:])
        xp = _backend.namespace_of(vals)
        flat = (idx.reshape(-1, 1) * inner + xp.arange(inner)).reshape(-1)
        np.add.at(out.reshape(-1), flat, vals.reshape(-1))
        return
    order = np.argsort(idx, kind="stable")
    sidx = idx[order]
    first = _backend.namespace_of(sidx).ones(1, bool)
    starts = np.flatnonzero(np.concatenate((first, sidx[1:] != sidx[:-1])))
    out[sidx[starts]] += np.add.reduceat(vals[order], starts, axis=0)


def _index_add_source_grad(grad, dim, index, alpha, source_shape):
    g = grad.index_select(dim, index).reshape(source_shape)
    return g if alpha == 1 else g * alpha


index_add = defop(
    "index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor", _index_add,
    {"self": lambda grad: grad, "source": _index_add_source_grad}, jvp="linear",
    inplace="index_add_",
    samples=lambda rng: [
        sample("dup", rng.standard_normal((3, 4)), 1, np.array([0, 3, 3, 0, 0]), rng.standard_normal((3, 5))),
        sample("alpha_nc", nc(rng.standard_normal((3, 4))), 0, np.array([2, 2]), nc(rng.standard_normal((2, 4))),
               alpha=-1.5),
        sample("0d", rng.standard_normal(()), 0, np.array([0]), rng.standard_normal(())),
        sample("0d_index", rng.standard_normal((3, 2)), -2, np.array(1, np.int32), rng.standard_normal((1, 2)))]).call


# --- masks ---
def _check_mask(mask, who):
    if mask.dtype != np.bool_:
        if who == "masked_select":
            raise RuntimeError("masked_select: expected BoolTensor for mask")
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_C_NAMES.get(mask.dtype.str[1:], str(mask.dtype))}")


def _masked_fill(x, mask, value):
    _check_mask(mask, "masked_fill")
    if getattr(value, "ndim", 0):
        raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    return np.where(mask, _backend.namespace_of(x).asarray(value).astype(x.dtype), x)


def _masked_fill_samples(value):
    def make(rng):
        v = (lambda: rng.standard_normal(())) if value else (lambda: -1.5)
        return [
            sample("same", rng.standard_normal((3, 4)), rng.standard_normal((3, 4)) > 0, v()),
            sample("bcast_mask_nc", nc(rng.standard_normal((3, 4))), rng.standard_normal((4,)) > 0, v()),
            sample("bcast_self", rng.standard_normal((4,)), rng.standard_normal((2, 4)) > 0, v()),
            sample("0d", rng.standard_normal(()), np.array(True), v())]
    return make


masked_fill_scalar = defop(
    "masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor", _masked_fill,
    {"self": lambda grad, mask: grad.masked_fill(mask, 0)},
    jvp=lambda self_t, mask: self_t.masked_fill(mask, 0), api=False, method=False,
    torch="torch.masked_fill", inplace="masked_fill_", samples=_masked_fill_samples(False))
masked_fill_tensor = defop(
    "masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor", _masked_fill,
    {"self": lambda grad, mask: grad.masked_fill(mask, 0),
     "value": lambda grad, mask: where(mask, grad, 0.0).sum()}, jvp="linear",
    api=False, method=False, torch="torch.masked_fill", node_name="MaskedFillBackward1",
    samples=_masked_fill_samples(True))
_masked_fill_tensor_ = definplace(masked_fill_tensor, "masked_fill_.Tensor")
delattr(Tensor, "masked_fill_.Tensor")


def masked_fill(input, mask, value):
    """``torch.masked_fill(input, mask, value)``: ``value`` is a number or a 0-d tensor."""
    return (masked_fill_tensor if isinstance(value, Tensor) else masked_fill_scalar).call(input, mask, value)


def masked_fill_(self, mask, value):
    return (_masked_fill_tensor_ if isinstance(value, Tensor) else OPS["masked_fill_"]).call(self, mask, value)


def _masked_select(x, mask):
    _check_mask(mask, "masked_select")
    xb, mb = np.broadcast_arrays(x, mask)
    return xb[mb]


def _masked_select_grad(grad, self_shape, mask):
    shape = np.broadcast_shapes(self_shape, mask.shape)
    return index_backward(grad, shape, [mask.expand(shape)])


masked_select = defop(
    "masked_select(Tensor self, Tensor mask) -> Tensor", _masked_select, {"self": _masked_select_grad},
    jvp="linear", samples=lambda rng: [
        sample("same", rng.standard_normal((3, 4)), rng.standard_normal((3, 4)) > 0),
        sample("bcast_mask_nc", nc(rng.standard_normal((3, 4))), rng.standard_normal((3, 1)) > 0),
        sample("bcast_self", rng.standard_normal((4,)), rng.standard_normal((2, 4)) > 0),
        sample("0d", rng.standard_normal(()), np.array(True))]).call


for _name, _fn in (("scatter", scatter), ("scatter_", scatter_), ("masked_fill", masked_fill),
                   ("masked_fill_", masked_fill_)):
    _fn.__name__ = _fn.__qualname__ = _name
    setattr(Tensor, _name, _fn)
    if not _name.endswith("_"):
        NAMESPACES[""][_name] = _fn
for _rec in _SCATTER_IP.values():
    delattr(Tensor, _rec.name)
