"""The graph cache of ``inductor`` (issue 16: "≤ 0.3 s on a warm disk cache"): generated code is
stored on disk under a key made from the graph's structure and loaded, globals made again, by a
later compile of the same graph, in this process or another."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
from collections import Counter

import numpy as np
import pytest
from test_aot import CASES, check_backend_on_sample

import ndgrad as nd
from ndgrad.compiler import capture, codecache
from ndgrad.compiler import inductor as ind
from ndgrad.compiler.aot import aot_function
from ndgrad.compiler.inductor import compile_fx_inner, inductor_backend


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty graph cache (the C libraries stay in the usual cache: compiling them is slow)."""
    monkeypatch.setattr(codecache, "_dir", lambda: str(tmp_path))
    monkeypatch.delenv("NDGRAD_FX_GRAPH_CACHE", raising=False)
    return tmp_path


def _no_generation(*a, **k):
    raise AssertionError("generated again: the cached code was not used")


def _fn(x, w):
    y = (x * 1.5 + 0.25).tanh() @ w
    return (y.sigmoid() * y).sum(dim=1).float()


def _run(f, x, w):
    out = f(x, w)
    gx, gw = nd.autograd.grad(out.sum(), [x, w])
    return [out.detach().numpy(), gx.numpy(), gw.numpy()]


@pytest.mark.parametrize("cpp_fusion", [None, False])
def test_second_compile_loads_the_code_without_generating(fresh, monkeypatch, cpp_fusion):
    x = nd.randn(6, 5, dtype=nd.float64, requires_grad=True)
    w = nd.randn(5, 4, dtype=nd.float64, requires_grad=True)
    comp = functools.partial(compile_fx_inner, options={"cpp_fusion": cpp_fusion})
    before = Counter(codecache.counters)
    first = aot_function(_fn, comp)
    want = _run(first, x, w)
    stored = codecache.counters[codecache.STORED] - before[codecache.STORED]
    assert stored == 2  # forward and backward
    assert len(list(fresh.iterdir())) == 2  # and no temporary left behind
    monkeypatch.setattr(ind, "_CODE_CACHE", {})  # as a new process: only the disk has it
    monkeypatch.setattr(ind, "_generate", _no_generation)
    second = aot_function(_fn, comp)
    got = _run(second, x, w)
    assert codecache.counters[codecache.HIT] == before[codecache.HIT] + 2
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    (e1,), (e2,) = first.cache.values(), second.cache.values()
    assert e2.fw.source == e1.fw.source and e2.bw.source == e1.bw.source
    assert e2.fw.c_source == e1.fw.c_source


