"""Sorting and selection ops: sort, argsort, msort, topk, kthvalue, median, nanmedian, mode,
unique, unique_consecutive, nonzero, count_nonzero, searchsorted, bucketize.

Every order is NumPy's stable sort, which puts NaN last, as PyTorch sorts NaN as the largest value.
Gradients of the value-selecting ops scatter ``grad`` back at the chosen indices with index ops
(``scatter_add``, ``select_backward``), so they differentiate again.
"""

from __future__ import annotations

import numpy as np

from .. import _backend, return_types
from .. import _dtype as D
from .._tensor import Tensor, _wrap_dim
from .index import scatter_add
from .pointwise import where
from .reduce import _axis, _publish, select_backward, take_along
from .registry import defcomposite, defop, write_out
from .samples import nc, sample

_I64 = np.dtype(np.int64)


def _argsort(x, d, descending):
    """Stable argsort along ``d``. Descending sorts the reversed axis ascending and reverses the
    result: equal elements keep their original order for every dtype (sorting ``-x`` would not
    for unsigned, bool or NaN), and NaN comes first, as PyTorch's largest value."""
    if not descending:
        return np.argsort(x, axis=d, kind="stable").astype(_I64, copy=False)
    idx = np.flip(np.argsort(np.flip(x, d), axis=d, kind="stable"), d)
    return (x.shape[d] - 1) - idx.astype(_I64, copy=False)


def _perm_backward(grad, indices, dim, self_shape):
    return scatter_add(grad.new_zeros(self_shape), dim, indices, grad)


def _perm_jvp(self_t, indices, dim):
    """The values' tangent: the tangent gathered as the values were; none for the indices."""
    return (self_t.gather(dim, indices) if self_t.dim() else self_t), None


# --- sort / argsort / msort ---
def _sort(x, dim, descending, stable):
    d = _wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        return x.copy(), _backend.namespace_of(x).zeros((), _I64)
    idx = _argsort(x, d, descending)
    return np.take_along_axis(x, idx, d), idx


def _sort_samples(rng):
    return [sample("default", rng.standard_normal((3, 4))),
            sample("neg_dim_desc", rng.standard_normal((2, 3, 4)), -2, True),
            sample("nc_dim0", nc(rng.standard_normal((3, 4))), 0),
            sample("stable", rng.standard_normal((5,)), stable=True),
            sample("0d", rng.standard_normal(())),
            sample("int_ties_desc", np.array([[3, 1, 3, 1, 2], [0, 0, 5, 0, 5]]), dim=1, descending=True,
                   stable=True),
            sample("bool_ties", np.array([True, False, True, False]), stable=True)]


_sort_rec = defop(
    "sort(Tensor self, int dim=-1, bool descending=False, *, bool? stable=False) -> (Tensor values, Tensor indices)",
    _sort, {"self": lambda grad, indices, dim, self_shape: _perm_backward(grad, indices, dim, self_shape)},
    jvp=_perm_jvp, api=False, method=False, torch="torch.sort", samples=_sort_samples)


def sort(input, dim=-1, descending=False, *, stable=False):
    """``torch.sort(input, dim=-1, descending=False, *, stable=False)`` -> (values, indices)."""
    return return_types.sort(*_sort_rec.call(input, dim, descending, stable=stable))


_publish("sort", sort)


def _argsort_fwd(x, dim, descending, stable):
    d = _wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        return _backend.namespace_of(x).zeros((), _I64)
    return _argsort(x, d, descending)


defop("argsort(Tensor self, int dim=-1, bool descending=False, *, bool stable=False) -> Tensor", _argsort_fwd,
      samples=lambda rng: [
          sample("default", rng.standard_normal((3, 4))),
          sample("neg_dim_desc", nc(rng.standard_normal((2, 3, 4))), -2, True),
          sample("0d", rng.standard_normal(())),
          sample("int_ties_desc", np.array([[3, 1, 3, 1, 2], [0, 0, 5, 0, 5]]), dim=-1, descending=True,
                 stable=True)])


def msort(input):
    """``torch.msort(input)``: ``input`` sorted along its first dimension."""
    return _sort_rec.call(input, 0, False)[0]


defcomposite(msort, samples=lambda rng: [sample("2d", rng.standard_normal((4, 3))),
                                         sample("nc", nc(rng.standard_normal((3, 4)))),
                                         sample("0d", rng.standard_normal(()))])


