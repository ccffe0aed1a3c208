"""The IR (issue 15, item 1): Graph, Node, GraphModule, Interpreter, the passes (dead code,
common subexpressions, lint), symbolic_trace and Tracer, and the ``ndgrad.fx`` names."""

from __future__ import annotations

import builtins
import doctest
import operator
import sys

import numpy as np
import pytest

import ndgrad as nd
from ndgrad import fx, nn
from ndgrad.compiler import (CSEPass, Graph, GraphModule, Interpreter, capture,
                             eliminate_common_subexpressions, symbolic_trace)
from ndgrad.ops import aten


def _mlp_graph():
    g = Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    t = g.call_function(aten.t.default, (w,))
    mm = g.call_function(aten.mm.default, (x, t))
    r = g.call_function(aten.relu.default, (mm,))
    g.output(r)
    return g


def test_fx_names_are_the_compiler_objects():
    assert fx.Graph is Graph and fx.GraphModule is GraphModule and fx.Interpreter is Interpreter
    assert fx.symbolic_trace is symbolic_trace
    assert {"Node", "Tracer"} <= set(fx.__all__)


def test_node_names_args_users_and_printing():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(aten.add.Tensor, (x, 1))
    b = g.call_function(aten.add.Tensor, (a, x))
    s = g.call_function(aten.sum.default, (b,))
    s2 = g.call_function(aten.sum.default, (s,))
    inp = g.placeholder("input")  # a placeholder keeps a parameter name even when a builtin's
    g.output((s2, inp))
    assert [n.name for n in g.nodes] == ["x", "add", "add_1", "sum_1", "sum_2", "input", "output"]
    assert list(x.users) == [a, b] and b.args == (a, x) and b.all_input_nodes == [a, x]
    assert str(a.target) == "aten.add.Tensor"
    assert str(g).splitlines()[:3] == [
        "graph():",
        "    %x : [num_users=2] = placeholder[target=x]",
        "    %add : [num_users=1] = call_function[target=aten.add.Tensor]"
        "(args = (%x, 1), kwargs = {})",
    ]
    assert str(g).splitlines()[-1] == "    return (sum_2, input)"
    b.args = (x, x)  # rewiring updates users
    assert b not in a.users and list(x.users) == [a, b]
    a.replace_all_uses_with(x)
    assert not a.users
    g.erase_node(a)
    with pytest.raises(RuntimeError, match="still had 1 users"):
        g.erase_node(x)
    g.lint()


def test_inserting_before_and_after_and_node_copy():
    g = _mlp_graph()
    mm = g.find_nodes(op="call_function", target=aten.mm.default)[0]
    with g.inserting_before(mm):
        neg = g.call_function(aten.neg.default, (mm.args[0],))
    mm.update_arg(0, neg)
    with g.inserting_after(mm):
        e1 = g.call_function(aten.exp.default, (mm,))
        e2 = g.call_function(aten.exp.default, (e1,))
    relu = mm.next.next.next
    assert [n.name for n in g.nodes] == ["x", "w", "t", "neg", "mm", "exp", "exp_1", "relu",
                                         "output"]
    relu.update_arg(0, e2)
    g.lint()
    h = Graph()
    val_map: dict = {}
    out = h.graph_copy(g, val_map)
    h.output(out)
    assert [n.name for n in h.nodes] == [n.name for n in g.nodes]
    h.lint()


def test_lint_catches_order_names_and_foreign_nodes():
    g = _mlp_graph()
    mm = g.find_nodes(op="call_function", target=aten.mm.default)[0]
    t = mm.args[1]
    g._root.prepend(t)  # move the transpose after its user (to the end)
    with pytest.raises(RuntimeError, match="used before it has been defined"):
        g.lint()
    g = _mlp_graph()
    next(iter(g.nodes)).name = "w"
    with pytest.raises(RuntimeError, match="redefined name w"):
        g.lint()
    other = Graph().placeholder("y")
    with pytest.raises(RuntimeError, match="another graph"):
        g.call_function(aten.neg.default, (other,))


