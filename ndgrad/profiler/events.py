"""Profiler results: ``FunctionEvent`` (one timed range), ``FunctionEventAvg`` (a row of
``key_averages``) and ``EventList`` (table, totals, chrome trace, stacks).

Times are microseconds (floats). An event's CPU total is its own duration; its self CPU time is
that minus its direct children's durations. Device time follows the seed's rule: self device time
is the event's own device time minus its children's, and device totals are sums of self times
over the subtree, so nested ops are never counted twice. Recording lives in ``recorder.py``.
"""

from __future__ import annotations

import json
import os

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList", "Interval"]

# Kinds of event: an op call, a backward node (and its engine wrapper), a user range.
OP, NODE, USER = "cpu_op", "autograd", "user_annotation"


class Interval:
    __slots__ = ("start", "end")

    def __init__(self, start: float, end: float):
        self.start, self.end = start, end

    def elapsed_us(self) -> float:
        return self.end - self.start


class _Formatted:
    """``*_str`` views of the time fields, as PyTorch's events offer."""

    __slots__ = ()

    @property
    def self_cpu_time_total_str(self) -> str:
        return format_time(self.self_cpu_time_total)

    @property
    def cpu_time_total_str(self) -> str:
        return format_time(self.cpu_time_total)

    @property
    def cpu_time_str(self) -> str:
        return format_time(self.cpu_time)

    @property
    def self_device_time_total_str(self) -> str:
        return format_time(self.self_device_time_total)

    @property
    def device_time_total_str(self) -> str:
        return format_time(self.device_time_total)

    @property
    def device_time_str(self) -> str:
        return format_time(self.device_time)

    # NOTE(pytorch): the ``cuda`` spellings are kept as aliases of the ``device`` fields.
    @property
    def self_cuda_time_total(self) -> float:
        return self.self_device_time_total

    @property
    def cuda_time_total(self) -> float:
        return self.device_time_total

    @property
    def cuda_time(self) -> float:
        return self.device_time

    @property
    def cuda_memory_usage(self) -> int:
        return self.device_memory_usage

    @property
    def self_cuda_memory_usage(self) -> int:
        return self.self_device_memory_usage


class FunctionEvent(_Formatted):
    """One timed range on one thread: an op call, a backward node or a ``record_function``."""

    __slots__ = ("id", "name", "thread", "start_us", "end_us", "kind", "sequence_nr",
                 "input_shapes", "stack", "cpu_memory_usage", "own_device_time", "cpu_children", "cpu_parent",
                 "use_device", "device_memory_usage", "_self_device", "_device_total")

    def __init__(self, id: int, name: str, thread: int, start_us: float, end_us: float,
                 kind: str = OP, sequence_nr: int = -1, input_shapes=None, stack=None,
                 cpu_memory_usage: int = 0, device_time: float = 0.0, use_device=None):
        self.id, self.name, self.thread = id, name, thread
        self.start_us, self.end_us, self.kind = start_us, end_us, kind
        self.sequence_nr = sequence_nr
        self.input_shapes = input_shapes
        self.stack = stack if stack is not None else []
        self.cpu_memory_usage = cpu_memory_usage  # net bytes, this range and everything inside it
        self.own_device_time = device_time  # device time measured around this range's work
        self.device_memory_usage = 0
        self.cpu_children: list[FunctionEvent] = []
        self.cpu_parent: FunctionEvent | None = None
        self.use_device = use_device
        self._self_device = self._device_total = None

    key = property(lambda self: self.name)
    count = property(lambda self: 1)
    is_user_annotation = property(lambda self: self.kind == USER)
    is_async = property(lambda self: False)

    @property
    def time_range(self) -> Interval:
        return Interval(self.start_us, self.end_us)

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    cpu_time = cpu_time_total

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_device_memory_usage(self) -> int:
        return self.device_memory_usage - sum(c.device_memory_usage for c in self.cpu_children)

    @property
    def self_device_time_total(self) -> float:
        # Clamped: device ranges of children may overlap their parent's only in part.
        if self._self_device is None:
            inner = sum(c.own_device_time for c in self.cpu_children)
            self._self_device = max(0.0, self.own_device_time - inner)
        return self._self_device

    @property
    def device_time_total(self) -> float:
        # Built from self times over the subtree (iteratively: deep graphs nest deeply).
        if self._device_total is None:
            order, todo = [], [self]
            while todo:
                e = todo.pop()
                order.append(e)
                todo.extend(c for c in e.cpu_children if c._device_total is None)
            for e in reversed(order):
                e._device_total = e.self_device_time_total + sum(
                    c._device_total for c in e.cpu_children)
        return self._device_total

    device_time = device_time_total

    def __repr__(self) -> str:
        return (f"<FunctionEvent id={self.id} name={self.name} thread={self.thread} "
                f"cpu_time={self.cpu_time_total_str} start_us={self.start_us:.3f} "
                f"end_us={self.end_us:.3f} sequence_nr={self.sequence_nr} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage}>")