# --- topk ---
def _topk(x, k, dim, largest, sorted):
    d = _wrap_dim(dim, x.ndim)
    if not 0 <= k <= (x.shape[d] if x.ndim else 1):
        raise RuntimeError("selected index k out of range")
    if x.dtype == np.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    if x.ndim == 0:
        return x.copy(), _backend.namespace_of(x).zeros((), _I64)
    # NOTE(pytorch): sorted=False leaves the order unspecified; the sorted order is one such order.
    idx = _argsort(x, d, largest)[(slice(None),) * d + (slice(0, k),)]
    return np.take_along_axis(x, idx, d), idx


_topk_rec = defop(
    "topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
    _topk, {"self": lambda grad, indices, dim, self_shape: _perm_backward(grad, indices, dim, self_shape)},
    jvp=_perm_jvp, api=False, method=False, torch="torch.topk",
    samples=lambda rng: [sample("k2", rng.standard_normal((3, 5)), 2),
                         sample("smallest_neg_dim", rng.standard_normal((2, 4, 3)), 3, -2, False),
                         sample("nc_dim0", nc(rng.standard_normal((3, 4))), 3, 0),
                         sample("k0", rng.standard_normal((3, 4)), 0),
                         sample("0d", rng.standard_normal(()), 1),
                         sample("int", np.array([[3, 1, 7, 2], [0, 4, 5, 9]]), 2)])


def topk(input, k, dim=-1, largest=True, sorted=True):
    """``torch.topk(input, k, dim=-1, largest=True, sorted=True)`` -> (values, indices)."""
    return return_types.topk(*_topk_rec.call(input, k, dim, largest, sorted))


_publish("topk", topk)


# --- kthvalue / median / nanmedian / mode ---
def _pick_sorted(x, d, keepdim, pos):
    """Values and indices of the elements at ascending-sorted position ``pos`` along ``d``
    (``pos``: an int or an int64 array with ``d`` kept at size 1)."""
    xp = _backend.namespace_of(x)
    if x.ndim == 0:
        return x.copy(), xp.zeros((), _I64)
    idx = _argsort(x, d, False)
    if isinstance(pos, int):
        shape = list(x.shape)
        shape[d] = 1
        pos = xp.full(shape, pos, _I64)
    i = np.take_along_axis(idx, pos, d)
    v = np.take_along_axis(x, i, d)
    return (v, i) if keepdim else (np.squeeze(v, d), np.squeeze(i, d))


def _check_nonempty(name, x, d):
    if x.ndim and x.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _kthvalue(x, k, dim, keepdim):
    d = _wrap_dim(dim, x.ndim)
    if not 1 <= k <= (x.shape[d] if x.ndim else 1):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return _pick_sorted(x, d, keepdim, k - 1)


def _selection_samples(extra):
    def make(rng):
        return [sample("dim1", rng.standard_normal((3, 5)), *extra, 1),
                sample("neg_dim_keep", rng.standard_normal((2, 4, 3)), *extra, -2, True),
                sample("nc_dim0", nc(rng.standard_normal((3, 4))), *extra, 0),
                sample("0d", rng.standard_normal(()), *((1,) if extra else ()), 0),
                sample("int", np.array([[3, 1, 7, 2], [0, 4, 5, 9]]), *extra, -1)]
    return make


def _select_grad(grad, indices, dim, self_shape, keepdim):
    return select_backward(grad, indices, dim, self_shape, keepdim)


def _select_jvp(self_t, indices, dim, keepdim):
    return take_along(self_t, indices, dim, keepdim), None


_kth_rec = defop(
    "kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)",
    _kthvalue, {"self": _select_grad}, jvp=_select_jvp,
    api=False, method=False, torch="torch.kthvalue",
    samples=_selection_samples((2,)))


def kthvalue(input, k, dim=-1, keepdim=False):
    """``torch.kthvalue(input, k, dim=-1, keepdim=False)`` -> (values, indices)."""
    return return_types.kthvalue(*_kth_rec.call(input, k, dim, keepdim))


_publish("kthvalue", kthvalue)


