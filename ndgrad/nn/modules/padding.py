"""Padding modules: Zero/Constant/Reflection/Replication/CircularPad{1,2,3}d over ``F.pad``.

Each stores ``padding`` as PyTorch does: an int becomes a tuple of ``2 * n`` equal entries
(``(left, right, top, bottom, front, back)``), a tuple is kept as given.
"""

from __future__ import annotations

from .. import functional as F
from .module import Module

__all__ = [
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
]


def _padding(padding, n: int) -> tuple:
    if isinstance(padding, (tuple, list)):
        return tuple(padding)
    return (padding,) * (2 * n)


class _PadNd(Module):
    n = 1
    mode = "constant"

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _padding(padding, self.n)

    def forward(self, input):
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dim with ``value``.

    >>> ConstantPad1d(1, 2.0)(ndgrad.zeros(1, 2)).tolist()
    [[2.0, 0.0, 0.0, 2.0]]
    """

    n = 1


class ConstantPad2d(_ConstantPadNd):
    n = 2


class ConstantPad3d(_ConstantPadNd):
    n = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    n = 1


class ZeroPad2d(_ZeroPadNd):
    n = 2


class ZeroPad3d(_ZeroPadNd):
    n = 3


class ReflectionPad1d(_PadNd):
    n, mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    n, mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    n, mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    n, mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    n, mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    n, mode = 3, "replicate"


class _CircularPadNd(_PadNd):
    mode = "circular"

    def forward(self, input):
        if input.dim() not in (self.n + 1, self.n + 2):
            raise ValueError(f"expected {self.n + 1}D or {self.n + 2}D input (got {input.dim()}D input)")
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    n = 1


class CircularPad2d(_CircularPadNd):
    n = 2


class CircularPad3d(_CircularPadNd):
    n = 3
