"""Loss functions of ``nn.functional`` (cross_entropy, nll_loss, mse_loss, ..., kl_div).

cross_entropy with class indices is one fused op (``_cross_entropy``): log-softmax and the pick
of the target's log-probability in a few array operations, and a fused backward
(``_cross_entropy_backward``: softmax minus the smoothed one-hot, scaled) whose own formulas are
ndgrad ops, so double backward works. ``nll_loss`` is a fused pair the same way. The other
losses are composites of existing ops. Reductions use PyTorch's enum: 0 none, 1 mean, 2 sum.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _backend
from .._backend import cublas as _cublas
from ..autograd.grad_mode import state as _gs
from .index import _tname
from .reduce import shifted_exp, softmax_backward_data
from .registry import OPS, defcomposite, defop
from .samples import nc, sample

_ENUM = {"none": 0, "mean": 1, "sum": 2}


def _legacy_reduction(size_average, reduce) -> str:
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "none" if not reduce else "mean" if size_average else "sum"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
                  stacklevel=4)
    return ret


def _reduction(reduction, size_average=None, reduce=None) -> int:
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    r = _ENUM.get(reduction)
    if r is None:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return r


def _reduce(loss, r):
    return loss if r == 0 else loss.mean() if r == 1 else loss.sum()


# --- class-index targets: shared checks and per-position terms ---
def _check_nll(x, t, w):
    """PyTorch's checks of nll_loss / cross_entropy with class indices; returns the class dim.
    (Its ValueErrors are raised by ``_check_batch``: the dispatcher rewords a forward's ValueError.)"""
    cdim = 0 if x.ndim == 1 else 1
    C = x.shape[cdim]
    if x.ndim <= 2:
        if t.ndim > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if w is not None and (w.ndim != 1 or w.shape[0] != C):
            raise RuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but "
                               f"got weight tensor of shape: {list(w.shape)}")
    else:
        want = (x.shape[0],) + x.shape[2:]
        if t.shape != want:
            raise RuntimeError(f"Expected target size {list(want)}, got {list(t.shape)}")
        if w is not None and w.size != C:
            raise RuntimeError("weight tensor should be defined either for all or no classes")
    if t.dtype != np.int64 and t.dtype != np.uint8:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_tname(t)}")
    if w is not None and w.dtype != x.dtype:
        raise RuntimeError(f"expected scalar type {_tname(x)} but found {_tname(w)}")
    return cdim


def _check_batch(x, t):
    if x.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {x.ndim})")
    if x.ndim != 1 and (t.shape[:1] or (1,))[0] != x.shape[0]:
        raise ValueError(f"Expected input batch_size ({x.shape[0]}) to match target batch_size "
                         f"({(t.shape[:1] or (1,))[0]}).")


def _targets(x, t, w, ignore_index):
    """(class dim, the index key of each position's target entry (ignored ones at class 0), keep
    mask or None, per-position class weight or None). Fancy indexing: take_along_axis costs ~3x."""
    cdim = _check_nll(x, t, w)
    if x.ndim == 1 and t.ndim == 1:
        t = t.reshape(())  # NOTE(pytorch): a (C,) input takes a one-element target as unbatched
    ok = t != ignore_index
    # While a CUDA graph records, nothing may be read back to the host: keep the mask whatever
    # it holds, and skip the bounds check (PyTorch's CUDA kernel asserts on the device).
    capturing = type(t) is not np.ndarray and _cublas.capturing[0]
    if not capturing and ok.all():
        ok = None
    else:
        t = np.where(ok, t, 0)
    C = x.shape[cdim]
    if not capturing and t.size and (t.min() < 0 or t.max() >= C):
        raise IndexError(f"Target {int(t[(t < 0) | (t >= C)].flat[0])} is out of bounds.")
    xp = _backend.namespace_of(x)  # position indices where the data is
    if x.ndim == 1:
        key = (t, Ellipsis)  # Ellipsis: a 0-d target picks a 0-d array, not a host scalar
    elif x.ndim == 2:
        key = (xp.arange(x.shape[0]), t)
    else:
        pos = xp.ix_(*(xp.arange(n) for n in t.shape))  # sparse np.indices (CuPy's is dense)
        key = (pos[0], t, *pos[1:])
    return cdim, key, ok, None if w is None else w[t]


def _coef(ok, wt, dtype):
    """Per-position factor of the loss (class weight, 0 where ignored) and the mean's divisor."""
    if wt is None:
        if ok is None:
            return None, None
        c = ok.astype(dtype)
    else:
        c = wt if ok is None else wt * ok
    return c, c.sum()


def _class_view(w, x, cdim):
    return w.reshape((w.size,) + (1,) * (x.ndim - cdim - 1))


