"""Normalization, embedding, one-hot and attention ops (``nn.functional``).

The norms (layer, batch, group, RMS) are primitives: a fused NumPy forward, and one backward
formula per op that recomputes the statistics from the input with ndgrad ops (a few large array
ops, and differentiable again, so double backward works). ``batch_norm`` updates the running
statistics in place in its forward, as PyTorch does. Attention is a composite of matmul/softmax.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _backend
from .. import _dtype as D
from .index import _add_rows
from .reduce import sum_keep
from .registry import defcomposite, defop
from .samples import nc, sample


# --- shared pieces of the norm formulas (ndgrad ops, so they differentiate again) ---
def _standardize(x, dims, eps):
    """``(x - mean) * rstd`` over ``dims`` and ``rstd``, both keeping dims."""
    xc = x - x.mean(dims, keepdim=True)
    rstd = ((xc * xc).mean(dims, keepdim=True) + eps).rsqrt()
    return xc * rstd, rstd


def _norm_input_grad(g, xhat, rstd, dims):
    """Gradient of ``xhat = standardize(x)`` given ``g = dL/dxhat``: the fused textbook form."""
    return rstd * (g - g.mean(dims, keepdim=True) - xhat * (g * xhat).mean(dims, keepdim=True))


def _sum_except(t, keep):
    dims = tuple(d for d in range(t.dim()) if d not in keep)
    return t.sum(dims) if dims else t


def _mean_keep(a, axes):
    """``a.mean(axes, keepdims=True)`` on arrays (rows through ``reduce.sum_keep``)."""
    if type(axes) is int:
        axes = (axes,)
    if len(axes) != 1:
        return a.mean(axis=axes, keepdims=True)
    return sum_keep(a, axes[0], 1.0 / a.shape[axes[0]])


def _np_standardize(x, axes, eps):
    xc = x - _mean_keep(x, axes)
    var = _mean_keep(xc * xc, axes)
    xc *= 1.0 / np.sqrt(var + eps)
    return xc


def _affine(out, weight, bias, shape=None):
    if weight is not None:
        out *= weight if shape is None else weight.reshape(shape)
    if bias is not None:
        out += bias if shape is None else bias.reshape(shape)
    return out


# --- layer_norm ---
def _check_normalized(x, normalized_shape, weight, bias, star="*, "):
    ns = list(normalized_shape)
    if not ns:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                           f"least one element, but got normalized_shape = {ns}")
    for nm, t in (("weight", weight), ("bias", bias)):
        if t is not None and list(t.shape) != ns:
            raise RuntimeError(f"Expected {nm} to be of same shape as normalized_shape, but got {nm} of shape "
                               f"{list(t.shape)} and normalized_shape = {ns}")
    if x.ndim < len(ns) or list(x.shape[x.ndim - len(ns):]) != ns:
        inner = ", ".join(map(str, ns))
        raise RuntimeError(f"Given normalized_shape={ns}, expected input with shape [{star}{inner}], but got "
                           f"input of size{list(x.shape)}")
    return tuple(range(x.ndim - len(ns), x.ndim))


def _layer_norm(x, normalized_shape, weight, bias, eps):
    axes = _check_normalized(x, normalized_shape, weight, bias)
    return _affine(_np_standardize(x, axes, eps), weight, bias)


def _layer_norm_grad(grad, input, weight, normalized_shape, eps, needs):
    outs = native_layer_norm_backward(grad, input, normalized_shape, weight, eps, needs)
    return tuple(o if n else None for o, n in zip(outs, needs, strict=True))


def _layer_norm_backward(g, x, normalized_shape, weight, eps, output_mask):
    """layer_norm's three gradients in a few fused array passes. A masked-off gradient is an
    empty array: an op's outputs are tensors, never None."""
    dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    xc = x - _mean_keep(x, dims)
    rstd = 1.0 / np.sqrt(_mean_keep(xc * xc, dims) + eps)
    xc *= rstd  # xhat
    outer = tuple(range(x.ndim - len(dims)))
    empty = _backend.namespace_of(g).empty((0,), g.dtype)
    dw = np.sum(g * xc, axis=outer) if output_mask[1] else empty
    db = np.sum(g, axis=outer) if output_mask[2] else empty
    dx = empty
    if output_mask[0]:
        gw = g * weight if weight is not None else g.copy()
        proj = _mean_keep(gw * xc, dims)
        gw -= _mean_keep(gw, dims)
        xc *= proj
        gw -= xc
        gw *= rstd
        dx = gw
    return dx, dw, db