def _median_pos(x, d, ignore_nan):
    """Sorted position of the lower median along ``d``. NaN sorts last; ``median`` picks the first
    NaN of a row holding one (PyTorch returns NaN and that index), ``nanmedian`` skips them."""
    n = x.shape[d]
    if x.dtype.kind not in "fc":
        return (n - 1) // 2
    nnan = np.isnan(x).sum(axis=d, keepdims=True).astype(_I64)
    if ignore_nan:
        c = n - nnan
        return np.where(c > 0, (c - 1) // 2, 0)
    return np.where(nnan > 0, n - nnan, (n - 1) // 2)


def _median_dim(name, ignore_nan):
    def fwd(x, dim, keepdim):
        d = _wrap_dim(dim, x.ndim)
        _check_nonempty(name, x, d)
        return _pick_sorted(x, d, keepdim, _median_pos(x, d, ignore_nan) if x.ndim else 0)
    return fwd


def _median_all(ignore_nan):
    def fwd(x):
        flat = x.reshape(-1)
        if flat.size == 0:
            return _backend.namespace_of(x).full((), np.nan, x.dtype)
        return _pick_sorted(flat, 0, False, _median_pos(flat, 0, ignore_nan))[0]
    return fwd


def _median_grad(grad, self, result):
    """The gradient split evenly among the elements equal to the median (NaN counting as equal
    to a NaN median), as PyTorch's evenly-distributed backward."""
    mask = (self == result).logical_or(self.isnan().logical_and(result.isnan()))
    return grad * mask / mask.sum()


def _median_all_samples(rng):
    return [sample("2d", rng.standard_normal((3, 4))),
            sample("even_nc", nc(rng.standard_normal((2, 4)))),
            sample("0d", rng.standard_normal(())),
            sample("int", np.array([[3, 1, 7, 2], [0, 4, 5, 9]])),
            sample("nan", np.array([1.0, np.nan, 3.0, 0.5, np.nan]), no_grad=(0,))]


_median_recs = {}
for _name, _ign in (("median", False), ("nanmedian", True)):
    _full = defop(f"{_name}(Tensor self) -> Tensor", _median_all(_ign), {"self": _median_grad},
                  jvp=lambda self_p, self_t, result: _median_grad(self_t, self_p, result).sum(),
                  api=False, method=False, torch=f"torch.{_name}", samples=_median_all_samples)
    _bydim = defop(
        f"{_name}.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
        _median_dim(_name, _ign), {"self": _select_grad}, jvp=_select_jvp,
        api=False, method=False, torch=f"torch.{_name}",
        samples=lambda rng, _s=_selection_samples(()): _s(rng) + [
            sample("nan_rows", np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 0.5, 4.0, 1.0],
                                         [np.nan, 5.0, np.nan, 6.0]]), 1, no_grad=(0,))])
    _median_recs[_name] = (_full.call, _bydim.call)


def _median_front(name):
    full, by_dim = _median_recs[name]
    rtype = getattr(return_types, name)

    def front(input, dim=None, keepdim=False):
        if dim is None:
            return full(input)
        return rtype(*by_dim(input, dim, keepdim))

    front.__doc__ = (f"``torch.{name}(input)`` -> Tensor; "
                     f"``torch.{name}(input, dim, keepdim=False)`` -> (values, indices)")
    return front


_publish("median", _median_front("median"))
_publish("nanmedian", _median_front("nanmedian"))


def _mode(x, dim, keepdim):
    """The most frequent value along ``dim`` (the smallest among equally frequent ones) and the
    index of its last occurrence, as PyTorch's CPU kernel picks them."""
    d = _wrap_dim(dim, x.ndim)
    xp = _backend.namespace_of(x)
    if x.ndim == 0:
        return x.copy(), xp.zeros((), _I64)
    _check_nonempty("mode", x, d)
    xm = np.moveaxis(x, d, -1)
    lead, n = xm.shape[:-1], xm.shape[-1]
    xm = xm.reshape(-1, n)
    m = xm.shape[0]
    idx = np.argsort(xm, axis=-1, kind="stable")
    s = np.take_along_axis(xm, idx, -1)
    same = s[:, 1:] == s[:, :-1]
    if x.dtype.kind in "fc":
        same |= np.isnan(s[:, 1:]) & np.isnan(s[:, :-1])
    start = xp.concatenate((xp.ones((m, 1), bool), ~same), axis=1).reshape(-1)
    run = xp.cumsum(start) - 1  # run id of every element, runs never crossing rows
    counts = xp.bincount(run)
    first = xp.flatnonzero(start)
    best = xp.argmax(counts[run].reshape(m, n), axis=1) + xp.arange(m) * n  # first = smallest value
    last = first[run[best]] + counts[run[best]] - 1  # stable sort: the run's last is the largest index
    shape = lead + ((1,) if keepdim else ())
    vals = s.reshape(-1)[best].reshape(shape)
    ind = idx.reshape(-1)[last].astype(_I64, copy=False).reshape(shape)
    if keepdim:
        vals, ind = np.moveaxis(vals, -1, d), np.moveaxis(ind, -1, d)
    return vals, ind


