"""``ndgrad.futures``: ``Future``, a value set once (possibly from another thread) that callbacks
and waiters observe, plus ``collect_all`` and ``wait_all`` (``torch.futures``).

A future ends in one of three states, as PyTorch's does: a value; an exception given to
``set_exception`` (re-raised by ``wait``/``value``; ``collect_all`` still waits for the rest, then
re-raises the first one); or an error, when a ``then`` callback raised (re-raised as a
``RuntimeError``; it fails ``collect_all`` at once).
"""

from __future__ import annotations

import logging
import threading
import traceback
import types

__all__ = ["Future", "collect_all", "wait_all"]

_log = logging.getLogger(__name__)
_ONCE = ("Attempting to mark a completed Future as complete again. Note that a Future can only "
         "be marked completed once.")


def _callback_error(exc: BaseException) -> RuntimeError:
    """PyTorch's wrapping of an exception raised by a callback: type, message, then the frames
    outside this file (innermost first) as ``file(line): function``."""
    frames = traceback.extract_tb(exc.__traceback__)[::-1] + traceback.extract_stack()[::-1]
    where = "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in frames
                    if f.filename != __file__)
    err = RuntimeError(f"Got the following error when running the callback: "
                       f"{type(exc).__name__}: {exc}\n\nAt:\n{where}")
    err.__cause__ = exc
    return err


class Future:
    r"""Wrapper around an asynchronous result: set once with :meth:`set_result` or
    :meth:`set_exception`, read with :meth:`wait`, chained with :meth:`then`.

    Example::

        >>> import ndgrad
        >>> fut = ndgrad.futures.Future()
        >>> doubled = fut.then(lambda f: f.wait() * 2)
        >>> fut.set_result(21)
        >>> doubled.wait()
        42
    """

    # a Future per DDP bucket per step: slots, and an Event only once someone blocks on it
    __slots__ = ("__weakref__", "_callbacks", "_devices", "_done", "_drive", "_event", "_failed",
                 "_lock", "_raise", "_value")
    __class_getitem__ = classmethod(types.GenericAlias)  # ``Future[Tensor]`` in annotations

    def __init__(self, *, devices=None) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._value = None
        self._raise = None  # the exception wait()/value() raise
        self._failed = False  # completed by a failing callback: an error, not a value
        self._callbacks = []
        self._event = None
        self._devices = [] if devices is None else [_device(d) for d in devices]
        # What completes this future when nothing else will: a collective that progresses only
        # while someone waits on it (MPI). ``then`` hands it on, so waiting on a chained future
        # completes the collective first.
        self._drive = None

    def done(self) -> bool:
        """``True`` once this ``Future`` has a result or an exception."""
        return self._done

    def wait(self):
        """Block until the value is ready and return it; raise the exception if one was set."""
        if not self._done and self._drive is not None:
            self._drive()
        if not self._done:
            with self._lock:
                if not self._done and self._event is None:
                    self._event = threading.Event()
                event = self._event
            if event is not None:  # None: it completed while we took the lock
                event.wait()
        return self.value()

    def value(self):
        """The value of a completed ``Future`` (raises its exception, if it holds one)."""
        if not self._done:
            raise RuntimeError("completed() INTERNAL ASSERT FAILED: value() called on a Future "
                               "that is not completed yet; call wait() first")
        if self._raise is not None:
            raise self._raise
        return self._value

    def then(self, callback) -> Future:
        """A new ``Future`` holding ``callback(self)``, run once this one completes (inline if it
        already has); an exception from ``callback`` completes the new ``Future`` with an error."""
        _check_callable("then", callback)
        child = Future()
        child._devices = self._devices
        child._drive = self.wait if self._drive is not None else None

        def run(fut):
            try:
                result = callback(fut)
            except Exception as e:  # noqa: BLE001  (any error completes the child, as in torch)
                child._complete(None, _callback_error(e), failed=True)
            else:
                child._complete(result, None, failed=False)

        self._add(run)
        return child

    def add_done_callback(self, callback) -> None:
        """Run ``callback(self)`` once this ``Future`` completes (inline if it already has). An
        exception from ``callback`` is logged, not raised: nothing waits on its result."""
        _check_callable("add_done_callback", callback)

        def run(fut):
            try:
                callback(fut)
            except Exception as e:  # noqa: BLE001  (torch logs any error and goes on)
                _log.error("%s", _callback_error(e))

        self._add(run)

    def set_result(self, result) -> None:
        """Mark this ``Future`` completed with ``result`` and run its callbacks."""
        self._complete(result, None, failed=False)

    def set_exception(self, result) -> None:
        """Mark this ``Future`` completed with the exception ``result``: ``wait()`` and ``value()``
        raise it."""
        if not isinstance(result, Exception):
            raise AssertionError(  # noqa: TRY004  (torch's type)
                f"{result} is of type {type(result)}, not an Exception.")
        self._complete(result, result, failed=False)

    # --- internals ---
    def _add(self, run) -> None:
        if not self._done:
            with self._lock:
                if not self._done:
                    self._callbacks.append(run)
                    return
        run(self)

    def _complete(self, value, exc, failed: bool) -> None:
        with self._lock:
            if self._done:
                raise RuntimeError(_ONCE)
            self._value, self._raise, self._failed = value, exc, failed
            self._done = True  # last: readers that see it without the lock see the rest
            callbacks, self._callbacks = self._callbacks, None
            event = self._event
        if event is not None:
            event.set()
        for run in callbacks:  # registration order; outside the lock, so they may chain
            run(self)


