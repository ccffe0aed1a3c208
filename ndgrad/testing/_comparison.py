"""``assert_close``: torch.testing's comparison of tensors, NumPy arrays, Python scalars and nested
sequences / mappings of them, with its default tolerances per dtype and its messages.

Inputs are first flattened into pairs (structure errors come before any value is compared), then
each pair is checked: attributes (shape, device, dtype, stride) and then values, on the host.
"""

from __future__ import annotations

import cmath
import contextlib
import math
from collections.abc import Mapping, Sequence
from numbers import Number

import numpy as np

from .. import _dtype as D
from .._factories import tensor as _tensor
from .._tensor import Tensor

__all__ = ["assert_close"]

# NOTE(pytorch): torch.testing's default (rtol, atol) per dtype; other dtypes compare exactly
_DTYPE_PRECISIONS = {
    D.float16: (1e-3, 1e-5),
    D.bfloat16: (1.6e-2, 1e-5),  # a None key without ml_dtypes: never looked up
    D.float32: (1.3e-6, 1e-5),
    D.float64: (1e-7, 1e-7),
    D.complex64: (1.3e-6, 1e-5),
    D.complex128: (1e-7, 1e-7),
}


class _Failure(Exception):
    """A mismatch found for one pair: the exception type, its message and where it occurred."""

    def __init__(self, type_: type, msg: str, id_: tuple = ()):
        super().__init__(msg)
        self.type, self.msg, self.id = type_, msg, id_

    def to_error(self, msg=None) -> Exception:
        if isinstance(msg, str):
            return self.type(msg)
        text = self.msg
        if self.id:
            text += "\n\nThe failure occurred for item " + "".join(f"[{i!r}]" for i in self.id)
        return self.type(text if msg is None else msg(text))


def _default_tolerances(*dtypes) -> tuple[float, float]:
    rtols, atols = zip(*(_DTYPE_PRECISIONS.get(d, (0.0, 0.0)) for d in dtypes), strict=True)
    return max(rtols), max(atols)


def _tolerances(dtypes, rtol, atol, id_) -> tuple[float, float]:
    if (rtol is None) ^ (atol is None):
        raise _Failure(
            ValueError,
            "Both 'rtol' and 'atol' must be either specified or omitted, "
            f"but got no {'rtol' if rtol is None else 'atol'}.",
            id_,
        )
    if rtol is not None:
        return rtol, atol
    return _default_tolerances(*dtypes)


# --- flattening the inputs into pairs ---
def _is_scalar(x) -> bool:
    return isinstance(x, Number) and not isinstance(x, (bool, np.bool_))


