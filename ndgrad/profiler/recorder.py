"""Recording: the dispatch mode that times every op, the engine's node observer that times every
backward node, and ``record_function`` ranges; then the events built from what they recorded.

While recording, each hook appends one tuple to a list (no per-op dict, no event object); events,
nesting and self times are built once, when the recording stops. When no recording is active
nothing here runs: ops pay the dispatcher's empty-mode-stack check, the engine its
``node_observer is None`` check once per backward, tensor factories their ``observer`` check.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import tracemalloc
import traceback

from .. import _backend
from .._ops import registry
from .._tensor import Tensor
from ..autograd import engine
from ..autograd.dispatch_mode import TorchDispatchMode
from ..autograd.node import AccumulateGrad, GraphRoot
from .events import NODE, OP, USER, EventList, FunctionEvent

__all__ = ["Recording", "record_function", "active"]

_now = time.perf_counter_ns
_ident = threading.get_ident
_traced = tracemalloc.get_traced_memory
_T = Tensor

# The recording that hooks append to (one at a time per process, as with PyTorch's profiler).
_current: list = [None]
_lock = threading.Lock()


def active() -> Recording | None:
    return _current[0]


def _seq_of(out) -> int:
    """The sequence number of the node that produced ``out`` (-1 when none)."""
    if type(out) is tuple and out and type(out[0]) is _T:
        out = out[0]
    if type(out) is _T:
        fn = out._grad_fn
        if fn is not None:
            return fn.sequence_nr
    return -1


def _fast_copy(rec):
    """The op's generated fast path as seen from below every mode (``fastpath.public``), or None.

    Under any mode an op leaves its fast path for ``registry.dispatch``'s general path, which
    costs ~5 us more per op on the chain benchmark (3 -> 8 us for a 16-element mul); when no
    other mode is below the profiler, it times the same fast path that runs unprofiled.
    """
    return rec.extra.get("direct")


_fast: dict = {}  # rec -> its fast copy or None; filled on first use, kept for the process
_modes = registry._modes


class _OpMode(TorchDispatchMode):
    """Times every op (the default case: no shapes, memory or stacks). Tuples hold only names
    and ints, so the cyclic GC can untrack them: a long profile does not slow collections."""

    __slots__ = ("append",)
    process_wide = True  # PyTorch's profiler records every thread

    def __init__(self, records: list):
        self.append = records.append

    def dispatch(self, rec, args, run):
        fast = _fast.get(rec, 0)
        if fast == 0:
            fast = _fast[rec] = _fast_copy(rec)
        t0 = _now()
        try:
            if fast is not None and len(_modes) == 1:  # no mode below this one, on any thread
                out = fast(*args)
            else:
                out = run(rec, args)
        except BaseException:
            self.append((rec.name, t0, _now(), _ident(), -1))
            raise
        t1 = _now()
        # Inlined _seq_of for the commonest output, a Tensor (chain benchmark).
        if type(out) is _T:
            fn = out._grad_fn
            self.append((rec.name, t0, t1, _ident(), -1 if fn is None else fn.sequence_nr))
        else:
            self.append((rec.name, t0, t1, _ident(), _seq_of(out)))
        return out


class _DetailedOpMode(TorchDispatchMode):
    """Times every op and records what was asked: input shapes, memory, Python stack."""

    __slots__ = ("append", "shapes", "memory", "stack", "timeline", "device")
    process_wide = True

    def __init__(self, records: list, shapes: bool, memory: bool, stack: bool, timeline: list,
                 device: bool = False):
        self.append = records.append
        self.shapes, self.memory, self.stack, self.timeline = shapes, memory, stack, timeline
        self.device = device  # time device work with a pair of events on the op's stream

    def dispatch(self, rec, args, run):
        fast = _fast.get(rec, 0)
        if fast == 0:
            fast = _fast[rec] = _fast_copy(rec)
        shapes = _input_shapes(args) if self.shapes else None
        frames = _python_stack() if self.stack else None
        m0 = _traced()[0] if self.memory else 0
        stream = _op_stream(args) if self.device else None
        e0 = _device_mark(stream)
        t0 = _now()
        out = None
        try:
            out = fast(*args) if fast is not None and len(_modes) == 1 else run(rec, args)
        finally:  # a failing op is an event too, as in PyTorch
            t1 = _now()
            marks = None if e0 is None else (e0, _device_mark(stream))
            m1 = _traced()[0] if self.memory else 0
            if self.memory:
                self.timeline.append((t1, m1))
            self.append((rec.name, t0, t1, _ident(), _seq_of(out), shapes, m1 - m0, frames, marks))
        return out



def _op_stream(args):
    """The current stream of the first argument on a device with streams, or None."""
    for a in args:
        if isinstance(a, Tensor):
            dev = a.device
        elif type(a) in (list, tuple) and a and isinstance(a[0], Tensor):
            dev = a[0].device
        else:
            continue
        if dev.type != "cpu" and _backend.device_type(dev).has_streams:
            return _backend.current_stream(dev)
    return None


def _device_mark(stream):
    """A timing event recorded on ``stream`` now (None without a stream)."""
    if stream is None:
        return None
    e = stream.event_cls(stream.device, enable_timing=True)
    e.record(stream)
    return e


def _device_us(marks) -> float:
    """Microseconds of device work between a pair of marks (waits for the second)."""
    if marks is None:
        return 0.0
    marks[1].synchronize()
    return marks[0].elapsed_time(marks[1]) * 1e3


def _input_shapes(args) -> list:
    """Per argument, as PyTorch reports it: a tensor's sizes, a list of tensors' sizes, or []."""
    shapes = []
    for a in args:
        if isinstance(a, Tensor):
            shapes.append(list(a._data.shape))
        elif type(a) in (list, tuple) and a and all(isinstance(t, Tensor) for t in a):
            shapes.append([list(t._data.shape) for t in a])
        else:
            shapes.append([])
    return shapes


def _python_stack() -> list[str]:
    """The user's frames, innermost first, as ``file(line): function``; ndgrad's own frames and
    the generated op wrappers are left out."""
    out = []
    for fs in reversed(traceback.extract_stack()):
        fname = fs.filename
        if fname.startswith("<") or _NDGRAD_DIR in fname:
            continue
        out.append(f"{fname}({fs.lineno}): {fs.name}")
    return out


_NDGRAD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


_node_names: dict = {}  # node class -> its name in events (names are per class)


def _node_name(node) -> str:
    name = node.name()
    # NOTE(pytorch): the two built-in nodes carry their C++ namespace in PyTorch's tables.
    if type(node) is AccumulateGrad or type(node) is GraphRoot:
        name = "torch::autograd::" + name
    _node_names[type(node)] = name
    return name


class Recording:
    """One recording session: installs the hooks on ``start`` and builds events on ``stop``."""

    def __init__(self, record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, use_device: str | None = None):
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.use_device = with_stack, use_device
        self.device_timing = use_device is not None
        self.ops: list = []
        self.nodes: list = []
        self.ranges: list = []
        self.timeline: list = []  # (time ns, traced bytes) after each op, when profiling memory
        self.t0 = 0
        self._started_tracing = False
        self._prev_observer = None
        self._mode = None
        self._events: EventList | None = None

    # --- hooks on and off ---
    def start(self) -> None:
        with _lock:
            if _current[0] is not None:
                raise RuntimeError("Profiler is already enabled on this thread")
            _current[0] = self
        if self.profile_memory and not tracemalloc.is_tracing():
            tracemalloc.start()
            self._started_tracing = True
        detailed = self.record_shapes or self.profile_memory or self.with_stack or self.device_timing
        self._mode = (_DetailedOpMode(self.ops, self.record_shapes, self.profile_memory,
                                      self.with_stack, self.timeline, self.device_timing)
                      if detailed else _OpMode(self.ops))
        self._prev_observer = engine.node_observer
        engine.node_observer = self._observe_detailed if detailed else self._observe
        self.t0 = _now()
        registry.push_mode(self._mode)

    def stop(self) -> None:
        registry.pop_mode(self._mode)  # wherever it sits: a mode pushed later may sit above
        engine.node_observer = self._prev_observer
        if self._started_tracing:
            tracemalloc.stop()
            self._started_tracing = False
        with _lock:
            if _current[0] is self:
                _current[0] = None

    # A node is two events over one measured range: the engine's ``evaluate_function`` wrapper
    # and the node itself inside it (the build keeps that order on equal times).
    def _observe(self, node, grads):
        t0 = _now()
        out = node.apply(grads)
        t1 = _now()
        name = _node_names.get(type(node))
        if name is None:
            name = _node_name(node)
        self.nodes.append((name, node.sequence_nr, t0, t1, _ident(), 0))
        return out

    def _observe_detailed(self, node, grads):
        m0 = _traced()[0] if self.profile_memory else 0
        stream = engine._stream_of(node) if self.device_timing else None
        e0 = _device_mark(stream)
        t0 = _now()
        out = node.apply(grads)
        t1 = _now()
        marks = None if e0 is None else (e0, _device_mark(stream))
        m1 = _traced()[0] if self.profile_memory else 0
        if self.profile_memory:
            self.timeline.append((t1, m1))
        self.nodes.append((_node_name(node), node.sequence_nr, t0, t1, _ident(), m1 - m0, marks))
        return out

    # --- events ---
    def events(self) -> EventList:
        if self._events is None:
            self._events = self._build()
        return self._events

    def _build(self) -> EventList:
        base = self.t0
        evs: list[FunctionEvent] = []
        dev = self.use_device
        names: dict = {}
        for r in self.ops:
            name = names.get(r[0])
            if name is None:
                name = names[r[0]] = "aten::" + r[0].split(".")[0]
            e = FunctionEvent(0, name, r[3], (r[1] - base) / 1e3, (r[2] - base) / 1e3, OP, r[4],
                              use_device=dev)
            if len(r) > 5:
                e.input_shapes, e.cpu_memory_usage = r[5], r[6]
                if r[7] is not None:
                    e.stack = r[7]
                e.own_device_time = _device_us(r[8])
            evs.append(e)
        for name, seq, t0, t1, tid, mem, *marks in self.nodes:
            start, end = (t0 - base) / 1e3, (t1 - base) / 1e3
            outer = FunctionEvent(0, "autograd::engine::evaluate_function: " + name, tid,
                                  start, end, NODE, seq, cpu_memory_usage=mem, use_device=dev)
            inner = FunctionEvent(0, name, tid, start, end, NODE, seq, cpu_memory_usage=mem,
                                  use_device=dev)
            # the node's kernels are its own device time; the wrapper's total includes them
            inner.own_device_time = outer.own_device_time = _device_us(marks[0] if marks else None)
            evs += (outer, inner)
        for name, t0, t1, tid, frames, mem in self.ranges:
            e = FunctionEvent(0, name, tid, (t0 - base) / 1e3, (t1 - base) / 1e3, USER,
                              cpu_memory_usage=mem, use_device=dev)
            if frames is not None:
                e.stack = frames
            evs.append(e)
        if self.record_shapes:
            for e in evs:
                if e.input_shapes is None:
                    e.input_shapes = []
        # Nest by time, per thread: sorted by start (longer first on ties), each event's parent
        # is the innermost open range that contains it.
        evs.sort(key=lambda e: (e.thread, e.start_us, -e.end_us))
        stack: list = []
        thread = None
        for i, e in enumerate(evs):
            e.id = i + 1
            if e.thread != thread:
                stack.clear()
                thread = e.thread
            while stack and (e.start_us >= stack[-1].end_us or e.end_us > stack[-1].end_us):
                stack.pop()
            if stack:
                e.cpu_parent = stack[-1]
                stack[-1].cpu_children.append(e)
            stack.append(e)
        evs.sort(key=lambda e: e.start_us)
        return EventList(evs, use_device=dev, profile_memory=self.profile_memory)


class record_function:
    """A named range in the profile: a context manager, or a decorator (``@record_function(
    "name")``) that records each call. Costs one check when no profiler is active."""

    __slots__ = ("name", "args", "_t0", "_m0", "_rec")

    def __init__(self, name: str, args: str | None = None):
        if not isinstance(name, str):
            raise RuntimeError(
                "record_function(): argument 'name' must be str, not " + type(name).__name__)
        self.name, self.args = name, args
        self._t0, self._m0, self._rec = 0, 0, None

    def __enter__(self) -> record_function:
        rec = self._rec = _current[0]
        if rec is not None:
            if rec.profile_memory:
                self._m0 = _traced()[0]
            self._t0 = _now()
        return self

    def __exit__(self, *exc) -> None:
        rec = self._rec
        if rec is not None:
            t1 = _now()
            mem = _traced()[0] - self._m0 if rec.profile_memory else 0
            frames = _python_stack() if rec.with_stack else None
            rec.ranges.append((self.name, self._t0, t1, _ident(), frames, mem))
            self._rec = None

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*a, **kw):
            with record_function(self.name, self.args):  # a fresh range per call (reentrant)
                return fn(*a, **kw)
        return wrapped
