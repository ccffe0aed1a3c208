"""Compiled autograd (issue 17): ``backward()`` captured as one graph, compiled, and run from a
cache; hooks and saved-tensor unpack hooks as opaque calls in the engine's order; the runner owns
the saved values. Gradients are eager's (float64 op samples exact up to summation order); hooks
and unpack hooks fire as often, and in the order, that eager fires them."""

from __future__ import annotations

import contextlib
import logging

import numpy as np
import pytest
from test_aot import CASES, _convert, _nd_make
from test_inductor import _cnn, _mlp, _transformer

import ndgrad as nd
from ndgrad.autograd.graph import saved_tensors_hooks
from ndgrad.compiler import compiled_autograd as ca
from ndgrad.utils.checkpoint import checkpoint

GM = lambda gm: gm.forward  # noqa: E731 - the captured graph's generated code


def _inductor(gm):
    return nd.compile(gm, backend="inductor")


def _compiled(compiler):
    """Compiled autograd with ``compiler`` within; the eager engine when it is None."""
    return contextlib.nullcontext() if compiler is None else ca._enable(compiler)


@pytest.fixture(autouse=True)
def _fresh():
    ca.reset()
    yield
    ca.reset()


def _sample_grads(rec, args, kwargs, leaves, compiler=None):
    for t in leaves:
        t.grad = None
    nd.manual_seed(0)
    out = rec.call(*args, **kwargs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    diff = [o for o in outs if isinstance(o, nd.Tensor) and o.requires_grad]
    if not diff:
        return None
    ws = [nd.Tensor._make(np.random.RandomState(1).standard_normal(o.shape)
                          .astype(o._data.dtype), None, 0, None) for o in diff]
    with _compiled(compiler):
        nd.autograd.backward(diff, ws)
    return [None if t.grad is None else t.grad.numpy().copy() for t in leaves]


@pytest.mark.parametrize("rec,sample", CASES)
def test_op_sample_backward_graph(rec, sample):
    """Each sample's backward: the capture run and a cache hit both give eager's gradients."""
    args, kwargs, leaves = _convert(rec, sample, _nd_make)
    if not leaves:
        pytest.skip("no input requires grad")
    try:
        want = _sample_grads(rec, args, kwargs, leaves)
    except (RuntimeError, TypeError, ValueError, IndexError) as e:
        pytest.skip(f"eager refuses the sample: {e}")
    if want is None:
        pytest.skip("no differentiable output")
    for run in ("capture", "cache hit"):
        got = _sample_grads(rec, args, kwargs, leaves, GM)
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert (a is None) == (b is None), f"grad {i} ({run})"
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, equal_nan=True,
                                           err_msg=f"grad {i} ({run})")
    assert ca.counters["captures"] == 1 and ca.counters["cache_hits"] == 1
    assert ca.counters["fallbacks"] == 0


def _train(make, compiler, steps=20):
    nd.manual_seed(0)
    model, data, step, make_opt = make()
    opt = make_opt(model.parameters())
    losses = []
    for i in range(steps):
        nd.manual_seed(100 + i)
        opt.zero_grad()
        loss = step(model, *data)
        with _compiled(compiler):
            loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("compiler", [GM, _inductor, ca.compile_inductor],
                         ids=["graph", "inductor", "inductor-code"])
@pytest.mark.parametrize("make", [_mlp, _cnn, _transformer], ids=["mlp", "cnn", "transformer"])
def test_demo_models_train_to_eager_losses(make, compiler):
    want = _train(make, None)
    got = _train(make, compiler)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert ca.counters["captures"] == 1 and ca.counters["cache_hits"] == 19


def _hooked_step(w, x, log):
    h = (x @ w).tanh()
    h.retain_grad()
    h.register_hook(lambda g: log.append("tensor hook") or g * 2)
    y = (h * 3).sigmoid()
    y.grad_fn.register_prehook(lambda gs: log.append("node pre-hook") or None)
    y.grad_fn.register_hook(lambda gi, go: log.append("node post-hook") or None)
    return y.sum(), h


@pytest.mark.parametrize("compiler", [GM, _inductor, ca.compile_inductor],
                         ids=["graph", "inductor", "inductor-code"])