def _sum_terms(terms):
    terms = [t for t in terms if t is not None]
    return sum(terms[1:], terms[0]) if terms else None


def _layer_norm_double(grads, grad_out, input, weight, normalized_shape, eps, output_mask, needs):
    """The vjp of ``(dx, dw, db)`` (layer_norm's second order). Per row, with ``gw = g * w``:
    ``dx = M gw``, ``M = r (I - 1 1^T / n - xhat xhat^T / n)`` symmetric, so ``d/dg`` applies
    ``M`` to the incoming ``Gx``; ``d/dx`` goes through ``xhat`` and ``r``."""
    n = input.dim()
    dims = tuple(range(n - len(normalized_shape), n))
    Gx, Gw, Gb = (G if m else None for G, m in zip(grads, output_mask, strict=True))
    xhat, rstd = _standardize(input, dims, eps)
    tx = None if Gx is None else _norm_input_grad(Gx, xhat, rstd, dims)  # M Gx
    dg = dx = dw = None
    if needs[0]:
        dg = _sum_terms((tx if tx is None or weight is None else tx * weight,
                         None if Gw is None else xhat * Gw,
                         None if Gb is None else Gb.expand(grad_out.shape)))
    if needs[1]:
        terms = [None if Gw is None else _norm_input_grad(grad_out * Gw, xhat, rstd, dims)]
        if Gx is not None:
            def mean(t):
                return t.mean(dims, keepdim=True)

            gw = grad_out if weight is None else grad_out * weight
            a, b = mean(gw * xhat), mean(Gx * xhat)
            e = gw * b + Gx * a
            s = mean(Gx * gw) - mean(Gx) * mean(gw) - 3 * a * b
            terms.append(-(rstd * rstd) * (e - mean(e) + xhat * s))
        dx = _sum_terms(terms)
    if needs[2] and tx is not None:
        dw = _sum_except(grad_out * tx, dims)
    return dg, dx, dw


def _layer_norm_backward_samples(rng):
    def r(*s):
        return rng.standard_normal(s)

    return [sample("affine", r(3, 4), r(3, 4), [4], r(4), 1e-5, (True, True, True)),
            sample("no_weight_2dims", r(2, 3, 4), r(2, 3, 4), (3, 4), None, 1e-5, (True, False, True)),
            sample("input_only_nc", nc(r(2, 5)), r(2, 5), [5], r(5), 1e-3, (True, False, False)),
            sample("weight_only", r(3, 4), r(3, 4), [4], r(4), 1e-5, (False, True, False))]


native_layer_norm_backward = defop(
    "native_layer_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor? weight, "
    "float eps, bool[3] output_mask) -> (Tensor, Tensor, Tensor)", _layer_norm_backward,
    {("grad_out", "input", "weight"): _layer_norm_double}, method=False, api=False,
    samples=_layer_norm_backward_samples).call


def _layer_norm_samples(rng):
    def r(*s):
        return rng.standard_normal(s)

    return [sample("affine", r(3, 4), [4], r(4), r(4)),
            sample("no_affine_2dims", r(2, 3, 4), (3, 4)),
            sample("weight_only_nc", nc(r(2, 5)), [5], r(5), eps=1e-3),
            sample("bias_only", r(3, 4), [4], None, r(4)),
            sample("1d", r(5), [5], r(5), r(5)),
            sample("3d_all", r(2, 2, 3), [2, 2, 3], r(2, 2, 3), r(2, 2, 3))]


