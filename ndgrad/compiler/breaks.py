"""Graph breaks (issue 15, item 4): data-dependent Python met while a compile captures on this
thread (``bool(t)``, ``int(t)``, ``float(t)``, ``t.item()``, ``.tolist()``, ``.numpy()``,
printing a tensor, ``graph_break()``, a ``compiler.disable``d call). While any such capture
runs, those ``Tensor`` methods are wrapped (and unwrapped after it), so there is no cost
otherwise; the wrapper consults only this thread's state. A break does not stop the run (it
computes on real arrays); it is recorded with the user's line, and the caller decides
(``fullgraph=True`` raises ``Unsupported`` at once)."""

from __future__ import annotations

import sys
import threading
import traceback

from .._tensor import Tensor
from ..nn.modules.module import Module
from .exc import Unsupported

__all__ = ["BreakReason", "graph_break", "breaks_detected", "tls"]


class _TLS(threading.local):
    def __init__(self):
        self.breaks = None  # the _Breaks of the capture running on this thread, or None
        self.compiling = 0  # >0 while capturing or running compiled code (is_compiling)
        self.region = None  # the compiled function whose eager region runs now (module calls)
        self.capture = None  # the Capture of the compile running on this thread


tls = _TLS()

_REASONS = {
    "item": "Unsupported Tensor.item() call with capture_scalar_outputs=False",
    "tolist": "Unsupported Tensor.tolist() call",
    "numpy": "Unsupported Tensor.numpy() call",
    "__bool__": "Data-dependent branching",
    "__int__": "int() of a tensor",
    "__float__": "float() of a tensor",
    "__complex__": "complex() of a tensor",
    "__index__": "a tensor used as an index (__index__)",
    "__array__": "conversion of a tensor to a NumPy array",
    "__repr__": "printing a tensor (__repr__)",
    "__str__": "printing a tensor (__str__)",
    "__format__": "formatting a tensor (__format__)",
    "backward": "Unsupported Tensor.backward() call (the graph records the forward only; "
                "gradients are written to .grad outside it)",
}


class BreakReason:
    """PyTorch's ``GraphCompileReason``: why a graph ended, and the user's frames."""

    __slots__ = ("reason", "user_stack", "graph_break", "node_index")

    def __init__(self, reason: str, user_stack: list, node_index: int = 0):
        self.reason, self.user_stack, self.graph_break = reason, user_stack, True
        self.node_index = node_index

    def __repr__(self) -> str:
        return f"GraphCompileReason(reason={self.reason!r}, user_stack={self.user_stack!r})"


def _internal(module) -> bool:
    return module is None or module == "ndgrad" or (
        module.startswith("ndgrad.") and not module.startswith(("ndgrad.nn.", "ndgrad.optim."))
    ) or module == "ndgrad.nn.modules.module"


def user_stack(stop_code=None) -> list:
    """The user's frames (outermost first) from below the compile entry to here."""
    frames = []
    f = sys._getframe(1)
    while f is not None and f.f_code is not stop_code:
        if not _internal(f.f_globals.get("__name__")):
            frames.append(traceback.FrameSummary(f.f_code.co_filename, f.f_lineno,
                                                 f.f_code.co_name))
        f = f.f_back
    frames.reverse()
    return frames


class _Breaks:
    """One capture's break state: ``fullgraph`` raises at the first break."""

    def __init__(self, fullgraph: bool, node_count, stop_code=None):
        self.fullgraph = fullgraph
        self.reasons: list = []
        self.node_count = node_count  # () -> how many nodes the graph has now
        self.stop_code = stop_code
        self.paused = 0

    def hit(self, reason: str) -> None:
        if self.paused:
            return
        stack = user_stack(self.stop_code)
        br = BreakReason(reason, stack, self.node_count())
        self.reasons.append(br)
        if self.fullgraph:
            where = "".join(traceback.format_list(stack[-1:])) if stack else "  (no user frame)\n"
            self.paused += 1  # the error's own formatting must not break again
            raise Unsupported(f"{reason}\n  Explanation: ndgrad captures by running the function;"
                              f" Python that reads tensor values cannot be part of a graph "
                              f"(fullgraph=True forbids graph breaks).\n\nfrom user code:\n"
                              f"{where}", real_stack=stack)


# --- wrapping Tensor's methods while captures run ---
_lock = threading.Lock()
_active = [0]
_originals: dict = {}


def _wrap(name, orig):
    reason = _REASONS[name]

    def method(self, *args, **kwargs):
        st = tls.breaks
        if st is not None and not st.paused:
            st.hit(reason)
            st.paused += 1  # what the method calls inside (item() from __float__) is one break
            try:
                return orig(self, *args, **kwargs)
            finally:
                st.paused -= 1
        return orig(self, *args, **kwargs)

    method.__name__ = name
    method.__wrapped__ = orig
    return method


def _wrap_hooks(orig):
    """``Module._call_with_hooks`` runs only for modules with hooks: their Python runs at
    capture only, so a hooked module met inside a capture is a break."""

    def call_with_hooks(self, args, kwargs):
        st = tls.breaks
        if st is not None and not st.paused:
            st.hit(f"a module with hooks ({type(self).__name__}): hooks are Python side effects")
            st.paused += 1
            try:
                return orig(self, args, kwargs)
            finally:
                st.paused -= 1
        return orig(self, args, kwargs)

    return call_with_hooks


def _install() -> None:
    with _lock:
        _active[0] += 1
        if _active[0] == 1:
            for name in _REASONS:
                orig = Tensor.__dict__.get(name)
                if orig is None:
                    continue
                _originals[(Tensor, name)] = orig
                setattr(Tensor, name, _wrap(name, orig))
            orig = Module.__dict__["_call_with_hooks"]
            _originals[(Module, "_call_with_hooks")] = orig
            Module._call_with_hooks = _wrap_hooks(orig)


def _uninstall() -> None:
    with _lock:
        _active[0] -= 1
        if _active[0] == 0:
            for (cls, name), orig in _originals.items():
                setattr(cls, name, orig)
            _originals.clear()


class breaks_detected:  # noqa: N801 - a context manager
    """Within, this thread's data-dependent tensor reads are breaks recorded in ``state``."""

    __slots__ = ("state", "prev")

    def __init__(self, state: _Breaks):
        self.state = state

    def __enter__(self):
        _install()
        self.prev = tls.breaks
        tls.breaks = self.state
        return self.state

    def __exit__(self, *exc):
        tls.breaks = self.prev
        _uninstall()


class no_breaks:  # noqa: N801
    """Within, tensor reads on this thread are not breaks (the compile machinery's own)."""

    __slots__ = ("prev",)

    def __enter__(self):
        self.prev = tls.breaks
        tls.breaks = None

    def __exit__(self, *exc):
        tls.breaks = self.prev


def graph_break() -> None:
    """Force a graph break here when called inside a compiled function (a no-op otherwise)."""
    st = tls.breaks
    if st is not None:
        st.hit("Call to `ndgrad._dynamo.graph_break()`")
