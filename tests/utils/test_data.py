"""utils.data: datasets, samplers, DataLoader and default_collate against torch.utils.data."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import ndgrad
from ndgrad.utils import data as D

Point = collections.namedtuple("Point", "x y")


def _xy(T):
    x = T.arange(14, dtype=T.float32).reshape(7, 2)
    return T.utils.data.TensorDataset(x, T.arange(7))


# --- DataLoader ---
@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (7, True), (10, False)])
def test_loader_batches(ref, batch_size, drop_last):
    def run(T):
        dl = T.utils.data.DataLoader(_xy(T), batch_size=batch_size, drop_last=drop_last)
        return [len(dl)] + [list(b) for b in dl]

    ref.same(run)


def test_loader_no_batching(ref):
    ref.same(lambda T: list(T.utils.data.DataLoader(_xy(T), batch_size=None)))
    ref.same(lambda T: list(T.utils.data.DataLoader([np.arange(3), np.float32(2)], batch_size=None)))


def test_loader_custom_batch_sampler_and_collate(ref):
    def run(T):
        dl = T.utils.data.DataLoader(list(range(10)), batch_sampler=[[0, 5], [9], [1, 2, 3]],
                                     collate_fn=lambda b: sum(b))
        return len(dl), list(dl)

    ref.same(run)


class _Stream(D.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_loader_iterable(ref, torch_or_skip):
    import torch

    class TStream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    for kw in ({"batch_size": 3}, {"batch_size": 3, "drop_last": True}, {"batch_size": None}):
        got = ndgrad.utils.data.DataLoader(_Stream(7), **kw)
        want = torch.utils.data.DataLoader(TStream(), **kw)
        assert len(got) == len(want)
        ref.assert_same(list(got), list(want))


def test_loader_shuffle_deterministic():
    ds = list(range(20))
    a = [b.tolist() for b in D.DataLoader(ds, batch_size=4, shuffle=True,
                                          generator=ndgrad.Generator().manual_seed(3))]
    b = [b.tolist() for b in D.DataLoader(ds, batch_size=4, shuffle=True,
                                          generator=ndgrad.Generator().manual_seed(3))]
    assert a == b and sorted(sum(a, [])) == ds and sum(a, []) != ds
    ndgrad.manual_seed(0)
    c = [b.tolist() for b in D.DataLoader(ds, batch_size=4, shuffle=True)]
    d = [b.tolist() for b in D.DataLoader(ds, batch_size=4, shuffle=True)]
    ndgrad.manual_seed(0)
    assert c == [b.tolist() for b in D.DataLoader(ds, batch_size=4, shuffle=True)]
    assert c != d  # a new order every epoch
    dl = D.DataLoader(ds, batch_size=4, shuffle=True, generator=ndgrad.Generator().manual_seed(3))
    assert [b.tolist() for b in dl] == a and [b.tolist() for b in dl] != a


def test_loader_errors(ref):
    def DL(T, *a, **k):
        return T.utils.data.DataLoader(*a, **k)

    ref.raises(lambda T: DL(T, range(3), shuffle=True, sampler=[0]), ValueError)
    ref.raises(lambda T: DL(T, range(3), batch_size=2, batch_sampler=[[0]]), ValueError)
    ref.raises(lambda T: DL(T, range(3), batch_size=None, drop_last=True), ValueError)
    ref.raises(lambda T: DL(T, range(3), num_workers=-1), ValueError)
    ref.raises(lambda T: DL(T, range(3), prefetch_factor=2), ValueError)
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        D.DataLoader(_Stream(3), shuffle=True)


# --- default_collate ---
def _samples(T):
    return [
        [T.tensor([1.0, 2.0]), T.tensor([3.0, 4.0])],
        [1, 2, 3],
        [1.5, 2.5],
        [True, False],
        ["a", "b"],
        [np.float32(1), np.float32(2)],
        [np.arange(3, dtype=np.int16), np.arange(3, dtype=np.int16)],
        [{"a": T.tensor(1), "b": (1, 2.0)}, {"a": T.tensor(2), "b": (3, 4.0)}],
        [collections.OrderedDict(x=[1, 2]), collections.OrderedDict(x=[3, 4])],
        [(T.zeros(2, dtype=T.int32), "s", [0.5, {"k": 1}])] * 3,
    ]


@pytest.mark.parametrize("i", range(10))
def test_default_collate(ref, i):
    ref.same(lambda T: T.utils.data.default_collate(_samples(T)[i]))


def test_default_collate_namedtuple_and_types(ref):
    got = D.default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert type(got) is Point
    ref.same(lambda T: tuple(T.utils.data.default_collate([Point(1, 2.0), Point(3, 4.0)])))
    assert type(D.default_collate([collections.OrderedDict(a=1)])) is collections.OrderedDict


def test_default_convert(ref):
    ref.same(lambda T: T.utils.data.default_convert(
        {"a": np.arange(3), "b": (np.float64(1.5), "s"), "c": [np.ones(2, np.float32)]}))


def test_default_collate_errors(ref):
    ref.raises(lambda T: T.utils.data.default_collate([[1, 2], [1]]), RuntimeError)
    ref.raises(lambda T: T.utils.data.default_collate([object()]), TypeError,
               "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
               "lists; found <class 'object'>")
    ref.raises(lambda T: T.utils.data.default_collate([1 + 2j]), TypeError)
    ref.raises(lambda T: T.utils.data.default_collate([np.array(["a"])]), TypeError)


# --- datasets ---
def test_tensor_dataset(ref):
    ref.same(lambda T: (len(_xy(T)), _xy(T)[3], _xy(T)[-1]))
    ref.raises(lambda T: T.utils.data.TensorDataset(T.zeros(3), T.zeros(4)), AssertionError,
               "Size mismatch between tensors")


def test_subset_concat(ref):
    def run(T):
        d = T.utils.data
        c = d.ConcatDataset([range(3), d.Subset(list("abcdef"), [5, 0, 2]), range(10, 12)])
        both = d.Subset(range(10), [1, 2]) + d.Subset(range(10), [7])
        return len(c), [c[i] for i in range(len(c))], c[-1], c[-8], c.cumulative_sizes, list(both)

    ref.same(run)
    ref.raises(lambda T: T.utils.data.ConcatDataset([]), AssertionError)
    ref.raises(lambda T: T.utils.data.ConcatDataset([range(3)])[-4], ValueError)
    ref.raises(lambda T: T.utils.data.ConcatDataset([range(3)])[3], IndexError)
    with pytest.raises(AssertionError, match="does not support IterableDataset"):
        D.ConcatDataset([_Stream(2)])
    assert list(_Stream(2) + _Stream(3)) == [0, 1, 0, 1, 2]
    ref.raises(lambda T: T.utils.data.Dataset()[0], NotImplementedError)


def test_stack_dataset(ref):
    ref.same(lambda T: (T.utils.data.StackDataset(range(3), "abc")[1],
                        T.utils.data.StackDataset(a=range(3), b="abc")[2]))


@pytest.mark.parametrize("n,lengths", [(10, [3, 7]), (10, [0.33, 0.33, 0.34]), (10, [0.5, 0.5]),
                                       (7, [0.2, 0.2, 0.6]), (10, [10])])
def test_random_split_sizes(ref, n, lengths):
    def run(T):
        parts = T.utils.data.random_split(range(n), lengths, generator=T.Generator().manual_seed(1))
        return [len(p) for p in parts]

    ref.same(run)
    parts = D.random_split(range(n), lengths, generator=ndgrad.Generator().manual_seed(1))
    flat = [x for p in parts for x in p]
    assert sorted(flat) == list(range(n))
    again = D.random_split(range(n), lengths, generator=ndgrad.Generator().manual_seed(1))
    assert [list(p) for p in again] == [list(p) for p in parts]


def test_random_split_errors(ref):
    ref.raises(lambda T: T.utils.data.random_split(range(10), [3, 3]), ValueError,
               "Sum of input lengths does not equal the length of the input dataset!")
    ref.raises(lambda T: T.utils.data.random_split(range(10), [0.5, 0.6]), ValueError)
    ref.raises(lambda T: T.utils.data.random_split(range(10), [1.5, -0.5]), ValueError,
               "Fraction at index 0 is not between 0 and 1")
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        D.random_split(range(3), [0.1, 0.1, 0.8])


# --- samplers ---
def test_samplers(ref):
    def run(T):
        d = T.utils.data
        return (list(d.SequentialSampler(range(4))), len(d.RandomSampler(range(5), num_samples=12)),
                list(d.BatchSampler(range(7), 3, False)), list(d.BatchSampler(range(7), 3, True)),
                len(d.BatchSampler(range(7), 3, False)), len(d.BatchSampler(range(7), 3, True)))

    ref.same(run)
    g = ndgrad.Generator().manual_seed(0)
    assert sorted(D.RandomSampler(range(6), generator=g)) == list(range(6))
    many = list(D.RandomSampler(range(5), num_samples=12, generator=g))
    assert len(many) == 12 and set(many) == set(range(5))
    rep = list(D.RandomSampler(range(3), replacement=True, num_samples=50, generator=g))
    assert len(rep) == 50 and set(rep) <= {0, 1, 2}
    assert sorted(D.SubsetRandomSampler([4, 8, 9], generator=g)) == [4, 8, 9]
    w = list(D.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 20, generator=g))
    assert len(w) == 20 and set(w) <= {1, 3}
    assert sorted(D.WeightedRandomSampler([1.0, 1.0, 2.0], 3, replacement=False, generator=g)) == [0, 1, 2]
    s1 = list(D.RandomSampler(range(9), generator=ndgrad.Generator().manual_seed(5)))
    assert s1 == list(D.RandomSampler(range(9), generator=ndgrad.Generator().manual_seed(5)))


def test_sampler_errors(ref):
    d = lambda T: T.utils.data  # noqa: E731
    ref.raises(lambda T: d(T).BatchSampler(range(3), 0, False), ValueError,
               "batch_size should be a positive integer value, but got batch_size=0")
    ref.raises(lambda T: d(T).BatchSampler(range(3), 2, 1), ValueError)
    ref.raises(lambda T: d(T).RandomSampler(range(3), replacement=1), TypeError)
    ref.raises(lambda T: d(T).RandomSampler(range(3), num_samples=0), ValueError)
    ref.raises(lambda T: d(T).WeightedRandomSampler([1.0, 2.0], 0), ValueError)
    ref.raises(lambda T: d(T).WeightedRandomSampler([[1.0, 2.0]], 2), ValueError)
