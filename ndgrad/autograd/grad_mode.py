"""Grad modes: whether ops record a graph, per thread (``no_grad``, ``enable_grad``, ...).

``state`` is the one thread-local record the dispatcher reads; each context manager saves the
previous value on entry and restores it on exit, so modes nest and work as decorators.
"""

from __future__ import annotations

import functools
import inspect
import threading

from . import dispatch_mode as _dm

__all__ = [
    "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
    "is_inference_mode_enabled",
]


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.inference = False


state = _State()

INPLACE_MSG = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone "
    "to get a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 "
    "for more details.")


class _NoVersionCounter(list):
    """The one "version counter" every inference tensor shares in its ``_vc`` slot: inference
    tensors track no version (reads give 0), so a write inside inference mode counts nothing;
    outside it the write is refused (the in-place ops check first; this catches the rest)."""

    __slots__ = ()

    def __setitem__(self, i, value):
        if not state.inference:
            raise RuntimeError(INPLACE_MSG)


INFERENCE_VC = _NoVersionCounter([0])  # ``t._vc is INFERENCE_VC``: t is an inference tensor
# The dispatch mode that makes what ops create inside inference mode inference tensors; set by
# the op layer (``_ops.registry``), which defines it.
inference_marker = None


def is_grad_enabled() -> bool:
    return state.grad_enabled


def is_inference_mode_enabled() -> bool:
    return state.inference


class _DecoratorContextManager:
    """Lets a mode be used as ``with mode():`` and as ``@mode()`` (or bare ``@no_grad``)."""

    def __call__(self, func):
        if inspect.isclass(func):
            raise RuntimeError("Decorating classes is not supported.")
        if inspect.isgeneratorfunction(func):
            return self._wrap_generator(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return wrapper

    def _wrap_generator(self, func):
        """The mode is active only while the generator's own code runs (each resume), never while
        the consumer holds an item; send(), throw(), close() and the return value pass through."""

        @functools.wraps(func)
        def gen(*args, **kwargs):
            inner = func(*args, **kwargs)
            try:
                with self.clone():
                    item = inner.send(None)
                while True:
                    try:
                        sent = yield item
                    except GeneratorExit:
                        with self.clone():
                            inner.close()
                        raise
                    except BaseException as exc:
                        with self.clone():
                            item = inner.throw(exc)
                    else:
                        with self.clone():
                            item = inner.send(sent)
            except StopIteration as stop:
                return stop.value

        return gen

    def clone(self):
        return self.__class__()


class no_grad(_DecoratorContextManager):
    """Context manager (and decorator) that disables gradient recording on this thread."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)  # bare ``@no_grad``

    def __init__(self, orig_func=None):
        self.prev = None

    def __enter__(self):
        self.prev = state.grad_enabled
        state.grad_enabled = False

    def __exit__(self, *exc):
        state.grad_enabled = self.prev


class enable_grad(_DecoratorContextManager):
    """Context manager (and decorator) that enables gradient recording on this thread."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)

    def __init__(self, orig_func=None):
        self.prev = None

    def __enter__(self):
        self.prev = state.grad_enabled
        state.grad_enabled = True

    def __exit__(self, *exc):
        state.grad_enabled = self.prev


class set_grad_enabled(_DecoratorContextManager):
    """Sets grad mode at construction (usable as a plain call) and restores it on ``__exit__``."""

    def __init__(self, mode: bool):
        self.prev = state.grad_enabled
        self.mode = bool(mode)
        state.grad_enabled = self.mode

    def __call__(self, func):
        state.grad_enabled = self.prev
        return super().__call__(func)

    def __enter__(self):
        state.grad_enabled = self.mode

    def __exit__(self, *exc):
        state.grad_enabled = self.prev

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """Like ``no_grad``, and marks the thread as in inference mode; ``mode=False`` leaves inference
    mode and enables grad mode."""

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)

    def __init__(self, mode: bool = True):
        self.mode = mode
        self.prev = None

    def __enter__(self):
        self.prev = (state.grad_enabled, state.inference)
        # NOTE(pytorch): entering with mode=False is not a no-op: it leaves inference mode and
        # turns grad mode on, even inside no_grad
        state.grad_enabled = not self.mode
        state.inference = bool(self.mode)
        if self.mode:
            # Every op of this thread now leaves its fast path to pass the marker (one
            # ``dispatch`` more per op); with inference mode off, ops pay nothing for it.
            _dm.push(inference_marker)

    def __exit__(self, *exc):
        state.grad_enabled, state.inference = self.prev
        if self.mode:
            _dm.remove(inference_marker)

    def clone(self):
        return self.__class__(self.mode)
