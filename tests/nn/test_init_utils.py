"""nn.init (distributions, fans, gains, errors) and nn.utils (clipping, vector conversion)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ndgrad

init = ndgrad.nn.init


@pytest.mark.parametrize("args", [("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",),
                                  ("leaky_relu",), ("leaky_relu", 0.2), ("leaky_relu", 1), ("selu",)])
def test_calculate_gain(ref, args):
    ref.same(lambda T: T.nn.init.calculate_gain(*args))


def test_gain_and_fan_errors(ref):
    ref.raises(lambda T: T.nn.init.calculate_gain("foo"), ValueError)
    ref.raises(lambda T: T.nn.init.calculate_gain("leaky_relu", True), ValueError)
    ref.raises(lambda T: T.nn.init.xavier_uniform_(T.ones(3)), ValueError)
    ref.raises(lambda T: T.nn.init.kaiming_normal_(T.ones(3, 3), mode="fan_avg"), ValueError)
    ref.raises(lambda T: T.nn.init.eye_(T.ones(3)), ValueError)
    ref.same(lambda T: T.nn.init._calculate_fan_in_and_fan_out(T.ones(4, 3, 2, 5)))


def test_deterministic_fills(ref):
    def f(T):
        I = T.nn.init
        return (I.constant_(T.empty(2, 3), 0.5), I.ones_(T.empty(2)), I.zeros_(T.empty(2)),
                I.eye_(T.empty(2, 3)), I.dirac_(T.empty(2, 2, 3)))
    ref.same(f)


def _stats(t):
    a = t.detach().numpy()
    return a.mean(), a.std(), a.min(), a.max()


def test_distributions():
    ndgrad.manual_seed(0)
    w = ndgrad.empty(400, 500)
    m, s, lo, hi = _stats(init.uniform_(w, -2, 3))
    assert lo >= -2 and hi <= 3 and abs(m - 0.5) < 0.02
    m, s, _, _ = _stats(init.normal_(w, 1.0, 2.0))
    assert abs(m - 1) < 0.02 and abs(s - 2) < 0.02
    _, _, lo, hi = _stats(init.trunc_normal_(w, 0.0, 1.0, -0.5, 1.0))
    assert lo >= -0.5 and hi <= 1.0
    bound = math.sqrt(6 / 900)
    _, s, lo, hi = _stats(init.xavier_uniform_(w))
    assert -bound <= lo and hi <= bound and abs(s - bound / math.sqrt(3)) < 1e-3
    _, s, _, _ = _stats(init.xavier_normal_(w, gain=2.0))
    assert abs(s - 2 * math.sqrt(2 / 900)) < 1e-3
    _, s, _, _ = _stats(init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu"))
    assert abs(s - math.sqrt(2 / 400)) < 1e-3
    _, _, lo, hi = _stats(init.kaiming_uniform_(w, a=math.sqrt(5)))
    assert -1 / math.sqrt(500) <= lo and hi <= 1 / math.sqrt(500)
    q = init.orthogonal_(ndgrad.empty(3, 5)).numpy()
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-6)


def test_init_in_place_no_grad_and_seeded():
    p = ndgrad.nn.Parameter(ndgrad.empty(3, 4))
    v = p._version
    ndgrad.manual_seed(5)
    out = init.normal_(p)
    assert out is p and p.requires_grad and p.grad_fn is None and p._version > v
    a = p.detach().numpy().copy()
    ndgrad.manual_seed(5)
    np.testing.assert_array_equal(init.normal_(p).detach().numpy(), a)
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(ndgrad.empty(0, 3))


def _params_with_grads(T, grads):
    ps = []
    for g in grads:
        p = T.nn.Parameter(T.zeros(len(g), dtype=T.float64))
        p.grad = T.tensor(g, dtype=T.float64)
        ps.append(p)
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, "inf", float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm(ref, norm_type, max_norm):
    def f(T):
        ps = _params_with_grads(T, [[3.0, -4.0], [1.0, 2.0, -2.0]])
        ps.append(T.nn.Parameter(T.ones(2)))  # no grad: skipped
        total = T.nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
        return total, [p.grad for p in ps[:2]]
    ref.same(f)


def test_clip_grad_norm_edge_cases(ref):
    ref.same(lambda T: T.nn.utils.clip_grad_norm_([], 1.0))

    def single(T):
        p = _params_with_grads(T, [[3.0, 4.0]])[0]
        return T.nn.utils.clip_grad_norm_(p, 1.0), p.grad
    ref.same(single)

    def nonfinite(T):
        ps = _params_with_grads(T, [[float("nan"), 1.0]])
        T.nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    ref.raises(nonfinite, RuntimeError)


def test_clip_grad_value(ref):
    def f(T):
        ps = _params_with_grads(T, [[3.0, -4.0, 0.1], [1.0]])
        r = T.nn.utils.clip_grad_value_(ps, 0.5)
        return r, [p.grad for p in ps]
    ref.same(f)


def test_parameters_vector_roundtrip(ref):
    def f(T):
        m = T.nn.Linear(3, 2).double()
        v = T.nn.utils.parameters_to_vector(m.parameters())
        w = T.arange(v.numel(), dtype=T.float64)
        T.nn.utils.vector_to_parameters(w, m.parameters())
        v.sum().backward()
        return tuple(v.shape), m.weight, m.bias, m.weight.grad, type(m.weight).__name__
    ref.same(f)
    ref.raises(lambda T: T.nn.utils.vector_to_parameters([1.0], [T.nn.Parameter(T.ones(1))]), TypeError)
    ref.raises(lambda T: T.nn.utils.vector_to_parameters(T.ones(2), [T.nn.Parameter(T.ones(3))]), RuntimeError)