_mode_rec = defop(
    "mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)", _mode,
    {"self": _select_grad}, jvp=_select_jvp, api=False, method=False, torch="torch.mode",
    samples=lambda rng: _selection_samples(())(rng) + [
        sample("ties", np.array([[2.0, 1, 2, 1, 3], [5, 5, 1, 0, 0]]), 1, no_grad=(0,)),
        sample("ties_dim0_keep", np.array([[2.0, 1, 2, 1, 3], [5, 5, 1, 0, 0], [2, 5, 2, 0, 3]]), 0, True,
               no_grad=(0,)),
        sample("int_ties", np.array([[1, 5, 1, 5, 5], [7, 7, 7, 2, 2]]), -1)])


def mode(input, dim=-1, keepdim=False):
    """``torch.mode(input, dim=-1, keepdim=False)`` -> (values, indices)."""
    return return_types.mode(*_mode_rec.call(input, dim, keepdim))


_publish("mode", mode)


# --- unique / unique_consecutive ---
def _runs(rows, order, sort):
    """Unique rows of a 2-d ``rows`` (one element or slice per row): ``(output rows, inverse,
    counts)``. ``sort``: group equal rows anywhere (in ``order``), else only adjacent ones.
    NaNs never compare equal, so each is its own value (as PyTorch's CPU unique)."""
    xp = _backend.namespace_of(rows)
    n = rows.shape[0]
    s = rows[order] if sort else rows
    new = xp.ones(n, bool)
    if n > 1:
        new[1:] = (s[1:] != s[:-1]).any(axis=1)
    starts = xp.flatnonzero(new)
    inv_sorted = xp.cumsum(new) - 1
    inverse = xp.empty(n, _I64)
    if sort:
        inverse[order] = inv_sorted
    else:
        inverse = inv_sorted.astype(_I64, copy=False)
    counts = xp.diff(xp.concatenate((starts, xp.full(1, n, starts.dtype)))).astype(_I64, copy=False)
    return s[starts], inverse, counts


def _unique_flat(x, sort):
    rows = x.reshape(-1, 1)
    order = np.argsort(rows[:, 0], kind="stable") if sort else None
    out, inverse, counts = _runs(rows, order, sort)
    return out[:, 0], inverse.reshape(x.shape), counts


def _unique_dim_fwd(x, dim, sort):
    d = _wrap_dim(dim, x.ndim)
    xp = _backend.namespace_of(x)
    moved = np.moveaxis(x, d, 0) if x.ndim else x.reshape(1)
    rows = moved.reshape(moved.shape[0], -1)
    if sort:
        # lexicographic order of the slices: lexsort's last key is the primary one
        order = (np.lexsort(rows.T[::-1]) if rows.shape[1] else xp.arange(rows.shape[0])).astype(_I64)
    else:
        order = None
    out, inverse, counts = _runs(rows, order, sort)
    out = np.moveaxis(out.reshape((-1,) + moved.shape[1:]), 0, d) if x.ndim else out.reshape(-1)
    return out.copy(), inverse, counts  # C order, keeping the device's array type


def _unique2(x, sorted, return_inverse, return_counts):
    return _unique_flat(x, True)


def _unique_dim(x, dim, sorted, return_inverse, return_counts):
    return _unique_dim_fwd(x, dim, True)


def _unique_consecutive(x, return_inverse, return_counts, dim):
    return _unique_flat(x, False) if dim is None else _unique_dim_fwd(x, dim, False)


_unique2_rec = defop("_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False)"
                     " -> (Tensor, Tensor, Tensor)", _unique2, api=False, method=False)
_unique_dim_rec = defop("_unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, "
                        "bool return_counts=False) -> (Tensor, Tensor, Tensor)", _unique_dim, api=False, method=False)
