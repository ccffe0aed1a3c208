"""Optimizers against torch: trajectories over 5 fixed gradient sets, state_dict, errors."""

from __future__ import annotations

import copy
import importlib
import warnings

import numpy as np
import pytest

import ndgrad

CONFIGS = {
    "SGD": [dict(lr=0.1), dict(lr=0.1, momentum=0.9), dict(lr=0.1, momentum=0.9, dampening=0.3),
            dict(lr=0.1, momentum=0.9, nesterov=True), dict(lr=0.1, weight_decay=0.1),
            dict(lr=0.1, momentum=0.5, weight_decay=0.2, maximize=True),
            dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True)],
    "Adam": [dict(), dict(lr=0.01, betas=(0.8, 0.9)), dict(lr=0.01, weight_decay=0.1),
             dict(lr=0.01, amsgrad=True), dict(lr=0.01, maximize=True, amsgrad=True, eps=1e-6),
             dict(lr=0.01, betas=(0.3, 0.5), weight_decay=0.05),
             dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)],
    "AdamW": [dict(), dict(lr=0.01, weight_decay=0.1), dict(lr=0.01, amsgrad=True),
              dict(lr=0.01, weight_decay=0.3, maximize=True, amsgrad=True)],
    "RMSprop": [dict(), dict(lr=0.01, alpha=0.9), dict(lr=0.01, momentum=0.9),
                dict(lr=0.01, centered=True), dict(lr=0.01, centered=True, momentum=0.5),
                dict(lr=0.01, weight_decay=0.1, maximize=True),
                dict(lr=0.01, alpha=0.3, centered=True)],
    "NAdam": [dict(), dict(lr=0.01, betas=(0.8, 0.9)), dict(lr=0.01, weight_decay=0.1),
              dict(lr=0.01, momentum_decay=0.1, maximize=True),
              dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, eps=1e-6)],
    "RAdam": [dict(), dict(lr=0.01, betas=(0.8, 0.9)), dict(lr=0.01, weight_decay=0.1),
              dict(lr=0.01, betas=(0.5, 0.6), maximize=True),  # rectified from step 2 on
              dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, eps=1e-6)],
    "Adagrad": [dict(), dict(lr=0.1, lr_decay=0.1), dict(lr=0.1, weight_decay=0.1),
                dict(lr=0.1, initial_accumulator_value=0.5), dict(lr=0.1, eps=1e-3, maximize=True)],
    "Adamax": [dict(), dict(lr=0.01, betas=(0.8, 0.9)), dict(lr=0.01, weight_decay=0.1),
               dict(lr=0.05, eps=1e-3, maximize=True)],
    "ASGD": [dict(), dict(lr=0.05, lambd=0.1, alpha=0.5), dict(lr=0.05, t0=2),
             dict(lr=0.05, t0=1, weight_decay=0.1, maximize=True)],
    "Rprop": [dict(), dict(lr=0.05, etas=(0.3, 1.5)), dict(lr=0.05, step_sizes=(0.02, 0.08)),
              dict(lr=0.05, maximize=True)],
    "Adafactor": [dict(), dict(lr=0.05, beta2_decay=-0.5), dict(lr=0.05, eps=(1e-4, 1e-2), d=1.5),
                  dict(lr=0.05, weight_decay=0.1, maximize=True)],
}
CASES = [(name, i) for name, cfgs in CONFIGS.items() for i in range(len(cfgs))]
SHAPES = [(3, 4), (4,), ()]
_rng = np.random.default_rng(0)
INIT = [_rng.standard_normal(s) for s in SHAPES]
GRADS = [[_rng.standard_normal(s) for s in SHAPES] for _ in range(5)]


def _dtype(T, dtype):
    return getattr(T, dtype)


def _make(T, name, kw, dtype):
    params = [T.tensor(a, dtype=_dtype(T, dtype), requires_grad=True) for a in INIT]
    return params, getattr(T.optim, name)(params, **kw)


def _run(T, params, opt, steps, dtype):
    out = []
    for k in steps:
        for i, (p, g) in enumerate(zip(params, GRADS[k])):
            # the 0-d parameter gets no gradient on step 2: it must be skipped, not updated
            p.grad = None if (k == 2 and i == 2) else T.tensor(g, dtype=_dtype(T, dtype))
        opt.step()
        out.append([np.array(p.detach().numpy() if T is not ndgrad else p._data) for p in params])
    return out


def _tol(dtype):
    return dict(rtol=1e-6, atol=1e-7 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,i", CASES)
def test_trajectory_matches_torch(name, i, dtype, torch_or_skip):
    kw = CONFIGS[name][i]
    got = _run(ndgrad, *_make(ndgrad, name, kw, dtype), range(5), dtype)
    want = _run(torch_or_skip, *_make(torch_or_skip, name, kw, dtype), range(5), dtype)
    for step, (g, w) in enumerate(zip(got, want)):
        for a, b in zip(g, w):
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, **_tol(dtype), err_msg=f"step {step}")


