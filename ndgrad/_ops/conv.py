"""Convolution, pooling and interpolation ops (``nn.functional``).

Convolution is one primitive, ``convolution`` (PyTorch's, with its ``transposed`` flag), whose
forward contracts strided windows of the padded input with the weight: im2col and a matmul (in
the batch-last layout where that is cheaper), or one ``einsum`` for grouped convolutions. Its
gradients are two helper ops, ``_conv_backward_input`` (a transposed convolution) and
``_conv_backward_weight`` (a correlation of input and grad); the three are bilinear and their
formulas call each other, so any order of derivative works. Pooling and interpolation keep
their own primitives; interpolation and adaptive pooling are separable matrix products.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from .. import _backend
from .jvp import plus, product
from .registry import defcomposite, defop
from .samples import nc, sample

_TYPE = {np.dtype("float32"): "FloatTensor", np.dtype("float64"): "DoubleTensor", np.dtype("float16"): "HalfTensor"}


def _tup(v, n):
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    v = tuple(int(a) for a in v)
    return v * n if len(v) == 1 else v


# --- convolution kernels on arrays ---
_OUT, _KER = "hwv", "ijk"  # up to 3 spatial dims; none of "ngcd" (the einsums' own)


def _window_view(x, out, step, dil, ksize):
    """View of ``x`` whose last ``len(out)`` dims become (*out, *ksize) windows: window ``i`` starts
    at ``i * step``, its tap ``j`` reads ``j * dil`` further on."""
    n = len(out)
    if type(x) is np.ndarray:  # as_strided: ~17 us less per call than the general path (small conv2d)
        st = x.strides[-n:]
        return as_strided(x, x.shape[:-n] + tuple(out) + tuple(ksize), x.strides[:-n]
                          + tuple(st[i] * step[i] for i in range(n)) + tuple(st[i] * dil[i] for i in range(n)),
                          writeable=False)
    # any xp: as_strided is not dispatched to the array's library, sliding_window_view is (CuPy
    # has it); windows span the dilated kernel, positions step by ``step``, taps by ``dil``: a view
    span = tuple(dil[i] * (ksize[i] - 1) + 1 for i in range(n))
    win = sliding_window_view(x, span, axis=tuple(range(x.ndim - n, x.ndim)))
    return win[(Ellipsis,) + tuple(slice(0, (out[i] - 1) * step[i] + 1, step[i]) for i in range(n))
               + tuple(slice(None, None, d) for d in dil)]


def _windows(xp, out, stride, dilation, ksize, groups):
    """View of padded ``xp`` (N, C, *L) as (N, G, C/G, *out, *K) windows."""
    win = _window_view(xp, out, stride, dilation, ksize)
    return win.reshape((xp.shape[0], groups, xp.shape[1] // groups) + win.shape[2:])


def _cols(win):
    """(N, 1, C, *out, *K) windows as a contiguous (N, C*K, prod(out)) array (im2col per sample:
    each sample's rows are gathered from its own memory, and a matmul with them yields NCHW)."""
    n = (win.ndim - 3) // 2
    axes = (0, 2) + tuple(range(3 + n, 3 + 2 * n)) + tuple(range(3, 3 + n))
    cols = win[:, 0].transpose(tuple(a - (a > 1) for a in axes))
    # reshape copies into C order (np.ascontiguousarray would hand a device array to NumPy)
    return cols.reshape(cols.shape[0], -1, math.prod(win.shape[3:3 + n]))


def _corr(xp, w, stride, dilation, groups):
    """Cross-correlation of padded ``xp`` (N, C, *L) with ``w`` (Cout, C/G, *K)."""
    n = w.ndim - 2
    K = w.shape[2:]
    out = tuple((xp.shape[2 + i] - dilation[i] * (K[i] - 1) - 1) // stride[i] + 1 for i in range(n))
    win = _windows(xp, out, stride, dilation, K, groups)
    o, k = _OUT[:n], _KER[:n]
    if groups == 1:  # one GEMM per sample, (Cout, C*K) @ (C*K, out): the output is NCHW already
        return np.matmul(w.reshape(w.shape[0], -1), _cols(win)).reshape((xp.shape[0], w.shape[0]) + out)
    wg = w.reshape((groups, w.shape[0] // groups) + w.shape[1:])
    y = np.einsum(f"ngc{o}{k},gdc{k}->ngd{o}", win, wg, optimize=True)
    return y.reshape((y.shape[0], w.shape[0]) + out)


def _pad_zeros(x, pad):
    if not any(pad):
        return x
    n = len(pad)
    shape = x.shape[:2] + tuple(x.shape[2 + i] + 2 * pad[i] for i in range(n))
    out = _backend.namespace_of(x).zeros(shape, x.dtype)
    out[(Ellipsis,) + tuple(slice(p, p + s) for p, s in zip(pad, x.shape[2:], strict=True))] = x
    return out


def _conv_fwd(x, w, stride, padding, dilation, groups):
    n = w.ndim - 2
    L, K = x.shape[2:], w.shape[2:]
    out = tuple(L[i] + 2 * padding[i] - dilation[i] * (K[i] - 1) for i in range(n))
    if groups == 1 and max(stride) == 1 and _batch_last_pays(x.shape[0], x.shape[1], w.shape[0], K, out, L):
        cols = _batch_last_cols(_batch_last(x, padding), K, dilation, out)
        y = w.reshape(w.shape[0], -1) @ cols.reshape(w[0].size, -1)  # (Cout, *out, N)
        return _batch_first(y.reshape((w.shape[0],) + out + (x.shape[0],)))
    return _corr(_pad_zeros(x, padding), w, stride, dilation, groups)


# --- batch-last layout: im2col in long runs ---
# Gathering im2col windows from (N, C, *L) copies runs of one output row (14 elements for a
# 14x14 map): NumPy pays ~30 ns per run, which dominates once channels are many and maps
# small. With the batch moved last, (C, *L, N), a window row is one run of row * N elements;
# the price is transposing input and output (~1 ns per element). ``_batch_last_pays`` weighs
# the two (stride 1, groups 1): 2x faster for a 16->32 conv on 14x14 maps, slower for 1->16.
_RUN_COST = 30  # a copied run, in element transposes


def _batch_last_pays(N, c_gather, c_other, K, out, size) -> bool:
    """Whether gathering ``c_gather`` channels into windows of ``K`` taps over ``out`` costs
    more in runs than moving ``c_gather`` maps of ``size`` and ``c_other`` maps of ``out``."""
    runs = N * c_gather * math.prod(K) * math.prod(out[:-1])
    return runs * _RUN_COST > N * (c_gather * math.prod(size) + c_other * math.prod(out))


def _batch_last(x, pad):
    """(N, C, *L) as a zero-padded (C, *(L + 2 pad), N) array."""
    if not any(pad):
        return np.moveaxis(x, 0, -1).copy()  # copy() is C order: no zero fill to overwrite
    n = x.ndim - 2
    out = _backend.namespace_of(x).zeros(
        (x.shape[1],) + tuple(x.shape[2 + i] + 2 * pad[i] for i in range(n)) + (x.shape[0],), x.dtype)
    out[(slice(None),) + tuple(slice(p, p + s) for p, s in zip(pad, x.shape[2:], strict=True))] = \
        np.moveaxis(x, 0, -1)
    return out


def _batch_last_cols(xt, K, dilation, out):
    """Windows of (C, *Lp, N) as a contiguous (C, *K, *out, N) array (stride 1)."""
    cols = _backend.namespace_of(xt).empty((xt.shape[0],) + tuple(K) + tuple(out) + (xt.shape[-1],), xt.dtype)
    for tap in itertools.product(*(range(k) for k in K)):
        cols[(slice(None),) + tap] = xt[(slice(None),) + tuple(
            slice(t * d, t * d + o) for t, d, o in zip(tap, dilation, out, strict=True))]
    return cols


def _batch_first(y):
    """(C, *L, N) back to a contiguous (N, C, *L) array."""
    return np.moveaxis(y, -1, 0).copy()  # copy() is C order (ascontiguousarray would leave a device)


def _conv_input_grad(g, w, size, stride, padding, dilation, groups):
    """The adjoint of ``_conv_fwd`` in ``x``: ``g`` spread back to an input of spatial ``size``.

    ``g`` goes into a zero array at stride ``stride`` (offset by the kernel reach less the
    padding), which is then correlated at stride 1 with the flipped, channel-transposed weight.
    """
    n = w.ndim - 2
    K = w.shape[2:]
    N, cout, cin = g.shape[0], w.shape[0], w.shape[1]
    if groups == 1 and max(stride) == 1 and _batch_last_pays(N, cout, cin, K, tuple(size), g.shape[2:]):
        # the transpose of the batch-last forward: products per tap, added back at their shifts
        gt = _batch_last(g, (0,) * n)
        cols = (w.reshape(cout, -1).T @ gt.reshape(cout, -1)).reshape((cin,) + K + gt.shape[1:])
        dx = _backend.namespace_of(g).zeros((cin,) + tuple(size[i] + 2 * padding[i] for i in range(n)) + (N,), g.dtype)
        for tap in itertools.product(*(range(k) for k in K)):
            dx[(slice(None),) + tuple(slice(t * d, t * d + o) for t, d, o in
                                      zip(tap, dilation, g.shape[2:], strict=True))] += cols[(slice(None),) + tap]
        return _batch_first(dx[(slice(None),) + tuple(slice(p, p + s) for p, s in zip(padding, size, strict=True))])
    shape, dst, src = list(g.shape[:2]), [Ellipsis], [Ellipsis]
    for i in range(n):
        reach = dilation[i] * (K[i] - 1)
        L = size[i] + reach
        off = reach - padding[i]
        o0 = -(-max(0, -off) // stride[i])  # first g entry that lands inside
        o1 = min(g.shape[2 + i], (L - 1 - off) // stride[i] + 1)
        shape.append(L)
        if o1 <= o0:
            dst.append(slice(0, 0))
            src.append(slice(0, 0))
        else:
            dst.append(slice(off + o0 * stride[i], off + (o1 - 1) * stride[i] + 1, stride[i]))
            src.append(slice(o0, o1))
    gp = _backend.namespace_of(g).zeros(shape, g.dtype)
    gp[tuple(dst)] = g[tuple(src)]
    cout, cin_g = w.shape[:2]
    wt = w.reshape((groups, cout // groups, cin_g) + K)[(Ellipsis,) + (slice(None, None, -1),) * n]
    wt = np.swapaxes(wt, 1, 2).reshape((groups * cin_g, cout // groups) + K)
    return _corr(gp, wt, (1,) * n, dilation, groups)


def _conv_weight_grad(g, x, wshape, stride, padding, dilation, groups):
    """Gradient of ``_conv_fwd`` in ``w``: correlation of padded ``x`` with ``g``."""
    n = len(wshape) - 2
    K, out = tuple(wshape[2:]), g.shape[2:]
    if groups == 1 and max(stride) == 1 and _batch_last_pays(x.shape[0], x.shape[1], g.shape[1], K, out, x.shape[2:]):
        cols = _batch_last_cols(_batch_last(x, padding), K, dilation, out)
        gt = _batch_last(g, (0,) * n)
        return (gt.reshape(g.shape[1], -1) @ cols.reshape(-1, gt[0].size).T).reshape(wshape)
    win = _windows(_pad_zeros(x, padding), g.shape[2:], stride, dilation, wshape[2:], groups)
    if groups == 1:  # per sample (Cout, out) @ (out, C*K), summed over the batch
        gw = np.matmul(g.reshape(g.shape[0], g.shape[1], -1), _cols(win).transpose(0, 2, 1))
        return gw.sum(0).reshape(wshape)
    gg = g.reshape((g.shape[0], groups, g.shape[1] // groups) + g.shape[2:])
    o, k = _OUT[:n], _KER[:n]
    return np.einsum(f"ngc{o}{k},ngd{o}->gdc{k}", win, gg, optimize=True).reshape(wshape)


def _params(w, stride, padding, dilation):
    n = w.ndim - 2
    return _tup(stride, n), _tup(padding, n), _tup(dilation, n)


def _convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    if x.dtype != w.dtype:
        raise RuntimeError(f"Input type (ndgrad.{_TYPE.get(x.dtype, x.dtype)}) and weight type "
                           f"(ndgrad.{_TYPE.get(w.dtype, w.dtype)}) should be the same or input should be a "
                           "MKLDNN tensor and weight is a dense tensor")
    s, p, d = _params(w, stride, padding, dilation)
    if transposed:
        op = _tup(output_padding, w.ndim - 2)
        size = [(x.shape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (w.shape[2 + i] - 1) + op[i] + 1
                for i in range(w.ndim - 2)]
        y = _conv_input_grad(x, w, size, s, p, d, groups)
    else:
        y = _conv_fwd(x, w, s, p, d, groups)
    if b is not None:
        y += b.reshape((-1,) + (1,) * (w.ndim - 2))
    return y


def _bias_grad(grad):
    return grad.sum([0] + list(range(2, grad.dim())))


def _conv_to(x, w, stride, padding, dilation, groups, size):
    """``convolution`` cut to spatial ``size``: a transposed conv's output padding of at least the
    stride (allowed when below the dilation) adds positions that no input position reaches."""
    y = convolution(x, w, None, stride, padding, dilation, False, [0], groups)
    if tuple(y.shape[2:]) != tuple(size):
        y = y[(Ellipsis,) + tuple(slice(0, n) for n in size)]
    return y


def _conv_grad_input(grad, weight, input_shape, stride, padding, dilation, transposed, groups):
    if transposed:
        return _conv_to(grad, weight, stride, padding, dilation, groups, input_shape[2:])
    return conv_backward_input(grad, weight, input_shape[2:], stride, padding, dilation, groups)


def _conv_grad_weight(grad, input, weight_shape, stride, padding, dilation, transposed, groups):
    if transposed:
        return conv_backward_weight(input, grad, weight_shape, stride, padding, dilation, groups)
    return conv_backward_weight(grad, input, weight_shape, stride, padding, dilation, groups)


def _cbi_fwd(g, w, size, stride, padding, dilation, groups):
    return _conv_input_grad(g, w, size, *_params(w, stride, padding, dilation), groups)


def _cbw_fwd(g, x, wshape, stride, padding, dilation, groups):
    s, p, d = _tup(stride, len(wshape) - 2), _tup(padding, len(wshape) - 2), _tup(dilation, len(wshape) - 2)
    return _conv_weight_grad(g, x, tuple(wshape), s, p, d, groups)


# In these two records ``grad`` names the op's first input (the convolution's output gradient);
# the incoming gradient is ``grads[0]``.
def _cbi_jvp(go_p, go_t, weight_p, weight_t, input_size, stride, padding, dilation, groups):
    args = (input_size, stride, padding, dilation, groups)
    return product(lambda a, b: conv_backward_input(a, b, *args), go_p, go_t, weight_p, weight_t)


def _cbw_jvp(go_p, go_t, input_p, input_t, weight_size, stride, padding, dilation, groups):
    args = (weight_size, stride, padding, dilation, groups)
    return product(lambda a, b: conv_backward_weight(a, b, *args), go_p, go_t, input_p, input_t)


conv_backward_input = defop(
    "_conv_backward_input(Tensor go, Tensor weight, int[] input_size, int[] stride, int[] padding, "
    "int[] dilation, int groups) -> Tensor", _cbi_fwd,
    {"go": lambda grad, go_shape, weight, stride, padding, dilation, groups:
        _conv_to(grad, weight, stride, padding, dilation, groups, go_shape[2:]),
     "weight": lambda grad, go, weight_shape, stride, padding, dilation, groups:
        conv_backward_weight(go, grad, weight_shape, stride, padding, dilation, groups)},
    jvp=_cbi_jvp,
    method=False, api=False).call
conv_backward_weight = defop(
    "_conv_backward_weight(Tensor go, Tensor input, int[] weight_size, int[] stride, int[] padding, "
    "int[] dilation, int groups) -> Tensor", _cbw_fwd,
    {"go": lambda grad, go_shape, input, stride, padding, dilation, groups:
        _conv_to(input, grad, stride, padding, dilation, groups, go_shape[2:]),
     "input": lambda grad, go, input_shape, stride, padding, dilation, groups:
        conv_backward_input(go, grad, input_shape[2:], stride, padding, dilation, groups)},
    jvp=_cbw_jvp,
    method=False, api=False).call


def _conv_samples(rng):
    def r(*shape):
        return rng.standard_normal(shape)

    return [
        sample("2d", r(2, 2, 5, 5), r(3, 2, 3, 3), r(3), [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
        sample("2d_stride_pad_nobias", r(2, 2, 5, 5), r(3, 2, 3, 2), None, [2, 1], [1, 2], [1, 1], False, [0, 0], 1),
        sample("2d_dil_groups_nc", nc(r(1, 4, 6, 5)), r(4, 2, 2, 2), r(4), [1, 2], [1, 0], [2, 1], False, [0, 0], 2),
        sample("1d", r(2, 3, 6), r(2, 3, 3), r(2), [2], [1], [1], False, [0], 1),
        sample("T2d", r(2, 2, 3, 3), r(2, 3, 3, 3), r(3), [2, 2], [1, 0], [1, 1], True, [1, 0], 1),
        sample("T2d_groups_dil", r(1, 4, 3, 4), r(4, 1, 2, 2), None, [1, 2], [0, 1], [2, 1], True, [0, 1], 2),
        sample("T1d", r(2, 2, 4), r(2, 2, 3), r(2), [3], [1], [1], True, [2], 1),
    ]


def _convolution_jvp(input_p, input_t, weight_p, weight_t, bias_t, stride, padding, dilation,
                     transposed, output_padding, groups):
    """Bilinear in (input, weight), plus the bias broadcast over batch and pixels."""
    args = (stride, padding, dilation, transposed, output_padding, groups)
    r = product(lambda x, w: convolution(x, w, None, *args), input_p, input_t, weight_p, weight_t)
    if bias_t is not None:
        r = plus(r, bias_t.reshape((-1,) + (1,) * (input_p.dim() - 2)))
    return r


convolution = defop(
    "convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
    "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor", _convolution,
    # bias first: its sum reads grad before the two products push it out of the caches
    {"bias": _bias_grad, "input": _conv_grad_input, "weight": _conv_grad_weight},
    jvp=_convolution_jvp,
    method=False, samples=_conv_samples).call


# --- conv1d / conv2d / conv_transpose2d: argument checks around ``convolution`` ---
def _check_conv(name, x, w, b, n, groups, transposed=False):
    if x.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got "
                           f"input of size: {list(x.shape)}")
    if w.dim() != n + 2:
        raise RuntimeError(f"weight should have at least three dimensions" if w.dim() < 3 else
                           f"Expected {n + 2}-dimensional input for {n + 2}-dimensional weight "
                           f"{list(w.shape)}, but got {x.dim()}-dimensional input of size {list(x.shape)} instead")
    batched = x.dim() == n + 2
    shape = list(x.shape) if batched else [1] + list(x.shape)
    if transposed:
        if shape[1] != w.shape[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected input {shape} to "
                               f"have {w.shape[0]} channels, but got {shape[1]} channels instead")
        cout = w.shape[1] * groups
    else:
        if w.shape[0] % groups:
            raise RuntimeError("Given groups=%d, expected weight to be divisible by %d at dimension 0, but got "
                               "weight of size %s instead" % (groups, groups, list(w.shape)))
        if shape[1] != w.shape[1] * groups:
            raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected input{shape} to "
                               f"have {w.shape[1] * groups} channels, but got {shape[1]} channels instead")
        cout = w.shape[0]
    if b is not None and (b.dim() != 1 or b.shape[0] != cout):
        raise RuntimeError(f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with {cout} "
                           f"elements, but got bias of size {list(b.shape)} instead")
    return batched


def _check_geometry(x, w, stride, padding, dilation, n, batched):
    s, p, d = _tup(stride, n), padding, _tup(dilation, n)
    if any(v <= 0 for v in s):
        raise RuntimeError("non-positive stride is not supported")
    if any(v < 0 for v in p):
        raise RuntimeError("negative padding is not supported")
    if any(v <= 0 for v in d):
        raise RuntimeError("dilation should be greater than zero")
    sp = x.shape[-n:]
    padded = [sp[i] + 2 * p[i] for i in range(n)]
    ker = [d[i] * (w.shape[2 + i] - 1) + 1 for i in range(n)]
    if any(k > q for k, q in zip(ker, padded, strict=True)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                           f"size: ({' x '.join(map(str, ker))}). Kernel size can't be greater than actual input size")
    return s, d


def _conv_nd(name, n):
    def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        batched = _check_conv(name, input, weight, bias, n, groups)
        x = input if batched else input.unsqueeze(0)
        d = _tup(dilation, n)
        if isinstance(padding, str):
            if padding == "valid":
                padding = 0
            elif padding != "same":
                raise RuntimeError(f"Invalid padding string: '{padding}'")
            elif any(v != 1 for v in _tup(stride, n)):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            else:  # total padding d*(k-1); an odd total puts the extra element on the right
                tot = [d[i] * (weight.shape[2 + i] - 1) for i in range(n)]
                padding = [t // 2 for t in tot]
                extra = [t % 2 for t in tot]
                if any(extra):
                    pads = []
                    for e in reversed(extra):
                        pads += [0, e]
                    x = _pad(x, pads)
        p = _tup(padding, n)
        s, d = _check_geometry(x, weight, stride, p, d, n, batched)
        y = convolution(x, weight, bias, s, p, d, False, (0,) * n, groups)
        return y if batched else y.squeeze(0)

    conv.__name__ = name
    return conv


def _pad(x, pads):
    from .nn import pad_fn
    return pad_fn(x, pads)


def _conv2d_samples(rng):
    def r(*shape):
        return rng.standard_normal(shape)

    return [sample("basic", r(2, 2, 5, 5), r(3, 2, 3, 3), r(3)),
            sample("stride_pad", r(2, 2, 5, 5), r(3, 2, 3, 3), None, 2, 1),
            sample("dil_groups", nc(r(1, 4, 5, 6)), r(2, 2, 2, 3), r(2), (1, 2), (1, 0), (2, 1), 2),
            sample("same_even", r(1, 2, 4, 5), r(2, 2, 2, 3), None, padding="same"),
            sample("same_dil", r(1, 2, 5, 5), r(2, 2, 3, 3), r(2), padding="same", dilation=2),
            sample("valid", r(2, 2, 4, 4), r(2, 2, 3, 3), padding="valid"),
            sample("unbatched", r(2, 4, 4), r(3, 2, 3, 3), r(3), padding=1)]


def _conv1d_samples(rng):
    def r(*shape):
        return rng.standard_normal(shape)

    return [sample("basic", r(2, 2, 6), r(3, 2, 3), r(3)),
            sample("stride_pad_dil", r(2, 2, 7), r(3, 2, 2), None, 2, 1, 2),
            sample("groups_nc", nc(r(1, 4, 6)), r(4, 2, 3), r(4), groups=2),
            sample("same", r(1, 2, 5), r(2, 2, 4), padding="same"),
            sample("unbatched", r(2, 5), r(3, 2, 3), r(3))]


conv1d = defcomposite(_conv_nd("conv1d", 1), name="conv1d", api="nn.functional.conv1d", method=False,
                      samples=_conv1d_samples).call
conv2d = defcomposite(_conv_nd("conv2d", 2), name="conv2d", api="nn.functional.conv2d", method=False,
                      samples=_conv2d_samples).call


def _conv3d_samples(rng):
    def r(*shape):
        return rng.standard_normal(shape)

    return [sample("basic", r(2, 2, 3, 4, 4), r(3, 2, 2, 2, 3), r(3)),
            sample("stride_pad_dil", r(1, 2, 5, 4, 4), r(2, 2, 2, 2, 2), None, (2, 1, 1), 1, (1, 2, 1)),
            sample("groups_nc", nc(r(1, 4, 3, 3, 3)), r(4, 2, 2, 2, 2), r(4), groups=2),
            sample("unbatched", r(2, 3, 3, 3), r(2, 2, 2, 2, 2), r(2), padding="same")]


conv3d = defcomposite(_conv_nd("conv3d", 3), name="conv3d", api="nn.functional.conv3d", method=False,
                      samples=_conv3d_samples).call

_AXES = ("depth", "height", "width")


def _conv_transpose_nd(name, n):
    def conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        batched = _check_conv(name, input, weight, bias, n, groups, transposed=True)
        x = input if batched else input.unsqueeze(0)
        s, p, op, d = _tup(stride, n), _tup(padding, n), _tup(output_padding, n), _tup(dilation, n)
        if any(v <= 0 for v in s):
            raise RuntimeError("non-positive stride is not supported")
        if any(v < 0 for v in p):
            raise RuntimeError("negative padding is not supported")
        if any(o >= s[i] and o >= d[i] for i, o in enumerate(op)):
            # NOTE(pytorch): 1-d names a height of 0 (it runs as a 2-d convolution)
            m = max(n, 2)
            vals = [(0, 1, 1)] * (m - n) + list(zip(op, s, d, strict=True))
            axes = _AXES[3 - m:]
            msg = " ".join(f"{what}_{a}: {v[j]}" for j, what in enumerate(("output_padding", "stride", "dilation"))
                           for a, v in zip(axes, vals, strict=True))
            raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got {msg}")
        y = convolution(x, weight, bias, s, p, d, True, op, groups)
        return y if batched else y.squeeze(0)

    conv_transpose.__name__ = name
    return conv_transpose


conv_transpose2d = defcomposite(
    _conv_transpose_nd("conv_transpose2d", 2), name="conv_transpose2d", api="nn.functional.conv_transpose2d",
    method=False, samples=lambda rng: [
        sample("basic", rng.standard_normal((2, 2, 3, 3)), rng.standard_normal((2, 3, 3, 3)), rng.standard_normal(3)),
        sample("stride_outpad", rng.standard_normal((2, 2, 3, 3)), rng.standard_normal((2, 2, 3, 2)), None, 2, 1, 1),
        sample("groups_dil", rng.standard_normal((1, 4, 3, 3)), rng.standard_normal((4, 1, 2, 2)),
               rng.standard_normal(2), 1, 0, 1, 2, 2),
        sample("unbatched", rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 2, 2, 2)), None, 2)],
).call
conv_transpose1d = defcomposite(
    _conv_transpose_nd("conv_transpose1d", 1), name="conv_transpose1d", api="nn.functional.conv_transpose1d",
    method=False, samples=lambda rng: [
        sample("basic", rng.standard_normal((2, 2, 4)), rng.standard_normal((2, 3, 3)), rng.standard_normal(3)),
        sample("stride_outpad_dil", rng.standard_normal((1, 2, 4)), rng.standard_normal((2, 2, 2)), None, 2, 1, 1,
               1, 2),
        sample("groups_unbatched", rng.standard_normal((4, 3)), rng.standard_normal((4, 1, 2)), None, 1, 0, 0, 2)],
).call
conv_transpose3d = defcomposite(
    _conv_transpose_nd("conv_transpose3d", 3), name="conv_transpose3d", api="nn.functional.conv_transpose3d",
    method=False, samples=lambda rng: [
        sample("basic", rng.standard_normal((2, 2, 2, 3, 3)), rng.standard_normal((2, 2, 2, 2, 2)),
               rng.standard_normal(2)),
        sample("stride_outpad_groups", rng.standard_normal((1, 2, 2, 2, 3)), rng.standard_normal((2, 1, 2, 2, 2)),
               None, (2, 1, 2), 1, (1, 0, 1), 2)],
).call


# --- pooling ---
def _pool_out(L, k, s, p, d, ceil_mode):
    o = (L + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= L + p:  # the last window must start inside the input or left pad
        o -= 1
    return o


def _pool_geometry(x, kernel_size, stride, padding, dilation, ceil_mode):
    if x.ndim not in (3, 4) or x.size == 0:
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    k = _tup(kernel_size, 2)
    s = _tup(stride, 2) if stride is not None and len(np.atleast_1d(stride)) else k
    p, d = _tup(padding, 2), _tup(dilation, 2)
    if any(v == 0 for v in s):
        raise RuntimeError("stride should not be zero")
    for i in range(2):
        if p[i] > (d[i] * (k[i] - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p[i]}, "
                               f"kernel_size={k[i]} and dilation={d[i]}")
    out = tuple(_pool_out(x.shape[-2 + i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(2))
    if min(out) < 1:
        c = x.shape[-3]
        raise RuntimeError(f"Given input size: ({c}x{x.shape[-2]}x{x.shape[-1]}). Calculated output size: "
                           f"({c}x{out[0]}x{out[1]}). Output size is too small")
    return k, s, p, d, out


def _pool_windows(x, k, s, p, d, out, fill):
    """(..., oh, ow, kh, kw) windows of ``x`` padded with ``fill`` (enough for ceil_mode's last window)."""
    lead = x.shape[:-2]
    need = [(out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 for i in range(2)]
    H, W = x.shape[-2:]
    if p[0] or p[1] or need[0] > H or need[1] > W:
        shape = lead + (max(need[0], H + p[0]), max(need[1], W + p[1]))
        xp = _backend.namespace_of(x).full(shape, fill, x.dtype)
        xp[..., p[0]:p[0] + H, p[1]:p[1] + W] = x
    else:
        xp = x
    return _window_view(xp, out, s, d, k)


def _max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode):
    k, s, p, d, out = _pool_geometry(x, kernel_size, stride, padding, dilation, ceil_mode)
    if (tuple(s) == tuple(k) and not p[0] and not p[1] and tuple(d) == (1, 1)
            and out[0] * k[0] <= x.shape[-2] and out[1] * k[1] <= x.shape[-1]):
        res = _max_pool_tiles(x, k, out)
        if res is not None:
            return res
    win = _pool_windows(x, k, s, p, d, out, -np.inf).reshape(x.shape[:-2] + out + (k[0] * k[1],))
    arg = np.argmax(win, axis=-1)[..., None]
    vals = np.take_along_axis(win, arg, -1)[..., 0]
    arg = arg[..., 0]
    # flat index into the (unpadded) H x W plane, as PyTorch returns it
    xp = _backend.namespace_of(x)
    row = (xp.arange(out[0]) * s[0] - p[0])[:, None] + (arg // k[1]) * d[0]
    col = (xp.arange(out[1]) * s[1] - p[1])[None, :] + (arg % k[1]) * d[1]
    return vals, row * x.shape[-1] + col


def _max_pool_tiles(x, k, out):
    """Max pooling over non-overlapping windows (stride = kernel, no padding: the common case)
    from the k*k strided sub-grids, with no window array. The index is the first position
    holding the maximum (PyTorch's choice); windows holding NaN take the general path."""
    subs = [x[..., i:out[0] * k[0]:k[0], j:out[1] * k[1]:k[1]] for i in range(k[0]) for j in range(k[1])]
    vals = subs[0].copy()
    for v in subs[1:]:
        np.maximum(vals, v, out=vals)
    if vals.dtype.kind in "fc" and np.isnan(vals).any():
        return None
    # first maximum: which = n0 * (1 + n1 * (1 + ...)), n_t = (sub_t != max), in Horner form
    xp = _backend.namespace_of(x)
    which = xp.zeros(vals.shape, np.uint8 if len(subs) < 256 else np.int64)
    for v in reversed(subs[:-1]):
        which += 1
        which *= (v != vals).view(np.uint8) if which.dtype == np.uint8 else (v != vals)
    row = (xp.arange(out[0]) * k[0])[:, None] + which // k[1]
    col = (xp.arange(out[1]) * k[1])[None, :] + which % k[1]
    return vals, row.astype(np.int64) * x.shape[-1] + col


def _pool_scatter(g, indices, shape, unique=False):
    """Add each ``g`` entry at its flat ``indices`` position of its (H*W) plane; shape ``shape``.
    ``unique``: no two entries of a plane share a position (disjoint windows): a plain store."""
    hw = shape[-2] * shape[-1]
    planes = g.size // max(indices.shape[-2] * indices.shape[-1], 1) if g.ndim else 1
    xp = _backend.namespace_of(g)
    flat = (indices.reshape(planes, -1) + (xp.arange(planes) * hw)[:, None]).ravel()
    if unique:
        out = xp.zeros(planes * hw, g.dtype)
        out[flat] = g.reshape(-1)
        return out.reshape(shape)
    out = np.bincount(flat, weights=g.reshape(-1), minlength=planes * hw)
    return out.astype(g.dtype, copy=False).reshape(shape)


def _pool_gather(x, indices):
    flat = x.reshape(x.shape[:-2] + (-1,))
    return np.take_along_axis(flat, indices.reshape(indices.shape[:-2] + (-1,)), -1).reshape(indices.shape)


pool_gather = defop("_pool_gather(Tensor self, Tensor indices) -> Tensor", _pool_gather,
                    {"self": lambda grad, indices, self_shape: pool_scatter(grad, indices, self_shape)},
                    jvp="linear", method=False, api=False).call
pool_scatter = defop("_max_pool2d_backward(Tensor grad_output, Tensor indices, int[] self_size, "
                     "bool unique=False) -> Tensor",
                     lambda g, i, shape, unique: _pool_scatter(g, i, tuple(shape), unique),
                     {"grad_output": lambda grad, indices: pool_gather(grad, indices)},
                     jvp="linear", method=False, api=False).call


def _disjoint(kernel_size, stride, dilation) -> bool:
    """No two pooling windows share an input position (each index appears once)."""
    k, d = _tup(kernel_size, 2), _tup(dilation, 2)
    s = k if not stride else _tup(stride, 2)
    return all(s[i] >= d[i] * (k[i] - 1) + 1 for i in range(2))


def _torch_max_pool(*args, **kwargs):
    import torch

    return torch.nn.functional.max_pool2d_with_indices(*args, **kwargs, return_indices=True)


def _max_pool_samples(rng):
    def r(*shape):
        return rng.standard_normal(shape)

    return [sample("k2", r(2, 2, 4, 4), 2),
            sample("k3_s1_overlap", r(1, 2, 5, 5), 3, 1),
            sample("pad_dil_nc", nc(r(2, 2, 5, 6)), (3, 2), (2, 1), 1, (1, 2)),
            sample("ceil", r(1, 3, 5, 5), 2, 2, 0, 1, True),
            sample("ceil_pad", r(1, 2, 5, 4), 3, 2, 1, 1, True),
            sample("unbatched", r(2, 5, 5), (2, 3), (1, 2))]


max_pool2d_with_indices = defop(
    "max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
    "int[2] dilation=1, bool ceil_mode=False) -> (Tensor values, Tensor indices)", _max_pool2d,
    {"self": lambda grad, indices, self_shape, kernel_size, stride, dilation: pool_scatter(
        grad, indices, self_shape, _disjoint(kernel_size, stride, dilation))},
    jvp=lambda self_t, indices: (pool_gather(self_t, indices), None),
    method=False, api=False, torch=_torch_max_pool, node_name="MaxPool2DWithIndicesBackward0",
    samples=_max_pool_samples).call


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    out, idx = max_pool2d_with_indices(input, kernel_size, () if stride is None else stride, padding, dilation,
                                       ceil_mode)
    return (out, idx) if return_indices else out


defcomposite(max_pool2d, api="nn.functional.max_pool2d", method=False, samples=lambda rng: [
    sample("k2", rng.standard_normal((2, 2, 4, 4)), 2),
    sample("indices", rng.standard_normal((1, 2, 5, 5)), 3, 2, 1, return_indices=True),
    sample("ceil_unbatched", rng.standard_normal((2, 5, 5)), 2, ceil_mode=True)])


def _avg_divisor(x, k, s, p, out, count_include_pad, divisor_override):
    if divisor_override is not None:
        if divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        return divisor_override
    counts, xp = [], _backend.namespace_of(x)
    for i in range(2):
        L = x.shape[-2 + i]
        start = xp.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], L + p[i])
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, L)
        counts.append(end - start)
    return (counts[0][:, None] * counts[1][None, :]).astype(x.dtype)


def _avg_geometry(x, kernel_size, stride, padding, ceil_mode):
    k = _tup(kernel_size, 2)
    p = _tup(padding, 2)
    for i in range(2):  # avg_pool's message names no dilation
        if p[i] > k[i] // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p[i]}, "
                               f"kernel_size={k[i]} and dilation=1")
    return _pool_geometry(x, k, stride, p, 1, ceil_mode)


def _avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    k, s, p, d, out = _avg_geometry(x, kernel_size, stride, padding, ceil_mode)
    win = _pool_windows(x, k, s, p, d, out, 0)
    return win.sum(axis=(-2, -1)) / _avg_divisor(x, k, s, p, out, count_include_pad, divisor_override)


def _avg_pool2d_backward(g, shape, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    xp = _backend.namespace_of(g)
    x = xp.empty(shape, g.dtype)  # only its shape and device are read
    k, s, p, d, out = _avg_geometry(x, kernel_size, stride, padding, ceil_mode)
    g = g / _avg_divisor(x, k, s, p, out, count_include_pad, divisor_override)
    H, W = shape[-2:]
    full = xp.zeros(tuple(shape[:-2]) + (max((out[0] - 1) * s[0] + k[0], H + p[0]),
                                         max((out[1] - 1) * s[1] + k[1], W + p[1])), g.dtype)
    for i in range(k[0]):  # one strided add per kernel offset (k*k whole-array ops)
        for j in range(k[1]):
            full[..., i:i + (out[0] - 1) * s[0] + 1:s[0], j:j + (out[1] - 1) * s[1] + 1:s[1]] += g
    full = full[..., p[0]:p[0] + H, p[1]:p[1] + W]
    return full if full.flags.c_contiguous else full.copy()  # not np.ascontiguousarray: host-only


avg_pool2d_backward = defop(
    "_avg_pool2d_backward(Tensor grad_output, int[] self_size, int[2] kernel_size, int[2] stride, int[2] padding, "
    "bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor", _avg_pool2d_backward,
    {"grad_output": lambda grad, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override:
        avg_pool2d(grad, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)},
    jvp="linear", method=False, api=False).call


def _avg_pool_samples(rng):
    def r(*shape):
        return rng.standard_normal(shape)

    return [sample("k2", r(2, 2, 4, 4), 2),
            sample("k3_s1_pad", r(1, 2, 5, 5), 3, 1, 1),
            sample("pad_exclude_nc", nc(r(2, 2, 5, 6)), (3, 2), (2, 1), (1, 1), False, False),
            sample("ceil", r(1, 3, 5, 5), 2, 2, 0, True),
            sample("ceil_pad_exclude", r(1, 2, 5, 4), 3, 2, 1, True, False),
            sample("divisor", r(1, 2, 4, 4), 2, divisor_override=3),
            sample("unbatched", r(2, 5, 5), (2, 3), (1, 2))]


avg_pool2d = defop(
    "avg_pool2d(Tensor self, int[2] kernel_size, int[2]? stride=None, int[2] padding=0, bool ceil_mode=False, "
    "bool count_include_pad=True, int? divisor_override=None) -> Tensor", _avg_pool2d,
    {"self": lambda grad, self_shape, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override:
        avg_pool2d_backward(grad, self_shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
                            divisor_override)}, jvp="linear",
    method=False, api="nn.functional.avg_pool2d", node_name="AvgPool2DBackward0", samples=_avg_pool_samples).call


# --- adaptive pooling and interpolation: separable (out, in) matrices along H and W ---
def _adaptive_matrix(L, out, dtype):
    i = np.arange(out)
    start, end = (i * L) // out, -((-(i + 1) * L) // out)
    j = np.arange(L)
    m = (j[None, :] >= start[:, None]) & (j[None, :] < end[:, None])
    return (m / (end - start)[:, None]).astype(dtype)


def _nearest_matrix(L, out, scale, dtype, exact=False):
    # NOTE(pytorch): the source index is computed in float32, floor(dst * in/out) or dst / scale;
    # nearest-exact samples at the centres, floor((dst + 0.5) * in/out)
    sc = np.float32(1.0 / scale) if scale else np.float32(L) / np.float32(out)
    dst = np.arange(out, dtype=np.float32) + (np.float32(0.5) if exact else np.float32(0))
    src = np.minimum(np.floor(dst * sc).astype(np.int64), L - 1)
    m = np.zeros((out, L), dtype)
    m[np.arange(out), src] = 1
    return m


def _linear_matrix(L, out, align_corners, scale, dtype):
    dst = np.arange(out, dtype=np.float64)
    if align_corners:
        src = dst * ((L - 1) / (out - 1) if out > 1 else 0.0)
    else:
        sc = 1.0 / scale if scale else L / out
        src = np.maximum(sc * (dst + 0.5) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), L - 1)
    i1 = np.minimum(i0 + 1, L - 1)
    lam = src - i0
    m = np.zeros((out, L), np.float64)
    np.add.at(m, (np.arange(out), i0), 1 - lam)
    np.add.at(m, (np.arange(out), i1), lam)
    return m.astype(dtype)


def _cubic_matrix(L, out, align_corners, scale, dtype):
    """Bicubic weights (Keys, a = -0.75) of the 4 taps around each output's source position, each
    tap clamped into the input (PyTorch's ``upsample_bicubic2d``: a source position before the
    first pixel keeps its fraction, its taps repeat the edge)."""
    from .nn import _cubic_coefficients  # (grid_sample's bicubic weights, the same formula)

    dst = np.arange(out, dtype=np.float64)
    if align_corners:
        src = dst * ((L - 1) / (out - 1) if out > 1 else 0.0)
    else:
        src = (1.0 / scale if scale else L / out) * (dst + 0.5) - 0.5  # not clipped at 0: cubic
    i = np.floor(src)
    m = np.zeros((out, L), np.float64)
    rows = np.arange(out)
    for k, w in enumerate(_cubic_coefficients(src - i)):
        np.add.at(m, (rows, np.clip(i.astype(np.int64) + k - 1, 0, L - 1)), w)
    return m.astype(dtype)


def _separable(x, mats):
    """Apply (out, in) matrices along the last len(mats) dims (made on the host: moved to ``x``'s device)."""
    if type(x) is not np.ndarray:
        dev = _backend.device_of(x)
        mats = [_backend.to_device(m, dev) for m in mats]
    if len(mats) == 3:  # depth first, as a (D, H*W) matrix per plane, then the 2-d rest
        d, h, w = x.shape[-3:]
        x = np.matmul(mats[0], x.reshape(x.shape[:-3] + (d, h * w)))
        x = x.reshape(x.shape[:-2] + (mats[0].shape[0], h, w))
        mats = mats[1:]
    if len(mats) == 2:
        return np.matmul(np.matmul(mats[0], x), mats[1].T)
    return np.matmul(x, mats[0].T)


def _resample_mats(kind, in_size, params, dtype):
    out, extra = params[0], params[1:]
    n = len(in_size)
    if kind == "adaptive":
        return [_adaptive_matrix(in_size[i], out[i], dtype) for i in range(n)]
    scales = extra[-1] if extra[-1] is not None else (None,) * n
    if kind in ("nearest", "nearest-exact"):
        return [_nearest_matrix(in_size[i], out[i], scales[i], dtype, kind == "nearest-exact")
                for i in range(n)]
    make = _cubic_matrix if kind == "cubic" else _linear_matrix
    return [make(in_size[i], out[i], extra[0], scales[i], dtype) for i in range(n)]


def _resample_backward(g, in_size, kind, params):
    mats = _resample_mats(kind, in_size, params, g.dtype)
    return _separable(g, [m.T for m in mats])


def _resample_again(grad, kind, params):
    return {"adaptive": lambda: adaptive_avg_pool2d_op(grad, *params),
            "nearest": lambda: upsample_nearest(grad, *params),
            "nearest-exact": lambda: upsample_nearest_exact(grad, *params),
            "linear": lambda: upsample_linear(grad, *params),
            "cubic": lambda: upsample_bicubic(grad, *params)}[kind]()


resample_backward = defop(
    "_resample_backward(Tensor grad_output, int[] input_size, str kind, Any[] params) -> Tensor",
    lambda g, size, kind, params: _resample_backward(g, tuple(size), kind, params),
    {"grad_output": lambda grad, kind, params: _resample_again(grad, kind, params)}, jvp="linear",
    method=False, api=False).call


def _adaptive_avg_pool2d(x, output_size):
    if x.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(x.shape)}")
    out = tuple(x.shape[-2 + i] if o is None else int(o) for i, o in enumerate(_tup_none(output_size, 2)))
    return _separable(x, _resample_mats("adaptive", x.shape[-2:], (out,), x.dtype))


def _tup_none(v, n):
    if v is None or isinstance(v, (int, np.integer)):
        return (v,) * n
    v = tuple(v)
    return v * n if len(v) == 1 else v


adaptive_avg_pool2d_op = defop(
    "adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor", _adaptive_avg_pool2d,
    {"self": lambda grad, self_shape, output_size: resample_backward(
        grad, self_shape[-2:], "adaptive",
        (tuple(self_shape[-2 + i] if o is None else o for i, o in enumerate(_tup_none(output_size, 2))),))},
    jvp="linear",
    method=False, api="nn.functional.adaptive_avg_pool2d", node_name="AdaptiveAvgPool2DBackward0",
    samples=lambda rng: [sample("shrink", rng.standard_normal((2, 2, 5, 5)), 2),
                         sample("uneven_nc", nc(rng.standard_normal((1, 2, 5, 7))), (3, 4)),
                         sample("none_grow", rng.standard_normal((1, 2, 3, 4)), (None, 6)),
                         sample("unbatched_1", rng.standard_normal((2, 5, 5)), 1)]).call


def _upsample_nearest(x, output_size, scale_factors):
    return _separable(x, _resample_mats("nearest", x.shape[2:], (tuple(output_size), scale_factors), x.dtype))


def _upsample_linear(x, output_size, align_corners, scale_factors, kind="linear"):
    return _separable(x, _resample_mats(kind, x.shape[2:], (tuple(output_size), align_corners, scale_factors),
                                        x.dtype))


upsample_nearest = defop(
    "_upsample_nearest2d(Tensor self, SymInt[] output_size, float[]? scale_factors) -> Tensor", _upsample_nearest,
    {"self": lambda grad, self_shape, output_size, scale_factors: resample_backward(
        grad, self_shape[2:], "nearest", (tuple(output_size), scale_factors))}, jvp="linear",
    method=False, api=False, node_name="UpsampleNearest2DBackward0",
    extra={"node_variants": {(3,): "UpsampleNearest1DBackward0", (5,): "UpsampleNearest3DBackward0"}}).call
upsample_linear = defop(
    "_upsample_bilinear2d(Tensor self, SymInt[] output_size, bool align_corners, float[]? scale_factors) -> Tensor",
    _upsample_linear,
    {"self": lambda grad, self_shape, output_size, align_corners, scale_factors: resample_backward(
        grad, self_shape[2:], "linear", (tuple(output_size), align_corners, scale_factors))},
    jvp="linear", method=False, api=False, node_name="UpsampleBilinear2DBackward0",
    extra={"node_variants": {(3,): "UpsampleLinear1DBackward0", (5,): "UpsampleTrilinear3DBackward0"}}).call

upsample_nearest_exact = defop(
    "_upsample_nearest_exact2d(Tensor self, SymInt[] output_size, float[]? scale_factors) -> Tensor",
    lambda x, output_size, scale_factors: _separable(x, _resample_mats(
        "nearest-exact", x.shape[2:], (tuple(output_size), scale_factors), x.dtype)),
    {"self": lambda grad, self_shape, output_size, scale_factors: resample_backward(
        grad, self_shape[2:], "nearest-exact", (tuple(output_size), scale_factors))}, jvp="linear",
    method=False, api=False, node_name="UpsampleNearestExact2DBackward0",
    extra={"node_variants": {(3,): "UpsampleNearestExact1DBackward0", (5,): "UpsampleNearestExact3DBackward0"}}).call
upsample_bicubic = defop(
    "_upsample_bicubic2d(Tensor self, SymInt[] output_size, bool align_corners, float[]? scale_factors) -> Tensor",
    lambda x, output_size, align_corners, scale_factors: _upsample_linear(
        x, output_size, align_corners, scale_factors, "cubic"),
    {"self": lambda grad, self_shape, output_size, align_corners, scale_factors: resample_backward(
        grad, self_shape[2:], "cubic", (tuple(output_size), align_corners, scale_factors))},
    jvp="linear", method=False, api=False, node_name="UpsampleBicubic2DBackward0").call

_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    n = input.dim() - 2
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if size is not None:
        out = _tup(size, n) if not isinstance(size, (list, tuple)) or len(size) == 1 else tuple(size)
        if len(out) != n:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {list(input.shape[2:])} and output size of {list(out)}. "
                             "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                             "(o1, o2, ...,oK) format.")
        scales = None
    else:
        sf = tuple(float(v) for v in (scale_factor if isinstance(scale_factor, (list, tuple))
                                      else (scale_factor,) * n))
        out = tuple(int(math.floor(input.shape[2 + i] * sf[i])) for i in range(n))
        scales = None if recompute_scale_factor else sf
    if antialias and (mode not in ("bilinear", "bicubic") or n != 2):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                         "4-D tensor as input")
    if antialias:
        raise NotImplementedError(f"interpolate: antialias=True ({mode}) is not implemented in ndgrad")
    if n in (1, 2, 3):
        if mode == "nearest":
            return upsample_nearest(input, out, scales)
        if mode == "nearest-exact":
            return upsample_nearest_exact(input, out, scales)
        if mode == "area":
            from .pooling import adaptive_avg_pool1d, adaptive_avg_pool3d

            pool = {1: adaptive_avg_pool1d, 2: adaptive_avg_pool2d_op, 3: adaptive_avg_pool3d}[n]
            return pool(input, out)
        if mode == _LINEAR[n]:
            return upsample_linear(input, out, align_corners, scales)
        if mode == "bicubic" and n == 2:
            return upsample_bicubic(input, out, align_corners, scales)
        need = {"linear": 3, "bilinear": 4, "trilinear": 5}.get(mode)
        if need is not None:
            raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {need}D input")
    raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) "
                              f"for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                              f"nearest-exact (got {mode})")


defcomposite(interpolate, api="nn.functional.interpolate", method=False, samples=lambda rng: [
    sample("nearest_size", rng.standard_normal((2, 2, 3, 4)), (5, 7)),
    sample("nearest_scale", rng.standard_normal((1, 2, 3, 3)), scale_factor=2),
    sample("nearest_down_nc", nc(rng.standard_normal((1, 2, 5, 6))), size=(3, 4)),
    sample("nearest_1d", rng.standard_normal((2, 2, 4)), scale_factor=1.5),
    sample("bilinear", rng.standard_normal((2, 2, 3, 4)), (5, 6), mode="bilinear"),
    sample("bilinear_ac", rng.standard_normal((1, 2, 3, 3)), scale_factor=2, mode="bilinear", align_corners=True),
    sample("bilinear_down", rng.standard_normal((1, 2, 5, 6)), size=(3, 4), mode="bilinear"),
    sample("bilinear_scale_frac", rng.standard_normal((1, 1, 4, 5)), scale_factor=(1.5, 0.7), mode="bilinear"),
    sample("linear_1d", rng.standard_normal((2, 2, 4)), size=7, mode="linear", align_corners=True),
    sample("bicubic", rng.standard_normal((2, 2, 3, 4)), scale_factor=2, mode="bicubic"),
    sample("bicubic_ac", rng.standard_normal((1, 2, 3, 3)), (5, 4), mode="bicubic", align_corners=True),
    sample("bicubic_down_nc", nc(rng.standard_normal((1, 2, 6, 5))), size=(3, 2), mode="bicubic"),
    sample("bicubic_scale_frac", rng.standard_normal((1, 1, 4, 5)), scale_factor=(1.5, 0.7), mode="bicubic"),
    sample("trilinear", rng.standard_normal((1, 2, 2, 3, 3)), scale_factor=2, mode="trilinear"),
    sample("trilinear_ac", rng.standard_normal((1, 1, 3, 2, 4)), (2, 3, 5), mode="trilinear", align_corners=True),
    sample("nearest_3d", rng.standard_normal((1, 2, 2, 3, 2)), (3, 4, 5)),
    sample("nearest_exact_1d", rng.standard_normal((2, 2, 5)), scale_factor=1.7, mode="nearest-exact"),
    sample("nearest_exact_2d", rng.standard_normal((1, 2, 5, 4)), (3, 6), mode="nearest-exact"),
    sample("nearest_exact_3d", rng.standard_normal((1, 1, 3, 4, 2)), scale_factor=1.5, mode="nearest-exact"),
    sample("area_1d", rng.standard_normal((2, 2, 7)), 3, mode="area"),
    sample("area_2d", rng.standard_normal((1, 2, 6, 5)), scale_factor=0.5, mode="area"),
    sample("area_3d", rng.standard_normal((1, 1, 4, 5, 3)), (2, 3, 2), mode="area")])
