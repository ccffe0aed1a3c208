"""Backend layer: the one place that knows which array library holds a tensor's data.

Today only NumPy (the ``cpu`` device) is wired in; the GPU issue adds CuPy here. Everything
above this layer asks ``namespace_of(array)`` or ``device_of(array)`` instead of importing NumPy
to create arrays, so that one op definition serves every backend.
"""

from __future__ import annotations

import numpy as np

from .cpu_memory import keep_freed_memory

keep_freed_memory()

__all__ = ["Device", "device", "cpu", "namespace_of", "device_of", "as_device"]


class Device:
    """A device name and index, compared by value (``ndgrad.device('cpu') == 'cpu'``)."""

    __slots__ = ("type", "index")

    def __init__(self, type: str, index: int | None = None):
        self.type = type
        self.index = index

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = as_device(other)
        return (
            isinstance(other, Device) and self.type == other.type and self.index == other.index
        )

    def __hash__(self) -> int:
        return hash((self.type, self.index))


cpu = Device("cpu")
_KNOWN = {"cpu"}


def as_device(spec) -> Device:
    """Parse ``'cpu'``, ``'cuda:1'``, a Device or an int (a CUDA ordinal) into a Device."""
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, int):
        return Device("cuda", spec)
    if not isinstance(spec, str):
        raise TypeError(f"device() received an invalid combination of arguments - got ({type(spec).__name__})")
    name, _, idx = spec.partition(":")
    if name not in ("cpu", "cuda", "meta"):
        raise RuntimeError(
            "Expected one of cpu, cuda, meta device type at start of device string: " + spec
        )
    if idx:
        if not idx.isdigit():
            raise RuntimeError(f"Invalid device string: '{spec}'")
        return Device(name, int(idx))
    return cpu if name == "cpu" else Device(name)


def device(type, index=None) -> Device:
    """``ndgrad.device('cpu')`` / ``ndgrad.device('cuda', 0)``, as ``torch.device``."""
    if index is not None:
        return Device(type, index)
    return as_device(type)


def namespace_of(array):
    """The array module (``xp``) that owns ``array``."""
    return np


def device_of(array) -> Device:
    return cpu


def check_device(dev) -> None:
    """Raise PyTorch's error for a device this build cannot place arrays on."""
    dev = as_device(dev)
    if dev.type != "cpu":
        raise RuntimeError(
            "Torch not compiled with CUDA enabled" if dev.type == "cuda" else f"unsupported device {dev}"
        )