layer_norm = defop("layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
                   "float eps=1e-05) -> Tensor", _layer_norm,
                   {("input", "weight", "bias"): _layer_norm_grad}, node_name="NativeLayerNormBackward0",
                   api="nn.functional.layer_norm", method=False, samples=_layer_norm_samples).call


# --- rms_norm ---
def _rms_eps(dtype, eps):
    if eps is not None:
        return eps
    # NOTE(pytorch): half and bfloat16 take float32's eps, the type their kernels compute in
    return float(np.finfo(np.float32 if np.dtype(dtype).itemsize == 2 else dtype).eps)


def _rms_norm(x, normalized_shape, weight, eps):
    axes = _check_normalized(x, normalized_shape, weight, None, star="*")
    out = x * (1.0 / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + _rms_eps(x.dtype, eps)))
    return _affine(out, weight, None)


def _rms_norm_grad(grad, input, weight, normalized_shape, eps, needs):
    n = input.dim()
    dims = tuple(range(n - len(normalized_shape), n))
    rstd = ((input * input).mean(dims, keepdim=True) + _rms_eps(input.dtype.np, eps)).rsqrt()
    xhat = input * rstd
    g = grad if weight is None else grad * weight
    dx = rstd * (g - xhat * (g * xhat).mean(dims, keepdim=True)) if needs[0] else None
    dw = _sum_except(grad * xhat, dims) if needs[1] else None
    return dx, dw


def _rms_norm_samples(rng):
    def r(*s):
        return rng.standard_normal(s)

    return [sample("affine", r(3, 4), [4], r(4)),
            sample("no_weight_2dims", r(2, 3, 4), (3, 4)),
            sample("eps_nc", nc(r(2, 5)), [5], r(5), eps=1e-2),
            sample("1d", r(5), [5], r(5))]


rms_norm = defop("rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor",
                 _rms_norm, {("input", "weight"): _rms_norm_grad}, node_name="RmsNormBackward0",
                 api="nn.functional.rms_norm", method=False, samples=_rms_norm_samples).call


# --- group_norm ---
def _group_norm(x, num_groups, weight, bias, eps):
    if x.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {x.ndim}")
    n, c = x.shape[:2]
    if c % num_groups:
        raise RuntimeError("Expected number of channels in input to be divisible by num_groups, but got input "
                           f"of shape {list(x.shape)} and num_groups={num_groups}")
    for nm, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.shape[0] != c):
            raise RuntimeError(f"Expected {nm} to be a vector of size equal to the number of channels in input, "
                               f"but got {nm} of shape {list(t.shape)} and input of shape {list(x.shape)}")
    out = _np_standardize(x.reshape(n, num_groups, -1), 2, eps).reshape(x.shape)
    return _affine(out, weight, bias, (c,) + (1,) * (x.ndim - 2))


def _group_norm_grad(grad, input, weight, num_groups, eps, needs):
    shape = input.shape
    n, c = shape[:2]
    xhat, rstd = _standardize(input.reshape(n, num_groups, -1), (2,), eps)
    g = grad if weight is None else grad * weight.reshape((c,) + (1,) * (len(shape) - 2))
    dx = _norm_input_grad(g.reshape(n, num_groups, -1), xhat, rstd, (2,)).reshape(shape) if needs[0] else None
    xhat = xhat.reshape(shape)
    dw = _sum_except(grad * xhat, (1,)) if needs[1] else None
    db = _sum_except(grad, (1,)) if needs[2] else None
    return dx, dw, db


def _group_norm_samples(rng):
    def r(*s):
        return rng.standard_normal(s)

    return [sample("affine", r(2, 6, 3), 3, r(6), r(6)),
            sample("no_affine_4d", r(2, 4, 2, 3), 2),
            sample("2d_one_group_nc", nc(r(3, 4)), 1, r(4), None, eps=1e-3),
            sample("per_channel", r(2, 4, 3), 4, r(4))]


group_norm = defop("group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
                   "float eps=1e-05) -> Tensor", _group_norm,
                   {("input", "weight", "bias"): _group_norm_grad}, node_name="NativeGroupNormBackward0",
                   api="nn.functional.group_norm", method=False, samples=_group_norm_samples).call


