"""DataLoader worker processes (``num_workers > 0``), with PyTorch's semantics.

Each worker holds its own copy of the dataset and loop: it takes ``(task, keys)`` from its index
queue, fetches and collates the batch, and puts ``(task, batch)`` on the shared result queue.
The main process keeps ``prefetch_factor`` tasks per worker in flight, hands them out round
robin, and yields results in task order (or as they come, with ``in_order=False``). A worker
is seeded with ``base_seed + worker_id`` (``random``, ndgrad's RNG and NumPy's legacy global
RNG), runs ``worker_init_fn(worker_id)`` first, and reports an exception as a wrapped message
that the main process re-raises as "Caught <Error> in DataLoader worker process <id>".
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import random
import sys
import traceback

__all__ = ["WorkerInfo", "get_worker_info"]

_worker_info = None
_POLL = 5.0  # seconds between checks that the workers are alive while waiting


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker (read-only after creation)."""

    __initialized = False

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs.keys())
        self.__initialized = True

    def __setattr__(self, key, val):
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        return super().__setattr__(key, val)

    def __repr__(self):
        items = ", ".join(f"{k}={getattr(self, k)}" for k in self.__keys)
        return f"{self.__class__.__name__}({items})"


def get_worker_info():
    """In a DataLoader worker: its ``WorkerInfo`` (id, num_workers, seed, dataset); else None."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process as its type and text."""

    def __init__(self, exc_info, where: str):
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)  # KeyError would repr() its message
        try:
            exc = self.exc_type(msg)
        except Exception:  # noqa: BLE001 - a type that needs other arguments
            raise RuntimeError(msg) from None
        raise exc


class _KeyErrorMessage(str):
    def __repr__(self):
        return self


class _IterableEnd:
    """A worker's iterable dataset is exhausted."""

    def __init__(self, worker_id: int):
        self.worker_id = worker_id


def _seed_numpy(base_seed: int, worker_id: int) -> None:
    import numpy as np
    state = np.random.SeedSequence([worker_id, base_seed & (2**64 - 1)]).generate_state(4)
    np.random.seed(state)


def _worker_loop(dataset, index_queue, result_queue, done_event, auto_collation, collate_fn,
                 drop_last, batch_size, base_seed, init_fn, worker_id, num_workers,
                 iterable) -> None:
    global _worker_info
    from ... import _factories
    try:
        seed = base_seed + worker_id
        random.seed(seed)
        _factories.manual_seed(seed)
        _seed_numpy(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed,
                                  dataset=dataset)
        init_error = None
        if init_fn is not None:
            try:
                init_fn(worker_id)
            except Exception:  # noqa: BLE001 - reported with the first task
                init_error = ExceptionWrapper(sys.exc_info(),
                                              f"in DataLoader worker process {worker_id}")
        it = iter(dataset) if iterable and init_error is None else None
        ended = False
        while not done_event.is_set():
            try:
                task = index_queue.get(timeout=_POLL)
            except queue.Empty:
                continue
            if task is None:  # shut down
                break
            idx, keys = task
            if idx < 0:  # a new epoch of persistent workers: the iterable starts over
                it = iter(dataset) if iterable else None
                ended = False
                continue
            if init_error is not None:
                result_queue.put((idx, init_error))
                init_error = None
                ended = iterable
                continue
            if ended:
                result_queue.put((idx, _IterableEnd(worker_id)))
                continue
            try:
                if iterable:
                    if auto_collation:
                        batch = list(itertools.islice(it, batch_size))
                        if not batch or (drop_last and len(batch) < batch_size):
                            raise StopIteration
                        data = collate_fn(batch)
                    else:
                        data = collate_fn(next(it))
                else:
                    data = collate_fn(_fetch(dataset, keys) if auto_collation else dataset[keys])
            except StopIteration:
                ended = True
                data = _IterableEnd(worker_id)
            except Exception:  # noqa: BLE001 - handed to the main process
                data = ExceptionWrapper(sys.exc_info(),
                                        f"in DataLoader worker process {worker_id}")
            result_queue.put((idx, data))
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        result_queue.cancel_join_thread()
        result_queue.close()


def _fetch(dataset, keys):
    getitems = getattr(dataset, "__getitems__", None)
    return getitems(keys) if getitems else [dataset[i] for i in keys]


def draw_base_seed(generator) -> int:
    """PyTorch draws one int64 from the loader's generator (or the global one) at the start of
    every pass, with workers or without, before the sampler draws its own; so do we, so that a
    seeded script sees the same stream either way."""
    from ..._dtype import int64
    from ..._ops.factory import empty
    return int(empty((), dtype=int64).random_(generator=generator).item())


