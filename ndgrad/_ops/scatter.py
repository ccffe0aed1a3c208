"""Indexing ops beyond ``index.py``: ``take``, ``index_fill``, ``index_copy``, ``masked_scatter``,
``scatter_reduce`` and the ``*_scatter`` functional forms of writes into a view
(``select_scatter``, ``slice_scatter``, ``diagonal_scatter``).

The writes are composites: a clone written in place through a view or ``__setitem__``, so the
gradient is the one of ``CopySlices``/``index_put_`` (zeros where overwritten, the slice for the
source), as PyTorch's. ``scatter_reduce`` is a primitive with its own formulas.
"""

from __future__ import annotations

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._tensor import Tensor, _wrap_dim
from .index import _coords
from .registry import NAMESPACES, defcomposite, defop
from .samples import nc, sample

_ns = NAMESPACES[""]


def _r(rng, *shape):
    return rng.standard_normal(shape)


def _key(dim, index):
    return (slice(None),) * dim + (index,)


# --- take, index_fill, index_copy, masked_scatter ---
def take(input, index):
    """Elements of ``input`` as if flattened, at ``index`` (negative indices count from the end)."""
    n = input.numel()
    if index.numel():
        bad = index[(index >= n) | (index < -n)]
        if bad.numel():
            raise IndexError(f"out of range: tried to access index {int(bad.reshape(-1)[0].item())} on a "
                             f"tensor of {n} elements.")
    return input.reshape(-1)[index]


def _index_check(fn, input, dim, index):
    if index.dtype != D.int64:
        raise IndexError(f"{fn}(): Expected dtype int64 for index.")
    if index.dim() > 1:
        raise IndexError(f"{fn}(): Index is supposed to be a vector")
    return _wrap_dim(dim, max(input.dim(), 1))


def index_fill_(self, dim, index, value):
    dim = _index_check("index_fill_", self, dim, index)
    self[_key(dim, index.reshape(-1))] = value
    return self


def index_fill(input, dim, index, value):
    return index_fill_(input.clone(), dim, index, value)


def index_copy_(self, dim, index, source):
    dim = _index_check("index_copy_", self, dim, index)
    n = index.numel()
    if source.dim() and source.shape[dim] != n:
        raise IndexError(f"index_copy_(): Number of indices ({n}) should be equal to source.size(dim) "
                         f"({source.shape[dim]})")
    self[_key(dim, index.reshape(-1))] = source
    return self


def index_copy(input, dim, index, source):
    return index_copy_(input.clone(), dim, index, source)


def masked_scatter_(self, mask, source):
    mask = mask.expand(self.shape) if tuple(mask.shape) != tuple(self.shape) else mask
    k = int(mask.sum().item())
    if source.numel() < k:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    self[mask] = source.reshape(-1)[:k]
    return self


def masked_scatter(input, mask, source):
    return masked_scatter_(input.clone(), mask, source)


Tensor.index_fill_ = index_fill_
Tensor.index_copy_ = index_copy_
Tensor.masked_scatter_ = masked_scatter_


# --- writes into a view, functionally ---
# Each writes through index_put_ on a clone (not copy_ into a view of it): the compile stack
# replays index_put_ faithfully, and the gradients are the same.
def _check_region(src, shape):
    if tuple(src.shape) != tuple(shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(shape)}")


def _positions_along(input, dim, picks):
    return _ns["arange"](input.shape[dim], device=input.device)[picks]


def select_scatter(input, src, dim, index):
    dim = _wrap_dim(dim, input.dim())
    shape = input.shape[:dim] + input.shape[dim + 1:]
    _check_region(src, shape)
    n = input.shape[dim]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} "
                         f"at dimension {dim}")
    return index_copy(input, dim, _positions_along(input, dim, slice(index % n, index % n + 1)),
                      src.unsqueeze(dim))


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    dim = _wrap_dim(dim, input.dim())
    pos = _positions_along(input, dim, slice(start, end, step))
    _check_region(src, input.shape[:dim] + (pos.numel(),) + input.shape[dim + 1:])
    return index_copy(input, dim, pos, src)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    d1, d2 = _wrap_dim(dim1, input.dim()), _wrap_dim(dim2, input.dim())
    _check_region(src, input.diagonal(offset, d1, d2).shape)
    moved = input.movedim((d1, d2), (-2, -1)).clone()
    k = src.shape[-1]
    rows = _ns["arange"](k, device=input.device) + max(-offset, 0)
    moved[..., rows, rows + offset] = src
    return moved.movedim((-2, -1), (d1, d2)).contiguous()