# --- nll_loss ---
def _nll(x, t, reduction, ignore_index, weight):
    cdim, key, ok, wt = _targets(x, t, weight, ignore_index)
    loss = -x[key]
    c, total = _coef(ok, wt, x.dtype)
    if c is not None:
        loss = loss * c
    if reduction == 0:
        return loss
    s = loss.sum()
    if reduction == 2:
        return s
    with np.errstate(invalid="ignore", divide="ignore"):  # NOTE(pytorch): all targets ignored gives nan
        return s / (loss.size if total is None else total)


def _nll_bwd(grad, t, shape, reduction, ignore_index, weight):  # grad: the loss's incoming gradient
    x = _backend.namespace_of(grad).zeros(shape, grad.dtype)
    cdim, key, ok, wt = _targets(x, t, weight, ignore_index)
    c, total = _coef(ok, wt, grad.dtype)
    g = -grad if reduction != 1 else -grad / ((t.size or 1) if total is None else (total or 1))
    if c is not None:
        g = g * c
    x[key] = g
    return x


# The backward is linear in grad and its adjoint is nll_loss itself.
nll_loss_backward = defop(
    "_nll_loss_backward(Tensor grad_output, Tensor target, int[] shape, int reduction, int ignore_index, "
    "Tensor? weight=None)"
    " -> Tensor", _nll_bwd,
    {"grad_output": lambda grad, target, reduction, ignore_index, weight:
        nll_loss_fused(grad, target, reduction, ignore_index, weight)},
    method=False, api=False).call
nll_loss_fused = defop(
    "_nll_loss(Tensor input, Tensor target, int reduction, int ignore_index, Tensor? weight=None) -> Tensor", _nll,
    {"input": lambda grad, target, input_shape, reduction, ignore_index, weight:
        nll_loss_backward(grad, target, input_shape, reduction, ignore_index, weight)},
    method=False, api=False, node_name="NllLossBackward0").call


def _check_weight(weight):
    if weight is not None and weight.requires_grad and _gs.grad_enabled:
        raise RuntimeError("The function 'nll_loss_forward' is not differentiable with respect to argument "
                           "'weight'. This input cannot have requires_grad True.")
    return weight


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    r = _reduction(reduction, size_average, reduce)
    _check_batch(input, target)
    return nll_loss_fused(input, target, r, int(ignore_index), _check_weight(weight))


# --- cross_entropy ---
def _ce_terms(x, t, weight, ignore_index, ls):
    """Per-position pieces of the loss: grad wrt x at a position is ok * (a * softmax - b), with
    b = wt1 * one_hot(target) + wc; the loss is ok * ((1-ls) * w[t] * nll + ls/C * sum_c w_c nll_c)."""
    cdim, key, ok, wt = _targets(x, t, weight, ignore_index)
    C = x.shape[cdim]
    if not ls:
        return cdim, key, ok, wt, (1.0 if wt is None else wt), (1.0 if wt is None else wt), 0.0
    W = C if weight is None else weight.sum()
    wt1 = (1 - ls) * (1.0 if wt is None else wt)
    wc = ls / C if weight is None else (ls / C) * _class_view(weight, x, cdim)
    return cdim, key, ok, wt, wt1 + (ls / C) * W, wt1, wc


def _ce(x, t, reduction, ignore_index, label_smoothing, weight):
    cdim, key, ok, wt = _targets(x, t, weight, ignore_index)
    z, _, s = shifted_exp(x, cdim)
    lse = np.log(s)
    loss = np.squeeze(lse, cdim) - z[key]
    if wt is not None:
        loss = loss * wt
    ls = label_smoothing
    if ls:
        C = x.shape[cdim]
        if weight is None:
            smooth = C * np.squeeze(lse, cdim) - z.sum(cdim)
        else:
            smooth = ((lse - z) * _class_view(weight, x, cdim)).sum(cdim)
        loss = (1 - ls) * loss + (ls / C) * smooth
    c, total = _coef(ok, wt, x.dtype)
    if ok is not None:
        loss = loss * ok
    if reduction == 0:
        return loss.astype(x.dtype, copy=False)
    s = loss.sum()
    if reduction == 2:
        return s
    with np.errstate(invalid="ignore", divide="ignore"):  # NOTE(pytorch): all targets ignored gives nan
        return s / (loss.size if total is None else total)


def _ce_scale(grad, t, ok, wt, reduction, cdim, dtype):
    """The incoming gradient per position (for 'mean' divided by the total weight), times ok."""
    c, total = _coef(ok, wt, dtype)
    if reduction == 1:
        n = t.size if total is None else total
        grad = grad / (n or 1)  # all ignored: every position's factor is 0 anyway
    elif reduction == 0:
        grad = np.expand_dims(grad, cdim)
    return grad if ok is None else grad * np.expand_dims(ok, cdim)


