"""Keep freed CPU array memory in the process for reuse, as a caching allocator would.

Training allocates and frees the same large arrays every step. With glibc's defaults an array
above the (dynamic) mmap threshold gets fresh pages from the kernel, and freed memory at the top
of the heap is handed back, so each step pays a page fault and a zeroing per 4 KiB page: on the
transformer benchmark that was a third of the step. Raising both thresholds makes freed blocks
stay in the heap, where the next step's arrays of the same sizes find them. The cost is that the
process keeps its peak heap instead of shrinking after a spike.

Applied once at import on glibc systems; ``NDGRAD_CPU_MALLOC=system`` leaves the C library's
defaults untouched. Memory figures that ndgrad reports (``utils.memory``) count arrays, not
pages, and are unaffected.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest allowed value on 64-bit systems
TRIM_THRESHOLD = 1 << 30

applied = False  # whether the thresholds were set in this process


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds (once); return whether they are in effect."""
    global applied
    if applied:
        return True
    if os.environ.get("NDGRAD_CPU_MALLOC", "") == "system" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other C libraries have no mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # Both or neither: a fixed trim threshold alone turns off the dynamic mmap threshold and
    # sends every large array to mmap, which is slower than the defaults.
    if mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD):
        applied = True
    return applied
