"""Ops that live in ``nn.functional`` only: padding, dropout, and composites: pixel/channel
shuffles, fold/unfold, embedding_bag, distances, composed activations, affine grids and grid
sampling. Activations are in ``pointwise``; 2-d pooling and convolution primitives in ``conv``,
the other pooling in ``pooling``.

``pad``'s non-constant modes gather along each padded dim with an index array; their backward
(``_pad_backward``) adds the gradient back at those indices, and is itself differentiated by pad.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _backend
from .pooling import _ntup, _r, _window_idx
from .random import dropout_impl, native_dropout
from .registry import OPS, defcomposite, defop
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
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {x.ndim}D input tensor.\n"
                                  "Supported combinations for non-constant padding:\n"
                                  "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                                  "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                                  "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


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



# --- pixel and channel shuffles: reshapes around one permute ---
def _check_shuffle(name, x, factor, what):
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {what}, but got {factor}")
    if x.dim() < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input with {x.dim()} "
                           "dimension(s)")


def pixel_shuffle(input, upscale_factor):
    r = int(upscale_factor)
    _check_shuffle("pixel_shuffle", input, r, "upscale_factor")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                           f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    x = x.permute(list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2])
    return x.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    r = int(downscale_factor)
    _check_shuffle("pixel_unshuffle", input, r, "downscale_factor")
    *lead, c, h, w = input.shape
    for nm, size, d in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {nm} to be divisible by downscale_factor, but "
                               f"input.size({d})={size} is not divisible by {r}")
    n = len(lead)
    x = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    x = x.permute(list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3])
    return x.reshape(tuple(lead) + (c * r * r, h // r, w // r))


def channel_shuffle(input, groups):
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes "
                           f"{list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    c = input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    n, rest = input.shape[0], tuple(input.shape[2:])
    x = input.reshape((n, groups, c // groups) + rest).transpose(1, 2)
    return x.reshape(input.shape)


defcomposite(pixel_shuffle, api="nn.functional.pixel_shuffle", method=False, samples=lambda rng: [
    sample("r2", _r(rng)(2, 8, 2, 3), 2), sample("r3_5d_nc", nc(_r(rng)(2, 1, 9, 2, 2)), 3),
    sample("unbatched", _r(rng)(4, 3, 2), 2)])
defcomposite(pixel_unshuffle, api="nn.functional.pixel_unshuffle", method=False, samples=lambda rng: [
    sample("r2", _r(rng)(2, 2, 4, 6), 2), sample("r3_unbatched_nc", nc(_r(rng)(1, 3, 6)), 3)])
defcomposite(channel_shuffle, api="nn.functional.channel_shuffle", method=False, samples=lambda rng: [
    sample("g2", _r(rng)(2, 4, 3, 3), 2), sample("g3_3d_nc", nc(_r(rng)(2, 6, 5)), 3)])


# --- unfold / fold: a grouped convolution (and its transpose) with one-hot kernels, one output
# channel per (channel, tap), in PyTorch's (C, kh, kw) order ---
def _one_hot_kernels(c, k, like):
    from .factory import eye

    return eye(math.prod(k), dtype=like.dtype, device=like.device).repeat(c, 1).reshape((-1, 1) + k)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Each block's taps gathered along H, then W (``index_select``: 3x faster than the one-hot
    grouped convolution ``fold`` uses, on 64x28x28 maps with a 3x3 kernel)."""
    if input.dim() not in (3, 4) or any(v == 0 for v in input.shape[1:]):
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    k, d, p, s = _ntup(kernel_size, 2), _ntup(dilation, 2), _ntup(padding, 2), _ntup(stride, 2)
    size = tuple(input.shape[-2:])
    out = tuple((size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2))
    if min(out) < 1:
        raise RuntimeError(f"Given input with spatial size {size}, kernel_size={k}, dilation={d}, padding={p}, "
                           f"calculated shape of the array of sliding blocks as {out}, but its components must be "
                           "at least one.")
    x = pad_fn(input, [p[1], p[1], p[0], p[0]]) if any(p) else input
    lead = x.dim() - 2
    for i in range(2):
        ix = _window_idx(out[i], k[i], s[i], d[i], x)
        x = x.index_select(lead + 2 * i, ix.reshape(-1)).unflatten(lead + 2 * i, tuple(ix.shape))
    x = x.permute(list(range(lead)) + [lead + 1, lead + 3, lead, lead + 2])  # (.., C, kh, kw, oh, ow)
    return x.reshape(tuple(input.shape[:-3]) + (-1, out[0] * out[1]))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    from .conv import convolution

    if input.dim() not in (2, 3) or any(v == 0 for v in input.shape[1:]):
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and "
                           f"non-zero dimensions for input, but got: {list(input.shape)}")
    out, k = _ntup(output_size, 2), _ntup(kernel_size, 2)
    d, p, s = _ntup(dilation, 2), _ntup(padding, 2), _ntup(stride, 2)
    x = input if input.dim() == 3 else input.unsqueeze(0)
    K = math.prod(k)
    if x.shape[1] % K:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={x.shape[1]} and kernel_size={k}.")
    blocks = [(out[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    if x.shape[2] != blocks[0] * blocks[1]:
        raise RuntimeError(f"Given output_size={out}, kernel_size={k}, dilation={d}, padding={p}, stride={s}, "
                           f"expected size of input's dimension 2 to match the calculated number of sliding blocks "
                           f"{blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got input.size(2)={x.shape[2]}.")
    c = x.shape[1] // K
    base = [(blocks[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1 for i in range(2)]
    y = convolution(x.reshape(tuple(x.shape[:2]) + tuple(blocks)), _one_hot_kernels(c, k, x), None, s, p, d, True,
                    tuple(out[i] - base[i] for i in range(2)), c)
    return y if input.dim() == 3 else y.squeeze(0)


defcomposite(unfold, api="nn.functional.unfold", method=False, samples=lambda rng: [
    sample("k2", _r(rng)(2, 3, 4, 4), 2),
    sample("dil_pad_stride_nc", nc(_r(rng)(1, 2, 5, 6)), (2, 3), (2, 1), 1, (2, 1)),
    sample("unbatched", _r(rng)(2, 3, 3), 2, stride=1)])
defcomposite(fold, api="nn.functional.fold", method=False, samples=lambda rng: [
    sample("k2", _r(rng)(2, 12, 9), (4, 4), 2, stride=1),
    sample("dil_pad_stride", _r(rng)(1, 12, 18), (5, 6), (2, 3), (2, 1), 1, (2, 1)),
    sample("uneven_unbatched", _r(rng)(4, 4), (5, 5), 2, stride=2)])


# --- embedding_bag: sum and mean add each looked-up row into its bag (``index_add``); max takes
# the maximum over bags padded to the longest. Bag ids and masks are ops on ``offsets`` (a capture
# records them as calls); the data are read only for PyTorch's checks and the longest bag. ---
def _bag_bounds(input, offsets, include_last_offset):
    """(starts, end): the bags' first positions (a tensor) and where the last bag ends (an int)."""
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
        return None, input.numel()
    if input.dim() != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.dim() != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    if offsets.numel() and int(offsets[0]) != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                           f"position 0. However, got {int(offsets[0])}")
    if offsets.numel() and int(offsets[-1]) > input.numel():
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {input.numel()} but got "
                           f"offsets[-1] of {int(offsets[-1])}")
    if include_last_offset:
        return offsets[:-1], int(offsets[-1]) if offsets.numel() else 0
    return offsets, input.numel()


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    from .factory import arange
    from .norm import embedding
    from .pointwise import where
    from .shape import cat

    if str(input.dtype) not in ("ndgrad.int64", "ndgrad.int32"):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {input.type()} instead (while checking arguments for embedding_bag)")
    if per_sample_weights is not None and input.shape != per_sample_weights.shape:
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                         f"must have the same shape as the input ({input.shape})")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  "GitHub.")
    if per_sample_weights is not None and per_sample_weights.dtype != weight.dtype:
        raise RuntimeError("Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
                           f"'per_sample_weights'; but type {weight.type()} does not equal "
                           f"{per_sample_weights.type()} (while checking arguments for embedding_bag)")
    starts, end = _bag_bounds(input, offsets, include_last_offset)
    flat, num, dev = input.reshape(-1), weight.shape[0], weight.device
    bad = (flat < 0) | (flat >= num)
    if bool(bad.any()):
        i = int(bad.to(weight.dtype).argmax())
        raise RuntimeError(f"Index {i} of input takes value {int(flat[i])} which is not in the valid range [0, {num})")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += num
    look = (weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    n = flat.shape[0]
    if mode == "max":  # bags padded to the longest, gaps at -inf
        if starts is None:
            ids, valid = input, None
        else:
            lens = cat([starts[1:], starts.new_full((min(1, starts.shape[0]),), end)]) - starts
            longest = int(lens.max()) if lens.numel() else 0
            if longest == 0 or n == 0:
                return weight.new_zeros((starts.shape[0], weight.shape[1]))
            j = arange(longest, device=dev)
            ids = flat[(starts[:, None] + j).clamp(max=n - 1)]
            valid = j < lens[:, None]
        if padding_idx is not None:
            valid = ids != padding_idx if valid is None else valid & (ids != padding_idx)
        emb = embedding(ids, *look)
        if valid is None:
            return emb.max(1)[0]
        vals = emb.masked_fill(~valid[..., None], float("-inf")).max(1)[0]
        return where(valid.any(1)[:, None], vals, 0.0)
    # sum and mean: each row in use added into its bag
    if starts is None:
        bags, length = input.shape
        bag = arange(n, device=dev) // max(length, 1)
    else:
        bags = starts.shape[0]
        # a 1 at each bag's start (empty bags stack theirs), summed up to each position
        marks = starts.new_zeros((n + 1,)).index_add(0, starts, starts.new_ones(starts.shape))
        bag = (marks.cumsum(0)[:n] - 1).clamp(min=0)
    emb = embedding(flat, *look)
    keep = None
    if end < n:  # include_last_offset: what follows the last offset is in no bag
        keep = arange(n, device=dev) < end
    if padding_idx is not None:
        keep = flat != padding_idx if keep is None else keep & (flat != padding_idx)
    scale = None if keep is None else keep.to(weight.dtype)
    if per_sample_weights is not None:
        psw = per_sample_weights.reshape(-1)
        scale = psw if scale is None else psw * scale
    if scale is not None:
        emb = emb * scale[:, None]
    total = weight.new_zeros((bags, weight.shape[1])).index_add(0, bag, emb)
    if mode == "sum":
        return total
    ones = weight.new_ones((n,)) if keep is None else keep.to(weight.dtype)
    count = weight.new_zeros((bags,)).index_add(0, bag, ones).clamp(min=1)
    return total / count[:, None]


def _bag_samples(rng):
    from .samples import sample as s

    w = rng.standard_normal((6, 3))
    i1 = np.array([1, 2, 4, 5, 4, 3, 2, 0])
    off = np.array([0, 2, 2, 5])
    return [s("mean_offsets", i1, w, off),
            s("sum_psw", i1, w, off, mode="sum", per_sample_weights=rng.standard_normal(8)),
            s("max_last_offset", i1, w, np.array([0, 3, 3, 8]), mode="max", include_last_offset=True),
            s("2d_mean_padding", np.array([[1, 2, 0], [3, 0, 0]]), w, padding_idx=0),
            s("2d_max", np.array([[1, 2, 5], [3, 4, 1]]), w, mode="max"),
            s("sum_padding_neg", i1, w, off, mode="sum", padding_idx=-2)]


defcomposite(embedding_bag, api="nn.functional.embedding_bag", method=False, samples=_bag_samples)


# --- distances ---
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    shape = tuple(np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape)))
    x1, x2 = x1.expand(shape), x2.expand(shape)
    n1 = x1.norm(2, dim=dim, keepdim=True).clamp(min=eps)
    n2 = x2.norm(2, dim=dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return (x1 - x2 + eps).norm(p, dim=-1, keepdim=keepdim)


defcomposite(cosine_similarity, api="nn.functional.cosine_similarity", method=False, samples=lambda rng: [
    sample("dim1", _r(rng)(3, 4), _r(rng)(3, 4)), sample("bcast_dim_last", _r(rng)(2, 3, 4), _r(rng)(3, 4), -1)])
defcomposite(pairwise_distance, api="nn.functional.pairwise_distance", method=False, samples=lambda rng: [
    sample("p2", _r(rng)(3, 4), _r(rng)(3, 4)), sample("p1_keepdim_bcast", _r(rng)(3, 4), _r(rng)(4), 1.0,
                                                        keepdim=True),
    sample("p3", _r(rng)(2, 5), _r(rng)(2, 5), 3)])


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    from .loss import _legacy_reduction

    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and negative {dims[2]}D "
                           "inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = OPS["minimum"].call(d_neg, pairwise_distance(positive, negative, p, eps))
    loss = (margin + d_pos - d_neg).clamp(min=0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    raise ValueError(f"{reduction} is not a valid value for reduction")


defcomposite(triplet_margin_loss, api="nn.functional.triplet_margin_loss", method=False, samples=lambda rng: [
    sample("mean", _r(rng)(4, 3), _r(rng)(4, 3), _r(rng)(4, 3)),
    sample("p1_swap_sum", _r(rng)(4, 3), _r(rng)(4, 3), _r(rng)(4, 3), 2.0, 1, swap=True, reduction="sum"),
    sample("none_1d", _r(rng)(3), _r(rng)(3), _r(rng)(3), 0.5, reduction="none")])


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and negative {dims[2]}D "
                           "inputs")
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = OPS["minimum"].call(d_neg, dist(positive, negative))
    loss = (margin + d_pos - d_neg).clamp(min=0)
    return loss.sum() if reduction == "sum" else loss.mean() if reduction == "mean" else loss


def _l1_distance(a, b):  # a module-level function, so both frameworks' tensors can take it
    return (a - b).abs().sum(-1)


defcomposite(triplet_margin_with_distance_loss, api="nn.functional.triplet_margin_with_distance_loss", method=False,
             samples=lambda rng: [
                 sample("mean", _r(rng)(4, 3), _r(rng)(4, 3), _r(rng)(4, 3)),
                 sample("l1_swap_sum", _r(rng)(4, 3), _r(rng)(4, 3), _r(rng)(4, 3), distance_function=_l1_distance,
                        margin=2.0, swap=True, reduction="sum"),
                 sample("none_1d", _r(rng)(3), _r(rng)(3), _r(rng)(3), margin=0.5, reduction="none")])


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    denom = input.norm(p, dim, keepdim=True).clamp(min=eps).expand_as(input)
    if out is None:
        return input / denom
    from .registry import NAMESPACES

    return NAMESPACES[""]["div"](input, denom, out=out)


def pdist(input, p=2):
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    from .factory import arange

    # row pairs i < j in row-major order, made by ops so that a capture records no constants
    n = input.shape[0]
    r = arange(n, device=input.device)
    i, j = r.unsqueeze(1).expand(n, n), r.expand(n, n)
    upper = i < j
    return (input[i[upper]] - input[j[upper]]).norm(p, dim=1)


defcomposite(normalize, api="nn.functional.normalize", method=False, samples=lambda rng: [
    sample("dim1", _r(rng)(3, 4)), sample("p1_dim0_nc", nc(_r(rng)(3, 4)), 1.0, 0),
    sample("eps_zero_row", np.array([[0.0, 0.0], [1.0, -2.0]]), 2.0, 1, 0.5, no_grad=(0,)),
    sample("1d_last", _r(rng)(5), 3.0, -1)])
defcomposite(pdist, api="nn.functional.pdist", method=False, samples=lambda rng: [
    sample("p2", _r(rng)(4, 3)), sample("p1", _r(rng)(4, 3), 1.0), sample("p3_nc", nc(_r(rng)(3, 5)), 3.0),
    sample("inf", _r(rng)(4, 2), float("inf")), sample("one_row", _r(rng)(1, 3))])


# --- activations composed of other ops (the primitive ones are in pointwise) ---
def hardshrink(input, lambd=0.5):
    return input.masked_fill((input >= -lambd) & (input <= lambd), 0)


def softshrink(input, lambd=0.5):
    from .index import _tname

    big = float(np.finfo(input._data.dtype).max) if input.dtype.is_floating_point else None
    if lambd < 0 or (big is not None and lambd > big):
        raise RuntimeError(f"lambda must be in range [0, {big:g}] for input dtype {_tname(input._data)}, but found "
                           f"{lambd:g}")
    # x - clamp(x): zero inside [-lambd, lambd] with gradient 0 there, as PyTorch's
    return input - input.clamp(-lambd, lambd)


def _rrelu_noise(input, lower, upper):
    """PyTorch's CPU kernel draws one double in [lower, upper) per element <= 0, in memory order,
    and slope 1 elsewhere: a float64 ``uniform_`` of that many elements draws the same numbers."""
    from .._dtype import float64
    from .factory import empty, ones_like

    neg = input <= 0
    noise = ones_like(input)
    k = int(neg.sum())
    if k:
        noise[neg] = empty(k, dtype=float64, device=input.device).uniform_(lower, upper).to(input.dtype)
    return noise


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:  # the mean slope
        return OPS["leaky_relu_" if inplace else "leaky_relu"].call(input, (lower + upper) / 2)
    out = input * _rrelu_noise(input.detach(), lower, upper)  # saves the noise only: copy_ may overwrite input
    return input.copy_(out) if inplace else out


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    from .factory import empty_like, zeros_like

    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    # Gumbel(0, 1) noise as -log(Exp(1)), drawn as PyTorch draws it, so a seed gives its numbers
    noise = -empty_like(logits).exponential_().log()
    y_soft = ((logits + noise) / tau).softmax(dim)
    if not hard:
        return y_soft
    # straight-through: the one-hot forward, the soft sample's gradient
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


defcomposite(hardshrink, api="nn.functional.hardshrink", method="hardshrink", samples=lambda rng: [
    sample("default", _r(rng)(3, 4)), sample("lambd_nc", nc(_r(rng)(3, 4)) * 2, 1.0),
    sample("0d", np.array(1.3)), sample("negative_lambd", _r(rng)(5), -0.2)])
defcomposite(softshrink, api="nn.functional.softshrink", method=False, samples=lambda rng: [
    sample("default", _r(rng)(3, 4)), sample("lambd_nc", nc(_r(rng)(3, 4)) * 2, 1.0),
    sample("0d", np.array(-1.3)), sample("zero", _r(rng)(5), 0.0)])
defcomposite(rrelu, api="nn.functional.rrelu", method=False, extra={"nondeterministic": True},
             samples=lambda rng: [
                 sample("eval", _r(rng)(3, 4) + 0.05), sample("train", _r(rng)(3, 4) + 0.05, 0.1, 0.3, True),
                 sample("train_nc", nc(_r(rng)(3, 4)) + 0.05, training=True), sample("equal", _r(rng)(5), 0.2, 0.2)])
defcomposite(gumbel_softmax, api="nn.functional.gumbel_softmax", method=False, extra={"nondeterministic": True},
             samples=lambda rng: [
                 # (hard=True is tested by hand: a straight-through gradient fails gradcheck by design)
                 sample("soft", _r(rng)(3, 4)), sample("tau_dim0", _r(rng)(3, 4), 0.5, dim=0)])


# --- affine grids and grid sampling ---
_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                  "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                  "grid_sample for details.")


def _base_coords(n, align_corners, like):
    """Pixel centres (or corners) of an axis of ``n`` in [-1, 1], built from ops."""
    from .factory import linspace

    c = linspace(-1, 1, n, dtype=like.dtype, device=like.device)
    if n <= 1:
        return c * 0
    return c if align_corners else c * ((n - 1) / n)


def affine_grid(theta, size, align_corners=None):
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = list(size) if not isinstance(size, tuple) else size
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                             f"{theta.shape}.")
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got "
                             f"{theta.shape}.")
        spatial = size[-3:]
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    n = len(spatial)
    # homogeneous coordinates (x, y[, z], 1) of every output position, x along the last dim
    axes = [_base_coords(s, align_corners, theta) for s in spatial]
    parts = []
    for c in range(n):
        d = n - 1 - c  # x is the last spatial dim
        shape = [1] * n
        shape[d] = spatial[d]
        parts.append(axes[d].reshape(shape).expand(*spatial))
    parts.append(OPS["ones_like"].call(parts[0]))
    base = OPS["stack"].call(parts, -1).reshape(1, -1, n + 1)
    grid = base.matmul(theta.transpose(1, 2))
    return grid.reshape([size[0]] + list(spatial) + [n])


