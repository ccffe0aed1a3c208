"""``DataLoader``: batches from a dataset through a sampler and a collate function, plus
``default_collate`` / ``default_convert`` (how samples become batched tensors).

With ``num_workers > 0`` batches are loaded in worker processes (``_worker.py``), with
PyTorch's seeding, ``worker_init_fn``, ``get_worker_info``, ``prefetch_factor``,
``persistent_workers``, ``timeout`` and worker errors; otherwise in the calling process.
"""

from __future__ import annotations

import collections.abc as abc
import copy
import re

import numpy as np

from ... import _dtype, _factories
from ..._tensor import Tensor
from ._worker import MultiProcessIter, draw_base_seed, get_worker_info
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

_COLLATE_ERR = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)
_STR_OBJ = re.compile(r"[SaUO]")  # NumPy dtype codes of strings and objects: never tensors


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_convert(data):
    """NumPy arrays and scalars become tensors, inside any container; the rest stays."""
    t = type(data)
    if isinstance(data, Tensor):
        return data
    if t.__module__ == "numpy" and t.__name__ not in ("str_", "bytes_"):
        if isinstance(data, np.ndarray) and _STR_OBJ.search(data.dtype.str):
            return data
        return _factories.as_tensor(data)
    if isinstance(data, abc.Mapping):
        try:
            if isinstance(data, abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({k: default_convert(v) for k, v in data.items()})
                return clone
            return t({k: default_convert(v) for k, v in data.items()})
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if _is_namedtuple(data):
        return t(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, abc.Sequence) and not isinstance(data, (str, bytes)):
        converted = [default_convert(d) for d in data]
        try:
            if isinstance(data, abc.MutableSequence):
                clone = copy.copy(data)
                clone[:] = converted
                return clone
            return t(converted)
        except TypeError:
            return converted
    return data


def default_collate(batch):
    """Stack a list of samples into a batch, recursing into dicts, tuples and lists.

    Tensors are stacked on a new first dim, NumPy arrays and scalars become tensors first,
    Python floats give float64 and ints int64 (bools bool) tensors, strings stay a list.

    >>> import ndgrad
    >>> from ndgrad.utils.data import default_collate
    >>> default_collate([(1, 2.0), (3, 4.0)])
    [tensor([1, 3]), tensor([2., 4.], dtype=ndgrad.float64)]
    """
    elem = batch[0]
    t = type(elem)
    if isinstance(elem, Tensor):
        from ... import stack

        return stack(batch, 0)
    if t.__module__ == "numpy" and t.__name__ not in ("str_", "bytes_"):
        if isinstance(elem, np.ndarray):
            if _STR_OBJ.search(elem.dtype.str):
                raise TypeError(_COLLATE_ERR.format(elem.dtype))
            return default_collate([_factories.as_tensor(b) for b in batch])
        if elem.shape == ():
            return _factories.as_tensor(batch)
    elif isinstance(elem, float):
        return _factories.tensor(batch, dtype=_dtype.float64)
    elif isinstance(elem, int):
        return _factories.tensor(batch)
    elif isinstance(elem, (str, bytes)):
        return batch
    elif isinstance(elem, abc.Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            if isinstance(elem, abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update(out)
                return clone
            return t(out)
        except TypeError:
            return out
    elif _is_namedtuple(elem):
        return t(*(default_collate(s) for s in zip(*batch)))
    elif isinstance(elem, abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            if isinstance(elem, abc.MutableSequence):
                clone = copy.copy(elem)
                clone[:] = columns
                return clone
            return t(columns)
        except TypeError:
            return columns
    raise TypeError(_COLLATE_ERR.format(t))


class _InfiniteConstantSampler:
    """The sampler of an iterable dataset: keys are meaningless, so always None."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` (``None``: single samples),
    optionally shuffled, collating each batch with ``collate_fn``."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers: int = 0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None,
                 persistent_workers: bool = False, pin_memory_device: str = "",
                 in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._iterable = isinstance(dataset, IterableDataset)
        self._iterator = None  # the workers kept between passes (persistent_workers)

        if isinstance(dataset, IterableDataset):
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                     f"{name} option, but got {name}={value}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if isinstance(dataset, IterableDataset):
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers == 0:
            draw_base_seed(self.generator)
            return self._single_process_iter()
        if not self.persistent_workers:
            return MultiProcessIter(self)
        if self._iterator is None or self._iterator.shut:
            self._iterator = MultiProcessIter(self)
        else:
            self._iterator._reset()
        return self._iterator

    def _single_process_iter(self):
        collate, ds = self.collate_fn, self.dataset
        if isinstance(ds, IterableDataset):
            it = iter(ds)
            if not self._auto_collation:
                for sample in it:
                    yield collate(sample)
                return
            size = self.batch_size
            while True:
                batch = [s for _, s in zip(range(size), it)]
                if not batch or (len(batch) < size and self.drop_last):
                    return
                yield collate(batch)
                if len(batch) < size:
                    return
        elif self._auto_collation:
            getitems = getattr(ds, "__getitems__", None)
            for keys in self.batch_sampler:
                yield collate(getitems(keys) if getitems else [ds[i] for i in keys])
        else:
            for key in self.sampler:
                yield collate(ds[key])

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)
