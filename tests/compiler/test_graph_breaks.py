"""Graph breaks (issue 15, item 4): data-dependent Python during capture is a break; the guard
set then runs eager with each child module compiled on its own; ``fullgraph=True`` raises
``Unsupported`` naming the user's line; ``explain`` counts graphs and breaks as PyTorch does."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ndgrad as nd
from ndgrad import nn
from ndgrad._dynamo.exc import Unsupported, UserError
from ndgrad._dynamo.utils import counters
from ndgrad._tensor import Tensor


@pytest.fixture(autouse=True)
def _fresh():
    nd._dynamo.reset()
    yield
    nd._dynamo.reset()


def branchy(x):
    y = x.sin()
    if y.sum().item() > 0:
        return y * 2
    return y - 1


def test_explain_counts_two_graphs_and_one_break_for_an_item_branch():
    e = nd._dynamo.explain(branchy)(nd.ones(3))
    assert (e.graph_count, e.graph_break_count) == (2, 1)
    assert e.op_count == 3 and [len(o) for o in e.ops_per_graph] == [2, 1]
    br = e.break_reasons[0]
    assert "Tensor.item()" in br.reason
    assert br.user_stack[-1].name == "branchy" and "item()" in br.user_stack[-1].line
    text = str(e)
    for head in ("Graph Count: 2", "Graph Break Count: 1", "Op Count: 3", "Break Reasons:",
                 "Ops per Graph:", "Out Guards:", "Compile Times:"):
        assert head in text
    x = nd.ones(3)  # each graph runs on its own and computes its stretch
    s, total = e.graphs[0](x)  # the value .item() reads is an output too
    assert nd.allclose(total, x.sin().sum())
    assert nd.allclose(e.graphs[1](s)[0], x.sin() * 2)
    clean = nd._dynamo.explain(lambda x: x.relu() + 1)(nd.ones(2))
    assert (clean.graph_count, clean.graph_break_count, clean.op_count) == (1, 0, 2)


def test_fullgraph_raises_unsupported_with_the_reason_and_line():
    f = nd.compile(branchy, backend="eager", fullgraph=True)
    with pytest.raises(Unsupported) as ei:
        f(nd.ones(3))
    msg = str(ei.value)
    assert "Tensor.item()" in msg and "from user code:" in msg
    assert "in branchy" in msg and "if y.sum().item() > 0:" in msg
    assert isinstance(ei.value, RuntimeError) and issubclass(UserError, RuntimeError)


@pytest.mark.parametrize("read", ["bool", "int", "float", "index", "item", "tolist", "numpy",
                                  "print", "graph_break", "format"])
def test_each_data_dependent_read_is_a_break_and_results_stay_right(read, capsys):
    def fn(x):
        y = x * 3
        if read == "bool":
            z = y * 2 if y.sum() > 0 else y
        elif read == "int":
            z = y * int(y.sum())
        elif read == "float":
            z = y * float(y.sum())
        elif read == "index":
            z = y * [1, 2, 3, 4, 5, 6, 7][nd.tensor(2)]
        elif read == "item":
            z = y * y.sum().item()
        elif read == "tolist":
            z = y * y.sum().tolist()
        elif read == "numpy":
            z = y * float(y.detach().numpy().sum())
        elif read == "print":
            print(y)
            z = y
        elif read == "format":
            z = y * float(f"{y.sum():.3f}")
        else:
            nd._dynamo.graph_break()
            z = y
        return z + 1

    f = nd.compile(fn, backend="eager")
    for v in (1.0, -1.0, 2.0):
        x = nd.full((2,), v)
        np.testing.assert_allclose(f(x).numpy(), fn(x).numpy(), rtol=1e-6)
    s = counters["stats"]
    assert s["graph_breaks"] == 1 and s["captures"] == 1 and s["cache_hits"] == 2
    assert sum(counters["graph_break"].values()) == 1
    with pytest.raises(Unsupported):
        nd.compile(fn, backend="eager", fullgraph=True)(nd.ones(2))


def test_no_cost_outside_capture_and_methods_restored():
    originals = {n: Tensor.__dict__[n] for n in ("item", "__bool__", "__repr__", "tolist")}
    f = nd.compile(branchy, backend="eager")
    f(nd.ones(3))
    assert all(Tensor.__dict__[n] is o for n, o in originals.items())
    assert nd.ones(1).item() == 1.0  # outside a compile: no break recorded
    assert counters["stats"]["graph_breaks"] == 1


class Gate(nn.Module):
    def forward(self, x):
        return x if x.sum().item() > 0 else -x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.gate = Gate()
        self.b = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    def forward(self, x):
        return self.b(self.gate(self.a(x)))


def test_a_break_costs_one_module_the_others_are_compiled():
    nd.manual_seed(0)
    net = Net()
    cnet = nd.compile(net, backend="eager")
    x = nd.randn(3, 4, requires_grad=True)
    for _ in range(4):  # capture (the break), then children compile, then hits
        out = cnet(x)
    np.testing.assert_allclose(out.detach().numpy(), net(x).detach().numpy(), rtol=1e-6)
    out.sum().backward()  # gradients flow through the compiled regions
    assert net.a.weight.grad is not None and x.grad is not None
    cf = cnet._compiled
    assert cf.entries[0].kind == "region"
    kids = {type(m).__name__: c for m, c in cf.children.values()}
    assert set(kids) == {"Linear", "Gate", "Sequential"}
    assert kids["Linear"].entries[0].kind == "graph"
    assert kids["Sequential"].entries[0].kind == "graph"
    assert kids["Gate"].entries[0].kind == "region"  # the break stays inside Gate
    assert kids["Linear"].cache_hits == 2 and kids["Sequential"].cache_hits == 2


def test_disable_and_allow_in_graph():
    @nd.compiler.disable
    def helper(y):
        assert not nd.compiler.is_compiling()
        return y * 2

    def fn(x):
        assert nd.compiler.is_compiling()
        return helper(x + 1) - 1

    f = nd.compile(fn, backend="eager")
    assert nd.allclose(f(nd.ones(2)), nd.full((2,), 3.0))
    assert "disable()" in next(iter(counters["graph_break"]))
    assert not nd.compiler.is_compiling()
    nd.compiler.reset()

    def scale(y):
        return y * float(y.sum())  # data-dependent, but one opaque call in the graph

    scale_in_graph = nd.compiler.allow_in_graph(scale)
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    g = nd.compile(lambda x: scale_in_graph(x.relu()) + 1, backend=backend)
    x = nd.ones(3)
    assert nd.allclose(g(x), scale(x) + 1) and nd.allclose(g(x * 2), scale(x * 2) + 1)
    assert counters["stats"]["graph_breaks"] == 0
    assert any(n.target is scale for n in seen[0].graph.nodes)


def test_breaks_on_other_threads_are_not_seen():
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            nd.ones(1).item()

    t = threading.Thread(target=reader)
    t.start()
    try:
        f = nd.compile(lambda x: (x * 2).exp(), backend="eager")
        for i in range(20):
            f(nd.ones(i % 4 + 1))
    finally:
        stop.set()
        t.join()
    assert counters["stats"]["graph_breaks"] == 0


def test_module_hooks_run_on_every_call():
    nd.manual_seed(0)
    net = Net()
    seen = []
    net.register_forward_hook(lambda m, a, out: seen.append("root"))
    net.b.register_forward_pre_hook(lambda m, a: seen.append("b"))
    cnet = nd.compile(net, backend="eager")
    x = nd.randn(2, 4).abs()
    for _ in range(3):
        out = cnet(x)
    assert seen.count("root") == 3 and seen.count("b") == 3
    np.testing.assert_allclose(out.detach().numpy(), net(x).detach().numpy(), rtol=1e-6)
    reasons = " ".join(counters["graph_break"])
    assert "hooks" in reasons  # a hooked submodule inside the capture is a break


def test_a_compiled_training_step_breaks_at_backward_and_stays_right():
    import copy

    import ndgrad.nn.functional as F

    nd.manual_seed(0)
    m = nn.Linear(4, 3)
    m2 = copy.deepcopy(m)
    opt = nd.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    opt2 = nd.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    x, y = nd.randn(8, 4), nd.randint(0, 3, (8,))

    def step(model, o):
        o.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        o.step()
        return loss

    cstep = nd.compile(step, backend="eager")
    for _ in range(4):
        np.testing.assert_allclose(cstep(m2, opt2).item(), step(m, opt).item(), rtol=1e-6)
    assert any("backward()" in r for r in counters["graph_break"])
    nd._dynamo.reset()

    @nd.compile(backend="eager")
    def opt_step():  # reads every .grad: new tensors each step, not graph constants
        opt2.step()

    for _ in range(3):
        for model, o in ((m, opt), (m2, opt2)):
            o.zero_grad()
            F.cross_entropy(model(x), y).backward()
        opt.step()
        opt_step()
    np.testing.assert_allclose(m2.weight.detach().numpy(), m.weight.detach().numpy(), rtol=1e-6)
    assert any(".grad" in r for r in counters["graph_break"])
