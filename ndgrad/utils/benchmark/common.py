"""``TaskSpec`` (what was timed) and ``Measurement`` (the times, their statistics, torch's repr)."""

from __future__ import annotations

import math
import textwrap

import numpy as np

__all__ = ["Measurement", "TaskSpec", "select_unit", "trim_sigfig", "unit_to_english"]

_IQR_WARN_THRESHOLD = 0.1


class TaskSpec:
    """The statement, setup and labels of a benchmark (the fields torch's TaskSpec holds)."""

    __slots__ = (
        "description",
        "env",
        "global_setup",
        "label",
        "num_threads",
        "setup",
        "stmt",
        "sub_label",
    )

    def __init__(
        self,
        stmt: str,
        setup: str,
        global_setup: str = "",
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        env: str | None = None,
        num_threads: int = 1,
    ) -> None:
        self.stmt, self.setup, self.global_setup = stmt, setup, global_setup
        self.label, self.sub_label, self.description = label, sub_label, description
        self.env, self.num_threads = env, num_threads

    @property
    def title(self) -> str:
        """The label (with sub_label) or, without one, the statement."""
        if self.label is not None:
            return self.label + (f": {self.sub_label}" if self.sub_label else "")
        if "\n" not in self.stmt:
            return self.stmt + (f": {self.sub_label}" if self.sub_label else "")
        return (
            f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n"
            f"{textwrap.indent(self.stmt, '  ')}"
        )

    def summarize(self) -> str:
        sections = [self.title, self.description or ""]
        setup = self.setup.strip()
        if setup and setup != "pass":
            sections.append(
                f"setup:\n{textwrap.indent(setup, '  ')}" if "\n" in setup else f"setup: {setup}"
            )
        return "\n".join(f"{s}\n" if "\n" in s else s for s in sections if s)


def select_unit(t: float) -> tuple[str, float]:
    """The unit (``ns``, ``us``, ``ms`` or ``s``) and its scale to print ``t`` seconds with."""
    exponent = int(math.log10(t) // 3) if t > 0 else 0
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(exponent, "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


def unit_to_english(u: str) -> str:
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x: float, n: int) -> float:
    """``x`` rounded to ``n`` significant figures."""
    if x == 0 or not math.isfinite(x):
        return x
    magnitude = math.ceil(math.log10(abs(x)))
    scale = 10 ** (magnitude - n)
    return float(np.float32(round(x / scale) * scale))


class Measurement:
    """The result of a Timer: ``raw_times`` (seconds per block of ``number_per_run`` runs) and
    statistics over the per-run ``times``.

    >>> from ndgrad.utils.benchmark import Measurement, TaskSpec
    >>> m = Measurement(10, [1e-3, 2e-3], TaskSpec("f(x)", "pass"))
    >>> m.number_per_run, round(m.median, 6)
    (10, 0.00015)
    """

    def __init__(
        self,
        number_per_run: int,
        raw_times: list[float],
        task_spec: TaskSpec,
        metadata: dict | None = None,
    ) -> None:
        self.number_per_run = number_per_run
        self.raw_times = list(raw_times)
        self.task_spec = task_spec
        self.metadata = metadata
        self._sorted = sorted(t / number_per_run for t in self.raw_times)

    def __getattr__(self, name):
        if name in TaskSpec.__slots__ or name == "title":
            return getattr(self.__dict__["task_spec"], name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, state):
        self.__dict__.update(state)

    @property
    def times(self) -> list[float]:
        return [t / self.number_per_run for t in self.raw_times]

    def _quantile(self, q: float) -> float:
        return float(np.quantile(self._sorted, q)) if self._sorted else math.nan

    @property
    def median(self) -> float:
        return self._quantile(0.5)

    @property
    def mean(self) -> float:
        return float(np.mean(self._sorted)) if self._sorted else math.nan

    @property
    def iqr(self) -> float:
        return self._quantile(0.75) - self._quantile(0.25)

    @property
    def significant_figures(self) -> int:
        """How many figures of the median the spread supports (1 to 3)."""
        n = len(self._sorted)
        if n < 2 or self.median <= 0:
            return 3
        ci = 1.96 * float(np.std(self._sorted)) / math.sqrt(n)
        if ci <= 0:
            return 3
        return max(1, min(3, math.floor(math.log10(self.median / ci))))

    @property
    def has_warnings(self) -> bool:
        return bool(self._warnings())

    def _warnings(self) -> list[str]:
        out = []
        median = self.median
        if len(self._sorted) > 1 and median > 0:
            rel = self.iqr / median
            if rel > _IQR_WARN_THRESHOLD:
                out.append(
                    f"  WARNING: Interquartile range is {rel * 100:.1f}% of the median "
                    "measurement.\n           This suggests significant environmental "
                    "influence."
                )
        return out

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        return self.iqr / self.median < threshold

    @property
    def as_row_name(self) -> str:
        return self.sub_label or self.stmt or "[Unknown]"

    @property
    def env(self):
        return self.task_spec.env

    def __repr__(self) -> str:
        median = self.median
        unit, scale = select_unit(median)
        n = len(self._sorted)
        threads = f"{self.num_threads} thread{'s' if self.num_threads > 1 else ''}"
        lines = [object.__repr__(self), self.task_spec.summarize()]
        if n == 1:
            lines.append(f"  {median / scale:.2f} {unit}")
            lines.append(f"  1 measurement, {self.number_per_run} runs , {threads}")
        else:
            lines.append(f"  Median: {median / scale:.2f} {unit}")
            if n >= 4:
                lo, hi = self._quantile(0.25) / scale, self._quantile(0.75) / scale
                lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} ({lo:.2f} to {hi:.2f})")
            lines.append(
                f"  {n} measurements, {self.number_per_run} runs per measurement, {threads}"
            )
        lines.extend(self._warnings())
        return "\n".join(lines).strip()

    @staticmethod
    def merge(measurements) -> list:
        """Measurements of the same task combined into one (runs per block must agree)."""
        groups: dict = {}
        for m in measurements:
            spec = m.task_spec
            key = tuple(getattr(spec, s) for s in TaskSpec.__slots__)
            groups.setdefault(key, []).append(m)
        out = []
        for ms in groups.values():
            number = ms[0].number_per_run
            times = [t * number for m in ms for t in m.times]
            out.append(Measurement(number, times, ms[0].task_spec))
        return out
