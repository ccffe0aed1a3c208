"""TorchDispatchMode as PyTorch programs write it: op overload objects, schemas, per-thread
stacks, nesting, and the internal modes (profiler, anomaly, forward AD) on the same stacks."""

import threading

import pytest

import ndgrad as nd
from ndgrad.autograd import dispatch_mode as dm
from ndgrad.utils._python_dispatch import (
    TorchDispatchMode, _get_current_dispatch_mode, _get_current_dispatch_mode_stack,
    is_in_torch_dispatch_mode,
)

aten = nd.ops.aten


class Log(TorchDispatchMode):
    """Written as a PyTorch user writes one: log ``func`` and shapes, then run it."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        shapes = [tuple(a.shape) for a in args if isinstance(a, nd.Tensor)]
        self.calls.append((func, shapes, kwargs))
        return func(*args, **(kwargs or {}))


def test_logging_mode_sees_forward_and_backward_calls_with_overload_objects():
    x = nd.randn(3, 4, requires_grad=True)
    w = nd.randn(4, 2)
    with Log() as log:
        y = nd.mm(x, w).relu().sum()
        y.backward()
    funcs = [f for f, _, _ in log.calls]
    assert funcs[0] is aten.mm.default
    assert (aten.mm.default, [(3, 4), (4, 2)], {}) in log.calls
    assert aten.relu.default in funcs and aten.sum.default in funcs
    assert len(funcs) > 3  # backward formulas dispatch too
    assert x.grad is not None and x.grad.shape == (3, 4)
    assert dm.active == []


def test_overload_object_prints_and_exposes_schema_as_pytorch():
    f = aten.add.Tensor
    assert str(f) == "aten.add.Tensor"
    assert repr(f) == "<OpOverload(op='aten.add', overload='Tensor')>"
    assert f.__name__ == "add.Tensor" and f.name() == "aten::add.Tensor"
    assert f.overloadpacket is aten.add and str(aten.add) == "aten.add"
    assert f._schema.name == "aten::add" and f._schema.overload_name == "Tensor"
    assert not f._schema.is_mutable
    assert [a.name for a in f._schema.arguments] == ["self", "other", "alpha"]
    assert f._schema.arguments[2].kwarg_only
    ip = aten.add_.Tensor._schema
    assert ip.is_mutable and ip.arguments[0].alias_info.is_write
    assert str(ip).startswith("aten::add_.Tensor(Tensor(a!) self")
    view = aten.transpose.int._schema
    assert view.returns[0].alias_info is not None and not view.returns[0].alias_info.is_write
    assert str(aten.mm.default) == "aten.mm.default"
    assert aten.mul.Tensor(nd.ones(2), nd.ones(2) * 3).tolist() == [3.0, 3.0]
    with pytest.raises(AttributeError, match="has no attribute 'no_such_op'"):
        aten.no_such_op


def test_kwarg_only_arguments_arrive_as_kwargs_and_defaults_are_omitted():
    a, b = nd.ones(2), nd.ones(2)
    with Log() as log:
        a.add(b, alpha=2)
        a.add(b)
        a.sum(0, keepdim=True)
    (f1, _, kw1), (f2, _, kw2), (f3, _, _) = log.calls
    assert f1 is f2 is aten.add.Tensor and kw1 == {"alpha": 2} and kw2 == {}


def test_modes_nest_innermost_first_and_handlers_see_the_mode_below():
    order = []

    class Tag(TorchDispatchMode):
        def __init__(self, name):
            super().__init__()
            self.name = name

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            order.append((self.name, _get_current_dispatch_mode()))
            return func(*args, **(kwargs or {}))

    outer, inner = Tag("outer"), Tag("inner")
    with outer:
        with inner:
            assert _get_current_dispatch_mode() is inner
            assert _get_current_dispatch_mode_stack() == [outer, inner]
            nd.ones(2).neg()
    assert order[-2:] == [("inner", outer), ("outer", None)]
    assert not is_in_torch_dispatch_mode()


def test_a_mode_changes_the_result():
    class Double(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return out * 2 if func is aten.neg.default else out

    with Double():
        assert nd.tensor([1.0]).neg().tolist() == [-2.0]


def test_two_threads_do_not_see_each_others_calls():
    barrier = threading.Barrier(2)
    seen = {}

    def worker(name, use_mode):
        log = Log()
        if use_mode:
            with log:
                barrier.wait()
                for _ in range(50):
                    nd.ones(3).exp()
                barrier.wait()
        else:
            barrier.wait()
            for _ in range(50):
                nd.ones(3).sin()
            barrier.wait()
        seen[name] = log.calls

    ts = [threading.Thread(target=worker, args=("in", True)),
          threading.Thread(target=worker, args=("out", False))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    funcs = {f for f, _, _ in seen["in"]}
    assert aten.exp.default in funcs and aten.sin.default not in funcs
    assert seen["out"] == []
    assert dm.active == []


def test_internal_modes_are_dispatch_modes_on_the_same_stacks():
    from ndgrad.autograd import anomaly_mode, forward_ad

    assert isinstance(anomaly_mode._MODE, TorchDispatchMode)
    assert isinstance(forward_ad._MODE, TorchDispatchMode)
    with Log() as log:
        with nd.autograd.detect_anomaly(check_nan=False):
            nd.ones(2, requires_grad=True).exp().sum().backward()
    assert any(f is aten.exp.default for f, _, _ in log.calls)
    assert dm.active == []


def test_the_same_mode_class_logs_the_same_forward_calls_as_torch():
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode

    def make(base):
        class Names(base):
            def __init__(self):
                super().__init__()
                self.names = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                self.names.append((str(func), [tuple(a.shape) for a in args if hasattr(a, "shape")]))
                return func(*args, **(kwargs or {}))
        return Names

    def program(T):
        x = T.ones(3, 4)
        w = T.zeros(4, 2)
        return T.mm(x, w).relu().sum(0).neg()

    got, want = make(TorchDispatchMode)(), make(TorchMode)()
    with got:
        program(nd)
    with want:
        program(torch)
    assert got.names == want.names
