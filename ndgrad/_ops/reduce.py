"""Reductions: sum, mean, prod, max/min, var/std, norms, logsumexp, cumulative ops, softmax, ...

``dim`` arguments accept an int, a sequence or None (all dims); the backward formulas put the
reduced dims back with ``unsqueeze`` before expanding, whatever ``keepdim`` was.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .registry import defop
from .samples import nc, sample
from .shape import dims_arg


def reduced_dtype(x, dtype):
    """PyTorch's sum/prod dtype: integer and bool inputs accumulate in int64."""
    if dtype is not None:
        return D.to_dtype(dtype).np
    return np.dtype(np.int64) if x.dtype.kind in "biu" else x.dtype


def unreduce(grad, shape, dim, keepdim):
    """Broadcast a reduced gradient back to ``shape`` (the input's)."""
    if not keepdim and dim is not None and len(shape):
        for d in dims_arg(dim, len(shape)):
            grad = grad.unsqueeze(d)
    return grad.expand(shape)


def _sum(x, dim, keepdim, dtype):
    axis = dims_arg(dim, x.ndim) if x.ndim else None
    return np.sum(x, axis=axis, keepdims=keepdim, dtype=reduced_dtype(x, dtype))


defop("sum.dim_IntList(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
      _sum, {"self": lambda grad, self_shape, dim, keepdim: unreduce(grad, self_shape, dim, keepdim)},
      samples=lambda rng: [sample("all", rng.standard_normal((3, 4))),
                           sample("dim", rng.standard_normal((3, 4)), 1),
                           sample("dims_keep", rng.standard_normal((2, 3, 4)), (0, 2), True),
                           sample("neg_nc", nc(rng.standard_normal((3, 4))), -1),
                           sample("0d", rng.standard_normal(())),
                           sample("int", np.arange(6).reshape(2, 3), 0)])


def _mean(x, dim, keepdim, dtype):
    if dtype is None and x.dtype.kind not in "fc":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {D._FROM_NP[x.dtype].legacy[:-6]}"
        )
    axis = dims_arg(dim, x.ndim) if x.ndim else None
    out = np.mean(x, axis=axis, keepdims=keepdim, dtype=None if dtype is None else D.to_dtype(dtype).np)
    return np.asarray(out, dtype=x.dtype if dtype is None else D.to_dtype(dtype).np)


def _mean_grad(grad, self_shape, dim, keepdim):
    n = 1
    if dim is None or not len(self_shape):
        for s in self_shape:
            n *= s
    else:
        for d in dims_arg(dim, len(self_shape)):
            n *= self_shape[d]
    return unreduce(grad, self_shape, dim, keepdim) / n


defop("mean.dim(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
      _mean, {"self": _mean_grad},
      samples=lambda rng: [sample("all", rng.standard_normal((3, 4))),
                           sample("dim", rng.standard_normal((3, 4)), 0),
                           sample("dims_keep", rng.standard_normal((2, 3, 4)), (1, 2), True),
                           sample("0d", rng.standard_normal(()))])
