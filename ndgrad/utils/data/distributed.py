"""``DistributedSampler``: one process's share of a dataset's keys (``torch.utils.data.distributed``).

The shuffled order is PyTorch's own: ``_randperm`` replays CPU ``torch.randperm`` under a
generator seeded with ``seed + epoch``, so ranks running ndgrad and ranks running torch split a
dataset identically. Process groups live in ``ndgrad.distributed``, imported only when the
world size or rank must be looked up.
"""

from __future__ import annotations

import math

import numpy as np

from .sampler import Sampler

__all__ = ["DistributedSampler"]

# --- torch's CPU randperm ---
# NOTE(pytorch): randperm_cpu swaps with 32-bit draws for n < 2**32 // 20 and runs the inside-out
# shuffle with 64-bit draws from there on (the modulo bias of 32-bit draws grows with n).
_INSIDE_OUT_N = 0xFFFFFFFF // 20


def _mt19937(seed: int) -> np.random.MT19937:
    """An MT19937 in the state of a torch CPU generator after ``manual_seed(seed)``."""
    key = [seed & 0xFFFFFFFF]  # torch seeds its mt19937 with the seed's low 32 bits
    for i in range(1, 624):  # init_genrand, the reference seeding; 0.2 ms per epoch
        key.append((1812433253 * (key[-1] ^ (key[-1] >> 30)) + i) & 0xFFFFFFFF)
    bg = np.random.MT19937(0)  # a fixed seed skips gathering OS entropy; overwritten next line
    bg.state = {"bit_generator": "MT19937", "state": {"key": np.array(key, np.uint32), "pos": 624}}
    return bg


def _writes(target: np.ndarray, n: int, itype) -> tuple[np.ndarray, np.ndarray]:
    """Group the writes ``step k -> position target[k]`` by position: per step, the previous
    step writing the same position, and per position, its last writing step (-1: none)."""
    order = np.argsort(target, kind="stable").astype(itype, copy=False)  # by position, then step
    pos = target[order]
    same = pos[1:] == pos[:-1]
    prev = np.full(len(target), -1, itype)
    prev[order[1:][same]] = order[:-1][same]
    last = np.full(n, -1, itype)
    ends = np.append(~same, True)
    last[pos[ends]] = order[ends]
    return prev, last


def _roots(parent: np.ndarray) -> np.ndarray:
    """Each node's root in the forest ``parent`` (roots point at themselves), by pointer
    doubling: log2(depth) gathers instead of a Python loop over the nodes."""
    while True:
        up = parent[parent]
        if np.array_equal(up, parent):
            return parent
        parent = up


def _swap_forward(j: np.ndarray, n: int, itype) -> np.ndarray:
    """``r = arange(n)`` after swapping ``r[i]`` and ``r[j[i]]`` (``j[i] >= i``) for i = 0..n-2.

    Position i is final after step i and holds what position ``j[i]`` held just before it: what
    the previous step k writing ``j[i]`` moved there (the value position k held just before step
    k), or ``j[i]`` when no step wrote there. "Held just before its own step" obeys the same rule,
    so it chains through earlier steps and resolves as a forest.
    """
    prev, last = _writes(j, n, itype)
    k = np.arange(n, dtype=itype)
    src = last.copy()
    own = src[:-1] == k[:-1]  # step k's write to itself comes after "just before step k"
    src[:-1][own] = prev[own]
    before = _roots(np.where(src >= 0, src, k))
    out = np.empty(n, itype)
    out[:-1] = np.where(prev >= 0, before[prev], j)
    out[-1] = before[-1]
    return out


def _inside_out(z: np.ndarray, n: int, itype) -> np.ndarray:
    """``r`` after ``r[i] = r[z[i]]; r[z[i]] = i`` (``z[i] <= i``) for i = 0..n-1.

    Position p ends with the last step i writing ``i`` there; failing that, with what step p
    moved in from ``z[p]``: the previous step writing ``z[p]`` (its own number), or, with none,
    whatever step ``z[p]`` moved in, a chain resolved as a forest.
    """
    prev, last = _writes(z, n, itype)
    p = np.arange(n, dtype=itype)
    moved_from = _roots(np.where(prev >= 0, p, z))
    return np.where(last >= 0, last, prev[moved_from])


def _randperm(n: int, seed: int, inside_out_n: int = _INSIDE_OUT_N) -> np.ndarray:
    """``torch.randperm(n, generator=g)`` for a CPU generator ``g`` after ``g.manual_seed(seed)``.

    ndgrad's own generators draw from PCG64, so this replays torch's mt19937 stream and its
    shuffle, vectorised: 9 ms for n = 60000 where a Python swap loop takes 15 ms (median of 30).
    """
    if n < 2:
        return np.arange(n)
    bg = _mt19937(seed)
    itype = np.int32 if n < 2**31 else np.int64  # halves the memory of the large-n branch
    if n < inside_out_n:
        i = np.arange(n - 1, dtype=np.uint64)
        j = (bg.random_raw(n - 1) % (n - i) + i).astype(itype)  # random() % (n - i) + i
        return _swap_forward(j, n, itype)
    raw = bg.random_raw(2 * n)
    draws = (raw[0::2] << np.uint64(32)) | raw[1::2]  # random64(): first draw in the high half
    z = (draws % np.arange(1, n + 1, dtype=np.uint64)).astype(itype)
    return _inside_out(z, n, itype)


def _check_seed(seed) -> int:
    """PyTorch's checks on ``Generator.manual_seed``'s argument."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise RuntimeError(  # noqa: TRY004  (torch's type)
            f"manual_seed expected a long, but got {type(seed).__name__}")
    if not -(2**63) <= seed < 2**64:
        raise ValueError("Overflow when unpacking long long")
    return seed


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
            indices = _randperm(n, _check_seed(self.seed + self.epoch)).tolist()
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
