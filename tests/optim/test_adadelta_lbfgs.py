"""Adadelta and LBFGS against torch.optim: float64 trajectories, state dicts, errors."""

import copy

import numpy as np
import pytest

import ndgrad

torch = pytest.importorskip("torch")


def _params(lib, values):
    return [lib.tensor(v, dtype=lib.float64, requires_grad=True) for v in values]


def _close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(
        np.asarray(a.detach().numpy()), b.detach().numpy(), rtol=rtol, atol=atol
    )


@pytest.mark.parametrize(
    "kw", [{}, {"lr": 0.5, "rho": 0.8, "eps": 1e-4}, {"weight_decay": 0.1}, {"maximize": True}]
)
def test_adadelta_trajectory(kw):
    start = [[1.0, -2.0, 0.5], [[0.3, 0.7], [-1.1, 2.0]]]
    ps, qs = _params(ndgrad, start), _params(torch, start)
    opt, ref = ndgrad.optim.Adadelta(ps, **kw), torch.optim.Adadelta(qs, **kw)
    for _ in range(6):
        for lib, params, o in ((ndgrad, ps, opt), (torch, qs, ref)):
            o.zero_grad()
            loss = (params[0] ** 2).sum() * 3 + (params[1].sin() * params[1]).sum()
            loss.backward()
            o.step()
        for p, q in zip(ps, qs):
            _close(p, q)
    sd, tsd = opt.state_dict(), ref.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert list(sd["state"][0]) == list(tsd["state"][0])
    for k in ("square_avg", "acc_delta"):
        _close(sd["state"][1][k], tsd["state"][1][k])
    assert sd["state"][0]["step"].item() == 6.0 and sd["state"][0]["step"].dtype == ndgrad.float32


def test_adadelta_state_dict_round_trip_and_errors():
    ps = _params(ndgrad, [[1.0, 2.0]])
    opt = ndgrad.optim.Adadelta(ps, lr=0.3)
    ps[0].grad = ndgrad.tensor([0.5, -1.0], dtype=ndgrad.float64)
    opt.step()
    qs = _params(ndgrad, [ps[0].detach().numpy().tolist()])
    opt2 = ndgrad.optim.Adadelta(qs)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    assert opt2.param_groups[0]["lr"] == 0.3
    assert opt2.state[qs[0]]["step"].item() == 1.0
    for o in (opt, opt2):
        o.param_groups[0]["params"][0].grad = ndgrad.tensor([0.1, 0.2], dtype=ndgrad.float64)
        o.step()
    _close(qs[0], ps[0], rtol=0, atol=0)
    _close(opt2.state[qs[0]]["acc_delta"], opt.state[ps[0]]["acc_delta"], rtol=0, atol=0)
    w = ndgrad.zeros(1, requires_grad=True)
    tw = torch.zeros(1, requires_grad=True)
    for kw in ({"lr": -1}, {"rho": 2}, {"eps": -1}, {"weight_decay": -1}):
        with pytest.raises(ValueError) as got:
            ndgrad.optim.Adadelta([w], **kw)
        with pytest.raises(ValueError) as want:
            torch.optim.Adadelta([tw], **kw)
        assert str(got.value) == str(want.value)


