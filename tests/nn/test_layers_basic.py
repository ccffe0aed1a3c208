"""Containers, Linear/Bilinear, activations and Dropout vs PyTorch (weights copied from torch)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import ndgrad

RNG = np.random.default_rng(0)


def _copy_params(nd_mod, t_mod):
    nd_mod.load_state_dict({k: ndgrad.tensor(v.detach().numpy().copy()) for k, v in t_mod.state_dict().items()})


def _compare(torch, make, inputs, rtol=1e-10):
    """Same module in both, torch's weights loaded into ndgrad; outputs and all grads match."""
    tm, nm = make(torch).double(), make(ndgrad).double()
    assert list(tm.state_dict()) == list(nm.state_dict())
    assert [tuple(v.shape) for v in tm.state_dict().values()] == [tuple(v.shape) for v in nm.state_dict().values()]
    _copy_params(nm, tm)
    xt = [torch.tensor(a, requires_grad=True) for a in inputs]
    xn = [ndgrad.tensor(a, requires_grad=True) for a in inputs]
    yt, yn = tm(*xt), nm(*xn)
    np.testing.assert_allclose(yn.detach().numpy(), yt.detach().numpy(), rtol=rtol, atol=1e-12)
    g = RNG.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    yn.backward(ndgrad.tensor(g))
    for a, b in zip(xn, xt, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=1e-12)
    for (k, p), (_, q) in zip(nm.named_parameters(), tm.named_parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=rtol, atol=1e-12, err_msg=k)
    assert repr(nm) == repr(tm).replace("torch.", "ndgrad.")


