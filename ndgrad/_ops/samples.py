"""Sample inputs for the op-info table: small, deterministic, named.

A sample function takes a NumPy ``Generator`` and returns a list of ``Sample``. Float arrays
become float64 tensors that require grad in the generic tests (unless listed in ``no_grad``);
integer and bool arrays become plain tensors; anything else is passed as is.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Sample", "unary", "binary", "nc", "sample"]


class Sample:
    __slots__ = ("name", "args", "kwargs", "no_grad")

    def __init__(self, name: str, args: tuple, kwargs: dict | None = None, no_grad: tuple = ()):
        self.name = name
        self.args = args
        self.kwargs = kwargs or {}
        self.no_grad = no_grad  # positions of float arrays that must not require grad

    def __repr__(self) -> str:
        return f"Sample({self.name})"


def sample(name, *args, no_grad=(), **kwargs) -> Sample:
    return Sample(name, args, kwargs, no_grad)


def nc(a: np.ndarray) -> np.ndarray:
    """The same values as ``a`` in a non-contiguous (strided) array."""
    if a.ndim == 0:
        return a
    big = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), a.dtype)
    big[..., ::2] = a
    return big[..., ::2]


def _uniform(rng, shape, domain):
    lo, hi = domain
    return rng.uniform(lo, hi, size=shape)


def unary(domain=(-2.0, 2.0), avoid=None, **kwargs):
    """Samples for a one-tensor op: 0-d, 1-d, 2-d, non-contiguous and transposed inputs.

    ``avoid``: points where the op is not differentiable; values within 0.1 are pushed away.
    ``kwargs`` are passed to the op in every sample."""

    def make(rng):
        out = []
        for name, shape in (("0d", ()), ("1d", (5,)), ("2d", (3, 4)), ("nc", (3, 4)), ("T", (4, 3))):
            a = _uniform(rng, shape, domain)
            if avoid is not None:
                for p in np.atleast_1d(avoid):
                    near = np.abs(a - p) < 0.1
                    a = np.where(near, a + 0.2 * np.sign(a - p + 1e-12), a)
            if name == "nc":
                a = nc(a)
            elif name == "T":
                a = a.T
            out.append(Sample(name, (a,), dict(kwargs)))
        return out

    return make


def binary(domain=(-2.0, 2.0), rhs_domain=None, scalar_rhs=1.5, broadcast=True, avoid_equal=False,
           **kwargs):
    """Samples for a two-tensor op: same shape, broadcasting, 0-d, Python scalar operand."""
    rhs_domain = rhs_domain or domain

    def make(rng):
        shapes = [("same", (3, 4), (3, 4)), ("nc", (3, 4), (3, 4))]
        if broadcast:
            shapes += [("bcast_rhs", (3, 4), (4,)), ("bcast_both", (3, 1), (1, 4)), ("0d_lhs", (), (3,))]
        out = []
        for name, sa, sb in shapes:
            a = _uniform(rng, sa, domain)
            b = _uniform(rng, sb, rhs_domain)
            if avoid_equal:
                b = np.where(np.abs(a - b) < 0.1, b + 0.3, b) if a.shape == b.shape else b
            if name == "nc":
                a, b = nc(a), nc(b)
            out.append(Sample(name, (a, b), dict(kwargs)))
        if scalar_rhs is not None:
            out.append(Sample("scalar_rhs", (_uniform(rng, (3, 4), domain), scalar_rhs), dict(kwargs)))
        return out

    return make