def _ce_bwd(grad, x, t, reduction, ignore_index, label_smoothing, weight):
    cdim, key, ok, wt, a, wt1, wc = _ce_terms(x, t, weight, ignore_index, label_smoothing)
    _, e, s = shifted_exp(x, cdim)
    # scale * (a * softmax - wc - wt1 * one_hot): the per-position factors meet before the one
    # pass over the classes
    scale = _ce_scale(grad, t, ok, wt, reduction, cdim, x.dtype)
    f = scale / s
    if not (type(a) is float and a == 1.0):
        f = f * np.expand_dims(a, cdim)
    out = np.multiply(e, f, out=e)  # e is fresh
    if type(wc) is not float or wc:
        out -= wc * scale
    out[key] -= wt1 * (np.squeeze(scale, cdim) if getattr(scale, "ndim", 0) == x.ndim else scale)
    return out


def _ce_coefs(x, t, reduction, ignore_index, label_smoothing, weight):
    """``(ka, kb)`` such that the loss's gradient in ``input`` is ``grad_output * (ka * softmax(input)
    - kb)``: ``k`` is the reduction's factor per position (0 where ignored, over the total weight
    for 'mean'), ``a`` per position (class dim kept, size 1), ``b`` dense. Only ``input``'s shape,
    dtype and device are read."""
    cdim, key, ok, wt, a, wt1, wc = _ce_terms(x, t, weight, ignore_index, label_smoothing)
    xp = _backend.namespace_of(x)
    shape = x.shape[:cdim] + (1,) + x.shape[cdim + 1:]
    a = xp.asarray(a, x.dtype)
    a = np.expand_dims(a, cdim) if a.ndim else a
    b = xp.zeros(x.shape, x.dtype) + wc
    b[key] += wt1
    one = xp.ones(x.shape[:cdim] + x.shape[cdim + 1:] if reduction == 0 else (), x.dtype)
    k = _ce_scale(one, t, ok, wt, reduction, cdim, x.dtype)
    return xp.broadcast_to(k * a, shape).astype(x.dtype), (k * b).astype(x.dtype, copy=False)


# The constants of cross-entropy's second derivatives, computed from the target (and weight)
# where the graph can see them; not differentiable (target and weight take no gradient).
cross_entropy_coefs = defop(
    "_cross_entropy_coefs(Tensor input, Tensor target, int reduction, int ignore_index, float label_smoothing, "
    "Tensor? weight=None) -> (Tensor, Tensor)", _ce_coefs, method=False, api=False,
    samples=lambda rng: [sample(s.name, *s.args[1:]) for s in _ce_backward_samples(rng)]).call


def _ce_bwd_grad_grad(grad, input, target, reduction, ignore_index, label_smoothing, weight):
    # the backward g * (ka * p - kb) is linear in g: its vjp sums G * (ka * p - kb) over the
    # classes (and over the positions for a reduced loss)
    cdim = 0 if input.dim() == 1 else 1
    ka, kb = cross_entropy_coefs(input, target, reduction, ignore_index, label_smoothing, weight)
    out = (grad * (ka * input.softmax(cdim) - kb)).sum(cdim)
    return out if reduction == 0 else out.sum()


def _ce_bwd_input_grad(grad, grad_output, input, target, reduction, ignore_index, label_smoothing, weight):
    # d/d input of  g * (ka * softmax(input) - kb):  softmax's vjp of G * g * ka
    cdim = 0 if input.dim() == 1 else 1
    ka, _ = cross_entropy_coefs(input, target, reduction, ignore_index, label_smoothing, weight)
    g = grad_output.unsqueeze(cdim) if reduction == 0 else grad_output
    return softmax_backward_data(grad * (g * ka), input.softmax(cdim), cdim, input.dtype)


def _ce_backward_samples(rng):
    """Samples of ``_cross_entropy_backward`` (``grad_output`` first), and of the coefficients
    (the same arguments without it)."""
    def r(*s):
        return rng.standard_normal(s)

    w = rng.uniform(0.5, 2.0, 5)
    ti = np.array([0, -100, 2, 4])
    return [sample("mean", r(), r(4, 5), np.array([0, 4, 2, 1]), 1, -100, 0.0),
            sample("none_ls_weight", r(4), r(4, 5), ti, 0, -100, 0.2, w, no_grad=(6,)),
            sample("mean_ignore_weight", r(), nc(r(4, 5)), ti, 1, -100, 0.0, w, no_grad=(6,)),
            sample("sum_nd_ls", r(), r(2, 3, 4), np.array([[0, 2, 1, 1], [2, -100, 0, 1]]), 2, -100, 0.1),
            sample("unbatched_none", r(), r(5), np.array(3), 0, -100, 0.0)]


