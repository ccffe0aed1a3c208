"""Dropout in all its forms: the mask is drawn by an op (``native_dropout``, ``_dropout_impl``),
so a dispatch mode sees the draw; values, gradients, in-place variants and PyTorch's checks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ndgrad
import ndgrad.nn.functional as F
from ndgrad import _random
from ndgrad.utils._python_dispatch import TorchDispatchMode


class _Calls(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def test_dropout_is_one_call_forward_and_backward():
    x = ndgrad.randn(4, 5, requires_grad=True)
    with _Calls() as calls:
        y = F.dropout(x, 0.4)
        y.backward(ndgrad.ones_like(y))
    assert "aten.native_dropout.default" in calls.names
    assert "aten.native_dropout_backward.default" in calls.names
    assert y.grad_fn.name() == "NativeDropoutBackward0"
    kept = y.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, np.float32(1 / 0.6), 0))


def test_seed_gives_torchs_mask():
    """The op draws PyTorch's CPU mask: ``bernoulli_(1 - p)``, a 53-bit uniform below ``1 - p``
    from the generator's MT19937 stream (tests/test_torch_random.py compares with torch)."""
    ndgrad.manual_seed(3)
    y = F.dropout(ndgrad.ones(6, 7), 0.25).numpy()
    raw = _random.new_stream(3).random_raw(2 * 42)
    u = (((raw[0::2] << np.uint64(32)) | raw[1::2]) & np.uint64(2**53 - 1)) * 2.0**-53
    keep = (u < 0.75).reshape(6, 7)
    np.testing.assert_array_equal(y, np.where(keep, np.float32(1) / np.float32(0.75), np.float32(0)))


@pytest.mark.parametrize("fn,shape,batched", [
    (F.dropout2d, (4, 6, 3, 3), True), (F.dropout3d, (3, 5, 2, 2, 2), True), (F.dropout1d, (4, 6, 5), True),
    (F.dropout1d, (6, 5), False), (F.dropout3d, (6, 2, 2, 2), False), (F.feature_alpha_dropout, (4, 6, 3), True)])
def test_feature_forms_draw_one_value_per_channel(fn, shape, batched):
    ndgrad.manual_seed(1)
    x = ndgrad.ones(*shape, requires_grad=True)
    y = fn(x, 0.5, True)
    rows = y.detach().numpy().reshape(shape[0] * shape[1] if batched else shape[0], -1)
    assert (rows == rows[:, :1]).all() and len(np.unique(rows[:, 0])) == 2
    y.sum().backward()
    a = 1 / np.sqrt((1.7580993408473766 ** 2 * 0.5 + 1) * 0.5) if fn is F.feature_alpha_dropout else 2.0
    np.testing.assert_allclose(np.unique(x.grad.numpy()), [0.0, a], rtol=1e-6)


def test_alpha_dropout_keeps_mean_and_variance():
    ndgrad.manual_seed(0)
    x = ndgrad.randn(200000, dtype=ndgrad.float64, requires_grad=True)
    y = F.alpha_dropout(x, 0.2, True)
    assert abs(float(y.mean())) < 0.01 and abs(float(y.std()) - 1) < 0.01
    y.sum().backward()
    a = 1 / np.sqrt((1.7580993408473766 ** 2 * 0.2 + 1) * 0.8)
    assert set(np.unique(x.grad.numpy()).round(12)) == {0.0, round(a, 12)}
    dropped = x.grad.numpy() == 0
    np.testing.assert_allclose(y.detach().numpy()[dropped], 1.7580993408473766 * a * (0.2 - 1))


def test_against_torch(ref):
    def f(T):
        x = T.tensor([1.0, float("inf"), float("nan"), 2.0])
        ones = T.ones(3, 4)
        return (F_(T).dropout(x, 1.0), F_(T).alpha_dropout(x, 1.0, True),
                F_(T).feature_alpha_dropout(ones, 1.0, True), F_(T).dropout(x, 0.0) is x,
                F_(T).alpha_dropout(x, 0.5) is x,  # training defaults to False
                T.native_dropout(x, 0.3, False), T.native_dropout(x, 1.0, True),
                repr(T.nn.AlphaDropout(0.2)), repr(T.nn.FeatureAlphaDropout(0.3, inplace=True)),
                T.nn.AlphaDropout(0.5).eval()(x) is x, F_(T).dropout(T.ones(3, dtype=T.int64), 1.0),
                F_(T).feature_alpha_dropout(T.ones(3), 1.0, True))
    ref.same(f)
    ref.raises(lambda T: F_(T).feature_alpha_dropout(T.ones(3), 0.5, True), RuntimeError)
    ref.raises(lambda T: F_(T).dropout(T.ones(3, dtype=T.int64), 0.5), RuntimeError)
    ref.raises(lambda T: F_(T).alpha_dropout(T.ones(3), 1.5), ValueError)
    ref.raises(lambda T: F_(T).dropout1d(T.ones(3), 0.5), RuntimeError)
    ref.raises(lambda T: T.native_dropout(T.ones(3), 1.5, True), RuntimeError)


def F_(T):
    return T.nn.functional


def test_dropout2d_warnings_as_torch():
    for shape, n in (((2, 3, 4), 1), ((2, 3), 1), ((2, 3, 4, 5), 0)):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            F.dropout2d(ndgrad.ones(*shape), 0.5)
        assert len(got) == n, [str(w.message) for w in got]
    ndgrad.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = F.dropout2d(ndgrad.ones(8, 50, 4), 0.5).numpy()  # NOTE(pytorch): (N, C, L): a mask per (n, c)
    assert (y == y[..., :1]).all() and 0 < (y[..., 0] == 0).mean() < 1


@pytest.mark.parametrize("fn", [F.dropout, F.alpha_dropout, F.dropout1d, F.feature_alpha_dropout])
def test_inplace_returns_the_input_and_its_gradient(fn):
    x = ndgrad.randn(3, 4, 5, requires_grad=True)
    h = x * 1
    v = h._version
    ndgrad.manual_seed(5)
    y = fn(h, 0.4, True, inplace=True)
    assert y is h and h._version > v
    ndgrad.manual_seed(5)
    expected = fn(x * 1, 0.4, True)
    np.testing.assert_array_equal(y.detach().numpy(), expected.detach().numpy())
    y.sum().backward()
    g = x.grad.numpy().copy()
    x.grad = None
    expected.sum().backward()
    np.testing.assert_array_equal(g, x.grad.numpy())
    with pytest.raises(RuntimeError, match="leaf Variable"):
        fn(x, 0.4, True, inplace=True)


def test_double_backward_through_dropout():
    ndgrad.manual_seed(0)
    x = ndgrad.randn(5, 6, dtype=ndgrad.float64, requires_grad=True)
    y = F.dropout(x, 0.3)
    (g,) = ndgrad.autograd.grad((y * y).sum(), x, create_graph=True)
    (gg,) = ndgrad.autograd.grad(g.sum(), x)
    mask = (y.detach().numpy() != 0) / 0.7
    np.testing.assert_allclose(gg.numpy(), 2 * mask * mask)
