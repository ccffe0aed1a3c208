"""LR schedulers against torch: the lr (and momentum) sequence over 30 steps, state, errors."""

from __future__ import annotations

import warnings

import pytest

import ndgrad


def _lam(epoch):
    return 0.95**epoch


def _half_power(x):
    return 0.5**x


SCHEDS = {
    "StepLR": lambda S, o: S.StepLR(o, step_size=4),
    "StepLR-gamma": lambda S, o: S.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.5),
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, gamma=0.9),
    "Cosine": lambda S, o: S.CosineAnnealingLR(o, T_max=10),
    "Cosine-eta": lambda S, o: S.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "LambdaLR": lambda S, o: S.LambdaLR(o, _lam),
    "LambdaLR-list": lambda S, o: S.LambdaLR(o, [_lam, lambda e: 1.0 / (e + 1)]),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.9),
    "ConstantLR": lambda S, o: S.ConstantLR(o, factor=0.5, total_iters=4),
    "LinearLR": lambda S, o: S.LinearLR(o),
    "LinearLR-opts": lambda S, o: S.LinearLR(o, start_factor=0.1, end_factor=0.5, total_iters=10),
    "OneCycle-cos": lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=30),
    "OneCycle-linear": lambda S, o: S.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=31,
                                                 anneal_strategy="linear", pct_start=0.4),
    "OneCycle-3phase": lambda S, o: S.OneCycleLR(o, max_lr=0.5, epochs=3, steps_per_epoch=10,
                                                 three_phase=True, div_factor=10.0),
    "OneCycle-nomom": lambda S, o: S.OneCycleLR(o, max_lr=0.5, total_steps=30,
                                                cycle_momentum=False),
    "Sequential": lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=5), S.CosineAnnealingLR(o, T_max=20)],
        milestones=[5]),
    "Sequential-3": lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o, factor=0.5, total_iters=3), S.ExponentialLR(o, gamma=0.9),
            S.StepLR(o, step_size=4)], milestones=[6, 15]),
    "Chained": lambda S, o: S.ChainedScheduler(
        [S.ExponentialLR(o, gamma=0.95), S.StepLR(o, step_size=5, gamma=0.5)]),
    "Cyclic-tri": lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
    "Cyclic-tri2": lambda S, o: S.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=[0.1, 0.05], step_size_up=3,
                                           step_size_down=5, mode="triangular2", base_momentum=[0.7, 0.8]),
    "Cyclic-exp": lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=5, mode="exp_range", gamma=0.9,
                                          cycle_momentum=False),
    "Cyclic-fn": lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=2, scale_fn=_half_power,
                                         scale_mode="iterations"),
}


def _opt(T, name):
    a, b = T.zeros(2, requires_grad=True), T.zeros(3, requires_grad=True)
    groups = [{"params": [a]}, {"params": [b], "lr": 0.01}]
    if name.endswith("adam"):
        return T.optim.Adam(groups, lr=0.1)
    return T.optim.SGD(groups, lr=0.1, momentum=0.9)


def _sequence(T, key, opt_kind="sgd"):
    opt = _opt(T, opt_kind)
    sched = SCHEDS[key](T.optim.lr_scheduler, opt)
    out = [sched.get_last_lr()]
    for _ in range(30):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
        out.append([g["lr"] for g in opt.param_groups])
        out.append([g.get("momentum", g.get("betas")) for g in opt.param_groups])
    return out


