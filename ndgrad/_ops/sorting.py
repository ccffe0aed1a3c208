"""Sorting and selection: sort, argsort, msort, topk.

``sort`` and ``topk`` return values and int64 indices; the values' gradient goes back to the
positions the indices name (``scatter_add`` into zeros: an ndgrad op, so it differentiates
again). Sorting is stable on request and NaN sorts as the largest value, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from .. import _backend
from .. import return_types
from .._tensor import _wrap_dim
from .index import scatter_add
from .reduce import _publish
from .registry import defcomposite, defop
from .samples import nc, sample


def _order(x, d, descending):
    """Indices that sort ``x`` along ``d``, stably: descending order keeps equal elements in
    their original order (sorting the reversed array ascending, then reversing, does that and
    puts NaN first, as PyTorch does)."""
    if not descending:
        return np.argsort(x, axis=d, kind="stable")
    n = x.shape[d]
    rev = np.flip(x, d)
    return np.flip(n - 1 - np.argsort(rev, axis=d, kind="stable"), d)


def _sort(x, dim, descending):
    d = _wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        return x.copy(), _backend.namespace_of(x).zeros((), np.int64)
    idx = _order(x, d, descending).astype(np.int64, copy=False)
    return np.take_along_axis(x, idx, d), idx


def _scatter_back(grad, indices, dim, self_shape):
    """The gradient of values picked at ``indices`` along ``dim``: each lands where it came from."""
    if not len(self_shape):
        return grad
    return scatter_add(grad.new_zeros(self_shape), dim, indices, grad)


_sort_op = defop(
    "sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)", _sort,
    {"self": lambda grad, indices, dim, self_shape: _scatter_back(grad, indices, dim, self_shape)},
    api=False, method=False, torch="torch.sort",
    samples=lambda rng: [sample("last", rng.standard_normal((3, 4))),
                         sample("dim0_desc", rng.standard_normal((3, 4)), 0, True),
                         sample("nc_neg", nc(rng.standard_normal((2, 3, 4))), -2),
                         sample("0d", rng.standard_normal(())),
                         sample("int", np.array([[3, 1, 2], [1, 1, 0]]), 1, True)]).call


def sort(input, dim=-1, descending=False, stable=False, *, out=None):
    """(values, indices) sorted along ``dim``; always stable here (``stable`` is accepted)."""
    return return_types.sort(*_sort_op(input, dim, descending))


def argsort(input, dim=-1, descending=False, stable=False):
    return _sort_op(input, dim, descending)[1]


def msort(input):
    return _sort_op(input, 0, False)[0]


def _topk(x, k, dim, largest, sorted_):
    d = _wrap_dim(dim, x.ndim)
    n = x.shape[d] if x.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if x.ndim == 0:
        return x.copy(), _backend.namespace_of(x).zeros((), np.int64)
    idx = _order(x, d, largest).astype(np.int64, copy=False)
    if k < n:
        idx = idx[(slice(None),) * d + (slice(0, k),)].copy()
    return np.take_along_axis(x, idx, d), idx


_topk_op = defop(
    "topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
    _topk, {"self": lambda grad, indices, dim, self_shape: _scatter_back(grad, indices, dim, self_shape)},
    api=False, method=False, torch="torch.topk",
    samples=lambda rng: [sample("last", rng.standard_normal((3, 5)), 2),
                         sample("smallest_dim0", rng.standard_normal((4, 3)), 3, 0, False),
                         sample("nc_all", nc(rng.standard_normal((2, 4))), 4, -1),
                         sample("0d", rng.standard_normal(()), 1),
                         sample("int", np.array([[3, 1, 2], [7, 1, 0]]), 1)]).call


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):  # noqa: A002 - torch's name
    """The ``k`` largest (or smallest) values along ``dim`` with their indices, in order."""
    return return_types.topk(*_topk_op(input, k, dim, largest, sorted))


_publish("sort", sort)
_publish("topk", topk)
for _fn, _samples in (
    (argsort, lambda rng: [sample("desc", rng.standard_normal((3, 4)), 1, True),
                           sample("stable_ties", np.array([[2.0, 1.0, 2.0, 1.0], [0.0, 0.0, 1.0, 0.0]]), -1, True)]),
    (msort, lambda rng: [sample("2d", rng.standard_normal((3, 4)))]),
):
    defcomposite(_fn, samples=_samples)