cross_entropy_backward = defop(
    "_cross_entropy_backward(Tensor grad_output, Tensor input, Tensor target, int reduction, int ignore_index, "
    "float label_smoothing, Tensor? weight=None) -> Tensor", _ce_bwd,
    {"grad_output": _ce_bwd_grad_grad, "input": _ce_bwd_input_grad}, method=False, api=False,
    samples=_ce_backward_samples).call
cross_entropy_fused = defop(
    "_cross_entropy(Tensor input, Tensor target, int reduction, int ignore_index, float label_smoothing, "
    "Tensor? weight=None) -> Tensor", _ce,
    {"input": lambda grad, input, target, reduction, ignore_index, label_smoothing, weight:
        cross_entropy_backward(grad, input, target, reduction, ignore_index, label_smoothing, weight)},
    method=False, api=False, node_name="CrossEntropyLossBackward0").call


def _ce_probs(input, target, weight, r, ls):
    cdim = 0 if input.ndim == 1 else 1
    C = input.shape[cdim]
    logp = input.log_softmax(cdim)
    if ls:
        target = target * (1 - ls) + ls / C
    if weight is not None:
        logp = logp * weight.reshape((C,) + (1,) * (input.ndim - cdim - 1))
    loss = -(logp * target).sum(cdim)
    if r == 1:
        return loss.sum() / (input.numel() // C)
    return loss.sum() if r == 2 else loss


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    r = _reduction(reduction, size_average, reduce)
    ls = float(label_smoothing)
    if not 0.0 <= ls <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {ls}")
    if input.shape == target.shape:  # class probabilities
        if target.dtype.is_floating_point is False:
            raise RuntimeError("Expected floating point type for target with class probabilities, got "
                               f"{_tname(target._data)}")
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        return _ce_probs(input, target, weight, r, ls)
    if not input.dtype.is_floating_point:
        input.log_softmax(0 if input.ndim == 1 else 1)  # raises PyTorch's "not implemented for" error
    _check_batch(input, target)
    return cross_entropy_fused(input, target, r, int(ignore_index), ls, _check_weight(weight))


# --- samples of the class-index losses ---
def _class_samples(rng, probs):
    def r(*s):
        return rng.standard_normal(s)

    w = rng.uniform(0.5, 2.0, 5)
    t = np.array([0, 4, 2, 1])
    ti = np.array([0, -100, 2, 4])
    out = [
        sample("2d", r(4, 5), t),
        sample("nc", nc(r(4, 5)), t),
        sample("ignore", r(4, 5), ti),
        sample("ignore_custom_sum", r(4, 5), t, ignore_index=2, reduction="sum"),
        sample("weight", r(4, 5), t, weight=w),
        sample("weight_ignore", r(4, 5), ti, weight=w),
        sample("weight_ignore_sum", r(4, 5), ti, weight=w, reduction="sum"),
        sample("weight_ignore_none", r(4, 5), ti, weight=w, reduction="none"),
        sample("none", r(4, 5), t, reduction="none"),
        sample("nd", r(2, 3, 4), np.array([[0, 2, 1, 1], [2, -100, 0, 1]])),
        sample("nd_none_weight", r(2, 3, 2, 2), np.array([[[0, 2], [1, 1]], [[2, 0], [0, 1]]]),
               weight=w[:3], reduction="none"),
        sample("unbatched", r(5), np.array(3)),
        sample("unbatched_none", r(5), np.array(1), reduction="none"),
        sample("byte_target", r(3, 4), np.array([1, 0, 3], np.uint8)),
    ]
    if probs:
        p = rng.uniform(0.1, 1.0, (4, 5))
        out += [
            sample("ls", r(4, 5), ti, label_smoothing=0.2),
            sample("ls_weight_none", r(4, 5), ti, weight=w, label_smoothing=0.3, reduction="none"),
            sample("ls_weight_mean", r(4, 5), ti, weight=w, label_smoothing=0.1),
            sample("ls_nd_sum", r(2, 3, 4), np.array([[0, 2, 1, 1], [2, -100, 0, 1]]), label_smoothing=0.25,
                   reduction="sum"),
            sample("prob", r(4, 5), p / p.sum(1, keepdims=True)),
            sample("prob_weight_ls", r(4, 5), p, weight=w, label_smoothing=0.2),
            sample("prob_nd_none", r(2, 3, 4), rng.uniform(0, 1, (2, 3, 4)), reduction="none"),
            sample("prob_unbatched_sum", r(5), rng.uniform(0, 1, 5), reduction="sum"),
        ]
    return out


defcomposite(cross_entropy, samples=lambda rng: _class_samples(rng, True), api="nn.functional.cross_entropy",
             method=False)
defcomposite(nll_loss, samples=lambda rng: _class_samples(rng, False), api="nn.functional.nll_loss",
             method=False)


# --- regression losses ---
def _size_warning(input, target):
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.size()}) that is different to the input size "
                      f"({input.size()}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=3)


