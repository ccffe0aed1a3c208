"""Streams and events: the ordering model the engine uses across device queues (DESIGN §5).

A device type with streams (CUDA, the stream-logging test device) subclasses ``Stream`` and
``Event``. The CPU has none: its arrays are computed in program order, and nothing in this module
is touched on a CPU-only path. Each thread has a current stream per device, the device's default
stream until ``use_stream`` (``ndgrad.cuda.stream``) says otherwise.
"""

from __future__ import annotations

import threading

__all__ = ["Stream", "Event", "current_stream", "use_stream", "set_stream", "in_use"]

# Set once a stream other than its device's default is made current in this process. Until
# then every node ran on its device's default stream, which is also the caller's, so no event is
# ever needed and the engine keeps to its stream-free loop. A list: importers share the cell.
in_use = [False]


def _note(stream) -> None:
    if not in_use[0] and stream is not None:
        from . import device_type

        if stream != device_type(stream.device).default_stream(stream.device):
            in_use[0] = True


_local = threading.local()


class Event:
    """A marker in a stream's queue that other streams (or the host) can wait for."""

    __slots__ = ("device", "stream", "enable_timing", "__weakref__")

    def __init__(self, device, enable_timing: bool = False):
        self.device = device
        self.stream = None  # the stream it was last recorded on
        self.enable_timing = enable_timing

    def record(self, stream=None) -> None:
        if stream is None:
            stream = current_stream(self.device)
        self.stream = stream
        self._record(stream)

    def wait(self, stream=None) -> None:
        """Make ``stream`` (default: current) wait until the work before this event is done."""
        if stream is None:
            stream = current_stream(self.device)
        stream.wait_event(self)

    # device types implement these
    def _record(self, stream) -> None:
        raise NotImplementedError

    def query(self) -> bool:
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    def elapsed_time(self, end_event) -> float:
        raise NotImplementedError


class Stream:
    """A queue of device work. Device types define ``==`` (the same underlying queue)."""

    __slots__ = ("device", "priority", "__weakref__")
    event_cls = Event

    def __init__(self, device, priority: int = 0):
        self.device = device
        self.priority = priority

    def record_event(self, event=None):
        """Record ``event`` (a new one by default) on this stream and return it."""
        if event is None:
            event = self.event_cls(self.device)
        event.record(self)
        return event

    def wait_stream(self, stream) -> None:
        """Future work on this stream waits for the work queued on ``stream`` so far."""
        if stream != self:
            self.wait_event(stream.record_event())

    def activate(self) -> None:
        """Make the device's own notion of the current stream follow (CuPy launches there)."""

    # device types implement these
    def wait_event(self, event) -> None:
        raise NotImplementedError

    def query(self) -> bool:
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError


def _current() -> dict:
    d = getattr(_local, "streams", None)
    if d is None:
        d = _local.streams = {}
    return d


def current_stream(device):
    """This thread's current stream on ``device`` (its default stream unless one was set)."""
    s = _current().get(device)
    if s is None:
        from . import device_type  # the device types live in the package init

        s = device_type(device).default_stream(device)
    return s


def set_stream(stream) -> None:
    """Make ``stream`` current on its device for this thread."""
    _note(stream)
    _current()[stream.device] = stream
    stream.activate()


class use_stream:  # noqa: N801 - reads as a context manager
    """``with use_stream(s):`` makes ``s`` current on its device, restoring the previous one."""

    __slots__ = ("stream", "prev")

    def __init__(self, stream):
        self.stream = stream
        self.prev = None

    def __enter__(self):
        s = self.stream
        if s is None:
            return None
        _note(s)
        cur = _current()
        self.prev = cur.get(s.device)
        cur[s.device] = s
        s.activate()
        return s

    def __exit__(self, *exc) -> None:
        s = self.stream
        if s is None:
            return
        cur = _current()
        if self.prev is None:
            cur.pop(s.device, None)
        else:
            cur[s.device] = self.prev
        current_stream(s.device).activate()
