"""Sorting and selection ops against PyTorch: ties, NaN order, result types, methods, errors.
(Values, gradients and double gradients on the op table's samples are in test_generic.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad

NAN = float("nan")
TIES = [[3.0, 1.0, NAN, 1.0, 3.0, 2.0, 1.0], [0.0, 0.0, 5.0, NAN, 0.0, NAN, 5.0]]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_ties_and_nan(ref, dtype, descending):
    ref.same(lambda T: T.sort(T.tensor(TIES, dtype=getattr(T, dtype)), dim=-1, descending=descending,
                              stable=True))
    ref.same(lambda T: T.argsort(T.tensor(TIES, dtype=getattr(T, dtype)).t(), dim=0, descending=descending,
                                 stable=True))


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int64", "bool"])
def test_stable_descending_integer_and_bool(ref, dtype):
    data = np.random.default_rng(0).integers(0, 2 if dtype == "bool" else 4, (3, 40))

    def f(T):
        x = T.tensor(data.tolist(), dtype=getattr(T, dtype))
        return (x.sort(stable=True, descending=True), x.sort(dim=0, stable=True),
                x.argsort(dim=-1, descending=True, stable=True))

    ref.same(f)


def test_large_stable_float_ties(ref):
    data = np.random.default_rng(1).integers(0, 5, (4, 1000)).astype(np.float32).tolist()
    ref.same(lambda T: T.sort(T.tensor(data), descending=True, stable=True))


def test_return_types_and_methods(ref):
    x = [[0.3, -1.2, 2.5, 0.7], [1.1, 0.2, -0.4, 3.3]]
    for name, call in (("sort", lambda t: t.sort(0)), ("topk", lambda t: t.topk(2)),
                       ("kthvalue", lambda t: t.kthvalue(2, 1, True)), ("median", lambda t: t.median(-1)),
                       ("nanmedian", lambda t: t.nanmedian(0)), ("mode", lambda t: t.mode())):
        r = ref.same(lambda T, call=call: call(T.tensor(x)))
        assert type(r) is getattr(ndgrad.return_types, name)
        assert r.values is r[0] and r.indices is r[1]
        assert r.indices.dtype == ndgrad.int64
        assert repr(r).startswith(f"ndgrad.return_types.{name}(")
    ref.same(lambda T: (T.tensor(x).msort(), T.tensor(x).median(), T.tensor(x).nanmedian(),
                        T.tensor(x).argsort(), T.tensor(x).count_nonzero(0), T.tensor(x).nonzero()))


def test_nan_selection(ref):
    x = [[1.0, NAN, 3.0, 0.5, 2.0], [4.0, 2.0, 1.0, 0.0, 3.0]]
    ref.same(lambda T: (T.topk(T.tensor(x), 2), T.topk(T.tensor(x), 3, largest=False),
                        T.kthvalue(T.tensor(x), 5), T.median(T.tensor(x), 1), T.nanmedian(T.tensor(x), 1),
                        T.median(T.tensor(x)), T.nanmedian(T.tensor(x)), T.median(T.tensor([]))))


def test_mode_ties(ref):
    x = np.random.default_rng(2).integers(0, 4, (5, 9))
    ref.same(lambda T: (T.mode(T.tensor(x.tolist())), T.mode(T.tensor(x.tolist()), 0, True),
                        T.mode(T.tensor(x.astype(float).tolist()), -1)))


def test_median_grad_splits_ties(ref):
    def f(T):
        x = T.tensor([[2.0, 1.0, 2.0], [3.0, 2.0, 5.0]], requires_grad=True)
        (g,) = T.autograd.grad(T.median(x) * 3.0, x)
        return g

    ref.same(f)


def test_selection_grad_through_indices(ref):
    def f(T):
        x = T.tensor([[0.3, -1.2, 2.5, 0.7], [1.1, 0.2, -0.4, 3.3]], dtype=T.float64, requires_grad=True)
        w = T.arange(8.0, dtype=T.float64).reshape(2, 4)
        loss = (T.sort(x, descending=True).values * w).sum() + (T.topk(x, 2, 0).values ** 2).sum()
        loss = loss + T.kthvalue(x, 3).values.sum() + T.mode(x, 0).values.sum()
        (g,) = T.autograd.grad(loss, x, create_graph=True)
        (gg,) = T.autograd.grad((g * g).sum(), x)
        return g, gg

    ref.same(f)


def test_unique(ref):
    x = [[3.0, NAN, 1.0], [NAN, 3.0, 1.0]]
    ref.same(lambda T: T.unique(T.tensor(x), return_inverse=True, return_counts=True))
    ref.same(lambda T: T.tensor([5, 1, 5, 2]).unique(sorted=False))
    ref.same(lambda T: T.unique(T.tensor(3), return_inverse=True))
    ref.same(lambda T: T.unique(T.tensor([[1, 2], [1, 2], [0, 5]]), dim=0, return_inverse=True,
                                return_counts=True))
    ref.same(lambda T: T.unique(T.tensor([[1, 2, 1], [0, 5, 0]]), dim=1, return_counts=True))
    ref.same(lambda T: T.tensor([1, 1, 2, 2, 1]).unique_consecutive(return_inverse=True, return_counts=True))
    ref.same(lambda T: T.unique_consecutive(T.tensor([[1, 2], [1, 2], [0, 5], [1, 2]]), dim=0,
                                            return_counts=True))


def test_nonzero_count_nonzero(ref):
    x = [[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]]
    ref.same(lambda T: (T.nonzero(T.tensor(x)), T.nonzero(T.tensor(x), as_tuple=True),
                        T.tensor(x).nonzero(as_tuple=True)))
    ref.same(lambda T: (T.nonzero(T.tensor(3.0)), T.nonzero(T.tensor(3.0), as_tuple=True),
                        T.nonzero(T.tensor(0.0), as_tuple=True)))
    ref.same(lambda T: (T.count_nonzero(T.tensor(x)), T.count_nonzero(T.tensor(x), dim=(0, 1)),
                        T.count_nonzero(T.tensor(x), -1), T.count_nonzero(T.tensor(2.0), 0)))


def test_searchsorted_bucketize(ref):
    seq = [[1.0, 2.0, 3.0], [0.0, 1.0, 2.0]]
    ref.same(lambda T: T.searchsorted(T.tensor(seq), T.tensor([[2.0, 5.0], [1.0, 1.0]]), out_int32=True))
    ref.same(lambda T: T.searchsorted(T.tensor([1.0, 2.0, 3.0]), 2.0, side="right"))
    ref.same(lambda T: T.searchsorted(T.tensor([1.0, 2.0, 3.0]), T.tensor([2, 5, 2]), right=True))
    ref.same(lambda T: T.searchsorted(T.tensor([1.0, 2.0, 3.0]), T.tensor([2.0, NAN, -NAN])))
    ref.same(lambda T: T.searchsorted(T.tensor([3.0, 1.0, 2.0]), T.tensor([2.5]),
                                      sorter=T.tensor([1, 2, 0])))
    ref.same(lambda T: (T.bucketize(T.tensor([[2.0, 5.0], [0.0, 3.0]]), T.tensor([1.0, 2.0, 3.0])),
                        T.bucketize(2.0, T.tensor([1.0, 2.0, 3.0]), right=True),
                        T.bucketize(T.tensor([2, 5]), T.tensor([1.0, 2.0, 3.0]), out_int32=True)))


def test_errors(ref):
    x = lambda T: T.tensor([[3.0, 1.0, 2.0]])  # noqa: E731
    ref.raises(lambda T: T.sort(x(T), 2), IndexError)
    ref.raises(lambda T: T.topk(x(T), 4), RuntimeError, "selected index k out of range")
    ref.raises(lambda T: T.topk(T.tensor(1.0), 2), RuntimeError, "selected index k out of range")
    ref.raises(lambda T: T.topk(T.tensor([True, False]), 1), RuntimeError)
    ref.raises(lambda T: T.topk(x(T), 1, 2), IndexError)
    ref.raises(lambda T: T.kthvalue(x(T), 0), RuntimeError,
               "kthvalue(): selected number k out of range for dimension 1")
    ref.raises(lambda T: T.kthvalue(x(T), 2, 0), RuntimeError)
    ref.raises(lambda T: T.median(T.zeros(0, 3), 0), IndexError,
               "median(): Expected reduction dim 0 to have non-zero size.")
    ref.raises(lambda T: T.mode(T.zeros(0)), IndexError, "mode(): Expected reduction dim 0 to have non-zero size.")
    ref.raises(lambda T: T.unique(T.tensor([1, 2]), dim=3), IndexError)
    seq = lambda T: T.tensor([1.0, 2.0, 3.0])  # noqa: E731
    ref.raises(lambda T: T.searchsorted(seq(T), T.tensor([2.0]), right=True, side="left"), RuntimeError)
    ref.raises(lambda T: T.searchsorted(seq(T), T.tensor([2.0]), side="bad"), RuntimeError)
    ref.raises(lambda T: T.searchsorted(T.tensor([[1.0, 2.0, 3.0]]), T.tensor([2.0, 5.0])), RuntimeError)
    ref.raises(lambda T: T.searchsorted(T.tensor(1.0), T.tensor([2.0])), RuntimeError)
    ref.raises(lambda T: T.bucketize(T.tensor([2.0]), T.tensor([[1.0, 2.0]])), RuntimeError,
               "boundaries tensor must be 1 dimension, but got dim(2)")


def test_indices_not_differentiable():
    x = ndgrad.tensor([3.0, 1.0, 2.0], requires_grad=True)
    v, i = x.sort()
    assert v.requires_grad and not i.requires_grad and i.dtype == ndgrad.int64
    assert not ndgrad.argsort(x).requires_grad and not ndgrad.searchsorted(x.detach(), x).requires_grad
