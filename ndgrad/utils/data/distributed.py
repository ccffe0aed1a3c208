"""``DistributedSampler``: one process's share of a dataset's keys (``torch.utils.data.distributed``).

The shuffled order is PyTorch's own: CPU ``torch.randperm`` (``ndgrad._random``) under a
generator seeded with ``seed + epoch``, so ranks running ndgrad and ranks running torch split a
dataset identically. Process groups live in ``ndgrad.distributed``, imported only when the
world size or rank must be looked up.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _random
from ..._factories import Generator
from .sampler import Sampler

__all__ = ["DistributedSampler"]

# --- torch's CPU randperm: ``ndgrad._random`` replays it; these name it for this module ---
def _mt19937(seed: int) -> np.random.MT19937:
    """An MT19937 in the state of a torch CPU generator after ``manual_seed(seed)``."""
    return _random.new_stream(seed)


def _randperm(n: int, seed: int, inside_out_n: int = _random.INSIDE_OUT_N) -> np.ndarray:
    """``torch.randperm(n, generator=g)`` for a CPU generator ``g`` after ``g.manual_seed(seed)``."""
    return _random.randperm(Generator().manual_seed(seed), n, inside_out_n)


# --- the sampler ---
def _dist():
    """``ndgrad.distributed``, or PyTorch's error where it cannot run."""
    try:
        from ... import distributed as dist
    except ImportError as e:
        if e.name not in ("ndgrad", "ndgrad.distributed"):  # a broken package, not a missing one
            raise
        dist = None
    if dist is None or not dist.is_available():
        raise RuntimeError("Requires distributed package to be available")
    return dist


class DistributedSampler(Sampler):
    r"""Sampler that restricts data loading to a subset of the dataset.

    Each of ``num_replicas`` processes gets every ``num_replicas``-th key of one shared order
    (shuffled by ``seed + epoch`` when ``shuffle``), starting at its ``rank``. Unless
    ``drop_last``, the head of the order is repeated so that every rank gets the same count;
    with it, the tail is dropped instead. Call :meth:`set_epoch` before each epoch to reshuffle.

    Example::

        >>> from ndgrad.utils.data.distributed import DistributedSampler
        >>> [list(DistributedSampler(range(11), 2, r, shuffle=False)) for r in (0, 1)]
        [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 0]]
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None:
            num_replicas = _dist().get_world_size()
        if rank is None:
            rank = _dist().get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # NOTE(pytorch): float division, as torch computes it
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = _randperm(n, self.seed + self.epoch).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:  # fewer keys than replicas: repeat the whole order
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[: self.total_size]
        if len(indices) != self.total_size:
            raise AssertionError(
                f"Number of indices ({len(indices)}) does not match total_size ({self.total_size})")
        indices = indices[self.rank : self.total_size : self.num_replicas]
        if len(indices) != self.num_samples:
            raise AssertionError(f"Number of subsampled indices ({len(indices)}) does not match "
                                 f"num_samples ({self.num_samples})")
        return iter(indices)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch, which (added to ``seed``) seeds the next pass's shuffle."""
        self.epoch = epoch
