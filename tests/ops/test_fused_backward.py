"""Fused backward ops (issue 14): a formula that computes in a few array passes does so inside
an op of the table, so a dispatch mode sees one call, with or without ``create_graph``; the op's
own formulas give the next order (checked against PyTorch's double backward here; the generic
tests check every order by finite differences)."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd
import ndgrad.nn.functional as F
from ndgrad.utils._python_dispatch import TorchDispatchMode


class _Calls(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func).split(".")[1])
        return func(*args, **(kwargs or {}))


_RNG = np.random.default_rng(0)
_X = _RNG.standard_normal((4, 5))
_W = _RNG.uniform(0.5, 2, 5)
_T = np.array([1, 0, 4, -100])


def _layer_norm(T, x, w):
    return T.nn.functional.layer_norm(x, [5], w, w * 0.5)


def _softmax(T, x, w):
    return x.softmax(-1) * w


def _log_softmax(T, x, w):
    return x.log_softmax(0) * w


def _cross_entropy(T, x, w):
    return T.nn.functional.cross_entropy(x * w, T.tensor(_T), weight=T.tensor(_W), label_smoothing=0.1,
                                         reduction="none")


def _embedding(T, x, w):
    return T.nn.functional.embedding(T.tensor([[0, 3], [3, 2]]), x * w, padding_idx=3)


CASES = [(_layer_norm, "native_layer_norm_backward"), (_softmax, "_softmax_backward_data"),
         (_log_softmax, "_log_softmax_backward_data"), (_cross_entropy, "_cross_entropy_backward"),
         (_embedding, "embedding_dense_backward")]


@pytest.mark.parametrize("fn,fused", CASES, ids=[f for _, f in CASES])
def test_backward_is_one_fused_call(fn, fused):
    x = nd.tensor(_X, requires_grad=True)
    y = fn(nd, x, nd.tensor(_W))
    with _Calls() as calls:
        y.backward(nd.ones_like(y))
    assert fused in calls.names, calls.names
    # the formula's work is the fused op: no reductions or exponentials beside it
    assert not {"mean", "sum", "exp", "rsqrt"} & set(calls.names), calls.names


@pytest.mark.parametrize("fn,fused", CASES, ids=[f for _, f in CASES])
def test_double_backward_matches_torch(fn, fused, torch_or_skip):
    torch = torch_or_skip
    out = []
    for T in (nd, torch):
        x = T.tensor(_X, requires_grad=True)
        w = T.tensor(_W, requires_grad=True)
        y = fn(T, x, w)
        v = T.tensor(np.random.default_rng(1).standard_normal(tuple(y.shape)))
        gx, gw = T.autograd.grad((y * v).sum(), (x, w), create_graph=True)
        u = T.tensor(np.random.default_rng(2).standard_normal(_X.shape))
        second = T.autograd.grad((gx * u).sum() + (gw * gw).sum(), (x, w), allow_unused=True)
        out.append([g if g is None else g.detach().numpy() for g in (gx, gw) + tuple(second)])
    for a, b in zip(*out, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_layer_norm_backward_masks_unneeded_gradients():
    x = nd.tensor(_X, requires_grad=True)
    w = nd.tensor(_W)  # no gradient wanted for the weight
    with _Calls() as calls:
        F.layer_norm(x, [5], w).sum().backward()
    assert "native_layer_norm_backward" in calls.names
    dx, dw, db = nd.ops.aten.native_layer_norm_backward(nd.ones(4, 5, dtype=nd.float64), x.detach(), [5], w,
                                                         1e-5, (True, False, False))
    assert dx.shape == (4, 5) and dw.numel() == 0 and db.numel() == 0
    np.testing.assert_allclose(dx.numpy(), x.grad.numpy())
