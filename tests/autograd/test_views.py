"""Views and in-place ops against PyTorch: writing through a view of a non-leaf rebases the base's
history (``CopySlices``), in-place on a base regenerates its views' ``grad_fn``, version counters
are shared by a base, its views and ``detach()``, ``.data`` writes bump nothing, and
``requires_grad`` flows through views.

Each scenario is a function of the framework module ``T`` (``ndgrad`` or ``torch``); the ``ref``
fixture (tests/conftest.py) runs it under both and compares the results.
"""

from __future__ import annotations

import numpy as np
import pytest

RNG = np.random.default_rng(777)
A34 = RNG.standard_normal((3, 4))
B34 = RNG.standard_normal((3, 4))
A234 = RNG.standard_normal((2, 3, 4))
V4 = RNG.standard_normal(4)

VIEWS = {
    "slice": lambda b: b[1:, ::2],
    "transpose": lambda b: b.t(),
    "view": lambda b: b.view(12),
    "unsqueeze": lambda b: b.unsqueeze(0),
    "index": lambda b: b[1],
    "select_neg": lambda b: b[:, -1],
    "chain": lambda b: b[1:].view(8).view(2, 4).t()[1:],
    "narrow": lambda b: b.narrow(1, 1, 2),
    "diagonal": lambda b: b.diagonal(),
    "ellipsis_none": lambda b: b[..., None, 2],
}


def leaf(T, arr):
    return T.tensor(arr, dtype=T.float64, requires_grad=True)


def _inplace(op, T, v, other):
    if op == "mul_":
        v.mul_(other)
    elif op == "add_":
        v.add_(other, alpha=2.0)
    elif op == "copy_":
        v.copy_(other)
    elif op == "zero_":
        v.zero_()
    elif op == "div_":
        v.div_(other.exp())
    elif op == "setitem":
        v[...] = other
    else:
        raise AssertionError(op)