_unique_cons_rec = defop("_unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, "
                         "int? dim=None) -> (Tensor, Tensor, Tensor)", _unique_consecutive, api=False, method=False)


def _unique_result(res, return_inverse, return_counts):
    out, inverse, counts = res
    if return_inverse and return_counts:
        return out, inverse, counts
    if return_inverse:
        return out, inverse
    if return_counts:
        return out, counts
    return out


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """``torch.unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None)``.

    NOTE(pytorch): the output is sorted even for ``sorted=False`` (PyTorch's CPU result too)."""
    if dim is None:
        res = _unique2_rec.call(input, sorted, return_inverse, return_counts)
    else:
        res = _unique_dim_rec.call(input, dim, sorted, return_inverse, return_counts)
    return _unique_result(res, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """``torch.unique_consecutive(input, return_inverse=False, return_counts=False, dim=None)``."""
    res = _unique_cons_rec.call(input, return_inverse, return_counts, dim)
    return _unique_result(res, return_inverse, return_counts)


_UNIQUE_DATA = np.array([[3, 1, 3, 0], [1, 1, 2, 0], [3, 1, 3, 0]])
defcomposite(unique, gradcheck=False, samples=lambda rng: [
    sample("flat", _UNIQUE_DATA),
    sample("inverse_counts", _UNIQUE_DATA.T, True, True, True),
    sample("counts", np.array([2, 2, 7, 1, 2]), return_counts=True),
    sample("dim0", _UNIQUE_DATA, return_inverse=True, return_counts=True, dim=0),
    sample("dim_neg", _UNIQUE_DATA, return_inverse=True, dim=-1),
    sample("float", np.array([0.5, -1.0, 0.5, 2.0]), no_grad=(0,)),
    sample("0d", np.array(4), return_inverse=True)])
defcomposite(unique_consecutive, gradcheck=False, samples=lambda rng: [
    sample("flat", np.array([1, 1, 2, 2, 3, 1, 1, 2]), True, True),
    sample("2d", _UNIQUE_DATA, return_counts=True),
    sample("dim0", _UNIQUE_DATA[[0, 0, 1, 2, 2]], True, True, dim=0),
    sample("dim1", _UNIQUE_DATA[:, [0, 0, 1, 3]], return_inverse=True, dim=-1),
    sample("0d", np.array(4), return_inverse=True)])


# --- nonzero / count_nonzero ---
def _nonzero(x):
    return np.argwhere(x).astype(_I64, copy=False)


_nonzero_rec = defop("nonzero(Tensor self) -> Tensor", _nonzero, api=False, method=False, torch="torch.nonzero",
                     samples=lambda rng: [sample("2d", np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])),
                                          sample("3d_int", np.array([[[0, 1], [2, 0]], [[0, 0], [3, 4]]])),
                                          sample("bool_nc", nc(np.array([[True, False], [False, True]]))),
                                          sample("0d", np.array(2.5)),
                                          sample("0d_zero", np.array(0.0))])


def nonzero(input, *, as_tuple=False):
    """``torch.nonzero(input, *, as_tuple=False)``: the indices of the non-zero elements, as an
    ``(n, input.dim())`` tensor or a tuple of one index tensor per dimension (a 0-d input counts
    as 1-d there)."""
    if not as_tuple:
        return _nonzero_rec.call(input)
    return _nonzero_rec.call(input if input.dim() else input.reshape(1)).unbind(1)


_publish("nonzero", nonzero)


def _count_nonzero(x, dim):
    axis = _axis(x, dim) if dim is not None else None
    return _backend.namespace_of(x).asarray((x != 0).sum(axis=axis or None), dtype=_I64)


defop("count_nonzero(Tensor self, int[1]? dim=None) -> Tensor", _count_nonzero,
      samples=lambda rng: [sample("all", np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])),
                           sample("dim", np.array([[0, 1, 2], [3, 0, 0]]), -1),
                           sample("dims", nc(np.array([[[0.0, 1], [2, 0]], [[0, 0], [3, 4]]])), (0, 2)),
                           sample("empty_dims", np.array([[0, 1], [2, 3]]), ()),
                           sample("0d", np.array(2.5), 0)])


