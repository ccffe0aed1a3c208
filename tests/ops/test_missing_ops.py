"""Ops added for issue 19 that the generic table tests cannot fully cover: torch as the oracle for
values, gradients and errors where the generic samples stop (ties, NaNs, sign conventions of
singular vectors, complex views, warnings, in-place forms and in-place views)."""

import warnings

import numpy as np
import pytest

import ndgrad as nd

torch = pytest.importorskip("torch")


def _both(fn, *arrays, grad=True):
    """Run ``fn(module, *tensors)`` under ndgrad and torch; returns (outs, grads) of each."""
    res = []
    for m in (nd, torch):
        ts = [m.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
        out = fn(m, *ts)
        outs = out if isinstance(out, tuple) else (out,)
        diff = [o for o in outs if o.requires_grad]
        if diff:
            rng = np.random.default_rng(7)
            m.autograd.backward(diff, [m.tensor(rng.standard_normal(tuple(o.shape))) for o in diff])
        res.append(([o.detach().numpy() for o in outs],
                    [None if t.grad is None else t.grad.numpy() for t in ts]))
    return res


def _close(fn, *arrays, grad=True, **tol):
    (go, gg), (eo, eg) = _both(fn, *arrays, grad=grad)
    for a, b in zip(go, eo, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, equal_nan=True, **(tol or {"rtol": 1e-10, "atol": 1e-12}))
    for a, b in zip(gg, eg, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, equal_nan=True, **(tol or {"rtol": 1e-8, "atol": 1e-10}))


def _same_error(fn):
    with pytest.raises(Exception) as expected:
        fn(torch)
    with pytest.raises(type(expected.value)) as got:
        fn(nd)
    assert str(got.value) == str(expected.value)


# --- cumulative extremes: ties and NaN ---
@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_ties_nan(name):
    x = np.array([[1.0, 3.0, 1.0, 3.0, 0.0], [2.0, np.nan, 1.0, np.nan, 5.0]])
    _close(lambda m, t: getattr(m, name)(t, 1), x)
    _close(lambda m, t: getattr(t, name)(0), x[:, ::-1].copy())
    r = getattr(nd, name)(nd.tensor(x), -1)
    assert type(r).__name__ == name and r.values is r[0] and r.indices is r[1]
    assert r.indices.dtype == nd.int64


def test_logcumsumexp_extremes():
    x = np.array([[-1000.0, 0.0, 1000.0], [-np.inf, -np.inf, 3.0]])
    _close(lambda m, t: m.logcumsumexp(t, 1), x[:1])
    _close(lambda m, t: m.logcumsumexp(t, 1), x, grad=False)
    _same_error(lambda m: m.logcumsumexp(m.tensor([1, 2]), 0))


# --- special functions ---
def test_special_functions():
    x = np.array([0.3, 1.0, 2.5, 7.0, -0.5])
    for f in (lambda m, t: m.lgamma(t), lambda m, t: m.digamma(t), lambda m, t: m.polygamma(2, t),
              lambda m, t: m.special.gammaln(t), lambda m, t: t.polygamma(1)):
        _close(f, x, rtol=1e-9, atol=1e-9)
    _close(lambda m, t: m.erfinv(t), np.array([-0.99, -0.2, 0.0, 0.5, 0.9]), rtol=1e-9, atol=1e-9)
    _close(lambda m, t: m.lgamma(t), np.array([0.0, -1.0, -2.5]), grad=False)
    _close(lambda m, t: m.erfinv(t), np.array([-1.0, 1.0, 1.5]), grad=False)
    assert nd.lgamma(nd.tensor([1, 2, 3])).dtype == nd.float32
    assert nd.digamma(nd.tensor([1.0], dtype=nd.float32)).dtype == nd.float32


@pytest.mark.parametrize("name", [
    "sin_", "cos_", "tan_", "sinh_", "cosh_", "asin_", "acos_", "atan_", "log1p_", "expm1_", "rsqrt_",
    "reciprocal_", "floor_", "ceil_", "round_", "trunc_", "frac_", "sign_", "abs_", "neg_", "square_",
    "lgamma_", "digamma_", "erfinv_", "absolute_", "negative_", "fix_", "arcsin_", "exp_", "log_",
    "sqrt_", "deg2rad_", "rad2deg_", "arctan_"])
def test_inplace_pointwise(name):
    x = np.array([0.2, 0.5, 0.7])

    def f(m, t):
        y = t * 1.5
        v = y._version
        r = getattr(y, name)()
        assert r is y and y._version > v
        return y

    _close(f, x)
    a = nd.tensor(x, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        getattr(a, name)()


def test_polygamma_inplace_and_aliases():
    _close(lambda m, t: (t * 1).polygamma_(1), np.array([0.5, 2.0]), rtol=1e-8, atol=1e-9)
    _close(lambda m, t: (t * 1).sgn_(), np.array([0.5, -2.0]), grad=False)
    for alias, op in (("absolute", "abs"), ("negative", "neg"), ("arctan2", "atan2"),
                      ("multiply", "mul"), ("subtract", "sub"), ("divide", "div")):
        _close(lambda m, t, alias=alias: getattr(m, alias)(t, t + 1) if alias in (
            "arctan2", "multiply", "subtract", "divide") else getattr(m, alias)(t),
            np.array([-0.5, 2.0]))
    assert nd.Tensor.absolute is nd.Tensor.abs


# --- in-place views ---
@pytest.mark.parametrize("name,args", [("t_", ()), ("transpose_", (0, 1)), ("unsqueeze_", (1,)),
                                       ("squeeze_", ()), ("squeeze_", (0,)), ("swapdims_", (0, 1))])
def test_inplace_views(name, args):
    x = np.arange(6.0).reshape(1, 6) if name == "squeeze_" else np.arange(6.0).reshape(2, 3)

    def f(m, t):
        y = t * 2
        v = y._version
        assert getattr(y, name)(*args) is y
        assert y._version == v + 1
        return y * m.arange(float(y.numel())).reshape(y.shape)

    _close(f, x)
    leaf = nd.tensor(x, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        getattr(leaf, name)(*args)
    with nd.no_grad():
        getattr(leaf, name)(*args)


def test_inplace_view_of_view_writes_base():
    base = nd.zeros(2, 3)
    row = base[0]
    row.unsqueeze_(0)
    assert tuple(row.shape) == (1, 3)
    row.add_(1)
    assert base.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]


# --- cross ---
def test_cross():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    _close(lambda m, x, y: m.linalg.cross(x, y), a, b)
    _close(lambda m, x, y: m.cross(x.T, y.T, dim=0), a, b)
    _close(lambda m, x, y: x.cross(y, dim=1), a, b)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        _close(lambda m, x, y: m.cross(x, y), a, b)
    assert any("Using torch.cross without specifying the dim arg is deprecated" in str(x.message)
               for x in w)
    _same_error(lambda m: m.cross(m.ones(2, 4), m.ones(2, 4)))
    _same_error(lambda m: m.linalg.cross(m.ones(3, 4), m.ones(3, 4)))
    _same_error(lambda m: m.linalg.cross(m.ones(4, 3), m.ones(3)))
    _same_error(lambda m: m.linalg.cross(m.ones(4, 3), m.ones(4, 3, dtype=m.float64)))
    _same_error(lambda m: m.cross(m.ones(4, 3), m.ones(4, 3), dim=5))


# --- svd ---
def _canon(U, S, Vh):
    """Fix each singular pair's sign (LAPACK builds differ): the largest |entry| of u_i positive."""
    k = S.shape[-1]
    idx = U[..., :, :k].abs().argmax(-2, keepdim=True)
    s = U[..., :, :k].gather(-2, idx).sign()
    return U[..., :, :k] * s, S, Vh[..., :k, :] * s.mT


@pytest.mark.parametrize("shape", [(4, 3), (2, 5), (3, 3), (2, 4, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_linalg_svd(shape, full):
    a = np.random.default_rng(1).standard_normal(shape)
    _close(lambda m, t: _canon(*m.linalg.svd(t, full_matrices=full)), a)
    r = nd.linalg.svd(nd.tensor(a), full_matrices=full)
    e = torch.linalg.svd(torch.tensor(a), full_matrices=full)
    assert [tuple(x.shape) for x in r] == [tuple(x.shape) for x in e]
    assert type(r).__name__ == "linalg_svd" and r.S is r[1]


def test_svd_legacy_and_errors():
    a = np.random.default_rng(2).standard_normal((4, 3))
    def legacy(m, t):
        U, S, V = m.svd(t)
        return _canon(U, S, V.mT)

    _close(legacy, a)
    r, e = nd.svd(nd.tensor(a), compute_uv=False), torch.svd(torch.tensor(a), compute_uv=False)
    assert [tuple(x.shape) for x in r] == [tuple(x.shape) for x in e]
    assert not r.U.any() and not r.V.any()
    np.testing.assert_allclose(r.S.numpy(), e.S.numpy())
    assert [tuple(x.shape) for x in nd.svd(nd.tensor(a), some=False)] == [(4, 4), (3,), (3, 3)]
    _same_error(lambda m: m.linalg.svd(m.ones(3)))
    _same_error(lambda m: m.linalg.svd(m.ones(3, 3, dtype=m.int64)))
    _same_error(lambda m: m.linalg.svd(m.ones(3, 3), driver="gesvd"))
    _same_error(lambda m: m.svd(m.ones(3)))
    _close(lambda m, t: m.linalg.svdvals(t), a)


def test_svd_repeated_singular_values_give_nan_like_torch():
    a = np.diag([1.0, 1.0, 2.0])
    (_, gg), (_, eg) = _both(lambda m, t: m.linalg.svd(t)[0].sum(), a)
    assert np.isnan(gg[0]).any() and np.isnan(eg[0]).any()


# --- kron, block_diag, cov, corrcoef ---
def test_kron_block_diag():
    rng = np.random.default_rng(3)
    _close(lambda m, x, y: m.kron(x, y), rng.standard_normal((2, 3)), rng.standard_normal((3, 1, 2)))
    _close(lambda m, x, y, z: m.block_diag(x, y, z), rng.standard_normal((2, 3)),
           rng.standard_normal(()), rng.standard_normal(4))
    _close(lambda m, x, y: m.block_diag(x, y), np.arange(4).reshape(2, 2), rng.standard_normal((1, 2)))
    assert tuple(nd.block_diag().shape) == (1, 0)
    _same_error(lambda m: m.block_diag(m.ones(2), m.ones(2, 2, 2)))


def test_cov_corrcoef():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5))
    fw, aw = np.array([1, 2, 1, 3, 1]), rng.uniform(0.5, 2, 5)
    for kw in ({}, {"correction": 0}, {"correction": 2}):
        _close(lambda m, t, kw=kw: m.cov(t, **kw), x)
    _close(lambda m, t, f: m.cov(t, fweights=f), x, fw)
    _close(lambda m, t, a: m.cov(t, aweights=a), x, aw)
    _close(lambda m, t, f, a: m.cov(t, correction=3, fweights=f, aweights=a), x, fw, aw)
    _close(lambda m, t: t.corrcoef(), x)
    _close(lambda m, t: m.corrcoef(t), x[0])
    _close(lambda m, t: m.cov(t), np.array([[1, 2, 4], [0, 3, 3]]), rtol=1e-6)
    for bad in (lambda m: m.cov(m.ones(2, 2, 2)),
                lambda m: m.cov(m.ones(3, 5), fweights=m.ones(5)),
                lambda m: m.cov(m.ones(3, 5), fweights=m.ones(2, 5, dtype=m.int64)),
                lambda m: m.cov(m.ones(3, 5), fweights=m.ones(4, dtype=m.int64)),
                lambda m: m.cov(m.ones(3, 5), fweights=-m.ones(5, dtype=m.int64)),
                lambda m: m.cov(m.ones(3, 5), aweights=m.ones(5, dtype=m.int64)),
                lambda m: m.cov(m.ones(3, 5), aweights=-m.ones(5))):
        _same_error(bad)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        nd.cov(nd.ones(3, 1))


# --- quantile ---
@pytest.mark.parametrize("interp", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(interp):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 6))
    q = np.array([0.0, 0.3, 0.5, 1.0])
    for dim, keep in ((None, False), (None, True), (1, False), (0, True), (-1, True)):
        _close(lambda m, t, dim=dim, keep=keep: m.quantile(t, 0.37, dim, keep, interpolation=interp), x)
        _close(lambda m, t, qq, dim=dim, keep=keep: m.quantile(t, qq, dim, keep, interpolation=interp),
               x, q, grad=False)
    xn = x.copy()
    xn[0, 1] = xn[2, :] = np.nan
    _close(lambda m, t: m.quantile(t, 0.4, 1, interpolation=interp), xn, grad=False)
    _close(lambda m, t: m.nanquantile(t, 0.4, 1, interpolation=interp), xn, grad=False)
    _close(lambda m, t: t.nanquantile(0.75, interpolation=interp), xn, grad=False)


def test_quantile_errors():
    for bad in (lambda m: m.quantile(m.randn(5), 1.5),
                lambda m: m.quantile(m.randn(5), 0.5, interpolation="foo"),
                lambda m: m.quantile(m.ones(5, dtype=m.int64), 0.5),
                lambda m: m.quantile(m.randn(5), m.tensor([[0.5]])),
                lambda m: m.quantile(m.randn(5), m.tensor([0.5], dtype=m.float64)),
                lambda m: m.quantile(m.randn(0), 0.5)):
        _same_error(bad)


# --- complex views and polar ---
def test_view_as_real_complex():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 2))
    w = rng.standard_normal((3, 2))
    _close(lambda m, t, u: m.view_as_real(m.view_as_complex(t) * 2) * u, x, w)
    base = nd.tensor(x)
    c = nd.view_as_complex(base)
    r = nd.view_as_real(c)
    assert np.shares_memory(c._data, base._data) and np.shares_memory(r._data, base._data)
    r[0, 0] = 100.0  # views: a write reaches the complex view and the base
    assert c.numpy()[0].real == 100.0 and base[0, 0].item() == 100.0
    assert c._version == base._version == r._version
    for bad in (lambda m: m.view_as_real(m.ones(2)),
                lambda m: m.view_as_complex(m.ones(2, 3)),
                lambda m: m.view_as_complex(m.ones(3, 2).T.contiguous().T),
                lambda m: m.view_as_complex(m.ones(2, 2, dtype=m.int64)),
                lambda m: m.view_as_complex(m.ones(3, 3)[:, :2])):
        _same_error(bad)


