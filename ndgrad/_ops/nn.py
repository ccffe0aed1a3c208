"""Ops that live in ``nn.functional`` only (padding, ...); activations are in ``pointwise``.

``pad``'s non-constant modes gather along each padded dim with an index array; their backward
(``_pad_backward``) adds the gradient back at those indices, and is itself differentiated by pad.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import _backend
from .random import dropout_impl, native_dropout
from .registry import defop
from .samples import nc, sample

_MODES = ("constant", "reflect", "replicate", "circular")


def _check_pad(x, pad, mode, value):
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    for k, p in enumerate(pad):
        if not isinstance(p, (int, np.integer)):
            raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, but found element of "
                            f"type {type(p).__name__} at pos {k}")
    if mode != "constant" and value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * x.ndim:
        raise RuntimeError("Padding length should be less than or equal to two times the input dimension but "
                           f"got padding length {len(pad)} and input of dimension {x.ndim}")
    n = len(pad) // 2
    if mode != "constant" and (n not in (1, 2, 3) or x.ndim not in (n + 1, n + 2)):
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {x.ndim}D input tensor.")


def _pad_index(xp, size, lo, hi, mode, dim, shape):
    """For a non-constant mode: the input position each output position reads along one dim
    (built by ``xp``, on the data's device)."""
    if mode == "reflect" and (lo >= size or hi >= size):
        raise RuntimeError(f"Argument #{4 + 2 * (len(shape) - 1 - dim)}: Padding size should be less than the "
                           f"corresponding input dimension, but got: padding ({lo}, {hi}) at dimension {dim} of "
                           f"input {list(shape)}")
    if mode == "circular" and (lo > size or hi > size):
        raise RuntimeError("Padding value causes wrapping around more than once.")
    j = xp.arange(-lo, size + hi)
    if mode == "reflect":
        j = np.abs(j)
        return np.where(j > size - 1, 2 * (size - 1) - j, j)
    if mode == "replicate":
        return np.clip(j, 0, size - 1)
    # NOTE(pytorch): circular pads wrap within what is left after negative pads crop.
    start, stop = max(-lo, 0), size - max(-hi, 0)
    return start + (xp.arange(size + lo + hi) - max(lo, 0)) % max(stop - start, 1)


def _pad_dims(x, pad):
    """``(dim, lo, hi)`` for each padded dim: pairs of ``pad`` start from the last dim."""
    return [(x.ndim - 1 - k, int(pad[2 * k]), int(pad[2 * k + 1])) for k in range(len(pad) // 2)]


def _pad(x, pad, mode, value):
    _check_pad(x, pad, mode, value)
    if mode == "constant":
        shape, src, dst = list(x.shape), [slice(None)] * x.ndim, [slice(None)] * x.ndim
        for d, lo, hi in _pad_dims(x, pad):
            size = x.shape[d]
            if size + min(lo, 0) + min(hi, 0) < 0:
                raise RuntimeError("narrow(): length must be non-negative.")
            shape[d] = size + lo + hi
            src[d] = slice(max(-lo, 0), size - max(-hi, 0))
            dst[d] = slice(max(lo, 0), max(lo, 0) + src[d].stop - src[d].start)
        out = _backend.namespace_of(x).full(shape, 0 if value is None else value, dtype=x.dtype)
        out[tuple(dst)] = x[tuple(src)]
        return out
    shape, xp = x.shape, _backend.namespace_of(x)
    for d, lo, hi in _pad_dims(x, pad):
        x = np.take(x, _pad_index(xp, shape[d], lo, hi, mode, d, shape), axis=d)
    return x


def _pad_backward(grad, shape, pad, mode):
    # the adjoint of the gather in _pad: add each output position's gradient at its input position
    xp = _backend.namespace_of(grad)
    for d, lo, hi in reversed(_pad_dims(grad, pad)):
        idx = _pad_index(xp, shape[d], lo, hi, mode, d, shape)
        out = xp.zeros(grad.shape[:d] + (shape[d],) + grad.shape[d + 1:], grad.dtype)
        np.add.at(np.moveaxis(out, d, 0), idx, np.moveaxis(grad, d, 0))
        grad = out
    return grad


pad_backward = defop("_pad_backward(Tensor grad, int[] shape, SymInt[] pad, str mode) -> Tensor", _pad_backward,
                     {"grad": lambda grad, pad, mode: pad_fn(grad, pad, mode)}, jvp="linear",
                     method=False, api=False).call


def _pad_grad(grad, input_shape, pad, mode):
    if mode == "constant":  # cropping undoes padding and vice versa
        return pad_fn(grad, [-p for p in pad])
    return pad_backward(grad, input_shape, pad, mode)


def _pad_samples(rng):
    def r(*shape):
        return rng.standard_normal(shape)

    out = [
        sample("const_last", r(3, 4), (1, 2)),
        sample("const_value_nc", nc(r(2, 3, 4)), [2, 0, 1, 1], value=1.5),
        sample("const_crop", r(3, 5), (-1, 2, 1, -2)),
        sample("const_all_dims", r(2, 2, 3), (1, 0, 0, 1, 2, 1)),
        sample("const_0d", r(), ()),
    ]
    for mode in ("reflect", "replicate", "circular"):
        out += [sample(f"{mode}_1d", nc(r(2, 5)), (2, 3), mode=mode),
                sample(f"{mode}_1d_batch_crop", r(2, 2, 5), (-1, 3), mode),
                sample(f"{mode}_2d", r(2, 3, 4), (1, 2, 2, 1), mode),
                sample(f"{mode}_3d", r(1, 2, 3, 3, 4), (1, 1, 0, 2, 2, 1), mode=mode)]
    return out


pad_fn = defop("pad(Tensor input, SymInt[] pad, str mode='constant', float? value=None) -> Tensor", _pad,
               {"input": _pad_grad}, jvp=lambda input_t, pad, mode: pad_fn(input_t, pad, mode),
               api="nn.functional.pad", method=False, samples=_pad_samples).call


# --- dropout (nn.functional's; here so that sdpa can use it): the ops ``native_dropout`` and
# ``_dropout_impl`` (random.py) draw the mask, so a dispatch mode sees each draw ---
def _check_p(p) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _skip(input, p, training) -> bool:
    """NOTE(pytorch): no dropout at all returns the input itself."""
    _check_p(p)
    return not training or p == 0.0 or input.numel() == 0


def _result(input, out, inplace):
    return input.copy_(out) if inplace else out  # in place: the gradient flows through the op


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    if _skip(input, p, training):
        return input
    return _result(input, native_dropout(input, p, True)[0], inplace)


def _feature_dropout(input, p, training, inplace, alpha, batched=True):
    """One draw per (sample, channel), broadcast over the rest; an unbatched input is one sample."""
    if _skip(input, p, training):
        return input
    out = dropout_impl(input if batched else input.unsqueeze(0), p, True, alpha)[0]
    return _result(input, out if batched else out.squeeze(0), inplace)


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            "dropout1d: Expected 2D or 3D input, but received a "
            f"{input.ndim}D input. Note that dropout1d exists to provide channel-wise dropout "
            "on inputs with 1 spatial dimension, a channel dimension, and an optional batch "
            "dimension (i.e. 2D or 3D inputs)."
        )
    return _feature_dropout(input, p, training, inplace, False, input.ndim == 3)


def _nd_warning(name, n, ndim):
    warnings.warn(
        f"{name}: Received a {ndim}-D input to {name}, which is deprecated and will result in an error in a "
        "future release. To retain the behavior and silence this warning, please use dropout instead. Note "
        f"that {name} exists to provide channel-wise dropout on inputs with {n} spatial dimensions, a channel "
        f"dimension, and an optional batch dimension (i.e. {n + 1}D or {n + 2}D inputs).", stacklevel=3)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    _check_p(p)
    if input.ndim not in (3, 4):
        _nd_warning("dropout2d", 2, input.ndim)
    if input.ndim == 3:  # NOTE(pytorch): taken as (N, C, L), not as unbatched (pytorch#77081)
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior is "
            "desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior will "
            "change in a future release to interpret the input as one without a batch dimension, i.e. shape "
            "(C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using dropout1d "
            "instead.", stacklevel=2)
    return _feature_dropout(input, p, training, inplace, False)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    _check_p(p)
    if input.ndim not in (4, 5):
        _nd_warning("dropout3d", 3, input.ndim)
    return _feature_dropout(input, p, training, inplace, False, input.ndim == 5)


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    if _skip(input, p, training):
        return input
    return _result(input, dropout_impl(input, p, False, True)[0], inplace)


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    return _feature_dropout(input, p, training, inplace, True)