def test_hooks_fire_as_often_and_in_eager_order(compiler):
    def run(compiler):
        nd.manual_seed(0)
        w = nd.randn(4, 3, dtype=nd.float64, requires_grad=True)
        x = nd.randn(5, 4, dtype=nd.float64, requires_grad=True)
        log = []
        x.register_hook(lambda g: log.append("leaf hook") or None)
        w.register_post_accumulate_grad_hook(lambda p: log.append("post-accumulate"))
        retained = []
        for _ in range(3):
            loss, h = _hooked_step(w, x, log)
            with _compiled(compiler):
                loss.backward()
            retained.append(h.grad.numpy().copy())
        return w.grad.numpy(), x.grad.numpy(), retained, log

    want, got = run(None), run(compiler)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    for a, b in zip(got[2], want[2], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert got[3] == want[3]
    assert ca.counters["captures"] == 1 and ca.counters["cache_hits"] == 2


class _Block(nd.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nd.nn.Linear(width, width, dtype=nd.float64)

    def forward(self, x):
        return x + self.lin(x).tanh()


def _blocks_loss(blocks, x, ck):
    for b in blocks:
        x = checkpoint(b, x, use_reentrant=False) if ck else b(x)
    return x.pow(2).sum()


@pytest.mark.parametrize("compiler", [GM, _inductor, ca.compile_inductor],
                         ids=["graph", "inductor", "inductor-code"])
@pytest.mark.parametrize("variant", ["checkpoint", "offload"])
def test_unpack_hooks_fire_in_eager_order(variant, compiler, tmp_path):
    def run(compiler):
        nd.manual_seed(0)
        blocks = nd.nn.ModuleList([_Block(8) for _ in range(4)])
        x = nd.randn(6, 8, dtype=nd.float64)
        log = []

        def pack(t):
            path = tmp_path / f"t{len(log)}.npy"
            np.save(path, t.detach().numpy())
            log.append(("pack", path.name))
            return path

        def unpack(path):
            log.append(("unpack", path.name))
            return nd.from_numpy(np.load(path))

        for _ in range(3):
            if variant == "offload":
                with saved_tensors_hooks(pack, unpack):
                    loss = _blocks_loss(blocks, x, False)
            else:
                loss = _blocks_loss(blocks, x, True)
            with _compiled(compiler):
                loss.backward()
        return [p.grad.numpy().copy() for p in blocks.parameters()], log

    (want, want_log), (got, got_log) = run(None), run(compiler)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert got_log == want_log
    assert ca.counters["captures"] == 1 and ca.counters["cache_hits"] == 2


def test_unpacks_are_placed_just_before_their_first_use(tmp_path):
    """Progressive: the captured graph interleaves unpack calls with the math that reads them
    (an unpack-everything-first graph would hold every activation at once)."""
    graphs = []
    blocks = nd.nn.ModuleList([_Block(8) for _ in range(4)])
    x = nd.randn(6, 8, dtype=nd.float64)

    def keep(gm):
        graphs.append(gm)
        return gm.forward

    with ca._enable(keep):
        with saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t):
            loss = _blocks_loss(blocks, x, False)
        loss.backward()
    (gm,) = graphs
    assert gm.code.startswith("def forward(self, inputs):") and "inputs.clear()" in gm.code
    assert gm.forward._boxed_call  # the runner hands over one list, which the graph clears
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    unpacks = [i for i, n in enumerate(nodes) if n.target is ca._unpack]
    assert len(unpacks) >= 8
    for i in unpacks:  # the next call reads it, or it is the next unpack of the same node
        users = [nodes.index(u) for u in nodes[i].users]
        assert users and min(users) - i <= 3, gm.code
    assert unpacks[-1] - unpacks[0] > len(unpacks)  # not all at the front


def test_cache_key_and_recompile_reasons(caplog):
    w = nd.randn(4, 3, requires_grad=True)

    def back(x, act):
        with ca._enable(GM):
            act(x @ w).sum().backward()

    with caplog.at_level(logging.INFO, logger="ndgrad.compiler.compiled_autograd"):
        back(nd.randn(5, 4), nd.tanh)
        back(nd.randn(5, 4), nd.tanh)
        assert ca.counters["captures"] == 1 and ca.counters["cache_hits"] == 1
        back(nd.randn(7, 4), nd.tanh)  # another batch size
        back(nd.randn(7, 4), nd.sigmoid)  # another node class
    assert ca.counters["captures"] == 3
    msgs = [r.getMessage() for r in caplog.records]
    assert "compiled autograd: Cache miss due to changed shapes" in msgs
    assert "compiled autograd: Cache miss due to new autograd node" in msgs


class _Cube(nd.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k  # Python state of the node: the opaque call reads it at run time
        return x ** 3 * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2 * ctx.k, None


@pytest.mark.parametrize("compiler", [GM, _inductor, ca.compile_inductor],
                         ids=["graph", "inductor", "inductor-code"])
def test_custom_function_backward_is_one_opaque_call(compiler):
    def run(compiler):
        nd.manual_seed(0)
        w = nd.randn(4, 3, dtype=nd.float64, requires_grad=True)
        x = nd.randn(5, 4, dtype=nd.float64)
        for k in (1.0, 2.0, 3.0):
            loss = _Cube.apply((x @ w).tanh(), k).sum()
            with _compiled(compiler):
                loss.backward()
        return w.grad.numpy()

    np.testing.assert_allclose(run(compiler), run(None), rtol=1e-12)
    assert ca.counters["captures"] == 1 and ca.counters["cache_hits"] == 2
    assert ca.counters["fallbacks"] == 0


def test_unsupported_graph_falls_back_to_the_eager_engine(caplog):
    x = nd.randn(3, 2, requires_grad=True)
    y = x * 1.0
    y[0].mul_(2)  # an in-place write through a view: a CopySlices node
    with caplog.at_level(logging.WARNING, logger="ndgrad.compiler.compiled_autograd"):
        with ca._enable(GM):
            y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[2.0, 2.0], [1.0, 1.0], [1.0, 1.0]])
    assert ca.counters["fallbacks"] == 1 and ca.counters["captures"] == 0
    assert any("running the eager engine (node CopySlices" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("compiler", [GM, ca.compile_inductor], ids=["graph", "inductor-code"])
def test_grad_and_backward_with_inputs(compiler):
    """``autograd.grad(outputs, inputs)`` (gradients captured, nothing accumulated) and
    ``backward(inputs=...)`` (only those accumulated, a non-leaf's too) through the graph."""
    def run(compiler):
        nd.manual_seed(0)
        w = nd.randn(4, 3, dtype=nd.float64, requires_grad=True)
        b = nd.randn(3, dtype=nd.float64, requires_grad=True)
        x = nd.randn(5, 4, dtype=nd.float64, requires_grad=True)
        out = []
        for _ in range(3):
            h = (x @ w).tanh()
            loss = (h + b).pow(2).sum()
            with _compiled(compiler):
                g = nd.autograd.grad(loss, (w, h), retain_graph=True)
                loss.backward(inputs=[b, h])
            out += [g[0].numpy(), g[1].numpy(), b.grad.numpy().copy(), h.grad.numpy()]
            assert w.grad is None and x.grad is None
        return out

    for a, b in zip(run(compiler), run(None), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert ca.counters["captures"] == 2 and ca.counters["cache_hits"] == 4


def test_reentrant_checkpoint_runs_its_inner_backward_eagerly(caplog):
    """Reentrant checkpointing calls backward inside backward: the outer graph is compiled (the
    checkpoint is a custom Function: one opaque call), the inner one runs on the eager engine
    with the reason logged."""
    def run(compiler):
        nd.manual_seed(0)
        blocks = nd.nn.ModuleList([_Block(8) for _ in range(3)])
        x = nd.randn(6, 8, dtype=nd.float64, requires_grad=True)
        for _ in range(2):
            h = x
            for b in blocks:
                h = checkpoint(b, h, use_reentrant=True)
            loss = h.pow(2).sum()
            with _compiled(compiler):
                loss.backward()
        return [p.grad.numpy().copy() for p in blocks.parameters()] + [x.grad.numpy()]

    want = run(None)
    with caplog.at_level(logging.INFO, logger="ndgrad.compiler.compiled_autograd"):
        got = run(GM)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert ca.counters["captures"] == 1 and ca.counters["cache_hits"] == 1
    assert any("a backward inside a backward (re-entrant)" in r.getMessage()
               for r in caplog.records)


def test_a_dispatch_mode_sees_the_eager_engine(caplog):
    from ndgrad.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    x = nd.randn(3, requires_grad=True)
    loss = (x * x).sum()
    with caplog.at_level(logging.INFO, logger="ndgrad.compiler.compiled_autograd"):
        with ca._enable(GM), Log():
            loss.backward()
    assert any("mul" in s for s in seen)  # the engine's formulas reached the mode
    assert ca.counters["fallbacks"] == 1
    assert any("a dispatch mode is active" in r.getMessage() for r in caplog.records)


def test_grad_and_create_graph_use_the_eager_engine():
    x = nd.randn(3, requires_grad=True)
    with ca._enable(GM):
        (g,) = nd.autograd.grad((x * x).sum(), (x,), create_graph=True)
        assert ca.counters["captures"] == 0  # grad() and create_graph: the eager engine
        g.sum().backward()  # a plain backward of the graph create_graph built: compiled
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))
    np.testing.assert_allclose(g.detach().numpy(), 2 * x.detach().numpy())
    assert ca.counters["captures"] == 1


