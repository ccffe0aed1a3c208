"""The stream-logging test device: NumPy arrays that claim to live on a device with streams.

Its streams and events do no work (the arrays are computed at once, in program order), but each
creation, record and wait is appended to ``log``, so that tests without a GPU can pin down which
events the engine creates and which streams wait on them (DESIGN §5). The device type is
``streamlog``; its arrays are ``LogArray``, a NumPy subclass that NumPy's functions carry
through, so every op of the table runs on it unchanged.

    from ndgrad._backend import stream_log
    x = ndgrad.ones(3, device="streamlog", requires_grad=True)
    s = stream_log.Stream()
    with ndgrad._backend.use_stream(s): y = x * 2
    stream_log.log.clear(); y.sum().backward(); print(stream_log.log)
"""

from __future__ import annotations

import contextlib
import itertools
import time

import numpy as np

from . import Device, DeviceType, register_device_type, streams

__all__ = ["LogArray", "Stream", "Event", "log", "DEVICE"]

DEVICE = Device("streamlog", 0)
log: list = []  # ("event", e), ("record", e, s) and ("wait", s, e), with e and s short names
_ids = itertools.count(1)
_event_ids = itertools.count(1)


class LogArray(np.ndarray):
    """A NumPy array on the ``streamlog`` device. Like CuPy's arrays it refuses host arrays as
    operands (``TypeError``) and the ufunc methods CuPy lacks (``multiply.at``, ``reduceat``
    other than add), so that the op table run on this device finds every place that would fail
    on a GPU; and NumPy functions return device arrays."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "at" and ufunc not in _SCATTER_UFUNCS or method == "reduceat" and ufunc is not np.add:
            raise NotImplementedError(f"`{ufunc.__name__}.{method}` is not supported yet")  # as CuPy
        args = [_host_view(x, ufunc) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(_host_view(x, ufunc) for x in kwargs["out"])
        return _on_device(getattr(ufunc, method)(*args, **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        # Like CuPy, the whole function runs "on the device": on host views of the arguments,
        # its result viewed back (NumPy's own helpers inside it may use host arrays freely).
        args = _host_views(args, func)
        kwargs = {k: _host_views(v, func) for k, v in kwargs.items()}
        if func in _FACTORIZATIONS and not _linalg_raise[0]:
            try:
                return _on_device(func(*args, **kwargs))
            except np.linalg.LinAlgError:  # as CuPy outside errstate(linalg="raise"): NaNs
                return _on_device(_nan_result(func, *args))
        return _on_device(func(*args, **kwargs))


# CuPy's factorizations report failure with NaNs unless cupyx.errstate(linalg="raise") is on.
_FACTORIZATIONS = (np.linalg.cholesky, np.linalg.inv, np.linalg.solve)
_linalg_raise = [False]


def _nan_result(func, a, b=None):
    if func is not np.linalg.solve:
        return np.full(a.shape, np.nan, a.dtype)
    shape = a.shape[:-1] if b.ndim == 1 else np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:]
    return np.full(shape, np.nan, np.result_type(a, b))


@contextlib.contextmanager
def _raising_linalg():
    was = _linalg_raise[0]
    _linalg_raise[0] = True
    try:
        yield
    finally:
        _linalg_raise[0] = was


# CuPy's ufunc.at exists only for the ufuncs with a scatter kernel; reduceat only for add.
_SCATTER_UFUNCS = (np.add, np.maximum, np.minimum)


def _host_view(x, fn):
    if type(x) is np.ndarray:
        raise TypeError(f"streamlog: {getattr(fn, '__name__', fn)} was given a host array")
    return x.view(np.ndarray) if type(x) is LogArray else x


def _host_views(x, fn):
    if type(x) in (list, tuple):
        return type(x)(_host_views(a, fn) for a in x)
    return _host_view(x, fn)


def _on_device(res):
    if type(res) is np.ndarray:
        return res.view(LogArray)
    if isinstance(res, np.generic):  # a full reduction: a 0-d array on the device, as in CuPy
        return np.asarray(res).view(LogArray)
    if type(res) is list:
        return [_on_device(r) for r in res]
    if isinstance(res, tuple):  # plain tuples and NumPy's named results (QRResult, ...), as CuPy
        return tuple(_on_device(r) for r in res)
    return res


class Event(streams.Event):
    """A logged event. Work on this device is done by the time it is queued, so the host clock
    at ``record`` is when the stream reached the event: ``elapsed_time`` is real device time."""

    __slots__ = ("name", "at")

    def __init__(self, device=DEVICE, enable_timing: bool = False):
        super().__init__(DEVICE, enable_timing)
        self.name = f"e{next(_event_ids)}"
        self.at = None
        log.append(("event", self.name))

    def _record(self, stream) -> None:
        self.at = time.perf_counter()
        log.append(("record", self.name, stream.name))

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        log.append(("sync", self.name))

    def elapsed_time(self, end_event) -> float:
        """Milliseconds from this event to ``end_event``, as CUDA's events report them."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.at is None or end_event.at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event.at - self.at) * 1e3

    def __repr__(self) -> str:
        return f"<streamlog Event {self.name}>"


class Stream(streams.Stream):
    """A logged stream; ``Stream(name='side')`` names it in the log (default ``s<k>``)."""

    __slots__ = ("name",)
    event_cls = Event

    def __init__(self, device=DEVICE, priority: int = 0, name: str | None = None):
        super().__init__(DEVICE, priority)
        self.name = name or f"s{next(_ids)}"

    def wait_event(self, event) -> None:
        log.append(("wait", self.name, event.name))

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        log.append(("sync", self.name))

    def __repr__(self) -> str:
        return f"<streamlog Stream {self.name}>"


_default = Stream(name="default")


class _Namespace:
    """NumPy, with array creation landing on this device (``namespace_of`` a LogArray)."""

    _MAKERS = ("zeros", "ones", "empty", "full", "arange", "eye", "linspace", "array", "asarray",
               "tri", "indices")

    def __getattr__(self, name):
        f = getattr(np, name)
        if name not in self._MAKERS:
            return f

        def make(*args, **kwargs):
            return np.asarray(f(*args, **kwargs)).view(LogArray)

        return make


xp = _Namespace()


class _LogDeviceType(DeviceType):
    name = "streamlog"
    array_type = LogArray
    xp = xp
    has_streams = True

    def device_of(self, array) -> Device:
        return DEVICE

    def normalize(self, dev: Device) -> Device:
        return DEVICE

    def check(self, dev: Device) -> None:
        if dev.index not in (None, 0):
            raise RuntimeError(f"streamlog has one device; got {dev}")

    def from_host(self, array: np.ndarray, dev: Device):
        return np.array(array, copy=True).view(LogArray)

    def to_host(self, array, pinned: bool = False) -> np.ndarray:
        return np.array(array.view(np.ndarray), copy=True)

    def default_stream(self, dev: Device):
        return _default

    def linalg_errors(self):
        return _raising_linalg()


register_device_type(_LogDeviceType())