# --- in-place on a view of a non-leaf ---
@pytest.mark.parametrize("op", ["mul_", "add_", "copy_", "zero_", "div_", "setitem"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_inplace_on_view_of_non_leaf(ref, view, op):
    def f(T):
        x, w = leaf(T, A34), leaf(T, B34)
        base = x * 1.5
        v = VIEWS[view](base)
        other = VIEWS[view](w * 0.5 + 1)
        _inplace(op, T, v, other)
        names = (type(base.grad_fn).__name__, v.is_leaf, v.requires_grad)
        (base.tanh() * T.tensor(B34)).sum().backward()
        return names, base.detach(), x.grad, w.grad

    (name, is_leaf, rg), *_ = ref.same(f)
    assert name == "CopySlices" and not is_leaf and rg


def test_view_gradient_after_inplace_on_view(ref):
    """After ``v.mul_`` the view's own history goes through the base's CopySlices (torch names the
    view's node AsStridedBackward0; names differ by design, so only gradients are compared)."""

    def f(T):
        x = leaf(T, A34)
        base = x.sin()  # sin saves its input, not the result modified below
        v = base[1]
        v.mul_(T.tensor(V4))
        assert v.grad_fn is not None and not v.is_leaf
        (gv,) = T.autograd.grad((v * v).sum(), x, retain_graph=True)
        (gb,) = T.autograd.grad(base.sum(), x)
        return type(base.grad_fn).__name__, gv, gb

    ref.same(f)


def test_setitem_on_non_leaf_with_tensor_value(ref):
    def f(T):
        x, w = leaf(T, A34), leaf(T, V4)
        base = x.sin()
        base[1] = w * 3
        base[:, 0] = 0.0
        base.pow(2).sum().backward()
        return type(base.grad_fn).__name__, base.detach(), x.grad, w.grad

    ref.same(f)


def test_setitem_with_bool_mask_and_index_tensor(ref):
    def f(T):
        x, w = leaf(T, A34), leaf(T, B34)
        base = x * w
        base[base > 0] = 0.0
        base[T.tensor([0, 2])] *= 3
        (base * base).sum().backward()
        return base.detach(), x.grad, w.grad

    ref.same(f)


def test_view_of_view_of_non_leaf_inplace_twice(ref):
    def f(T):
        x = leaf(T, A234)
        base = x.cos()
        v1 = base[1]
        v2 = v1.t()
        v2.mul_(v2.detach() + 1)
        v1[0].add_(5)
        (base * base).sum().backward()
        return base.detach(), x.grad

    ref.same(f)


def test_inplace_on_view_then_use_both(ref):
    def f(T):
        x = leaf(T, A34)
        base = x * 2
        v = base[:, 1:3]
        v.exp_()
        loss = (v * 3).sum() + (base**2).sum()
        loss.backward()
        return x.grad

    ref.same(f)


def test_inplace_on_view_of_leaf_under_no_grad(ref):
    def f(T):
        x = leaf(T, A34)
        with T.no_grad():
            x[0].mul_(0)
            x.t()[1].fill_(2.0)
        y = (x * x).sum()
        y.backward()
        return x.detach(), x.grad, x.is_leaf, x._version

    ref.same(f)


def test_view_of_leaf_created_in_no_grad_inplace_in_grad_mode_raises(ref):
    def f(T):
        x = leaf(T, A34)
        with T.no_grad():
            v = x[0]
        v.mul_(2)

    ref.raises(
        f, RuntimeError,
        "A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
        "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
        "your code by moving both the view and the inplace either both inside the no_grad block "
        "(if you don't want the inplace to be tracked) or both outside (if you want the inplace "
        "to be tracked).",
    )


def test_inplace_view_on_leaf_not_requiring_grad_with_grad_value(ref):
    """Writing a grad-requiring value into a plain tensor's view makes the base require grad."""

    def f(T):
        w = leaf(T, V4)
        base = T.zeros(3, 4, dtype=T.float64)
        base[1] = w * 2
        v = base.t()
        v[0] += w[0]
        assert base.requires_grad and not base.is_leaf
        (base * T.tensor(A34)).sum().backward()
        return type(base.grad_fn).__name__, base.detach(), w.grad

    ref.same(f)


# --- in-place on the base, then use the view ---
@pytest.mark.parametrize("view", ["slice", "transpose", "view", "index", "chain", "diagonal"])
def test_inplace_on_base_then_use_view(ref, view):
    def f(T):
        x = leaf(T, A34)
        base = x * 1.0
        v = VIEWS[view](base)
        base.mul_(x.detach() + 2)
        assert v.grad_fn is not None
        (v.sin() * 2).sum().backward()
        return v.detach(), x.grad

    ref.same(f)


def test_view_grad_fn_regenerated_after_base_inplace(ref):
    """The regenerated view node differs by name (torch: AsStridedBackward0); compare only that
    it changed and what the gradients are."""

    def f(T):
        x = leaf(T, A34)
        base = x.sin()
        v = base[1:]
        before = v.grad_fn
        base.add_(1)
        after = v.grad_fn
        v.sum().backward()
        return before is after, x.grad

    ref.same(f)


def test_inplace_on_base_then_inplace_on_view(ref):
    def f(T):
        x = leaf(T, A34)
        base = x * x
        v = base[:, :2]
        base.add_(1)
        v.mul_(3)
        base.sum().backward()
        return base.detach(), x.grad

    ref.same(f)


# --- version counters ---
def test_version_shared_between_base_and_views(ref):
    def f(T):
        base = T.tensor(A34)
        v1, v2 = base[0], base.t()
        out = [(base._version, v1._version, v2._version)]
        v1.add_(1)
        out.append((base._version, v1._version, v2._version))
        base.mul_(2)
        v2.zero_()
        out.append((base._version, v1._version, v2._version))
        v1[0] = 3.0
        out.append((base._version, v1._version, v2._version))
        return out

    ref.same(f)


def test_out_of_place_ops_do_not_bump_version(ref):
    def f(T):
        t = T.tensor(A34)
        t + 1
        t.view(12)
        t.sum()
        return t._version

    ref.same(f)


def test_detach_shares_version_counter(ref):
    def f(T):
        x = leaf(T, A34)
        d = x.detach()
        d.add_(1)
        out = [x._version, d._version]
        with T.no_grad():
            x.mul_(2)
        out += [x._version, d._version]
        return out, x.detach()

    ref.same(f)


def test_detach_inplace_makes_saved_tensor_stale(ref):
    def f(T):
        x = leaf(T, A34)
        y = x.exp()
        y.detach().zero_()
        y.sum().backward()

    def g(T):
        try:
            f(T)
        except RuntimeError as e:
            return "modified by an inplace operation" in str(e), "is at version 1; expected version 0" in str(e)
        return "no error"

    ref.same(g)


def test_data_inplace_does_not_bump_version(ref):
    def f(T):
        x = leaf(T, A34)
        y = x.exp()
        v0 = y._version
        y.data.mul_(0.5)
        y.data[0] = 1.0
        x.data.add_(1)
        v1, vx = y._version, x._version
        y.sum().backward()  # not flagged: .data writes bypass the version counter
        return v0, v1, vx, x.grad, y.detach()

    ref.same(f)


def test_data_has_no_history_and_fresh_version(ref):
    def f(T):
        x = leaf(T, A34)
        x.detach().add_(1)
        d = x.data
        return d.requires_grad, d.grad_fn is None, d.is_leaf, d._version, x._version

    ref.same(f)


def test_data_assignment_replaces_values(ref):
    def f(T):
        x = leaf(T, A34)
        x.data = T.tensor(B34)
        (x * 2).sum().backward()
        return x.detach(), x.grad, x.requires_grad

    ref.same(f)


# --- requires_grad through views ---
@pytest.mark.parametrize("view", list(VIEWS))
def test_requires_grad_propagates_through_views(ref, view):
    def f(T):
        x = leaf(T, A34)
        plain = T.tensor(A34)
        v, p = VIEWS[view](x), VIEWS[view](plain)
        return (v.requires_grad, v.is_leaf, v.grad_fn is not None,
                p.requires_grad, p.is_leaf, p.grad_fn is None)

    ref.same(f)


def test_views_of_leaf_under_no_grad(ref):
    def f(T):
        x = leaf(T, A34)
        with T.no_grad():
            v = x[1:]
        return v.requires_grad, v.is_leaf, v.grad_fn is None

    assert ref.same(f) == (True, True, True)


def test_view_shares_memory_with_base(ref):
    def f(T):
        base = T.tensor(A34)
        v = base.t()[1]
        v.fill_(9.0)
        base.view(12)[0] = -1.0
        return base, v

    ref.same(f)


def test_view_of_non_leaf_gradient_flows_to_leaf(ref):
    def f(T):
        x = leaf(T, A234)
        h = x.tanh()
        v = h.permute(2, 0, 1)[1:].reshape(-1)
        (v * v).sum().backward()
        return x.grad

    ref.same(f)




@pytest.mark.parametrize("view", list(VIEWS))
def test_view_base_attribute(ref, view):
    def f(T):
        x = leaf(T, A34)
        h = x * 2
        v = VIEWS[view](h)
        vv = v[..., None]
        return v._base is h, vv._base is h, h._base is None, x._base is None, v._is_view(), h._is_view()

    ref.same(f)


def test_view_base_of_leaf_and_detach(ref):
    def f(T):
        x = leaf(T, A34)
        with T.no_grad():
            v = x[1:]
        return v._base is x, x.detach()._base is None, x.t()._base is x

    ref.same(f)



def test_inplace_on_expanded_tensor(ref):
    """An expand that broadcasts nothing is a writable view; one that does refuses in-place ops."""

    def f(T):
        x = T.zeros(2, 3, dtype=T.float64)
        x.expand(2, 3).add_(1)
        x[0].expand(1, 3).mul_(2)
        return x

    ref.same(f)
    ref.raises(lambda T: T.zeros(2, 1).expand(2, 3).add_(1), RuntimeError,
               "unsupported operation: more than one element of the written-to tensor refers to a single memory "
               "location. Please clone() the tensor before performing the operation.")
