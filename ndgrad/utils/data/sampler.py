"""Samplers: iterables of dataset keys (``SequentialSampler``, ``RandomSampler``, ...) and
``BatchSampler``, which groups another sampler's keys into lists.

Randomness comes from an ``ndgrad.Generator`` when one is given; otherwise each pass seeds a
fresh one from the global RNG, so ``ndgrad.manual_seed`` makes every order reproducible. The
draws are PyTorch's (``randperm``, ``randint``, ``multinomial`` over its random stream), so a
seeded script visits samples in the order it does under PyTorch.
"""

from __future__ import annotations

import numpy as np

from ... import _factories

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


def _generator(generator):
    """``generator``, or (like PyTorch) a new one seeded by an int64 drawn from the global RNG."""
    if generator is not None:
        return generator
    from ..._dtype import int64
    from ..._ops.factory import empty
    seed = int(empty((), dtype=int64).random_().item())
    return _factories.Generator().manual_seed(seed)


def _randperm(n: int, generator) -> list:
    from ..._ops.random import randperm
    return randperm(n, generator=generator).tolist()


class Sampler:
    """Base class: subclasses define ``__iter__`` (and ``__len__`` where known)."""

    def __init__(self, data_source=None) -> None:
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source) -> None:
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation per pass (repeated when ``num_samples`` exceeds the length), or
    ``num_samples`` independent draws with ``replacement=True``."""

    def __init__(self, data_source, replacement: bool = False, num_samples=None,
                 generator=None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(
                f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        from ..._ops.factory import randint
        n, k = len(self.data_source), self.num_samples
        gen = _generator(self.generator)
        if self.replacement:
            for _ in range(k // 32):  # PyTorch draws in blocks of 32
                yield from randint(0, n, (32,), generator=gen).tolist()
            yield from randint(0, n, (k % 32,), generator=gen).tolist()
            return
        for _ in range(k // n):
            yield from _randperm(n, gen)
        yield from _randperm(n, gen)[: k % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order."""

    def __init__(self, indices, generator=None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _randperm(len(self.indices), self.generator):  # the global RNG when None
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(
                f"replacement should be a boolean value, but got replacement={replacement}")
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        from ... import tensor

        self.weights = tensor(w)
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        from ..._ops.random import multinomial
        w = self.weights._data
        if not self.replacement and self.num_samples > np.count_nonzero(w):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        yield from multinomial(self.weights, self.num_samples, self.replacement,
                               generator=self.generator).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` keys from ``sampler`` (the last one shorter unless ``drop_last``)."""

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        it = iter(self.sampler)
        size = self.batch_size
        while True:
            batch = [idx for _, idx in zip(range(size), it)]
            if len(batch) < size and (self.drop_last or not batch):
                return
            yield batch
            if len(batch) < size:
                return

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
