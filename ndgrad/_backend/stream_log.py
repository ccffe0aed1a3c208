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

import itertools

import numpy as np

from . import Device, DeviceType, register_device_type, streams

__all__ = ["LogArray", "Stream", "Event", "log", "DEVICE"]

DEVICE = Device("streamlog", 0)
log: list = []  # ("event", e), ("record", e, s) and ("wait", s, e), with e and s short names
_ids = itertools.count(1)
_event_ids = itertools.count(1)


class LogArray(np.ndarray):
    """A NumPy array on the ``streamlog`` device. Ufuncs keep the subclass by themselves; the
    array functions that would drop it (``broadcast_to``, ``stack``, ...) give it back here,
    as a device array library returns its own arrays."""

    def __array_function__(self, func, types, args, kwargs):
        return _on_device(super().__array_function__(func, types, args, kwargs))


def _on_device(res):
    if type(res) is np.ndarray:
        return res.view(LogArray)
    if type(res) in (tuple, list):
        return type(res)(_on_device(r) for r in res)
    return res


class Event(streams.Event):
    __slots__ = ("name",)

    def __init__(self, device=DEVICE, enable_timing: bool = False):
        super().__init__(DEVICE, enable_timing)
        self.name = f"e{next(_event_ids)}"
        log.append(("event", self.name))

    def _record(self, stream) -> None:
        log.append(("record", self.name, stream.name))

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        log.append(("sync", self.name))

    def elapsed_time(self, end_event) -> float:
        return 0.0

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

    _MAKERS = ("zeros", "ones", "empty", "full", "arange", "eye", "linspace", "array", "asarray")

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
        streams.in_use[0] = True
        return np.array(array, copy=True).view(LogArray)

    def to_host(self, array) -> np.ndarray:
        return np.array(array.view(np.ndarray), copy=True)

    def default_stream(self, dev: Device):
        return _default


register_device_type(_LogDeviceType())
