"""Dtypes and PyTorch's type promotion (Python scalars are weak, 0-d tensors weaker than n-d).

A ``dtype`` wraps one NumPy dtype. ``result_type`` follows PyTorch's three priority tiers
(dimensioned tensors, zero-dim tensors, wrapped Python numbers) and category order
bool < integer < floating < complex, which differ from NumPy's rules (NumPy promotes
int64 with float32 to float64; PyTorch gives float32).

``bfloat16`` is the NumPy dtype of the optional ``ml_dtypes`` package; without it ndgrad has no
``bfloat16`` (the name is None here and ``ndgrad.bfloat16`` raises, naming the package). Its
NumPy kind is 'V', not 'f': code asking "floating or complex?" tests membership in ``INEXACT``.
"""

from __future__ import annotations

import threading

import numpy as np

try:
    import ml_dtypes as _ml_dtypes
except ImportError:  # bfloat16 is optional: pip install ml_dtypes
    _ml_dtypes = None

__all__ = ["dtype", "get_default_dtype", "set_default_dtype", "promote_types", "result_type"]

BOOL, INT, FLOAT, COMPLEX = 0, 1, 2, 3


class dtype:
    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_complex", "is_signed", "kind", "legacy")

    def __init__(self, name: str, np_dtype, kind: int, legacy: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.kind = kind
        self.is_floating_point = kind == FLOAT
        self.is_complex = kind == COMPLEX
        self.is_signed = kind != BOOL and self.np.kind != "u"  # bfloat16's NumPy kind is 'V'
        self.legacy = legacy  # PyTorch's tensor type name, used in error messages

    def __repr__(self) -> str:
        return "ndgrad." + self.name

    def to_real(self) -> "dtype":
        return {complex64: float32, complex128: float64}.get(self, self)

    def to_complex(self) -> "dtype":
        return {float16: complex64, bfloat16: complex64, float32: complex64,
                float64: complex128}.get(self, self)

    def __reduce__(self):
        return (_by_name, (self.name,))


bool_ = dtype("bool", np.bool_, BOOL, "BoolTensor")
uint8 = dtype("uint8", np.uint8, INT, "ByteTensor")
int8 = dtype("int8", np.int8, INT, "CharTensor")
int16 = dtype("int16", np.int16, INT, "ShortTensor")
int32 = dtype("int32", np.int32, INT, "IntTensor")
int64 = dtype("int64", np.int64, INT, "LongTensor")
float16 = dtype("float16", np.float16, FLOAT, "HalfTensor")
float32 = dtype("float32", np.float32, FLOAT, "FloatTensor")
float64 = dtype("float64", np.float64, FLOAT, "DoubleTensor")
complex64 = dtype("complex64", np.complex64, COMPLEX, "ComplexFloatTensor")
complex128 = dtype("complex128", np.complex128, COMPLEX, "ComplexDoubleTensor")
bfloat16 = (dtype("bfloat16", _ml_dtypes.bfloat16, FLOAT, "BFloat16Tensor")
            if _ml_dtypes is not None else None)
BF16 = bfloat16.np if bfloat16 is not None else None  # its NumPy dtype, or None

ALL = (bool_, uint8, int8, int16, int32, int64, float16, float32, float64, complex64,
       complex128) + ((bfloat16,) if bfloat16 is not None else ())
_FROM_NP = {d.np: d for d in ALL}
# NumPy dtypes of floating and complex dtypes: what ``a.dtype.kind in "fc"`` means, bfloat16
# included (a frozenset test is also faster than the kind string's)
INEXACT = frozenset(d.np for d in ALL if d.kind >= FLOAT)
FLOATING = frozenset(d.np for d in ALL if d.kind == FLOAT)
BF16_MISSING = "bfloat16 needs the ml_dtypes package: pip install ml_dtypes"
# PyTorch's short type names in messages ('Float', 'Long', 'ComplexFloat'), by NumPy dtype
SHORT_NAMES = {d.np: d.legacy[: -len("Tensor")] for d in ALL}
_NAMES = {d.name: d for d in ALL}
_NAMES.update(
    bool=bool_, half=float16, float=float32, double=float64, short=int16, int=int32, long=int64,
    cfloat=complex64, cdouble=complex128,
)
ALIASES = {
    "half": float16, "float": float32, "double": float64, "short": int16, "int": int32,
    "long": int64, "cfloat": complex64, "cdouble": complex128,
}


def np_finfo(np_dtype):
    """NumPy's ``finfo`` of a floating NumPy dtype; ml_dtypes' own for bfloat16."""
    if BF16 is not None and np_dtype is BF16:
        return _ml_dtypes.finfo(np_dtype)
    return np.finfo(np_dtype)


def _by_name(name: str) -> dtype:
    if name == "bfloat16" and bfloat16 is None:
        raise ModuleNotFoundError(BF16_MISSING)
    return _NAMES[name]


def from_np(np_dtype) -> dtype:
    d = _FROM_NP.get(np_dtype)
    if d is None:
        d = _FROM_NP.get(np.dtype(np_dtype))
        if d is None:
            raise TypeError(f"can't convert np.ndarray of type {np_dtype}. The only supported types are: "
                            "float64, float32, float16, complex64, complex128, int64, int32, int16, int8, uint8, and bool.")
    return d


def to_dtype(d) -> dtype:
    """Accept an ndgrad dtype, a NumPy dtype or a Python type (``float``, ``int``, ``bool``)."""
    if type(d) is dtype:
        return d
    if d is float:
        return float64
    if d is int:
        return int64
    if d is bool:
        return bool_
    if d is complex:
        return complex128
    if isinstance(d, str):
        return _by_name(d)
    return from_np(np.dtype(d))


# --- default dtype (thread-shared, like PyTorch's) ---
_default = [float32]


def get_default_dtype() -> dtype:
    return _default[0]


def set_default_dtype(d) -> None:
    d = to_dtype(d)
    if d.kind != FLOAT:
        raise TypeError("only floating-point types are supported as the default type")
    _default[0] = d


def default_complex() -> dtype:
    return complex128 if _default[0] is float64 else complex64


# --- promotion ---
def promote_types(a: dtype, b: dtype) -> dtype:
    """Promotion of two dtypes of equal priority (``torch.promote_types``)."""
    if a is b:
        return a
    if a.kind == b.kind:
        if a.itemsize == b.itemsize and a.kind == FLOAT:  # bfloat16, float16: neither holds both
            return float32
        return from_np(np.promote_types(a.np, b.np))
    hi, lo = (a, b) if a.kind > b.kind else (b, a)
    if hi.kind == COMPLEX and lo.kind == FLOAT and lo.itemsize * 2 > hi.itemsize:
        return complex128 if lo is float64 else complex64
    return hi


def _scalar_dtype(x) -> dtype:
    t = type(x)
    if t is bool or t is np.bool_:
        return bool_
    if t is int or isinstance(x, np.integer):
        return int64
    if t is float or isinstance(x, np.floating) or BF16 is not None and t is BF16.type:
        return _default[0]
    if t is complex or isinstance(x, np.complexfloating):
        return default_complex()
    raise TypeError(f"unsupported scalar type {t.__name__}")


def _combine(higher: dtype | None, lower: dtype | None) -> dtype | None:
    # PyTorch's combine_categories: a lower tier only matters when its category is higher.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.kind == COMPLEX:
        return higher
    if lower.kind == COMPLEX:
        return higher.to_complex() if higher.kind == FLOAT else lower
    if higher.kind == FLOAT:
        return higher
    if higher is bool_ or lower.kind == FLOAT:
        return promote_types(higher, lower)
    return higher


def result_type(operands) -> dtype:
    """PyTorch's result type of tensors (objects with ``_data``) and Python numbers."""
    dim = zero = wrapped = None
    for x in operands:
        if x is None:
            continue
        a = getattr(x, "_data", None)
        if a is None:
            if isinstance(x, np.ndarray):
                a = x
            else:
                d = _scalar_dtype(x)
                wrapped = d if wrapped is None else promote_types(wrapped, d)
                continue
        d = _FROM_NP[a.dtype]
        if a.ndim:
            dim = d if dim is None else promote_types(dim, d)
        else:
            zero = d if zero is None else promote_types(zero, d)
    return _combine(dim, _combine(zero, wrapped))


def can_cast(frm: dtype, to: dtype) -> bool:
    """PyTorch's ``can_cast``: no demotion across categories (float -> int, complex -> float)."""
    if frm.kind > to.kind:
        return False
    return not (to is bool_ and frm is not bool_)
