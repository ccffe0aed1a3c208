"""CPU memory accounting: bytes held by arrays (and other Python allocations) now and at peak.

NumPy reports its data buffers to ``tracemalloc``, so while tracing is on the current and peak
traced sizes include every ndgrad array on the CPU. Tracing slows allocation down; turn it on
only to measure (``with memory.track() as m: ...; m.peak``).
"""

from __future__ import annotations

import tracemalloc

__all__ = ["start", "stop", "is_tracking", "current_bytes", "peak_bytes", "reset_peak", "track"]


def start() -> None:
    """Begin tracing allocations (a no-op when already tracing)."""
    if not tracemalloc.is_tracing():
        tracemalloc.start()


def stop() -> None:
    tracemalloc.stop()


def is_tracking() -> bool:
    return tracemalloc.is_tracing()


def current_bytes() -> int:
    """Bytes allocated now and not yet freed, since tracing started."""
    return tracemalloc.get_traced_memory()[0]


def peak_bytes() -> int:
    """The most bytes held at once since tracing started or the last ``reset_peak()``."""
    return tracemalloc.get_traced_memory()[1]


def reset_peak() -> None:
    tracemalloc.reset_peak()


class track:  # noqa: N801 - used like a function: ``with track() as m``
    """Measure a block: ``m.peak`` is the peak bytes above what was held when it began,
    ``m.retained`` what it still holds at the end. Starts (and then stops) tracing if needed."""

    def __enter__(self):
        self._started = not tracemalloc.is_tracing()
        start()
        tracemalloc.reset_peak()
        self.base = current_bytes()
        self.peak = self.retained = 0
        return self

    def __exit__(self, *exc):
        cur, peak = tracemalloc.get_traced_memory()
        self.peak, self.retained = peak - self.base, cur - self.base
        if self._started:
            stop()
        return False
