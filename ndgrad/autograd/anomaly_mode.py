"""Anomaly mode (``torch.autograd.detect_anomaly``): forward tracebacks on nodes, NaN checks in
backward.

While enabled, a dispatch mode sits on the op registry's mode stack and stores the forward stack
in each new node's ``metadata["traceback_"]`` (and, for nodes made while the engine runs another
node, that node as ``metadata["parent_"]``). Off, nothing is on the stack and ops pay nothing.
The engine reads ``state`` once per backward call and, when on, takes its checked loop, which
warns with the failing node's forward traceback and raises on NaN gradients.
"""

from __future__ import annotations

import functools
import sys
import threading
import traceback
import warnings

from . import dispatch_mode
from .node import next_sequence_nr

__all__ = [
    "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
]


class _State:
    """Global, like PyTorch's (not per thread)."""

    __slots__ = ("enabled", "check_nan")

    def __init__(self):
        self.enabled = False
        self.check_nan = True


state = _State()
_local = threading.local()  # .node: the node the engine's checked loop is running in this thread


def is_anomaly_enabled() -> bool:
    return state.enabled


def is_anomaly_check_nan_enabled() -> bool:
    return state.check_nan


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """``torch.set_anomaly_enabled``: switch the mode and its NaN check (no warning)."""
    enabled = bool(enabled)
    if enabled and not state.enabled:
        dispatch_mode.push(_MODE)
    elif not enabled and state.enabled:
        # Removed wherever it sits: a mode pushed after ours (a profiler) may still be active.
        dispatch_mode.remove(_MODE)
    state.enabled = enabled
    state.check_nan = bool(check_nan)


class detect_anomaly:  # noqa: N801 - PyTorch's name
    """Context manager (and decorator) enabling anomaly detection for the autograd engine."""

    def __init__(self, check_nan: bool = True) -> None:
        self.prev = state.enabled
        self.check_nan = check_nan
        self.prev_check_nan = state.check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should "
            "only be enabled for debugging.",
            stacklevel=2,
        )

    def __enter__(self) -> None:
        self.prev, self.prev_check_nan = state.enabled, state.check_nan
        set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *exc) -> None:
        set_anomaly_enabled(self.prev, self.prev_check_nan)

    def __call__(self, fn):
        check_nan = self.check_nan

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):  # a fresh scope per call, so recursion and threads nest
            with _Scoped(True, check_nan):
                return fn(*args, **kwargs)

        return wrapper


class _Scoped:
    """Enable/restore without the warning (the decorator warned once when it was applied)."""

    __slots__ = ("mode", "check_nan", "prev", "prev_check_nan")

    def __init__(self, mode, check_nan):
        self.mode, self.check_nan = mode, check_nan

    def __enter__(self):
        self.prev, self.prev_check_nan = state.enabled, state.check_nan
        set_anomaly_enabled(self.mode, self.check_nan)

    def __exit__(self, *exc):
        set_anomaly_enabled(self.prev, self.prev_check_nan)


class set_detect_anomaly:  # noqa: N801 - PyTorch's name
    """Set anomaly detection on or off (at construction); as a context manager, restore the
    previous setting on exit."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = state.enabled
        self.prev_check_nan = state.check_nan
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        set_anomaly_enabled(self.prev, self.prev_check_nan)


# --- recording the forward traceback ---
def _forward_stack() -> list:
    """``traceback.format_stack()`` of the op call, without ndgrad's own innermost frames
    (PyTorch's dispatch is C++, so its tracebacks end in the caller's line)."""
    f = sys._getframe(2)
    while f is not None and _internal(f):
        f = f.f_back
    return traceback.format_list(traceback.extract_stack(f)) if f is not None else []


def _internal(frame) -> bool:
    # ndgrad's modules, and the op wrappers it generates with exec (globals without __name__).
    name = frame.f_globals.get("__name__")
    return name is None or name == "ndgrad" or name.startswith("ndgrad.")


class _AnomalyMode(dispatch_mode.TorchDispatchMode):
    """The dispatch mode: run the op, then annotate the nodes it created."""

    process_wide = True  # anomaly detection is global in PyTorch

    def dispatch(self, rec, args, run):
        start = next_sequence_nr()
        out = run(rec, args)
        nodes = []
        for t in out if type(out) in (tuple, list) else (out,):
            fn = getattr(t, "_grad_fn", None)
            if fn is not None:
                nodes.append(fn)
            view = getattr(t, "_view", None)
            if view is not None and view.base._grad_fn is not None:
                nodes.append(view.base._grad_fn)  # CopySlices after an in-place op on a view
        annotate([fn for fn in nodes if fn.sequence_nr >= start])  # older ones passed through
        return out


def annotate(nodes) -> None:
    """Record the forward traceback (and the node whose backward is running, if any) on each
    new node; called by the mode for ops and by ``Function.apply`` for custom Functions."""
    stack = None
    for fn in nodes:
        md = fn.metadata
        if "traceback_" in md:
            continue
        if stack is None:
            stack = _forward_stack()
        md["traceback_"] = stack
        parent = getattr(_local, "node", None)
        if parent is not None:
            md["parent_"] = parent


_MODE = _AnomalyMode()


# --- reporting, called by the engine's checked loop ---
def current_node():
    return getattr(_local, "node", None)


def set_current_node(node) -> None:
    _local.node = node


def report(node) -> None:
    """Warn with the forward traceback of the failing ``node``, then of each node whose backward
    created it (nested backward), as PyTorch's ``print_stack``."""
    extra = node._extra
    md = extra.metadata if extra is not None else {}
    _warn_stack(md.get("traceback_"), node.name(), False)
    parent = md.get("parent_")
    while parent is not None:
        pmd = parent.metadata
        _warn_stack(pmd.get("traceback_"), parent.name(), True)
        parent = pmd.get("parent_")


def _warn_stack(stack, name: str, is_parent: bool) -> None:
    if stack is None:
        msg = (f"Error detected in {name}. No forward pass information available. Enable detect "
               "anomaly during forward pass for more information.")
    elif is_parent:
        msg = (f"\n\nPrevious calculation was induced by {name}. Traceback of forward call that "
               f"induced the previous calculation:\n{''.join(stack)}")
    else:
        msg = (f"Error detected in {name}. Traceback of forward call that caused the error:\n"
               f"{''.join(stack)}")
    warnings.warn(msg, UserWarning, stacklevel=4)


def nan_error(node, i: int) -> RuntimeError:
    return RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