class FunctionEventAvg(_Formatted):
    """The sum of the events of one key (a row of ``key_averages``)."""

    __slots__ = ("key", "count", "self_cpu_time_total", "cpu_time_total", "self_device_time_total",
                 "device_time_total", "cpu_memory_usage", "self_cpu_memory_usage",
                 "device_memory_usage", "self_device_memory_usage", "input_shapes", "stack",
                 "use_device", "is_user_annotation", "node_id")

    def __init__(self, key: str | None = None, use_device=None):
        self.key, self.count, self.use_device = key, 0, use_device
        self.self_cpu_time_total = self.cpu_time_total = 0.0
        self.self_device_time_total = self.device_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.device_memory_usage = self.self_device_memory_usage = 0
        self.input_shapes = self.stack = None
        self.is_user_annotation = False
        self.node_id = -1

    def add(self, other, totals: bool = True) -> FunctionEventAvg:
        """Add an event (or another average). ``totals=False`` adds only self figures and the
        count: used for an event nested in one of the same key, whose totals the outer one
        already holds."""
        if self.key is None:
            self.key, self.input_shapes, self.stack = other.key, other.input_shapes, other.stack
            self.is_user_annotation = other.is_user_annotation
        self.count += other.count
        self.self_cpu_time_total += other.self_cpu_time_total
        self.self_device_time_total += other.self_device_time_total
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.self_device_memory_usage += other.self_device_memory_usage
        if totals:
            self.cpu_time_total += other.cpu_time_total
            self.device_time_total += other.device_time_total
            self.cpu_memory_usage += other.cpu_memory_usage
            self.device_memory_usage += other.device_memory_usage
        return self

    __iadd__ = add

    @property
    def cpu_time(self) -> float:
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self) -> float:
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_str} self_device_time={self.self_device_time_total_str}"
                f" device_time={self.device_time_str} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


# --- formatting (PyTorch's units and rounding) ---
def format_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def format_share(us: float, total: float) -> str:
    return "NaN" if total == 0 else f"{us * 100.0 / total:.2f}%"