def _weighted(loss, weight, input, reduction, plain_mean=False):
    """PyTorch's elementwise-weighted reduction: the weighted mean divides by the weights' sum
    (huber_loss's by the element count)."""
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean() if plain_mean else loss.sum() / weight.sum()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")


def _pointwise_loss(elementwise, input, target, size_average, reduce, reduction, weight, plain_mean=False):
    _size_warning(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if weight is None:
        return _reduce(elementwise(input - target), _reduction(reduction))
    return _weighted(elementwise(input - target), weight, input, reduction, plain_mean)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    return _pointwise_loss(lambda d: d * d, input, target, size_average, reduce, reduction, weight)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    return _pointwise_loss(lambda d: d.abs(), input, target, size_average, reduce, reduction, weight)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    _size_warning(input, target)
    r = _reduction(reduction, size_average, reduce)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = input - target
    ad = d.abs()
    if beta == 0:
        return _reduce(ad, r)
    return _reduce(OPS["where.self"].call(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta), r)


def _huber(delta):
    def f(d):
        ad = d.abs()
        return OPS["where.self"].call(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * delta)

    return f


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    if delta <= 0:
        _size_warning(input, target)
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _pointwise_loss(_huber(delta), input, target, None, None, reduction, weight, True)


def _regression_samples(int_target=True, **extra):
    def make(rng):
        def r(*s):
            return rng.uniform(-2, 2, s)

        out = [sample("same", r(3, 4), r(3, 4)),
               sample("nc_sum", nc(r(3, 4)), r(3, 4), reduction="sum"),
               sample("none", r(3, 4), r(3, 4), reduction="none"),
               sample("0d", r(), r())]
        if int_target:  # (torch's huber_loss backward fails on an integer target)
            out.append(sample("int_target", r(3, 4), rng.integers(-2, 3, (3, 4)), reduction="sum"))
        for k, v in extra.items():
            out += [sample(k, r(3, 4), r(3, 4), **{k: v}), sample(k + "_none", r(2, 3), r(2, 3), reduction="none",
                                                                   **{k: v})]
        return out

    return make


def _weight_samples(rng):
    return [sample("weight", rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (3, 4)),
                   weight=rng.uniform(0.5, 2, (3, 4))),
            sample("weight_sum", rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (3, 4)),
                   weight=rng.uniform(0.5, 2, (3, 4)), reduction="sum")]


def _with(*makers):
    return lambda rng: [s for m in makers for s in m(rng)]


defcomposite(mse_loss, samples=_with(_regression_samples(), _weight_samples), api="nn.functional.mse_loss",
             method=False)
defcomposite(l1_loss, samples=_with(_regression_samples(), _weight_samples), api="nn.functional.l1_loss",
             method=False)
defcomposite(smooth_l1_loss, samples=_regression_samples(beta=0.5), api="nn.functional.smooth_l1_loss",
             method=False)
defcomposite(huber_loss, samples=_with(_regression_samples(False, delta=0.7), _weight_samples),
             api="nn.functional.huber_loss", method=False)


# --- binary cross entropy ---
def _bce(x, t):
    if ((x < 0) | (x > 1)).any():
        raise RuntimeError("all elements of input should be between 0 and 1")
    with np.errstate(divide="ignore"):  # NOTE(pytorch): log is clamped at -100, so log(0) is finite
        return -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))


_EPS = 1e-12

# A primitive, not a composite: the clamped logs' chain rule gives 0 * inf = nan at x = 0 or 1.
bce_elementwise = defop(
    "_binary_cross_entropy(Tensor self, Tensor target) -> Tensor", _bce,
    {"self": lambda grad, self, target: grad * (self - target) / (self * (1 - self)).clamp(min=_EPS),
     # NOTE(pytorch): unclamped here, so infinite at x = 0 or 1
     "target": lambda grad, self: grad * ((-self).log1p() - self.log())},
    method=False, api=False, node_name="BinaryCrossEntropyBackward0").call


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    r = _reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.size()}) that is different to the input size "
                         f"({input.size()}) is deprecated. Please ensure they have the same size.")
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {_tname(target._data)} but expected {_tname(input._data)}")
    loss = bce_elementwise(input, target)
    if weight is not None:
        try:
            np.broadcast_shapes(weight.shape, input.shape)
            ok = len(weight.shape) <= len(input.shape)
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"Attempting to broadcast a dimension of length {weight.shape[-1]} at -1! "
                               f"Mismatching argument at index 1 had {weight.size()}; but expected shape "
                               f"should be broadcastable to {list(input.shape)}")
        loss = loss * weight.to(input.dtype)  # the kernel computes in the input's dtype
    return _reduce(loss, r)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    r = _reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    # (1 - t) x + (1 + (pw - 1) t) log(1 + e^-x), with softplus for a stable log(1 + e^-x)
    sp = OPS["softplus"].call(-input)
    if pos_weight is not None:
        sp = sp * ((pos_weight.to(input.dtype) - 1) * target + 1)
    loss = (1 - target) * input + sp
    if weight is not None:
        loss = loss * weight.to(input.dtype)  # the kernel computes in the input's dtype
    return _reduce(loss, r)


