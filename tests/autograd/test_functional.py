"""``autograd.functional``: values, nesting, v checks, strict mode and create_graph vs PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad

_rng = np.random.default_rng(0)
A = _rng.standard_normal((3, 4))
B = _rng.standard_normal(4)
M = _rng.standard_normal((4, 2))
S = _rng.standard_normal(())


def t(T, a, requires_grad=False):
    return T.tensor(np.array(a), dtype=T.float64, requires_grad=requires_grad)


# Functions of the framework module T, then of its tensors.
FUNCS = {
    "elementwise": (lambda T: lambda x: T.sin(x) * x, lambda T: t(T, A)),
    "matmul": (lambda T: lambda x: x @ t(T, M), lambda T: t(T, A)),
    "scalar_out": (lambda T: lambda x: (x.exp() * x).sum(), lambda T: t(T, B)),
    "zero_dim_in": (lambda T: lambda x: x * t(T, B), lambda T: t(T, S)),
    "multi": (lambda T: lambda x, y: (x @ y, (y * y).sum(), T.tanh(x)),
              lambda T: (t(T, A), t(T, B))),
    "independent": (lambda T: lambda x, y: (x * 2, t(T, B) + 1), lambda T: (t(T, A), t(T, B))),
    "tuple_of_one": (lambda T: lambda x: (x.cos(),), lambda T: (t(T, B),)),
}


def _jac(T, name, **kw):
    fn, inp = FUNCS[name]
    return T.autograd.functional.jacobian(fn(T), inp(T), **kw)


@pytest.mark.parametrize("name", list(FUNCS))
@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian(ref, name, vectorize):
    got = ref.same(lambda T: _jac(T, name, vectorize=vectorize))
    leaves = got if isinstance(got, ndgrad.Tensor) else [x for r in got for x in
                                                          (r if isinstance(r, tuple) else (r,))]
    assert all(not x.requires_grad for x in leaves)  # detached without create_graph


@pytest.mark.parametrize("name", ["elementwise", "matmul", "multi"])
def test_jacobian_forward_mode(ref, name):
    ref.same(lambda T: _jac(T, name, vectorize=True, strategy="forward-mode"))


def test_jacobian_forward_mode_errors(ref):
    ref.raises(lambda T: _jac(T, "matmul", strategy="forward-mode"), NotImplementedError)
    ref.raises(lambda T: _jac(T, "matmul", strategy="forward-mode", create_graph=True),
               NotImplementedError)
    ref.raises(lambda T: _jac(T, "matmul", strategy="forward-mode", strict=True), RuntimeError)
    ref.raises(lambda T: _jac(T, "matmul", strategy="sideways"), AssertionError)


def test_jacobian_create_graph_then_backward(ref):
    def f(T):
        x = t(T, A, requires_grad=True)
        j = T.autograd.functional.jacobian(lambda z: z * z.sum(), x, create_graph=True)
        assert j.requires_grad
        (j * j).sum().backward()
        return j, x.grad

    ref.same(f)


def test_jacobian_strict_errors(ref):
    ref.raises(lambda T: _jac(T, "independent", strict=True), RuntimeError,
               "Output 1 of the user-provided function does not require gradients. The outputs "
               "must be computed in a differentiable manner from the input when running in "
               "strict mode.")
    ref.raises(lambda T: _jac(T, "multi", strict=True), RuntimeError,
               "Output 1 of the user-provided function is independent of input 0. This is not "
               "allowed in strict mode.")
    ref.raises(lambda T: _jac(T, "matmul", strict=True, vectorize=True), RuntimeError)
    ref.raises(lambda T: T.autograd.functional.jacobian(
        lambda x: x * 2, t(T, B), strict=True, create_graph=True), RuntimeError)


def test_bad_inputs(ref):
    ref.raises(lambda T: T.autograd.functional.jacobian(lambda x: x, [t(T, B)]), TypeError)
    ref.raises(lambda T: T.autograd.functional.vjp(lambda x: x, (t(T, B), 1)), TypeError)
    ref.raises(lambda T: T.autograd.functional.vjp(lambda x: 3, t(T, B)), TypeError)


# --- vjp / jvp ---


@pytest.mark.parametrize("name", list(FUNCS))
@pytest.mark.parametrize("which", ["vjp", "jvp"])
def test_vjp_jvp(ref, name, which):
    def f(T):
        fn, inp = FUNCS[name]
        fn, inp = fn(T), inp(T)
        if which == "vjp":
            outs = fn(*inp) if isinstance(inp, tuple) else fn(inp)
            vs = tuple(t(T, np.linspace(-1, 1, o.numel()).reshape(tuple(o.shape)))
                       for o in (outs if isinstance(outs, tuple) else (outs,)))
            v = vs if isinstance(outs, tuple) else vs[0]
        else:
            ins = inp if isinstance(inp, tuple) else (inp,)
            vs = tuple(t(T, np.linspace(-1, 2, i.numel()).reshape(tuple(i.shape))) for i in ins)
            v = vs if isinstance(inp, tuple) else vs[0]
        return getattr(T.autograd.functional, which)(fn, inp, v)

    got = ref.same(f)
    assert not any(x.requires_grad for part in got
                   for x in (part if isinstance(part, tuple) else (part,)))


def test_v_none(ref):
    fn = FUNCS["scalar_out"][0]
    ref.same(lambda T: T.autograd.functional.vjp(fn(T), t(T, B)))
    ref.same(lambda T: T.autograd.functional.jvp(lambda x: x * t(T, B), t(T, [2.0])))
    ref.raises(lambda T: T.autograd.functional.vjp(lambda x: x * 2, t(T, B)), RuntimeError,
               "The vector v can only be None if the user-provided function returns a single "
               "Tensor with a single element.")
    for name in ("jvp", "hvp", "vhp"):
        ref.raises(lambda T: getattr(T.autograd.functional, name)(lambda x: x.sum(), t(T, B)),
                   RuntimeError, "The vector v can only be None if the input to the "
                   "user-provided function is a single Tensor with a single element.")


def test_v_shape_errors(ref):
    ref.raises(lambda T: T.autograd.functional.vjp(lambda x: x * 2, t(T, B), t(T, A)),
               RuntimeError,
               "v has invalid size: should be torch.Size([4]) but got torch.Size([3, 4]).")
    ref.raises(lambda T: T.autograd.functional.jvp(lambda x, y: x, (t(T, A), t(T, B)),
                                                   (t(T, A), t(T, A))), RuntimeError,
               "Entry 1 in v has invalid size: should be torch.Size([4]) but got "
               "torch.Size([3, 4]).")
    ref.raises(lambda T: T.autograd.functional.vjp(lambda x: (x, x), t(T, B), (t(T, B),)),
               RuntimeError, "v is a tuple of invalid length: should be 2 but got 1.")
    ref.raises(lambda T: T.autograd.functional.vjp(lambda x: x, t(T, B), (t(T, B), t(T, B))),
               RuntimeError, "The given v should contain a single Tensor.")


def test_vjp_jvp_strict(ref):
    fn = FUNCS["independent"][0]
    for which in ("vjp", "jvp"):
        ref.raises(lambda T: getattr(T.autograd.functional, which)(
            fn(T), (t(T, A), t(T, B)), (t(T, A), t(T, B)), strict=True), RuntimeError)
    ref.raises(lambda T: T.autograd.functional.vjp(
        lambda x, y: x * 2, (t(T, B), t(T, B)), t(T, B), strict=True), RuntimeError,
        "The output of the user-provided function is independent of input 1. This is not "
        "allowed in strict mode.")
    ref.raises(lambda T: T.autograd.functional.jvp(
        lambda x, y: x * 2, (t(T, B), t(T, B)), (t(T, B), t(T, B)), strict=True), RuntimeError,
        "The output of the user-provided function is independent of input 1. This is not "
        "allowed in strict mode.")
    ref.same(lambda T: T.autograd.functional.jvp(  # linear in x: strict has nothing to object to
        lambda x: x * 2, t(T, B), t(T, B), strict=True))
    ref.raises(lambda T: T.autograd.functional.vjp(
        lambda x: x * 2, t(T, B), t(T, B), strict=True, create_graph=True), RuntimeError,
        "The jacobian of the user-provided function is independent of input 0. This is not "
        "allowed in strict mode when create_graph=True.")


@pytest.mark.parametrize("which", ["vjp", "jvp", "vhp", "hvp"])
def test_products_create_graph(ref, which):
    def f(T):
        x = t(T, B, requires_grad=True)
        out, res = getattr(T.autograd.functional, which)(
            lambda z: (z ** 3).sum() * z.sum() if which in ("vhp", "hvp") else z ** 3 * z.sum(),
            x, t(T, np.arange(4.0)), create_graph=True)
        assert out.requires_grad and res.requires_grad
        (res.sin().sum() + out.sum()).backward()
        return out, res, x.grad

    ref.same(f)


# --- hessian / hvp / vhp ---


def _scalar2(T):
    return lambda x, y: (x.sin() @ y) * (y * y).sum() + (x ** 2).sum()


@pytest.mark.parametrize("vectorize", [False, True])
def test_hessian_two_inputs(ref, vectorize):
    ref.same(lambda T: T.autograd.functional.hessian(
        _scalar2(T), (t(T, A[0]), t(T, B)), vectorize=vectorize))


def test_hessian_forms(ref):
    hess = lambda T, *a, **k: T.autograd.functional.hessian(*a, **k)  # noqa: E731
    ref.same(lambda T: hess(T, lambda x: (x.exp() * x).sum(), t(T, A)))
    ref.same(lambda T: hess(T, lambda x: (x ** 3).sum().reshape(1, 1), t(T, B)))
    ref.same(lambda T: hess(T, lambda x, y: (x * 2).sum(), (t(T, B), t(T, S))))
    ref.same(lambda T: hess(T, lambda x: (x.tanh() * x).sum(), t(T, B), vectorize=True,
                            outer_jacobian_strategy="forward-mode"))


def test_hessian_create_graph_then_backward(ref):
    def f(T):
        x, y = t(T, A[0], requires_grad=True), t(T, B, requires_grad=True)
        h = T.autograd.functional.hessian(_scalar2(T), (x, y), create_graph=True)
        assert h[0][1].requires_grad
        sum(hij.sum() for row in h for hij in row).backward()
        return h, x.grad, y.grad

    ref.same(f)


def test_hessian_errors(ref):
    hess = lambda T, *a, **k: T.autograd.functional.hessian(*a, **k)  # noqa: E731
    ref.raises(lambda T: hess(T, lambda x: x * 2, t(T, B)), RuntimeError,
               "The Tensor returned by the function given to hessian should contain a single "
               "element")
    ref.raises(lambda T: hess(T, lambda x: (x.sum(),), t(T, B)), RuntimeError,
               "The function given to hessian should return a single Tensor")
    ref.raises(lambda T: hess(T, lambda x: (x * 2).sum(), t(T, B), strict=True), RuntimeError)
    ref.raises(lambda T: hess(T, lambda x, y: (x * x).sum(), (t(T, B), t(T, B)), strict=True),
               RuntimeError)
    ref.raises(lambda T: hess(T, lambda x: (x * x).sum(), t(T, B), outer_jacobian_strategy="x"),
               AssertionError)


@pytest.mark.parametrize("which", ["hvp", "vhp"])
def test_hvp_vhp(ref, which):
    ref.same(lambda T: getattr(T.autograd.functional, which)(
        _scalar2(T), (t(T, A[0]), t(T, B)), (t(T, np.ones(4)), t(T, np.arange(4.0)))))
    ref.same(lambda T: getattr(T.autograd.functional, which)(
        lambda x: (x ** 3).sum(), t(T, B), t(T, np.arange(4.0))))
    ref.same(lambda T: getattr(T.autograd.functional, which)(
        lambda x: x ** 3, t(T, [1.5])))
    # Independent input: zeros when not strict, PyTorch's error when strict.
    ref.same(lambda T: getattr(T.autograd.functional, which)(
        lambda x, y: (x ** 3).sum(), (t(T, B), t(T, A)), (t(T, B), t(T, A))))
    ref.raises(lambda T: getattr(T.autograd.functional, which)(
        lambda x, y: (x ** 3).sum(), (t(T, B), t(T, A)), (t(T, B), t(T, A)), strict=True),
        RuntimeError)
    ref.raises(lambda T: getattr(T.autograd.functional, which)(
        lambda x: (x * 2).sum(), t(T, B), t(T, B), strict=True), RuntimeError)
    ref.raises(lambda T: getattr(T.autograd.functional, which)(
        lambda x: x * 2, t(T, B), t(T, B)), RuntimeError)
    ref.raises(lambda T: getattr(T.autograd.functional, which)(
        lambda x: (x.sum(), x.sum()), t(T, B), t(T, B)), RuntimeError)


def test_reachable_after_import():
    import ndgrad.autograd.functional as mod

    assert ndgrad.autograd.functional is mod
    assert set(mod.__all__) == {"vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"}