# --- searchsorted / bucketize ---
def _searchsorted(seq, values, out_int32, right, side, sorter):
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 "
                           "dimension")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    xp = _backend.namespace_of(seq)
    scalar = not hasattr(values, "ndim")
    if scalar:  # a Python number: searched as a 0-d array on the boundaries' device
        values = xp.asarray(values)
    if seq.ndim > 1 and (scalar or values.shape[:-1] != seq.shape[:-1]):
        got = "" if scalar else f" and input value tensor {list(values.shape)}"
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq.shape)}{got}")
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter, -1)
    how = "right" if right else "left"
    if seq.ndim == 1:
        out = xp.asarray(np.searchsorted(seq, values, how))
    else:  # one search per row of the leading dimensions
        rows, vals = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
        out = xp.empty(vals.shape, _I64)
        for r in range(rows.shape[0]):
            out[r] = np.searchsorted(rows[r], vals[r], how)
        out = out.reshape(values.shape)
    return out.astype(np.int32 if out_int32 else _I64)


def _search_samples(rng):
    seq = np.sort(rng.standard_normal(6))
    seq2 = np.sort(rng.standard_normal((2, 3, 5)), -1)
    return [sample("1d", seq, rng.standard_normal((3, 4)), no_grad=(0, 1)),
            sample("hits_right", seq, seq[[1, 3, 3]], right=True, no_grad=(0, 1)),
            sample("side_int32", seq, seq[[0, 5]], out_int32=True, side="right", no_grad=(0, 1)),
            sample("nd_nc", nc(seq2), rng.standard_normal((2, 3, 4)), no_grad=(0, 1)),
            sample("sorter", np.array([3.0, 1, 2, 0]), np.array([1.5, 0.0, 4.0]), sorter=np.array([3, 1, 2, 0]),
                   no_grad=(0, 1)),
            sample("0d_value", seq, np.array(0.1), no_grad=(0, 1)),
            sample("int", np.array([1, 3, 3, 7]), np.array([[3, 0], [8, 4]]), side="left")]


_search_t = defop("searchsorted.Tensor(Tensor sorted_sequence, Tensor input, *, bool out_int32=False, "
                  "bool right=False, str? side=None, Tensor? sorter=None) -> Tensor", _searchsorted,
                  api=False, method=False, torch="torch.searchsorted", samples=_search_samples)
_search_s = defop("searchsorted.Scalar(Tensor sorted_sequence, Scalar input, *, bool out_int32=False, "
                  "bool right=False, str? side=None, Tensor? sorter=None) -> Tensor", _searchsorted,
                  api=False, method=False, torch="torch.searchsorted",
                  samples=lambda rng: [sample("scalar", np.array([1.0, 2.0, 3.0]), 2.5, no_grad=(0,)),
                                       sample("scalar_right", np.array([1, 2, 2, 3]), 2, right=True)])


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """``torch.searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None)``."""
    rec = _search_t if isinstance(input, Tensor) else _search_s
    return rec.call(sorted_sequence, input, out_int32=out_int32, right=right, side=side, sorter=sorter)


_publish("searchsorted", searchsorted, method=False)


def _bucketize(x, boundaries, out_int32, right):
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return _searchsorted(boundaries, x, out_int32, right, None, None)


_bucket_t = defop("bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) "
                  "-> Tensor", _bucketize, api=False, method=False, torch="torch.bucketize",
                  samples=lambda rng: [
                      sample("2d", rng.standard_normal((3, 4)), np.array([-1.0, 0.0, 0.5]), no_grad=(0, 1)),
                      sample("right_int32", nc(np.array([[0.0, 1, 2], [3, 1, 0]])), np.array([0.0, 1.0, 2.0]),
                             out_int32=True, right=True, no_grad=(0, 1)),
                      sample("0d", np.array(0.7), np.array([0.0, 1.0]), no_grad=(0, 1)),
                      sample("int", np.array([1, 5, 9]), np.array([2, 5, 8]))])
_bucket_s = defop("bucketize.Scalar(Scalar self, Tensor boundaries, *, bool out_int32=False, bool right=False) "
                  "-> Tensor", _bucketize, api=False, method=False, torch="torch.bucketize",
                  samples=lambda rng: [sample("scalar", 2.0, np.array([1.0, 2.0, 3.0]), right=True, no_grad=(1,))])


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """``torch.bucketize(input, boundaries, *, out_int32=False, right=False)``."""
    rec = _bucket_t if isinstance(input, Tensor) else _bucket_s
    return rec.call(input, boundaries, out_int32=out_int32, right=right)


