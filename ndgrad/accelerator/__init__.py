"""``ndgrad.accelerator``: torch.accelerator's device-agnostic API. The one accelerator ndgrad
knows is CUDA (through CuPy, ``ndgrad.cuda``); without a GPU there is none, and every call that
needs one raises torch's ``RuntimeError``, as torch does on a CPU-only machine."""

from __future__ import annotations

import warnings

from .. import cuda
from .._backend import Device, device

__all__ = [
    "current_accelerator",
    "current_device_idx",
    "current_device_index",
    "current_stream",
    "device_count",
    "device_index",
    "empty_cache",
    "is_available",
    "max_memory_allocated",
    "memory_allocated",
    "memory_reserved",
    "reset_peak_memory_stats",
    "set_device_idx",
    "set_device_index",
    "set_stream",
    "synchronize",
]

_NONE_AVAILABLE = "Cannot access accelerator device when none is available."


def current_accelerator(check_available: bool = False) -> Device | None:
    """The accelerator device type (``device(type='cuda')``), or ``None`` when there is none.

    >>> import ndgrad
    >>> acc = ndgrad.accelerator.current_accelerator()
    >>> acc is None or acc.type == "cuda"
    True
    """
    if cuda.is_available():
        return device("cuda")
    return None


def is_available() -> bool:
    """Whether an accelerator is present and usable."""
    return current_accelerator(check_available=True) is not None


def device_count() -> int:
    """How many accelerator devices there are (0 without one)."""
    return cuda.device_count() if is_available() else 0


def _require() -> None:
    if not is_available():
        raise RuntimeError(_NONE_AVAILABLE)


def _index(dev, optional: bool = True) -> int:
    """The device index named by an int, a string or a device (the current one for None)."""
    if dev is None:
        return cuda.current_device()
    if isinstance(dev, int):
        return dev
    dev = device(dev) if isinstance(dev, str) else dev
    acc = current_accelerator()
    if dev.type != acc.type:
        raise ValueError(f"{dev.type} doesn't match the current accelerator {acc}.")
    return cuda.current_device() if dev.index is None else dev.index


def current_device_index() -> int:
    """The index of the current accelerator device."""
    _require()
    return cuda.current_device()


def current_device_idx() -> int:
    warnings.warn("Use `current_device_index` instead.", FutureWarning, stacklevel=2)
    return current_device_index()


def set_device_index(device, /) -> None:
    """Makes ``device`` (an index, a string or a device) the current accelerator device."""
    _require()
    cuda.set_device(_index(device))


def set_device_idx(device, /) -> None:
    warnings.warn("Use `set_device_index` instead.", FutureWarning, stacklevel=2)
    set_device_index(device)


def current_stream(device=None, /):
    """The current stream of ``device`` (the current device by default)."""
    _require()
    return cuda.current_stream(_index(device))


def set_stream(stream) -> None:
    """Makes ``stream`` current on its device."""
    _require()
    cuda.set_stream(stream)


def synchronize(device=None, /) -> None:
    """Waits for all work queued on ``device`` (the current device by default)."""
    _require()
    cuda.synchronize(_index(device))


class device_index:
    """Context manager making device ``device`` current inside (no-op for ``None``)."""

    def __init__(self, device: int | None, /) -> None:
        self.idx = device
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx is not None:
            self.prev_idx = current_device_index()
            if self.prev_idx != self.idx:
                set_device_index(self.idx)

    def __exit__(self, *exc) -> None:
        if self.idx is not None and self.prev_idx != self.idx:
            set_device_index(self.prev_idx)


# --- memory ---
def empty_cache() -> None:
    _require()
    cuda.empty_cache()


def memory_allocated(device_index=None, /) -> int:
    _require()
    return cuda.memory_allocated(_index(device_index))


def max_memory_allocated(device_index=None, /) -> int:
    _require()
    return cuda.max_memory_allocated(_index(device_index))


def memory_reserved(device_index=None, /) -> int:
    _require()
    return cuda.memory_reserved(_index(device_index))


def reset_peak_memory_stats(device_index=None, /) -> None:
    _require()
    cuda.reset_peak_memory_stats(_index(device_index))