def _bce_samples(logits):
    def make(rng):
        def x(*s):
            return rng.uniform(-3, 3, s) if logits else rng.uniform(0.1, 0.9, s)

        def t(*s):
            return rng.uniform(0, 1, s)

        out = [sample("same", x(3, 4), t(3, 4)),
               sample("nc_none", nc(x(3, 4)), t(3, 4), reduction="none"),
               sample("0d", x(), t()),
               sample("weight", x(3, 4), t(3, 4), weight=rng.uniform(0.5, 2, (4,))),
               sample("weight_sum", x(2, 3), t(2, 3), weight=rng.uniform(0.5, 2, (2, 3)), reduction="sum"),
               sample("hard_targets", x(3, 4), (rng.uniform(0, 1, (3, 4)) > 0.5).astype(float), no_grad=(1,))]
        if logits:
            out += [sample("pos_weight", x(3, 4), t(3, 4), pos_weight=rng.uniform(0.5, 2, (4,))),
                    sample("pos_weight_weight_none", x(3, 4), t(3, 4), weight=rng.uniform(0.5, 2, (3, 1)),
                           pos_weight=rng.uniform(0.5, 2, (4,)), reduction="none"),
                    sample("large", np.array([-40.0, -5.0, 0.0, 5.0, 40.0]), t(5))]
        else:
            out.append(sample("edges", np.array([0.0, 1.0, 0.5]), np.array([0.0, 1.0, 0.3]), no_grad=(0, 1)))
        return out

    return make


defcomposite(binary_cross_entropy, samples=_bce_samples(False), api="nn.functional.binary_cross_entropy",
             method=False)
defcomposite(binary_cross_entropy_with_logits, samples=_bce_samples(True),
             api="nn.functional.binary_cross_entropy_with_logits", method=False)


# --- kl_div ---
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=2)
    r = 2 if reduction == "batchmean" else _reduction(reduction)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        # target * log(target) with 0 log 0 = 0 (xlogy), its gradient finite at 0
        loss = target * target.masked_fill(target == 0, 1).log() - target * input
    loss = _reduce(loss, r)
    if reduction == "batchmean" and input.ndim != 0:
        loss = loss / input.shape[0]
    return loss


def _kl_samples(rng):
    def lp(*s):
        return np.asarray(np.log(rng.uniform(0.1, 1, s)))

    def p(*s):
        return rng.uniform(0.1, 1, s)

    return [sample("mean", lp(3, 4), p(3, 4)),
            sample("batchmean", lp(3, 4), p(3, 4), reduction="batchmean"),
            sample("sum_nc", nc(lp(3, 4)), p(3, 4), reduction="sum"),
            sample("none_bcast", lp(3, 4), p(4), reduction="none"),
            sample("log_target", lp(3, 4), lp(3, 4), reduction="batchmean", log_target=True),
            sample("log_target_none", lp(2, 3), lp(2, 3), reduction="none", log_target=True),
            sample("zero_target", lp(2, 3), np.array([[0.0, 0.5, 0.5], [0.2, 0.0, 0.8]]), reduction="sum",
                   no_grad=(1,)),
            sample("0d_batchmean", lp(), p(), reduction="batchmean")]


defcomposite(kl_div, samples=_kl_samples, api="nn.functional.kl_div", method=False)


# --- margin and embedding losses (composites, in PyTorch's formulation) ---
def _zeros_where(cond, x):
    """``x`` where ``cond`` holds, else 0 (broadcast as ``where`` broadcasts)."""
    return OPS["where.self"].call(cond, x, x.new_zeros(()))


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    r = _reduction(reduction, size_average, reduce)
    td = target.dim()
    if td > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if td == 1 and (input1.dim() != 2 or input2.dim() != 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    if td == 0 and (input1.dim() != 1 or input2.dim() != 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    eps = 1e-12  # keeps a zero vector's cosine finite
    prod = (input1 * input2).sum(td)
    mag = ((input1 * input1).sum(td) + eps) * ((input2 * input2).sum(td) + eps)
    cos = prod / mag.sqrt()
    loss = _zeros_where(target == 1, 1 - cos) + _zeros_where(target == -1, (cos - margin).clamp(min=0))
    return _reduce(loss, r)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    r = _reduction(reduction, size_average, reduce)
    loss = _zeros_where(target != 1, (margin - input).clamp(min=0)) + _zeros_where(target != -1, input)
    return _reduce(loss, r)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    r = _reduction(reduction, size_average, reduce)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.size()}, input2: {input2.size()}, target: {target.size()} ")
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), r)