class MultiProcessIter:
    """One pass over a DataLoader with worker processes (reusable with ``persistent_workers``)."""

    def __init__(self, loader):
        self.loader = loader
        self.iterable = loader._iterable
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing.get_context()
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self.n = loader.num_workers
        self.prefetch = loader.prefetch_factor if loader.prefetch_factor is not None else 2
        base_seed = draw_base_seed(loader.generator)
        self.result_queue = ctx.Queue()
        self.done_event = ctx.Event()
        self.index_queues, self.workers = [], []
        for wid in range(self.n):
            iq = ctx.Queue()
            iq.cancel_join_thread()
            w = ctx.Process(target=_worker_loop, daemon=True, args=(
                loader.dataset, iq, self.result_queue, self.done_event, loader._auto_collation,
                loader.collate_fn, loader.drop_last, loader.batch_size, base_seed,
                loader.worker_init_fn, wid, self.n, self.iterable))
            w.start()
            self.index_queues.append(iq)
            self.workers.append(w)
        self.shut = False
        self.sent = self.rcvd = 0
        self.buffer = {}
        self._reset(first=True)

    def _reset(self, first: bool = False) -> None:
        """Start a pass: drop what an unfinished pass left in flight, restart the keys."""
        pending = self.sent - self.rcvd - len(self.buffer)  # the buffer holds some already
        for _ in range(pending):
            self._get()
        if not first:
            for iq in self.index_queues:
                iq.put((-1, None))
        self.keys = iter(self.loader._index_sampler) if not self.iterable else itertools.count()
        self.sent = self.rcvd = 0
        self.buffer = {}  # task -> result that came before its turn
        self.owner = {}   # task -> worker it was sent to
        self.active = [True] * self.n  # iterable workers still producing
        self.next_worker = itertools.cycle(range(self.n))
        self.exhausted = False
        for _ in range(self.prefetch * self.n):
            self._send()

    def _send(self) -> None:
        if self.exhausted or not any(self.active):
            return
        for _ in range(self.n):
            wid = next(self.next_worker)
            if self.active[wid]:
                break
        else:
            return
        try:
            keys = next(self.keys)
        except StopIteration:
            self.exhausted = True
            return
        self.index_queues[wid].put((self.sent, keys))
        self.owner[self.sent] = wid
        self.sent += 1

    def _get(self):
        timeout = self.loader.timeout
        waited = 0.0
        while True:
            step = min(_POLL, timeout - waited) if timeout > 0 else _POLL
            try:
                return self.result_queue.get(timeout=step)
            except queue.Empty:
                waited += step
                if timeout > 0 and waited >= timeout:
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None
                dead = [w.pid for w in self.workers if not w.is_alive()]
                if dead:
                    self.shutdown()
                    pids = ", ".join(str(p) for p in dead)
                    raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited "
                                       "unexpectedly") from None

    def __iter__(self):
        return self

    def __next__(self):
        in_order = self.loader.in_order
        while True:
            if self.rcvd >= self.sent:
                if not self.exhausted and any(self.active):
                    self._send()  # nothing in flight, yet more to fetch
                    continue
                if not self.loader.persistent_workers:
                    self.shutdown()
                raise StopIteration
            if in_order and self.rcvd in self.buffer:
                data = self.buffer.pop(self.rcvd)
            else:
                idx, data = self._get()
                if in_order and idx != self.rcvd:
                    self.buffer[idx] = data
                    continue
            self.rcvd += 1
            if isinstance(data, _IterableEnd):
                self.active[data.worker_id] = False
                continue
            self._send()
            if isinstance(data, ExceptionWrapper):
                if not self.loader.persistent_workers:
                    self.shutdown()
                data.reraise()
            return data

    def shutdown(self) -> None:
        if self.shut:
            return
        self.shut = True
        self.done_event.set()
        for iq in self.index_queues:
            try:
                iq.put(None)
            except (OSError, ValueError):
                pass
        for w in self.workers:
            w.join(timeout=_POLL)
            if w.is_alive():
                w.terminate()
        for iq in self.index_queues:
            iq.close()
        self.result_queue.cancel_join_thread()
        self.result_queue.close()

    def __del__(self):
        if getattr(self, "workers", None) and os.getpid() == getattr(self.workers[0], "_parent_pid",
                                                                      os.getpid()):
            self.shutdown()