def format_memory(nbytes: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


def _sort_attr(sort_by: str) -> str:
    return sort_by.replace("cuda", "device").replace("xpu", "device")


class EventList(list):
    """A list of events (or of averages) with PyTorch's summaries."""

    def __init__(self, events=(), use_device=None, profile_memory: bool = False):
        super().__init__(events)
        self.use_device = use_device
        self.profile_memory = profile_memory

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> EventList:
        """One ``FunctionEventAvg`` per name (and input shapes, and top ``n`` stack frames)."""
        def key_of(e):
            k = (e.key,)
            if group_by_input_shape:
                k += (str(e.input_shapes),)
            if group_by_stack_n > 0:
                k += tuple(e.stack[:group_by_stack_n])
            return k

        rows: dict = {}
        for e in self:
            k = key_of(e)
            row = rows.get(k)
            if row is None:
                row = rows[k] = FunctionEventAvg(use_device=self.use_device)
            # Recursion (an op inside an op of the same key) would count the inner range twice
            # in the row's totals; only the outermost adds its totals.
            p, nested = getattr(e, "cpu_parent", None), False
            while p is not None:
                if key_of(p) == k:
                    nested = True
                    break
                p = p.cpu_parent
            row.add(e, totals=not nested)
            if group_by_stack_n <= 0:
                row.stack = None
            if not group_by_input_shape:
                row.input_shapes = None
        return EventList(rows.values(), self.use_device, self.profile_memory)

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg(use_device=self.use_device)
        for e in self:
            total.add(e)
        total.key = "Total"
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        """The summary table, with PyTorch's columns and closing lines."""
        return _table(self, sort_by, row_limit, max_src_column_width, max_name_column_width,
                      max_shapes_column_width, header, top_level_events_only, time_unit)

    def __str__(self) -> str:
        return self.table()

    def export_chrome_trace(self, path: str) -> None:
        """Write a Chrome/Perfetto trace: one complete ("X") event per range on its thread, and
        flow arrows ("s" -> "f") from each forward op to the backward node it created."""
        pid = os.getpid()
        trace = []
        first_fwd: dict = {}  # sequence nr -> the innermost op whose output has that grad_fn
        for e in self:
            args = {"External id": e.id}
            if e.sequence_nr >= 0:
                args["Sequence number"] = e.sequence_nr
            if e.input_shapes is not None:
                args["Input Dims"] = e.input_shapes
            if e.cpu_memory_usage:
                args["CPU Mem"] = e.cpu_memory_usage
            trace.append({"ph": "X", "cat": e.kind, "name": e.name, "pid": pid, "tid": e.thread,
                          "ts": e.start_us, "dur": e.end_us - e.start_us, "args": args})
            if e.kind == OP and e.sequence_nr >= 0:
                best = first_fwd.get(e.sequence_nr)
                if best is None or e.cpu_time_total < best.cpu_time_total:
                    first_fwd[e.sequence_nr] = e
        for e in self:
            # The engine's wrapper event is where the backward work of a node starts.
            if e.kind != NODE or e.cpu_parent is not None and e.cpu_parent.kind == NODE:
                continue
            fwd = first_fwd.get(e.sequence_nr)
            if fwd is None:
                continue
            common = {"id": e.sequence_nr, "cat": "fwdbwd", "name": "fwdbwd", "pid": pid}
            trace.append({"ph": "s", "tid": fwd.thread, "ts": fwd.start_us, **common})
            trace.append({"ph": "f", "bp": "e", "tid": e.thread, "ts": e.start_us, **common})
        for tid in sorted({e.thread for e in self}):
            trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                          "args": {"name": f"thread {tid}"}})
        with open(path, "w") as f:
            json.dump({"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": trace}, f)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Write one line per event with a stack: frames outermost first, ';'-joined, then the
        metric as an integer (the collapsed format flame graph tools read)."""
        allowed = ["self_cpu_time_total", "self_cuda_time_total"]
        if metric not in allowed:
            raise ValueError("metric should be one of: " + str(allowed))
        clean = str.maketrans(" ;\t\n", "____")
        with open(path, "w") as f:
            for e in self:
                value = int(getattr(e, _sort_attr(metric)))
                if e.stack and value > 0:
                    frames = ";".join(s.translate(clean) for s in reversed(e.stack))
                    f.write(f"{frames} {value}\n")


# --- the table ---
def _table(events, sort_by, row_limit, max_src_width, max_name_width, max_shapes_width, header,
           top_level_only, time_unit) -> str:
    if len(events) == 0:
        return ""
    use_device = events.use_device if isinstance(events, EventList) else None
    profile_memory = isinstance(events, EventList) and events.profile_memory
    if sort_by is not None:
        attr = _sort_attr(sort_by)
        events = sorted(events, key=lambda e: getattr(e, attr), reverse=True)
    has_shapes = any(e.input_shapes for e in events)
    stacks = [e.stack for e in events if e.stack]

    def fmt_time(us):
        if time_unit == "s":
            return f"{us / 1e6:.3f}s"
        if time_unit == "ms":
            return f"{us / 1e3:.3f}ms"
        if time_unit == "us":
            return f"{us:.3f}us"
        return format_time(us)

    name_width = max(len(e.key) for e in events) + 4
    if max_name_width is not None:
        name_width = min(name_width, max_name_width)
    dev = use_device.upper() if use_device else None
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    # The device columns appear whenever device time was asked for (PyTorch shows them only once
    # some event has device time; here they stay so a CPU-only run shows the layout).
    if dev:
        headers += [f"Self {dev}", f"Self {dev} %", f"{dev} total", f"{dev} time avg"]
    has_dev_mem = dev is not None and any(e.self_device_memory_usage > 0 for e in events)
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
        if has_dev_mem:
            headers += [f"{dev} Mem", f"Self {dev} Mem"]
    headers.append("# of Calls")
    widths = [name_width] + [12] * (len(headers) - 1)
    aligns = [">"] * len(headers)
    if has_shapes:
        headers.append("Input Shapes")
        shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
        widths.append(min(shapes_width, max_shapes_width) if max_shapes_width else shapes_width)
        aligns.append(">")
    if stacks:
        src_width = max(len(s) for st in stacks for s in st) + 4
        src_width = min(src_width, max_src_width) if max_src_width else src_width
        headers.append("Source Location")
        widths.append(src_width)
        aligns.append("<")
    row_fmt = "".join(f"{{:{a}{w}}}  " for a, w in zip(aligns, widths))
    sep = "".join("-" * w + "  " for w in widths)
    line_length = sum(w + 2 for w in widths) - 2

    total_self = sum(e.self_cpu_time_total for e in events)
    total_self_dev = sum(e.self_device_time_total for e in events)
    out = []
    if header is not None:
        out += ["=" * line_length, header]
    if top_level_only:
        out += ["=" * line_length, "This report only display top-level ops statistics"]
    out += [sep, row_fmt.format(*headers), sep]

    def trim(path):
        if len(path) > src_width:
            path = "..." + path[len(path) - src_width + 3:]
        return path

    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_only and getattr(e, "cpu_parent", None) is not None:
            continue
        shown += 1
        name = e.key
        if max_name_width is not None and len(name) >= max_name_width - 3:
            name = name[:max_name_width - 3] + "..."
        row = [name, format_share(e.self_cpu_time_total, total_self),
               fmt_time(e.self_cpu_time_total), format_share(e.cpu_time_total, total_self), fmt_time(e.cpu_time_total),
               fmt_time(e.cpu_time)]
        if dev:
            row += [fmt_time(e.self_device_time_total),
                    format_share(e.self_device_time_total, total_self_dev),
                    fmt_time(e.device_time_total), fmt_time(e.device_time)]
        if profile_memory:
            row += [format_memory(e.cpu_memory_usage), format_memory(e.self_cpu_memory_usage)]
            if has_dev_mem:
                row += [format_memory(e.device_memory_usage),
                        format_memory(e.self_device_memory_usage)]
        row.append(e.count)
        if has_shapes:
            row.append(str(e.input_shapes)[:widths[len(row)]])
        if stacks:
            row.append(trim(e.stack[0]) if e.stack else "")
        out.append(row_fmt.format(*row))
        if stacks and e.stack:
            blank = [""] * (len(headers) - 1)
            out += [row_fmt.format(*blank, trim(s)) for s in e.stack[1:]]
            out.append(row_fmt.format(*blank, ""))
    out.append(sep)
    out.append(f"Self CPU time total: {fmt_time(total_self)}")
    if dev:
        out.append(f"Self {dev} time total: {fmt_time(total_self_dev)}")
    return "\n".join(out) + "\n"