def _rosenbrock(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def _run_lbfgs(lib, start, loss_fn, steps, **kw):
    (x,) = _params(lib, [start])
    opt = lib.optim.LBFGS([x], **kw)
    traj, losses = [], []

    def closure():
        opt.zero_grad()
        loss = loss_fn(x)
        loss.backward()
        return loss

    for _ in range(steps):
        losses.append(opt.step(closure).item())
        traj.append(x.detach().numpy().copy())
    return np.array(traj), losses, opt


A = [[1.0, 2.0, 0.5], [0.3, -1.0, 2.0], [1.5, 0.2, -0.7], [0.0, 1.0, 1.0], [2.0, -0.3, 0.4]]
B = [1.0, -2.0, 0.5, 3.0, 0.1]


def _lstsq(lib):
    a, b = lib.tensor(A, dtype=lib.float64), lib.tensor(B, dtype=lib.float64)
    return lambda x: ((a @ x - b) ** 2).sum()


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"line_search_fn": "strong_wolfe"},
        {"history_size": 3, "max_iter": 7},
        {"line_search_fn": "strong_wolfe", "history_size": 2, "lr": 0.5, "max_eval": 9},
        {"tolerance_grad": 1e-3, "tolerance_change": 1e-4},
    ],
)
@pytest.mark.parametrize("problem", ["rosenbrock", "lstsq"])
def test_lbfgs_trajectory_matches_torch(kw, problem):
    if problem == "rosenbrock":
        start, fn_nd, fn_t = [-1.2, 1.0], _rosenbrock, _rosenbrock
    else:
        start, fn_nd, fn_t = [0.0, 0.0, 0.0], _lstsq(ndgrad), _lstsq(torch)
    traj, losses, opt = _run_lbfgs(ndgrad, start, fn_nd, 5, **kw)
    ttraj, tlosses, ref = _run_lbfgs(torch, start, fn_t, 5, **kw)
    # NOTE(pytorch): torch fuses `add(alpha=)` (FMA); the chaotic Rosenbrock path amplifies
    # those last-bit differences over ~30 inner iterations, hence a looser tail tolerance
    np.testing.assert_allclose(traj[:3], ttraj[:3], rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(traj, ttraj, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5, atol=1e-12)
    st, tst = opt.state_dict()["state"][0], ref.state_dict()["state"][0]
    assert sorted(st) == sorted(tst)
    assert st["func_evals"] == tst["func_evals"] and st["n_iter"] == tst["n_iter"]
    assert len(st["old_dirs"]) == len(tst["old_dirs"])
    assert opt.state_dict()["param_groups"] == ref.state_dict()["param_groups"]


def test_lbfgs_state_dict_round_trip():
    fn = _lstsq(ndgrad)
    _, _, opt = _run_lbfgs(ndgrad, [0.0, 0.0, 0.0], fn, 1, max_iter=3, history_size=4)
    x = opt.param_groups[0]["params"][0]
    (y,) = _params(ndgrad, [x.detach().numpy().tolist()])
    opt2 = ndgrad.optim.LBFGS([y], max_iter=3, history_size=4)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))  # as after save/load: no shared state

    def closure_for(o, p):
        def closure():
            o.zero_grad()
            loss = fn(p)
            loss.backward()
            return loss

        return closure

    opt.step(closure_for(opt, x))
    opt2.step(closure_for(opt2, y))
    _close(x, y, rtol=0, atol=0)


def test_lbfgs_errors():
    w = ndgrad.zeros(1, requires_grad=True)
    v = ndgrad.zeros(1, requires_grad=True)
    with pytest.raises(
        ValueError, match=r"LBFGS doesn't support per-parameter options \(parameter groups\)"
    ):
        ndgrad.optim.LBFGS([{"params": [w]}, {"params": [v]}])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        ndgrad.optim.LBFGS([w], lr=-1)
    opt = ndgrad.optim.LBFGS([w], line_search_fn="bogus")

    def closure():
        opt.zero_grad()
        loss = ((w - 1) ** 2).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)
    with pytest.raises(TypeError):
        ndgrad.optim.LBFGS([w]).step()
    assert ndgrad.optim.LBFGS([w]).defaults["max_eval"] == 25


def test_adadelta_complex_as_real_pairs():
    out = []
    for lib in (ndgrad, torch):
        w = lib.tensor([1 + 2j, -0.5j], dtype=lib.complex128, requires_grad=True)
        o = lib.optim.Adadelta([w], lr=0.5, weight_decay=0.1)
        for _ in range(3):
            o.zero_grad()
            (w.abs() ** 2).sum().backward()
            o.step()
        out.append((w.detach().numpy(), o.state[w]["acc_delta"].numpy()))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12, atol=1e-15)


def test_lbfgs_several_params_float32():
    out = []
    for lib in (ndgrad, torch):
        a = lib.tensor([1.0, -0.5], requires_grad=True)
        b = lib.tensor([[0.3]], requires_grad=True)
        c = lib.zeros(2, requires_grad=True)  # never gets a gradient
        opt = lib.optim.LBFGS([a, b, c], line_search_fn="strong_wolfe", max_iter=10)

        def closure(opt=opt, a=a, b=b):
            opt.zero_grad()
            loss = ((a - 2) ** 2).sum() + (b**4).sum() * 3
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        out.append((a.detach().numpy(), b.detach().numpy(), opt.state[a]["func_evals"]))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-5)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-4)
    assert out[0][2] == out[1][2]
