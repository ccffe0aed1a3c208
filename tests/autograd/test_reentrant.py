"""Re-entrant backward (from Functions, hooks, checkpoint; to any depth) and backward from
several threads at once, on separate graphs and on one shared graph."""

from __future__ import annotations

import sys
import threading

import pytest

import ndgrad
from ndgrad.autograd import engine

N_THREADS, N_CALLS = 8, 50


def _in_threads(work, n=N_THREADS):
    """Run ``work(i)`` in ``n`` threads started together; re-raise the first failure."""
    errors = []
    barrier = threading.Barrier(n)

    def body(i):
        try:
            barrier.wait()
            work(i)
        except BaseException as e:  # reported below
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so that races would show
    try:
        threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    if errors:
        raise errors[0]


# --- concurrent backward ---
def test_threads_separate_graphs_accumulate_exactly():
    x = ndgrad.ones(5, dtype=ndgrad.float64, requires_grad=True)

    def work(i):
        for k in range(N_CALLS):
            ((x * (i + 1)).exp().sum() * 0 + (x * (k + 1)).sum()).backward()

    _in_threads(work)
    want = N_THREADS * sum(range(1, N_CALLS + 1))  # integers: exact in float64
    assert x.grad.tolist() == [float(want)] * 5


def test_threads_shared_graph_retain_graph_accumulate_exactly():
    x = ndgrad.tensor([0.5, -1.0, 2.0], dtype=ndgrad.float64, requires_grad=True)
    h = (x * 2).tanh()
    y = (h * h.exp()).sum() + (x @ x)

    def work(i):
        for _ in range(N_CALLS):
            y.backward(retain_graph=True)

    _in_threads(work)
    got = x.grad.numpy().copy()
    # The same sum one call at a time: every call adds the same gradient, so order is irrelevant.
    x.grad = None
    for _ in range(N_THREADS * N_CALLS):
        y.backward(retain_graph=True)
    assert got.tolist() == x.grad.tolist()