# --- scatter_reduce ---
_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _reduce_at(ufunc, out, key, vals) -> None:
    """``ufunc.at(out, key, vals)`` on any array library: off NumPy (CuPy has add.at only),
    positions named more than once are combined in rounds, one pending value per position."""
    if type(out) is np.ndarray or ufunc is np.add:
        ufunc.at(out, key, vals)
        return
    xp = _backend.namespace_of(out)
    keys = xp.broadcast_arrays(*key)
    flat = xp.ravel_multi_index(tuple(k.reshape(-1) for k in keys), out.shape)
    v, o = vals.reshape(-1), out.reshape(-1)
    while flat.size:
        _, first = xp.unique(flat, return_index=True)
        o[flat[first]] = ufunc(o[flat[first]], v[first])
        rest = xp.ones(flat.size, bool)
        rest[first] = False
        flat, v = flat[rest], v[rest]


def _identity(reduce, dtype):
    if reduce in ("amax", "amin"):
        big = np.inf if dtype.kind == "f" else np.iinfo(dtype).max
        return -big if reduce == "amax" else big
    return 1 if reduce == "prod" else 0


_ALIASES = {"max": "amax", "min": "amin"}  # NOTE(pytorch): accepted, though undocumented


def _scatter_reduce(x, dim, index, src, reduce, include_self):
    reduce = _ALIASES.get(reduce, reduce)
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    xp = _backend.namespace_of(x)
    out = x.reshape(x.shape or (1,)).copy()
    if index.size == 0:
        return out.reshape(x.shape)
    pos = _coords(x, dim, index, "scatter_reduce", src)
    vals = src.reshape(src.shape or (1,))[tuple(slice(0, n) for n in (index.shape or (1,)))]
    if not include_self:
        out[pos] = _identity(reduce, x.dtype)
    ufunc = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
             "amin": np.minimum}[reduce]
    _reduce_at(ufunc, out, pos, vals)
    if reduce == "mean":
        count = xp.full(out.shape, 1 if include_self else 0, np.int64)
        np.add.at(count, pos, xp.ones(vals.shape, np.int64))
        count = xp.maximum(count, 1)
        out = out // count if x.dtype.kind in "iub" else out / count
        if not include_self:
            untouched = xp.ones(out.shape, bool)
            untouched[pos] = False
            out = xp.where(untouched, x.reshape(out.shape), out)
    return out.astype(x.dtype, copy=False).reshape(x.shape)


def _hits(self, dim, index):
    """How many src elements land on each position of self."""
    return self.new_zeros(self.shape).scatter_add(dim, index, index.new_ones(index.shape).to(self.dtype))


def _to_src_shape(g, src):
    """``g`` (index's shape) padded with zeros up to ``src``'s shape."""
    if tuple(g.shape) == tuple(src.shape):
        return g
    pads = []
    for have, want in zip(reversed(g.shape), reversed(src.shape), strict=True):
        pads += [0, want - have]
    return NAMESPACES["nn.functional"]["pad"](g, pads)


def _eq_count(self, dim, index, src, result, include_self):
    """(self's elements equal to the result, src's, how many share each extreme)."""
    self_hit = (self == result).to(self.dtype) if include_self else \
        (self == result).to(self.dtype) * (_hits(self, dim, index) == 0).to(self.dtype)
    src_part = src[tuple(slice(0, s) for s in index.shape)]
    src_hit = (src_part == result.gather(dim, index)).to(self.dtype)
    return self_hit, src_hit, self_hit.scatter_add(dim, index, src_hit)


def _scatter_reduce_self_grad(grad, self, dim, index, src, reduce, include_self, result):
    reduce = _ALIASES.get(reduce, reduce)
    hit = _hits(self, dim, index)
    kept = grad if include_self else _ns["where"](hit > 0, 0.0, grad)
    if reduce == "sum":
        return kept
    if reduce == "mean":
        return kept / (hit + (1 if include_self else 0)).clamp(min=1)
    if reduce == "prod":  # NOTE: no special case for zeros (PyTorch has one)
        return kept * result / self if include_self else kept
    self_hit, _, count = _eq_count(self, dim, index, src, result, include_self)
    return grad * self_hit / count.clamp(min=1)


