"""utils.checkpoint (both forms), checkpoint_sequential and utils.memory, compared with PyTorch."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

import ndgrad
from ndgrad.utils import memory

A = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
W = np.linspace(0.5, -0.5, 16).reshape(4, 4)


def _cp(T):
    import importlib

    return importlib.import_module(T.__name__ + ".utils.checkpoint")


@pytest.mark.parametrize("reentrant", [False, True])
def test_values_and_gradients_match_plain_run(ref, reentrant):
    def f(T):
        x = T.tensor(A, requires_grad=True)
        w = T.tensor(W, requires_grad=True)  # used inside the segment, not passed in

        def block(a):
            return (a @ w).tanh().exp()

        y = _cp(T).checkpoint(block, x, use_reentrant=reentrant)
        loss = (y * y).sum()
        loss.backward()
        return y, x.grad, w.grad, y.grad_fn.name()

    got = ref.same(f)
    x = ndgrad.tensor(A, requires_grad=True)
    w = ndgrad.tensor(W, requires_grad=True)
    ((x @ w).tanh().exp() ** 2).sum().backward()
    np.testing.assert_allclose(got[1].numpy(), x.grad.numpy())
    np.testing.assert_allclose(got[2].numpy(), w.grad.numpy())


def test_non_reentrant_recomputes_once_and_stops_early(ref):
    def f(T):
        calls = []
        x = T.tensor(A, requires_grad=True)

        def block(a):
            calls.append("start")
            b = a.exp()  # saves its result: the last value backward needs
            calls.append("after exp")
            return b * 2  # a scalar operand: nothing saved

        y = _cp(T).checkpoint(block, x, use_reentrant=False)
        y.sum().backward()
        return calls, x.grad

    calls, _ = ref.same(f)
    assert calls == ["start", "after exp", "start"]  # recomputation stopped after exp


def test_random_ops_give_the_same_values_on_recomputation(ref):
    def f(T):
        T.manual_seed(0)
        x = T.tensor(A, requires_grad=True)
        masks = []

        def block(a):
            m = (T.rand(a.shape, dtype=T.float64) > 0.5).to(T.float64)
            masks.append(m)
            return (a * m).sin()

        y = _cp(T).checkpoint(block, x, use_reentrant=False)
        y.sum().backward()
        return x.grad, masks[0]

    g, m = f(ndgrad)
    np.testing.assert_allclose(g.numpy(), (np.cos(A * m.numpy()) * m.numpy()))


def test_retain_graph_recomputes_again(ref):
    def f(T):
        x = T.tensor(A, requires_grad=True)
        y = _cp(T).checkpoint(lambda a: a.sin().exp(), x, use_reentrant=False)
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        return x.grad

    ref.same(f)


def test_missing_use_reentrant_warns_and_defaults_to_reentrant(ref):
    def f(T):
        x = T.tensor(A, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = _cp(T).checkpoint(lambda a: a.exp(), x)
        return [str(m.message) for m in w], y.grad_fn.name()

    msgs, name = ref.same(f)
    assert name == "CheckpointFunctionBackward" and "use_reentrant" in msgs[0]


def test_reentrant_second_backward_raises(ref):
    def f(T):
        x = T.tensor(A, requires_grad=True)
        y = _cp(T).checkpoint(lambda a: a.exp(), x, use_reentrant=True)
        y.sum().backward()
        y.sum().backward()

    ref.raises(f, RuntimeError, None)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_sequential(ref, reentrant):
    def f(T):
        x = T.tensor(A, requires_grad=True)
        fns = [lambda a: a.tanh(), lambda a: a * 2, lambda a: a.exp(), lambda a: a.sin(), lambda a: a + 1]
        y = _cp(T).checkpoint_sequential(fns, 2, x, use_reentrant=reentrant)
        y.sum().backward()
        return y, x.grad

    ref.same(f)


def test_checkpointing_lowers_peak_memory():
    width, depth = 64, 12  # activations (batch 1024) dominate the weights and their grads
    rng = np.random.default_rng(0)
    x = ndgrad.tensor(rng.standard_normal((1024, width)), requires_grad=True)
    ws = [ndgrad.tensor(rng.standard_normal((width, width)) / 8, requires_grad=True) for _ in range(depth)]

    def block(a, w):  # keeps three activations for backward besides its input
        return ((a @ w).tanh() * 2).sin().cos()

    def step(ckpt):
        for t in [x, *ws]:
            t.grad = None
        with memory.track() as m:
            h = x
            for w in ws:
                h = ndgrad.utils.checkpoint.checkpoint(block, h, w, use_reentrant=False) if ckpt else block(h, w)
            h.sum().backward()
            del h
        return m.peak, [t.grad.numpy().copy() for t in [x, *ws]]

    plain, g_plain = step(False)
    ckpt, g_ckpt = step(True)
    for a, b in zip(g_plain, g_ckpt, strict=True):
        np.testing.assert_array_equal(a, b)
    assert ckpt < 0.5 * plain, (ckpt, plain)


def test_memory_track_sees_array_allocations():
    with memory.track() as m:
        a = np.ones(1_000_000)  # 8 MB
        del a
    assert m.peak >= 8_000_000 and m.retained < 1_000_000


def test_reentrant_is_a_function_and_refuses_grad_and_inputs(ref):
    def node_name(T):
        x = T.ones(2, requires_grad=True)
        cp = importlib.import_module(T.__name__ + ".utils.checkpoint")
        y = cp.checkpoint(lambda a: (a * 2, a.sum().item()), x, use_reentrant=True)
        assert y[1] == 2.0
        return y[0].grad_fn.name()

    assert node_name(ndgrad) == "CheckpointFunctionBackward"
    msg = ("When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing "
           "an `inputs` parameter to .backward(). To resolve this error, you can either set "
           "use_reentrant=False, or call .backward() without passing the `inputs` argument.")

    def run(T, how):
        x = T.ones(2, requires_grad=True)
        w = T.ones(2, requires_grad=True)
        cp = importlib.import_module(T.__name__ + ".utils.checkpoint")
        z = cp.checkpoint(lambda a: a * w, x, use_reentrant=True).sum()
        if how == "grad":
            T.autograd.grad(z, x)
        else:
            z.backward(inputs=[x])

    for how in ("grad", "inputs"):
        ref.raises(lambda T: run(T, how), RuntimeError, msg)


def test_reentrant_warns_without_inputs_requiring_grad(ref):
    def f(T):
        cp = importlib.import_module(T.__name__ + ".utils.checkpoint")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with T.no_grad():
                cp.checkpoint(lambda a: a * 2, T.ones(2), use_reentrant=True)
            y = cp.checkpoint(lambda a: a * 2, T.ones(2), use_reentrant=True)
        assert not y.requires_grad
        return [str(m.message) for m in w]

    assert f(ndgrad) == ["None of the inputs have requires_grad=True. Gradients will be None"] * 2
    if ref.torch is not None:
        assert f(ref.torch) == f(ndgrad)
