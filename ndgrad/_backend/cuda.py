"""The CUDA device type: CuPy arrays, CUDA streams and events, the CuPy memory pool.

Imported on the first use of a ``cuda`` device. Without CuPy, or without a visible GPU, the
device type still registers (so that ``ndgrad.device('cuda')`` parses) but refuses to hold
arrays, with PyTorch's error for a build without CUDA.
"""

from __future__ import annotations

import numpy as np

from . import Device, DeviceType, register_device_type, streams

try:  # CuPy is an optional extra (pip install ndgrad[cuda12] / [cuda13])
    import cupy
except ImportError:  # pragma: no cover - depends on the machine
    cupy = None

NOT_COMPILED = "Torch not compiled with CUDA enabled"


def device_count() -> int:
    if cupy is None:
        return 0
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        return 0


def available() -> bool:
    return device_count() > 0


def require() -> None:
    if not available():
        raise AssertionError(NOT_COMPILED)


class Event(streams.Event):
    __slots__ = ("raw",)

    def __init__(self, device, enable_timing: bool = False):
        super().__init__(device, enable_timing)
        with cupy.cuda.Device(device.index):
            self.raw = cupy.cuda.Event(disable_timing=not enable_timing)

    def _record(self, stream) -> None:
        self.raw.record(stream.raw)

    def query(self) -> bool:
        return self.raw.done

    def synchronize(self) -> None:
        self.raw.synchronize()

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, with timing)."""
        return cupy.cuda.get_elapsed_time(self.raw, end_event.raw)


class Stream(streams.Stream):
    """A CUDA stream (a CuPy stream underneath, in ``raw``)."""

    __slots__ = ("raw",)
    event_cls = Event

    def __init__(self, device, priority: int = 0, raw=None):
        super().__init__(device, priority)
        if raw is None:
            with cupy.cuda.Device(device.index):
                raw = cupy.cuda.Stream(non_blocking=False, priority=priority)
        self.raw = raw

    def activate(self) -> None:
        cupy.cuda.Device(self.device.index).use()
        self.raw.use()

    def wait_event(self, event) -> None:
        self.raw.wait_event(event.raw)

    def query(self) -> bool:
        return self.raw.done

    def synchronize(self) -> None:
        self.raw.synchronize()

    @property
    def cuda_stream(self) -> int:
        return self.raw.ptr

    def __eq__(self, other) -> bool:
        return (isinstance(other, Stream) and self.raw.ptr == other.raw.ptr
                and self.device == other.device)

    def __hash__(self) -> int:
        return hash((self.raw.ptr, self.device.index))

    def __repr__(self) -> str:
        return f"<ndgrad.cuda.Stream device={self.device} cuda_stream={self.raw.ptr:#x}>"


class _Memory:
    """Allocation counters over CuPy's default pool: the pool knows current use, not the peak,
    so allocations go through ``malloc`` here, which raises the peak as it grows."""

    def __init__(self):
        self.pool = cupy.get_default_memory_pool()
        self.peak = 0
        cupy.cuda.set_allocator(self.malloc)

    def malloc(self, nbytes: int):
        mem = self.pool.malloc(nbytes)
        used = self.pool.used_bytes()
        if used > self.peak:
            self.peak = used
        return mem

    def allocated(self) -> int:
        return self.pool.used_bytes()

    def reserved(self) -> int:
        return self.pool.total_bytes()

    def reset_peak(self) -> None:
        self.peak = self.pool.used_bytes()


class CudaType(DeviceType):
    name = "cuda"
    array_type = cupy.ndarray if cupy is not None else type("NoCuPyArray", (), {})
    xp = cupy
    has_streams = True

    def __init__(self):
        self._defaults: dict = {}
        self._memory = None

    @property
    def memory(self) -> _Memory:
        if self._memory is None:
            self._memory = _Memory()
        return self._memory

    def check(self, dev: Device) -> None:
        require()
        if dev.index is not None and not 0 <= dev.index < device_count():
            raise RuntimeError("CUDA error: invalid device ordinal")

    def normalize(self, dev: Device) -> Device:
        return dev if dev.index is not None else Device("cuda", cupy.cuda.runtime.getDevice())

    def device_of(self, array) -> Device:
        return Device("cuda", array.device.id)

    def erf(self, array):
        import cupyx.scipy.special

        return cupyx.scipy.special.erf(array)

    def linalg_errors(self):
        import cupyx

        return cupyx.errstate(linalg="raise")

    def from_host(self, array: np.ndarray, dev: Device):
        self.check(dev)
        _ = self.memory  # count allocations from the first array on
        with cupy.cuda.Device(self.normalize(dev).index):
            return cupy.asarray(array)

    def to_host(self, array, pinned: bool = False) -> np.ndarray:
        if pinned:
            import cupyx

            out = cupyx.empty_pinned(array.shape, array.dtype)
            cupy.ascontiguousarray(array).get(out=out)
            return out
        return cupy.asnumpy(array)

    def default_stream(self, dev: Device):
        dev = self.normalize(dev)
        s = self._defaults.get(dev.index)
        if s is None:
            s = self._defaults[dev.index] = Stream(dev, raw=cupy.cuda.Stream.null)
        return s


TYPE = CudaType()
register_device_type(TYPE)
