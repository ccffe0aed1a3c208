"""``torch.backends.cudnn``: flags recorded for scripts; ndgrad calls no cuDNN kernel."""

from __future__ import annotations

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: ndgrad's convolutions are its own, never cuDNN's."""
    return False


def version():
    return None


def is_acceptable(tensor) -> bool:
    return False