def test_dead_code_elimination_keeps_side_effects():
    g = Graph()
    x = g.placeholder("x")
    g.placeholder("unused")  # placeholders stay
    dead = g.call_function(aten.exp.default, (x,))
    g.call_function(aten.neg.default, (dead,))  # a dead chain goes at once
    z = g.call_function(aten.zeros.default, ((3,),))
    g.call_function(aten.add_.Tensor, (z, x))  # a write
    g.call_function(aten.randn.default, ((2,),))  # a random draw (later draws depend on it)
    g.call_function(aten.native_dropout.default, (x, 0.5, True))
    g.output(x)
    assert g.eliminate_dead_code()
    assert [n.name for n in g.nodes] == ["x", "unused", "zeros", "add_", "randn",
                                         "native_dropout", "output"]
    assert not g.eliminate_dead_code()
    g.lint()


def test_cse_merges_pure_calls_only():
    g = Graph()
    x = g.placeholder("x")
    a, b = (g.call_function(aten.sin.default, (x,)) for _ in range(2))
    m1 = g.call_function(aten.mul.Tensor, (x, 1))
    m2 = g.call_function(aten.mul.Tensor, (x, True))  # another type: another value
    m3 = g.call_function(aten.mul.Tensor, (x, 1))
    r1, r2 = (g.call_function(aten.rand.default, ((2,),)) for _ in range(2))
    z1, z2 = (g.call_function(aten.zeros.default, ((2,),)) for _ in range(2))
    g.call_function(aten.add_.Tensor, (z1, 1))  # z1 is written: it merges with nothing
    c1 = g.call_function(aten.cos.default, (x,))
    v = g.call_function(aten.select.int, (z2, 0, 0))
    s1 = g.call_function(aten.exp.default, (v,))
    g.call_function(aten.mul_.Tensor, (v, 2))  # a write: nothing after merges with before
    s2 = g.call_function(aten.exp.default, (v,))
    c2 = g.call_function(aten.cos.default, (x,))
    g.output((a, b, m1, m2, m3, r1, r2, z1, z2, c1, c2, s1, s2))
    assert eliminate_common_subexpressions(g) == 2
    out = next(iter(reversed(g.nodes))).args[0]
    assert out[0] is out[1] and out[2] is out[4] and out[3] is not out[2]
    assert out[5] is not out[6] and out[7] is not out[8]
    assert out[9] is not out[10] and out[11] is not out[12]
    g.lint()
    gm = GraphModule({}, g)
    assert CSEPass()(gm).modified is False


def test_graph_module_code_frees_values_and_recompiles():
    g = _mlp_graph()
    gm = GraphModule(nn.Module(), g)
    lines = gm.code.splitlines()
    assert lines[0].startswith("def forward(self, x, w):")
    assert lines[1].startswith("    t = aten.t.default(w);  w = None")
    assert lines[2].startswith("    mm = aten.mm.default(x, t);  x = t = None")
    assert lines[3].startswith("    relu = aten.relu.default(mm);  mm = None")
    assert lines[4] == "    return relu"
    x, w = nd.randn(2, 3), nd.randn(4, 3)
    np.testing.assert_array_equal(gm(x, w).numpy(), (x @ w.t()).relu().numpy())
    relu = g.find_nodes(op="call_function", target=aten.relu.default)[0]
    relu.target = aten.neg.default
    np.testing.assert_array_equal(gm(x, w).numpy(), (x @ w.t()).relu().numpy())  # until recompile
    gm.recompile()
    assert "neg = " not in gm.code and "aten.neg.default(mm)" in gm.code
    np.testing.assert_array_equal(gm(x, w).numpy(), (-(x @ w.t())).numpy())
    text = gm.print_readable(print_output=False)
    assert text.startswith("class GraphModule(ndgrad.nn.Module):\n    def forward(self, x, w):")