def test_threads_grad_and_double_backward_are_per_thread():
    x = ndgrad.tensor([1.0, 2.0, 3.0], dtype=ndgrad.float64, requires_grad=True)
    y = x**3
    results = {}

    def work(i):
        for _ in range(N_CALLS // 5):
            (g,) = ndgrad.autograd.grad(y, x, ndgrad.full((3,), float(i), dtype=ndgrad.float64),
                                        retain_graph=True, create_graph=True)
            (gg,) = ndgrad.autograd.grad(g.sum(), x)
            results.setdefault(i, []).append((g.tolist(), gg.tolist()))

    _in_threads(work)
    for i, rs in results.items():
        for g, gg in rs:
            assert g == [3.0 * v * v * i for v in (1.0, 2.0, 3.0)]
            assert gg == [6.0 * v * i for v in (1.0, 2.0, 3.0)]
    assert x.grad is None


def test_threads_grad_mode_is_per_thread():
    seen = {}

    def work(i):
        x = ndgrad.ones(2, requires_grad=True)
        for _ in range(N_CALLS):
            if i % 2:
                with ndgrad.no_grad():
                    assert not (x * 2).requires_grad
            else:
                (x * 2).sum().backward()
        seen[i] = None if x.grad is None else x.grad.tolist()

    _in_threads(work)
    assert seen == {i: (None if i % 2 else [2.0 * N_CALLS] * 2) for i in range(N_THREADS)}


# --- re-entrant backward ---
def _nested_fn(T):
    class Nested(T.autograd.Function):
        """Backward computes its gradient by running a backward of its own."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with T.enable_grad():
                xd = x.detach().requires_grad_(True)
                xd.sin().sum().backward()
            return g * xd.grad

    return Nested


def test_reentrant_from_function_backward(ref):
    def f(T):
        x = T.tensor([0.3, -1.2, 2.0], dtype=T.float64, requires_grad=True)
        (_nested_fn(T).apply(x * 2) ** 2).sum().backward()
        return x.grad

    ref.same(f)


def test_reentrant_from_tensor_hook(ref):
    def f(T):
        x = T.tensor([0.3, -1.2], dtype=T.float64, requires_grad=True)
        w = T.tensor([2.0, 5.0], dtype=T.float64, requires_grad=True)
        y = x * 3

        def hook(g):
            with T.enable_grad():  # hooks run with grad mode off, as in PyTorch
                (w * g).sum().backward()  # a separate graph, run from inside this backward
            return g * 2

        y.register_hook(hook)
        (y * y).sum().backward()
        return x.grad, w.grad

    ref.same(f)


def test_reentrant_callbacks_belong_to_their_own_backward(ref):
    def f(T):
        log = []
        queue = T.autograd.Variable._execution_engine.queue_callback if T is not ndgrad \
            else engine.queue_callback
        x = T.ones(2, requires_grad=True)
        z = T.ones(2, requires_grad=True)

        def inner_hook(g):
            queue(lambda: log.append("inner done"))
            log.append("inner hook")

        def outer_hook(g):
            queue(lambda: log.append("outer done"))
            with T.enable_grad():
                zz = z * 2
                zz.register_hook(inner_hook)
                zz.sum().backward()
            log.append("outer hook")

        y = x * 2
        y.register_hook(outer_hook)
        y.sum().backward()
        return log

    log = f(ndgrad)
    assert log == ["inner hook", "inner done", "outer hook", "outer done"]
    if ref.torch is not None:
        assert f(ref.torch) == log


def _deep(T, fail=False):
    class Deep(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            if x.item() > 0:  # one level deeper, on a fresh graph
                with T.enable_grad():
                    y = (x.detach() - 1).requires_grad_(True)
                    Deep.apply(y).sum().backward()
                    assert y.grad.item() == 1.0
            elif fail:
                raise ValueError("bottom reached")
            return g

    return Deep


@pytest.mark.parametrize("depth", [5, 1000])
def test_reentrant_any_depth(ref, depth):
    """Deeper than one thread's Python stack allows: nested levels move to fresh threads."""
    assert depth < engine.MAX_REENTRANT_DEPTH or depth > 3 * engine.MAX_REENTRANT_DEPTH

    def f(T):
        x = T.tensor(float(depth), requires_grad=True)
        _deep(T).apply(x).backward()
        return x.grad

    ref.same(f)


def test_reentrant_deep_error_propagates_and_grads_untouched():
    x = ndgrad.tensor(100.0, requires_grad=True)
    w = ndgrad.tensor(3.0, requires_grad=True)
    # Raised 100 levels down, past several fresh threads, and re-raised at the top.
    with pytest.raises(ValueError, match="bottom reached"):
        (_deep(ndgrad, fail=True).apply(x) * w).backward()
    assert x.grad is None and w.grad is None


def test_fresh_thread_carries_grad_mode_and_saved_tensor_hooks(ref):
    """The saved-tensor hooks active around backward stay active in the nested levels that
    run on fresh threads (PyTorch carries them to its worker threads too)."""

    def f(T):
        packed = []

        def pack(t):
            packed.append(1)
            return t

        x = T.tensor(100.0, requires_grad=True)
        Deep = _deep(T)
        out = Deep.apply(x)
        with T.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out.backward()
        return len(packed), x.grad

    ref.same(f)


def test_reentrant_checkpoint_in_threads():
    from ndgrad.utils.checkpoint import checkpoint

    w = ndgrad.tensor([[0.5, -0.2], [0.1, 0.3]], dtype=ndgrad.float64, requires_grad=True)

    def seg(h):
        return (h @ w).tanh() @ w

    def work(i):
        h = ndgrad.full((3, 2), float(i + 1) / 10, dtype=ndgrad.float64, requires_grad=True)
        for _ in range(5):
            checkpoint(seg, h, use_reentrant=True).sum().backward()
            checkpoint(seg, h, use_reentrant=False).sum().backward()

    _in_threads(work)
    got = w.grad.tolist()
    w.grad = None
    for i in range(N_THREADS):
        h = ndgrad.full((3, 2), float(i + 1) / 10, dtype=ndgrad.float64, requires_grad=True)
        seg(h).sum().backward()
    assert ndgrad.allclose(ndgrad.tensor(got, dtype=ndgrad.float64), w.grad * 10, rtol=1e-12, atol=0)