@pytest.mark.parametrize("shape", [(4, 3), (3,), (2, 5, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(torch_or_skip, shape, bias):
    _compare(torch_or_skip, lambda T: T.nn.Linear(3, 4, bias=bias), [RNG.standard_normal(shape)])


def test_bilinear(torch_or_skip):
    _compare(torch_or_skip, lambda T: T.nn.Bilinear(3, 2, 4),
             [RNG.standard_normal((5, 3)), RNG.standard_normal((5, 2))])


def test_sequential_mlp(torch_or_skip):
    def make(T):
        nn = T.nn
        return nn.Sequential(OrderedDict([("fc1", nn.Linear(3, 8)), ("act", nn.GELU("tanh")),
                                          ("fc2", nn.Linear(8, 8)), ("silu", nn.SiLU()),
                                          ("flat", nn.Flatten(0)), ("sm", nn.LogSoftmax(0))]))
    _compare(torch_or_skip, make, [RNG.standard_normal((2, 3))])


ACTS = [
    lambda T: T.nn.ReLU(), lambda T: T.nn.GELU(), lambda T: T.nn.GELU(approximate="tanh"),
    lambda T: T.nn.SiLU(), lambda T: T.nn.Tanh(), lambda T: T.nn.Sigmoid(), lambda T: T.nn.ELU(0.7),
    lambda T: T.nn.LeakyReLU(0.2), lambda T: T.nn.Softplus(2.0, 5.0), lambda T: T.nn.Softmax(1),
    lambda T: T.nn.LogSoftmax(-1), lambda T: T.nn.Softmin(1), lambda T: T.nn.ReLU6(),
    lambda T: T.nn.Hardtanh(-0.5, 0.5), lambda T: T.nn.SELU(), lambda T: T.nn.CELU(0.5),
    lambda T: T.nn.Mish(), lambda T: T.nn.Hardswish(), lambda T: T.nn.Hardsigmoid(),
    lambda T: T.nn.LogSigmoid(), lambda T: T.nn.Softsign(), lambda T: T.nn.Tanhshrink(),
    lambda T: T.nn.Threshold(0.1, 2.0), lambda T: T.nn.GLU(), lambda T: T.nn.Flatten(),
    lambda T: T.nn.Unflatten(1, (2, 2)), lambda T: T.nn.Identity(),
]


@pytest.mark.parametrize("k", range(len(ACTS)))
def test_activation(torch_or_skip, k):
    x = RNG.uniform(-4, 4, (3, 4))
    x[np.abs(x) < 1e-3] = 0.5  # keep away from kinks
    # NOTE(pytorch): torch's hardsigmoid backward uses a float32 1/6 even for float64 (3e-8 off)
    _compare(torch_or_skip, ACTS[k], [x], rtol=1e-7 if k == 18 else 1e-10)


@pytest.mark.parametrize("k", range(len(ACTS)))
def test_activation_inplace_modules(ref, k):
    def f(T):
        m = ACTS[k](T)
        if not hasattr(m, "inplace"):
            return None
        m.inplace = True
        x = T.linspace(-3, 3, 12, dtype=T.float64).reshape(3, 4)
        y = m(x)
        return repr(m), y is x, x
    ref.same(f)


def test_sequential_api(ref):
    def f(T):
        nn = T.nn
        s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
        out = [len(s), type(s[-1]).__name__, repr(s[1:]), [type(m).__name__ for m in s]]
        s.append(nn.Tanh())
        del s[0]
        out.append(list(s._modules))
        s.insert(0, nn.Identity())
        out.append(repr(s))
        s2 = s + nn.Sequential(nn.ReLU())
        out.append(len(s2))
        s[0] = nn.Sigmoid()
        out.append(repr(s.pop(0)))
        return out
    ref.same(f)
    ref.raises(lambda T: T.nn.Sequential(T.nn.ReLU())[3], IndexError)
    ref.raises(lambda T: T.nn.Sequential()[0], IndexError)


def test_module_list_dict(ref):
    def f(T):
        nn = T.nn
        ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
        ml.append(nn.ReLU())
        ml.extend([nn.ReLU(), nn.Tanh()])
        ml.insert(1, nn.Identity())
        out = [repr(ml), len(ml), type(ml[-1]).__name__, repr(ml[1:3]), len(list(ml.parameters()))]
        del ml[0]
        out.append(list(ml._modules))
        md = nn.ModuleDict({"a": nn.ReLU(), "b": nn.Linear(1, 1)})
        md["c"] = nn.Tanh()
        md.update([("d", nn.Identity())])
        out += [repr(md), list(md), list(md.keys()), "a" in md, len(md), type(md.pop("a")).__name__,
                list(md.state_dict())]
        return out
    ref.same(f)
    ref.raises(lambda T: T.nn.ModuleList([T.nn.ReLU()])[5], IndexError)
    ref.raises(lambda T: T.nn.ModuleList().extend(3), TypeError)
    ref.raises(lambda T: T.nn.ModuleDict()["x"], KeyError)


def test_linear_init_and_errors(ref):
    def f(T):
        m = T.nn.Linear(100, 50)
        bound = 1 / 10
        return (repr(m), tuple(m.weight.shape), float(m.weight.abs().max()) <= bound,
                float(m.bias.abs().max()) <= bound, float(m.weight.std()) > 0.5 * bound / 3 ** 0.5,
                str(T.nn.Linear(2, 2, dtype=T.float64).weight.dtype))
    ref.same(f)
    ref.raises(lambda T: T.nn.Linear(3, 2)(T.ones(4, 5)), RuntimeError)


def test_dropout(ref):
    ndgrad.manual_seed(0)
    m = ndgrad.nn.Dropout(0.3)
    x = ndgrad.ones(2000, 50, requires_grad=True)
    y = m(x)
    kept = y.detach().numpy() != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(y.detach().numpy()[kept], 1 / 0.7)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy())
    ndgrad.manual_seed(0)
    np.testing.assert_array_equal(m(x).detach().numpy(), y.detach().numpy())  # same RNG stream
    m.eval()
    assert m(x) is x

    def f(T):
        d = T.nn.Dropout(1.0)
        x = T.ones(3)
        d2 = T.nn.functional.dropout(x, 0.5, training=False)
        return d(x), d2 is x, repr(T.nn.Dropout(0.2, inplace=True)), repr(T.nn.Dropout2d())
    ref.same(f)
    ref.raises(lambda T: T.nn.Dropout(1.5), ValueError)
    ref.raises(lambda T: T.nn.functional.dropout(T.ones(1), -0.1), ValueError)


def test_dropout2d_channels():
    ndgrad.manual_seed(1)
    y = ndgrad.nn.Dropout2d(0.5)(ndgrad.ones(4, 8, 3, 3)).numpy()
    per_channel = y.reshape(4, 8, 9)
    assert ((per_channel == per_channel[..., :1]).all())
    assert set(np.unique(y)) <= {0.0, 2.0}
