"""``ndgrad.profiler.profile``: activities, schedules (``step()``), ``on_trace_ready`` handlers
and the memory timeline, as ``torch.profiler``. Each recorded cycle is one
``ndgrad.autograd.profiler.profile`` (``self.profiler``).
"""

from __future__ import annotations

import enum
import json
import os
import socket
import time
import warnings
from typing import Callable, Iterable

from ..autograd import profiler as _legacy
from .events import EventList
from .recorder import record_function

__all__ = ["profile", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 2


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities() -> set:
    """CPU always; CUDA where a GPU is visible (a CUDA request elsewhere still shows the CUDA
    columns, timing the ops of any device with streams)."""
    from .._backend import cuda  # the device type (ndgrad.cuda is a library above)

    return {ProfilerActivity.CPU, ProfilerActivity.CUDA} if cuda.available() else {ProfilerActivity.CPU}


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0,
             skip_first: int = 0, skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """The action for each step: after ``skip_first`` steps, cycles of ``wait`` idle steps,
    ``warmup`` steps and ``active`` recorded steps (the last one saves), ``repeat`` times
    (0: forever). ``skip_first_wait`` drops the first cycle's wait."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} "
            f"(need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), "
            f"skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)
    cycle = wait + warmup + active

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _record_always(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False) -> Callable:
    """An ``on_trace_ready`` handler writing ``<worker>.<time ns>.pt.trace.json[.gz]`` to
    ``dir_name``."""
    def handler(prof) -> None:
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(dir_name, f"{worker}.{time.time_ns()}.pt.trace.json")
        prof.export_chrome_trace(path)
        if use_gzip:
            import gzip
            with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                dst.write(src.read())
            os.remove(path)
    return handler


class profile:
    """Profile the ops, backward nodes and ``record_function`` ranges run in the block.

    Example::

        >>> import ndgrad as torch
        >>> from ndgrad.profiler import profile, ProfilerActivity
        >>> x = torch.ones(2, 3)
        >>> with profile(activities=[ProfilerActivity.CPU]) as prof:
        ...     y = x.sum()
        >>> prof.key_averages()[0].key
        'aten::sum'
    """

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config=None,
                 use_cuda: bool | None = None):
        acts = set(activities) if activities is not None else supported_activities()
        if use_cuda:
            acts.add(ProfilerActivity.CUDA)
        if not acts:
            raise AssertionError("No valid profiler activities found")
        self.activities = acts
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.use_device = "cuda" if ProfilerActivity.CUDA in acts else None
        self.record_steps = schedule is not None  # step ranges in the trace, as PyTorch
        self.schedule = schedule if schedule is not None else _record_always
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(0)
        self.step_rec_fn: record_function | None = None
        self.profiler: _legacy.profile | None = None
        self._recording = False

    # --- state machine (PyTorch's transitions between schedule actions) ---
    def _prepare(self) -> None:
        self.profiler = _legacy.profile(
            use_device=self.use_device, record_shapes=self.record_shapes,
            profile_memory=self.profile_memory, with_stack=self.with_stack)

    def _start_trace(self) -> None:
        self.profiler._start()
        self._recording = True

    def _stop_trace(self) -> None:
        if self._recording:
            self.profiler._stop()
            self._recording = False

    def _trace_ready(self) -> None:
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _transit(self, prev: ProfilerAction, cur: ProfilerAction | None) -> None:
        A = ProfilerAction
        recording = (A.RECORD, A.RECORD_AND_SAVE)
        if prev is A.NONE:
            if cur is A.WARMUP:
                self._prepare()
            elif cur in recording:
                self._prepare()
                self._start_trace()
        elif prev is A.WARMUP:
            if cur is None or cur is A.NONE:
                if cur is A.NONE:
                    warnings.warn("Incorrect schedule: WARMUP followed by NONE")
                self._start_trace()
                self._stop_trace()
            elif cur in recording:
                self._start_trace()
        elif prev is A.RECORD:
            if cur is None:
                self._stop_trace()
                self._trace_ready()
            elif cur in (A.NONE, A.WARMUP):
                warnings.warn(f"Incorrect schedule: RECORD followed by {cur.name}")
                self._stop_trace()
        else:  # RECORD_AND_SAVE ends a cycle whatever comes next
            self._stop_trace()
            self._trace_ready()
            if cur is A.WARMUP:
                self._prepare()
            elif cur in recording:
                self._prepare()
                self._start_trace()

    def start(self) -> None:
        self._transit(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self.step_rec_fn = record_function(f"ProfilerStep#{self.step_num}")
            self.step_rec_fn.__enter__()

    def stop(self) -> None:
        if self.step_rec_fn is not None:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        self._transit(self.current_action, None)

    def step(self) -> None:
        """Signal that the next step starts: advance the schedule."""
        if self.step_rec_fn is not None:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(prev, self.current_action)
        if self.record_steps:
            self.step_rec_fn = record_function(f"ProfilerStep#{self.step_num}")
            self.step_rec_fn.__enter__()

    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> None:
        self.stop()

    # --- results (of the last recorded cycle) ---
    def events(self) -> EventList:
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before accessing events")
        return self.profiler.function_events

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> EventList:
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before getting key averages")
        return self.profiler.key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self):
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before getting key averages")
        return self.profiler.total_average()

    def export_chrome_trace(self, path: str) -> None:
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before exporting chrome trace")
        self.profiler.export_chrome_trace(path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before exporting stacks")
        self.profiler.export_stacks(path, metric)

    def export_memory_timeline(self, path: str, device: str | None = None) -> None:
        """Write CPU memory in use (bytes traced) after each op and backward node: ``.json``
        (``[times_us, bytes]``), ``.html`` (a self-contained SVG plot) or ``.png`` (matplotlib)."""
        if not self.profile_memory:
            raise ValueError("profile_memory=True required for memory profiling.")
        if self.profiler is None or self.profiler._recording is None:
            raise AssertionError("Profiler must be initialized before exporting memory timeline")
        rec = self.profiler._recording
        times = [(t - rec.t0) / 1e3 for t, _ in rec.timeline]
        sizes = [b for _, b in rec.timeline]
        if path.endswith(".html"):
            with open(path, "w") as f:
                f.write(_timeline_html(times, sizes))
        elif path.endswith(".png"):
            import matplotlib  # imported only here: an optional dependency
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(10, 4))
            ax.step(times, [s / 2**20 for s in sizes], where="post")
            ax.set_xlabel("time (us)")
            ax.set_ylabel("CPU memory (MB)")
            fig.savefig(path)
            plt.close(fig)
        else:
            with open(path, "w") as f:
                json.dump([times, sizes], f)


def _timeline_html(times: list, sizes: list) -> str:
    w, h = 900, 300
    t_max, s_max = (max(times) if times else 1.0) or 1.0, (max(sizes) if sizes else 1) or 1
    pts = " ".join(f"{40 + t / t_max * (w - 60):.1f},{h - 30 - s / s_max * (h - 60):.1f}"
                   for t, s in zip(times, sizes))
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Memory timeline</title></head>"
        f"<body><h3>CPU memory in use (peak {s_max / 2**20:.2f} MB over {t_max:.0f} us)</h3>"
        f"<svg width='{w}' height='{h}' xmlns='http://www.w3.org/2000/svg'>"
        f"<line x1='40' y1='{h - 30}' x2='{w - 20}' y2='{h - 30}' stroke='black'/>"
        f"<line x1='40' y1='30' x2='40' y2='{h - 30}' stroke='black'/>"
        f"<polyline fill='none' stroke='steelblue' points='{pts}'/>"
        f"<text x='40' y='{h - 8}'>0 us</text><text x='{w - 120}' y='{h - 8}'>{t_max:.0f} us</text>"
        f"<text x='44' y='24'>{s_max / 2**20:.2f} MB</text></svg>"
        f"<script type='application/json' id='data'>{json.dumps([times, sizes])}</script>"
        "</body></html>")
