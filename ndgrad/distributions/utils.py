"""Helpers shared by the distributions: broadcasting parameters, probs <-> logits, lazy
properties."""

from __future__ import annotations

from numbers import Number

import numpy as np

from .. import _dtype as D
from .. import _factories
from .._dtype import get_default_dtype
from .._tensor import Size, Tensor
from ..nn import functional as F

__all__ = [
    "broadcast_all",
    "broadcast_shapes",
    "clamp_probs",
    "lazy_property",
    "logits_to_probs",
    "probs_to_logits",
]

_EMPTY = Size()  # the default sample_shape / batch_shape (torch.Size())


def _shape_of(t: Tensor) -> tuple:
    return tuple(t.shape)


def broadcast_all(*values):
    """Numbers become tensors (of the first tensor's dtype, else the default one), then all are
    expanded to their broadcast shape."""
    if not all(isinstance(v, (Tensor, Number)) for v in values):
        raise ValueError(
            "Input arguments must all be instances of numbers.Number, torch.Tensor "
            "or objects implementing __torch_function__."
        )
    like = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = like.dtype if like is not None else get_default_dtype()
    device = like.device if like is not None else None
    tensors = [
        v if isinstance(v, Tensor) else _factories.tensor(v, dtype=dtype, device=device)
        for v in values
    ]
    shape = np.broadcast_shapes(*(_shape_of(t) for t in tensors))
    return tuple(t if _shape_of(t) == shape else t.expand(shape) for t in tensors)


def broadcast_shapes(*shapes) -> Size:
    return Size(np.broadcast_shapes(*(tuple(s) for s in shapes)))


def _eps(dtype) -> float:
    return float(D.np_finfo(dtype.np).eps)


def _finfo_min(dtype) -> float:
    return float(D.np_finfo(dtype.np).min)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    return logits.sigmoid() if is_binary else F.softmax(logits, dim=-1)


def clamp_probs(probs: Tensor) -> Tensor:
    eps = _eps(probs.dtype)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    ps = clamp_probs(probs)
    return ps.log() - (-ps).log1p() if is_binary else ps.log()


class lazy_property:
    """Computed on first access, then stored on the instance (torch's ``lazy_property``)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value
