"""``make_tensor``: a tensor of random values in ``[low, high)`` for tests (torch.testing's)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import _dtype as D
from .._ops.factory import rand, randint
from .._tensor import Tensor

__all__ = ["make_tensor"]

_FLOATING = (D.float16, D.float32, D.float64) + ((D.bfloat16,) if D.bfloat16 is not None else ())
_COMPLEX = (D.complex64, D.complex128)


def _bounds(low, high, lowest, highest, default_low, default_high, allow_equal):
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    # NOTE(pytorch): low == high still gives a constant floating tensor (deprecated there)
    if low > high or (low == high and not allow_equal):
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    return max(low, lowest), min(high, highest)


def make_tensor(
    *shape,
    dtype,
    device,
    low=None,
    high=None,
    requires_grad=False,
    noncontiguous=False,
    exclude_zero=False,
    memory_format=None,
) -> Tensor:
    """A tensor of ``shape`` filled with values drawn uniformly from ``[low, high)`` (default
    ``[-9, 9)``, clamped to the dtype's range); booleans are drawn from ``{False, True}``.

    >>> import ndgrad
    >>> t = ndgrad.testing.make_tensor((2, 3), dtype=ndgrad.float32, device="cpu")
    >>> t.shape, bool((t.abs() <= 9).all())
    (ndgrad.Size([2, 3]), True)
    """
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if noncontiguous and shape and shape[-1] > 1:
        draw_shape = shape[:-1] + (2 * shape[-1],)
    else:
        draw_shape = shape
    if dtype is D.bool_:
        result = randint(0, 2, draw_shape, device=device).bool()
    elif dtype in _FLOATING or dtype in _COMPLEX:
        real = dtype.to_real()
        info = D.np_finfo(real.np)
        lo, hi = _bounds(low, high, float(info.min), float(info.max), -9, 9, True)

        def uniform():
            return rand(draw_shape, dtype=D.float64, device=device).mul(hi - lo).add(lo).to(real)

        result = uniform()
        if dtype in _COMPLEX:
            result = result.to(dtype) + uniform().to(dtype) * 1j
            result = result.to(dtype)
    else:
        info = np.iinfo(dtype.np)
        lo, hi = _bounds(low, high, int(info.min), int(info.max) + 1, -9, 10, False)
        lo, hi = math.ceil(lo), math.ceil(hi)
        result = randint(lo, hi, draw_shape, dtype=dtype, device=device)
    if exclude_zero:
        if dtype in _FLOATING or dtype in _COMPLEX:
            tiny = float(D.np_finfo(dtype.to_real().np).tiny)
            result = result.masked_fill(result == 0, tiny)
        elif dtype is not D.bool_:
            result = result.masked_fill(result == 0, 1)
    if draw_shape != shape:
        result = result[..., ::2]
    if requires_grad:
        result.requires_grad_(True)
    return result
