"""Process-wide settings and introspection that scripts call at the top: ``finfo``/``iinfo``,
thread counts, deterministic algorithms, float32 matmul precision, ``typename``, ``is_storage``.

ndgrad computes with NumPy, so the settings are recorded and read back as PyTorch's are but do not
change how ops run (NumPy's BLAS keeps its own thread pool). Ops and tensors live elsewhere.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from . import _dtype as D
from ._tensor import Tensor

__all__ = [
    "are_deterministic_algorithms_enabled",
    "finfo",
    "get_deterministic_debug_mode",
    "get_float32_matmul_precision",
    "get_num_interop_threads",
    "get_num_threads",
    "iinfo",
    "is_complex",
    "is_deterministic_algorithms_warn_only_enabled",
    "is_nonzero",
    "is_storage",
    "set_deterministic_debug_mode",
    "set_float32_matmul_precision",
    "set_num_interop_threads",
    "set_num_threads",
    "typename",
    "use_deterministic_algorithms",
]


# --- numeric limits ---
def _limits(dt, fn: str):
    return np.finfo(dt.np) if fn == "finfo" else np.iinfo(dt.np)


class finfo:
    """Machine limits of a floating point dtype (of the real part for a complex one)."""

    def __init__(self, type=None):
        if type is None:
            type = D.get_default_dtype()
        if not isinstance(type, D.dtype):
            raise TypeError(f"finfo(): argument 'type' (position 1) must be torch.dtype, "
                            f"not {builtins_type(type).__name__}")
        if not (type.is_floating_point or type.is_complex):
            raise TypeError("torch.finfo() requires a floating point input type. "
                            "Use torch.iinfo to handle 'torch.finfo'")
        real = type.to_real()
        info = _float_info(real)
        self.bits = real.itemsize * 8
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))  # decimal digits kept
        self.dtype = real.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")

    __str__ = __repr__
    __hash__ = None  # NOTE(pytorch): torch.finfo is unhashable too


def _float_info(dt):
    if dt is D.bfloat16:  # NumPy's finfo does not know ml_dtypes' bfloat16
        import ml_dtypes

        return ml_dtypes.finfo(dt.np)
    return np.finfo(dt.np)


builtins_type = type


class iinfo:
    """Machine limits of an integer dtype."""

    def __init__(self, type):
        if not isinstance(type, D.dtype):
            raise TypeError(f"iinfo(): argument 'type' (position 1) must be torch.dtype, "
                            f"not {builtins_type(type).__name__}")
        if type is D.bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if type.is_floating_point or type.is_complex:
            raise TypeError("torch.iinfo() requires an integer input type. "
                            "Use torch.finfo to handle 'torch.iinfo'")
        info = np.iinfo(type.np)
        self.bits = info.bits
        self.max = int(info.max)
        self.min = int(info.min)
        self.dtype = type.name

    def __repr__(self) -> str:
        return f"iinfo(min={float(self.min):g}, max={float(self.max):g}, dtype={self.dtype})"

    __str__ = __repr__
    __hash__ = None


# --- threads: recorded only; NumPy's BLAS keeps its own pool ---
_threads = {"intra": None, "inter": None}


def _default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _positive(n, fn: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise RuntimeError(f"{fn} expects an int, but got {builtins_type(n).__name__}")  # noqa: TRY004
    if n <= 0:
        raise RuntimeError(f"{fn} expects a positive integer")
    return int(n)


def set_num_threads(int) -> None:
    """Sets the number of threads used for intraop parallelism on CPU (recorded)."""
    _threads["intra"] = _positive(int, "set_num_threads")


def get_num_threads() -> int:
    return _threads["intra"] or _default_threads()


def set_num_interop_threads(int) -> None:
    """Sets the number of threads used for interop parallelism on CPU (recorded)."""
    _threads["inter"] = _positive(int, "set_num_interop_threads")


def get_num_interop_threads() -> int:
    return _threads["inter"] or _default_threads()


# --- deterministic algorithms: NumPy's kernels are deterministic already ---
_deterministic = {"mode": False, "warn_only": False}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    if not isinstance(mode, bool):
        raise TypeError("_set_deterministic_algorithms(): argument 'mode' (position 1) must be "
                        f"bool, not {builtins_type(mode).__name__}")
    _deterministic["mode"] = mode
    _deterministic["warn_only"] = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _deterministic["warn_only"]


_DEBUG_MODES = ("default", "warn", "error")


def set_deterministic_debug_mode(debug_mode) -> None:
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, "
                               f"`error`, but got {debug_mode}")
        debug_mode = _DEBUG_MODES.index(debug_mode)
    elif isinstance(debug_mode, int):
        if debug_mode not in (0, 1, 2):
            raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    else:
        raise TypeError(f"debug_mode must be str or int, but got {builtins_type(debug_mode)}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    if not _deterministic["mode"]:
        return 0
    return 1 if _deterministic["warn_only"] else 2


# --- float32 matmul precision (TF32 has no meaning on NumPy: recorded only) ---
_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision: str) -> None:
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got "  # noqa: TRY004
                           f"{builtins_type(precision).__name__}")
    if precision not in ("highest", "high", "medium"):
        # NOTE(pytorch): an unknown value warns and leaves the setting alone
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    _matmul_precision[0] = precision


def get_float32_matmul_precision() -> str:
    return _matmul_precision[0]


# --- introspection ---
def typename(obj) -> str:
    """The legacy type name of a tensor (``torch.FloatTensor``), else the object's qualified name."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if name is None:  # an instance: its class's name
        module = builtins_type(obj).__module__ or ""
        name = builtins_type(obj).__qualname__
    if module in ("", "builtins", "__builtin__"):
        return name
    return f"{module}.{name}"


def is_storage(obj) -> bool:
    """ndgrad tensors own NumPy arrays and expose no storage objects, so nothing is one."""
    return False


def is_complex(input) -> bool:
    if not isinstance(input, Tensor):
        raise TypeError(f"is_complex(): argument 'input' (position 1) must be Tensor, "
                        f"not {builtins_type(input).__name__}")
    return input.is_complex()


def is_nonzero(input) -> bool:
    if not isinstance(input, Tensor):
        raise TypeError(f"is_nonzero(): argument 'input' (position 1) must be Tensor, "
                        f"not {builtins_type(input).__name__}")
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


Tensor.is_nonzero = is_nonzero
