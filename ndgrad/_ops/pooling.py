"""Pooling that PyTorch has and the convolution module's 2-d primitives do not cover, as
composites: 1-d pooling runs the 2-d primitives on a height-1 plane; 3-d pooling and adaptive
max pooling gather window taps with ``index_select`` (their gradients come from it and
``max``); LP pooling is an average of powers; max unpooling scatters the pooled values back to
their argmax positions. ``_ntup``, ``_window_idx`` and ``_r`` serve ``nn.py``'s fold/unfold too.
"""

from __future__ import annotations

import math

import numpy as np

from .registry import OPS, defcomposite
from .samples import nc, sample


# --- pooling in 1-d and 3-d: 1-d runs the 2-d ops on a height-1 plane; 3-d (and adaptive max)
# gathers each window's taps with ``index_select`` along every spatial dim, then reduces ---
def _torch_pool_out(L, k, s, p, d, ceil_mode):
    o = (L + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= L + p:  # the last window must start inside the input or left pad
        o -= 1
    return o


def _ntup(v, n):
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    v = tuple(int(a) for a in v)
    return v * n if len(v) == 1 else v


def _pool_nd_geometry(x, n, kernel_size, stride, padding, dilation, ceil_mode, name):
    if x.dim() not in (n + 1, n + 2) or x.numel() == 0:
        raise RuntimeError(f"non-empty {n + 1}D or {n + 2}D (batch mode) tensor expected for input")
    k = _ntup(kernel_size, n)
    s = _ntup(stride, n) if stride is not None and len(np.atleast_1d(stride)) else k
    p, d = _ntup(padding, n), _ntup(dilation, n)
    if any(v == 0 for v in s):
        raise RuntimeError("stride should not be zero")
    for i in range(n):
        if p[i] > (d[i] * (k[i] - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p[i]}, "
                               f"kernel_size={k[i]} and dilation={d[i] if name == 'max' else 1}")
    L = tuple(x.shape[-n:])
    out = tuple(_torch_pool_out(L[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(n))
    if min(out) < 1:
        c = x.shape[-n - 1]
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (c,) + L))}). Calculated output size: "
                           f"({'x'.join(map(str, (c,) + out))}). Output size is too small")
    return k, s, p, d, out


def _gather_windows(x, idx):
    """(..., *out, prod(k)) taps of ``x``'s last ``len(idx)`` dims; ``idx[i]`` is an (out_i, k_i)
    int64 tensor of positions along spatial dim ``i`` (made by ops: a capture records no constant)."""
    n, lead = len(idx), x.dim() - len(idx)
    for i, ix in enumerate(idx):
        d = lead + 2 * i  # each earlier dim became two
        x = x.index_select(d, ix.reshape(-1))
        x = x.unflatten(d, tuple(ix.shape))
    x = x.permute(list(range(lead)) + [lead + 2 * i for i in range(n)] + [lead + 2 * i + 1 for i in range(n)])
    return x.reshape(tuple(x.shape[:lead + n]) + (-1,))