def _check_callable(name: str, callback) -> None:
    if not callable(callback):
        raise TypeError(f"{name}(): incompatible function arguments: expected a callable, "
                        f"got {type(callback).__name__}")


def _device(d):
    """A device a future's tensors may live on; like PyTorch, it must name its index."""
    from .._backend import device

    dev = device(d) if not isinstance(d, int) else device("cuda", d)
    if dev.index is None:
        raise ValueError(f"Expected devices to have indices, got {dev}")
    return dev


def collect_all(futures) -> Future:
    r"""A ``Future`` completed with the list ``futures`` once every one of them is; it fails
    as soon as one of them fails (a ``then`` callback raised), and its ``wait()`` raises the first
    exception given to ``set_exception`` among them.

    Example::

        >>> import ndgrad
        >>> a, b = ndgrad.futures.Future(), ndgrad.futures.Future()
        >>> both = ndgrad.futures.collect_all([a, b])
        >>> a.set_result(0); b.set_result(1)
        >>> [f.wait() for f in both.wait()]
        [0, 1]
    """
    futures = list(futures)
    for f in futures:
        if not isinstance(f, Future):
            raise TypeError(f"_collect_all(): incompatible function arguments: expected a list "
                            f"of Futures, got an element of type {type(f).__name__}")
    out = Future()
    if not futures:
        out.set_result(futures)
        return out
    lock = threading.Lock()
    state = {"left": len(futures), "finished": False}

    def one_done(fut):
        with lock:  # decide here, complete outside: ``out``'s callbacks may complete futures
            state["left"] -= 1
            if state["finished"] or not (fut._failed or state["left"] == 0):
                return
            state["finished"] = True
        if fut._failed:
            out._complete(None, fut._raise, failed=True)
        else:  # NOTE(pytorch): wait() on the collection raises the first exception set
            held = next((f._raise for f in futures if f._raise is not None), None)
            out._complete(futures, held, failed=False)

    for f in futures:
        f._add(one_done)
    return out


def wait_all(futures) -> list:
    r"""Wait for every future in ``futures`` and return their values. Raises the error of the
    first to fail (without waiting for the rest), else the first exception set among them."""
    return [fut.wait() for fut in collect_all(futures).wait()]
