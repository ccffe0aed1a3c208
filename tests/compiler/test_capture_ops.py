"""Every op-table sample captured (issue 15, item 2): the capturing call returns eager's values;
the GraphModule, its generated code and the Interpreter replay them on the same inputs; the graph
lints; no tensor of the sample's own making becomes a constant. Random ops are reseeded before
each run (the graph keeps them as calls, so a replay draws again)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import ndgrad as nd
from ndgrad._ops.registry import OPS
from ndgrad.compiler import Interpreter, capture_and_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
from test_generic import CASES, _convert, _nd_make, _op  # noqa: E402


def _same(got, want, path="out"):
    if isinstance(want, nd.Tensor):
        assert isinstance(got, nd.Tensor), f"{path}: {type(got).__name__}"
        assert got.dtype == want.dtype and got.shape == want.shape, \
            f"{path}: {got.dtype}{list(got.shape)}"
        np.testing.assert_array_equal(np.asarray(got._data), np.asarray(want._data), err_msg=path)
        assert got.requires_grad == want.requires_grad, path
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{path}[{i}]")
    else:
        assert got == want or (got != got and want != want), f"{path}: {got!r} != {want!r}"


def _seeded(fn, *args, **kwargs):
    nd.manual_seed(0)
    return fn(*args, **kwargs)


@pytest.mark.parametrize("rec,sample", CASES)
def test_capture_replays_op(rec, sample):
    args, kwargs, _ = _convert(rec, sample, _nd_make)
    op = _op(rec)
    eager = _seeded(op, *args, **kwargs)
    gm, result = capture_and_run(lambda *a, **k: _seeded(op, *a, **k), args, kwargs)
    _same(result, eager, "capturing run")
    gm.graph.lint()
    assert gm.meta["tensor_constants"] == [], gm.code
    if rec.kind != "composite":  # a primitive is recorded as a call of itself
        assert any(n.target is rec for n in gm.graph.nodes), gm.code
    _same(_seeded(gm, *args, **kwargs), eager, "GraphModule")
    _same(_seeded(Interpreter(gm).run, *args, *kwargs.values()), eager, "Interpreter")
    code = gm.graph.python_code("self")
    env = dict(code.globals)
    exec(compile(code.src, "<generated>", "exec"), env)  # noqa: S102 - the code under test
    _same(_seeded(env["forward"], gm, *args, **kwargs), eager, "generated code")


def _inplace_cases():
    out = []
    by_outplace = {}
    for name, ip in OPS.items():
        if ip.kind == "inplace":
            by_outplace.setdefault(ip.outplace.name, []).append(ip)
    for c in CASES:
        rec, sample = c.values
        for ip in by_outplace.get(rec.name, ()):
            for mixed in (False, True):
                name = f"{ip.name}-{sample.name}" + ("-f32self" if mixed else "")
                out.append(pytest.param(ip, rec, sample, mixed, id=name))
    return out


@pytest.mark.parametrize("ip,rec,sample,mixed", _inplace_cases())
def test_capture_functionalizes_inplace_on_input(ip, rec, sample, mixed):
    """``x.<op>_(...)`` on an input: the graph computes the out-of-place op (cast back into the
    input's dtype where promotion differs) and writes the input once, with ``copy_`` at the end;
    the caller's tensor is updated by the capturing run and by every replay, as eagerly."""
    args, kwargs, _ = _convert(rec, sample, _nd_make)
    if not isinstance(args[0], nd.Tensor):
        pytest.skip("self is not a tensor")
    x0 = args[0].detach().clone()
    if mixed:
        if x0.dtype != nd.float64:
            pytest.skip("no float64 self to narrow")
        x0 = x0.float()
    fresh = lambda: x0.clone()  # noqa: E731
    eager_x = fresh()
    try:
        eager = _seeded(ip.call, eager_x, *args[1:], **kwargs)
    except (RuntimeError, TypeError, ValueError) as e:
        pytest.skip(f"eager refuses it: {e}")
    assert eager is eager_x
    x = fresh()
    gm, result = capture_and_run(lambda x, *a, **k: _seeded(ip.call, x, *a, **k),
                                 (x, *args[1:]), kwargs)
    assert result is x
    _same(x, eager_x, "captured input")
    gm.graph.lint()
    writes = [n for n in gm.graph.nodes
              if n.op == "call_function" and getattr(n.target, "kind", None) == "inplace"]
    assert [str(n.target) for n in writes] == ["aten.copy_.default"], gm.code
    assert writes[0].args[0].op == "placeholder" and writes[0].args[0].name == "x"
    assert any(n.target is ip.outplace for n in gm.graph.nodes), gm.code
    x = fresh()
    out = _seeded(gm, x, *args[1:], **kwargs)
    assert out is x
    _same(x, eager_x, "replayed input")