def _flat_index(arg, idx, offsets, sizes):
    """Flat positions in the (unpadded) spatial plane of the taps ``arg`` picked per window."""
    from .factory import arange

    n, flat = len(idx), 0
    ks = [ix.shape[1] for ix in idx]
    for i, ix in enumerate(idx):
        tap = (arg // math.prod(ks[i + 1:])) % ks[i]
        o = arange(ix.shape[0], device=arg.device).reshape((-1,) + (1,) * (n - 1 - i))
        flat = flat * sizes[i] + (ix.reshape(-1)[o * ks[i] + tap] - offsets[i])
    return flat


def _window_idx(out, k, s, d, like):
    from .factory import arange

    return (arange(out, device=like.device)[:, None] * s + arange(k, device=like.device)[None, :] * d)


def _padded(x, n, p, out, k, s, d, value):
    """``x`` padded by ``p`` before and as far as the last window reaches after (cropped if less)."""
    pads = []
    for i in reversed(range(n)):
        need = (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1
        pads += [p[i], need - x.shape[-n + i] - p[i]]
    return OPS["pad"].call(x, pads, "constant", value) if any(pads) else x  # nn.py defines pad


def _max_pool_nd(x, n, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    k, s, p, d, out = _pool_nd_geometry(x, n, kernel_size, stride, padding, dilation, ceil_mode, "max")
    idx = [_window_idx(out[i], k[i], s[i], d[i], x) for i in range(n)]
    vals, arg = _gather_windows(_padded(x, n, p, out, k, s, d, float("-inf")), idx).max(-1)
    if not return_indices:
        return vals
    return vals, _flat_index(arg, idx, p, x.shape[-n:])


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    from .conv import max_pool2d_with_indices

    if input.dim() not in (2, 3):
        raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got:{list(input.shape)}")
    (k,), (p,), (d,) = _ntup(kernel_size, 1), _ntup(padding, 1), _ntup(dilation, 1)
    if p > k // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got padding={p} and "
                           f"kernel_size={k}")
    s1 = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else _ntup(stride, 1)[0]
    if _torch_pool_out(input.shape[-1], k, s1, p, d, ceil_mode) < 1:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: "
                           f"{_torch_pool_out(input.shape[-1], k, s1, p, d, ceil_mode)}")
    st = () if stride is None or (isinstance(stride, (list, tuple)) and not stride) else (1, _ntup(stride, 1)[0])
    out, idx = max_pool2d_with_indices(input.unsqueeze(-2), (1, _ntup(kernel_size, 1)[0]), st,
                                       (0, _ntup(padding, 1)[0]), (1, _ntup(dilation, 1)[0]), ceil_mode)
    out = out.squeeze(-2)
    return (out, idx.squeeze(-2)) if return_indices else out


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool_nd(input, 3, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _r(rng):
    return lambda *shape: rng.standard_normal(shape)


defcomposite(max_pool1d, api="nn.functional.max_pool1d", method=False, samples=lambda rng: [
    sample("k2", _r(rng)(2, 3, 6), 2),
    sample("pad_dil_ceil_indices", _r(rng)(1, 2, 7), 3, 2, 1, 2, True, True),
    sample("unbatched_nc", nc(_r(rng)(2, 5)), 3, 1)])
defcomposite(max_pool3d, api="nn.functional.max_pool3d", method=False, samples=lambda rng: [
    sample("k2", _r(rng)(2, 2, 4, 4, 4), 2),
    sample("pad_dil_ceil_indices", _r(rng)(1, 2, 5, 4, 5), (3, 2, 2), (2, 1, 2), 1, (1, 1, 2), True, True),
    sample("unbatched_overlap", _r(rng)(2, 3, 4, 3), 2, 1, return_indices=True)])


def _avg_counts(L, k, s, p, out, count_include_pad, like):
    from .factory import arange

    start = arange(out, device=like.device) * s - p
    end = (start + k).clamp(max=L + p)
    if not count_include_pad:
        start, end = start.clamp(min=0), end.clamp(max=L)
    return end - start


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    from .conv import avg_pool2d

    if input.dim() not in (2, 3):
        raise RuntimeError(_dims_message(input, "avg_pool1d"))
    st = None if stride is None or (isinstance(stride, (list, tuple)) and not stride) else (1, _ntup(stride, 1)[0])
    return avg_pool2d(input.unsqueeze(-2), (1, _ntup(kernel_size, 1)[0]), st, (0, _ntup(padding, 1)[0]),
                      ceil_mode, count_include_pad).squeeze(-2)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    n = 3
    k, s, p, d, out = _pool_nd_geometry(input, n, kernel_size, stride, padding, 1, ceil_mode, "avg")
    idx = [_window_idx(out[i], k[i], s[i], 1, input) for i in range(n)]
    total = _gather_windows(_padded(input, n, p, out, k, s, d, 0.0), idx).sum(-1)
    if divisor_override is not None:
        if divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        return total / divisor_override
    c = [_avg_counts(input.shape[-n + i], k[i], s[i], p[i], out[i], count_include_pad, input) for i in range(n)]
    return total / (c[0][:, None, None] * c[1][None, :, None] * c[2][None, None, :]).to(input.dtype)


defcomposite(avg_pool1d, api="nn.functional.avg_pool1d", method=False, samples=lambda rng: [
    sample("k2", _r(rng)(2, 3, 6), 2),
    sample("pad_exclude_ceil", _r(rng)(1, 2, 7), 3, 2, 1, True, False),
    sample("unbatched_nc", nc(_r(rng)(2, 5)), 3, 1, 1)])
defcomposite(avg_pool3d, api="nn.functional.avg_pool3d", method=False, samples=lambda rng: [
    sample("k2", _r(rng)(2, 2, 4, 4, 4), 2),
    sample("pad_ceil_exclude", _r(rng)(1, 2, 5, 4, 5), (3, 2, 2), (2, 1, 2), 1, True, False),
    sample("pad_include", _r(rng)(1, 1, 4, 4, 3), 3, 2, 1),
    sample("divisor_unbatched", _r(rng)(2, 3, 4, 3), 2, 1, divisor_override=3)])


def _lp_pool(avg, n, input, norm_type, kernel_size, stride, ceil_mode):
    k = _ntup(kernel_size, n)
    out = avg(input.pow(norm_type), k, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(math.prod(k)).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(avg_pool1d, 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    from .conv import avg_pool2d

    return _lp_pool(avg_pool2d, 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(avg_pool3d, 3, input, norm_type, kernel_size, stride, ceil_mode)


def _pos(rng, *shape):
    return rng.uniform(0.5, 2.0, shape)


defcomposite(lp_pool1d, api="nn.functional.lp_pool1d", method=False, samples=lambda rng: [
    sample("p2", _pos(rng, 2, 3, 6), 2.0, 2), sample("p3_stride", _pos(rng, 1, 2, 7), 3, 3, 2, True)])
defcomposite(lp_pool2d, api="nn.functional.lp_pool2d", method=False, samples=lambda rng: [
    sample("p2", _pos(rng, 2, 2, 4, 4), 2.0, 2), sample("p1_5_stride", _pos(rng, 1, 2, 5, 5), 1.5, (2, 3), 1)])
defcomposite(lp_pool3d, api="nn.functional.lp_pool3d", method=False, samples=lambda rng: [
    sample("p2", _pos(rng, 1, 2, 4, 4, 4), 2.0, 2)])


# --- adaptive pooling: window i spans [floor(i L / o), ceil((i + 1) L / o)) ---
def _dims_message(x, name):
    return (f"Expected 2 to 3 dimensions, but got {x.dim()}-dimensional tensor for argument #1 'self' (while "
            f"checking arguments for {name})")


def _adaptive_out(x, n, output_size, name):
    if x.dim() not in (n + 1, n + 2):
        if n == 1:
            raise RuntimeError(_dims_message(x, name))
        colon = ":" if "max" in name else ""
        raise RuntimeError(f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got{colon} {list(x.shape)}")
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size,) * n
    output_size = tuple(output_size)
    if len(output_size) != n:
        raise RuntimeError(f"{name}(): internal error: output_size.size() must be {n}")
    return tuple(x.shape[-n + i] if o is None else int(o) for i, o in enumerate(output_size))


def _adaptive_idx(L, o, like):
    from .factory import arange

    minimum = OPS["minimum"].call
    k = max((-(-(i + 1) * L // o)) - (i * L) // o for i in range(o)) if o else 0  # the widest window
    i = arange(o, device=like.device)
    start, end = (i * L) // o, -((-(i + 1) * L) // o)
    # taps past a window's end repeat its last position: the first maximum is still the window's own
    return minimum(start[:, None] + arange(k, device=like.device)[None, :], end[:, None] - 1)


def _adaptive_max_nd(x, n, output_size, return_indices, name):
    out = _adaptive_out(x, n, output_size, name)
    idx = [_adaptive_idx(x.shape[-n + i], out[i], x) for i in range(n)]
    vals, arg = _gather_windows(x, idx).max(-1)
    return (vals, _flat_index(arg, idx, (0,) * n, x.shape[-n:])) if return_indices else vals


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max_nd(input, 1, output_size, return_indices, "adaptive_max_pool1d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max_nd(input, 2, output_size, return_indices, "adaptive_max_pool2d")


def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _adaptive_max_nd(input, 3, output_size, return_indices, "adaptive_max_pool3d")


def adaptive_avg_pool1d(input, output_size):
    from .conv import adaptive_avg_pool2d_op

    (o,) = _adaptive_out(input, 1, output_size, "adaptive_avg_pool1d")
    return adaptive_avg_pool2d_op(input.unsqueeze(-2), (1, o)).squeeze(-2)


def adaptive_avg_pool3d(input, output_size):
    """The 2-d op over (H, W), then again over (D, oh * ow) with that second dim kept."""
    from .conv import adaptive_avg_pool2d_op

    od, oh, ow = _adaptive_out(input, 3, output_size, "adaptive_avg_pool3d")
    D, H, W = input.shape[-3:]
    lead = tuple(input.shape[:-3])
    y = adaptive_avg_pool2d_op(input.reshape((-1, D, H, W)), (oh, ow))
    y = adaptive_avg_pool2d_op(y.reshape((-1, D, oh * ow)), (od, oh * ow))
    return y.reshape(lead + (od, oh, ow))


defcomposite(adaptive_max_pool1d, api="nn.functional.adaptive_max_pool1d", method=False, samples=lambda rng: [
    sample("uneven", _r(rng)(2, 3, 7), 3), sample("indices_unbatched", nc(_r(rng)(2, 5)), 4, True)])
defcomposite(adaptive_max_pool2d, api="nn.functional.adaptive_max_pool2d", method=False, samples=lambda rng: [
    sample("uneven", _r(rng)(2, 2, 5, 7), (3, 4)), sample("indices_none", _r(rng)(1, 2, 4, 5), (None, 2), True),
    sample("unbatched_1", _r(rng)(2, 5, 5), 1, True)])
defcomposite(adaptive_max_pool3d, api="nn.functional.adaptive_max_pool3d", method=False, samples=lambda rng: [
    sample("uneven_indices", _r(rng)(1, 2, 3, 5, 4), (2, 3, 2), True)])
defcomposite(adaptive_avg_pool1d, api="nn.functional.adaptive_avg_pool1d", method=False, samples=lambda rng: [
    sample("uneven", _r(rng)(2, 3, 7), 3), sample("grow_unbatched", _r(rng)(2, 3), 5)])
defcomposite(adaptive_avg_pool3d, api="nn.functional.adaptive_avg_pool3d", method=False, samples=lambda rng: [
    sample("uneven", _r(rng)(2, 2, 3, 5, 4), (2, 3, 2)), sample("none_unbatched", _r(rng)(2, 4, 3, 3), (None, 2, 1))])

# --- max unpooling: a scatter of the pooled values to their argmax positions ---
def _unpool_output_size(input, k, s, p, output_size):
    n = len(k)
    default = [(input.shape[-n + d] - 1) * s[d] + k[d] - 2 * p[d] for d in range(n)]
    if output_size is None:
        return default
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    if len(output_size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a length "
                         f"of '{len(output_size)}'")
    for d in range(n):
        lo, hi = default[d] - s[d], default[d] + s[d]
        if not lo < output_size[d] < hi:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})')
    return list(output_size)


def _max_unpool_nd(input, indices, n, kernel_size, stride, padding, output_size):
    k = _ntup(kernel_size, n)
    s = k if stride is None else _ntup(stride, n)
    size = _unpool_output_size(input, k, s, _ntup(padding, n), output_size)
    if n == 1:  # PyTorch runs the 2-d kernel on a width-1 plane: its messages say so
        size, input, indices = size + [1], input.unsqueeze(-1), indices.unsqueeze(-1)
        n = 2
    if indices.dtype.is_floating_point or indices.dtype.itemsize != 8:
        from .index import _tname

        raise RuntimeError(f"elements in indices should be type int64 but got: {_tname(indices._data)}")
    if indices.shape != input.shape:
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"Input to max_unpooling{n}d should be a {n + 1}d or {n + 2}d Tensor, but got a tensor "
                           f"with {input.dim()} dimensions.")
    lead, plane = tuple(input.shape[:-n]), math.prod(size)
    flat = indices.flatten(-n) if n > 1 else indices
    bad = (flat < 0) | (flat >= plane)
    if bool(bad.any()):
        raise RuntimeError(f"Found an invalid max index: {int(flat[bad][-1])} (output volumes are of size "
                           f"{'x'.join(map(str, size))})")
    out = input.new_zeros(lead + (plane,)).scatter(-1, flat, input.flatten(-n))
    return out.reshape(lead + tuple(size))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool_nd(input, indices, 1, kernel_size, stride, padding, output_size).squeeze(-1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool_nd(input, indices, 2, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool_nd(input, indices, 3, kernel_size, stride, padding, output_size)


def _pooled(rng, shape, k):
    """A max-pooled array and its indices (no ties, so PyTorch's argmax is NumPy's)."""
    from .._factories import as_tensor

    x = as_tensor(rng.permutation(math.prod(shape)).reshape(shape).astype(np.float64))
    pool = {3: max_pool1d, 4: OPS["max_pool2d"].call, 5: max_pool3d}[len(shape)]
    v, i = pool(x, k, return_indices=True)
    return rng.standard_normal(v.shape), i.numpy()


defcomposite(max_unpool1d, api="nn.functional.max_unpool1d", method=False, samples=lambda rng: [
    sample("k2", *_pooled(rng, (2, 3, 6), 2), 2), sample("out_size", *_pooled(rng, (1, 2, 7), 2), 2, 2, 0, (7,))])
defcomposite(max_unpool2d, api="nn.functional.max_unpool2d", method=False, samples=lambda rng: [
    sample("k2", *_pooled(rng, (2, 2, 4, 4), 2), 2),
    sample("out_size_nc", *_pooled(rng, (1, 2, 5, 5), 2), (2, 2), None, 0, (1, 2, 5, 5))])
defcomposite(max_unpool3d, api="nn.functional.max_unpool3d", method=False, samples=lambda rng: [
    sample("k2", *_pooled(rng, (1, 2, 4, 4, 4), 2), 2)])
