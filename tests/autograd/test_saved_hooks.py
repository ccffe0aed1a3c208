"""Saved-tensor hooks (autograd.graph.saved_tensors_hooks and friends), compared with PyTorch."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import ndgrad

X = np.array([0.5, 1.0, 2.0])


def leaf(T):
    return T.tensor(X, requires_grad=True)


def test_pack_when_saved_unpack_when_used(ref):
    def f(T):
        calls = []
        x = leaf(T)
        pack = lambda t: (calls.append("pack"), t * 1)[1]  # noqa: E731
        unpack = lambda p: (calls.append("unpack"), p)[1]  # noqa: E731
        with T.autograd.graph.saved_tensors_hooks(pack, unpack):
            c = (x.exp() * x).tanh()  # exp saves its result, mul both inputs, tanh its result
        after_forward = list(calls)
        c.sum().backward(retain_graph=True)
        after_backward = list(calls)
        _ = c.grad_fn._saved_result  # every access unpacks again
        return after_forward, after_backward, list(calls), x.grad

    got = ref.same(f)
    assert got[0] == ["pack"] * 4 and got[1] == ["pack"] * 4 + ["unpack"] * 4


def test_hooks_nest_innermost_wins_and_leave_no_trace(ref):
    def f(T):
        seen = []
        x = leaf(T)
        outer = T.autograd.graph.saved_tensors_hooks(lambda t: ("outer", t), lambda p: p[1])
        inner = T.autograd.graph.saved_tensors_hooks(lambda t: (seen.append("inner"), t)[1], lambda p: p)
        with outer:
            with inner:
                a = x.sin()
            b = a.cos()
        c = b.exp()  # no hooks here
        assert c.grad_fn._saved_result is not None
        (g,) = T.autograd.grad(c.sum(), x)
        return seen, g

    ref.same(f)


def test_offload_to_disk_and_back(ref, tmp_path):
    def f(T):
        x = leaf(T)
        files = []

        def pack(t):
            path = tmp_path / f"{len(files)}.npy"
            np.save(path, t.detach().numpy())
            files.append(path)
            return path

        def unpack(path):
            return T.tensor(np.load(path))

        with T.autograd.graph.saved_tensors_hooks(pack, unpack):
            loss = (x.sin() * x).pow(3).sum()
        loss.backward()
        return len(files), x.grad

    ref.same(f)


def test_double_backward_through_hooks(ref):
    def f(T):
        x = leaf(T)
        with T.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda p: p):
            y = (x * x * x).sum()
        (g,) = T.autograd.grad(y, x, create_graph=True)
        (h,) = T.autograd.grad(g.sum(), x)
        return g, h

    ref.same(f)


def test_save_on_cpu_is_a_passthrough_on_cpu(ref):
    def f(T):
        x = leaf(T)
        with T.autograd.graph.save_on_cpu():
            y = (x * x.exp()).sum()
        y.backward()
        return x.grad

    ref.same(f)


def test_unpack_hook_must_return_a_tensor(ref):
    def f(T):
        x = leaf(T)
        with T.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: 3):
            y = x.pow(2)
        y.sum().backward()

    ref.raises(f, TypeError, "Output of saved tensor unpack_hook expected to be a Tensor but got result of type int")


def test_pack_hook_may_not_modify_its_input(ref):
    def f(T):
        x = leaf(T)
        with T.autograd.graph.saved_tensors_hooks(lambda t: t.add_(1), lambda p: p):
            (x * 1).pow(2)

    ref.raises(f, RuntimeError, None)


def test_disable_saved_tensors_hooks(ref):
    def f(T):
        with T.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
            with T.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: p):
                pass

    ref.raises(f, RuntimeError, "no hooks here")
    with ndgrad.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: p):
        pass  # usable again afterwards


def test_raw_saved_register_hooks(ref):
    def f(T):
        calls = []
        x = leaf(T)
        y = x.exp()
        raw = y.grad_fn._raw_saved_result
        raw.register_hooks(lambda t: (calls.append("pack"), t)[1], lambda p: (calls.append("unpack"), p)[1])
        y.sum().backward()
        return calls, x.grad

    ref.same(f)


def test_raw_saved_register_hooks_twice_raises(ref):
    def f(T):
        y = leaf(T).exp()
        raw = y.grad_fn._raw_saved_result
        raw.register_hooks(lambda t: t, lambda p: p)
        raw.register_hooks(lambda t: t, lambda p: p)

    ref.raises(f, RuntimeError, "Calling register_hooks on a saved tensor whose hooks have already been "
               "set. Hint: only one pair of hooks is allowed at a time.")


def test_raw_saved_register_hooks_after_free_raises(ref):
    def f(T):
        y = leaf(T).exp()
        raw = y.grad_fn._raw_saved_result
        y.sum().backward()
        raw.register_hooks(lambda t: t, lambda p: p)

    ref.raises(f, RuntimeError, None)


def test_saved_output_is_not_kept_in_a_cycle():
    x = ndgrad.tensor(X, requires_grad=True)
    gc.disable()
    try:
        with ndgrad.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda p: p):
            y = x.exp()
        node, alive = y.grad_fn, weakref.ref(y)
        del y
        assert alive() is None  # freed by reference counting alone
        assert node._saved_result is not None
    finally:
        gc.enable()


def test_hooks_are_thread_local():
    import threading

    seen = []

    def other_thread():
        x = ndgrad.tensor(X, requires_grad=True)
        y = x.exp()  # not under this thread's hooks
        seen.append(type(y.grad_fn._saved[0]).__name__)

    with ndgrad.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: p):
        th = threading.Thread(target=other_thread)
        th.start()
        th.join()
    assert seen == ["SavedTensor"]


@pytest.mark.parametrize("hooked", [False, True])
def test_fast_path_and_dispatch_agree_under_hooks(hooked):
    x = ndgrad.tensor(X, requires_grad=True)
    c = ndgrad.tensor(X * 2)
    ctx = ndgrad.autograd.graph.saved_tensors_hooks(lambda t: ("p", t), lambda p: p[1]) if hooked else None
    if ctx:
        ctx.__enter__()
    try:
        y = x * c
    finally:
        if ctx:
            ctx.__exit__(None, None, None)
    kinds = {type(s).__name__ for s in y.grad_fn._saved if s is not None}
    assert kinds == ({"PackedSaved"} if hooked else {"Tensor"})
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), X * 2)