def test_another_process_loads_the_code(tmp_path):
    script = textwrap.dedent("""
        import json, ndgrad as nd
        from ndgrad.compiler import codecache
        nd.manual_seed(0)
        m = nd.nn.Sequential(nd.nn.Linear(8, 16), nd.nn.GELU(), nd.nn.LayerNorm(16),
                             nd.nn.Linear(16, 3))
        f = nd.compile(m, backend="inductor")
        x = nd.randn(4, 8)
        f(x)  # captures (the backend compiles at the next call)
        loss = f(x).logsumexp(1).sum()
        loss.backward()
        print(json.dumps([dict(codecache.counters), loss.item(),
                          [p.grad.sum().item() for p in m.parameters()]]))
    """)
    env = dict(os.environ, NDGRAD_CACHE_DIR=str(tmp_path))
    env.pop("NDGRAD_FX_GRAPH_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True).stdout.splitlines()[-1] for _ in range(2)]
    import json

    (c1, loss1, g1), (c2, loss2, g2) = (json.loads(r) for r in runs)
    hit, stored = codecache.HIT, codecache.STORED
    assert c1[stored] == 2 and c1.get(hit, 0) == 0
    assert c2[hit] == 2 and c2.get(stored, 0) == 0 and c2.get(codecache.MISS, 0) == 0
    assert loss1 == loss2 and g1 == g2


def _key(fn, *args):
    return codecache.graph_key(capture(fn, *args), True, False, True)


def test_key_follows_structure_shapes_dtypes_and_constants():
    a, b = nd.randn(3, 4), nd.randn(3, 4)
    f = lambda x: (x * 2).exp()  # noqa: E731
    key = _key(f, a)
    assert key is not None and key == _key(f, b)  # other values, same graph
    assert key == _key(lambda x: (x * 2).exp(), a)  # another function, same graph
    assert key != _key(lambda x: (x * 3).exp(), a)
    assert key != _key(lambda x: (x * 2).sin(), a)
    assert key != _key(f, nd.randn(3, 5))
    assert key != _key(f, a.double())
    assert key != _key(f, nd.randn(4, 3).t())  # strides
    gm = capture(f, a)
    assert codecache.graph_key(gm, True, False, True) != codecache.graph_key(gm, False, False, True)


def _local_helper_graph():
    def helper(t):  # not importable by another process
        return t * 2

    gm = capture(lambda x: x + 1, nd.randn(3))
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    with gm.graph.inserting_after(node):
        extra = gm.graph.call_function(helper, (node,))
    node.replace_all_uses_with(extra, delete_user_cb=lambda u: u is not extra)
    gm.recompile()
    return gm


def test_a_graph_that_cannot_be_written_down_is_compiled_not_cached(fresh):
    gm = _local_helper_graph()
    before = Counter(codecache.counters)
    fn = compile_fx_inner(gm, [nd.ones(3)])
    assert codecache.counters[codecache.BYPASS] == before[codecache.BYPASS] + 1
    assert not list(fresh.iterdir())
    out = fn([nd.ones(3)])
    out = out[0] if isinstance(out, (list, tuple)) else out
    np.testing.assert_array_equal(getattr(out, "_data", out), [4.0, 4.0, 4.0])  # (no meta: bare)


@pytest.mark.parametrize("how", ["option", "env"])
def test_cache_can_be_turned_off(fresh, monkeypatch, how):
    x, w = nd.randn(6, 5, requires_grad=True), nd.randn(5, 4, requires_grad=True)
    opts = {}
    if how == "option":
        opts["fx_graph_cache"] = False
    else:
        monkeypatch.setenv("NDGRAD_FX_GRAPH_CACHE", "0")
    _run(aot_function(_fn, functools.partial(compile_fx_inner, options=opts)), x, w)
    assert not list(fresh.iterdir())
    assert "fx_graph_cache" in ind.list_options()


def test_unreadable_entry_is_a_miss(fresh, monkeypatch):
    x, w = nd.randn(6, 5, requires_grad=True), nd.randn(5, 4, requires_grad=True)
    want = _run(aot_function(_fn, compile_fx_inner), x, w)
    for p in fresh.iterdir():
        p.write_bytes(b"not a pickle")
    monkeypatch.setattr(ind, "_CODE_CACHE", {})
    before = Counter(codecache.counters)
    got = _run(aot_function(_fn, compile_fx_inner), x, w)
    assert codecache.counters[codecache.MISS] == before[codecache.MISS] + 2
    # written again, whole
    assert codecache.counters[codecache.STORED] == before[codecache.STORED] + 2
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("rec,sample", CASES)
def test_op_through_inductor_from_the_cache(rec, sample, fresh):
    """Every op-table sample's code, loaded from the cache, gives eager's values and gradients:
    every kind of global the generated code names is made again."""
    check_backend_on_sample(inductor_backend, rec, sample)  # generates and stores
    before = Counter(codecache.counters)
    check_backend_on_sample(inductor_backend, rec, sample)
    delta = Counter(codecache.counters)
    delta.subtract(before)
    # each graph found and its globals made again (a failure would generate and store anew)
    assert delta[codecache.STORED] == delta[codecache.MISS] == 0, delta
    assert delta[codecache.HIT] == len(list(fresh.iterdir())), delta
