"""``ndgrad.autograd.profiler``: the one-shot profiler (``profile``) and ``record_function``, as
``torch.autograd.profiler``. ``ndgrad.profiler.profile`` (schedules, activities) is built on it;
recording itself lives in ``ndgrad/profiler/recorder.py``, results in ``events.py``.
"""

from __future__ import annotations

import warnings

from ..profiler.events import EventList, FunctionEvent, FunctionEventAvg
from ..profiler.recorder import Recording, record_function

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]


class profile:
    """Record every op, backward node and ``record_function`` range run inside the block.

    Example::

        >>> import ndgrad as torch
        >>> x = torch.ones(3, requires_grad=True)
        >>> with torch.autograd.profiler.profile() as prof:
        ...     (x * 2).sum().backward()
        >>> "aten::mul" in [e.key for e in prof.key_averages()]
        True
    """

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False,
                 use_device: str | None = None, record_shapes: bool = False, with_flops: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_modules: bool = False,
                 use_kineto: bool = False, use_cpu: bool = True, experimental_config=None,
                 acc_events: bool = False, custom_trace_id_callback=None):
        self.enabled = enabled
        if use_cuda:
            warnings.warn("The attribute `use_cuda` will be deprecated soon, please use "
                          "``use_device = 'cuda'`` instead.", FutureWarning, stacklevel=2)
            use_device = "cuda"
        self.use_device = use_device
        self.use_cuda = use_device == "cuda"
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.with_flops = with_stack, with_flops
        self.entered = False
        self._recording: Recording | None = None

    def __enter__(self):
        if not self.enabled:
            return None  # NOTE(pytorch): a disabled profiler's ``as`` target is None
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self._start()
        self.entered = True
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if not self.enabled:
            return
        self._stop()

    def _start(self) -> None:
        self._recording = Recording(self.record_shapes, self.profile_memory, self.with_stack,
                                    self.use_device)
        self._recording.start()

    def _stop(self) -> None:
        self._recording.stop()
        self._finished = True

    _finished = False

    @property
    def function_events(self) -> EventList | None:
        # Built on first use: a profile whose results nobody reads costs no event objects.
        return self._recording.events() if self._finished else None

    def _check_finish(self) -> None:
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def __repr__(self) -> str:
        events = self.function_events
        return "<unfinished profiler>" if events is None else repr(events)

    def __str__(self) -> str:
        events = self.function_events
        return "<unfinished profiler>" if events is None else str(events)

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55, max_shapes_column_width: int = 80,
              header: str | None = None, top_level_events_only: bool = False,
              time_unit: str | None = None) -> str:
        self._check_finish()
        return self.function_events.table(sort_by, row_limit, max_src_column_width,
                                          max_name_column_width, max_shapes_column_width, header,
                                          top_level_events_only, time_unit)

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> EventList:
        self._check_finish()
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self) -> FunctionEventAvg:
        self._check_finish()
        return self.function_events.total_average()

    def export_chrome_trace(self, path: str) -> None:
        self._check_finish()
        self.function_events.export_chrome_trace(path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        self._check_finish()
        if not self.with_stack:
            raise AssertionError("export_stacks() requires with_stack=True")
        self.function_events.export_stacks(path, metric)

    @property
    def self_cpu_time_total(self) -> float:
        self._check_finish()
        return self.function_events.self_cpu_time_total
