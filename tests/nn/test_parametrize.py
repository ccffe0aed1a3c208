"""``nn.utils.parametrize`` and ``parametrizations.weight_norm`` against torch: the class swap,
state_dict keys, values and gradients through training steps, assignment through
``right_inverse``, several originals, chained parametrizations, buffers, caching, removal and
the errors."""

from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest

import ndgrad

RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 4))
B = RNG.standard_normal(4)
X = RNG.standard_normal((3, 4))
A = RNG.standard_normal((4, 4))


def _linear(T):
    m = T.nn.Linear(4, 4).double()
    with T.no_grad():
        m.weight.copy_(T.tensor(W))
        m.bias.copy_(T.tensor(B))
    return m


def _classes(T):
    class Symmetric(T.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(0, 1)

        def right_inverse(self, a):
            return a.triu()

    class Scale(T.nn.Module):  # no right_inverse: the original is the tensor itself
        def forward(self, x):
            return x * 2

    class RankOne(T.nn.Module):
        def forward(self, x, y):
            return x.unsqueeze(-1) @ y.unsqueeze(-2)

        def right_inverse(self, z):
            return z[:, 0].clone(), z[0, :].clone()

    return Symmetric, Scale, RankOne


def _train(T, m, steps=3):
    opt = T.optim.SGD(m.parameters(), lr=0.05)
    outs = []
    for _ in range(steps):
        opt.zero_grad()
        out = m(T.tensor(X))
        (out * out).sum().backward()
        opt.step()
        outs.append(out.detach())
    return outs, [p.grad for p in m.parameters()]


def test_symmetric_assignment_training_and_removal(ref):
    def f(T):
        P = T.nn.utils.parametrize
        Symmetric, _, _ = _classes(T)
        m = P.register_parametrization(_linear(T), "weight", Symmetric())
        info = (type(m).__name__, P.type_before_parametrizations(m).__name__, P.is_parametrized(m),
                P.is_parametrized(m, "weight"), P.is_parametrized(m, "bias"), list(m.state_dict()),
                [n for n, _ in m.named_parameters()])
        sym = T.tensor(A + A.T)
        m.weight = sym  # through right_inverse: stored as its upper triangle
        assigned = (m.weight, m.parametrizations.weight.original)
        trained = _train(T, m)
        w = m.weight.detach().clone()
        P.remove_parametrizations(m, "weight")
        return info, assigned, trained, w, m.weight, type(m).__name__, list(m.state_dict())

    ref.same(f, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("leave", [True, False])
def test_chained_and_buffer_parametrizations(ref, leave):
    def f(T):
        P = T.nn.utils.parametrize
        Symmetric, Scale, _ = _classes(T)
        m = _linear(T)
        m.register_buffer("mask", T.tensor(np.tril(np.ones((4, 4)))))
        P.register_parametrization(m, "weight", Symmetric())
        P.register_parametrization(m, "weight", Scale())
        P.register_parametrization(m, "mask", Scale())
        keys = list(m.state_dict())
        trained = _train(T, m)
        vals = (m.weight.detach().clone(), m.mask)
        P.remove_parametrizations(m, "weight", leave_parametrized=leave)
        P.remove_parametrizations(m, "mask", leave_parametrized=leave)
        return keys, trained, vals, m.weight, m.mask, type(m).__name__, list(m.state_dict())

    ref.same(f, rtol=1e-12, atol=1e-12)


def test_several_originals(ref):
    def f(T):
        P = T.nn.utils.parametrize
        _, _, RankOne = _classes(T)
        m = P.register_parametrization(_linear(T), "weight", RankOne())
        keys = list(m.state_dict())
        trained = _train(T, m)
        w = m.weight.detach().clone()
        P.remove_parametrizations(m, "weight")
        return keys, trained, w, m.weight, isinstance(m.weight, T.nn.Parameter)

    ref.same(f, rtol=1e-12, atol=1e-12)


def test_cached_computes_once_per_block():
    P = ndgrad.nn.utils.parametrize
    calls = []

    class Count(ndgrad.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x + 0

    m = P.register_parametrization(ndgrad.nn.Linear(2, 2), "weight", Count())
    calls.clear()
    with P.cached():
        a, b = m.weight, m.weight
        with P.cached():
            c = m.weight
    assert len(calls) == 1 and a is b is c
    m.weight  # noqa: B018 - outside: computed again
    assert len(calls) == 2


def test_weight_norm_parametrization_matches_torch(ref):
    def f(T):
        m = T.nn.utils.parametrizations.weight_norm(_linear(T))
        keys = list(m.state_dict())
        trained = _train(T, m)
        # a state dict of the hook form loads into the parametrization
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            old = T.nn.utils.weight_norm(_linear(T))
        m.load_state_dict(old.state_dict())
        return keys, trained, m.weight, repr(m)

    ref.same(f, rtol=1e-12, atol=1e-12)


def test_copies_and_pickling():
    P = ndgrad.nn.utils.parametrize
    m = ndgrad.nn.utils.parametrizations.weight_norm(ndgrad.nn.Linear(3, 2))
    c = copy.deepcopy(m)
    assert type(c) is type(m) and P.is_parametrized(c, "weight")
    with ndgrad.no_grad():
        c.parametrizations.weight.original0.mul_(2)
    np.testing.assert_allclose(c.weight.detach().numpy(), 2 * m.weight.detach().numpy())
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(m)


def test_errors(ref):
    def shape_change(T):
        class Flat(T.nn.Module):
            def forward(self, x):
                return x.flatten()

        T.nn.utils.parametrize.register_parametrization(T.nn.Linear(2, 2), "weight", Flat())

    def missing(T):
        _, Scale, _ = _classes(T)
        T.nn.utils.parametrize.register_parametrization(T.nn.Linear(2, 2), "nope", Scale())

    def not_parametrized(T):
        T.nn.utils.parametrize.remove_parametrizations(T.nn.Linear(2, 2), "weight")

    def sequence_unparametrized(T):
        _, _, RankOne = _classes(T)
        m = T.nn.utils.parametrize.register_parametrization(T.nn.Linear(2, 2), "weight", RankOne())
        T.nn.utils.parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)

    def no_right_inverse(T):
        _, Scale, _ = _classes(T)
        m = T.nn.utils.parametrize.register_parametrization(T.nn.Linear(2, 2), "weight", Scale())
        m.weight = T.ones(2, 2)

    ref.raises(shape_change, ValueError)
    ref.raises(missing, ValueError)
    ref.raises(not_parametrized, ValueError)
    ref.raises(sequence_unparametrized, ValueError)
    ref.raises(no_right_inverse, RuntimeError)


def _spectral(T, make, steps=3, **kw):
    T.manual_seed(0)  # the power iteration's starting vectors are drawn: PyTorch's stream
    m = T.nn.utils.parametrizations.spectral_norm(make(T), **kw)
    keys = list(m.state_dict())
    opt = T.optim.SGD(m.parameters(), lr=0.05)
    x = T.tensor(np.random.default_rng(1).standard_normal(_SN_IN[make.__name__]))
    outs = []
    for _ in range(steps):
        opt.zero_grad()
        out = m(x)
        (out * out).sum().backward()
        opt.step()
        outs.append(out.detach())
    m.eval()  # no power iteration: the same value twice
    w1, w2 = m.weight.detach().clone(), m.weight.detach().clone()
    buffers = [b.clone() for b in m.buffers()]
    return keys, outs, [p.grad for p in m.parameters()], w1, w2, buffers


def sn_linear(T):
    return T.nn.Linear(5, 4).double()


def sn_conv(T):
    return T.nn.Conv2d(2, 3, 3).double()


def sn_conv_t(T):
    return T.nn.ConvTranspose2d(2, 3, 3).double()


_SN_IN = {"sn_linear": (2, 5), "sn_conv": (1, 2, 5, 5), "sn_conv_t": (1, 2, 3, 3)}


@pytest.mark.parametrize("make,kw", [(sn_linear, {}), (sn_linear, {"n_power_iterations": 3}),
                                     (sn_conv, {}), (sn_conv, {"dim": 1}), (sn_conv_t, {})],
                         ids=["linear", "linear_3iter", "conv", "conv_dim1", "conv_transpose"])
def test_spectral_norm_matches_torch(ref, make, kw):
    ref.same(lambda T: _spectral(T, make, **kw), rtol=1e-10, atol=1e-12)


def test_spectral_norm_of_a_vector_and_errors(ref):
    def vector(T):
        m = T.nn.Linear(3, 2).double()
        T.nn.utils.parametrizations.spectral_norm(m, "bias")
        return m.bias

    ref.same(vector)
    ref.raises(lambda T: T.nn.utils.parametrizations.spectral_norm(T.nn.Linear(2, 2), n_power_iterations=0),
               ValueError)
    ref.raises(lambda T: T.nn.utils.parametrizations.spectral_norm(T.nn.Linear(2, 2), dim=2), IndexError)
    ref.raises(lambda T: T.nn.utils.parametrizations.spectral_norm(T.nn.Linear(2, 2), "nope"), ValueError)
