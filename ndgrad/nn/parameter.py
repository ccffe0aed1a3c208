"""``Parameter`` (a Tensor subclass that modules register as a parameter) and ``Buffer``.

A Parameter shares its array and version counter with the tensor it was made from, as PyTorch's
``_make_subclass`` does. Ops on a Parameter return plain Tensors (the reference dispatch path
builds its outputs with ``Tensor._make``).
"""

from __future__ import annotations

import weakref

from .._dtype import INEXACT
from .._ops import fastpath as _fastpath
from .._tensor import Tensor, check_may_require_grad

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "is_lazy"]


class Parameter(Tensor):
    """A Tensor that is a module parameter: ``requires_grad=True`` unless told otherwise.

    >>> Parameter(ndgrad.ones(2)).requires_grad
    True
    """

    def __new__(cls, data=None, requires_grad: bool = True):
        if data is None:
            from .._ops.factory import empty

            data = empty(0)
        t = object.__new__(cls)
        vc = data._vc
        if vc is None:
            vc = data._vc = [0]
        t._data = data._data
        t._rg = False
        t._grad_fn = None
        t._output_nr = 0
        t._vc = vc
        t._view = None
        t._meta = None
        if requires_grad:
            if t._data.dtype not in INEXACT:
                raise RuntimeError(
                    "Only Tensors of floating point and complex dtype can require gradients"
                )
            check_may_require_grad(t)
            t._rg = True
        return t

    def __init__(self, data=None, requires_grad: bool = True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(Tensor._make(self._data.copy(), None, 0, None), self._rg)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, proto):
        return (_rebuild_parameter, (self._data, self._rg))


# --- lazy modules: parameters whose shape the first forward's input decides ---
class UninitializedParameter(Parameter):
    """A parameter with no shape yet; ``materialize(shape)`` gives it storage and makes it a
    ``Parameter``.

    >>> from ndgrad.nn.parameter import UninitializedParameter
    >>> p = UninitializedParameter(); p.materialize((2, 3)); type(p).__name__, tuple(p.shape)
    ('Parameter', (2, 3))
    """

    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        from .._ops.factory import empty

        return super().__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None) -> None:
        pass

    def materialize(self, shape, device=None, dtype=None) -> None:
        from .._ops.factory import empty

        data = empty(tuple(shape), device=device or self.device, dtype=dtype or self.dtype)
        self._data = data._data
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    __str__ = __repr__


def is_lazy(param) -> bool:
    return isinstance(param, UninitializedParameter)


def _rebuild_parameter(data, requires_grad):
    return Parameter(Tensor._make(data, None, 0, None), requires_grad)


# Tensors made by ``Buffer(...)``: id -> (weakref, persistent). NOTE(pytorch): Buffer(...) returns
# a plain Tensor marked as a buffer, so a module assignment registers it; ndgrad tensors have
# slots, so the mark lives here instead of on the tensor.
_BUFFER_MARKS: dict[int, tuple] = {}


class _BufferMeta(type):
    def __instancecheck__(cls, instance) -> bool:
        if type(instance) is cls:
            return True
        mark = _BUFFER_MARKS.get(id(instance))
        return mark is not None and mark[0]() is instance


class Buffer(metaclass=_BufferMeta):
    """Marks a tensor as a buffer: assigning it to a module attribute registers it.

    >>> m = ndgrad.nn.Module(); m.b = Buffer(ndgrad.zeros(1)); list(m.state_dict())
    ['b']
    """

    def __new__(cls, data=None, *, persistent: bool = True):
        if data is None:
            from .._ops.factory import empty

            data = empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        key = id(t)
        _BUFFER_MARKS[key] = (weakref.ref(t, lambda _, k=key: _BUFFER_MARKS.pop(k, None)), persistent)
        return t


def _buffer_persistent(t) -> bool | None:
    """``persistent`` of a tensor made by ``Buffer``; None for any other tensor."""
    mark = _BUFFER_MARKS.get(id(t))
    if mark is None or mark[0]() is not t:
        return None
    return mark[1]


# A Parameter carries no state the ops read, so the generated fast paths may take it as a Tensor.
_fastpath.allow_subclass(Parameter)
