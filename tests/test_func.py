"""``ndgrad.func`` against ``torch.func``: values, nesting, errors."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd
from ndgrad import func as nf

torch = pytest.importorskip("torch")
tf = torch.func


def _pair(a, requires_grad=False):
    a = np.asarray(a, dtype=np.float64)
    return (torch.tensor(a, requires_grad=requires_grad),
            nd.tensor(a, requires_grad=requires_grad))


def _close(n, t, tol=1e-10):
    if isinstance(t, (tuple, list)):
        assert len(n) == len(t)
        for a, b in zip(n, t):
            _close(a, b, tol)
        return
    if isinstance(t, dict):
        assert set(n) == set(t)
        for k in t:
            _close(n[k], t[k], tol)
        return
    np.testing.assert_allclose(n.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def f3(lib):
    return lambda x, y: (lib.sin(x) * y ** 2).sum()


def test_grad_argnums_has_aux_and_value():
    (tx, nx), (ty, ny) = _pair(np.linspace(0, 1, 4)), _pair(np.linspace(1, 2, 4))
    _close(nf.grad(f3(nd))(nx, ny), tf.grad(f3(torch))(tx, ty))
    _close(nf.grad(f3(nd), argnums=(0, 1))(nx, ny), tf.grad(f3(torch), argnums=(0, 1))(tx, ty))
    g, (v, aux) = nf.grad_and_value(lambda x: ((x ** 3).sum(), x * 2), has_aux=True)(nx)
    tg, (tv, taux) = tf.grad_and_value(lambda x: ((x ** 3).sum(), x * 2), has_aux=True)(tx)
    _close([g, v, aux], [tg, tv, taux])
    assert not g.requires_grad and not v.requires_grad


def test_nested_grad_and_grad_through_backward():
    t, n = _pair(2.0)
    _close(nf.grad(nf.grad(lambda x: x ** 4))(n), tf.grad(tf.grad(lambda x: x ** 4))(t))
    _close(nf.grad(nf.grad(nf.grad(lambda x: x.sin())))(n),
           tf.grad(tf.grad(tf.grad(lambda x: x.sin())))(t))
    (tr, nr) = _pair(np.array([1.0, 2.0]), requires_grad=True)
    nf.grad(lambda x: (x ** 3).sum())(nr).sum().backward()
    tf.grad(lambda x: (x ** 3).sum())(tr).sum().backward()
    _close(nr.grad, tr.grad)


def test_grad_over_a_dict_of_parameters_with_functional_call():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    nm = nd.nn.Sequential(nd.nn.Linear(3, 4), nd.nn.Tanh(), nd.nn.Linear(4, 1)).double()
    nm.load_state_dict({k: nd.from_numpy(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    tx, nx = _pair(np.random.default_rng(0).standard_normal((5, 3)))
    tp = {k: v.detach() for k, v in tm.named_parameters()}
    np_ = {k: v.detach() for k, v in nm.named_parameters()}

    def loss(lib, mod):
        return lambda p, x: lib.func.functional_call(mod, p, (x,)).pow(2).mean()
    _close(nf.grad(loss(nd, nm))(np_, nx), tf.grad(loss(torch, tm))(tp, tx))
    # the module keeps its own parameters afterwards
    assert all(p.requires_grad for p in nm.parameters())


def test_vjp_jvp_jacobians_hessian():
    def fn(lib):
        return lambda x: lib.stack([x[0] * x[1], x[1].exp(), x.sum() ** 2])
    tx, nx = _pair(np.array([0.5, -1.0]))
    tout, tfn = tf.vjp(fn(torch), tx)
    nout, nfn = nf.vjp(fn(nd), nx)
    _close(nout, tout)
    tct, nct = _pair(np.array([1.0, 2.0, 3.0]))
    _close(nfn(nct), tfn(tct))
    tv, nv = _pair(np.array([0.3, 0.7]))
    _close(nf.jvp(fn(nd), (nx,), (nv,)), tf.jvp(fn(torch), (tx,), (tv,)))
    _close(nf.jacrev(fn(nd))(nx), tf.jacrev(fn(torch))(tx))
    _close(nf.jacfwd(fn(nd))(nx), tf.jacfwd(fn(torch))(tx))
    h = lambda lib: lambda x: (x[0] ** 2 * x[1].sin()).sum()
    _close(nf.hessian(h(nd))(nx), tf.hessian(h(torch))(tx))


def test_vmap_dims_pytrees_and_randomness():
    ta, na = _pair(np.arange(12.0).reshape(3, 4))
    tb, nb = _pair(np.arange(4.0))
    _close(nf.vmap(lambda a, b: (a * b).sum(), in_dims=(0, None))(na, nb),
           tf.vmap(lambda a, b: (a * b).sum(), in_dims=(0, None))(ta, tb))
    _close(nf.vmap(lambda a: a.sum(), in_dims=1, out_dims=0)(na),
           tf.vmap(lambda a: a.sum(), in_dims=1, out_dims=0)(ta))
    _close(nf.vmap(lambda a: (a * 2, a.sum()), out_dims=(1, 0))(na),
           tf.vmap(lambda a: (a * 2, a.sum()), out_dims=(1, 0))(ta))
    _close(nf.vmap(lambda d: d["x"] + d["y"])({"x": na, "y": na}),
           tf.vmap(lambda d: d["x"] + d["y"])({"x": ta, "y": ta}))
    # per-sample gradients, the classic use
    _close(nf.vmap(nf.grad(lambda r: (r ** 3).sum()))(na),
           tf.vmap(tf.grad(lambda r: (r ** 3).sum()))(ta))
    same = nf.vmap(lambda a: nd.rand(3) + a * 0, randomness="same")(nd.zeros(4, 1))
    assert np.allclose(same.numpy(), same.numpy()[0])
    different = nf.vmap(lambda a: nd.rand(3) + a * 0, randomness="different")(nd.zeros(4, 1))
    assert not np.allclose(different.numpy(), different.numpy()[0])


def test_errors_match_pytorch():
    cases = [
        (lambda lib: lib.func.grad(lambda x: x * 2)(lib.ones(2)), RuntimeError),
        (lambda lib: lib.func.grad(lambda x: [x.sum()])(lib.ones(2)), RuntimeError),
        (lambda lib: lib.func.vmap(lambda x, y: x + y)(lib.ones(2, 3), lib.ones(3, 3)), ValueError),
        (lambda lib: lib.func.vmap(lambda x: x)(lib.ones(())), ValueError),
        (lambda lib: lib.func.functional_call(lib.nn.Linear(2, 2), {"weight": lib.zeros(2, 2),
                                              "foo": lib.ones(1)}, (lib.ones(2),), strict=True),
         RuntimeError),
        (lambda lib: lib.func.functional_call(lib.nn.Linear(2, 2), ({"weight": lib.zeros(2, 2)},
                                              {"weight": lib.ones(2, 2)}), (lib.ones(2),)),
         ValueError),
    ]
    for call, kind in cases:
        with pytest.raises(kind) as want:
            call(torch)
        with pytest.raises(kind) as got:
            call(nd)
        assert str(got.value) == str(want.value)


def test_top_level_vmap_is_func_vmap():
    """``torch.vmap`` is ``torch.func.vmap``."""
    assert nd.vmap is nf.vmap
    assert nd.vmap(lambda a: a * 2)(nd.ones(2, 3)).tolist() == [[2.0] * 3] * 2
