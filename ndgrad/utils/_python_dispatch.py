"""``torch.utils._python_dispatch``: ``TorchDispatchMode`` and the queries programs make of the
mode stack. The modes themselves live in ``ndgrad.autograd.dispatch_mode``."""

from __future__ import annotations

from ..autograd import dispatch_mode as _dm
from ..autograd.dispatch_mode import TorchDispatchMode

__all__ = ["TorchDispatchMode", "is_in_torch_dispatch_mode", "_get_current_dispatch_mode",
           "_get_current_dispatch_mode_stack", "_pop_mode_temporarily"]


def _get_current_dispatch_mode_stack() -> list:
    """This thread's own modes, outermost first. The process-wide ones (profiler, anomaly mode,
    forward AD) are left out: in PyTorch they are not dispatch modes either."""
    return list(_dm._local.stack)


def _get_current_dispatch_mode():
    """The mode that would handle this thread's next op call, or None (inside a mode's
    ``__torch_dispatch__``, the mode below it)."""
    stack = _dm._local.stack
    n = len(stack) + len(_dm._global) - _dm._local.depth
    return stack[n - 1] if 0 < n <= len(stack) else None


def is_in_torch_dispatch_mode(include_infra_modes: bool = True) -> bool:
    return _get_current_dispatch_mode() is not None


class _pop_mode_temporarily:  # noqa: N801 - PyTorch's name
    """Within, the current mode is skipped; ``__enter__`` returns it."""

    def __enter__(self):
        self.mode = _get_current_dispatch_mode()
        self.skip = _dm.skip_current()
        self.skip.__enter__()
        return self.mode

    def __exit__(self, *exc):
        self.skip.__exit__(*exc)
        return False