def test_graph_module_generates_its_code_when_first_needed():
    import inspect

    gm = GraphModule(nn.Module(), _mlp_graph())
    assert "_code" not in gm.__dict__  # a backend compiling the graph itself never pays for it
    assert list(inspect.signature(gm.forward).parameters) == ["x", "w"]  # reading generates it
    assert gm.code.startswith("def forward(self, x, w):")
    x, w = nd.randn(2, 3), nd.randn(4, 3)
    lazy = GraphModule(nn.Module(), _mlp_graph())
    np.testing.assert_array_equal(lazy(x, w).numpy(), (x @ w.t()).relu().numpy())
    g = Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    g.output(g.call_function(aten.sub.Tensor, (a, b)))
    g.boxed = True
    lazy.graph = g  # a new graph: code and forward follow it, boxed as the graph says
    assert "_code" not in lazy.__dict__ and lazy.forward._boxed_call
    args = [x, x * 2]
    np.testing.assert_array_equal(lazy(args).numpy(), (-x).numpy())
    assert args == [] and "aten.sub.Tensor(a, b)" in lazy.code


def test_graph_module_attributes_methods_modules_and_literals():
    lin = nn.Linear(3, 2)
    root = nn.Module()
    root.lin = lin
    root.register_buffer("scale", nd.tensor([2.0, 3.0]))
    g = Graph()
    x = g.placeholder("x", default_value=None)
    scale = g.get_attr("scale")
    w = g.get_attr("lin.weight")
    y = g.call_module("lin", (x,))
    d = g.call_method("detach", (y,))
    m = g.call_function(aten.mul.Tensor, (d, scale))
    item = g.call_function(operator.getitem, (m, slice(None, 1, None)))
    f = g.call_function(aten.full.default, ((2,), float("-inf")), {"dtype": nd.float64,
                                                                  "device": nd.device("cpu")})
    g.output({"m": item, "w": w, "f": f, "n": 3, "e": (...,)})
    gm = GraphModule(root, g)
    assert gm.get_buffer("scale") is root.scale and gm.lin is lin
    assert sorted(dict(gm.named_parameters())) == ["lin.bias", "lin.weight"]
    assert "scale = self.scale" in gm.code and "lin = self.lin(x)" in gm.code
    assert "detach = lin.detach()" in gm.code and "mul[slice(None, 1, None)]" in gm.code
    assert '(2,), -float("inf")' in gm.code and "dtype=ndgrad.float64" in gm.code
    assert "device=ndgrad.device(type='cpu')" in gm.code
    assert gm.code.splitlines()[0].startswith("def forward(self, x = None):")
    xv = nd.randn(4, 3)
    out = gm(xv)
    want = (lin(xv).detach() * root.scale)[:1]
    np.testing.assert_array_equal(out["m"].numpy(), want.numpy())
    assert out["w"] is lin.weight and out["n"] == 3 and out["e"] == (...,)
    assert out["f"].dtype == nd.float64 and np.isneginf(out["f"].numpy()).all()
    interp = Interpreter(gm).run(xv)
    np.testing.assert_array_equal(interp["m"].numpy(), want.numpy())
    gm2 = GraphModule({"scale": root.scale, "lin": lin, "lin.weight": lin.weight}, g)
    np.testing.assert_array_equal(gm2(xv)["m"].numpy(), want.numpy())
    with pytest.raises(RuntimeError, match="was not provided in ``root``"):
        GraphModule({}, g)


def test_interpreter_per_opcode_methods_and_garbage_collection():
    x, w = nd.randn(2, 3), nd.randn(4, 3)
    gm = GraphModule(nn.Module(), _mlp_graph())

    class Negate(Interpreter):
        """relu -> neg: an interpreter may change what a node does."""

        seen: list = []

        def call_function(self, target, args, kwargs):
            self.seen.append((str(target), len(self.env)))
            if target is aten.relu.default:
                return aten.neg.default(*args)
            return super().call_function(target, args, kwargs)

    out = Negate(gm).run(x, w)
    np.testing.assert_array_equal(out.numpy(), (-(x @ w.t())).numpy())
    # each value is dropped after its last use: x, w, t are gone by relu
    assert Negate.seen == [("aten.t.default", 2), ("aten.mm.default", 2), ("aten.relu.default", 1)]
    run_nodes = []

    class Spy(Interpreter):
        def run_node(self, n):
            run_nodes.append(n.op)
            return super().run_node(n)

    Spy(gm, garbage_collect_values=False).run(x, w)
    assert run_nodes == ["placeholder", "placeholder", "call_function", "call_function",
                         "call_function", "output"]
    args = [x, w]
    np.testing.assert_array_equal(Interpreter(gm).boxed_run(args).numpy(), gm(x, w).numpy())
    assert args == []
    with pytest.raises(RuntimeError, match="Expected positional argument for parameter w"):
        Interpreter(gm).run(x)