def test_modified_saved_tensor_raises_as_eager():
    x = nd.randn(3, requires_grad=True)
    y = x * 1.0
    z = (y * y).sum()
    y.add_(1)
    with ca._enable(GM), pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


@pytest.mark.parametrize("kwargs", [{"backend": "eager"}, {"mode": "reduce-overhead"},
                                    {"options": {"cpp_fusion": False}}],
                         ids=["eager", "mode", "options"])
def test_config_compiled_autograd_compiles_backward_inside_compiled_code(kwargs):
    """The backward graph is compiled with the function's backend, mode and options as
    resolved for it (a mode is not applied twice)."""
    w = nd.randn(4, 3, requires_grad=True)
    x = nd.randn(5, 4)
    nd._dynamo.reset()

    @nd.compile(**kwargs)
    def step(x):
        loss = (x @ w).tanh().sum()
        loss.backward()
        return loss

    nd._dynamo.config.compiled_autograd = True
    try:
        for _ in range(4):
            step(x)
    finally:
        nd._dynamo.config.compiled_autograd = False
    w2 = w.detach().requires_grad_()
    for _ in range(4):
        (x @ w2).tanh().sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-6)
    assert ca.counters["captures"] == 1 and ca.counters["cache_hits"] >= 2
    assert nd._dynamo.compiled_autograd is ca


