"""Shape ops and views: view, expand, squeeze, unsqueeze, transpose, permute, basic indexing, ...

A view op's schema says ``Tensor(a) self -> Tensor(a)``: its forward must return a NumPy view
(no copy), and the dispatcher links the output to the base for version counting and CopySlices.
Ops that may copy (``reshape``, ``flatten``) are composites choosing a view when one exists.
"""

from __future__ import annotations

import numpy as np

from .._tensor import _wrap_dim
from .registry import defop
from .samples import nc, sample


def size_arg(size) -> tuple:
    """``x.view(2, 3)`` and ``x.view((2, 3))`` alike: a tuple of ints."""
    if len(size) == 1 and not isinstance(size[0], (int, np.integer)):
        size = size[0]
    return tuple(int(s) for s in size)


def infer_size(shape, numel: int) -> tuple:
    shape = tuple(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {s}")
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = shape[: neg[0]] + (numel // known,) + shape[neg[0] + 1:]
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def dims_arg(dim, ndim: int):
    """Normalise a dim argument (int, sequence or None) into a sorted tuple of positive dims."""
    if dim is None:
        return None
    if isinstance(dim, (int, np.integer)):
        return (_wrap_dim(int(dim), ndim),)
    out = tuple(sorted(_wrap_dim(int(d), ndim) for d in dim))
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {out[0]} appears multiple times in the list of dims")
    return out if out else None


# --- view / expand ---
def _view(x, size):
    shape = infer_size(size, x.size)
    try:
        return np.reshape(x, shape, copy=False)
    except ValueError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension "
            "spans across two contiguous subspaces). Use .reshape(...) instead."
        ) from None


_view_rec = defop("view(Tensor(a) self, int[] size) -> Tensor(a)", _view,
                  {"self": lambda grad, self_shape: grad.reshape(self_shape)},
                  method=False, api=False,
                  samples=lambda rng: [sample("flat", rng.standard_normal((3, 4)), (12,)),
                                       sample("infer", rng.standard_normal((2, 6)), (3, -1)),
                                       sample("0d", rng.standard_normal(()), (1, 1)),
                                       sample("T_split", rng.standard_normal((4, 3)).T, (3, 2, 2))])


def view(self, *size):
    """``Tensor.view(*shape)``: the same data with another shape, never a copy."""
    if len(size) == 1 and not isinstance(size[0], (int, np.integer, tuple, list)):
        return self.to(size[0]) if size[0] is not None else self  # view(dtype) unsupported: cast
    return _view_rec.call(self, size_arg(size))


from .._tensor import Tensor as _Tensor  # noqa: E402

_Tensor.view = view


def _expand(x, size, implicit):
    size = tuple(size)
    if len(size) < x.ndim:
        raise RuntimeError(
            f"expand(ndgrad.{_legacy(x)}{{{list(x.shape)}}}, size={list(size)}): the number of sizes provided "
            f"({len(size)}) must be greater or equal to the number of dimensions in the tensor ({x.ndim})"
        )
    lead = len(size) - x.ndim
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(size))
    for i in range(x.ndim):
        if x.shape[i] != 1 and x.shape[i] != shape[lead + i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[lead + i]}) must match the existing size "
                f"({x.shape[i]}) at non-singleton dimension {lead + i}.  Target sizes: {list(size)}.  "
                f"Tensor sizes: {list(x.shape)}"
            )
    return np.broadcast_to(x, shape)


def _legacy(x):
    from .. import _dtype as D

    return D._FROM_NP[x.dtype].legacy


_expand_rec = defop("expand(Tensor(a) self, int[] size, *, bool implicit=False) -> Tensor(a)", _expand,
                    {"self": lambda grad, self_shape: grad.sum_to_size(self_shape)},
                    method=False, api=False,
                    samples=lambda rng: [sample("rows", rng.standard_normal((1, 4)), (3, 4)),
                                         sample("new_dim", rng.standard_normal((3,)), (2, 3)),
                                         sample("keep", rng.standard_normal((3, 1)), (-1, 5)),
                                         sample("0d", rng.standard_normal(()), (2, 2))])


def expand(self, *size):
    return _expand_rec.call(self, size_arg(size))


def expand_as(self, other):
    return _expand_rec.call(self, tuple(other.shape))


