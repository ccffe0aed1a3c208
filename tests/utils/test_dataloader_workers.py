"""DataLoader with worker processes: the same batches as in-process loading, PyTorch's worker info,
seeding, init function, errors, iterable-dataset sharding, persistent workers and timeouts."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import ndgrad as nd
from ndgrad.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset, get_worker_info


class Squares(Dataset):
    def __init__(self, n=23, bad=None):
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise ValueError(f"bad item {i}")
        return nd.tensor([float(i * i)]), i


class WhoLoads(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return (info.id, info.num_workers, info.seed, os.getpid(),
                float(nd.rand(1).item()), float(np.random.rand()))


class Stream(IterableDataset):
    """Shards itself over the workers with get_worker_info, as PyTorch's docs show."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


def _flat(loader):
    return [(b[0].numpy().ravel().tolist(), b[1].tolist()) for b in loader]


@pytest.mark.parametrize("workers,prefetch", [(1, None), (2, None), (3, 1), (2, 4)])
def test_batches_equal_in_process_loading(workers, prefetch):
    ds = Squares()
    want = _flat(DataLoader(ds, batch_size=4))
    got = _flat(DataLoader(ds, batch_size=4, num_workers=workers, prefetch_factor=prefetch))
    assert got == want


def test_shuffled_order_and_sampler_draws_match_in_process():
    ds = Squares()
    nd.manual_seed(5)
    want = _flat(DataLoader(ds, batch_size=5, shuffle=True))
    nd.manual_seed(5)
    got = _flat(DataLoader(ds, batch_size=5, shuffle=True, num_workers=2))
    assert sorted(k for b in got for k in b[1]) == list(range(23))
    assert [b[1] for b in got] == [b[1] for b in want]


def test_worker_info_seeds_and_init_fn():
    seen = []

    def init(worker_id):
        info = get_worker_info()
        assert info.id == worker_id and info.num_workers == 2
        with pytest.raises(RuntimeError, match="Cannot assign attributes"):
            info.id = 5

    nd.manual_seed(0)
    rows = [r for batch in DataLoader(WhoLoads(), batch_size=2, num_workers=2,
                                      worker_init_fn=init) for r in zip(*batch)]
    seen = {(int(r[0]), int(r[1])) for r in rows}
    assert seen == {(0, 2), (1, 2)}
    seeds = {int(r[0]): int(r[2]) for r in rows}
    assert seeds[1] == seeds[0] + 1  # base_seed + worker_id
    assert len({int(r[3]) for r in rows}) == 2 and os.getpid() not in {int(r[3]) for r in rows}
    # ndgrad's and NumPy's RNGs differ between workers
    first = {int(r[0]): (r[4], r[5]) for r in rows}
    assert first[0] != first[1]
    assert get_worker_info() is None


def test_error_in_a_worker_is_reraised_with_its_traceback():
    loader = DataLoader(Squares(bad=9), batch_size=4, num_workers=2)
    with pytest.raises(ValueError) as e:
        list(loader)
    text = str(e.value)
    assert text.startswith("Caught ValueError in DataLoader worker process ")
    assert "Original Traceback (most recent call last):" in text and "bad item 9" in text


def test_error_in_worker_init_fn():
    def init(worker_id):
        raise KeyError("no such key")

    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process"):
        list(DataLoader(Squares(), batch_size=4, num_workers=1, worker_init_fn=init))


def test_iterable_dataset_sharded_over_workers():
    got = [int(x) for b in DataLoader(Stream(11), batch_size=2, num_workers=2) for x in b]
    assert sorted(got) == list(range(11))
    unbatched = [int(x) for x in DataLoader(Stream(7), batch_size=None, num_workers=3)]
    assert sorted(unbatched) == list(range(7))


def test_persistent_workers_survive_epochs_and_restart_iterables():
    loader = DataLoader(Squares(), batch_size=4, num_workers=2, persistent_workers=True)
    first = _flat(loader)
    pids = [w.pid for w in loader._iterator.workers]
    for _ in range(2):
        assert _flat(loader) == first
    assert [w.pid for w in loader._iterator.workers] == pids
    # an epoch left early does not leak its batches into the next one
    it = iter(loader)
    next(it)
    assert _flat(loader) == first
    stream = DataLoader(Stream(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert sorted(int(x) for b in stream for x in b) == list(range(6))
    assert sorted(int(x) for b in stream for x in b) == list(range(6))
    loader._iterator.shutdown()
    stream._iterator.shutdown()


class Slow(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(3)
        return i


def test_timeout():
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.5 seconds"):
        list(DataLoader(Slow(), num_workers=1, timeout=0.5))


def test_tensor_dataset_values_survive_the_trip():
    x = nd.randn(10, 3)
    y = nd.arange(10)
    got = list(DataLoader(TensorDataset(x, y), batch_size=3, num_workers=2))
    np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in got]), x.numpy())
    np.testing.assert_array_equal(np.concatenate([b[1].numpy() for b in got]), y.numpy())
