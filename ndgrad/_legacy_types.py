"""PyTorch's legacy tensor types: ``FloatTensor(2, 3)`` (uninitialised), ``LongTensor([1, 2])``
(from data), ``isinstance(x, FloatTensor)``, ``x.type(LongTensor)`` and ``Tensor.new(...)``,
which old scripts still call. Each type is a dtype on the CPU; a constructor returns a plain
``Tensor``."""

from __future__ import annotations

import numbers

from . import _dtype as D
from ._factories import tensor
from ._ops.factory import empty
from ._tensor import Size, Tensor

__all__ = ["BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor", "HalfTensor",
           "IntTensor", "LongTensor", "ShortTensor"]


def _legacy_new(dtype, device, args):
    """What a legacy constructor (or ``Tensor.new``) makes of its positional arguments."""
    if not args:
        return empty(0, dtype=dtype, device=device)
    first = args[0]
    if len(args) == 1 and not isinstance(first, (numbers.Integral, Size, tuple)):
        if isinstance(first, str):
            raise TypeError("new(): invalid data type 'str'")
        if isinstance(first, Tensor):
            if first.dtype != dtype:
                raise TypeError(f"expected {dtype} (got {first.dtype})")
            return first  # PyTorch hands back the tensor itself
        return tensor(first, dtype=dtype, device=device)
    size = first if len(args) == 1 and isinstance(first, (Size, tuple)) else args
    return empty(*size, dtype=dtype, device=device)


class _LegacyType(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == "cpu"

    def __repr__(cls) -> str:
        return f"<class 'ndgrad.{cls.__name__}'>"


class _Legacy(metaclass=_LegacyType):
    dtype = None
    is_cuda = False
    is_sparse = False

    def __new__(cls, *args, device=None):
        return _legacy_new(cls.dtype, device, args)


def _make(name: str, dtype) -> type:
    return _LegacyType(name, (_Legacy,), {"dtype": dtype, "__module__": "ndgrad"})


FloatTensor = _make("FloatTensor", D.float32)
DoubleTensor = _make("DoubleTensor", D.float64)
HalfTensor = _make("HalfTensor", D.float16)
LongTensor = _make("LongTensor", D.int64)
IntTensor = _make("IntTensor", D.int32)
ShortTensor = _make("ShortTensor", D.int16)
CharTensor = _make("CharTensor", D.int8)
ByteTensor = _make("ByteTensor", D.uint8)
BoolTensor = _make("BoolTensor", D.bool_)
if D.bfloat16 is not None:  # ml_dtypes installed
    BFloat16Tensor = _make("BFloat16Tensor", D.bfloat16)
    __all__.append("BFloat16Tensor")


def _new(self, *args, device=None, dtype=None):
    """``x.new(...)``: a legacy constructor with ``x``'s dtype and device."""
    return _legacy_new(dtype or self.dtype, device or self.device, args)


Tensor.new = _new
