"""Backward hooks against PyTorch: tensor hooks, retain_grad, node pre/post hooks, post-accumulate
hooks (order, replacement, removal, errors), hooks and in-place ops, multi-grad hooks,
``allow_mutation_on_saved_tensors`` and ``queue_callback``.

Each scenario is a function of the framework module ``T``; ``ref`` (tests/conftest.py) runs it
under ndgrad and torch and compares.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ndgrad

V3 = np.array([1.0, 2.0, 3.0])
V4 = np.array([1.0, -2.0, 3.0, 0.5])


def leaf(T, arr=V3):
    return T.tensor(arr, dtype=T.float64, requires_grad=True)


def const(T, arr):
    return T.tensor(arr, dtype=T.float64)


def qcb(T, cb):
    T.autograd.Variable._execution_engine.queue_callback(cb)


# --- order (PyTorch notes, "Backward Hooks execution") ---
def test_non_leaf_order_tensor_hooks_retain_prehooks_node_posthooks(ref):
    def f(T):
        x, w = leaf(T), leaf(T)
        y = x * w
        log = []
        y.grad_fn.register_hook(lambda gi, go: log.append(("post", gi[0].clone(), go[0].clone())))
        y.grad_fn.register_prehook(lambda go: log.append(("pre", go[0].clone())))
        y.retain_grad()  # registered first, still runs after every tensor hook
        y.register_hook(lambda g: log.append(("t1", g.clone())) or g * 2)
        y.register_hook(lambda g: log.append(("t2", g.clone())) or g + 1)
        (y * 3).sum().backward()
        return log, y.grad, x.grad, w.grad

    log = ref.same(f)
    assert [e[0] for e in log[0]] == ["t1", "t2", "pre", "post"]


def test_leaf_order_tensor_hooks_accumulate_post_accumulate(ref):
    def f(T):
        x = leaf(T)
        y = x * 2
        acc = y.grad_fn.next_functions[0][0]
        log = []
        x.register_post_accumulate_grad_hook(lambda t: log.append(("pa", t.grad.clone())))
        acc.register_hook(lambda gi, go: log.append(("node_post", len(gi), len(go))))
        acc.register_prehook(lambda go: log.append(("node_pre", x.grad)))
        x.register_hook(lambda g: log.append(("t", g.clone())) or g * 10)
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        return log, x.grad

    ref.same(f)


def test_hook_order_on_several_outputs_of_one_node(ref):
    def f(T):
        x = leaf(T, V4)
        a, b = x.split(2)
        log = []
        b.register_hook(lambda g: log.append("b1"))
        a.register_hook(lambda g: log.append("a1"))
        b.register_hook(lambda g: log.append("b2"))
        (a * 2 + b * 3).sum().backward()
        return log, x.grad

    ref.same(f)


def test_hooks_returning_none_leave_gradient(ref):
    def f(T):
        x = leaf(T)
        y = x.exp()
        seen = []
        y.register_hook(lambda g: seen.append(g.clone()))
        x.register_hook(lambda g: seen.append(g.clone()))
        y.grad_fn.register_prehook(lambda go: None)
        y.grad_fn.register_hook(lambda gi, go: None)
        y.sum().backward()
        return seen, x.grad

    ref.same(f)


def test_node_post_hook_replaces_and_prehook_seen_by_post(ref):
    def f(T):
        x, w = leaf(T), leaf(T)
        y = x * w
        seen = []
        y.grad_fn.register_prehook(lambda go: (go[0] * 3,))
        y.grad_fn.register_hook(lambda gi, go: (seen.append((gi, go)), (gi[0] * 2, None))[1])
        y.sum().backward()
        return seen, x.grad, w.grad

    ref.same(f)


def test_hooks_with_create_graph_see_differentiable_grads(ref):
    def f(T):
        x = leaf(T)
        y = x * x
        seen = []
        y.register_hook(lambda g: seen.append(g.requires_grad))
        x.register_hook(lambda g: seen.append(g.requires_grad))
        y.retain_grad()
        (y * y).sum().backward(create_graph=True)
        return seen, type(y.grad.grad_fn).__name__, x.grad

    ref.same(f)


# --- leaves: hooks before / after the AccumulateGrad node exists ---
def test_leaf_hook_registered_before_and_after_accumulator_exists(ref):
    def f(T):
        x = leaf(T)
        seen = []
        x.register_hook(lambda g: seen.append("before") or g * 2)
        y = x * 3  # creates the AccumulateGrad node
        x.register_hook(lambda g: seen.append("after") or g + 1)
        y.sum().backward()
        return seen, x.grad

    ref.same(f)


def test_leaf_hook_returned_tensor_is_not_aliased_by_grad(ref):
    def f(T):
        x = leaf(T)
        kept = []

        def hook(g):
            r = g * 2
            kept.append(r)
            return r

        x.register_hook(hook)
        (x * 1).sum().backward()
        first_is_kept = x.grad is kept[0]
        (x * 1).sum().backward()  # accumulates in place into .grad
        return first_is_kept, kept[0], x.grad

    ref.same(f)


def test_hooks_run_on_every_backward_with_retain_graph(ref):
    def f(T):
        x = leaf(T)
        y = x.sin()
        counts = {"y": 0, "x": 0, "pa": 0}

        def bump(k):
            counts[k] += 1

        y.register_hook(lambda g: bump("y"))
        x.register_hook(lambda g: bump("x"))
        x.register_post_accumulate_grad_hook(lambda t: bump("pa"))
        for _ in range(3):
            y.sum().backward(retain_graph=True)
        return counts, x.grad

    ref.same(f)


# --- autograd.grad and inputs= ---
def test_grad_runs_leaf_tensor_hooks_but_no_accumulation(ref):
    def f(T):
        x = leaf(T)
        y = x * x
        log = []
        x.register_hook(lambda g: log.append("t") or g * 10)
        x.register_post_accumulate_grad_hook(lambda t: log.append("pa"))
        (gx,) = T.autograd.grad(y.sum(), x)
        return log, gx, x.grad

    ref.same(f)


def test_grad_capture_of_a_node_that_also_runs_precedes_its_hooks(ref):
    def f(T):
        x, w = leaf(T), leaf(T)
        y = x * w
        z = y * w
        log = []
        w.register_hook(lambda g: log.append("w"))
        y.register_hook(lambda g: log.append("y") or g * 10)
        y.retain_grad()
        y.grad_fn.register_prehook(lambda g: log.append("ypre"))
        x.register_post_accumulate_grad_hook(lambda t: log.append("xpa"))
        r = T.autograd.grad(z.sum(), [x, y])
        return log, r, x.grad, y.grad

    ref.same(f)


def test_grad_of_non_leaf_input_runs_its_hooks_before_capture(ref):
    def f(T):
        x = leaf(T)
        y = x.exp()
        log = []
        y.register_hook(lambda g: log.append("y") or g * 10)
        y.grad_fn.register_prehook(lambda g: log.append("ypre"))
        (gy,) = T.autograd.grad((y * 2).sum(), y)
        return log, gy

    ref.same(f)


def test_backward_inputs_skips_hooks_off_the_path(ref):
    def f(T):
        x, w = leaf(T), leaf(T)
        z = (x * w) * w
        log = []
        w.register_hook(lambda g: log.append("w"))
        w.register_post_accumulate_grad_hook(lambda t: log.append("wpa"))
        x.register_post_accumulate_grad_hook(lambda t: log.append("xpa"))
        z.sum().backward(inputs=[x])
        return log, x.grad, w.grad

    ref.same(f)


# --- removal ---
def test_remove_and_remove_twice(ref):
    def f(T):
        x = leaf(T)
        y = x * 2
        log = []
        h = y.register_hook(lambda g: log.append("y"))
        hn = y.grad_fn.register_prehook(lambda g: log.append("pre"))
        hp = y.grad_fn.register_hook(lambda gi, go: log.append("post"))
        ha = x.register_post_accumulate_grad_hook(lambda t: log.append("pa"))
        hx = x.register_hook(lambda g: log.append("x"))
        y.sum().backward(retain_graph=True)
        for handle in (h, hn, hp, ha, hx):
            handle.remove()
            handle.remove()
        y.sum().backward()
        return log, x.grad

    ref.same(f)


def test_remove_during_backward(ref):
    def f(T):
        x = leaf(T)
        y = x * 2
        z = y * 3
        log = []
        handles = {}

        def first(g):
            log.append("z")
            handles["zsib"].remove()  # same tensor, registered later: PyTorch still runs it
            handles["y"].remove()  # a later node's hook: does not run
            handles["pa"].remove()

        z.register_hook(first)
        handles["zsib"] = z.register_hook(lambda g: log.append("zsib"))
        handles["y"] = y.register_hook(lambda g: log.append("y"))
        handles["pa"] = x.register_post_accumulate_grad_hook(lambda t: log.append("pa"))
        x.register_hook(lambda g: log.append("x"))
        z.sum().backward()
        return log, x.grad

    ref.same(f)


def test_handle_as_context_manager(ref):
    def f(T):
        x = leaf(T)
        y = x * 2
        log = []
        with y.register_hook(lambda g: log.append(1)):
            y.sum().backward(retain_graph=True)
        y.sum().backward()
        return log

    ref.same(f)


# --- errors ---
def test_register_hook_on_tensor_not_requiring_grad(ref):
    ref.raises(lambda T: const(T, V3).register_hook(lambda g: g), RuntimeError,
               "cannot register a hook on a tensor that doesn't require gradient")


def test_post_accumulate_hook_errors(ref):
    ref.raises(lambda T: (leaf(T) * 2).register_post_accumulate_grad_hook(lambda t: None),
               RuntimeError, "post accumulate grad hooks cannot be registered on non-leaf tensors")
    ref.raises(lambda T: const(T, V3).register_post_accumulate_grad_hook(lambda t: None),
               RuntimeError, "cannot register a hook on a tensor that doesn't require gradient")


def test_retain_grad_on_tensor_not_requiring_grad(ref):
    ref.raises(lambda T: const(T, V3).retain_grad(), RuntimeError,
               "can't retain_grad on Tensor that has requires_grad=False")


def _shrink(g):
    return g[:2]


def _to_float(g):
    return g.float()


def _to_int(g):
    return 3


class _CallableHook:
    def __call__(self, g):
        return g[:1]


@pytest.mark.parametrize("on_leaf", [False, True])
@pytest.mark.parametrize("hook,exc", [(_shrink, RuntimeError), (_to_float, RuntimeError),
                                      (_to_int, TypeError), (_CallableHook(), RuntimeError)])
def test_tensor_hook_bad_replacement(ref, on_leaf, hook, exc):
    def f(T):
        x = leaf(T)
        y = x * 2
        (x if on_leaf else y).register_hook(hook)
        y.sum().backward()

    ref.raises(f, exc)


@pytest.mark.parametrize("ret,exc", [
    (lambda go: (go[0], go[0]), RuntimeError),  # wrong count
    (lambda go: go[0], TypeError),  # not a tuple
    (lambda go: [go[0]], TypeError),  # a list is refused too
    (lambda go: (3,), TypeError),
    (lambda go: (go[0][:2],), RuntimeError),
    (lambda go: (go[0].float(),), RuntimeError),
])
def test_node_prehook_bad_result(ref, ret, exc):
    def f(T):
        y = leaf(T) * 2
        y.grad_fn.register_prehook(ret)
        y.sum().backward()

    ref.raises(f, exc)


@pytest.mark.parametrize("ret,exc", [
    (lambda gi, go: (gi[0],), RuntimeError),
    (lambda gi, go: 5, TypeError),
    (lambda gi, go: [gi[0], gi[1]], TypeError),
    (lambda gi, go: (gi[0], 3), TypeError),
    (lambda gi, go: (gi[0][:2], None), RuntimeError),
    (lambda gi, go: (gi[0].float(), None), RuntimeError),
])
def test_node_posthook_bad_result(ref, ret, exc):
    def f(T):
        y = leaf(T) * leaf(T)
        y.grad_fn.register_hook(ret)
        y.sum().backward()

    ref.raises(f, exc)


def test_posthook_cannot_fill_a_none_gradient(ref):
    def f(T):
        y = leaf(T) * 2  # the scalar's slot gets None
        y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
        y.sum().backward()

    ref.raises(f, RuntimeError, "can't replace a None gradient with a non-None value")


def test_prehook_may_drop_a_gradient(ref):
    def f(T):
        x = leaf(T)
        y = x * 2
        y.grad_fn.register_prehook(lambda go: (None,))
        y.sum().backward()
        return x.grad

    assert ref.same(f) is None


# --- hooks and in-place ---
def test_tensor_hooks_before_and_after_inplace(ref):
    def f(T):
        x = leaf(T)
        b = x * 2
        log = []
        b.register_hook(lambda g: log.append(("before", g.clone())))
        b.retain_grad()
        b.mul_(3)
        b.register_hook(lambda g: log.append(("after", g.clone())))
        (b * const(T, V3)).sum().backward()
        return log, b.grad, x.grad

    ref.same(f)


def test_retain_grad_of_base_follows_inplace_on_its_view(ref):
    def f(T):
        x = leaf(T, V4)
        b = x * 2
        v = b[:2]
        b.retain_grad()
        v.mul_(3)
        (b * const(T, [5.0, 7.0, 1.0, 1.0])).sum().backward()
        return b.grad, x.grad

    ref.same(f)


def test_retain_grad_of_view_follows_inplace_on_its_base(ref):
    def f(T):
        x = leaf(T, V4)
        b = x * 2
        v = b[1:3]
        v.retain_grad()
        b.mul_(3)
        (v * const(T, [5.0, 7.0])).sum().backward()
        return v.grad, x.grad

    ref.same(f)


def test_retain_grad_of_view_modified_in_place(ref):
    def f(T):
        x = leaf(T, V4)
        b = x * 2
        v = b[:2]
        v.retain_grad()
        v.mul_(5)
        (v * const(T, [3.0, 4.0])).sum().backward()
        return v.grad, x.grad

    ref.same(f)


# --- register_multi_grad_hook ---
def _sums(gs):
    return ["none" if g is None else g.sum().item() for g in gs]


def test_multi_grad_hook_all(ref):
    def f(T):
        x, w = leaf(T), leaf(T)
        a, b = x * 2, w * 3
        seen = []
        h = T.autograd.graph.register_multi_grad_hook((a, b), lambda gs: seen.append(_sums(gs)))
        a.sum().backward(retain_graph=True)
        (a.sum() + b.sum()).backward(retain_graph=True)
        b.sum().backward(retain_graph=True)
        T.autograd.grad(a.sum() + b.sum(), [x], retain_graph=True)
        T.autograd.grad(a.sum() + b.sum(), [a], retain_graph=True)
        T.autograd.grad(a.sum() + 2 * b.sum(), [a, b], retain_graph=True)
        (a.sum() + b.sum()).backward(inputs=[w], retain_graph=True)
        (a.sum() + b.sum()).backward(inputs=[a], retain_graph=True)
        h.remove()
        (a.sum() * b.sum()).backward()
        return seen

    assert len(ref.same(f)) == 8


def test_multi_grad_hook_all_with_leaves_and_unreached_tensors(ref):
    def f(T):
        x, w = leaf(T), leaf(T)
        a = x * 2
        d = a.detach().requires_grad_()
        seen = []
        T.autograd.graph.register_multi_grad_hook([a, x, d], lambda gs: seen.append(_sums(gs)))
        a.sum().backward(retain_graph=True)
        (a.sum() + 2 * x.sum()).backward(retain_graph=True)
        a.sum().backward(inputs=[x], retain_graph=True)
        (a.sum() + w.sum()).backward(inputs=[w], retain_graph=True)  # none of them: no call
        return seen

    ref.same(f)


def test_multi_grad_hook_order_and_modified_grads(ref):
    def f(T):
        x = leaf(T)
        a, b = x * 2, x * 3
        log = []
        a.register_hook(lambda g: log.append("a_before"))
        b.register_hook(lambda g: g * 100)
        T.autograd.graph.register_multi_grad_hook([a, b], lambda gs: log.append(_sums(gs)))
        a.register_hook(lambda g: log.append("a_after") or g * 7)
        b.register_hook(lambda g: log.append("b_after"))
        (a.sum() + b.sum()).backward()
        return log, x.grad

    ref.same(f)


def test_multi_grad_hook_any(ref):
    def f(T):
        x, w = leaf(T), leaf(T)
        a, b = x * 2, w * 3
        seen = []
        h = T.autograd.graph.register_multi_grad_hook(
            [a, b, x, const(T, V3)], lambda g: seen.append(g.sum().item()), mode="any")
        (a.sum() + 5 * b.sum()).backward(retain_graph=True)
        (3 * b.sum()).backward(retain_graph=True)
        (7 * x.sum()).backward(retain_graph=True)
        T.autograd.grad(a.sum(), [x], retain_graph=True)
        with h:
            pass  # removed on exit
        (a.sum() * b.sum()).backward()
        return seen

    ref.same(f)


def test_multi_grad_hook_errors(ref):
    ref.raises(lambda T: T.autograd.graph.register_multi_grad_hook([leaf(T)], print, mode="x"),
               ValueError, "Expects mode to be one of ('all', 'any') but got x")
    ref.raises(lambda T: T.autograd.graph.register_multi_grad_hook([leaf(T), const(T, V3)], print),
               AssertionError, "Expected gradient function to be set")

    def leaf_under_grad(T):
        x = leaf(T)
        T.autograd.graph.register_multi_grad_hook([x * 2, x], print)
        T.autograd.grad((x * 2).sum() + x.sum(), [x])

    ref.raises(leaf_under_grad, RuntimeError)


def test_will_execute_node_outside_backward():
    from ndgrad.autograd.engine import will_execute_node

    with pytest.raises(RuntimeError, match="should only be called during the backward pass"):
        will_execute_node((leaf(ndgrad) * 2).grad_fn)


def test_multi_grad_hook_in_threads():
    x = leaf(ndgrad)
    a, b = x * 2, x * 3
    seen, lock = [], threading.Lock()

    def fn(gs):
        with lock:
            seen.append(_sums(gs))

    ndgrad.autograd.graph.register_multi_grad_hook([a, b], fn)
    errors = []

    def work(k):
        try:
            for _ in range(20):
                (a.sum() * k + b.sum()).backward(retain_graph=True)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in (1.0, 2.0, 3.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(seen) == 60
    assert sorted({tuple(s) for s in seen}) == [(3.0, 3.0), (6.0, 3.0), (9.0, 3.0)]


# --- allow_mutation_on_saved_tensors ---
@pytest.mark.parametrize("op", ["mul_", "zero_", "copy_", "fill_", "add_", "sin_", "view0"])
def test_allow_mutation_on_saved_tensors(ref, op):
    def f(T):
        x = leaf(T)
        with T.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
            y = x.clone()
            z = (y * y).sum()
            if op == "copy_":
                y.copy_(T.ones(3, dtype=T.float64))
            elif op == "fill_":
                y.fill_(3.0)
            elif op == "add_":
                y.add_(1.0)
            elif op == "mul_":
                y.mul_(2.0)
            elif op == "view0":  # a view at offset 0: PyTorch recognises it as the saved tensor
                y[:2].mul_(3)
            else:
                getattr(y, op)()
            z.backward()
            return x.grad, y.detach(), hasattr(ctx, "clear")

    ref.same(f)


def test_allow_mutation_any_view_of_saved_tensor():
    """Any alias written (here a view at an offset) copies the saved tensor first. PyTorch only
    recognises aliases that start at the same address; ndgrad tracks shared storage."""
    x = leaf(ndgrad)
    with ndgrad.autograd.graph.allow_mutation_on_saved_tensors():
        y = x.clone()
        z = (y * y).sum()
        y[1:].mul_(3)
        y[0] = 5.0
        z.backward()
    np.testing.assert_allclose(x.grad._data, 2 * V3)


def test_allow_mutation_saved_output_and_retain_graph(ref):
    def f(T):
        x = leaf(T)
        with T.autograd.graph.allow_mutation_on_saved_tensors():
            e = x.clone().exp()  # exp saves its result
            w = e.sin()
            e.mul_(2)
            (w.sum() + e.sum()).backward(retain_graph=True)
            e.add_(1)
            w.sum().backward()
            return x.grad

    ref.same(f)


def test_allow_mutation_errors(ref):
    def outside(T):
        x = leaf(T)
        with T.autograd.graph.allow_mutation_on_saved_tensors():
            z = (x.clone() * x).sum()
        z.backward()

    ref.raises(outside, AssertionError)

    def other_context(T):
        x = leaf(T)
        with T.autograd.graph.allow_mutation_on_saved_tensors():
            z = (x.clone() * x).sum()
        with T.autograd.graph.allow_mutation_on_saved_tensors():
            z.backward()

    ref.raises(other_context, AssertionError)

    def nested(T):
        with T.autograd.graph.allow_mutation_on_saved_tensors():
            with T.autograd.graph.allow_mutation_on_saved_tensors():
                pass

    ref.raises(nested, RuntimeError, "allow_mutation_on_saved_tensors contexts cannot be nested")

    def without_context(T):
        x = leaf(T)
        y = x.clone()
        z = (y * y).sum()
        y.mul_(2)
        z.backward()

    ref.raises(without_context, RuntimeError)


def test_allow_mutation_leaves_no_mode_behind():
    from ndgrad._ops import registry

    n = len(registry._modes)
    with ndgrad.autograd.graph.allow_mutation_on_saved_tensors():
        assert len(registry._modes) == n + 1
    assert len(registry._modes) == n
    assert not ndgrad.autograd.saved.hooks_in_use


# --- queue_callback ---
def test_queue_callback_order_nesting_and_grad_mode(ref):
    def f(T):
        x = leaf(T)
        y = x * 2
        log = []

        def cb():
            log.append(("cb", T.is_grad_enabled(), x.grad is not None))
            qcb(T, lambda: log.append("queued by cb"))

        y.register_hook(lambda g: qcb(T, cb))
        y.register_hook(lambda g: qcb(T, lambda: log.append("second")))
        y.sum().backward(retain_graph=True)
        y.sum().backward(create_graph=True)
        return log

    ref.same(f)


def test_queue_callback_outside_backward(ref):
    ref.raises(lambda T: qcb(T, lambda: None), RuntimeError,
               "Final callbacks can only be installed during backward pass.")


def test_queue_callback_error_keeps_grads(ref):
    def f(T):
        x = leaf(T)
        y = x * 2

        def boom():
            raise ValueError("boom")

        y.register_hook(lambda g: qcb(T, boom))
        with pytest.raises(ValueError, match="boom"):
            y.sum().backward()
        return x.grad

    ref.same(f)


def test_queue_callback_via_autograd_module():
    x = leaf(ndgrad)
    log = []
    x.register_hook(lambda g: ndgrad.autograd.queue_callback(lambda: log.append(1)))
    (x * 2).sum().backward()
    assert log == [1]
    assert isinstance(x, ndgrad.autograd.Variable)
