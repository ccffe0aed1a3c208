"""The C tier of ``inductor``: a C source per graph compiled once into a shared library, cached on
disk by the hash of the source and flags, loaded with cffi (ABI mode: no Python headers needed).

The tier is on where a C compiler and ``cffi`` are present, unless ``NDGRAD_INDUCTOR_CPP=0`` or a
compile's ``options={"cpp_fusion": False}`` turns it off; without them ``inductor`` stays on
NumPy code and says so once in the log. The cache lives under ``$NDGRAD_CACHE_DIR`` (default
``$XDG_CACHE_HOME/ndgrad`` or ``~/.cache/ndgrad``), in ``inductor/``.

Floating point: ``-O2 -fno-math-errno -fno-trapping-math``, loops vectorised by ``omp simd``; no
``-ffast-math`` (it would drop NaN and infinity semantics) and no FMA contraction (a fused
multiply-add rounds once where eager rounds twice, which cancellation, as in batch norm's
backward, turns into visible differences). What still changes last bits: the vector math
library's exp, tanh, erf, ... (glibc's libmvec, declared where it links; up to ~4 ulp from NumPy's
results) and the order of the operations inside composite ops (gelu, sigmoid).
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading

__all__ = ["available", "cache_dir", "start", "load", "prelude", "FLAGS"]

log = logging.getLogger("ndgrad.compiler.inductor")

FLAGS = ["-O2", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math",
         "-ffp-contract=off", "-fopenmp-simd"]
_LIBS = ["-lm"]
_lock = threading.Lock()
_state: dict = {}  # "cc", "ffi", "why" (once found), "vec" (libmvec links)
_loaded: dict = {}  # source hash -> (ffi, lib)


def _find() -> str | None:
    """Why the C tier is off (None: it is on); finds the compiler and cffi once."""
    if "why" in _state:
        return _state["why"]
    why = None
    if os.environ.get("NDGRAD_INDUCTOR_CPP", "1").lower() in ("0", "false", "off", "no"):
        why = "turned off by NDGRAD_INDUCTOR_CPP"
    else:
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") \
            or shutil.which("clang")
        try:
            import cffi
        except ImportError:
            cffi = None
        if cffi is None:
            why = "cffi is not installed (pip install cffi)"
        elif cc is None:
            why = "no C compiler found (set CC)"
        else:
            _state["cc"] = cc
            _state["ffi_mod"] = cffi
    _state["why"] = why
    if why is not None:
        log.info("inductor: fused C kernels off (%s); using NumPy code", why)
    return why


def available() -> bool:
    """Whether generated C can be compiled and loaded here."""
    return _find() is None


def cache_dir() -> str:
    root = os.environ.get("NDGRAD_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "ndgrad")
    return os.path.join(root, "inductor")


def _vector_math(cc: str) -> list:
    """``-lmvec`` where the C library has a vector math library (glibc on x86-64)."""
    if "vec" not in _state:
        flags: list = []
        if sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64"):
            with tempfile.TemporaryDirectory() as d:
                src = os.path.join(d, "t.c")
                with open(src, "w") as f:
                    f.write("int main(void){return 0;}\n")
                r = subprocess.run([cc, src, "-o", os.path.join(d, "t"), "-lmvec", "-lm"],
                                   capture_output=True)
                if r.returncode == 0:
                    flags = ["-lmvec"]
        _state["vec"] = flags
    return _state["vec"]


_VEC_FUNCS = ("exp", "exp2", "expm1", "log", "log1p", "sin", "cos", "tanh", "erf", "pow")


def prelude() -> str:
    """The head of every generated source: math.h, and where the vector math library links,
    declarations that let the compiler call its SIMD variants inside vectorised loops (glibc
    declares them itself only under -ffast-math)."""
    if _find() is not None:
        return "#include <math.h>\n"
    lines = ["#include <math.h>"]
    if _vector_math(_state["cc"]):
        for f in _VEC_FUNCS:
            args = "(float, float)" if f == "pow" else "(float)"
            dargs = "(double, double)" if f == "pow" else "(double)"
            lines.append(f'__attribute__((simd("notinbranch"))) float {f}f{args};')
            lines.append(f'__attribute__((simd("notinbranch"))) double {f}{dargs};')
    return "\n".join(lines) + "\n"


class Build:
    """A library being built: the compiler runs in the background from ``start`` until the first
    ``get`` (so a graph's forward and backward compile at once on two cores)."""

    __slots__ = ("key", "so", "cdef", "proc", "tmp", "result")

    def __init__(self, key, so, cdef, proc=None, tmp=()):
        self.key, self.so, self.cdef, self.proc, self.tmp = key, so, cdef, proc, tmp
        self.result = None

    def get(self):
        """``(ffi, lib)``; raises ``RuntimeError`` with the compiler's message on failure."""
        if self.result is not None:
            return self.result
        with _lock:
            hit = _loaded.get(self.key)
            if hit is None:
                if self.proc is not None:
                    _, err = self.proc.communicate()
                    tmp_c, tmp_so = self.tmp
                    try:
                        if self.proc.returncode != 0:
                            raise RuntimeError(f"inductor: C compile failed:\n{err[-4000:]}")
                        os.replace(tmp_so, self.so)  # atomic: other processes see all or nothing
                    finally:
                        self.proc = None
                        _pending.pop(self.key, None)
                        for p in (tmp_c, tmp_so):
                            if os.path.exists(p):
                                os.unlink(p)
                    counters["compiled"] += 1
                else:
                    counters["disk_hits"] += 1
                ffi = _state["ffi_mod"].FFI()
                ffi.cdef(self.cdef)
                hit = _loaded[self.key] = (ffi, ffi.dlopen(self.so))
            self.result = hit
            return hit


def start(source: str, cdef: str) -> Build:
    """Begin building ``source`` (declared to cffi by ``cdef``): nothing to do when it is loaded
    or in the disk cache, else the compiler starts in the background."""
    if _find() is not None:
        raise RuntimeError(f"C tier unavailable: {_state['why']}")
    cc = _state["cc"]
    key = hashlib.sha256("\0".join([source, cc, *FLAGS]).encode()).hexdigest()[:32]
    d = cache_dir()
    so = os.path.join(d, f"k{key}.so")
    if key in _loaded or os.path.exists(so):
        return Build(key, so, cdef)
    with _lock:
        pending = _pending.get(key)
        if pending is not None and pending.proc is not None:
            return pending
        os.makedirs(d, exist_ok=True)
        fd, tmp_c = tempfile.mkstemp(suffix=".c", dir=d)
        with os.fdopen(fd, "w") as f:
            f.write(source)
        tmp_so = tmp_c[:-2] + ".so"
        proc = subprocess.Popen([cc, *FLAGS, tmp_c, "-o", tmp_so, *_vector_math(cc), *_LIBS],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        b = _pending[key] = Build(key, so, cdef, proc, (tmp_c, tmp_so))
        return b


def null():
    """cffi's NULL pointer (an absent optional array)."""
    if "null" not in _state:
        _find()
        _state["null"] = _state["ffi_mod"].FFI().NULL
    return _state["null"]


def load(source: str, cdef: str):
    """``(ffi, lib)`` for ``source``, built now if it has to be."""
    return start(source, cdef).get()


_pending: dict = {}  # source hash -> Build still compiling
counters = {"compiled": 0, "disk_hits": 0}
