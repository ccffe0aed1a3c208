"""Bad input raises PyTorch's exception type and message, and a backward that fails part-way leaves
every leaf's ``.grad`` as it was.

Each scenario is a function of the framework module ``T`` (``ndgrad`` or ``torch``); the ``ref``
fixture (tests/conftest.py) runs it under both and compares exception types and messages.
"""

from __future__ import annotations

import numpy as np
import pytest

RNG = np.random.default_rng(4321)
V3 = RNG.standard_normal(3)
A23 = RNG.standard_normal((2, 3))
SECOND_BACKWARD = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)
ANOMALY_HINT = (
    "Hint: enable anomaly detection to find the operation that failed to compute its gradient, "
    "with torch.autograd.set_detect_anomaly(True, check_nan=False)."
)
FLOAT_ONLY = "Only Tensors of floating point and complex dtype can require gradients"

# Known ndgrad bugs (strict xfails: they start failing loudly once fixed).

def leaf(T, arr, dtype=None):
    return T.tensor(arr, dtype=dtype or T.float64, requires_grad=True)


def modified(kind, shape, op, version, expected):
    return (
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [torch.{kind} [{shape}]], which is output 0 of {op}, is at version {version}; "
        f"expected version {expected} instead. {ANOMALY_HINT}"
    )


# --- shape mismatches ---
def test_add_shape_mismatch(ref):
    ref.raises(
        lambda T: T.ones(3) + T.ones(4), RuntimeError,
        "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0",
    )


def test_mul_shape_mismatch_2d(ref):
    ref.raises(
        lambda T: T.ones(2, 3) * T.ones(2, 4), RuntimeError,
        "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
    )


def test_backward_gradient_wrong_shape(ref):
    def f(T):
        x = leaf(T, V3)
        (x * 2).backward(T.ones(4, dtype=T.float64))

    ref.raises(
        f, RuntimeError,
        "Mismatch in shape: grad_output[0] has a shape of torch.Size([4]) and output[0] has a "
        "shape of torch.Size([3]).",
    )


def test_backward_gradient_wrong_shape_for_scalar(ref):
    def f(T):
        x = leaf(T, V3)
        (x * 2).sum().backward(T.ones(4, dtype=T.float64))

    ref.raises(
        f, RuntimeError,
        "Mismatch in shape: grad_output[0] has a shape of torch.Size([4]) and output[0] has a "
        "shape of torch.Size([]).",
    )


def test_autograd_grad_outputs_wrong_shape(ref):
    def f(T):
        x = leaf(T, A23)
        T.autograd.grad(x.exp(), x, grad_outputs=T.ones(3, 2, dtype=T.float64))

    ref.raises(
        f, RuntimeError,
        "Mismatch in shape: grad_output[0] has a shape of torch.Size([3, 2]) and output[0] has a "
        "shape of torch.Size([2, 3]).",
    )


# --- dtypes that cannot require grad ---
def test_requires_grad_on_int_tensor_method(ref):
    ref.raises(
        lambda T: T.tensor([1, 2]).requires_grad_(), RuntimeError,
        "only Tensors of floating point dtype can require gradients",
    )


def test_requires_grad_on_int_tensor_factory(ref):
    ref.raises(lambda T: T.tensor([1], requires_grad=True), RuntimeError, FLOAT_ONLY)


def test_requires_grad_on_bool_tensor_factory(ref):
    ref.raises(lambda T: T.tensor([True], requires_grad=True), RuntimeError, FLOAT_ONLY)


def test_requires_grad_on_int_zeros(ref):
    ref.raises(lambda T: T.zeros(2, dtype=T.int64, requires_grad=True), RuntimeError, FLOAT_ONLY)


def test_requires_grad_false_on_int_is_fine(ref):
    def f(T):
        t = T.tensor([1, 2]).requires_grad_(False)
        return t.requires_grad, t

    ref.same(f)


def test_complex_can_require_grad(ref):
    ref.same(lambda T: T.tensor([1 + 2j], requires_grad=True).requires_grad)


# --- backward on things that cannot be differentiated ---
def test_backward_without_requires_grad(ref):
    ref.raises(
        lambda T: T.ones(3).sum().backward(), RuntimeError,
        "element 0 of tensors does not require grad and does not have a grad_fn",
    )


