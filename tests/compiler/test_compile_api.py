"""The user API and the backend registry (issue 15, items 6 and 7): ``ndgrad.compile`` on
functions and modules, as a decorator with and without arguments, ``nn.Module.compile``,
``reset``, ``register_backend``/``lookup_backend``/``list_backends``, ``InvalidBackend``,
custom backends receiving a GraphModule, input mutation copied back, logging."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import ndgrad as nd
from ndgrad import nn
from ndgrad._dynamo.exc import InvalidBackend
from ndgrad._dynamo.utils import counters
from ndgrad.fx import GraphModule


@pytest.fixture(autouse=True)
def _fresh():
    nd._dynamo.reset()
    yield
    nd._dynamo.reset()


def test_registry_lists_looks_up_and_rejects_unknown_backends():
    assert nd._dynamo.list_backends() == nd.compiler.list_backends()
    assert "inductor" in nd._dynamo.list_backends()
    assert "eager" not in nd._dynamo.list_backends()  # tagged "debug", as in PyTorch
    assert {"eager", "aot_eager", "inductor"} <= set(nd._dynamo.list_backends(exclude_tags=()))
    assert nd._dynamo.lookup_backend("eager").__name__ == "eager"
    with pytest.raises(InvalidBackend, match=r"Invalid backend: 'nope'.*list_backends"):
        nd.compile(lambda x: x, backend="nope")
    assert issubclass(InvalidBackend, RuntimeError)

    @nd._dynamo.register_backend(name="test_api_noop", tags=("experimental",))
    def noop(gm, example_inputs):
        return gm

    assert nd._dynamo.lookup_backend("test_api_noop") is noop
    assert "test_api_noop" not in nd._dynamo.list_backends()
    f = nd.compile(lambda x: x + 1, backend="test_api_noop")
    assert nd.equal(f(nd.ones(2)), nd.full((2,), 2.0))


def test_custom_backend_receives_a_graph_module_whose_code_runs():
    got = []

    def backend(gm, example_inputs):
        assert isinstance(gm, GraphModule)
        got.append((gm, example_inputs))
        env = {}
        exec(gm.code, gm.forward.__globals__, env)  # the printed code is runnable as is
        fwd = env["forward"]
        return lambda *args: fwd(gm, *args)

    def fn(x, y, k):
        return (x @ y).relu() * k

    f = nd.compile(fn, backend=backend)
    x, y = nd.randn(2, 3), nd.randn(3, 4)
    for _ in range(2):
        np.testing.assert_allclose(f(x, y, 2).numpy(), fn(x, y, 2).numpy(), rtol=1e-6)
    assert len(got) == 1
    gm, ex = got[0]
    assert [n.op for n in gm.graph.nodes][:3] == ["placeholder"] * 3
    assert ex[0] is x and ex[1] is y and ex[2] == 2
    assert "aten.mm" in gm.code or "aten.matmul" in gm.code


def test_decorator_forms_modules_and_optimized_module():
    @nd.compile
    def a(x):
        return x * 2

    @nd.compile(backend="eager", fullgraph=True)
    def b(x):
        return x * 3

    assert nd.equal(a(nd.ones(2)), nd.full((2,), 2.0)) and a.__name__ == "a"
    assert nd.equal(b(nd.ones(2)), nd.full((2,), 3.0))
    m = nn.Linear(3, 2)
    om = nd.compile(m, backend="eager")
    assert isinstance(om, nd._dynamo.OptimizedModule) and om._orig_mod is m
    assert list(om.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    assert om.in_features == 3 and om.weight is m.weight
    x = nd.randn(4, 3)
    np.testing.assert_allclose(om(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    m2 = nn.Linear(3, 2)
    m2.compile(backend="eager")  # in place
    expect = (x @ m2.weight.t() + m2.bias).detach().numpy()
    np.testing.assert_allclose(m2(x).detach().numpy(), expect, rtol=1e-6)
    m2(x)
    assert m2.forward._ndgrad_compiled.cache_hits == 1
    assert nd.compile(a, disable=True) is a


def test_default_backend_is_inductor_or_eager_until_it_lands():
    f = nd.compile(lambda x: x.exp())
    assert f._ndgrad_compiled.backend_name in ("inductor", "eager")
    x = nd.randn(5)
    np.testing.assert_allclose(f(x).numpy(), x.exp().numpy(), rtol=1e-6)


def test_default_falls_back_to_eager_when_inductor_cannot_be_imported(monkeypatch, caplog):
    import sys

    from ndgrad.compiler import dynamo

    monkeypatch.setitem(sys.modules, "ndgrad.compiler.inductor", None)  # import raises
    monkeypatch.setattr(dynamo, "_warned_fallback", [False])
    with caplog.at_level(logging.WARNING, logger="ndgrad.compiler"):
        f = nd.compile(lambda x: x + 1)
        nd.compile(lambda x: x + 2)
    assert f._ndgrad_compiled.backend_name == "eager"
    assert nd.equal(f(nd.ones(2)), nd.full((2,), 2.0))
    assert sum("'inductor' backend is not available" in r.message for r in caplog.records) == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_other_backends_when_present(backend):
    pytest.importorskip(f"ndgrad.compiler.{'aot' if backend == 'aot_eager' else backend}")
    f = nd.compile(lambda x, w: (x @ w).tanh().sum(), backend=backend)
    x, w = nd.randn(3, 4), nd.randn(4, 5, requires_grad=True)
    f(x, w).backward()
    g = w.grad.clone()
    w.grad = None
    (x @ w).tanh().sum().backward()
    np.testing.assert_allclose(g.numpy(), w.grad.numpy(), rtol=1e-5)


def test_gradients_flow_and_input_mutation_is_copied_back():
    def fn(x, buf):
        buf.add_(1)
        buf.mul_(x.detach())
        return (x * x).sum() + buf.sum()

    f = nd.compile(fn, backend="eager")
    for step in range(3):
        x = nd.randn(4, requires_grad=True)
        buf, ref = nd.ones(4), nd.ones(4)
        out = f(x, buf)
        expect = fn(x.detach().requires_grad_(), ref)
        np.testing.assert_allclose(buf.numpy(), ref.numpy(), rtol=1e-6)  # the caller sees it
        np.testing.assert_allclose(out.item(), expect.item(), rtol=1e-6)
        out.backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)
    assert counters["stats"]["captures"] == 1 and counters["stats"]["cache_hits"] == 2


def test_reset_clears_caches_and_counters():
    f = nd.compile(lambda x: x + 1, backend="eager")
    f(nd.ones(2))
    f(nd.ones(2))
    assert counters["stats"]["cache_hits"] == 1
    nd.compiler.reset()
    assert not counters["stats"] and not f._ndgrad_compiled.entries
    f(nd.ones(2))
    assert counters["stats"]["captures"] == 1


def test_set_logs_prints_graph_code_recompiles_and_breaks(caplog):
    nd._logging.set_logs(graph_breaks=True, recompiles=True, graph_code=True, output_code=True)
    try:
        with caplog.at_level(logging.DEBUG, logger="ndgrad.compiler"):
            f = nd.compile(lambda x: x.sin(), backend="eager")
            f(nd.ones(2))
            f(nd.ones(3))
            nd.compile(lambda x: x * x.sum().item(), backend="eager")(nd.ones(2))
    finally:
        nd._logging.set_logs()
    text = caplog.text
    assert "TRACED GRAPH" in text and "aten.sin" in text
    assert "Recompiling function" in text
    assert "size mismatch at index 0. expected 2, actual 3" in text
    assert "Graph break" in text and "Tensor.item()" in text


def test_config_names():
    c = nd._dynamo.config
    assert (c.recompile_limit, c.accumulated_recompile_limit) == (8, 256)
    assert c.compiled_autograd is False
    import ndgrad._dynamo.config as c2

    assert c2 is c
    nd._dynamo.mark_dynamic(nd.ones(3), 0)  # accepted; shapes recompile


def test_docstring_examples():
    import doctest
    import sys

    for name in ("backends", "dynamo", "explain", "logs"):
        mod = sys.modules["ndgrad.compiler." + name]
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, mod.__name__
        assert result.attempted > 0, mod.__name__
