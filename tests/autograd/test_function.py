"""Custom ``autograd.Function``: each scenario runs under ndgrad and PyTorch (``ref``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ndgrad
from ndgrad.autograd.function import once_differentiable


def _exp_fn(T):
    class MyExp(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    return MyExp


def _mul_fn(T):
    class MulK(T.autograd.Function):  # setup_context style, non-tensor argument
        @staticmethod
        def forward(x, y, k):
            return x * y * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, y, k = inputs
            ctx.save_for_backward(x, y)
            ctx.k = k

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y * ctx.k, g * x * ctx.k, None

    return MulK


def _x(T, *shape):
    return T.tensor(np.linspace(-1, 1, int(np.prod(shape))).reshape(shape), requires_grad=True)


def test_old_style_values_grads_and_name(ref):
    def f(T):
        x = _x(T, 2, 3)
        y = _exp_fn(T).apply(x)
        y.sum().backward()
        return y, x.grad, y.grad_fn.name(), y.requires_grad, y.is_leaf

    ref.same(f)


def test_setup_context_style_and_ctx_attributes(ref):
    def f(T):
        x, y = _x(T, 3), _x(T, 3) * 2
        out = _mul_fn(T).apply(x, y, 3.0)
        gx, gy = T.autograd.grad(out.sum(), (x, y))
        return out, gx, gy, out.grad_fn.k, len(out.grad_fn.next_functions)

    ref.same(f)


def test_needs_input_grad_and_nondiff_outputs_materialized(ref):
    def f(T):
        seen = []

        class M(T.autograd.Function):
            @staticmethod
            def forward(ctx, x, n, y):
                seen.append(ctx.needs_input_grad)
                nd = x * 5
                ctx.mark_non_differentiable(nd)
                return x * 2, n + 1, x.argmax(), nd, y * 3

            @staticmethod
            def backward(ctx, g1, gn, gi, gnd, gy):
                seen.append((g1, gn, gi, gnd, gy))
                return g1, None, gy

        x, y = _x(T, 3), T.ones(2)
        out = M.apply(x, 4, y)
        out[0].sum().backward()
        flags = [(o.requires_grad, o.grad_fn is None) for o in out if isinstance(o, T.Tensor)]
        return seen, out, flags, x.grad

    ref.same(f)


def test_set_materialize_grads_false_and_unused_outputs(ref):
    def f(T):
        seen = []

        class Two(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                seen.append((g1 is None, g2 is None))
                return g1 * 2 if g1 is not None else None

        x = _x(T, 3)
        a, b = Two.apply(x)
        b.sum().backward()
        return seen, x.grad

    ref.same(f)


def test_no_node_under_no_grad_or_without_grad_inputs(ref):
    def f(T):
        F = _exp_fn(T)
        x = _x(T, 3)
        with T.no_grad():
            a = F.apply(x)
        b = F.apply(T.ones(3))
        return a.requires_grad, a.grad_fn is None, b.requires_grad, b.grad_fn is None

    ref.same(f)


def test_input_returned_as_is(ref):
    def f(T):
        class R(T.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x, y * 2

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 * 3, g2 * 2

        x, y = _x(T, 3), _x(T, 2)
        o1, o2 = R.apply(x, y)
        info = (o1 is x, o1._base is x, o1.is_leaf, o1.grad_fn.name(), o1._version)
        o1.sum().backward()
        with T.no_grad():
            n1, _ = R.apply(x, y)
        z = T.ones(3)
        z1, _ = R.apply(z, T.ones(2))
        return info, x.grad, y.grad, (n1 is x, n1.requires_grad), (z1 is z, z1._base is z, z1.requires_grad)

    ref.same(f)


def test_mark_dirty(ref):
    def f(T):
        class D(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2

        x = _x(T, 3)
        a = x.clone()
        y = D.apply(a)
        out = (y is a, a._version, a.grad_fn.name())
        y.sum().backward()
        return out, y, x.grad

    ref.same(f)


def test_mark_dirty_leaf_raises(ref):
    def f(T):
        class D(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        D.apply(_x(T, 3))

    ref.raises(f, RuntimeError, "a leaf Variable that requires grad has been used in an in-place operation.")


def test_mark_dirty_not_returned_raises(ref):
    def f(T):
        class D(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_dirty(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

        D.apply(_x(T, 3).clone())

    ref.raises(f, RuntimeError)


def test_saved_input_modified_in_place_raises(ref):
    def f(T):
        a = _x(T, 3).clone()
        y = _mul_fn(T).apply(a, a, 2.0)
        a.add_(1)
        y.sum().backward()

    ref.raises(f, RuntimeError)


def test_saved_output_modified_in_place_raises(ref):
    def f(T):
        y = _exp_fn(T).apply(_x(T, 3))
        with T.no_grad():
            y.add_(1)
        y.sum().backward()

    ref.raises(f, RuntimeError)


def test_second_backward_raises_and_retain_graph(ref):
    def ok(T):
        x = _x(T, 3)
        y = _exp_fn(T).apply(x)
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        return x.grad

    ref.same(ok)

    def bad(T):
        y = _exp_fn(T).apply(_x(T, 3))
        y.sum().backward()
        y.sum().backward()

    ref.raises(bad, RuntimeError)


def test_save_intermediate_and_none(ref):
    def f(T):
        class I(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                t = x * 2
                ctx.save_for_backward(t, None)
                return x.exp()

            @staticmethod
            def backward(ctx, g):
                t, n = ctx.saved_tensors
                return g * t

        x = _x(T, 3)
        I.apply(x).sum().backward()
        return x.grad

    ref.same(f)


def test_save_non_tensor_raises(ref):
    def f(T):
        class S(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, 3)
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g

        S.apply(_x(T, 2))

    ref.raises(f, TypeError)


def _bad_backward(T, ret):
    class W(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return ret(g)

    return W


@pytest.mark.parametrize("ret, second, exc", [
    (lambda g: (g,), "a", RuntimeError),  # wrong count
    (lambda g: (g, g, 1), "a", RuntimeError),  # extra non-None
    (lambda g: (g.sum(0, keepdim=True).expand(3), g), "a", RuntimeError),  # wrong shape, index 0
    (lambda g: (g, g.sum(0, keepdim=True)), "a", RuntimeError),  # wrong shape, index 1 (same edge twice)
    (lambda g: (1.0, g), "a", RuntimeError),  # non-tensor gradient
    (lambda g: (g, 1.0), 2.0, RuntimeError),  # gradient for a non-tensor input
])
def test_bad_gradients_raise(ref, ret, second, exc):
    def f(T):
        a = T.ones(2, requires_grad=True)
        W = _bad_backward(T, ret)
        W.apply(a, a if second == "a" else second).sum().backward()

    ref.raises(f, exc)


def test_error_messages_exact(ref):
    def count(T):
        a = T.ones(2, requires_grad=True)
        _bad_backward(T, lambda g: (g,)).apply(a, a).sum().backward()

    ref.raises(count, RuntimeError, "function WBackward returned an incorrect number of gradients (expected 2, got 1)")

    def shape(T):
        a = T.ones(2, requires_grad=True)
        _bad_backward(T, lambda g: (g.sum(0, keepdim=True).expand(3), g)).apply(a, a).sum().backward()

    ref.raises(shape, RuntimeError,
               "Function WBackward returned an invalid gradient at index 0 - got [3] but expected shape "
               "compatible with [2]")


def test_extra_none_gradients_and_dtype_cast(ref):
    def f(T):
        a = T.ones(2, requires_grad=True)
        W = _bad_backward(T, lambda g: (g.double(), g, None, None))
        W.apply(a, a).sum().backward()
        return a.grad

    ref.same(f)


def test_not_implemented(ref):
    def f(T):
        class NoB(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

        NoB.apply(_x(T, 2)).sum().backward()

    ref.raises(f, NotImplementedError)


def test_double_backward_create_graph(ref):
    def f(T):
        class Cube(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 3 * x ** 2

        x = _x(T, 4)
        (g,) = T.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
        (gg,) = T.autograd.grad(g.sum(), x)
        y = _exp_fn(T).apply(x)
        (h,) = T.autograd.grad(y.sum(), x, create_graph=True)
        (hh,) = T.autograd.grad(h.sum(), x)
        return g, gg, hh

    ref.same(f)


def test_once_differentiable(ref):
    def f(T):
        from_mod = T.autograd.function.once_differentiable

        class Sq(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @from_mod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 2 * g * x

        x = _x(T, 3)
        (g,) = T.autograd.grad(Sq.apply(x).sum(), x)
        (g2,) = T.autograd.grad(Sq.apply(x).sum(), x, create_graph=True)
        return g, g2, g2.requires_grad

    ref.same(f)

    def twice(T):
        class Sq(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * x

            @staticmethod
            @T.autograd.function.once_differentiable
            def backward(ctx, g):
                return g * 2

        x = _x(T, 3)
        (g,) = T.autograd.grad((Sq.apply(x) * x).sum(), x, create_graph=True)  # g needs grad
        g.sum().backward()

    ref.raises(twice, RuntimeError,
               "trying to differentiate twice a function that was marked with @once_differentiable")


def test_once_differentiable_importable():
    assert callable(once_differentiable)
    assert ndgrad.autograd.Function is ndgrad.autograd.function.Function


def test_gradcheck_float64():
    F = _mul_fn(ndgrad)
    x = ndgrad.tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    y = ndgrad.tensor(np.random.default_rng(1).standard_normal((2, 3)), requires_grad=True)
    assert ndgrad.autograd.gradcheck(lambda a, b: F.apply(a, b, 1.5), (x, y))
    assert ndgrad.autograd.gradgradcheck(lambda a, b: F.apply(a, b, 1.5), (x, y))
    E = _exp_fn(ndgrad)
    assert ndgrad.autograd.gradcheck(E.apply, (x,))
    assert ndgrad.autograd.gradgradcheck(E.apply, (x,))


def test_instantiation_warns_and_call_raises(ref):
    def f(T):
        F = _exp_fn(T)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            F()(_x(T, 2))

    ref.raises(f, RuntimeError)


def test_mark_dirty_on_view_rebases_base(ref):
    def f(T):
        class D(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2

        x = _x(T, 4)
        b = x * 1
        D.apply(b[1:3])
        b.sum().backward()
        return b, x.grad

    ref.same(f)


@pytest.mark.parametrize("case", ["view", "two_views", "identity"])
def test_inplace_on_custom_function_view_raises(ref, case):
    """In-place on a view a Function returned would bypass its backward: PyTorch's errors."""

    def f(T):
        class V(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.view(-1)

            @staticmethod
            def backward(ctx, g):
                return g.view(2, 2)

        class V2(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x[0], x[1]

            @staticmethod
            def backward(ctx, g, h):
                return T.stack([g, h])

        class Id(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        x = T.ones(2, 2, requires_grad=True).clone()
        out = {"view": lambda: V.apply(x), "two_views": lambda: V2.apply(x)[1],
               "identity": lambda: Id.apply(x)}[case]()
        out.add_(1)

    ref.raises(f, RuntimeError)