def test_ndgrad_compile_backend_frees_each_saved_value_after_its_last_use():
    """Through ndgrad.compile (dynamo, AOT, inductor) the input list is handed over down to the
    generated code: a saved value is gone before a hook that runs after its last use, as with
    compile_inductor and as in eager; the caller's list is emptied, as the boxed graph does."""
    import weakref

    seen = []
    x = nd.randn(64, dtype=nd.float64, requires_grad=True)
    x.register_hook(lambda g: seen.append(ref() is None))  # at x's accumulation: after exp's

    def step():
        nonlocal ref
        e = (x * 2).exp()  # ExpBackward saves its output: only the graph holds it
        ref = weakref.ref(e._data)
        z = e.sum()
        del e
        x.grad = None
        with ca._enable(_inductor):
            z.backward()
        return x.grad.numpy().copy()

    ref = None
    want = 2 * np.exp(2 * x.detach().numpy())
    for _ in range(4):  # the capture, then cache hits (the first one compiles the graph)
        np.testing.assert_allclose(step(), want, rtol=1e-12)
    assert ca.counters["captures"] == 1 and ca.counters["cache_hits"] == 3
    assert seen[2:] == [True, True]  # freed before the hook once the graph is compiled


def test_ndgrad_compile_of_a_boxed_graph_empties_the_callers_list():
    gm = nd.fx.symbolic_trace(lambda a, b: a * b + 1,
                              concrete_args={"a": nd.ones(3), "b": nd.ones(3)})
    gm.graph.boxed = True  # forward(self, inputs), which empties its list
    gm.recompile()
    f = nd.compile(gm, backend="inductor")
    for _ in range(3):  # the capture, then cache hits
        a, b = nd.ones(3), nd.full((3,), 2.0)
        lst = [a, b]
        out = f(lst)
        assert lst == [] and out.tolist() == [3.0, 3.0, 3.0]


@pytest.mark.parametrize("compiler", [GM, ca.compile_inductor])
def test_graph_does_not_outlive_its_backward(compiler):
    """Nothing compiled autograd keeps between backwards refers to the graph it walked: once the
    output is dropped, every node is freed (capture and cache hit alike)."""
    import weakref

    x = nd.randn(4, requires_grad=True)
    w = nd.randn(4)
    for _ in range(3):  # the capture, then cache hits
        y = ((x * w).tanh() + 1).sum()
        nodes = [weakref.ref(y.grad_fn), weakref.ref(y.grad_fn.next_functions[0][0])]
        with ca._enable(compiler):
            y.backward()
        del y
        assert [r() for r in nodes] == [None, None]
    assert ca.counters["captures"] == 1 and ca.counters["cache_hits"] == 2
