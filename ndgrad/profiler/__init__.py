"""``ndgrad.profiler``: profile ops, backward nodes and named ranges on the CPU (device time
once the backend can time device work), as ``torch.profiler``.

``recorder.py`` hooks the dispatch point and the engine; ``events.py`` turns what was recorded
into events, averages, tables and traces; ``profiler.py`` holds ``profile`` and schedules.
"""

from __future__ import annotations

from .events import EventList, FunctionEvent, FunctionEventAvg
from .profiler import (
    ProfilerAction, ProfilerActivity, profile, schedule, supported_activities,
    tensorboard_trace_handler,
)
from .recorder import record_function

__all__ = ["profile", "record_function", "schedule", "ProfilerAction", "ProfilerActivity",
           "tensorboard_trace_handler", "supported_activities", "EventList", "FunctionEvent",
           "FunctionEventAvg"]
