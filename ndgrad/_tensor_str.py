"""PyTorch-style ``repr`` of tensors: ``tensor([2.], grad_fn=<MulBackward0>)``.

Every element of a tensor is printed in one style chosen from all its (shown) values and
right-aligned to the widest, under PyTorch's print options (``set_printoptions``; by default 4
decimals, line width 80, summarised as ``3 edge items ... 3 edge items`` per dim above 1000
elements).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from . import _backend
from . import _dtype as D

__all__ = ["set_printoptions", "get_printoptions", "printoptions"]

_PREFIX = "tensor("
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


class _Options:
    __slots__ = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")

    def __init__(self):
        self.precision, self.threshold, self.edgeitems, self.linewidth = _PROFILES["default"]
        self.sci_mode = None  # None: chosen from the values; True / False: always / never


_opts = _Options()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None) -> None:
    """PyTorch's print options: a ``profile`` ("default", "short", "full") sets the first four,
    then each option given overrides; ``sci_mode`` None lets the values choose."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"Unknown profile {profile!r}: use 'default', 'short' or 'full'")
        _opts.precision, _opts.threshold, _opts.edgeitems, _opts.linewidth = _PROFILES[profile]
    if precision is not None:
        _opts.precision = precision
    if threshold is not None:
        _opts.threshold = threshold
    if edgeitems is not None:
        _opts.edgeitems = edgeitems
    if linewidth is not None:
        _opts.linewidth = linewidth
    _opts.sci_mode = sci_mode


def get_printoptions() -> dict:
    return {name: getattr(_opts, name) for name in _Options.__slots__}


@contextlib.contextmanager
def printoptions(**kwargs):
    """``set_printoptions(**kwargs)`` for the duration of a ``with`` block."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Style:
    """How one real-valued array's elements are written: ``int`` (``3.``), ``fixed`` (``3.1416``),
    ``sci`` (``3.1416e+00``) for floats, ``str`` for integers and bools; ``width`` pads them."""

    def __init__(self, a: np.ndarray):
        self.kind = "str"
        self.width = 1
        if a.dtype.kind != "f":
            for v in a.ravel().tolist():
                self.width = max(self.width, len(str(v)))
            return
        vals = a.astype(np.float64).ravel()
        vals = vals[np.isfinite(vals) & (vals != 0)]
        self.kind = "int"
        if vals.size == 0:
            return
        mags = np.abs(vals)
        lo, hi = float(mags.min()), float(mags.max())
        integral = bool(np.all(vals == np.ceil(vals)))
        if integral:
            sci = hi / lo > 1000.0 or hi > 1.0e8
        else:
            sci = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        if _opts.sci_mode is not None:
            sci = _opts.sci_mode
        self.kind = "sci" if sci else "int" if integral else "fixed"
        self.width = max(len(self._text(v)) for v in vals.tolist())

    def _text(self, v) -> str:
        if self.kind == "sci":
            return f"{v:.{_opts.precision}e}"
        if self.kind == "fixed":
            return f"{v:.{_opts.precision}f}"
        if self.kind == "int":
            s = f"{v:.0f}"
            return s if math.isinf(v) or math.isnan(v) else s + "."
        return str(v)

    def format(self, v) -> str:
        return self._text(v).rjust(self.width)


def _edges(a: np.ndarray) -> np.ndarray:
    """Only the elements a summarised print shows (first and last edge items of every dim)."""
    edge = _opts.edgeitems
    for d in range(a.ndim):
        if a.shape[d] > 2 * edge:
            idx = np.r_[0:edge, a.shape[d] - edge:a.shape[d]]
            a = np.take(a, idx, axis=d)
    return a


class _Printer:
    def __init__(self, a: np.ndarray, summarize: bool):
        shown = _edges(a) if summarize else a
        self.summarize = summarize
        self.is_complex = a.dtype.kind == "c"
        if self.is_complex:
            self.re, self.im = _Style(shown.real), _Style(shown.imag)
            self.item_width = self.re.width + self.im.width + 1
        else:
            self.re, self.im = _Style(shown), None
            self.item_width = self.re.width

    def element(self, v) -> str:
        if not self.is_complex:
            return self.re.format(v)
        imag = (self.im.format(v.imag) + "j").lstrip()
        sign = "" if imag[0] in "+-" else "+"
        return self.re.format(v.real) + sign + imag

    def block(self, a: np.ndarray, indent: int) -> str:
        if a.ndim == 0:
            return self.element(a.item())
        edge = _opts.edgeitems
        cut = self.summarize and a.shape[0] > 2 * edge
        if a.ndim == 1:
            vals = a.tolist()
            if cut:
                items = [self.element(v) for v in vals[:edge]] + [" ..."]
                items += [self.element(v) for v in vals[-edge:]]
            else:
                items = [self.element(v) for v in vals]
            per_line = max(1, (_opts.linewidth - indent) // (self.item_width + 2))
            lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
            return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
        n = a.shape[0]
        rows = range(edge) if cut else range(n)
        parts = [self.block(a[i], indent + 1) for i in rows]
        if cut:
            parts.append("...")
            parts += [self.block(a[i], indent + 1) for i in range(n - edge, n)]
        sep = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
        return "[" + sep.join(parts) + "]"


def _body(a: np.ndarray) -> str:
    if a.size == 0:
        return "[]"
    summarize = a.size > _opts.threshold
    return _Printer(a, summarize).block(a, len(_PREFIX))


def tensor_repr(t) -> str:
    a = t._data
    dt = D._FROM_NP[a.dtype]
    suffix = []
    if type(a) is not np.ndarray:
        dev = _backend.device_of(a)
        if dev.type != "cpu":  # a device tensor says where it lives, first, as in PyTorch
            suffix.append(f"device='{dev}'")
            a = _backend.device_type(dev).to_host(a)
    if a.dtype is D.BF16:
        a = a.astype(np.float32)  # exact; formatting reads NumPy's float kinds
    if a.size == 0:
        if a.ndim != 1:
            suffix.append(f"size={tuple(a.shape)}")
        if dt is not D._default[0]:  # nothing to tell an empty int64 / bool tensor apart by
            suffix.append(f"dtype=ndgrad.{dt.name}")
    elif dt not in (D._default[0], D.int64, D.bool_, D.default_complex()):
        suffix.append(f"dtype=ndgrad.{dt.name}")
    fn = t.grad_fn  # refreshes a view's grad_fn after in-place changes
    if fn is not None:
        suffix.append(f"grad_fn=<{fn.name()}>")
    elif t._rg:
        suffix.append("requires_grad=True")
    out = _PREFIX + _body(a)
    # a suffix that would overflow the last line goes on its own line, aligned with the body
    last = len(out) - out.rfind("\n") + 1
    for s in suffix:
        if last + len(s) + 2 > _opts.linewidth:
            out += ",\n" + " " * len(_PREFIX) + s
            last = len(_PREFIX) + len(s)
        else:
            out += ", " + s
            last += len(s) + 2
    return out + ")"