def _scatter_reduce_src_grad(grad, self, dim, index, src, reduce, include_self, result):
    reduce = _ALIASES.get(reduce, reduce)
    src_part = src[tuple(slice(0, s) for s in index.shape)]
    if reduce == "sum":
        g = grad.gather(dim, index)
    elif reduce == "mean":
        hit = _hits(self, dim, index)
        g = (grad / (hit + (1 if include_self else 0)).clamp(min=1)).gather(dim, index)
    elif reduce == "prod":
        g = (grad * result).gather(dim, index) / src_part
    else:
        _, src_hit, count = _eq_count(self, dim, index, src, result, include_self)
        g = (grad / count.clamp(min=1)).gather(dim, index) * src_hit
    return _to_src_shape(g, src)


def _scatter_reduce_samples(rng):
    index = np.array([[0, 1, 0, 2], [2, 2, 1, 0]])
    out = []
    for reduce in _REDUCES:
        out.append(sample(f"{reduce}", _r(rng, 3, 4) + 3 * (reduce == "prod"), 0, index,
                          _r(rng, 2, 4) + 3 * (reduce == "prod"), reduce))
        out.append(sample(f"{reduce}_excl", nc(_r(rng, 3, 4)) + 3 * (reduce == "prod"), 0, index,
                          _r(rng, 2, 4) + 3 * (reduce == "prod"), reduce, include_self=False))
    # src larger than index: only its leading block is read (torch's backward fails there)
    out.append(sample("big_src", _r(rng, 3, 4), 1, index[:, :3], _r(rng, 3, 5), "amax", no_grad=(0, 3)))
    out.append(sample("int_mean", np.arange(12).reshape(3, 4), 1, np.array([[0, 0, 1]] * 3),
                      np.arange(9).reshape(3, 3), "mean"))
    return out


defop("scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, "
      "bool include_self=True) -> Tensor", _scatter_reduce,
      {"self": _scatter_reduce_self_grad, "src": _scatter_reduce_src_grad},
      inplace="scatter_reduce_", samples=_scatter_reduce_samples)


for _fn, _samples in (
    (take, lambda rng: [sample("2d", _r(rng, 3, 4), np.array([[0, 11], [5, -1]])),
                        sample("nc", nc(_r(rng, 3, 4)), np.array([2, 2, 7]))]),
    (index_fill, lambda rng: [sample("scalar", _r(rng, 3, 4), 1, np.array([0, 2]), -1.5),
                              sample("tensor_value", _r(rng, 3, 4), 0, np.array([1]), _r(rng)),
                              sample("0d_index", nc(_r(rng, 3, 4)), -1, np.array(3), 2.0)]),
    (index_copy, lambda rng: [sample("dim0", _r(rng, 4, 3), 0, np.array([3, 0]), _r(rng, 2, 3)),
                              sample("dim1_nc", nc(_r(rng, 3, 4)), 1, np.array([1, 2, 0]), _r(rng, 3, 3))]),
    (masked_scatter, lambda rng: [sample("same", _r(rng, 3, 4), _r(rng, 3, 4) > 0, _r(rng, 12)),
                                  sample("bcast_mask", _r(rng, 3, 4), np.array([True, False, True, True]),
                                         _r(rng, 4, 4))]),
    (select_scatter, lambda rng: [sample("dim0", _r(rng, 3, 4), _r(rng, 4), 0, 1),
                                  sample("neg", nc(_r(rng, 3, 4)), _r(rng, 3), -1, -2)]),
    (slice_scatter, lambda rng: [sample("step", _r(rng, 6, 2), _r(rng, 3, 2), 0, 0, 6, 2),
                                 sample("dim1", _r(rng, 3, 5), _r(rng, 3, 2), 1, 1, 3),
                                 sample("default", _r(rng, 4), _r(rng, 4))]),
    (diagonal_scatter, lambda rng: [sample("main", _r(rng, 3, 3), _r(rng, 3)),
                                    sample("offset", _r(rng, 3, 4), _r(rng, 2), 2),
                                    sample("dims", _r(rng, 2, 3, 3), _r(rng, 2, 2), -1, 1, 2)]),
):
    defcomposite(_fn, samples=_samples)