_publish("bucketize", bucketize, method=False)


# --- quantile, nanquantile: composites over sort, gather and lerp (differentiable) ---
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or "
                           f"nearest, but got {interpolation}")
    scalar_q = not isinstance(q, Tensor) or q.dim() == 0
    if isinstance(q, Tensor):
        if q.dim() > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        qs = q.detach().reshape(-1)
        if bool(((qs < 0) | (qs > 1)).any()):
            raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    else:
        qs = float(q)  # a Python number: no tensor made from data (a capture keeps no constant)
        if not 0 <= qs <= 1:
            raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
    ndim = input.dim()
    if dim is None:
        x, d = input.reshape(-1), 0
    else:
        d = _wrap_dim(dim, ndim)
        x = input if ndim else input.reshape(1)
    s = x.sort(dim=d if x.dim() else 0).values.movedim(d if x.dim() else 0, -1)  # NaNs sort last
    n = s.shape[-1]
    last = s[..., -1:]
    if ignore_nan:
        count = (~s.isnan()).sum(-1, keepdim=True).to(s.dtype)
        rank = qs * (count - 1)
        rank = where(count == 0, float(n - 1), rank)  # an all-NaN row gives NaN
    elif isinstance(qs, Tensor):
        rank = (qs * (n - 1)).expand(s.shape[:-1] + (qs.shape[0],))
        rank = where(last.isnan(), float(n - 1), rank)  # a row with a NaN gives NaN
    else:
        rank = where(last.isnan(), float(n - 1), qs * (n - 1)).to(s.dtype)
    if interpolation == "lower":
        rank = rank.floor()
    elif interpolation == "higher":
        rank = rank.ceil()
    elif interpolation == "nearest":
        rank = rank.round()
    below = rank.floor().long()
    lo = s.gather(-1, below)
    if interpolation in ("lower", "higher", "nearest"):
        out = lo  # the rank is whole: no second gather (it would save an index for nothing)
    else:
        hi = s.gather(-1, rank.ceil().long().clamp(max=n - 1))
        weight = (rank - below.to(s.dtype)) if interpolation == "linear" else rank * 0 + 0.5
        out = lo.lerp(hi, weight)
    out = out.movedim(-1, 0)  # (Q, ...reduced)
    if keepdim:
        if dim is None:
            out = out.reshape((out.shape[0],) + (1,) * ndim)
        elif ndim:
            out = out.unsqueeze(d + 1)
    return out[0] if scalar_q else out


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The ``q``-th quantiles of ``input`` along ``dim`` (all elements when None)."""
    if out is not None:
        return write_out("quantile", lambda: quantile(input, q, dim, keepdim,
                                                      interpolation=interpolation), (input,), out)
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """``quantile`` ignoring NaN values (NaN only where a reduced row is all NaN)."""
    if out is not None:
        return write_out("nanquantile", lambda: nanquantile(input, q, dim, keepdim,
                                                            interpolation=interpolation), (input,), out)
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def _quantile_samples(rng):
    r = rng.standard_normal
    return [sample("all", r((3, 4)), 0.3),
            sample("dim_tensor_q", r((3, 5)), np.array([0.0, 0.25, 0.9, 1.0]), 1, no_grad=(1,)),
            sample("keep_nc", nc(r((3, 4))), 0.6, 0, True),
            sample("keep_all", r((2, 3)), np.array([0.5]), None, True, no_grad=(1,)),
            sample("lower", r((4, 3)), 0.4, 0, interpolation="lower"),
            sample("higher", r((4, 3)), 0.4, -1, interpolation="higher"),
            sample("midpoint", r((5,)), 0.35, interpolation="midpoint"),
            sample("nearest", r((5,)), np.array([0.1, 0.5, 0.87]), interpolation="nearest",
                   no_grad=(1,)),
            sample("0d", r(()), 0.5, 0)]


defcomposite(quantile, samples=_quantile_samples)
defcomposite(nanquantile, samples=lambda rng: _quantile_samples(rng) + [
    sample("nan", np.array([[1.0, np.nan, 3.0, 0.5], [np.nan] * 4]), 0.5, 1, no_grad=(0,))])
