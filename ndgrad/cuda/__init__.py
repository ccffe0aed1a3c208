"""``ndgrad.cuda``: CUDA devices, streams, events and memory, as ``torch.cuda``.

Backed by CuPy (``pip install ndgrad[cuda12]`` or ``[cuda13]``). Without CuPy or a GPU,
``is_available()`` is False, the memory queries answer 0, and everything that needs a device
raises PyTorch's ``AssertionError: Torch not compiled with CUDA enabled``.
"""

from __future__ import annotations

import contextlib
import threading

from .. import _backend
from .._backend import streams as _streams
from .._factories import device_generator

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "device", "synchronize",
    "Stream", "Event", "current_stream", "default_stream", "stream", "set_stream",
    "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats", "memory_reserved",
    "empty_cache", "manual_seed", "manual_seed_all", "seed", "initial_seed", "get_device_name",
]

_local = threading.local()


def _impl():
    """The CUDA device type module (``ndgrad._backend.cuda``), imported on first use."""
    from .._backend import cuda

    return cuda


def is_available() -> bool:
    return _impl().available()


def device_count() -> int:
    return _impl().device_count()


def _require():
    impl = _impl()
    impl.require()
    return impl


def current_device() -> int:
    return _require().cupy.cuda.runtime.getDevice()


def set_device(device) -> None:
    idx = _index(device)
    if idx >= 0:
        _require().cupy.cuda.Device(idx).use()


def _index(device) -> int:
    """A device ordinal from an int, a string or a Device (None: the current one)."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    dev = _backend.as_device(device)
    if dev.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {dev}")
    return current_device() if dev.index is None else dev.index


def _device(device) -> _backend.Device:
    return _backend.Device("cuda", _index(device))


class device:  # noqa: N801 - torch.cuda.device
    """Context manager that makes a device current (``with ndgrad.cuda.device(1): ...``)."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)
        self.prev = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev = current_device()
            if self.prev != self.idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc) -> None:
        if self.idx >= 0 and self.prev != self.idx:
            set_device(self.prev)


def synchronize(device=None) -> None:
    """Wait for all work queued on a device (default: the current one)."""
    impl = _require()
    with impl.cupy.cuda.Device(_index(device)):
        impl.cupy.cuda.Device().synchronize()


# --- streams and events ---
def Stream(device=None, priority: int = 0):  # noqa: N802 - torch.cuda.Stream
    """A new CUDA stream on ``device``; lower ``priority`` numbers run first."""
    return _require().Stream(_device(device), priority)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):  # noqa: N802
    """A CUDA event on the current device (``record``, ``wait``, ``query``, ``synchronize``,
    ``elapsed_time`` in milliseconds)."""
    return _require().Event(_device(None), enable_timing)


def current_stream(device=None):
    _require()
    return _backend.current_stream(_device(device))


def default_stream(device=None):
    dev = _device(device)
    return _require().TYPE.default_stream(dev)


def set_stream(stream) -> None:
    if stream is not None:
        _streams.set_stream(stream)


@contextlib.contextmanager
def stream(stream):
    """``with ndgrad.cuda.stream(s):`` queues work (and records autograd nodes) on ``s``."""
    if stream is None:
        yield None
        return
    with _backend.use_stream(stream):
        yield stream


# --- memory ---
def _memory():
    impl = _impl()
    return impl.TYPE.memory if impl.available() else None


def memory_allocated(device=None) -> int:
    """Bytes held by live CUDA arrays (CuPy's memory pool, in use)."""
    m = _memory()
    return 0 if m is None else m.allocated()


def max_memory_allocated(device=None) -> int:
    m = _memory()
    return 0 if m is None else m.peak


def reset_peak_memory_stats(device=None) -> None:
    m = _memory()
    if m is not None:
        m.reset_peak()


def memory_reserved(device=None) -> int:
    """Bytes the pool holds from the driver, in use or cached for reuse."""
    m = _memory()
    return 0 if m is None else m.reserved()


def empty_cache() -> None:
    """Return the pool's cached, unused blocks to the driver."""
    m = _memory()
    if m is not None:
        m.pool.free_all_blocks()


# --- random numbers ---
def manual_seed(seed: int) -> None:
    """Seed the current CUDA device's generator (a no-op without CUDA, as in PyTorch)."""
    if is_available():
        device_generator(_device(None)).manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        device_generator(_backend.Device("cuda", i)).manual_seed(seed)


def seed() -> None:
    if is_available():
        device_generator(_device(None)).seed()


def initial_seed() -> int:
    return device_generator(_device(None)).initial_seed()


def get_device_name(device=None) -> str:
    impl = _require()
    props = impl.cupy.cuda.runtime.getDeviceProperties(_index(device))
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else name
from . import amp  # noqa: E402,F401  (torch.cuda.amp: autocast, custom_fwd/bwd)
