"""Linear algebra: matmul (batched, broadcasting, 1-D cases), mm, bmm, addmm, dot, outer,
einsum and the ``linalg`` namespace (inv, det, slogdet, solve, cholesky, qr, svdvals, ...).

Batch dimensions broadcast in the forward; the engine sums gradients back to each input's shape.
"""

from __future__ import annotations

import numpy as np

from .registry import PROMOTE_COMMON as COMMON
from .registry import defop
from .samples import nc, sample


def _matmul(x, y):
    if x.ndim == 0 or y.ndim == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {x.ndim}D and {y.ndim}D"
        )
    try:
        return np.matmul(x, y)
    except ValueError:
        a = (1, x.shape[0]) if x.ndim == 1 else x.shape[-2:]
        b = (y.shape[0], 1) if y.ndim == 1 else y.shape[-2:]
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a[0]}x{a[1]} and {b[0]}x{b[1]})"
        ) from None


def _matmul_self(grad, self, other):
    if other.dim() == 1:
        if self.dim() == 1:
            return grad * other
        return grad.unsqueeze(-1) * other
    if self.dim() == 1:
        return (grad.unsqueeze(-2) @ other.mT).squeeze(-2)
    return grad @ other.mT


def _matmul_other(grad, self, other):
    if self.dim() == 1:
        if other.dim() == 1:
            return grad * self
        return self.unsqueeze(-1) * grad.unsqueeze(-2)
    if other.dim() == 1:
        return (self.mT @ grad.unsqueeze(-1)).squeeze(-1)
    return self.mT @ grad


defop("matmul(Tensor self, Tensor other) -> Tensor", _matmul,
      {"self": _matmul_self, "other": _matmul_other}, promote=COMMON,
      samples=lambda rng: [
          sample("mm", rng.standard_normal((3, 4)), rng.standard_normal((4, 2))),
          sample("vv", rng.standard_normal((4,)), rng.standard_normal((4,))),
          sample("mv", rng.standard_normal((3, 4)), rng.standard_normal((4,))),
          sample("vm", rng.standard_normal((4,)), rng.standard_normal((4, 2))),
          sample("batched", rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 2))),
          sample("bcast", rng.standard_normal((2, 1, 3, 4)), rng.standard_normal((3, 4, 2))),
          sample("bv", rng.standard_normal((2, 3, 4)), rng.standard_normal((4,))),
          sample("vb", rng.standard_normal((3,)), rng.standard_normal((2, 3, 4))),
          sample("nc", nc(rng.standard_normal((3, 4))), rng.standard_normal((2, 4)).T)])


def _mm(x, y):
    if x.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if y.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return _matmul(x, y)


defop("mm(Tensor self, Tensor mat2) -> Tensor", _mm,
      {"self": lambda grad, mat2: grad @ mat2.mT, "mat2": lambda grad, self: self.mT @ grad},
      promote=COMMON,
      samples=lambda rng: [sample("2d", rng.standard_normal((3, 4)), rng.standard_normal((4, 5))),
                           sample("nc", rng.standard_normal((4, 3)).T, nc(rng.standard_normal((4, 2))))])