# --- batch_norm ---
def _batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps):
    if momentum is None:
        raise TypeError("batch_norm(): argument 'momentum' (position 7) must be float, not NoneType")
    c = x.shape[1] if x.ndim > 1 else 0
    for nm, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                  ("bias", bias)):
        if t is not None and t.size != c:
            raise RuntimeError(f"{nm} should contain {c} elements not {t.size}")
    shape = (c,) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        count = x.size // max(c, 1)
        if count == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"ndgrad.Size({list(x.shape)})")
        mean = x.mean(axis=axes, keepdims=True)
        xc = x - mean
        var = np.mean(xc * xc, axis=axes, keepdims=True)
        if running_mean is not None:  # PyTorch updates the running stats in place
            running_mean *= 1 - momentum
            running_mean += momentum * mean.reshape(-1).astype(running_mean.dtype)
        if running_var is not None:  # with the unbiased variance
            running_var *= 1 - momentum
            running_var += (momentum * count / (count - 1)) * var.reshape(-1).astype(running_var.dtype)
        xc *= 1.0 / np.sqrt(var + eps)
        return _affine(xc, weight, bias, shape)
    if running_mean is None or running_var is None:
        raise RuntimeError(f"running_{'mean' if running_mean is None else 'var'} must be defined in evaluation mode")
    rstd = (1.0 / np.sqrt(running_var + eps)).astype(x.dtype)
    out = (x - running_mean.reshape(shape).astype(x.dtype)) * rstd.reshape(shape)
    return _affine(out, weight, bias, shape)


def _batch_norm_grad(grad, input, running_mean, running_var, weight, training, eps, needs):
    nd_ = input.dim()
    shape = (input.shape[1],) + (1,) * (nd_ - 2)
    dims = (0,) + tuple(range(2, nd_))
    if training:
        xhat, rstd = _standardize(input, dims, eps)
    else:
        rstd = (running_var.to(input.dtype) + eps).rsqrt().reshape(shape)
        xhat = (input - running_mean.to(input.dtype).reshape(shape)) * rstd
    g = grad if weight is None else grad * weight.reshape(shape)
    dx = None
    if needs[0]:
        dx = _norm_input_grad(g, xhat, rstd, dims) if training else g * rstd
    dw = _sum_except(grad * xhat, (1,)) if needs[3] else None
    db = _sum_except(grad, (1,)) if needs[4] else None
    return dx, dw, db


def _batch_norm_samples(rng):
    def r(*s):
        return rng.standard_normal(s)

    def stats(c):
        return r(c), rng.uniform(0.5, 2.0, c)

    return [sample("train_affine", r(4, 3), *stats(3), r(3), r(3), True, no_grad=(1, 2)),
            sample("train_4d", r(2, 3, 2, 2), *stats(3), r(3), r(3), True, 0.3, no_grad=(1, 2)),
            sample("train_no_stats_3d_nc", nc(r(2, 3, 4)), None, None, None, None, True),
            sample("eval", r(4, 3), *stats(3), r(3), r(3), False, no_grad=(1, 2)),
            sample("eval_no_affine_3d", r(2, 3, 4), *stats(3), training=False, eps=1e-3, no_grad=(1, 2))]


# The running statistics are written in place (PyTorch's native_batch_norm marks them (a!) too):
# the compile stack reads the alias info to find the write.
batch_norm = defop("batch_norm(Tensor input, Tensor(a!)? running_mean, Tensor(b!)? running_var, Tensor? weight=None, "
                   "Tensor? bias=None, bool training=False, float momentum=0.1, float eps=1e-05) -> Tensor",
                   _batch_norm, {("input", "weight", "bias"): _batch_norm_grad},
                   node_name="NativeBatchNormBackward0", api="nn.functional.batch_norm", method=False,
                   samples=_batch_norm_samples).call


