"""PyTorch-style ``repr`` of tensors: ``tensor([2.], grad_fn=<MulBackward0>)``."""

from __future__ import annotations

import numpy as np

from . import _dtype as D

_PRECISION = 4


def _format_floats(a: np.ndarray):
    finite = a[np.isfinite(a)]
    if finite.size and np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e8:
        return lambda v: _special(v) or f"{v:.0f}."
    amax = np.abs(finite).max() if finite.size else 0.0
    amin = np.abs(finite[finite != 0]).min() if np.any(finite != 0) else 0.0
    if amax >= 1e8 or (amin and amin < 1e-4) or (amin and amax / amin > 1000.0):
        return lambda v: _special(v) or f"{v:.{_PRECISION}e}"
    return lambda v: _special(v) or f"{v:.{_PRECISION}f}"


def _special(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def _body(a: np.ndarray) -> str:
    kind = a.dtype.kind
    if kind == "f":
        fmt = _format_floats(a.astype(np.float64))
    elif kind == "b":
        fmt = lambda v: "True" if v else "False"  # noqa: E731
    elif kind == "c":
        fmt = lambda v: f"{v.real:.{_PRECISION}f}{v.imag:+.{_PRECISION}f}j"  # noqa: E731
    else:
        fmt = lambda v: str(int(v))  # noqa: E731
    if a.ndim == 0:
        return fmt(a.item())
    summarize = a.size > 1000
    return np.array2string(
        a, separator=", ", formatter={"all": fmt}, threshold=1000 if summarize else a.size + 1,
        edgeitems=3, prefix="tensor(", max_line_width=80,
    )


def tensor_repr(t) -> str:
    a = t._data
    body = _body(a)
    suffix = []
    if a.size == 0 and a.shape != (0,):
        suffix.append(f"size={tuple(a.shape)}")
    dt = D._FROM_NP[a.dtype]
    if dt not in (D._default[0], D.int64, D.bool_, D.default_complex()):
        suffix.append(f"dtype=ndgrad.{dt.name}")
    if t._grad_fn is not None:
        suffix.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._rg:
        suffix.append("requires_grad=True")
    return "tensor(" + ", ".join([body] + suffix) + ")"