def test_polar():
    rng = np.random.default_rng(8)
    r, th, w = rng.uniform(0.5, 2, (3, 4)), rng.uniform(-3, 3, 4), rng.standard_normal((3, 4, 2))
    _close(lambda m, a, b, u: m.view_as_real(m.polar(a, b)) * u, r, th, w)
    _same_error(lambda m: m.polar(m.ones(2), m.ones(2, dtype=m.float64)))
    _same_error(lambda m: m.polar(m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64)))
    assert nd.polar(nd.ones(2), nd.ones(2)).dtype == nd.complex64


@pytest.mark.parametrize("name,args", [("t_", ()), ("transpose_", (0, 1)), ("squeeze_", ()),
                                       ("squeeze_", (0,)), ("squeeze_", ((0,),)), ("unsqueeze_", (0,)),
                                       ("swapdims_", (0, 1)), ("swapaxes_", (0, 1))])
def test_inplace_view_node_names_match_torch(name, args, ref):
    def f(T):
        x = T.tensor([[1.0, 2.0, 3.0]], dtype=T.float64, requires_grad=True)
        y = x.clone()
        getattr(y, name)(*args)
        (y * T.arange(3.0, dtype=T.float64).reshape(y.shape)).sum().backward()
        return y.grad_fn.name(), x.grad

    ref.same(f)


def test_real_and_imag_views_match_torch(ref):
    def f(T):
        x = T.tensor([1 + 2j, 3 - 1j], dtype=T.complex128, requires_grad=True)
        (x.real * 2 + x.imag * 3).sum().backward()
        z = T.tensor([1 + 2j, 3 - 1j], dtype=T.complex128)
        z.real = T.tensor([5.0, 6.0], dtype=T.float64)
        z.imag.mul_(2)
        y = T.tensor([1.0, 2.0])
        return (x.grad, z, T.real(x).detach(), x.real.grad_fn.name(), T.real(x)._base is x,
                y.real is y, T.real(y) is y)

    ref.same(f)
    ref.raises(lambda T: T.tensor([1.0]).imag, RuntimeError,
               "imag is not implemented for tensors with non-complex dtypes.")
