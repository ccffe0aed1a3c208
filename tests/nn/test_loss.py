"""Loss functions and modules against PyTorch: values and gradients over the options, errors,
double backward through the fused cross_entropy, and the modules' buffers and options."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import ndgrad

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 5))
X3 = RNG.standard_normal((2, 5, 3))
T = np.array([0, 4, 2, -100, 1, 3])
T3 = np.array([[0, 4, 2], [-100, 1, 3]])
W = RNG.uniform(0.5, 2.0, 5)


def _ce_case(T_, fn, x, t, w, reduction, ls, dtype):
    xt = T_.tensor(x, dtype=dtype, requires_grad=True)
    kw = dict(reduction=reduction)
    if w is not None:
        kw["weight"] = T_.tensor(w, dtype=dtype)
    if ls:
        kw["label_smoothing"] = ls
    loss = fn(T_)(xt, T_.tensor(t), **kw)
    loss.sum().backward()
    return loss, xt.grad


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("shape", ["2d", "3d", "unbatched"])
@pytest.mark.parametrize("reduction,weighted,ls", list(itertools.product(["mean", "sum", "none"], [False, True],
                                                                          [0.0, 0.3])))
def test_class_index_options(ref, name, shape, reduction, weighted, ls):
    if ls and name == "nll_loss":
        pytest.skip("nll_loss has no label_smoothing")
    x, t = {"2d": (X, T), "3d": (X3, T3), "unbatched": (X[0], np.array(2))}[shape]
    w = W if weighted else None
    for dtype in ("float64", "float32"):
        ref.same(lambda T_: _ce_case(T_, lambda m: getattr(m.nn.functional, name), x, t, w, reduction, ls,
                                     getattr(T_, dtype)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_custom_ignore_index_and_all_ignored(ref, reduction):
    ref.same(lambda T_: _ce_case(T_, lambda m: lambda x, t, **k: m.nn.functional.cross_entropy(
        x, t, ignore_index=2, **k), X, T.clip(0), W, reduction, 0.1, T_.float64))
    # every target ignored: 'mean' is nan (0/0) and the gradient zero
    t = np.full(6, -100)
    for ls in (0.0, 0.2):
        for w in (None, W):
            ref.same(lambda T_: _ce_case(T_, lambda m: m.nn.functional.cross_entropy, X, t, w, reduction, ls,
                                         T_.float64))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted,ls", [(False, 0.0), (True, 0.0), (True, 0.4)])
def test_cross_entropy_probabilities(ref, reduction, weighted, ls):
    p = RNG.uniform(0, 1, X3.shape)

    def f(T_):
        x = T_.tensor(X3, requires_grad=True)
        tp = T_.tensor(p, requires_grad=True)
        loss = T_.nn.functional.cross_entropy(x, tp, weight=T_.tensor(W) if weighted else None,
                                              reduction=reduction, label_smoothing=ls)
        loss.sum().backward()
        return loss, x.grad, tp.grad

    ref.same(f)



@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows", ["far_apart", "inf", "nan"])
def test_cross_entropy_rows_of_any_scale(ref, dtype, rows):
    """Rows whose logits lie far apart (the global maximum no longer a safe shift for all rows),
    or hold inf and nan, give PyTorch's losses and gradients."""
    x = RNG.standard_normal((4, 5)) * 3
    x[1] -= 500.0
    x[2] += 80.0
    if rows == "inf":
        x[3, 1] = np.inf
    elif rows == "nan":
        x[0, 2] = np.nan
    for reduction in ("none", "mean"):
        for ls in (0.0, 0.2):
            ref.same(lambda T_: _ce_case(T_, lambda m: m.nn.functional.cross_entropy, x, np.array([0, 4, 2, 1]),
                                         None, reduction, ls, getattr(T_, dtype)), rtol=1e-5, atol=1e-6)


def test_cross_entropy_double_backward(ref):
    def f(T_):
        x = T_.tensor(X, requires_grad=True)
        loss = T_.nn.functional.cross_entropy(x, T_.tensor(T), weight=T_.tensor(W), label_smoothing=0.1)
        (g,) = T_.autograd.grad(loss, x, create_graph=True)
        (gg,) = T_.autograd.grad((g * g).sum(), x)
        return g, gg

    ref.same(f)


def test_cross_entropy_is_one_node():
    x = ndgrad.tensor(X, requires_grad=True)
    loss = ndgrad.nn.functional.cross_entropy(x, ndgrad.tensor(T))
    assert type(loss.grad_fn).__name__ == "CrossEntropyLossBackward0"
    assert loss.grad_fn.next_functions[0][0] is x.grad_fn or loss.grad_fn.next_functions[0][0] is not None


def test_nll_loss_double_backward_through_log_softmax(ref):
    def f(T_):
        x = T_.tensor(X3, requires_grad=True)
        loss = T_.nn.functional.nll_loss(x.log_softmax(1), T_.tensor(T3), weight=T_.tensor(W), reduction="sum")
        (g,) = T_.autograd.grad(loss, x, create_graph=True)
        (gg,) = T_.autograd.grad((g * g).sum(), x)
        return loss, g, gg

    ref.same(f)