def test_autograd_grad_without_requires_grad(ref):
    def f(T):
        x = leaf(T, V3)
        T.autograd.grad(T.ones(3).sum(), x)

    ref.raises(f, RuntimeError, "element 0 of tensors does not require grad and does not have a grad_fn")


def test_implicit_gradient_for_non_scalar(ref):
    def f(T):
        x = leaf(T, V3)
        (x * 2).backward()

    ref.raises(f, RuntimeError, "grad can be implicitly created only for scalar outputs")


def test_implicit_gradient_for_non_scalar_autograd_grad(ref):
    def f(T):
        x = leaf(T, V3)
        T.autograd.grad(x * 2, x)

    ref.raises(f, RuntimeError, "grad can be implicitly created only for scalar outputs")


# --- in-place on leaves ---
def test_inplace_on_leaf_requiring_grad(ref):
    def f(T):
        leaf(T, V3).add_(1)

    ref.raises(f, RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation.")


def test_setitem_on_leaf_requiring_grad(ref):
    """``x[0] = v`` writes through a view of ``x``, so PyTorch names the view."""

    def f(T):
        x = leaf(T, V3)
        x[0] = 5.0

    ref.raises(
        f, RuntimeError, "a view of a leaf Variable that requires grad is being used in an in-place operation."
    )


@pytest.mark.parametrize("make_view", ["slice", "view", "transpose", "index"])
def test_inplace_on_view_of_leaf_requiring_grad(ref, make_view):
    def f(T):
        x = leaf(T, A23)
        v = {"slice": lambda: x[:, 1:], "view": lambda: x.view(6), "transpose": lambda: x.t(),
             "index": lambda: x[1]}[make_view]()
        v.mul_(2)

    ref.raises(
        f, RuntimeError, "a view of a leaf Variable that requires grad is being used in an in-place operation."
    )


def test_inplace_on_leaf_allowed_under_no_grad(ref):
    def f(T):
        x = leaf(T, V3)
        with T.no_grad():
            x.add_(1)
        return x.requires_grad, x.is_leaf, x.grad_fn is None, x.detach()

    ref.same(f)


# --- saved tensors modified in place ---
def test_saved_input_modified_inplace(ref):
    def f(T):
        x = leaf(T, V3, T.float32)
        y = x * 2
        w = y * y
        y.add_(1)
        w.sum().backward()

    ref.raises(f, RuntimeError, modified("FloatTensor", 3, "Add", 1, 0))


def test_saved_output_modified_inplace(ref):
    def f(T):
        x = leaf(T, V3, T.float32)
        y = x.exp()
        y.add_(1)
        y.sum().backward()

    ref.raises(f, RuntimeError, modified("FloatTensor", 3, "Exp", 1, 0))


def test_saved_tensor_modified_twice_double(ref):
    def f(T):
        x = leaf(T, A23)
        y = x.sin()
        z = y.cos()
        y.mul_(2)
        y.add_(1)
        z.sum().backward()

    ref.raises(f, RuntimeError, modified("DoubleTensor", "2, 3", "Add", 2, 0))


def test_saved_leaf_modified_under_no_grad(ref):
    def f(T):
        x = leaf(T, V3)
        y = x * x
        with T.no_grad():
            x.mul_(2)
        y.sum().backward()

    msg = modified("DoubleTensor", 3, "X", 1, 0).replace(", which is output 0 of X,", "")
    ref.raises(f, RuntimeError, msg)


# --- cross-dtype in-place ---
def test_float_add_complex_inplace(ref):
    ref.raises(
        lambda T: T.ones(3).add_(T.ones(3, dtype=T.complex64)), RuntimeError,
        "result type ComplexFloat can't be cast to the desired output type Float",
    )


def test_float_add_complex_scalar_inplace(ref):
    ref.raises(
        lambda T: T.ones(3).add_(1j), RuntimeError,
        "result type ComplexFloat can't be cast to the desired output type Float",
    )


def test_int_add_float_scalar_inplace(ref):
    ref.raises(
        lambda T: T.ones(3, dtype=T.int64).add_(1.5), RuntimeError,
        "result type Float can't be cast to the desired output type Long",
    )


def test_int_mul_float_tensor_inplace(ref):
    ref.raises(
        lambda T: T.ones(3, dtype=T.int64).mul_(T.ones(3)), RuntimeError,
        "result type Float can't be cast to the desired output type Long",
    )


def test_float_add_int_inplace_is_fine(ref):
    ref.same(lambda T: T.ones(3).add_(T.ones(3, dtype=T.int64)))


# --- graph freed ---
def test_second_backward_without_retain_graph(ref):
    def f(T):
        x = leaf(T, V3)
        y = (x.exp() * x).sum()
        y.backward()
        y.backward()

    ref.raises(f, RuntimeError, SECOND_BACKWARD)


def test_autograd_grad_then_backward_without_retain_graph(ref):
    def f(T):
        x = leaf(T, V3)
        y = (x * x).sum()
        T.autograd.grad(y, x)
        y.backward()

    ref.raises(f, RuntimeError, SECOND_BACKWARD)


# --- a failed backward leaves .grad untouched ---
class HookError(Exception):
    pass


def _raise(_grad):
    raise HookError("boom")


def test_failing_hook_leaves_grads_untouched(ref):
    def f(T):
        a = leaf(T, V3)
        b = leaf(T, V3 * 2)
        c = leaf(T, V3 * 3)
        b.grad = T.full((3,), 7.0, dtype=T.float64)
        ya = a * 2          # a's path finishes first
        yb = b.exp()
        mid = (yb * c).tanh()
        h = mid.register_hook(_raise)
        loss = ya.sum() + mid.sum()
        with pytest.raises(HookError):
            loss.backward(retain_graph=True)
        before = (a.grad is None, b.grad.clone(), c.grad is None)
        h.remove()
        loss.backward()
        return before, a.grad, b.grad, c.grad

    before, ga, gb, gc = ref.same(f)
    assert before[0] and before[2]
    np.testing.assert_array_equal(ref.to_numpy(before[1]), np.full(3, 7.0))


def test_failing_leaf_hook_leaves_grads_untouched():
    """ndgrad-only guarantee: a failed backward is all-or-nothing. PyTorch itself is not: there
    ``a``'s AccumulateGrad runs before ``b``'s hook raises, so ``a.grad`` changes; hence no oracle."""
    import ndgrad as T

    a = leaf(T, V3)
    b = leaf(T, V3 * 2)
    a.grad = T.ones(3, dtype=T.float64)
    h = b.register_hook(_raise)
    loss = (a * b).sum() + a.sum()
    with pytest.raises(HookError):
        loss.backward(retain_graph=True)
    np.testing.assert_array_equal(np.array(a.grad._data), np.ones(3))
    assert b.grad is None
    h.remove()
    loss.backward()
    np.testing.assert_allclose(np.array(a.grad._data), 1 + V3 * 2 + 1)
    np.testing.assert_allclose(np.array(b.grad._data), V3)


def test_modified_saved_tensor_on_one_branch_leaves_grads_untouched(ref):
    def f(T):
        a = leaf(T, V3)
        b = leaf(T, V3 * 0.5)
        a.grad = T.full((3,), -1.0, dtype=T.float64)
        good = (a * 3).sum()            # a branch that would finish without trouble
        y = b * 2
        bad = (y * y).sum()
        y.add_(1)                      # invalidates the saved y of the second branch
        with pytest.raises(RuntimeError):
            (good + bad).backward()
        before = (a.grad.clone(), b.grad is None)
        # fixed graph: same computation without the in-place modification
        y2 = b * 2
        (a * 3).sum().add((y2 * y2).sum()).backward()
        return before, a.grad, b.grad

    before, ga, gb = ref.same(f)
    np.testing.assert_array_equal(ref.to_numpy(before[0]), np.full(3, -1.0))
    assert before[1]


def test_failing_autograd_grad_leaves_grads_untouched(ref):
    def f(T):
        a = leaf(T, V3)
        a.grad = T.ones(3, dtype=T.float64)
        y = a.sin()
        y.register_hook(_raise)
        with pytest.raises(HookError):
            T.autograd.grad(y.sum(), a)
        return a.grad

    ref.same(f)