def _not_differentiable(fn, arg, t):
    if t is not None and t.requires_grad and _gs.grad_enabled:
        raise RuntimeError(f"The function '{fn}' is not differentiable with respect to argument '{arg}'. This input "
                           "cannot have requires_grad True.")


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    r = _reduction(reduction, size_average, reduce)
    _not_differentiable("soft_margin_loss", "target", target)
    return _reduce((-input * target).exp().log1p(), r)


def _check_margin_input(input):
    if not (input.dim() == 2 and input.shape[1] != 0 or input.dim() <= 1 and input.numel() > 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    return (1 if input.dim() <= 1 else input.shape[0]), (input.shape[-1] if input.dim() else 1)


def _check_long(target):
    if target.dtype.is_floating_point or target.dtype.itemsize != 8:
        raise RuntimeError(f"expected scalar type Long but found {_tname(target._data)}")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    one_hot = OPS["one_hot"].call
    r = _reduction(reduction, size_average, reduce)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    n, c = _check_margin_input(input)
    if target.dim() > 1 or target.numel() != n:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{n}], but got {list(target.shape)}. Input "
                           f"has shape {list(input.shape)}.")
    _check_long(target)
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"inconsistent weight size, expected {c} but got {list(weight.shape)}")
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {_tname(input._data)} but found {_tname(weight._data)}")
    _not_differentiable("multi_margin_loss", "weight", weight)
    t = target.reshape(n)
    if n and bool(((t < 0) | (t >= c)).any()):
        raise RuntimeError("target out of range")
    x = input.reshape(n, c)
    # relu, not clamp: PyTorch's kernel passes no gradient where a margin term is exactly 0
    z = (margin - x.gather(1, t.unsqueeze(1)) + x).relu()
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[t].unsqueeze(1)
    loss = z.masked_fill(one_hot(t, c).bool(), 0).sum(1) / c
    return _reduce(loss.reshape(target.shape), r)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    one_hot = OPS["one_hot"].call
    r = _reduction(reduction, size_average, reduce)
    n, c = _check_margin_input(input)
    if target.shape != input.shape:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    _check_long(target)
    x, t = input.reshape(n, c), target.reshape(n, c)
    valid = (t < 0).cumsum(1) == 0  # a sample's targets: the entries before its first negative one
    if bool(((t < -1) | (t >= c)).any()):
        raise RuntimeError("argument #2 'target' is out of range")
    tc = t.clamp(min=0)
    is_target = (one_hot(tc, c) * valid.unsqueeze(2)).sum(1) > 0  # (n, c)
    # every (target j, non-target k) pair: max(0, 1 - (x_j - x_k)); a repeated target counts twice
    z = (1 - x.gather(1, tc).unsqueeze(2) + x.unsqueeze(1)).relu()
    keep = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = z.masked_fill(~keep, 0).sum((1, 2)) / c
    return _reduce(loss.reshape(input.shape[:-1]), r)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    sp = OPS["softplus"].call
    loss = -(target * -sp(-input) + (1 - target) * -sp(input))  # logsigmoid(x) = -softplus(-x)
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.dim() - 1) / input.shape[-1]
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce(loss, _ENUM[reduction])


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    r = _reduction(reduction)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:  # Stirling's approximation of log(target!), for targets above 1
        small = target <= 1
        t = target.masked_fill(small, 1)  # no log(0) warnings (nor torch's nan target gradient there)
        loss = loss + (t * t.log() - t + 0.5 * (2 * np.pi * t).log()).masked_fill(small, 0)
    return _reduce(loss, r)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    from ..autograd.grad_mode import no_grad
    from .factory import ones_like

    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * ones_like(input)
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if tuple(input.shape[:-1]) == tuple(var.shape):  # one variance per row: broadcast over the last dim
            var = var.unsqueeze(-1)
        elif not (input.dim() == var.dim()
                  and sum(v for i, v in zip(input.shape, var.shape, strict=True) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    # NOTE(pytorch): the clamp runs under no_grad on a copy, so a clamped entry's gradient is the
    # formula's at eps, not zero
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, _ENUM[reduction])


def _margin_samples(rng):
    def r(*s):
        return rng.standard_normal(s)

    def sign(*s):
        return np.where(rng.uniform(size=s) > 0.5, 1.0, -1.0)

    return r, sign


def _cos_emb_samples(rng):
    r, sign = _margin_samples(rng)
    return [sample("mean", r(4, 3), r(4, 3), sign(4), no_grad=(2,)),
            sample("margin_sum", r(4, 3), nc(r(4, 3)), sign(4), 0.3, reduction="sum", no_grad=(2,)),
            sample("none_0d_pos", r(5), r(5), np.array(1.0), reduction="none", no_grad=(2,)),
            sample("none_0d_neg", r(5), r(5), np.array(-1.0), -0.5, reduction="none", no_grad=(2,))]


def _hinge_samples(rng):
    r, sign = _margin_samples(rng)
    return [sample("mean", r(3, 4), sign(3, 4), no_grad=(1,)),
            sample("margin_sum", r(3, 4), sign(3, 4), 0.5, reduction="sum", no_grad=(1,)),
            sample("none_bcast", nc(r(3, 4)), sign(4), reduction="none", no_grad=(1,)),
            sample("0d", r(), np.array(-1.0), no_grad=(1,))]


def _ranking_samples(rng):
    r, sign = _margin_samples(rng)
    return [sample("mean", r(5), r(5), sign(5), no_grad=(2,)),
            sample("margin_sum", r(5), r(5), sign(5), 0.3, reduction="sum", no_grad=(2,)),
            sample("none_2d", r(2, 3), r(2, 3), sign(2, 3), reduction="none")]


def _soft_margin_samples(rng):
    r, sign = _margin_samples(rng)
    return [sample("mean", r(3, 4), sign(3, 4), no_grad=(1,)),
            sample("none_nc", nc(r(3, 4)), sign(3, 4), reduction="none", no_grad=(1,)),
            sample("sum_soft_target", r(5), r(5), reduction="sum", no_grad=(1,))]


def _multi_margin_samples(rng):
    r, _ = _margin_samples(rng)
    t = np.array([0, 3, 2, 3])
    return [sample("mean", r(4, 5), t), sample("p2_margin_sum", r(4, 5), t, 2, 0.5, reduction="sum"),
            sample("weight_none", nc(r(4, 5)), t, weight=rng.uniform(0.5, 2, 5), reduction="none"),
            sample("1d", r(5), np.array(2)), sample("1d_none_target1", r(5), np.array([4]), reduction="none")]


def _multilabel_samples(rng):
    r, _ = _margin_samples(rng)
    t = np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 0]])
    return [sample("mean", r(3, 4), t), sample("none_nc", nc(r(3, 4)), t, reduction="none"),
            sample("sum_repeat", r(3, 4), np.array([[1, 1, -1, 0], [0, 2, -1, 3], [2, 3, 0, 1]]), reduction="sum"),
            sample("1d", r(4), np.array([2, 0, -1, 1]))]