# --- errors ---
@pytest.mark.parametrize("case", [
    "out_of_range", "negative", "int32_target", "float_target", "batch_mismatch", "multi_target",
    "weight_size", "weight_dtype", "nd_target_size", "nd_weight", "label_smoothing", "reduction",
    "prob_long", "prob_ignore_index", "nll_0d", "weight_requires_grad",
])
def test_class_index_errors(ref, case):
    def f(T_):
        F = T_.nn.functional
        x = T_.tensor(X, dtype=T_.float32)
        x3 = T_.tensor(X3, dtype=T_.float32)
        t = T_.tensor(T.clip(0))
        if case == "out_of_range":
            return F.cross_entropy(x, T_.tensor([0, 5, 1, 1, 1, 1]))
        if case == "negative":
            return F.nll_loss(x, T_.tensor([0, -1, 1, 1, 1, 1]))
        if case == "int32_target":
            return F.cross_entropy(x, t.int())
        if case == "float_target":
            return F.nll_loss(x, t.float())
        if case == "batch_mismatch":
            return F.cross_entropy(x, t[:4])
        if case == "multi_target":
            return F.cross_entropy(x, T_.zeros(6, 2, dtype=T_.int64))
        if case == "weight_size":
            return F.cross_entropy(x, t, weight=T_.ones(3))
        if case == "weight_dtype":
            return F.cross_entropy(x, t, weight=T_.ones(5, dtype=T_.float64))
        if case == "nd_target_size":
            return F.cross_entropy(x3, T_.zeros(2, 2, dtype=T_.int64))
        if case == "nd_weight":
            return F.nll_loss(x3, T_.zeros(2, 3, dtype=T_.int64), weight=T_.ones(2))
        if case == "label_smoothing":
            return F.cross_entropy(x, t, label_smoothing=1.5)
        if case == "reduction":
            return F.cross_entropy(x, t, reduction="avg")
        if case == "prob_long":
            return F.cross_entropy(T_.tensor(1.0), T_.tensor(2))
        if case == "prob_ignore_index":
            return F.cross_entropy(x, T_.rand(6, 5), ignore_index=1)
        if case == "nll_0d":
            return F.nll_loss(T_.tensor(1.0), T_.tensor(2))
        if case == "weight_requires_grad":
            return F.cross_entropy(x.requires_grad_(), t, weight=T_.ones(5, requires_grad=True))

    exc = {"out_of_range": IndexError, "negative": IndexError, "batch_mismatch": ValueError,
           "reduction": ValueError, "nll_0d": ValueError}.get(case, RuntimeError)
    ref.raises(f, exc)


@pytest.mark.parametrize("case", ["bce_range", "bce_size", "bce_dtype", "bce_weight", "logits_size",
                                  "smooth_beta", "huber_delta", "mse_reduction", "mse_weight_size",
                                  "mse_bcast", "kl_reduction"])
def test_other_errors(ref, case):
    def f(T_):
        F = T_.nn.functional
        a = T_.tensor(RNG.uniform(0.1, 0.9, (3, 4)), dtype=T_.float32)
        b = T_.tensor(RNG.uniform(0.1, 0.9, (3, 4)), dtype=T_.float32)
        if case == "bce_range":
            return F.binary_cross_entropy(a * 3, b)
        if case == "bce_size":
            return F.binary_cross_entropy(a, b[0])
        if case == "bce_dtype":
            return F.binary_cross_entropy(a, b.double())
        if case == "bce_weight":
            return F.binary_cross_entropy(a, b, weight=T_.ones(5))
        if case == "logits_size":
            return F.binary_cross_entropy_with_logits(a, b[:, 0])
        if case == "smooth_beta":
            return F.smooth_l1_loss(a, b, beta=-1.0)
        if case == "huber_delta":
            return F.huber_loss(a, b, delta=0.0)
        if case == "mse_reduction":
            return F.mse_loss(a, b, reduction="avg")
        if case == "mse_weight_size":
            return F.mse_loss(a, b, weight=T_.ones(4))
        if case == "mse_bcast":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return F.mse_loss(a, b[:2])
        if case == "kl_reduction":
            return F.kl_div(a, b, reduction="avg")

    exc = ValueError if case in ("bce_size", "logits_size", "mse_reduction", "mse_weight_size",
                                 "kl_reduction") else RuntimeError
    ref.raises(f, exc)


def test_warnings():
    F = ndgrad.nn.functional
    a, b = ndgrad.randn(3, 4), ndgrad.randn(4)
    with pytest.warns(UserWarning, match="Using a target size"):
        F.mse_loss(a, b)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(a, a)
    with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
        F.l1_loss(a, a, size_average=False)