# --- embedding ---
def _embedding_checks(x, weight, padding_idx):
    if x.dtype not in (np.int64, np.int32):
        name = D._FROM_NP[x.dtype].legacy if x.dtype in D._FROM_NP else str(x.dtype)
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got ndgrad.{name} instead (while checking arguments for embedding)")
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if x.size and (x.min() < 0 or x.max() >= weight.shape[0]):
        raise IndexError("index out of range in self")


def _padding_index(padding_idx, num):
    if padding_idx is None:
        return None
    if not -num <= padding_idx < num:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx + num if padding_idx < 0 else padding_idx


def _embedding(x, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse):
    _padding_index(padding_idx, weight.shape[0] if weight.ndim else 0)
    _embedding_checks(x, weight, padding_idx)
    if max_norm is not None:  # PyTorch renormalises the looked-up rows of weight in place
        rows = np.unique(x)
        w = weight[rows]
        norms = np.linalg.norm(w, ord=norm_type, axis=1) if norm_type != 2 else np.sqrt((w * w).sum(1))
        big = norms > max_norm
        weight[rows[big]] = w[big] * (max_norm / (norms[big] + 1e-7))[:, None]
    return weight[x]


def _embedding_grad(grad, input, weight_shape, padding_idx, scale_grad_by_freq):
    pad = _padding_index(padding_idx, weight_shape[0])
    return embedding_dense_backward(grad, input, weight_shape[0], -1 if pad is None else pad, scale_grad_by_freq)


def _embedding_backward(g, indices, num_weights, padding_idx, scale_grad_by_freq):
    """Each row of ``g`` added into row ``indices[k]`` of a zero weight gradient; none for the
    padding index (>= 0 when there is one); divided by the index's count with ``scale_grad_by_freq``."""
    ia = indices.reshape(-1)
    g = g.reshape(ia.size, g.shape[-1])
    xp = _backend.namespace_of(g)
    if padding_idx >= 0 or scale_grad_by_freq:
        keep = xp.ones(ia.shape[0], g.dtype)
        if padding_idx >= 0:
            keep[ia == padding_idx] = 0
        if scale_grad_by_freq:
            keep /= np.bincount(ia, minlength=num_weights)[ia]
        g = g * keep[:, None]
    out = xp.zeros((num_weights, g.shape[-1]), g.dtype)
    _add_rows(out, ia, g)
    return out