def _multilabel_soft_samples(rng):
    r, _ = _margin_samples(rng)

    def t(*s):
        return (rng.uniform(size=s) > 0.5).astype(float)

    return [sample("mean", r(3, 4), t(3, 4), no_grad=(1,)),
            sample("weight_none", r(3, 4), rng.uniform(0, 1, (3, 4)), weight=rng.uniform(0.5, 2, 4), reduction="none"),
            sample("sum_nc", nc(r(3, 4)), t(3, 4), reduction="sum", no_grad=(1,)),
            sample("1d", r(5), t(5), no_grad=(1,))]


def _poisson_samples(rng):
    r, _ = _margin_samples(rng)

    def counts(*s):
        return rng.integers(0, 6, s).astype(float)

    return [sample("log_input", r(3, 4), counts(3, 4), no_grad=(1,)),
            sample("rate_sum", rng.uniform(0.2, 3, (3, 4)), counts(3, 4), False, reduction="sum", no_grad=(1,)),
            sample("full_none", r(3, 4), rng.uniform(1.5, 4, (3, 4)), True, True, reduction="none"),
            sample("full_rate_counts", rng.uniform(0.2, 3, (5,)), counts(5), False, True, no_grad=(1,))]


def _gaussian_samples(rng):
    r, _ = _margin_samples(rng)

    def v(*s):
        return rng.uniform(0.3, 2, s)

    return [sample("hetero", r(3, 4), r(3, 4), v(3, 4)),
            sample("per_row_full_sum", r(3, 4), r(3, 4), v(3), True, reduction="sum"),
            sample("one_dim_none", r(2, 3, 4), r(2, 3, 4), v(2, 1, 4), reduction="none"),
            sample("float_var", r(3, 4), r(3, 4), 0.7),
            sample("clamped", r(3), r(3), np.array([1e-8, 0.5, 1.0]), eps=1e-3, no_grad=(2,))]


for _fn, _make in ((cosine_embedding_loss, _cos_emb_samples), (hinge_embedding_loss, _hinge_samples),
                   (margin_ranking_loss, _ranking_samples), (soft_margin_loss, _soft_margin_samples),
                   (multi_margin_loss, _multi_margin_samples), (multilabel_margin_loss, _multilabel_samples),
                   (multilabel_soft_margin_loss, _multilabel_soft_samples), (poisson_nll_loss, _poisson_samples),
                   (gaussian_nll_loss, _gaussian_samples)):
    defcomposite(_fn, samples=_make, api="nn.functional." + _fn.__name__, method=False)