def test_print_tabular_with_and_without_tabulate(capsys, monkeypatch):
    g = _mlp_graph()
    g.print_tabular()
    with_lib = capsys.readouterr().out
    real_import = builtins.__import__

    def no_tabulate(name, *args, **kwargs):
        if name == "tabulate":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tabulate)
    g.print_tabular()
    plain = capsys.readouterr().out.splitlines()
    assert plain[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert plain[5].split()[:3] == ["call_function", "mm", "aten.mm.default"]
    assert plain[0].index("name") == plain[5].index("mm")  # aligned columns
    assert "aten.mm.default" in with_lib


def test_symbolic_trace_records_leaf_modules_and_takes_examples():
    nd.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = mlp
            self.scale = nd.tensor(2.0)  # a plain tensor attribute: get_attr, not a constant

        def forward(self, x, flip=False):
            h = self.mlp(x) * self.scale
            return -h if flip else h

    net = Net()
    x = nd.randn(5, 3)
    gm = symbolic_trace(net, concrete_args={"x": x})
    assert [(n.op, n.target) for n in gm.graph.nodes] == [
        ("placeholder", "x"), ("placeholder", "flip"), ("call_module", "mlp.0"),
        ("call_module", "mlp.1"), ("call_module", "mlp.2"), ("get_attr", "scale"),
        ("call_function", aten.mul.Tensor), ("output", "output")]
    assert type(gm).__name__ == "Net" and gm.meta["tensor_constants"] == []
    assert gm.code.splitlines()[0].startswith("def forward(self, x, flip = False):")
    assert "getattr(self.mlp, '0')(x)" in gm.code
    y = nd.randn(7, 3)
    np.testing.assert_array_equal(gm(y).detach().numpy(), net(y).detach().numpy())
    flipped = symbolic_trace(net, concrete_args={"x": x, "flip": True})
    np.testing.assert_array_equal(flipped(y, True).detach().numpy(), net(y, True).detach().numpy())
    with pytest.raises(TypeError, match="no example value for 'x'.*concrete_args"):
        symbolic_trace(net)
    fn = symbolic_trace(lambda a, b: a @ b, concrete_args={"a": nd.ones(2, 2), "b": nd.ones(2)})
    assert [n.op for n in fn.graph.nodes] == ["placeholder", "placeholder", "call_function",
                                              "output"]
    tracer = fx.Tracer()
    graph = tracer.trace(mlp, concrete_args={"input": x})
    assert tracer.root is not mlp and isinstance(graph, Graph)
    assert tracer.is_leaf_module(mlp[0], "0") and not tracer.is_leaf_module(mlp, "")
    np.testing.assert_array_equal(GraphModule(tracer.root, graph)(y).detach().numpy(),
                                  mlp(y).detach().numpy())


def test_docstring_examples():
    for name in ("capture", "graph", "graph_module", "interpreter", "tracer"):
        mod = sys.modules["ndgrad.compiler." + name]
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, mod.__name__
        assert result.attempted > 0, mod.__name__


def test_capture_graph_prints(capsys):
    print(capture(lambda x: x.exp() + x, nd.ones(2)).graph)
    assert capsys.readouterr().out.splitlines() == [
        "graph():",
        "    %x : [num_users=2] = placeholder[target=x]",
        "    %exp : [num_users=1] = call_function[target=aten.exp.default]"
        "(args = (%x,), kwargs = {})",
        "    %add : [num_users=1] = call_function[target=aten.add.Tensor]"
        "(args = (%exp, %x), kwargs = {})",
        "    return add",
    ]
