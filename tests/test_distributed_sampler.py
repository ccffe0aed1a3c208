"""utils.data.distributed.DistributedSampler against torch's: the keys of every rank (shuffled:
torch's CPU randperm replayed exactly), lengths, padding and errors. No process group needed:
``num_replicas`` and ``rank`` are passed explicitly."""

from __future__ import annotations

import sys
import time
import types

import numpy as np
import pytest

import ndgrad
from ndgrad.utils.data import distributed as nd_dist


def _ranks(T, n, world, **kw):
    """Each rank's keys for one pass, with the sampler's length and total size."""
    out = []
    for rank in range(world):
        s = T.utils.data.distributed.DistributedSampler(range(n), world, rank, **kw)
        out.append((len(s), s.num_samples, s.total_size, list(s)))
    return out


def test_n11_world2_unshuffled():
    got = [list(nd_dist.DistributedSampler(range(11), 2, r, shuffle=False)) for r in (0, 1)]
    assert got == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 0]]
    got = [list(nd_dist.DistributedSampler(range(11), 2, r, shuffle=False, drop_last=True))
           for r in (0, 1)]
    assert got == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]


@pytest.mark.parametrize("n,world", [(11, 2), (12, 3), (10, 4), (1, 1), (3, 5), (2, 7), (0, 2),
                                     (1000, 8)])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_match_torch(ref, n, world, shuffle, drop_last):
    ref.same(lambda T: _ranks(T, n, world, shuffle=shuffle, drop_last=drop_last))


@pytest.mark.parametrize("seed,epoch", [(0, 0), (0, 3), (42, 1), (2**32 + 7, 0), (2**63, 2),
                                        (-5, 1), (2**64 - 3, 2)])
def test_seed_and_epoch_match_torch(ref, seed, epoch):
    def run(T):
        s = T.utils.data.distributed.DistributedSampler(range(101), 3, 2, seed=seed)
        s.set_epoch(epoch)
        return s.epoch, list(s)

    ref.same(run)


def test_epochs_reshuffle():
    s = ndgrad.utils.data.DistributedSampler(range(50), 2, 0)
    first = list(s)
    assert list(s) == first
    s.set_epoch(1)
    assert list(s) != first


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 256, 4097, 60000, 70000, 100000])
@pytest.mark.parametrize("seed", [0, 1, 2**32, 2**32 + 5, -1, 2**63 - 1])
def test_randperm_matches_torch(torch_or_skip, n, seed):
    torch = torch_or_skip
    g = torch.Generator()
    g.manual_seed(seed)
    assert nd_dist._randperm(n, seed).tolist() == torch.randperm(n, generator=g).tolist()


def _inside_out_loop(n, seed):
    """torch's randperm_cpu for n >= 2**32 // 20, transcribed: a Python loop over 64-bit draws."""
    raw = nd_dist._mt19937(seed).random_raw(2 * n).tolist()
    r = [0] * n
    for i in range(n):
        z = ((raw[2 * i] << 32) | raw[2 * i + 1]) % (i + 1)
        r[i] = r[z]
        r[z] = i
    return r


@pytest.mark.parametrize("n", [1, 2, 3, 5, 17, 64, 1000])
@pytest.mark.parametrize("seed", [0, 3, 2**40 + 1])
def test_randperm_large_n_branch(n, seed):
    """The vectorised inside-out shuffle equals its loop (torch needs n >= 214748364 to take it;
    that size was checked against torch by hand: it takes torch 20 s)."""
    assert nd_dist._randperm(n, seed, inside_out_n=0).tolist() == _inside_out_loop(n, seed)


def test_shuffle_is_fast():
    s = nd_dist.DistributedSampler(range(60000), 4, 1)
    list(s)
    t0 = time.perf_counter()
    for epoch in range(5):
        s.set_epoch(epoch)
        assert len(list(s)) == 15000
    assert (time.perf_counter() - t0) / 5 < 0.05


@pytest.mark.parametrize("world,rank", [(2, 2), (2, -1), (0, 0), (3, 7)])
def test_invalid_rank(ref, world, rank):
    ref.raises(lambda T: T.utils.data.distributed.DistributedSampler(range(5), world, rank),
               ValueError, f"Invalid rank {rank}, rank should be in the interval [0, {world - 1}]")


@pytest.mark.parametrize("seed,exc,msg", [
    (1.5, RuntimeError, "manual_seed expected a long, but got float"),
    (None, TypeError, "unsupported operand type(s) for +: 'NoneType' and 'int'"),
    (2**64, ValueError, "Overflow when unpacking long long"),
    (-(2**63) - 1, ValueError, "Overflow when unpacking long long"),
])
def test_bad_seed(ref, seed, exc, msg):
    ref.raises(lambda T: list(T.utils.data.distributed.DistributedSampler(range(5), 2, 0,
                                                                            seed=seed)), exc, msg)


def test_without_distributed_package(monkeypatch):
    """World size and rank come from ``ndgrad.distributed``; where it cannot be imported, or has
    no MPI, torch's RuntimeError."""
    monkeypatch.delattr(ndgrad, "distributed", raising=False)
    monkeypatch.setitem(sys.modules, "ndgrad.distributed", None)  # makes importing it fail
    for kw in ({}, {"num_replicas": 2}, {"rank": 0}):
        with pytest.raises(RuntimeError, match="^Requires distributed package to be available$"):
            nd_dist.DistributedSampler(range(5), **kw)
    monkeypatch.setitem(sys.modules, "ndgrad.distributed",
                        types.SimpleNamespace(is_available=lambda: False))
    with pytest.raises(RuntimeError, match="^Requires distributed package to be available$"):
        nd_dist.DistributedSampler(range(5))


def test_process_group_lookup(monkeypatch):
    """``num_replicas``/``rank`` left out: asked of ``ndgrad.distributed``'s default group."""
    dist = pytest.importorskip("ndgrad.distributed")
    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 3)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 2)
    s = nd_dist.DistributedSampler(range(10), shuffle=False)
    assert (s.num_replicas, s.rank, list(s)) == (3, 2, [2, 5, 8, 1])


def test_exports():
    assert ndgrad.utils.data.DistributedSampler is nd_dist.DistributedSampler
    assert "DistributedSampler" in ndgrad.utils.data.__all__
    assert issubclass(nd_dist.DistributedSampler, ndgrad.utils.data.Sampler)
    assert np.array_equal(nd_dist._randperm(0, 0), [])


def test_no_process_group(ref):
    """Without ``init_process_group``, the lookup fails as torch's does."""
    dist = pytest.importorskip("ndgrad.distributed")
    if not dist.is_available() or dist.is_initialized():
        pytest.skip("needs ndgrad.distributed available with no default group")
    ref.raises(lambda T: T.utils.data.distributed.DistributedSampler(range(5)), ValueError)