def _inside(c, hi):
    """``c`` clipped to [0, hi] with no gradient at or past the borders (PyTorch treats the
    borders as outside for the gradient)."""
    keep = (c > 0) & (c < hi)
    return OPS["where.self"].call(keep, c, c.detach().clamp(0, hi))


def _reflect(c, lo2, hi2):
    """``c`` reflected into [lo2 / 2, hi2 / 2] (bounds doubled, so they stay integers)."""
    if lo2 == hi2:
        return c * 0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    d = c - lo
    d = OPS["where.self"].call(d < 0, -d, d)  # gradient -1 below, +1 from lo up (PyTorch's sign)
    extra = d.fmod(span)
    even = (d / span).floor().fmod(2) == 0
    return OPS["where.self"].call(even, extra + lo, span - extra + lo)


def _source_index(coord, size, padding_mode, align_corners):
    c = (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2
    if padding_mode == "border":
        c = _inside(c, size - 1)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        c = _inside(c, size - 1)
    return c


def _check_grid_sample(input, grid, mode):
    from .index import _tname

    if input.dtype != grid.dtype:
        raise RuntimeError(f"expected scalar type {_tname(input._data)} but found {_tname(grid._data)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != input.dim() - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in last dimension, but got "
                           f"grid with sizes {list(grid.shape)}")
    if input.dim() not in (4, 5) or input.dim() != grid.dim():
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    for d in range(2, input.dim()):
        if input.shape[d] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {d} being empty")
    if mode == "bicubic" and input.dim() != 4:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")


_CUBIC_A = -0.75  # the cubic convolution's parameter, as PyTorch's bicubic modes use


def _cubic_coefficients(t):
    """The weights of the 4 taps at offsets -1, 0, 1, 2 for fractional position ``t`` (Keys'
    cubic convolution, PyTorch's ``get_cubic_upsample_coefficients``): Tensors for grid_sample,
    arrays for interpolate's bicubic matrices."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    u = 1 - t
    return [far(t + 1), near(t), near(u), far(u + 1)]


def _tap_index(i, size, padding_mode, align_corners):
    """An integer tap position of the bicubic stencil after padding (PyTorch's
    ``compute_coordinates``): clipped for border, reflected then clipped for reflection; zeros
    leaves it (the gather reads zero outside)."""
    if padding_mode == "border":
        return i.clamp(0, size - 1)
    if padding_mode == "reflection":
        r = _reflect(i, 0, 2 * (size - 1)) if align_corners else _reflect(i, -1, 2 * size - 1)
        return r.clamp(0, size - 1)
    return i


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sampling at ``grid``'s points as a gather of the 2**n neighbours, the 4x4 stencil
    (bicubic) or the nearest one of each point; the gradients come from the gather (``input``)
    and the weights (``grid``)."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    _check_grid_sample(input, grid, mode)
    N, C, *spatial = input.shape
    n = len(spatial)
    out_spatial = tuple(grid.shape[1:-1])
    # grid[..., 0] indexes the last spatial dim: coords[d] is the source index along dim d
    src = grid.detach() if mode == "nearest" else grid  # nearest: no gradient through the positions
    # bicubic pads each tap, not the point: the point's position is only unnormalised
    pad = "zeros" if mode == "bicubic" else padding_mode
    coords = [_source_index(src[..., n - 1 - d], spatial[d], pad, align_corners) for d in range(n)]
    flat = input.reshape(N, C, -1)
    strides = [math.prod(spatial[d + 1:]) for d in range(n)]

    def tap(idx, weight):  # input at integer positions idx (zero outside), times weight
        ok = None
        lin = None
        for d in range(n):
            o = (idx[d] >= 0) & (idx[d] <= spatial[d] - 1)
            ok = o if ok is None else ok & o
            term = idx[d].clamp(0, spatial[d] - 1).long() * strides[d]
            lin = term if lin is None else lin + term
        lin = lin.reshape(N, 1, -1).expand(N, C, lin[0].numel())
        vals = flat.gather(2, lin)
        w = OPS["where.self"].call(ok, weight, weight.new_zeros(()))
        return vals * w.reshape(N, 1, -1)

    if mode == "nearest":  # weight 1 as 0 * x + 1: PyTorch gives the grid a zero gradient, not none
        out = tap([c.round() for c in coords], grid[..., 0] * 0 + 1)
    elif mode == "bicubic":  # along x for each of the 4 rows, then along y, as PyTorch sums
        lo = [c.detach().floor() for c in coords]
        wy, wx = (_cubic_coefficients(c - f) for c, f in zip(coords, lo, strict=True))
        xs = [_tap_index(lo[1] + k - 1, spatial[1], padding_mode, align_corners) for k in range(4)]
        out = None
        for i in range(4):
            y = _tap_index(lo[0] + i - 1, spatial[0], padding_mode, align_corners)
            row = None
            for k in range(4):
                t = tap([y, xs[k]], wx[k])
                row = t if row is None else row + t
            term = row * wy[i].reshape(N, 1, -1)
            out = term if out is None else out + term
    else:
        lo = [c.detach().floor() for c in coords]
        frac = [c - f for c, f in zip(coords, lo, strict=True)]
        out = None
        for corner in range(2 ** n):
            idx, w = [], None
            for d in range(n):
                up = corner >> (n - 1 - d) & 1
                idx.append(lo[d] + up)
                f = frac[d] if up else 1 - frac[d]
                w = f if w is None else w * f
            t = tap(idx, w)
            out = t if out is None else out + t
    return out.reshape((N, C) + out_spatial)


defcomposite(affine_grid, api="nn.functional.affine_grid", method=False, samples=lambda rng: [
    sample("2d", _r(rng)(2, 2, 3), (2, 3, 4, 5), False), sample("2d_align", _r(rng)(1, 2, 3), [1, 2, 3, 3], True),
    sample("3d", _r(rng)(2, 3, 4), (2, 1, 3, 2, 4), False), sample("unit_size", _r(rng)(1, 2, 3), (1, 1, 1, 3), False)])


def _grid(rng, *shape):
    return rng.uniform(-1.2, 1.2, shape)


defcomposite(grid_sample, api="nn.functional.grid_sample", method=False, samples=lambda rng: [
    sample(f"{mode}_{pad}_{'ac' if ac else 'noac'}", _r(rng)(2, 2, 4, 5), _grid(rng, 2, 3, 3, 2), mode, pad, ac)
    for mode in ("bilinear", "nearest") for pad in ("zeros", "border", "reflection") for ac in (False, True)] + [
    sample("3d_bilinear_reflection", _r(rng)(1, 2, 3, 4, 3), _grid(rng, 1, 2, 3, 2, 3), "bilinear", "reflection",
           False),
    sample("3d_nearest_border", _r(rng)(1, 1, 3, 3, 4), _grid(rng, 1, 2, 2, 2, 3), "nearest", "border", True),
    sample("nc_width1", nc(_r(rng)(1, 2, 3, 1)), _grid(rng, 1, 2, 2, 2), "bilinear", "reflection", True)] + [
    sample(f"bicubic_{pad}_{'ac' if ac else 'noac'}", _r(rng)(2, 2, 4, 5), _grid(rng, 2, 3, 3, 2), "bicubic", pad,
           ac) for pad in ("zeros", "border", "reflection") for ac in (False, True)] + [
    sample("bicubic_small_nc", nc(_r(rng)(1, 2, 2, 3)), _grid(rng, 1, 2, 4, 2) * 1.5, "bicubic", "reflection",
           False)])
