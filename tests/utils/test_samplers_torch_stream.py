"""Samplers, random_split and shuffled DataLoaders visit samples in PyTorch's order for the same
seed (they draw with PyTorch's randperm / randint / multinomial over its stream)."""

from __future__ import annotations

import pytest

import ndgrad as nd
from ndgrad.utils import data as ndd

torch = pytest.importorskip("torch")
td = torch.utils.data


def _both(make):
    out = []
    for lib, mod in ((torch, td), (nd, ndd)):
        lib.manual_seed(3)
        out.append(make(lib, mod))
    return out


@pytest.mark.parametrize("kw", [{}, {"num_samples": 25}, {"replacement": True},
                                {"replacement": True, "num_samples": 70}])
def test_random_sampler(kw):
    want, got = _both(lambda lib, mod: [list(mod.RandomSampler(range(10), **kw)) for _ in range(2)])
    assert got == want


def test_samplers_with_generators_and_weights():
    def make(lib, mod):
        g = lib.Generator().manual_seed(7)
        return (list(mod.RandomSampler(range(9), generator=g)),
                list(mod.SubsetRandomSampler([5, 6, 7, 8])),
                list(mod.WeightedRandomSampler([0.1, 0.5, 0.2, 0.2], 12)),
                list(mod.WeightedRandomSampler([0.1, 0.5, 0.2, 0.2], 3, replacement=False)))
    want, got = _both(make)
    assert got == want


def test_random_split_and_a_shuffled_loader():
    def make(lib, mod):
        parts = mod.random_split(range(10), [0.3, 0.7])
        loader = mod.DataLoader(mod.TensorDataset(lib.arange(12)), batch_size=5, shuffle=True)
        return [list(p.indices) for p in parts], [b[0].tolist() for b in loader]
    want, got = _both(make)
    assert got == want