def _structure(sd):
    return {
        "state": {k: {n: (tuple(v.shape), str(v.dtype).split(".")[-1]) if hasattr(v, "shape") else v
                      for n, v in s.items()} for k, s in sd["state"].items()},
        "param_groups": sd["param_groups"],
    }


@pytest.mark.parametrize("name,i", CASES)
def test_state_dict_round_trip(name, i, torch_or_skip):
    kw, dtype = CONFIGS[name][i], "float64"
    straight = _run(ndgrad, *_make(ndgrad, name, kw, dtype), range(5), dtype)
    params, opt = _make(ndgrad, name, kw, dtype)
    _run(ndgrad, params, opt, range(3), dtype)
    sd = copy.deepcopy(opt.state_dict())  # what torch.save/torch.load would give back
    tparams, topt = _make(torch_or_skip, name, kw, dtype)
    _run(torch_or_skip, tparams, topt, range(3), dtype)
    tsd = topt.state_dict()
    assert _structure(sd) == _structure(tsd)
    for k, s in tsd["state"].items():
        for n, v in s.items():
            np.testing.assert_allclose(np.asarray(sd["state"][k][n]._data), v.numpy(), rtol=1e-10)

    params2 = [ndgrad.tensor(p._data.copy(), requires_grad=True) for p in params]
    opt2 = getattr(ndgrad.optim, name)(params2, **{k: v for k, v in kw.items() if k != "lr"})
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    resumed = _run(ndgrad, params2, opt2, range(3, 5), dtype)
    if name in ("NAdam", "ASGD"):
        # NOTE(pytorch): loading casts float32 state (NAdam's mu_product, ASGD's eta and mu) to
        # the parameter's dtype, so a resumed run differs from a straight one in the last bits;
        # it must match torch's resumed.
        tparams2 = [torch_or_skip.tensor(p.detach().numpy().copy(), requires_grad=True)
                    for p in tparams]
        topt2 = getattr(torch_or_skip.optim, name)(tparams2, **kw)
        topt2.load_state_dict(tsd)
        straight = [None] * 3 + _run(torch_or_skip, tparams2, topt2, range(3, 5), dtype)
        for a, b in zip(resumed, straight[3:]):
            for x, y in zip(a, b):
                np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-15)
        return
    for a, b in zip(resumed, straight[3:]):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax", "ASGD", "Rprop"])
def test_complex_parameters_update_as_real_pairs(name, torch_or_skip):
    rng = np.random.default_rng(3)
    init = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    grads = [rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3)) for _ in range(7)]
    out = []
    for T in (ndgrad, torch_or_skip):
        p = T.tensor(init, requires_grad=True)
        opt = getattr(T.optim, name)([p], lr=0.05, **({} if name == "Rprop" else {"weight_decay": 0.1}))
        for g in grads:
            p.grad = T.tensor(g)
            opt.step()
        out.append(p.detach().numpy().copy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12, atol=1e-14)


def test_quadratic_loss_with_backward_and_closure(ref):
    def scenario(T):
        w = T.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=T.float64, requires_grad=True)
        b = T.tensor([0.1, 0.2], dtype=T.float64, requires_grad=True)
        opt = T.optim.Adam([{"params": [w]}, {"params": [b], "lr": 0.05}], lr=0.1)
        x = T.tensor([[1.0, 2.0], [3.0, 4.0], [-1.0, 0.5]], dtype=T.float64)
        losses = []

        def closure():
            opt.zero_grad()
            loss = ((x @ w + b) ** 2).sum()
            loss.backward()
            return loss

        for _ in range(5):
            losses.append(opt.step(closure).item())
        return losses, w.detach(), b.detach()

    ref.same(scenario, rtol=1e-10)


def test_param_groups_defaults_and_add_param_group(ref):
    def scenario(T):
        a, b, c = (T.zeros(2, requires_grad=True) for _ in range(3))
        opt = T.optim.SGD([{"params": a}, {"params": [b], "lr": 0.5, "momentum": 0.9}], lr=0.1)
        opt.add_param_group({"params": (c,), "weight_decay": 0.1})
        return [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]

    ref.same(scenario)


def test_zero_grad(ref):
    def scenario(T):
        a = T.ones(2, requires_grad=True)
        b = T.ones(2, requires_grad=True)
        opt = T.optim.SGD([a, b], lr=0.1)
        (a * 3).sum().backward()
        (b * 2).sum().backward()
        opt.zero_grad(set_to_none=False)
        kept = a.grad
        opt.zero_grad()
        return kept, a.grad is None, b.grad is None

    ref.same(scenario)


def test_step_bumps_version_and_saved_tensor_check(ref):
    def scenario(T):
        w = T.ones(2, requires_grad=True)
        opt = T.optim.SGD([w], lr=0.1, momentum=0.9)
        y = (w * w).sum()  # saves w
        w.grad = T.ones(2)
        v0 = w._version
        opt.step()
        return w._version > v0, y

    ref.same(scenario)

    def stale(T):
        w = T.ones(2, requires_grad=True)
        opt = T.optim.SGD([w], lr=0.1)
        y = (w * w).sum()
        w.grad = T.ones(2)
        opt.step()
        y.backward()

    ref.raises(stale, RuntimeError)


