"""``torch.cpu``: the host as a device module (``is_available``, ``device_count``, ``amp``)."""

from __future__ import annotations

from . import amp  # noqa: F401

__all__ = ["is_available", "device_count", "current_device", "synchronize", "amp"]


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    return "cpu"


def synchronize(device=None) -> None:
    """Host work is done when the call returns: nothing to wait for."""
