"""Capture at the dispatch point (issue 15, item 2), case by case: what becomes a placeholder,
a get_attr, a constant or a call; input mutation made functional and copied back; views of a
written input re-derived; grad mode; node metadata; outputs; nothing left on the mode stack."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import ndgrad as nd
from ndgrad import nn
from ndgrad.autograd import dispatch_mode
from ndgrad.compiler import Interpreter, capture, capture_and_run, counters
from ndgrad.ops import aten


def _ops(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def _writes(gm):
    return [n for n in gm.graph.nodes
            if n.op == "call_function" and getattr(n.target, "kind", None) == "inplace"]


def test_capture_returns_the_real_result_and_leaves_no_mode():
    x = nd.randn(3)
    gm, out = capture_and_run(lambda x: x.exp(), (x,))
    np.testing.assert_array_equal(out.numpy(), x.exp().numpy())
    assert not dispatch_mode.active
    with pytest.raises(ZeroDivisionError):
        capture(lambda x: 1 / 0, x)
    assert not dispatch_mode.active  # an exception in the function leaves the stack clean


def test_inplace_on_input_is_functional_with_one_copy_back():
    def f(x, y):
        x.add_(y)
        x.mul_(2)
        return x.sum()

    x, y = nd.randn(3, 4), nd.randn(4)
    x0 = x.clone()
    gm, s = capture_and_run(f, (x, y))
    np.testing.assert_allclose(x.numpy(), ((x0 + y) * 2).numpy())  # the capturing run wrote x
    assert _ops(gm) == ["aten.add.Tensor", "aten.mul.Tensor", "aten.sum.default",
                        "aten.copy_.default"]
    (copy,) = _writes(gm)
    assert copy.args[0].name == "x" and copy.next.op == "output"
    x2 = x0.clone()
    np.testing.assert_array_equal(gm(x2, y).numpy(), s.numpy())
    np.testing.assert_array_equal(x2.numpy(), x.numpy())  # the caller sees its tensor updated
    x3 = x0.clone()
    Interpreter(gm).run(x3, y)
    np.testing.assert_array_equal(x3.numpy(), x.numpy())


def test_inplace_result_cast_back_into_the_input_dtype():
    x, y = nd.ones(3), nd.full((3,), 0.1, dtype=nd.float64)
    gm, out = capture_and_run(lambda x, y: x.add_(y), (x, y))
    assert out is x and x.dtype == nd.float32
    assert _ops(gm) == ["aten.add.Tensor", "aten._to_copy.default", "aten.copy_.default"]
    add = gm.graph.find_nodes(op="call_function", target=aten.add.Tensor)[0]
    assert add.meta["val"].dtype == nd.float64 and add.next.meta["val"].dtype == nd.float32
    x2 = nd.ones(3)
    assert gm(x2, y) is x2
    np.testing.assert_array_equal(x2.numpy(), x.numpy())


def test_views_taken_before_a_write_see_the_new_value():
    def f(x, y):
        v = x[0]
        a, b = x.unbind(1)[:2]
        x.add_(y)
        return v * 3, a + b, x[1]

    x, y = nd.randn(3, 4), nd.randn(4)
    x0 = x.clone()
    gm, want = capture_and_run(f, (x, y))
    x2 = x0.clone()
    got = gm(x2, y)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    np.testing.assert_array_equal(x2.numpy(), x.numpy())
    gm.graph.lint()


def test_write_through_a_view_of_an_input_writes_a_copy():
    def f(x):
        x[1] = 5.0
        x[:, 0].zero_()
        return x * 2

    x = nd.randn(3, 4)
    x0 = x.clone()
    gm, want = capture_and_run(f, (x,))
    clones = gm.graph.find_nodes(op="call_function", target=aten.clone.default)
    assert len(clones) == 1 and clones[0].args[0].name == "x"
    writes = _writes(gm)  # the views write the copy; only copy_ writes the input
    assert [w.args[0].op for w in writes] == ["call_function"] * (len(writes) - 1) + ["placeholder"]
    x2 = x0.clone()
    np.testing.assert_array_equal(gm(x2).numpy(), want.numpy())
    np.testing.assert_array_equal(x2.numpy(), x.numpy())


def test_inplace_on_intermediates_stays_a_call():
    def f(x):
        h = x * 2
        h.relu_()
        return h

    gm = capture(f, nd.randn(5))
    assert _ops(gm) == ["aten.mul.Tensor", "aten.relu_.default"]
    assert "mutates mul" in gm.code


def test_parameters_buffers_and_aliases_are_get_attr_not_constants():
    lin = nn.Linear(3, 2)

    def f(x):
        w = lin.weight.detach()  # the parameter's memory, without its gradient
        return lin(x) + (x @ w.t()).sum() + lin.weight.data.sum()

    x = nd.randn(4, 3)
    gm, want = capture_and_run(f, (x,))
    assert gm.meta["tensor_constants"] == []
    attrs = gm.graph.find_nodes(op="get_attr")
    assert sorted({n.target for n in attrs}) == ["lin.bias", "lin.weight"]
    detach = gm.graph.find_nodes(op="call_method", target="detach")
    assert detach and all(d.args[0].target == "lin.weight" for d in detach)
    assert gm.lin.weight is lin.weight
    out = gm(x)
    np.testing.assert_array_equal(out.detach().numpy(), want.detach().numpy())
    out.sum().backward()  # the gradient reaches the real parameter, not a copy
    assert lin.weight.grad is not None


def test_module_arguments_contribute_their_parameters():
    lin = nn.Linear(2, 2)
    gm = capture(lambda m, x: m(x), lin, nd.randn(1, 2))
    assert {n.target for n in gm.graph.find_nodes(op="get_attr")} == {"m.weight", "m.bias"}


def test_tensors_made_outside_dispatch_become_counted_logged_constants(caplog):
    before = counters["tensor_constants"]
    glob = nd.randn(2)

    def f(x):
        return x + nd.tensor([1.0, 2.0]) + glob

    with caplog.at_level(logging.INFO, logger="ndgrad.compiler"):
        gm = capture(f, nd.randn(2))
    assert gm.meta["tensor_constants"] == ["_tensor_constant0", "_tensor_constant1"]
    assert counters["tensor_constants"] == before + 2
    assert gm._tensor_constant1 is glob
    assert "_tensor_constant0 = self._tensor_constant0" in gm.code
    msgs = [r.getMessage() for r in caplog.records if "constant" in r.getMessage()]
    assert len(msgs) == 2 and "test_capture.py" in msgs[0] and "f32[2]" in msgs[0]


def test_factories_and_random_ops_are_calls_drawing_again():
    def f(x):
        return x + nd.zeros(3) + nd.rand(3) + nd.nn.functional.dropout(nd.ones(3), 0.5)

    x = nd.zeros(3)
    nd.manual_seed(0)
    gm, want = capture_and_run(f, (x,))
    assert {"aten.zeros.default", "aten.rand.default", "aten.native_dropout.default",
            "aten.ones.default"} <= set(_ops(gm))
    nd.manual_seed(0)
    np.testing.assert_array_equal(gm(x).numpy(), want.numpy())
    assert not np.array_equal(gm(x).numpy(), gm(x).numpy())  # fresh numbers each replay


def test_grad_mode_changes_are_recorded():
    def f(x):
        with nd.no_grad():
            h = x * 2
        return h + x

    x = nd.randn(3, requires_grad=True)
    gm, want = capture_and_run(f, (x,))
    assert "_set_grad_enabled(False)" in gm.code and "_set_grad_enabled(True)" in gm.code
    out = gm(x)
    assert nd.is_grad_enabled()
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3, np.float32))  # h carried no grad
    assert not gm.graph.eliminate_dead_code()  # the grad-mode calls are side effects


def test_structured_inputs_and_outputs():
    def f(xs, scale, *, opts):
        a, b = xs
        return {"sum": a + b * scale, "parts": [a, opts["w"]], "n": len(xs)}, None

    a, b, w = nd.randn(2), nd.randn(2), nd.randn(2)
    gm, want = capture_and_run(f, ([a, b], 3.0), {"opts": {"w": w}})
    assert [n.name for n in gm.graph.find_nodes(op="placeholder")] == ["xs", "scale", "opts"]
    got = gm([a, b], 3.0, opts={"w": w})
    np.testing.assert_array_equal(got[0]["sum"].numpy(), want[0]["sum"].numpy())
    assert got[0]["parts"][0] is a and got[0]["parts"][1] is w
    assert got[0]["n"] == 2 and got[1] is None
    mx = capture(lambda x: x.max(0), nd.randn(3, 4))(nd.ones(3, 4))
    assert type(mx).__name__ == "max" and mx.indices.dtype == nd.int64


def test_node_metadata_shape_dtype_device_grad_stride_and_user_stack():
    x = nd.randn(3, 4, requires_grad=True)
    gm = capture(lambda x: x.t() * 2, x)
    t, mul = gm.graph.find_nodes(op="call_function")
    val = t.meta["val"]
    assert val.shape == (4, 3) and val.dtype == nd.float32 and val.device == nd.device("cpu")
    assert val.requires_grad and val.stride() == (1, 4) and val.numel() == 12
    assert t.meta["val"].tensor_meta().stride == (1, 4)
    assert gm.graph.find_nodes(op="placeholder")[0].meta["val"].shape == (3, 4)
    trace = mul.meta["stack_trace"]
    assert "test_capture.py" in trace and "lambda x: x.t() * 2" in trace
    assert "ndgrad/_ops" not in trace and "ndgrad/compiler" not in trace


def test_stack_trace_holds_the_frames_above_the_capture_entry():
    from ndgrad.compiler.aot import aot_function, nop

    def outer(f, x):
        return f(x)  # the frames above aot's capture are in every node's trace

    def fn(x):
        y = x.sin()
        return y * 2

    traces = {}

    def compiler(gm, example_inputs):
        for n in gm.graph.find_nodes(op="call_function"):
            traces[str(n.target)] = n.meta.get("stack_trace") or ""
        return nop(gm, example_inputs)

    outer(aot_function(fn, compiler), nd.randn(3, requires_grad=True))
    sin, mul = traces["aten.sin.default"], traces["aten.mul.Tensor"]
    assert "y = x.sin()" in sin and "return y * 2" in mul  # each op at its own line
    for t in (sin, mul):
        assert "return f(x)  # the frames above" in t and t.index("in outer") < t.index("in fn")
        assert "ndgrad/compiler" not in t


def test_capture_inside_a_mode_and_no_cost_after():
    from ndgrad.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    x = nd.ones(2)
    with Log():
        gm = capture(lambda x: x.sin(), x)
    assert seen == ["aten.sin.default"]  # the capture passes the call down
    assert _ops(gm) == ["aten.sin.default"]
    assert not dispatch_mode.active


def test_detach_of_a_recorded_value_is_a_detach_call():
    def f(x):
        h = x * 2
        return h.detach() + h

    x = nd.randn(3, requires_grad=True)
    gm = capture(f, x)
    assert gm.graph.find_nodes(op="call_method", target="detach")
    out = gm(x)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2, np.float32))  # one path only