def test_hooks_and_repr():
    w = ndgrad.zeros(2, requires_grad=True)
    opt = ndgrad.optim.SGD([w], lr=0.1)
    seen = []
    h1 = opt.register_step_pre_hook(lambda o, a, k: seen.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: seen.append("post"))
    opt.step()
    h1.remove()
    opt.step()
    assert seen == ["pre", "post", "post"]
    assert repr(opt).startswith("SGD (\nParameter Group 0\n    dampening: 0\n")


def _p(T):
    return T.zeros(2, requires_grad=True)


ERRORS = [
    (lambda T: T.optim.SGD(_p(T)), TypeError),
    (lambda T: T.optim.SGD([]), ValueError),
    (lambda T: T.optim.SGD([1.0]), TypeError),
    (lambda T: T.optim.SGD([_p(T) * 2]), ValueError),
    (lambda T: T.optim.SGD([{"params": {_p(T)}}]), TypeError),
    (lambda T: (lambda p: T.optim.SGD([{"params": [p]}, {"params": [p]}]))(_p(T)), ValueError),
    (lambda T: T.optim.SGD([_p(T)], lr=-1), ValueError),
    (lambda T: T.optim.SGD([_p(T)], momentum=-1), ValueError),
    (lambda T: T.optim.SGD([_p(T)], weight_decay=-1), ValueError),
    (lambda T: T.optim.SGD([_p(T)], nesterov=True), ValueError),
    (lambda T: T.optim.SGD([_p(T)], momentum=0.9, dampening=0.1, nesterov=True), ValueError),
    (lambda T: T.optim.SGD([_p(T)], lr=T.ones(2)), ValueError),
    (lambda T: T.optim.Adam([_p(T)], betas=(1.0, 0.9)), ValueError),
    (lambda T: T.optim.Adam([_p(T)], betas=(0.9, -0.1)), ValueError),
    (lambda T: T.optim.Adam([_p(T)], eps=-1), ValueError),
    (lambda T: T.optim.AdamW([_p(T)], weight_decay=-1), ValueError),
    (lambda T: T.optim.RMSprop([_p(T)], alpha=-1), ValueError),
    (lambda T: T.optim.RMSprop([_p(T)], momentum=-1), ValueError),
    (lambda T: T.optim.NAdam([_p(T)], momentum_decay=-1), ValueError),
    (lambda T: T.optim.NAdam([_p(T)], betas=(0.9, 1.0)), ValueError),
    (lambda T: T.optim.RAdam([_p(T)], betas=(1.0, 0.9)), ValueError),
    (lambda T: T.optim.RAdam([_p(T)], eps=-1), ValueError),
    (lambda T: T.optim.Adagrad([_p(T)], lr_decay=-1), ValueError),
    (lambda T: T.optim.Adagrad([_p(T)], initial_accumulator_value=-1), ValueError),
    (lambda T: T.optim.Adamax([_p(T)], betas=(0.9, 1.0)), ValueError),
    (lambda T: T.optim.Adamax([_p(T)], eps=-1), ValueError),
    (lambda T: T.optim.ASGD([_p(T)], lr=-1), ValueError),
    (lambda T: T.optim.ASGD([_p(T)], weight_decay=-1), ValueError),
    (lambda T: T.optim.Rprop([_p(T)], etas=(1.1, 1.2)), ValueError),
    (lambda T: T.optim.Rprop([_p(T)], etas=(0.5, 0.9)), ValueError),
    (lambda T: T.optim.Adafactor([_p(T)], lr=-1), ValueError),
    (lambda T: T.optim.Adafactor([_p(T)], beta2_decay=0.1), ValueError),
    (lambda T: T.optim.Adafactor([_p(T)], eps=(-1, 1e-3)), ValueError),
    (lambda T: T.optim.Adafactor([_p(T)], eps=(None, -1)), ValueError),
    (lambda T: T.optim.Adafactor([_p(T)], d=0.5), ValueError),
    (lambda T: T.optim.Adafactor([_p(T)], weight_decay=-1), ValueError),
    (lambda T: T.optim.SGD([_p(T)], lr=0.1).add_param_group([_p(T)]), TypeError),
    (lambda T: (lambda p: T.optim.SGD([p]).add_param_group({"params": p}))(_p(T)), ValueError),
    (lambda T: T.optim.SGD([_p(T)]).load_state_dict(
        T.optim.SGD([_p(T), _p(T)]).state_dict()), ValueError),
    (lambda T: T.optim.SGD([_p(T)]).load_state_dict(
        T.optim.SGD([{"params": [_p(T)]}, {"params": [_p(T)]}]).state_dict()), ValueError),
    (lambda T: T.optim.Optimizer(
        [_p(T)], {"lr": importlib.import_module(T.__name__ + ".optim.optimizer").required}),
     ValueError),
]


@pytest.mark.parametrize("fn,exc", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors_match_torch(ref, fn, exc):
    ref.raises(fn, exc)


def test_duplicate_params_warn():
    p = _p(ndgrad)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        ndgrad.optim.SGD([p, p])
