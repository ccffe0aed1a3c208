"""``optim.swa_utils`` against torch: averaged parameters and buffers (SWA and EMA, both update
forms, with and without buffers), ``update_bn``'s statistics, ``SWALR``'s learning rates and
state, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad

RNG = np.random.default_rng(0)
W1, B1 = RNG.standard_normal((4, 3)), RNG.standard_normal(4)
W2 = RNG.standard_normal((2, 4))
STEPS = [[RNG.standard_normal(a.shape) * 0.1 for a in (W1, B1, W2)] for _ in range(5)]
DATA = [RNG.standard_normal((6, 3)) for _ in range(3)]


def _model(T, dtype):
    m = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.BatchNorm1d(4), T.nn.Linear(4, 2, bias=False))
    with T.no_grad():
        for p, a in zip(m.parameters(), (W1, B1, np.ones(4), np.zeros(4), W2), strict=True):
            p.copy_(T.tensor(a))
    return m.to(getattr(T, dtype))


def _averaged(T, dtype, how, use_buffers):
    from importlib import import_module

    swa = import_module(f"{T.__name__}.optim.swa_utils")
    kw = {"use_buffers": use_buffers}
    if how == "ema_multi":
        kw["multi_avg_fn"] = swa.get_ema_multi_avg_fn(0.8)
    elif how == "ema":
        kw["avg_fn"] = swa.get_ema_avg_fn(0.8)
    elif how == "swa_multi":
        kw["multi_avg_fn"] = swa.get_swa_multi_avg_fn()
    m = _model(T, dtype)
    avg = swa.AveragedModel(m, **kw)
    for step in STEPS:
        with T.no_grad():
            for p, d in zip((m[0].weight, m[0].bias, m[2].weight), step, strict=True):
                p.add_(T.tensor(d, dtype=p.dtype))
        m.train()
        m(T.tensor(DATA[0], dtype=getattr(T, dtype)))  # moves the running statistics
        avg.update_parameters(m)
    sd = avg.state_dict()
    return ({k: np.array(v.detach().numpy()) for k, v in sd.items()},
            avg(T.tensor(DATA[1], dtype=getattr(T, dtype))).detach().numpy())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("use_buffers", [False, True])
@pytest.mark.parametrize("how", ["swa", "swa_multi", "ema", "ema_multi"])
def test_averaged_model_matches_torch(how, use_buffers, dtype, torch_or_skip):
    if how == "swa_multi" and use_buffers:  # the integer buffer (num_batches_tracked) refused
        for T in (ndgrad, torch_or_skip):
            with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
                _averaged(T, dtype, how, use_buffers)
        return
    got_sd, got_out = _averaged(ndgrad, dtype, how, use_buffers)
    want_sd, want_out = _averaged(torch_or_skip, dtype, how, use_buffers)
    assert list(got_sd) == list(want_sd)  # n_averaged, then the copy's keys as module.*
    tol = {"rtol": 1e-12, "atol": 1e-14} if dtype == "float64" else {"rtol": 1e-5, "atol": 1e-6}
    for k in want_sd:
        assert got_sd[k].dtype == want_sd[k].dtype, k
        np.testing.assert_allclose(got_sd[k], want_sd[k], err_msg=k, **tol)
    np.testing.assert_allclose(got_out, want_out, **tol)


def _bn_stats(T, batches_as):
    from importlib import import_module

    swa = import_module(f"{T.__name__}.optim.swa_utils")
    m = _model(T, "float64")
    m.eval()
    loader = [T.tensor(x) for x in DATA]
    if batches_as == "tuple":
        loader = [(x, T.zeros(len(x))) for x in loader]
    swa.update_bn(loader, m)
    bn = m[1]
    return (bn.running_mean.numpy().copy(), bn.running_var.numpy().copy(),
            int(bn.num_batches_tracked), bn.momentum, m.training)


@pytest.mark.parametrize("batches_as", ["tensor", "tuple"])
def test_update_bn_matches_torch(batches_as, torch_or_skip):
    got, want = _bn_stats(ndgrad, batches_as), _bn_stats(torch_or_skip, batches_as)
    for a, b in zip(got[:2], want[:2], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert got[2:] == want[2:]


def _lrs(T, kw, steps=8):
    p1, p2 = T.zeros(2, requires_grad=True), T.zeros(3, requires_grad=True)
    opt = T.optim.SGD([{"params": [p1]}, {"params": [p2], "lr": 0.3}], lr=0.1)
    sched = T.optim.swa_utils.SWALR(opt, **kw)
    out = [sched.get_last_lr()]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
    sd = sched.state_dict()
    return out, sorted(sd), {k: v for k, v in sd.items() if not callable(v)}


@pytest.mark.parametrize("kw", [dict(swa_lr=0.05), dict(swa_lr=[0.05, 0.01], anneal_epochs=3),
                                dict(swa_lr=0.05, anneal_strategy="linear", anneal_epochs=4),
                                dict(swa_lr=0.02, anneal_epochs=0)])
def test_swalr_matches_torch(kw, torch_or_skip):
    got, want = _lrs(ndgrad, kw), _lrs(torch_or_skip, kw)
    np.testing.assert_allclose(np.array(got[0]), np.array(want[0]), rtol=1e-15)
    assert got[1] == want[1]  # the state's keys


def test_swalr_state_dict_round_trip():
    from ndgrad.optim.swa_utils import SWALR

    p = ndgrad.zeros(2, requires_grad=True)
    opt = ndgrad.optim.SGD([p], lr=0.1)
    sched = SWALR(opt, swa_lr=0.01, anneal_epochs=5, anneal_strategy="linear")
    for _ in range(2):
        opt.step()
        sched.step()
    sd = sched.state_dict()
    assert "anneal_func" not in sd and "optimizer" not in sd
    opt2 = ndgrad.optim.SGD([p], lr=0.7)
    sched2 = SWALR(opt2, swa_lr=0.5)
    sched2.load_state_dict(sd)
    opt2.load_state_dict(opt.state_dict())  # a resume restores both (lr and swa_lr of the groups)
    assert sched2.anneal_func is SWALR._linear_anneal
    for _ in range(4):
        opt.step()
        sched.step()
        opt2.step()
        sched2.step()
        assert sched2.get_last_lr() == sched.get_last_lr()


ERRORS = [
    (lambda T: T.optim.swa_utils.get_ema_multi_avg_fn(1.5), ValueError),
    (lambda T: T.optim.swa_utils.get_ema_avg_fn(-0.1), ValueError),
    (lambda T: T.optim.swa_utils.AveragedModel(T.nn.Linear(2, 2), avg_fn=lambda a, b, n: a,
                                               multi_avg_fn=lambda a, b, n: None), AssertionError),
    (lambda T: T.optim.swa_utils.SWALR(T.optim.SGD([T.zeros(1, requires_grad=True)], lr=0.1), 0.1,
                                       anneal_strategy="exp"), ValueError),
    (lambda T: T.optim.swa_utils.SWALR(T.optim.SGD([T.zeros(1, requires_grad=True)], lr=0.1), 0.1,
                                       anneal_epochs=-1), ValueError),
    (lambda T: T.optim.swa_utils.SWALR(T.optim.SGD([T.zeros(1, requires_grad=True)], lr=0.1),
                                       [0.1, 0.2]), ValueError),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_errors(ref, k):
    fn, exc = ERRORS[k]
    ref.raises(fn, exc)
