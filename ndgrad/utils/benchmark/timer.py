"""``Timer``: timeit-style timing of a Python statement, returning ``Measurement``s."""

from __future__ import annotations

import enum
import timeit

from .common import Measurement, TaskSpec

__all__ = ["Language", "Timer", "timer"]

timer = timeit.default_timer


class Language(enum.Enum):
    PYTHON = 0
    CPP = 1


class Timer:
    """Times ``stmt`` after running ``setup`` once (torch.utils.benchmark.Timer, Python only).

    ``globals`` defaults to ``{"torch": ndgrad}``, so statements written for torch run as is.

    >>> from ndgrad.utils.benchmark import Timer
    >>> m = Timer("x + 1", setup="x = 1").timeit(100)
    >>> m.number_per_run
    100
    """

    def __init__(
        self,
        stmt: str = "pass",
        setup: str = "pass",
        global_setup: str = "",
        timer=timer,
        globals: dict | None = None,
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        env: str | None = None,
        num_threads: int = 1,
        language: Language | str = Language.PYTHON,
    ) -> None:
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")  # noqa: TRY004 (torch)
        if language in (Language.PYTHON, "py", "python"):
            language = Language.PYTHON
            if global_setup:
                raise ValueError(
                    f"global_setup is C++ only, got `{global_setup}`. Most likely "
                    "this code can simply be moved to `setup`."
                )
        elif language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError("ndgrad's Timer runs Python statements only")
        else:
            raise ValueError(f"Invalid language `{language}`.")
        if globals is None:
            import ndgrad

            globals = {"torch": ndgrad}
        self._globals = dict(globals)
        self._language = language
        self._timer = timer
        self._task_spec = TaskSpec(
            stmt=stmt,
            setup=setup,
            global_setup=global_setup,
            label=label,
            sub_label=sub_label,
            description=description,
            env=env,
            num_threads=num_threads,
        )
        self._timeit_timer = timeit.Timer(
            stmt=stmt, setup=setup, timer=timer, globals=self._globals
        )

    def _timeit(self, number: int) -> float:
        return self._timeit_timer.timeit(int(number))

    def timeit(self, number: int = 1000000) -> Measurement:
        """Runs ``stmt`` ``number`` times (after a short warmup): one measurement."""
        self._timeit(number=max(int(number // 100), 2))  # warmup
        return Measurement(
            number_per_run=number,
            raw_times=[self._timeit(number=number)],
            task_spec=self._task_spec,
        )

    def repeat(self, repeat: int = -1, number: int = -1):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _estimate_block_size(self, min_run_time: float) -> int:
        """The smallest power of ten of runs whose block takes long enough that the timer's
        overhead is negligible (or that alone exceeds ``min_run_time``)."""
        overhead = sorted(self._timeit(0) for _ in range(5))[2]
        number = 1
        while True:
            time_taken = self._timeit(number)
            relative_overhead = overhead / time_taken if time_taken > 0 else 1.0
            if relative_overhead <= 1e-4 and time_taken >= min_run_time / 1000:
                break
            if time_taken > min_run_time or number * 10 > 2**62:
                break
            number *= 10
        return number

    def _measure_loop(
        self, number, time_hook, stop_hook, min_run_time, max_run_time=None, callback=None
    ) -> list[float]:
        total, times = 0.0, []
        while total < min_run_time or not stop_hook(times):
            time_taken = time_hook()
            total += time_taken
            if callback is not None:
                callback(number, time_taken)
            times.append(time_taken)
            if max_run_time is not None and total > max_run_time:
                break
        return times

    def blocked_autorange(self, callback=None, min_run_time: float = 0.2) -> Measurement:
        """Blocks of a fixed number of runs until ``min_run_time`` seconds are spent; the
        block size is chosen first so that the timer's overhead is negligible."""
        number = self._estimate_block_size(min_run_time)
        times = self._measure_loop(
            number, lambda: self._timeit(number), lambda t: True, min_run_time, callback=callback
        )
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def adaptive_autorange(
        self,
        threshold: float = 0.1,
        *,
        min_run_time: float = 0.01,
        max_run_time: float = 10.0,
        callback=None,
    ) -> Measurement:
        """Like ``blocked_autorange``, but runs blocks until the IQR is below ``threshold``
        of the median (at least 4 blocks and ``min_run_time``), or ``max_run_time`` passes."""
        number = self._estimate_block_size(min_run_time=0.05)

        def stop(times):
            return len(times) > 3 and Measurement(number, times, self._task_spec).meets_confidence(
                threshold
            )

        times = self._measure_loop(
            number,
            lambda: self._timeit(number),
            stop,
            min_run_time,
            max_run_time,
            callback=callback,
        )
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)