# --- other losses: values and gradients over their options ---
def _pair(T_, a, b, rg_target=True):
    x = T_.tensor(a, requires_grad=True)
    t = T_.tensor(b, requires_grad=rg_target)
    return x, t


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,kw", [
    ("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}), ("smooth_l1_loss", {"beta": 0.0}),
    ("huber_loss", {"delta": 0.6}), ("mse_loss", {"weight": True}), ("l1_loss", {"weight": True}),
    ("huber_loss", {"weight": True}), ("kl_div", {}), ("kl_div", {"log_target": True}),
    ("binary_cross_entropy", {}), ("binary_cross_entropy", {"weight": True}),
    ("binary_cross_entropy_with_logits", {}), ("binary_cross_entropy_with_logits", {"weight": True}),
    ("binary_cross_entropy_with_logits", {"pos_weight": True}),
])
def test_pointwise_losses(ref, name, kw, reduction):
    a = RNG.uniform(0.05, 0.95, (3, 4)) if name == "binary_cross_entropy" else RNG.uniform(-2, 2, (3, 4))
    b = RNG.uniform(0.05, 0.95, (3, 4))
    wv = RNG.uniform(0.5, 2, (3, 4))

    def f(T_):
        x, t = _pair(T_, np.log(b) if name == "kl_div" else a, np.log(a.clip(0.05)) if kw.get("log_target") else b)
        k = {key: (T_.tensor(wv) if v is True else v) for key, v in kw.items() if key != "log_target"}
        if "log_target" in kw:
            k["log_target"] = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loss = getattr(T_.nn.functional, name)(x, t, reduction=reduction, **k)
        loss.sum().backward()
        return loss, x.grad, t.grad

    ref.same(f)


def test_bce_with_logits_stable(ref):
    def f(T_):
        x = T_.tensor([-200.0, -30.0, 0.0, 30.0, 200.0], requires_grad=True)
        loss = T_.nn.functional.binary_cross_entropy_with_logits(x, T_.tensor([1.0, 0.0, 0.5, 1.0, 0.0]),
                                                                 reduction="none")
        loss.sum().backward()
        return loss, x.grad

    ref.same(f, rtol=1e-6)


def test_bce_clamps_log(ref):
    def f(T_):
        x = T_.tensor([0.0, 1.0, 0.5], requires_grad=True)
        loss = T_.nn.functional.binary_cross_entropy(x, T_.tensor([1.0, 0.0, 0.5]), reduction="none")
        loss.sum().backward()
        return loss, x.grad

    ref.same(f)


def test_legacy_size_average(ref):
    def f(T_):
        x = T_.tensor(X, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (T_.nn.functional.cross_entropy(x, T_.tensor(T), size_average=False),
                    T_.nn.functional.mse_loss(x, x.detach() * 2, reduce=False),
                    T_.nn.MSELoss(size_average=False).reduction)

    ref.same(f)


# --- modules ---
def test_modules(ref):
    pv = RNG.uniform(0.1, 0.9, X.shape)

    def f(T_):
        nn = T_.nn
        x = T_.tensor(X, requires_grad=True)
        t = T_.tensor(T)
        p = T_.tensor(pv)
        w = T_.tensor(W)
        mods = [nn.CrossEntropyLoss(weight=w, label_smoothing=0.1), nn.CrossEntropyLoss(ignore_index=2),
                nn.NLLLoss(weight=w, reduction="sum"), nn.MSELoss(), nn.L1Loss(reduction="none"),
                nn.SmoothL1Loss(beta=0.3), nn.HuberLoss(delta=0.4), nn.BCELoss(weight=w),
                nn.BCEWithLogitsLoss(pos_weight=w), nn.KLDivLoss(reduction="batchmean", log_target=True)]
        out = []
        for m in mods:
            if isinstance(m, (nn.CrossEntropyLoss, nn.NLLLoss)):
                tgt = t.clamp(min=0) if isinstance(m, nn.CrossEntropyLoss) and m.ignore_index == 2 else t
                loss = m(x, tgt)
            elif isinstance(m, nn.BCELoss):
                loss = m(x.sigmoid(), p)
            else:
                loss = m(x, p)
            out.append(loss)
            out.append(sorted(k for k, _ in m.named_buffers()))
            out.append(m.reduction)
        sum(o.sum() for o in out if not isinstance(o, (str, list))).backward()
        out.append(x.grad)
        return out

    ref.same(f)


def test_module_buffers_and_attributes(ref):
    def f(T_):
        nn = T_.nn
        m = nn.BCEWithLogitsLoss(weight=T_.ones(2), pos_weight=T_.ones(2))
        c = nn.CrossEntropyLoss(ignore_index=3, label_smoothing=0.2, reduction="sum")
        return (sorted(m.state_dict()), sorted(nn.CrossEntropyLoss().state_dict()), c.ignore_index,
                c.label_smoothing, c.reduction, nn.HuberLoss(delta=2.0).delta, nn.SmoothL1Loss(beta=0.5).beta,
                nn.KLDivLoss(log_target=True).log_target, repr(nn.MSELoss()))

    ref.same(f)
