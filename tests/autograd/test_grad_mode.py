"""Grad modes against PyTorch: ``no_grad``, ``enable_grad``, ``set_grad_enabled`` (call, context,
decorator), ``inference_mode``, nesting, decorated functions and generators, exceptions, and
thread-locality.

Each scenario is a function of the framework module ``T`` (``ndgrad`` or ``torch``); the ``ref``
fixture (tests/conftest.py) runs it under both and compares the results. Every scenario leaves the
mode as it found it (checked by the autouse fixture below).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ndgrad

RNG = np.random.default_rng(99)
V4 = RNG.standard_normal(4)


@pytest.fixture(autouse=True)
def _modes_restored(ref):
    yield
    assert ndgrad.is_grad_enabled() and not ndgrad.is_inference_mode_enabled()
    if ref.torch is not None:
        assert ref.torch.is_grad_enabled() and not ref.torch.is_inference_mode_enabled()


def leaf(T, arr=V4):
    return T.tensor(arr, dtype=T.float64, requires_grad=True)


def flags(t):
    return t.requires_grad, t.grad_fn is None, t.is_leaf


# --- no_grad ---
def test_default_mode(ref):
    ref.same(lambda T: (T.is_grad_enabled(), T.is_inference_mode_enabled()))


def test_no_grad_context(ref):
    def f(T):
        x = leaf(T)
        with T.no_grad() as g:
            inside = T.is_grad_enabled()
            y = x * 2
            z = (x.exp() + y).sum()
        w = x * 2
        return g is None, inside, T.is_grad_enabled(), flags(y), flags(z), flags(w), y, z

    ref.same(f)


def test_no_grad_restores_on_exception(ref):
    def f(T):
        try:
            with T.no_grad():
                raise KeyError("x")
        except KeyError:
            pass
        return T.is_grad_enabled()

    ref.same(f)


def test_no_grad_decorator_with_and_without_parens(ref):
    def f(T):
        @T.no_grad()
        def a(x):
            return T.is_grad_enabled(), x * 2

        @T.no_grad
        def b(x):
            """doc of b"""
            return T.is_grad_enabled(), x * 3

        x = leaf(T)
        ea, ya = a(x)
        eb, yb = b(x)
        return ea, eb, flags(ya), flags(yb), T.is_grad_enabled(), b.__name__, b.__doc__

    ref.same(f)


def test_no_grad_decorated_function_called_inside_enable(ref):
    def f(T):
        @T.no_grad()
        def g():
            return T.is_grad_enabled()

        with T.no_grad():
            with T.enable_grad():
                inner = g()
                after = T.is_grad_enabled()
        return inner, after

    ref.same(f)


def test_inplace_under_no_grad_not_recorded(ref):
    def f(T):
        x = leaf(T)
        y = x * 2
        with T.no_grad():
            y.mul_(10)
        y.sum().backward()
        return type(y.grad_fn).__name__, y.detach(), x.grad

    ref.same(f)


def test_no_grad_results_in_other_ops_do_not_track(ref):
    def f(T):
        x = leaf(T)
        with T.no_grad():
            outs = [x.view(2, 2), x[1:], x.clone(), x.sum(), T.stack([x, x]), x.detach() * x, x.t()]
        return [o.grad_fn is None for o in outs], [o.is_leaf for o in outs]

    ref.same(f)


# --- enable_grad ---
def test_enable_grad_inside_no_grad(ref):
    def f(T):
        x = leaf(T)
        with T.no_grad():
            with T.enable_grad():
                inner = T.is_grad_enabled()
                y = x * 2
            outer = T.is_grad_enabled()
            z = x * 2
        y.sum().backward()
        return inner, outer, flags(y), flags(z), x.grad

    ref.same(f)


def test_enable_grad_decorator(ref):
    def f(T):
        @T.enable_grad()
        def a(x):
            return x * 2

        @T.enable_grad
        def b(x):
            return x * 3

        x = leaf(T)
        with T.no_grad():
            ya, yb = a(x), b(x)
            still = T.is_grad_enabled()
        return still, flags(ya), flags(yb)

    ref.same(f)


# --- set_grad_enabled ---
def test_set_grad_enabled_as_function_call(ref):
    def f(T):
        x = leaf(T)
        T.set_grad_enabled(False)
        try:
            off = T.is_grad_enabled()
            y = x * 2
        finally:
            T.set_grad_enabled(True)
        return off, T.is_grad_enabled(), flags(y)

    ref.same(f)


@pytest.mark.parametrize("mode", [False, True])
def test_set_grad_enabled_context(ref, mode):
    def f(T):
        x = leaf(T)
        with T.no_grad():
            with T.set_grad_enabled(mode):
                inner = T.is_grad_enabled()
                y = x * 2
            after = T.is_grad_enabled()
        with T.set_grad_enabled(mode):
            z = x * 2
        return inner, after, T.is_grad_enabled(), flags(y), flags(z)

    ref.same(f)


def test_set_grad_enabled_decorator(ref):
    def f(T):
        @T.set_grad_enabled(False)
        def g(x):
            return T.is_grad_enabled(), x * 2

        between = T.is_grad_enabled()  # decorating does not leave the mode changed
        x = leaf(T)
        inner, y = g(x)
        return between, inner, T.is_grad_enabled(), flags(y)

    ref.same(f)


def test_set_grad_enabled_call_inside_no_grad_is_undone_on_exit(ref):
    def f(T):
        with T.no_grad():
            T.set_grad_enabled(True)
            inner = T.is_grad_enabled()
        return inner, T.is_grad_enabled()

    ref.same(f)


# --- inference_mode ---
def test_inference_mode_context(ref):
    def f(T):
        x = leaf(T)
        with T.inference_mode() as g:
            state = (T.is_grad_enabled(), T.is_inference_mode_enabled())
            y = x * 2
        return g is None, state, T.is_inference_mode_enabled(), flags(y), y

    ref.same(f)


def test_inference_mode_decorators(ref):
    def f(T):
        @T.inference_mode()
        def a():
            return T.is_grad_enabled(), T.is_inference_mode_enabled()

        @T.inference_mode
        def b():
            return T.is_grad_enabled(), T.is_inference_mode_enabled()

        @T.inference_mode(False)
        def c():
            return T.is_grad_enabled(), T.is_inference_mode_enabled()

        return a(), b(), c(), T.is_inference_mode_enabled()

    ref.same(f)


def test_inference_mode_false_outside(ref):
    def f(T):
        with T.inference_mode(False):
            return T.is_grad_enabled(), T.is_inference_mode_enabled()

    ref.same(f)


def test_inference_mode_false_enables_grad(ref):
    def f(T):
        with T.no_grad():
            with T.inference_mode(False):
                a = (T.is_grad_enabled(), T.is_inference_mode_enabled())
        with T.inference_mode():
            with T.inference_mode(False):
                b = (T.is_grad_enabled(), T.is_inference_mode_enabled())
            c = (T.is_grad_enabled(), T.is_inference_mode_enabled())
        return a, b, c

    assert ref.same(f) == ((True, False), (True, False), (False, True))


def test_enable_grad_inside_inference_mode(ref):
    def f(T):
        with T.inference_mode():
            with T.enable_grad():
                inner = (T.is_grad_enabled(), T.is_inference_mode_enabled())
            with T.no_grad():
                inner2 = (T.is_grad_enabled(), T.is_inference_mode_enabled())
        return inner, inner2

    ref.same(f)


def test_inference_tensor_flag(ref):
    def f(T):
        with T.inference_mode():
            t = T.ones(3)
        with T.no_grad():
            u = T.ones(3)
        return t.is_inference(), u.is_inference(), t.requires_grad

    assert ref.same(f) == (True, False, False)


def test_inference_tensor_cannot_be_saved_for_backward(ref):
    def f(T):
        with T.inference_mode():
            t = T.ones(4, dtype=T.float64)
        x = leaf(T)
        (x * t).sum().backward()

    ref.raises(
        f, RuntimeError,
        "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
        "inference mode in computation tracked by autograd. To work around this, you can make a "
        "clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
        "`torch.inference_mode()`.",
    )


INPLACE_MSG = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone "
    "to get a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 "
    "for more details.")


def test_which_tensors_are_inference_tensors(ref):
    """What an op makes in inference mode is an inference tensor, factories and constructors
    included; views and aliases of normal tensors stay normal, those of inference tensors do not;
    an op handing back its input (contiguous) hands back a normal tensor."""
    def f(T):
        n = T.ones(2, 3)
        with T.inference_mode():
            made = [T.ones(2), T.arange(3), T.tensor([1.0]), T.from_numpy(np.ones(2)), n * 2,
                    n.sum(), n.clone(), T.zeros_like(n), n.softmax(1), n.t().flatten(),
                    T.nn.functional.relu(n), T.cat([n, n])]
            kept = [n[0], n.t(), n.view(6), n.flatten(), n.detach(), n.data, n.contiguous(),
                    *n.unbind()]
            i = T.ones(2, 3)
            of_inf = [i[0], i.t(), i.detach(), i.data, *i.unbind(), i.reshape(6)]
            with T.no_grad():
                nograd = T.ones(1)
            with T.inference_mode(False):
                normal_again = T.ones(1) * i
            lin = T.nn.Linear(3, 2)
            inside = (T.is_inference(n), i.is_inference(), n.contiguous() is n)
        return ([t.is_inference() for t in made], [t.is_inference() for t in kept],
                [t.is_inference() for t in of_inf], nograd.is_inference(),
                normal_again.is_inference(), lin.weight.is_inference(), lin.weight.requires_grad,
                T.ones(1).is_inference(), inside)

    got = ref.same(f)
    assert all(got[0]) and not any(got[1]) and all(got[2])


def test_inference_tensor_in_place_outside_inference_mode(ref):
    """Refused, under no_grad too, and before anything is written (out= resizes nothing):
    PyTorch raises only after the write; inside inference mode the writes go through."""
    for write in (lambda T, t: t.add_(1), lambda T, t: t.zero_(), lambda T, t: t.copy_(T.ones(3)),
                  lambda T, t: t.__setitem__(0, 5.0), lambda T, t: t[1:].fill_(2),
                  lambda T, t: t.unsqueeze_(0), lambda T, t: T.add(T.ones(3), 1, out=t),
                  lambda T, t: T.cat([T.ones(3), T.ones(3)], out=t)):
        for grad in (True, False):
            def f(T, write=write, grad=grad):
                with T.inference_mode():
                    t = T.arange(3.0)
                with T.set_grad_enabled(grad):
                    write(T, t)

            ref.raises(f, RuntimeError, INPLACE_MSG)
            with ndgrad.inference_mode():
                t = ndgrad.arange(3.0)
            with pytest.raises(RuntimeError), ndgrad.set_grad_enabled(grad):
                write(ndgrad, t)
            assert t.tolist() == [0.0, 1.0, 2.0]

    def inside(T):
        with T.inference_mode():
            t = T.arange(3.0)
            t.add_(1)
            t[0] = 7.0
            t.unsqueeze_(0)
        with T.inference_mode():
            t.mul_(2)
        return t

    ref.same(inside)


def test_inference_tensor_version_and_requires_grad(ref):
    def version(T):
        with T.inference_mode():
            t = T.ones(2)
        return t._version

    ref.raises(version, RuntimeError, "Inference tensors do not track version counter.")
    msg = "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed."
    for make in (lambda T, t: t.requires_grad_(), lambda T, t: setattr(t, "requires_grad", True),
                 lambda T, t: T.nn.Parameter(t)):
        def f(T, make=make):
            with T.inference_mode():
                t = T.ones(2)
            make(T, t)

        ref.raises(f, RuntimeError, msg)

    def allowed(T):
        with T.inference_mode():
            t = T.ones(2)
            t.requires_grad_()  # inside inference mode: allowed
            p = T.nn.Parameter(T.ones(2))
        u = t.detach().requires_grad_(False)
        q = T.nn.Parameter(t.clone().detach(), requires_grad=True)
        return t.requires_grad, p.requires_grad, p.is_inference(), u.requires_grad, q.is_inference()

    ref.same(allowed)


def test_inference_tensors_in_autograd(ref):
    """An op that saves no input (add) takes an inference tensor beside one requiring grad; one
    that saves it (mul) refuses it; a clone is a normal tensor again.
    NOTE(pytorch): an op whose only tensor inputs are inference tensors requiring grad (made so
    in inference mode) records no graph there; here it does (not compared)."""
    def f(T):
        with T.inference_mode():
            i = T.arange(4.0, dtype=T.float64)
            lin = T.nn.Linear(4, 2).double()
            w = T.ones(4, dtype=T.float64).requires_grad_()
        x = T.tensor([1.0, 2.0, 3.0, 4.0], dtype=T.float64, requires_grad=True)
        (x + i).sum().backward()
        g1 = x.grad.clone()
        x.grad = None
        (x * i.clone()).sum().backward()
        lin(T.ones(4, dtype=T.float64)).sum().backward()
        (x * 2 + w).sum().backward()
        return g1, x.grad, lin.bias.grad, w.grad, i.clone().is_inference()

    ref.same(f)

    def hooks(T):  # with saved-tensor hooks the refusal comes first too
        with T.inference_mode():
            i = T.ones(2)
        x = T.ones(2, requires_grad=True)
        with T.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            x * i

    ref.raises(hooks, RuntimeError,
               "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
               "inference mode in computation tracked by autograd. To work around this, you can make "
               "a clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` "
               "instead of `torch.inference_mode()`.")


def test_view_made_in_inference_mode_modified_in_normal_mode(ref):
    def f(T):
        w = T.ones(3, requires_grad=True)
        with T.inference_mode():
            v = w[1:]
        v.add_(1)

    ref.raises(f, RuntimeError,
               "A view was created in inference mode and is being modified inplace in normal mode. "
               "Given that this use case is ambiguous and error-prone, it is forbidden. You can "
               "clarify your code by moving both the view and the inplace either both inside the "
               "inference_mode block (if you don't want the inplace to be tracked) or both outside "
               "(if you want the inplace to be tracked).")

    def allowed(T):
        w = T.ones(3, requires_grad=True)
        n = T.ones(3)
        with T.inference_mode():
            v, vn = w[1:], n[1:]
        with T.no_grad():
            v.add_(1)
        vn.mul_(3)  # nothing requires grad: allowed
        with T.inference_mode():
            v.add_(1)
        return v.requires_grad, v.is_inference(), vn.is_inference(), n, w.detach()

    ref.same(allowed)


def test_inference_mode_per_thread_and_fast(ref):
    """Another thread is not in inference mode; ops inside it give the values they give outside."""
    def f(T):
        out = []
        with T.inference_mode():
            th = threading.Thread(target=lambda: out.append(T.ones(1).is_inference()))
            th.start()
            th.join()
            a = T.tensor([1.0, -2.0, 3.0], dtype=T.float64)
            vals = [(a * a + 1).relu(), a.exp().log(), a @ a, a.sigmoid()]
        return out, vals, T.ones(1).is_inference()

    ref.same(f)


# --- nesting ---
def test_deep_nesting(ref):
    def f(T):
        seen = [T.is_grad_enabled()]
        with T.no_grad():
            seen.append(T.is_grad_enabled())
            with T.enable_grad():
                seen.append(T.is_grad_enabled())
                with T.set_grad_enabled(False):
                    seen.append(T.is_grad_enabled())
                    with T.no_grad():
                        seen.append(T.is_grad_enabled())
                    seen.append(T.is_grad_enabled())
                seen.append(T.is_grad_enabled())
            seen.append(T.is_grad_enabled())
        seen.append(T.is_grad_enabled())
        return seen

    ref.same(f)


def test_same_context_object_reused(ref):
    def f(T):
        ctx = T.no_grad()
        seen = []
        for _ in range(2):
            with ctx:
                seen.append(T.is_grad_enabled())
            seen.append(T.is_grad_enabled())
        return seen

    ref.same(f)


# --- generators ---


def test_no_grad_decorated_generator(ref):
    def f(T):
        @T.no_grad()
        def gen(x):
            for k in range(3):
                received = yield T.is_grad_enabled(), x * k
                assert received is None or received == k

        x = leaf(T)
        seen = []
        for inside, y in gen(x):
            seen.append((inside, T.is_grad_enabled(), flags(y)))
        return seen

    assert ref.same(f) == [(False, True, (False, True, True))] * 3


def test_enable_grad_decorated_generator_send_and_return(ref):
    def f(T):
        @T.enable_grad()
        def gen():
            got = yield T.is_grad_enabled()
            got2 = yield (got, T.is_grad_enabled())
            return got2

        with T.no_grad():
            g = gen()
            a = next(g)
            b = g.send("s1")
            outside = T.is_grad_enabled()
            try:
                g.send("s2")
            except StopIteration as stop:
                ret = stop.value
        return a, b, outside, ret

    assert ref.same(f) == (True, ("s1", True), False, "s2")


# --- threads ---
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "set_grad_enabled"])
def test_thread_starts_with_grad_enabled(ref, mode):
    def f(T):
        seen = {}

        def work():
            x = leaf(T)
            seen["thread"] = (T.is_grad_enabled(), T.is_inference_mode_enabled(), flags(x * 2))
            with T.no_grad():
                seen["thread_nograd"] = T.is_grad_enabled()

        ctx = {"no_grad": T.no_grad, "inference_mode": T.inference_mode,
               "set_grad_enabled": lambda: T.set_grad_enabled(False)}[mode]()
        with ctx:
            th = threading.Thread(target=work)
            th.start()
            th.join()
            seen["main"] = T.is_grad_enabled()
        return seen

    ref.same(f)


def test_thread_mode_change_does_not_leak_to_main(ref):
    def f(T):
        def work():
            T.set_grad_enabled(False)

        th = threading.Thread(target=work)
        th.start()
        th.join()
        return T.is_grad_enabled()

    ref.same(f)


# --- backward inside no_grad ---
def test_backward_inside_no_grad(ref):
    def f(T):
        x = leaf(T)
        y = (x.exp() * x).sum()
        with T.no_grad():
            y.backward()
            g = x.grad
        return flags(g), g

    ref.same(f)


def test_autograd_grad_create_graph_inside_no_grad(ref):
    def f(T):
        x = leaf(T)
        y = (x**3).sum()
        with T.no_grad():
            (g,) = T.autograd.grad(y, x, create_graph=True)
            inside = T.is_grad_enabled()
        (gg,) = T.autograd.grad(g.sum(), x)
        return inside, g.requires_grad, g.grad_fn is not None, g.detach(), gg

    ref.same(f)


def test_grad_mode_inside_backward_hook(ref):
    """Without create_graph the engine runs hooks with grad mode off; with it, on."""

    def f(T):
        seen = []
        x = leaf(T)
        y = x * x
        y.register_hook(lambda g: seen.append(T.is_grad_enabled()))
        y.sum().backward(retain_graph=True)
        T.autograd.grad(y.sum(), x, create_graph=True)
        return seen

    ref.same(f)


def test_autograd_module_reexports(ref):
    ref.same(lambda T: (T.autograd.no_grad is T.no_grad, T.autograd.enable_grad is T.enable_grad,
                        T.autograd.set_grad_enabled is T.set_grad_enabled,
                        T.autograd.inference_mode is T.inference_mode))
