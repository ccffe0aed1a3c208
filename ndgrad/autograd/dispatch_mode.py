"""Dispatch modes: objects that see every op call at the one dispatch point (DESIGN §4, §8).

A mode handles an op in ``dispatch(rec, args, run)``: ``rec`` is the op record (which is also
PyTorch's ``OpOverload``), ``args`` its arguments in schema order, and ``run(rec, args)`` runs
the op under the modes below this one. ``TorchDispatchMode`` is PyTorch's user-facing form: its
``dispatch`` calls ``__torch_dispatch__(func, types, args, kwargs)``. The stacks live here, in
the autograd core, so layers below the ops (saved-tensor contexts) can enter modes too.

Modes sit on per-thread stacks. Process-wide modes (``process_wide = True``: the profiler,
anomaly mode and forward AD, which are global in PyTorch too) sit above every thread's own
stack. The dispatch point's one check on the hot path is ``active``: non-empty while any mode is
entered on any thread.
"""

from __future__ import annotations

import threading

__all__ = ["TorchDispatchMode", "active", "push", "remove", "handler", "current_stack"]

active: list = []  # every mode entered, on any thread: the dispatch point's one check
_global: list = []  # process-wide modes, handled before any thread's own


class _Local(threading.local):
    depth = 0  # how many of the innermost-handled modes this thread's ops skip now

    def __init__(self):
        self.stack = []


_local = _Local()


def push(mode) -> None:
    """Enter ``mode``: every op call (of this thread, or of all for a process-wide mode) becomes
    ``mode.dispatch(rec, args, run)``."""
    (_global if getattr(mode, "process_wide", False) else _local.stack).append(mode)
    active.append(mode)


def remove(mode) -> bool:
    """Take ``mode`` off its stack wherever it sits (a mode entered after it may still be
    active); returns whether it was there."""
    for lst in (_global if getattr(mode, "process_wide", False) else _local.stack, active):
        for i in range(len(lst) - 1, -1, -1):
            if lst[i] is mode:
                del lst[i]
                break
        else:
            return False
    return True


def handler():
    """The mode that handles this thread's next op call, or None."""
    loc = _local
    stack = loc.stack
    n = len(stack) + len(_global) - loc.depth
    if n <= 0:
        return None
    k = n - 1 - len(stack)
    return _global[k] if k >= 0 else stack[n - 1]


def current_stack() -> list:
    """This thread's effective stack, innermost first (handled last)."""
    return _local.stack + _global


class skip_current:
    """Within, this thread's op calls skip the mode now handling one (``run`` uses the same
    counter); a mode's own computations use it so they do not come back to it."""

    __slots__ = ("depth",)

    def __enter__(self):
        self.depth = _local.depth
        _local.depth = self.depth + 1

    def __exit__(self, *exc):
        _local.depth = self.depth


class TorchDispatchMode:
    """PyTorch's ``TorchDispatchMode``: subclass it, define ``__torch_dispatch__`` and use the
    instance as a context manager; every op call of this thread inside it reaches
    ``__torch_dispatch__(func, types, args, kwargs)``, where ``func`` is the op overload
    (``ndgrad.ops.aten.mm.default``). Calling ``func(*args, **kwargs)`` there runs the op under
    the modes below this one.

    >>> import ndgrad
    >>> from ndgrad.utils._python_dispatch import TorchDispatchMode
    >>> class Log(TorchDispatchMode):
    ...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
    ...         print(func)
    ...         return func(*args, **(kwargs or {}))
    >>> with Log():
    ...     _ = ndgrad.ones(2) * 3
    aten.ones.default
    aten.mul.Tensor
    """

    __slots__ = ()
    process_wide = False

    def __init__(self, _dispatch_key=None):
        pass

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError

    def dispatch(self, rec, args, run):
        types, pos, kwargs = rec._dispatch_args(args)
        loc = _local
        depth = loc.depth
        loc.depth = depth + 1  # what the handler calls runs below this mode, as ``run`` would
        try:
            return self.__torch_dispatch__(rec, types, pos, kwargs)
        finally:
            loc.depth = depth

    def __enter__(self):
        push(self)
        return self

    def __exit__(self, *exc):
        remove(self)
        return False

    @classmethod
    def push(cls, *args, **kwargs):
        return cls(*args, **kwargs)

    @classmethod
    def is_infra_mode(cls) -> bool:
        return False
