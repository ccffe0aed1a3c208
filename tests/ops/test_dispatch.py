"""The one dispatch point: every op call (fast path included) reaches an installed mode, and the
fast path gives exactly what the reference dispatcher gives."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd
from ndgrad._ops.registry import OPS, dispatch, pop_mode, push_mode


class LogMode:
    def __init__(self):
        self.names = []

    def dispatch(self, rec, args, run):
        self.names.append(rec.name)
        return run(rec, args)


def test_mode_sees_every_op_forward_and_backward():
    x = nd.tensor([1.0, 2.0, 3.0], dtype=nd.float64, requires_grad=True)
    mode = LogMode()
    push_mode(mode)
    try:
        y = (x * 2 + 1).tanh().sum()
        y.backward()
    finally:
        pop_mode()
    assert mode.names[:4] == ["mul.Tensor", "add.Tensor", "tanh", "sum"]
    assert "tanh_backward" in mode.names[4:]  # backward formulas dispatch too
    np.testing.assert_allclose(x.grad._data, 2 * (1 - np.tanh(2 * np.array([1, 2, 3.0]) + 1) ** 2),
                               rtol=1e-6)


def test_mode_can_replace_results():
    class Doubling:
        def dispatch(self, rec, args, run):
            out = run(rec, args)
            return out * 2 if rec.name == "exp" else out

    push_mode(Doubling())
    try:
        r = nd.tensor([0.0]).exp()
    finally:
        pop_mode()
    assert r.item() == 2.0


def test_no_mode_left_behind():
    from ndgrad._ops import registry

    assert registry._modes == []


@pytest.mark.parametrize("a,b", [
    (np.float32, np.float32), (np.float64, np.float32), (np.int64, np.float32), (np.int32, np.int64),
    (np.bool_, np.int64),
])
def test_fast_path_matches_reference(a, b):
    x = nd.tensor(np.arange(1, 7).reshape(2, 3).astype(a))
    y = nd.tensor(np.arange(1, 4).astype(b))
    for name in ("add.Tensor", "mul.Tensor", "sub.Tensor", "div.Tensor_mode"):
        rec = OPS[name]
        if name == "sub.Tensor" and a == np.bool_:
            continue
        args = (x, y) + tuple(p.default for p in rec.params[2:])
        fast = rec.call(x, y)
        ref = dispatch(rec, args)
        assert fast.dtype == ref.dtype
        np.testing.assert_array_equal(fast._data, ref._data)


def test_fast_path_records_same_graph_as_reference():
    x = nd.tensor([1.0, 2.0], requires_grad=True)
    w = nd.tensor([3.0, 4.0], requires_grad=True)
    fast = x * w
    ref = dispatch(OPS["mul.Tensor"], (x, w))
    assert fast.grad_fn.name() == ref.grad_fn.name() == "MulBackward0"
    assert [n.name() for n, _ in fast.grad_fn.next_functions] == \
        [n.name() for n, _ in ref.grad_fn.next_functions] == ["AccumulateGrad", "AccumulateGrad"]
    assert fast.grad_fn.next_functions[0][0] is ref.grad_fn.next_functions[0][0]  # one accumulator


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((3,), (3, 4)),
                                    ((5, 2, 3), (3, 4))])
def test_matmul_node_named_as_torch_decomposes_it(shapes, torch_or_skip):
    """``matmul`` on 2-D/1-D operands: PyTorch's node names (MmBackward0, MvBackward0,
    DotBackward0), on the fast path and the reference one alike, with its gradients."""
    torch = torch_or_skip
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    want = torch.matmul(*ts)
    want.sum().backward()
    for run in (lambda a, b: nd.matmul(a, b), lambda a, b: dispatch(OPS["matmul"], (a, b))):
        xs = [nd.tensor(a, requires_grad=True) for a in arrays]
        got = run(*xs)
        name = got.grad_fn.name()
        if len(shapes[0]) == 2 and len(shapes[1]) <= 2 or shapes == ((3,), (3,)):
            assert name == want.grad_fn.name()
        else:  # PyTorch's top node is a reshape around mm/mv/bmm; here the one matmul node
            assert name == "MatmulBackward0"
        got.sum().backward()
        for x, t in zip(xs, ts):
            np.testing.assert_allclose(x.grad._data, t.grad.numpy(), rtol=1e-12)


def test_mv_against_torch(torch_or_skip):
    torch = torch_or_skip
    m, v = np.arange(6.0).reshape(2, 3), np.array([1.0, -2.0, 0.5])
    got = nd.mv(nd.tensor(m, requires_grad=True), nd.tensor(v))
    assert got.grad_fn.name() == torch.mv(torch.tensor(m, requires_grad=True), torch.tensor(v)).grad_fn.name()
    for a, b in [((3,), (3,)), ((2, 3), (2, 3)), ((2, 3), (4,))]:
        with pytest.raises(RuntimeError) as want:
            torch.mv(torch.ones(*a), torch.ones(*b))
        with pytest.raises(RuntimeError) as got:
            nd.mv(nd.ones(*a), nd.ones(*b))
        assert str(got.value) == str(want.value)


_VIEW_CALLS = [("view", (2, 3, 2), ((6, 2),)), ("transpose.int", (2, 3, 2), (0, 1)), ("t", (3, 4), ()),
               ("permute", (2, 3, 2), ((1, 0, 2),)), ("expand", (2, 1, 2), ((3, 2, 4, 2),)),
               ("select.int", (2, 3, 2), (0, 1)), ("slice.Tensor", (2, 3, 2), (1, 0, 2, 1)),
               ("narrow", (2, 3, 2), (2, 0, 1)), ("squeeze", (2, 1, 2), ()),
               ("unsqueeze", (2, 3, 2), (1,)), ("alias", (2, 3, 2), ()), ("diagonal", (2, 3, 2), (0, 0, 1))]


def _view_state(t):
    info = t._view
    return (t._data.shape, t._data.strides, t._rg, t.grad_fn and t.grad_fn.name(), info.creation,
            [(r.name, p, i) for r, p, i in info.chain], t._vc[0])


@pytest.mark.parametrize("grad_on", [True, False])
@pytest.mark.parametrize("name,full,params", _VIEW_CALLS)
def test_view_fast_path_matches_reference(name, full, params, grad_on):
    """A view op's generated fast path links its output to the base exactly as the reference
    dispatcher does: same version counter, chain, creation kind, grad_fn and gradient."""
    rec = OPS[name]
    x = nd.tensor(np.arange(float(np.prod(full))).reshape(full), requires_grad=True)
    base = x * 1  # a non-leaf, itself viewed once: chains of two steps
    for src in (base, base.view(full)):
        with nd.set_grad_enabled(grad_on):
            fast = rec.call(src, *params)
            ref = dispatch(rec, (src,) + tuple(params) + tuple(
                p.default for p in rec.params[1 + len(params):]))
        assert _view_state(fast) == _view_state(ref)
        assert fast._vc is src._vc is ref._vc and fast._view.base is base
        np.testing.assert_array_equal(fast._data, ref._data)
        if grad_on:
            g1, = nd.autograd.grad(fast.sum(), x, retain_graph=True)
            g2, = nd.autograd.grad(ref.sum(), x, retain_graph=True)
            np.testing.assert_array_equal(g1._data, g2._data)
    with nd.no_grad():  # an in-place change through the fast view shows in the base's version
        fast = rec.call(base, *params)
        if name == "expand":  # several elements share memory: refused, as in PyTorch
            with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
                fast.add_(1)
            return
        fast.add_(1)
    assert base._vc[0] == 1
