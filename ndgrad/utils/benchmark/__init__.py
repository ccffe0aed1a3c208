"""``ndgrad.utils.benchmark``: torch.utils.benchmark's ``Timer``, ``Measurement`` and ``Compare``
for Python statements (no C++ timing, no Callgrind, no fuzzers)."""

from .common import Measurement, TaskSpec, select_unit, trim_sigfig, unit_to_english
from .compare import Compare
from .timer import Language, Timer, timer

__all__ = [
    "Compare",
    "Language",
    "Measurement",
    "TaskSpec",
    "Timer",
    "select_unit",
    "timer",
    "trim_sigfig",
    "unit_to_english",
]
