"""``nn.utils.weight_norm`` (the hook form) and the ops under it (``norm_except_dim``,
``_weight_norm``) against torch: parameters, state_dict keys, values and gradients over a few
SGD steps, removal, errors and the deprecation warning."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import ndgrad

RNG = np.random.default_rng(0)


def _train(T, make, dim, x, steps=3):
    T.manual_seed(0)
    m = make(T)
    with T.no_grad():  # the same starting weights in both libraries
        for p, a in zip(m.parameters(), _INIT[id(make)], strict=True):
            p.copy_(T.tensor(a))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        T.nn.utils.weight_norm(m, dim=dim)
    warned = [(x.category.__name__, str(x.message)) for x in w]
    keys = list(m.state_dict())
    opt = T.optim.SGD(m.parameters(), lr=0.1)
    outs = []
    for _ in range(steps):
        opt.zero_grad()
        out = m(T.tensor(x))
        (out * out).sum().backward()
        opt.step()
        outs.append(out.detach())
    grads = [p.grad for p in m.parameters()]
    T.nn.utils.remove_weight_norm(m)
    return outs, grads, keys, list(m.state_dict()), m.weight, warned


def _linear(T):
    return T.nn.Linear(3, 4).double()


def _conv(T):
    return T.nn.Conv1d(2, 3, 3).double()


_INIT = {id(_linear): [RNG.standard_normal((4, 3)), RNG.standard_normal(4)],
         id(_conv): [RNG.standard_normal((3, 2, 3)), RNG.standard_normal(3)]}
_X = {id(_linear): RNG.standard_normal((5, 3)), id(_conv): RNG.standard_normal((2, 2, 6))}


@pytest.mark.parametrize("make", [_linear, _conv], ids=["linear", "conv1d"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_torch(ref, make, dim):
    ref.same(lambda T: _train(T, make, dim, _X[id(make)]), rtol=1e-10, atol=1e-12)


def test_errors_and_copies(ref):
    def twice(T):
        m = T.nn.utils.weight_norm(T.nn.Linear(2, 2))
        T.nn.utils.weight_norm(m)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ref.raises(twice, RuntimeError)
        ref.raises(lambda T: T.nn.utils.remove_weight_norm(T.nn.Linear(2, 2)), ValueError)
        m = ndgrad.nn.utils.weight_norm(ndgrad.nn.Linear(2, 2))
    c = copy.deepcopy(m)  # the hook travels with the copy and acts on it
    with ndgrad.no_grad():
        c.weight_g.mul_(2)
    x = ndgrad.ones(1, 2)
    np.testing.assert_allclose((c(x) - c.bias).detach().numpy(),
                               2 * (m(x) - m.bias).detach().numpy())