@pytest.mark.parametrize("key", list(SCHEDS))
def test_lr_sequence_matches_torch(ref, key):
    ref.same(lambda T: _sequence(T, key), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("key", ["OneCycle-cos", "OneCycle-3phase", "Cosine", "Cyclic-tri2"])
def test_with_adam_betas(ref, key):
    ref.same(lambda T: _sequence(T, key, "adam"), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("key", ["StepLR", "Cosine", "OneCycle-cos", "LinearLR", "Sequential", "Cyclic-tri2",
                                 "Cyclic-fn"])
def test_state_dict_round_trip(ref, key):
    def scenario(T):
        S = T.optim.lr_scheduler
        opt = _opt(T, "sgd")
        sched = SCHEDS[key](S, opt)
        for _ in range(7):
            opt.step()
            sched.step()
        sd = sched.state_dict()
        opt2 = _opt(T, "sgd")
        opt2.load_state_dict(opt.state_dict())
        sched2 = SCHEDS[key](S, opt2)
        sched2.load_state_dict(sd)
        lrs = []
        for _ in range(10):
            opt2.step()
            sched2.step()
            lrs.append(sched2.get_last_lr())
        keys = sorted(k for k in sd if k != "_schedulers")
        return keys, lrs

    ref.same(scenario, rtol=1e-13)


def test_initial_lr_and_base_lrs(ref):
    def scenario(T):
        opt = _opt(T, "sgd")
        s = T.optim.lr_scheduler.StepLR(opt, 3)
        return [g["initial_lr"] for g in opt.param_groups], s.base_lrs, s.last_epoch

    ref.same(scenario)


def test_step_order_warning():
    opt = _opt(ndgrad, "sgd")
    sched = ndgrad.optim.lr_scheduler.StepLR(opt, 3)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    opt = _opt(ndgrad, "sgd")
    sched = ndgrad.optim.lr_scheduler.StepLR(opt, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        sched.step()


def test_epoch_argument_uses_closed_form(ref):
    def scenario(T):
        opt = _opt(T, "sgd")
        s = T.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt.step()
            s.step(4)
        return s.get_last_lr()

    ref.same(scenario, rtol=1e-13)


def _overstep(sched, n):
    for _ in range(n):
        sched.step()


ERRORS = [
    (lambda T, S, o: S.StepLR(object(), 3), TypeError),
    (lambda T, S, o: S.StepLR(o, 3, last_epoch=4), KeyError),
    (lambda T, S, o: S.LambdaLR(o, [_lam]), ValueError),
    (lambda T, S, o: S.LinearLR(o, start_factor=0), ValueError),
    (lambda T, S, o: S.LinearLR(o, end_factor=2), ValueError),
    (lambda T, S, o: S.OneCycleLR(o, max_lr=1.0), ValueError),
    (lambda T, S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=0), ValueError),
    (lambda T, S, o: S.OneCycleLR(o, max_lr=1.0, epochs=0, steps_per_epoch=2), ValueError),
    (lambda T, S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=5, pct_start=2.0), ValueError),
    (lambda T, S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=5, anneal_strategy="x"), ValueError),
    (lambda T, S, o: S.OneCycleLR(o, max_lr=[1.0], total_steps=5), ValueError),
    (lambda T, S, o: S.OneCycleLR(T.optim.Adagrad([T.zeros(1, requires_grad=True)]),
                                  max_lr=1.0, total_steps=5), ValueError),
    (lambda T, S, o: _overstep(S.OneCycleLR(o, max_lr=1.0, total_steps=2), 3), ValueError),
    (lambda T, S, o: S.SequentialLR(o, [], milestones=[]), ValueError),
    (lambda T, S, o: S.SequentialLR(o, [S.StepLR(o, 2)], milestones=[3]), ValueError),
    (lambda T, S, o: S.CyclicLR(o, 0.01, 0.1, mode="sine"), ValueError),
    (lambda T, S, o: S.CyclicLR(o, [0.01], 0.1), ValueError),
    (lambda T, S, o: S.CyclicLR(T.optim.Adagrad([T.zeros(1, requires_grad=True)]), 0.01, 0.1), ValueError),
    (lambda T, S, o: S.ReduceLROnPlateau(o, factor=1.0), ValueError),
    (lambda T, S, o: S.ReduceLROnPlateau(o, mode="up"), ValueError),
    (lambda T, S, o: S.ReduceLROnPlateau(o, threshold_mode="pct"), ValueError),
    (lambda T, S, o: S.ReduceLROnPlateau(o, min_lr=[0.0]), ValueError),
    (lambda T, S, o: S.ReduceLROnPlateau(object()), TypeError),
]


@pytest.mark.parametrize("fn,exc", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors_match_torch(ref, fn, exc):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref.raises(lambda T: fn(T, T.optim.lr_scheduler, _opt(T, "sgd")), exc)


METRICS = [1.0, 0.9, 0.9, 0.95, 0.9, 0.91, 0.92, 0.5, 0.5, 0.49995, 0.6, 0.7, 0.8, 0.8, 0.3, 0.3, 0.31,
           0.32, 0.33, 0.34, 0.35, 0.36]


@pytest.mark.parametrize("kw", [
    {}, {"patience": 1}, {"patience": 2, "cooldown": 2, "factor": 0.5},
    {"mode": "max", "patience": 1, "threshold": 0.05}, {"threshold_mode": "abs", "threshold": 0.02, "patience": 0},
    {"mode": "max", "threshold_mode": "abs", "patience": 1, "min_lr": [0.05, 0.001]},
    {"patience": 0, "factor": 0.1, "min_lr": 0.0095, "eps": 1e-3},
])
def test_reduce_lr_on_plateau_matches_torch(ref, kw):
    def scenario(T):
        opt = _opt(T, "sgd")
        s = T.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
        out = [s.get_last_lr()]
        for m in METRICS:
            opt.step()
            s.step(T.tensor(m) if m > 0.8 else m)  # a 0-d tensor or a number
            out.append((s.get_last_lr(), s.num_bad_epochs, s.cooldown_counter, s.best, s.last_epoch))
        return out

    ref.same(scenario, rtol=1e-13)


def test_reduce_lr_on_plateau_state_and_new_group(ref):
    def scenario(T):
        S = T.optim.lr_scheduler
        opt = _opt(T, "sgd")
        s = S.ReduceLROnPlateau(opt, patience=1, mode="max")
        for m in (1.0, 0.5, 0.4):
            s.step(m)
        sd = s.state_dict()
        s2 = S.ReduceLROnPlateau(_opt(T, "sgd"))
        s2.load_state_dict(sd)
        opt.add_param_group({"params": [T.zeros(1, requires_grad=True)], "lr": 0.5})
        for m in (0.3, 0.2):
            s.step(m)
        return sorted(sd), s2.mode, s2.mode_worse, s2.best, s.get_last_lr()

    ref.same(scenario)
    ref.raises(lambda T: _plateau_new_group(T), RuntimeError,
               "The number of param groups in the `optimizer` (3) differs from when `ReduceLROnPlateau` was "
               "initialized (2), usually due to a new param group being added to the optimizer. Please modify "
               "the `min_lrs` field to match the length of the `optimizer` param groups.")


def _plateau_new_group(T):
    opt = _opt(T, "sgd")
    s = T.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=[0.0, 0.0])
    opt.add_param_group({"params": [T.zeros(1, requires_grad=True)]})
    s.step(1.0)
    s.step(2.0)