_Tensor.expand = expand
_Tensor.expand_as = expand_as


# --- dims ---
def _squeeze(x, dim):
    if dim is None:
        return np.squeeze(x)
    dims = dims_arg(dim, x.ndim) or ()
    dims = tuple(d for d in dims if x.ndim and x.shape[d] == 1)
    return np.squeeze(x, axis=dims) if dims else x.view()


defop("squeeze(Tensor(a) self, int[]? dim=None) -> Tensor(a)", _squeeze,
      {"self": lambda grad, self_shape: grad.reshape(self_shape)},
      samples=lambda rng: [sample("all", rng.standard_normal((1, 3, 1))),
                           sample("dim", rng.standard_normal((1, 3, 1)), 2),
                           sample("dims", rng.standard_normal((1, 3, 1)), (0, 1)),
                           sample("noop", rng.standard_normal((2, 3)), 0)])


def _unsqueeze(x, dim):
    return np.expand_dims(x, _wrap_dim(dim, x.ndim + 1))


defop("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", _unsqueeze,
      {"self": lambda grad, dim: grad.squeeze(dim)},
      samples=lambda rng: [sample("front", rng.standard_normal((3, 4)), 0),
                           sample("neg", rng.standard_normal((3, 4)), -1),
                           sample("0d", rng.standard_normal(()), 0)])


def _transpose(x, dim0, dim1):
    if x.ndim == 0:
        return x.view()
    return np.swapaxes(x, _wrap_dim(dim0, x.ndim), _wrap_dim(dim1, x.ndim))


defop("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", _transpose,
      {"self": lambda grad, dim0, dim1: grad.transpose(dim0, dim1)},
      samples=lambda rng: [sample("2d", rng.standard_normal((3, 4)), 0, 1),
                           sample("3d_neg", rng.standard_normal((2, 3, 4)), -1, 0),
                           sample("nc", nc(rng.standard_normal((3, 4))), 1, 0)])


def _permute(x, dims):
    dims = tuple(_wrap_dim(d, x.ndim) for d in dims)
    if len(dims) != x.ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
            f"of the desired ordering of dimensions i.e. input.dim() = {x.ndim} is not equal to "
            f"len(dims) = {len(dims)}"
        )
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return np.transpose(x, dims)


def _inverse_perm(dims):
    n = len(dims)
    inv = [0] * n
    for i, d in enumerate(dims):
        inv[d % n] = i
    return tuple(inv)


_permute_rec = defop("permute(Tensor(a) self, int[] dims) -> Tensor(a)", _permute,
                     {"self": lambda grad, dims: grad.permute(_inverse_perm(dims))},
                     method=False,
                     samples=lambda rng: [sample("3d", rng.standard_normal((2, 3, 4)), (2, 0, 1)),
                                          sample("neg", rng.standard_normal((2, 3, 4)), (-1, -2, -3))])


def permute(self, *dims):
    return _permute_rec.call(self, size_arg(dims))


_Tensor.permute = permute


def _t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x.T


defop("t(Tensor(a) self) -> Tensor(a)", _t, {"self": lambda grad: grad.t()},
      samples=lambda rng: [sample("2d", rng.standard_normal((3, 4))), sample("1d", rng.standard_normal((3,)))])


# --- basic indexing (ints, slices, None, Ellipsis): a view ---
def _index_basic(x, key):
    return x[key]


def _slice_backward(grad, shape, key):
    out = np.zeros(shape, grad.dtype)
    out[key] = grad
    return out


slice_backward = defop("_slice_backward(Tensor grad, int[] shape, Any key) -> Tensor", _slice_backward,
                       {"grad": lambda grad, key: grad[key]}, method=False, api=False).call

index_basic = defop("_index_basic(Tensor(a) self, Any key) -> Tensor(a)", _index_basic,
                    {"self": lambda grad, self_shape, key: slice_backward(grad, self_shape, key)},
                    method=False, api=False,
                    samples=lambda rng: [sample("int", rng.standard_normal((3, 4)), 1),
                                         sample("slice_step", rng.standard_normal((6, 4)), (slice(1, None, 2), slice(None, 3))),
                                         sample("none_ellipsis", rng.standard_normal((2, 3, 4)), (Ellipsis, None, 1)),
                                         sample("neg", rng.standard_normal((5,)), slice(-3, None))]).call