def _embedding_backward_grad(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """The adjoint: rows of ``grad`` gathered at ``indices``, times the same per-index factor.
    NOTE(pytorch): exact; PyTorch's double backward leaves out the frequency scaling."""
    rows = embedding(indices, grad)
    factor = (indices != padding_idx).to(grad.dtype).unsqueeze(-1) if padding_idx >= 0 else None
    if scale_grad_by_freq:
        ones = grad.new_ones(tuple(indices.shape) + (1,))
        counts = embedding(indices, embedding_dense_backward(ones, indices, num_weights, -1, False))
        factor = counts.reciprocal() if factor is None else factor / counts
    return rows if factor is None else rows * factor


def _embedding_backward_samples(rng):
    g = rng.standard_normal
    i = np.array([[0, 2, 4], [2, 2, 1]])
    return [sample("plain", g((2, 3, 4)), i, 5, -1, False),
            sample("padding_nc", nc(g((2, 3, 4))), i, 5, 2, False),
            sample("freq_padding", g((2, 3, 4)), i, 5, 0, True),
            sample("0d_idx_freq", g((4,)), np.array(3), 5, -1, True),
            sample("empty", g((0, 4)), np.zeros((0,), np.int64), 5, -1, False)]


# Linear in grad_output; its vjp gathers rows again (embedding), so every order is an op.
embedding_dense_backward = defop(
    "embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, "
    "bool scale_grad_by_freq) -> Tensor", _embedding_backward,
    {"grad_output": _embedding_backward_grad}, method=False, api=False,
    samples=_embedding_backward_samples).call


def _embedding_samples(rng):
    w = rng.standard_normal((5, 3))
    i = np.array([[0, 2, 4], [2, 2, 1]])
    return [sample("2d_idx", i, w),
            sample("1d_idx_int32", np.array([4, 0, 3], np.int32), w),
            sample("0d_idx", np.array(3), w),
            # not true gradients (finite differences disagree): tests/nn/test_norm_attention.py checks them
            sample("padding", i, w, padding_idx=2, no_grad=(1,)),
            sample("neg_padding", i, w, padding_idx=-1, no_grad=(1,)),
            sample("freq", i, w, scale_grad_by_freq=True, no_grad=(1,)),
            sample("empty", np.zeros((0,), np.int64), w)]


embedding = defop("embedding(Tensor input, Tensor weight, int? padding_idx=None, float? max_norm=None, "
                  "float norm_type=2.0, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
                  _embedding, {"weight": _embedding_grad}, node_name="EmbeddingBackward0",
                  api="nn.functional.embedding", method=False, samples=_embedding_samples).call


# --- one_hot ---
def _one_hot(x, num_classes):
    if x.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if x.size == 0 and num_classes == -1:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    if x.size and x.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(x.max()) + 1
    elif x.size and (num_classes < 0 or x.max() >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes.")
    # a comparison with the classes built where ``x`` is (no put_along_axis in older CuPy)
    return (x[..., None] == _backend.namespace_of(x).arange(num_classes)).astype(np.int64)


def _one_hot_samples(rng):
    return [sample("1d", np.array([0, 2, 1, 2])),
            sample("2d_n", np.array([[0, 3], [1, 1]]), 5),
            sample("0d", np.array(2), 4),
            sample("empty_n", np.zeros((0,), np.int64), 3)]


defop("one_hot(Tensor self, int num_classes=-1) -> Tensor", _one_hot, api="nn.functional.one_hot",
      method=False, samples=_one_hot_samples)


# --- scaled_dot_product_attention ---
def _sdpa_checks(q, k, v, attn_mask, is_causal, enable_gqa):
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise RuntimeError("Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                           f"{q.dim()} key.dim: {k.dim()} and value.dim: {v.dim()} instead.")
    if not (q.dtype == k.dtype == v.dtype):
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{_cname(q)} key.dtype: {_cname(k)} and value.dtype: {_cname(v)} instead.")
    if attn_mask is not None:
        if is_causal:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                               "is_causal=True")
        if attn_mask.dtype != D.bool_ and not attn_mask.dtype.is_floating_point:
            raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                               f"attn_mask.dtype: {_cname(attn_mask)} and  query.dtype: {_cname(q)} instead.")
    if enable_gqa and q.dim() >= 3 and (q.shape[-3] % k.shape[-3] or q.shape[-3] % v.shape[-3]):
        raise RuntimeError("Number of heads in key and value must divide the number of heads in ")


_CNAMES = {"float32": "float", "float64": "double", "int64": "long int", "int32": "int", "float16": "c10::Half",
           "bfloat16": "c10::BFloat16", "bool": "bool", "int16": "short int", "int8": "signed char",
           "uint8": "unsigned char"}


def _cname(t):
    return _CNAMES.get(str(t.dtype).split(".")[-1], str(t.dtype))


def _repeat_heads(t, n):
    """Repeat each head ``n`` times along dim -3 (``repeat_interleave``), for grouped-query attention."""
    if n == 1:
        return t
    s = tuple(t.shape)
    return t.unsqueeze(-3).expand(s[:-2] + (n,) + s[-2:]).reshape(s[:-3] + (s[-3] * n,) + s[-2:])


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """``softmax(q k^T * scale + mask) v``, with PyTorch's math-path masking rules."""
    _sdpa_checks(query, key, value, attn_mask, is_causal, enable_gqa)
    if enable_gqa and query.dim() >= 3:
        key = _repeat_heads(key, query.shape[-3] // key.shape[-3])
        value = _repeat_heads(value, query.shape[-3] // value.shape[-3])
    s = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    attn = (query * s).matmul(key.transpose(-2, -1))
    # Masks are added as a bias (0 or -inf), as PyTorch's math path does: a broadcast add whose
    # backward passes the gradient through untouched, where masked_fill's masks it again. The
    # bias is made by ops from the mask (or from the shapes), so a captured graph recomputes it.
    full = None  # rows with every score masked
    if is_causal:
        L, S = query.shape[-2], key.shape[-2]
        attn = attn + attn.new_full((L, S), -math.inf).triu(1)  # above the diagonal, where q is
        if S == 0:
            full = attn.new_ones((L, 1), dtype=D.bool_)
    elif attn_mask is not None:
        if attn_mask.dtype == D.bool_:
            # NOTE(pytorch): a row with every score masked attends to nothing (zeros, not NaN):
            # such rows are left unmasked for the softmax (no NaN, forward or backward) and zeroed
            # after; always, so that no Python branch reads the mask's values.
            masked = attn_mask.logical_not()
            full = masked.all(-1, keepdim=True)
            masked = masked.logical_and(full.logical_not())
            attn = attn + masked.to(attn.dtype).masked_fill(masked, -math.inf)
        else:
            attn = attn + attn_mask
    p = attn.softmax(-1)
    if full is not None:
        p = p.masked_fill(full, 0.0)
    if dropout_p > 0.0:
        from .nn import dropout  # nn.functional's, defined in the ops layer

        p = dropout(p, dropout_p)
    return p.matmul(value)


def _sdpa_samples(rng):
    def r(*s):
        return rng.standard_normal(s)

    bmask = np.array([[True, False, True, True], [True, True, False, False], [True, True, True, True]])
    return [sample("3d", r(2, 3, 4), r(2, 4, 4), r(2, 4, 5)),
            sample("4d_causal", r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 4), is_causal=True),
            sample("bool_mask", r(2, 3, 4), r(2, 4, 4), r(2, 4, 2), bmask),
            sample("float_mask_scale", r(2, 3, 4), r(2, 4, 4), r(2, 4, 2), r(3, 4), scale=0.3, no_grad=(3,)),
            sample("2d_nc", nc(r(3, 4)), r(4, 4), r(4, 3)),
            sample("masked_row", r(2, 3, 4), r(2, 4, 4), r(2, 4, 2), bmask & np.array([[1], [1], [0]], bool)),
            sample("gqa", r(1, 4, 3, 2), r(1, 2, 3, 2), r(1, 2, 3, 2), enable_gqa=True),
            sample("causal_rect", r(2, 2, 4), r(2, 3, 4), r(2, 3, 4), is_causal=True)]


defcomposite(scaled_dot_product_attention, samples=_sdpa_samples, api="nn.functional.scaled_dot_product_attention",
             method=False)


# --- composites: prelu, instance_norm, local_response_norm ---
def prelu(input, weight):
    from .pointwise import where

    if weight.numel() != 1:
        c = input.shape[1] if input.dim() >= 2 else 1
        if weight.dim() != 1 or weight.numel() != c:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {c}.")
        w = weight.reshape((-1,) + (1,) * (input.dim() - 2))
    else:
        w = weight.reshape(())
    return where(input > 0, input, w * input)


defcomposite(prelu, api="nn.functional.prelu", method=False, samples=lambda rng: [
    sample("shared", rng.standard_normal((2, 3, 4)), rng.uniform(0.1, 0.5, 1)),
    sample("per_channel_4d_nc", nc(rng.standard_normal((2, 3, 2, 4))), rng.uniform(0.1, 0.5, 3)),
    sample("per_channel_2d", rng.standard_normal((4, 3)), rng.uniform(0.1, 0.5, 3)),
    sample("1d", rng.standard_normal(5), rng.uniform(0.1, 0.5, 1))])


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Batch norm of a (1, N*C, *) view: each (sample, channel) plane is its own channel; the
    running statistics (when given) are updated with the mean over the batch of the per-plane ones."""
    from ..autograd.grad_mode import no_grad

    if use_input_stats:
        size = list(input.shape)
        if math.prod(size[2:]) == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                             f"ndgrad.Size({size})")
    elif running_mean is None or running_var is None:
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    n, c = input.shape[:2]
    rm = None if running_mean is None else running_mean.repeat(n)
    rv = None if running_var is None else running_var.repeat(n)
    out = batch_norm(input.reshape((1, n * c) + tuple(input.shape[2:])), rm, rv,
                     None if weight is None else weight.repeat(n), None if bias is None else bias.repeat(n),
                     True, momentum, eps)
    with no_grad():
        if running_mean is not None:
            running_mean.copy_(rm.reshape(n, c).mean(0))
        if running_var is not None:
            running_var.copy_(rv.reshape(n, c).mean(0))
    return out.reshape(input.shape)


defcomposite(instance_norm, api="nn.functional.instance_norm", method=False, samples=lambda rng: [
    sample("plain", rng.standard_normal((2, 3, 5))),
    sample("affine_4d_nc", nc(rng.standard_normal((2, 3, 2, 4))), None, None, rng.standard_normal(3),
           rng.standard_normal(3)),
    sample("stats", rng.standard_normal((2, 3, 4)), rng.standard_normal(3), rng.uniform(0.5, 2, 3),
           momentum=0.2, no_grad=(1, 2)),
    sample("eval_stats", rng.standard_normal((2, 3, 4)), rng.standard_normal(3), rng.uniform(0.5, 2, 3),
           rng.standard_normal(3), None, False, no_grad=(1, 2))])


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    from .nn import pad_fn

    dim = input.dim()
    if dim < 3:
        # NOTE(pytorch): its message carries a run of spaces (a line continuation inside the string)
        raise ValueError(f"Expected 3D or higher dimensionality{' ' * 26}input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    sq = pad_fn(input * input, [0, 0] * (dim - 2) + [size // 2, (size - 1) // 2])
    total = sq[:, 0:c]
    for j in range(1, size):  # the channel window's sum, one shifted slice at a time
        total = total + sq[:, j:j + c]
    return input / (total * (alpha / size) + k).pow(beta)


defcomposite(local_response_norm, api="nn.functional.local_response_norm", method=False, samples=lambda rng: [
    sample("3d", rng.standard_normal((2, 5, 4)), 3),
    sample("4d_even_nc", nc(rng.standard_normal((2, 4, 3, 3))), 2, 1e-2, 0.5, 2.0),
    sample("5d", rng.standard_normal((1, 3, 2, 2, 2)), 5, 0.1)])


def norm_except_dim(v, pow=2, dim=0):  # noqa: A002  (PyTorch's parameter name)
    """The ``pow``-norm of ``v`` over every dim but ``dim``, shaped as ``v`` with ones elsewhere
    (``dim=-1``: the norm of the whole tensor, a 0-d tensor); weight norm's magnitude."""
    if dim == -1:
        return v.norm(pow)
    moved = v.transpose(0, dim) if dim else v  # as PyTorch: rows of dim's slices, one norm each
    norms = moved.reshape(moved.shape[0], -1).norm(pow, dim=1)
    shape = [1] * v.dim()
    shape[dim] = v.shape[dim]
    return norms.reshape(shape)


def _weight_norm(v, g, dim=0):
    """``v`` scaled to the norm ``g`` (per slice along ``dim``; the whole tensor for ``dim=-1``)."""
    return v * (g / norm_except_dim(v, 2, dim))


defcomposite(norm_except_dim, method=False, samples=lambda rng: [
    sample("dim0", rng.standard_normal((4, 3, 2))), sample("dim1_pow3", rng.standard_normal((4, 3, 2)), 3, 1),
    sample("last_nc", nc(rng.standard_normal((3, 5))), 2, 1), sample("whole", rng.standard_normal((3, 4)), 2, -1)])
defcomposite(_weight_norm, method=False, samples=lambda rng: [
    sample("dim0", rng.standard_normal((4, 3)), rng.uniform(0.5, 2, (4, 1))),
    sample("dim1_conv", rng.standard_normal((4, 3, 2, 2)), rng.uniform(0.5, 2, (1, 3, 1, 1)), 1),
    sample("whole", rng.standard_normal((3, 4)), np.array(1.5), -1)])
