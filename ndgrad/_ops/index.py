"""Indexing ops: advanced indexing, index_put_, gather/scatter, index_select/add, masks.

Index tensors are never differentiable; they reach the forward as arrays inside the ``key``
argument. Basic indexing (ints, slices, None, Ellipsis) is the view op ``_index_basic`` in
``shape.py``; ``Tensor.__getitem__`` (in ``composite.py``) picks one or the other.
"""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from .registry import defop
from .samples import sample


def key_arrays(key):
    """An indexing key with tensors replaced by their arrays (checked as PyTorch checks them)."""
    if isinstance(key, tuple):
        return tuple(key_arrays(k) for k in key)
    if isinstance(key, Tensor):
        a = key._data
        if a.dtype.kind not in "biu":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return a
    if isinstance(key, list):
        return np.asarray(key)
    return key


def _index_backward(grad, shape, key):
    out = np.zeros(shape, grad.dtype)
    np.add.at(out, key, grad)  # repeated indices accumulate
    return out


index_backward = defop("_index_backward(Tensor grad, int[] shape, Any key) -> Tensor", _index_backward,
                       {"grad": lambda grad, key: index_adv(grad, key)}, method=False, api=False).call


def _index(x, key):
    try:
        return x[key]
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None


index_adv = defop("_index(Tensor self, Any key) -> Tensor", _index,
                  {"self": lambda grad, self_shape, key: index_backward(grad, self_shape, key)},
                  method=False, api=False,
                  samples=lambda rng: [
                      sample("int_array", rng.standard_normal((5, 3)), (np.array([0, 2, 2, 4]),)),
                      sample("bool_mask", rng.standard_normal((3, 4)), (rng.standard_normal((3, 4)) > 0,)),
                      sample("mixed", rng.standard_normal((3, 4, 2)), (slice(None), np.array([[0, 1], [3, 3]]))),
                      sample("two_arrays", rng.standard_normal((3, 4)), (np.array([0, 2]), np.array([1, 3])))]).call


def _index_put(x, key, values, accumulate):
    out = x.copy()
    if accumulate:
        np.add.at(out, key, values)
    else:
        out[key] = values
    return out


def _index_put_self_grad(grad, key, accumulate):
    return grad if accumulate else index_put(grad, key, 0.0)


index_put = defop(
    "_index_put(Tensor self, Any key, Tensor values, bool accumulate=False) -> Tensor", _index_put,
    {"self": _index_put_self_grad, "values": lambda grad, key: index_adv(grad, key)},
    promote=1, promote_args=("self",), method=False, api=False, inplace="_index_put_",
    samples=lambda rng: [
        sample("put", rng.standard_normal((5, 3)), (np.array([0, 3]),), rng.standard_normal((2, 3))),
        sample("accumulate", rng.standard_normal((5,)), (np.array([1, 1, 2]),), rng.standard_normal((3,)), True),
        sample("bcast_value", rng.standard_normal((4, 3)), (np.array([2]),), rng.standard_normal((3,)))]).call


def index_put_(self, indices, values, accumulate=False):
    """``Tensor.index_put_(indices, values, accumulate=False)``; ``indices`` is a tuple of tensors."""
    return Tensor._index_put_(self, key_arrays(tuple(indices)), values, accumulate)


def index_put_fn(self, indices, values, accumulate=False):
    return index_put(self, key_arrays(tuple(indices)), values, accumulate)


Tensor.index_put_ = index_put_
Tensor.index_put = index_put_fn