def _flatten(actual, expected, id_, out: list, allow_subclasses: bool) -> None:
    if actual is None or expected is None:
        out.append(("none", actual, expected, id_))
    elif isinstance(actual, (bool, np.bool_)) and isinstance(expected, (bool, np.bool_)):
        out.append(("bool", actual, expected, id_))
    elif _is_scalar(actual) and _is_scalar(expected):
        out.append(("number", actual, expected, id_))
    elif _tensor_like(actual, expected, allow_subclasses):
        out.append(("tensor", actual, expected, id_))
    elif (
        isinstance(actual, Sequence)
        and not isinstance(actual, str)
        and isinstance(expected, Sequence)
        and not isinstance(expected, str)
    ):
        if len(actual) != len(expected):
            raise _Failure(
                AssertionError,
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                id_,
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            _flatten(a, e, id_ + (i,), out, allow_subclasses)
    elif isinstance(actual, Mapping) and isinstance(expected, Mapping):
        keys_a, keys_e = set(actual.keys()), set(expected.keys())
        if keys_a != keys_e:
            missing, extra = keys_e - keys_a, keys_a - keys_e
            raise _Failure(
                AssertionError,
                "The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {sorted(missing)}\n"
                f"Additional keys in the actual mapping: {sorted(extra)}",
                id_,
            )
        keys = list(actual.keys())
        with contextlib.suppress(TypeError):  # unorderable keys keep their order
            keys = sorted(keys)
        for k in keys:
            _flatten(actual[k], expected[k], id_ + (k,), out, allow_subclasses)
    else:
        raise _Failure(
            TypeError,
            "No comparison pair was able to handle inputs of type "
            f"{type(actual)} and {type(expected)}.",
            id_,
        )


def _tensor_like(actual, expected, allow_subclasses: bool) -> bool:
    kinds = (Tensor, np.ndarray)
    if not (isinstance(actual, kinds) and isinstance(expected, kinds)):
        return False
    if allow_subclasses:
        return isinstance(actual, type(expected)) or isinstance(expected, type(actual))
    return type(actual) is type(expected)


# --- comparing one pair ---
def _python_type(x) -> type:
    if isinstance(x, (int, np.integer)):
        return int
    if isinstance(x, (float, np.floating)):
        return float
    return complex


def _number_close(a, e, rtol, atol, equal_nan) -> bool:
    if a == e:
        return True
    if equal_nan and cmath.isnan(a) and cmath.isnan(e):
        return True
    if cmath.isinf(a) or cmath.isinf(e) or cmath.isnan(a) or cmath.isnan(e):
        return False
    return abs(a - e) <= atol + rtol * abs(e)


def _scalar_msg(a, e, rtol, atol) -> str:
    equality = rtol == 0 and atol == 0
    abs_diff = abs(a - e)
    if isinstance(abs_diff, float) and math.isnan(abs_diff):
        rel_diff = math.nan
    elif abs(e) == 0:
        rel_diff = math.inf if abs_diff else math.nan
    else:
        rel_diff = abs_diff / abs(e)
    msg = f"Scalars are not {'equal' if equality else 'close'}!\n\nExpected {e} but got {a}.\n"
    msg += f"Absolute difference: {abs_diff}" + ("" if equality else f" (up to {atol} allowed)")
    msg += f"\nRelative difference: {rel_diff}" + ("" if equality else f" (up to {rtol} allowed)")
    return msg


def _compare_numbers(a, e, id_, rtol, atol, equal_nan, check_dtype):
    if check_dtype and _python_type(a) is not _python_type(e):
        raise _Failure(
            AssertionError,
            f"The (d)types do not match: {_python_type(a)} != {_python_type(e)}.",
            id_,
        )
    tols = [
        {int: D.int64, float: D.float64, complex: D.complex128}[_python_type(x)] for x in (a, e)
    ]
    rtol, atol = _tolerances(tols, rtol, atol, id_)
    a, e = a.item() if hasattr(a, "item") else a, e.item() if hasattr(e, "item") else e
    if not _number_close(a, e, rtol, atol, equal_nan):
        raise _Failure(AssertionError, _scalar_msg(a, e, rtol, atol), id_)


def _as_tensor(x) -> Tensor:
    return _tensor(x) if isinstance(x, np.ndarray) else x


def _host(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach().cpu()._data)  # not numpy(): bfloat16 has none


def _compare_tensors(
    actual, expected, id_, rtol, atol, equal_nan, check_device, check_dtype, check_stride
):
    actual, expected = _as_tensor(actual), _as_tensor(expected)

    def attr(name, a, e):
        if a != e:
            raise _Failure(
                AssertionError, f"The values for attribute '{name}' do not match: {a} != {e}.", id_
            )

    attr("shape", actual.shape, expected.shape)
    if check_device:
        attr("device", actual.device, expected.device)
    if check_dtype:
        attr("dtype", actual.dtype, expected.dtype)
    if check_stride and actual.numel() > 0:
        attr("stride()", actual.stride(), expected.stride())
    rtol, atol = _tolerances((actual.dtype, expected.dtype), rtol, atol, id_)
    common = D.promote_types(actual.dtype, expected.dtype)
    if common is D.bfloat16:
        common = D.float32  # exact, and NumPy's isclose has float loops
    a = _host(actual).astype(common.np, copy=False)
    e = _host(expected).astype(common.np, copy=False)
    if a.ndim == 0:  # NOTE(pytorch): 0-d tensors report as scalars
        a_s, e_s = a.item(), e.item()
        if not _number_close(a_s, e_s, rtol, atol, equal_nan):
            raise _Failure(AssertionError, _scalar_msg(a_s, e_s, rtol, atol), id_)
        return
    is_int = a.dtype.kind in "biu"
    if is_int:
        a, e = a.astype(np.int64), e.astype(np.int64)
        matches = np.abs(a - e) <= atol + rtol * np.abs(e) if (rtol or atol) else a == e
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            matches = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if matches.all():
        return
    raise _Failure(AssertionError, _tensor_msg(a, e, matches, rtol, atol, is_int), id_)


def _tensor_msg(a, e, matches, rtol, atol, is_int) -> str:
    equality = rtol == 0 and atol == 0
    total, bad = matches.size, int(matches.size - matches.sum())
    a, e, m = a.reshape(-1).copy(), e.reshape(-1).copy(), matches.reshape(-1)
    if not is_int:  # only mismatches count toward the greatest differences
        a[m] = 0
        e[m] = 0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        abs_diff = np.abs(a - e)
        abs_diff[m] = 0
        denom = np.abs(e)
        rel_diff = (
            abs_diff.astype(np.float32) / denom.astype(np.float32) if is_int else abs_diff / denom
        )
        rel_diff[m] = 0
    i_abs, i_rel = int(np.argmax(abs_diff)), int(np.argmax(rel_diff))  # argmax stops at a NaN
    idx = [tuple(int(j) for j in np.unravel_index(i, matches.shape)) for i in (i_abs, i_rel)]

    def line(kind, diff, at, tol):
        text = f"Greatest {kind} difference: {diff} at index {at}"
        return text if equality else text + f" (up to {tol} allowed)"

    return (
        f"Tensor-likes are not {'equal' if equality else 'close'}!\n\n"
        f"Mismatched elements: {bad} / {total} ({bad / total:.1%})\n"
        + line("absolute", abs_diff[i_abs].item(), idx[0], atol)
        + "\n"
        + line("relative", rel_diff[i_rel].item(), idx[1], rtol)
    )


# --- the entry point ---
def assert_close(
    actual,
    expected,
    *,
    allow_subclasses=True,
    rtol=None,
    atol=None,
    equal_nan=False,
    check_device=True,
    check_dtype=True,
    check_layout=True,
    check_stride=False,
    msg=None,
) -> None:
    """Asserts that ``actual`` and ``expected`` are close (``|a - e| <= atol + rtol * |e|``).

    >>> import ndgrad
    >>> ndgrad.testing.assert_close(ndgrad.tensor([1.0, 2.0]), ndgrad.tensor([1.0, 2.0 + 1e-7]))
    """
    __tracebackhide__ = True
    pairs: list = []
    try:
        _flatten(actual, expected, (), pairs, allow_subclasses)
        for kind, a, e, id_ in pairs:
            if kind == "none":
                if not (a is None and e is None):
                    raise _Failure(AssertionError, f"None mismatch: {a} is not {e}", id_)
            elif kind == "bool":
                if bool(a) is not bool(e):
                    raise _Failure(AssertionError, f"Booleans mismatch: {a} is not {e}", id_)
            elif kind == "number":
                _compare_numbers(a, e, id_, rtol, atol, equal_nan, check_dtype)
            else:
                _compare_tensors(
                    a, e, id_, rtol, atol, equal_nan, check_device, check_dtype, check_stride
                )
    except _Failure as failure:
        raise failure.to_error(msg) from None
