"""ndgrad.distributions against torch.distributions: values, gradients, errors, sample
statistics."""

import math

import numpy as np
import pytest

import ndgrad
from ndgrad import distributions as nd

torch = pytest.importorskip("torch")
td = torch.distributions

CASES = {
    "normal": (lambda m, t: m.Normal(t([0.5, -1.0]), t([1.5, 0.3])), [[0.1, 2.0], [-1.0, 0.0]]),
    "categorical": (
        lambda m, t: m.Categorical(probs=t([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])),
        [[0.0, 2.0], [1.0, 1.0]],
    ),
    "categorical_logits": (lambda m, t: m.Categorical(logits=t([0.3, -1.2, 2.0])), [0.0, 1.0, 2.0]),
    "bernoulli": (lambda m, t: m.Bernoulli(probs=t([0.2, 0.9])), [[0.0, 1.0], [1.0, 1.0]]),
    "bernoulli_logits": (lambda m, t: m.Bernoulli(logits=t([-0.7, 2.5])), [[0.0, 1.0], [1.0, 0.0]]),
    "uniform": (lambda m, t: m.Uniform(t([0.0, -2.0]), t([1.0, 3.0])), [[0.5, -1.0], [0.9, 2.5]]),
    "mvn_cov": (
        lambda m, t: m.MultivariateNormal(t([0.5, -1.0]), t([[2.0, 0.3], [0.3, 1.0]])),
        [[0.1, 2.0], [-1.0, 0.0]],
    ),
    "mvn_tril": (
        lambda m, t: m.MultivariateNormal(t([[0.0, 1.0]]), scale_tril=t([[1.5, 0.0], [0.4, 0.7]])),
        [[0.1, 2.0], [-1.0, 0.0]],
    ),
    "mvn_prec": (
        lambda m, t: m.MultivariateNormal(
            t([0.0, 1.0]), precision_matrix=t([[2.0, -0.4], [-0.4, 1.0]])
        ),
        [0.3, 0.2],
    ),
}


def _pair(name):
    """The case built with both libraries, plus the leaf tensors each build made (in order)."""
    make, value = CASES[name]
    leaves_nd, leaves_t = [], []

    def nt(x):
        leaves_nd.append(ndgrad.tensor(x, dtype=ndgrad.float64, requires_grad=True))
        return leaves_nd[-1]

    def tt(x):
        leaves_t.append(torch.tensor(x, dtype=torch.float64, requires_grad=True))
        return leaves_t[-1]

    return make(nd, nt), make(td, tt), value, leaves_nd, leaves_t


def _close(a, b, **kw):
    np.testing.assert_allclose(
        np.asarray(a.detach().numpy(), dtype=float),
        b.detach().numpy().astype(float),
        rtol=1e-6,
        atol=1e-9,
        **kw,
    )


@pytest.mark.parametrize("name", list(CASES))
def test_values_match_torch(name):
    d, t, value, _, _ = _pair(name)
    assert tuple(d.batch_shape) == tuple(t.batch_shape)
    assert tuple(d.event_shape) == tuple(t.event_shape)
    _close(
        d.log_prob(ndgrad.tensor(value, dtype=ndgrad.float64)),
        t.log_prob(torch.tensor(value, dtype=torch.float64)),
    )
    _close(d.entropy(), t.entropy())
    _close(d.mean, t.mean)
    _close(d.variance, t.variance)
    _close(d.stddev, t.stddev)
    assert repr(d).replace("ndgrad.", "torch.") == repr(t)
    assert repr(d.support).replace("ndgrad.", "torch.") == repr(t.support)


@pytest.mark.parametrize("name", list(CASES))
def test_log_prob_gradients_match_torch(name):
    d, t, value, leaves_nd, leaves_t = _pair(name)
    gd = ndgrad.autograd.grad(
        d.entropy().sum() + d.log_prob(ndgrad.tensor(value, dtype=ndgrad.float64)).sum(),
        leaves_nd,
        allow_unused=True,
    )
    gt = torch.autograd.grad(
        t.entropy().sum() + t.log_prob(torch.tensor(value, dtype=torch.float64)).sum(),
        leaves_t,
        allow_unused=True,
    )
    assert len(gd) == len(gt) > 0
    for a, b in zip(gd, gt, strict=True):
        if b is None:
            assert a is None or not a.detach().numpy().any()
        else:
            _close(a, b)


def test_rsample_gradients_match_torch():
    loc = ndgrad.tensor([0.5, -1.0], dtype=ndgrad.float64, requires_grad=True)
    scale = ndgrad.tensor([1.5, 0.3], dtype=ndgrad.float64, requires_grad=True)
    x = nd.Normal(loc, scale).rsample((4,))
    eps = (x - loc) / scale
    (x * x).sum().backward()
    tl = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    ts = torch.tensor([1.5, 0.3], dtype=torch.float64, requires_grad=True)
    teps = torch.tensor(eps.detach().numpy())
    ((tl + teps * ts) ** 2).sum().backward()
    _close(loc.grad, tl.grad)
    _close(scale.grad, ts.grad)

    low = ndgrad.tensor(0.5, dtype=ndgrad.float64, requires_grad=True)
    high = ndgrad.tensor(2.0, dtype=ndgrad.float64, requires_grad=True)
    u = nd.Uniform(low, high).rsample((3,))
    u.sum().backward()
    r = ((u - low) / (high - low)).detach().numpy()
    np.testing.assert_allclose(low.grad.item(), (1 - r).sum())
    np.testing.assert_allclose(high.grad.item(), r.sum())

    L = ndgrad.tensor([[1.5, 0.0], [0.4, 0.7]], dtype=ndgrad.float64, requires_grad=True)
    mu = ndgrad.zeros(2, dtype=ndgrad.float64, requires_grad=True)
    s = nd.MultivariateNormal(mu, scale_tril=L).rsample((5,))
    s.pow(2).sum().backward()
    tL = torch.tensor([[1.5, 0.0], [0.4, 0.7]], dtype=torch.float64, requires_grad=True)
    tmu = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    e = torch.linalg.solve_triangular(
        tL.detach(), torch.tensor(s.detach().numpy()).T, upper=False
    ).T
    (tmu + e @ tL.T).pow(2).sum().backward()
    _close(L.grad, tL.grad)
    _close(mu.grad, tmu.grad)


def test_sample_statistics_and_shapes():
    n = 100_000
    x = nd.Normal(ndgrad.tensor([1.0, -2.0]), ndgrad.tensor([0.5, 2.0])).sample((n,))
    assert tuple(x.shape) == (n, 2) and not x.requires_grad
    np.testing.assert_allclose(x.numpy().mean(0), [1.0, -2.0], atol=0.03)
    np.testing.assert_allclose(x.numpy().std(0), [0.5, 2.0], rtol=0.02)
    c = nd.Categorical(probs=ndgrad.tensor([[0.2, 0.3, 0.5], [0.7, 0.2, 0.1]])).sample((n,))
    assert tuple(c.shape) == (n, 2) and c.dtype == ndgrad.int64
    np.testing.assert_allclose(
        np.bincount(c.numpy()[:, 0], minlength=3) / n, [0.2, 0.3, 0.5], atol=0.01
    )
    np.testing.assert_allclose(
        np.bincount(c.numpy()[:, 1], minlength=3) / n, [0.7, 0.2, 0.1], atol=0.01
    )
    b = nd.Bernoulli(ndgrad.tensor([0.1, 0.8])).sample((n,))
    assert tuple(b.shape) == (n, 2) and b.dtype == ndgrad.float32
    np.testing.assert_allclose(b.numpy().mean(0), [0.1, 0.8], atol=0.01)
    u = nd.Uniform(-1.0, 3.0).sample((n,))
    assert tuple(u.shape) == (n,)
    assert u.numpy().min() >= -1 and u.numpy().max() < 3
    np.testing.assert_allclose(u.numpy().mean(), 1.0, atol=0.03)
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    m = nd.MultivariateNormal(ndgrad.tensor([1.0, 0.0]), ndgrad.tensor(cov, dtype=ndgrad.float32))
    s = m.sample((n,)).numpy()
    np.testing.assert_allclose(s.mean(0), [1.0, 0.0], atol=0.03)
    np.testing.assert_allclose(np.cov(s.T), cov, atol=0.05)
    assert tuple(nd.Normal(0.0, 1.0).sample().shape) == ()
    assert tuple(nd.Normal(ndgrad.zeros(3, 2), 1.0).rsample((4, 5)).shape) == (4, 5, 3, 2)


KL_PAIRS = [
    ("Normal", ([0.0, 1.0], [1.0, 2.0]), ([0.5, 0.0], [0.7, 1.0])),
    ("Uniform", ([0.0, 0.0], [1.0, 1.0]), ([-1.0, 0.5], [2.0, 3.0])),
    ("Bernoulli", ([0.3, 0.0, 1.0],), ([0.6, 0.5, 0.0],)),
    ("Categorical", ([[0.2, 0.8], [0.5, 0.5]],), ([[0.4, 0.6], [0.0, 1.0]],)),
]


@pytest.mark.parametrize("name,pa,qa", KL_PAIRS)
def test_kl_matches_torch(name, pa, qa):
    mk = lambda mod, lib, args: getattr(mod, name)(
        *[lib.tensor(a, dtype=lib.float64) for a in args]
    )
    got = nd.kl_divergence(mk(nd, ndgrad, pa), mk(nd, ndgrad, qa))
    want = td.kl_divergence(mk(td, torch, pa), mk(td, torch, qa))
    _close(got, want)


def test_kl_mixed_and_mvn_and_grad():
    n = lambda lib, mod: mod.Normal(
        lib.tensor([0.3], dtype=lib.float64), lib.tensor([1.2], dtype=lib.float64)
    )
    u = lambda lib, mod: mod.Uniform(
        lib.tensor([-1.0], dtype=lib.float64), lib.tensor([2.0], dtype=lib.float64)
    )
    _close(
        nd.kl_divergence(u(ndgrad, nd), n(ndgrad, nd)), td.kl_divergence(u(torch, td), n(torch, td))
    )
    _close(
        nd.kl_divergence(n(ndgrad, nd), u(ndgrad, nd)), td.kl_divergence(n(torch, td), u(torch, td))
    )
    covs = ([[2.0, 0.3], [0.3, 1.0]], [[1.0, -0.2], [-0.2, 0.5]])
    pn = ndgrad.tensor(covs[0], dtype=ndgrad.float64, requires_grad=True)
    pt = torch.tensor(covs[0], dtype=torch.float64, requires_grad=True)
    kn = nd.kl_divergence(
        nd.MultivariateNormal(ndgrad.tensor([0.0, 1.0], dtype=ndgrad.float64), pn),
        nd.MultivariateNormal(
            ndgrad.tensor([1.0, 0.0], dtype=ndgrad.float64),
            ndgrad.tensor(covs[1], dtype=ndgrad.float64),
        ),
    )
    kt = td.kl_divergence(
        td.MultivariateNormal(torch.tensor([0.0, 1.0], dtype=torch.float64), pt),
        td.MultivariateNormal(
            torch.tensor([1.0, 0.0], dtype=torch.float64),
            torch.tensor(covs[1], dtype=torch.float64),
        ),
    )
    _close(kn, kt)
    kn.backward()
    kt.backward()
    _close(pn.grad, pt.grad)
    with pytest.raises(
        NotImplementedError,
        match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q type Categorical",
    ):
        nd.kl_divergence(nd.Normal(0.0, 1.0), nd.Categorical(ndgrad.ones(2)))


def test_register_kl_most_specific():
    class MyNormal(nd.Normal):
        pass

    @nd.register_kl(MyNormal, nd.Normal)
    def _kl(p, q):
        return ndgrad.tensor(42.0)

    assert nd.kl_divergence(MyNormal(0.0, 1.0), nd.Normal(0.0, 1.0)).item() == 42.0
    assert nd.kl_divergence(nd.Normal(0.0, 1.0), nd.Normal(0.0, 1.0)).item() == 0.0


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e).replace("ndgrad.", "torch.")
    return None


ERRORS = [
    lambda m, t: m.Normal(t([0.0, 1.0]), t([-1.0, 1.0])),
    lambda m, t: m.Normal(0.0, 1.0).log_prob(t(float("nan"))),
    lambda m, t: m.Categorical(t([-1.0, 1.0])),
    lambda m, t: m.Categorical(),
    lambda m, t: m.Categorical(probs=t([0.5, 0.5]), logits=t([0.0, 0.0])),
    lambda m, t: m.Bernoulli(t(2.0)),
    lambda m, t: m.Bernoulli(t([0.3])).log_prob(t([0.5])),
    lambda m, t: m.Uniform(1.0, 0.0),
    lambda m, t: m.Uniform(0.0, 1.0).log_prob(t(2.0)),
    lambda m, t: m.Normal(t([0.0, 0.0]), 1.0).log_prob(t([0.0, 0.0, 0.0])),
    lambda m, t: m.Normal(0.0, 1.0).log_prob([0.0]),
    lambda m, t: m.MultivariateNormal(t([0.0, 0.0])),
    lambda m, t: m.MultivariateNormal(t(0.0), t([[1.0]])),
    lambda m, t: m.MultivariateNormal(t([0.0, 0.0]), t([1.0, 1.0])),
    lambda m, t: m.MultivariateNormal(t([0.0, 0.0]), -t([[1.0, 0.0], [0.0, 1.0]])),
    lambda m, t: m.MultivariateNormal(t([0.0, 0.0]), scale_tril=t([[1.0, 1.0], [0.0, 1.0]])),
    lambda m, t: m.MultivariateNormal(t([0.0, 0.0]), t([[1.0, 0.0], [0.0, 1.0]])).log_prob(
        t([0.0])
    ),
    lambda m, t: m.Categorical(t([0.5, 0.5])).log_prob(t([2.0])),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_match_torch(i):
    got = _err(lambda: ERRORS[i](nd, ndgrad.tensor))
    want = _err(lambda: ERRORS[i](td, torch.tensor))
    assert want is not None
    assert got == want


def test_validate_args_off_and_expand():
    d = nd.Normal(ndgrad.tensor([0.0]), ndgrad.tensor([-1.0]), validate_args=False)
    assert not d._validate_args
    e = nd.Normal(ndgrad.zeros(3), 1.0).expand((4, 3))
    assert tuple(e.batch_shape) == (4, 3) and tuple(e.loc.shape) == (4, 3)
    c = nd.Categorical(logits=ndgrad.zeros(3)).expand([2])
    assert tuple(c.batch_shape) == (2,) and tuple(c.logits.shape) == (2, 3)
    m = nd.MultivariateNormal(ndgrad.zeros(2), ndgrad.eye(2)).expand((5,))
    assert tuple(m.batch_shape) == (5,) and tuple(m.covariance_matrix.shape) == (5, 2, 2)
    assert tuple(m.log_prob(ndgrad.zeros(5, 2)).shape) == (5,)
    b = nd.Bernoulli(0.3).expand((2, 2))
    assert tuple(b.enumerate_support().shape) == (2, 2, 2)
    cs = nd.Categorical(probs=ndgrad.ones(4, 3)).enumerate_support()
    ts = td.Categorical(probs=torch.ones(4, 3)).enumerate_support()
    assert cs.numpy().tolist() == ts.numpy().tolist() and cs.dtype == ndgrad.int64
    assert tuple(nd.Categorical(probs=ndgrad.ones(4, 3)).enumerate_support(False).shape) == (3, 1)
    assert nd.Normal(0.0, 1.0).arg_constraints.keys() == td.Normal(0.0, 1.0).arg_constraints.keys()
    assert repr(nd.Uniform(0.0, 1.0).arg_constraints) == repr(td.Uniform(0.0, 1.0).arg_constraints)
    assert math.isnan(nd.Categorical(ndgrad.ones(2)).mean.item())


def test_constraints_reprs():
    c, tc = nd.constraints, td.constraints
    for name in (
        "real",
        "positive",
        "nonnegative",
        "boolean",
        "unit_interval",
        "simplex",
        "positive_definite",
        "lower_cholesky",
        "real_vector",
        "dependent",
        "nonnegative_integer",
    ):
        assert repr(getattr(c, name)) == repr(getattr(tc, name)), name
    assert repr(c.interval(0, 2)) == repr(tc.interval(0, 2))
    assert repr(c.integer_interval(0, 2)) == repr(tc.integer_interval(0, 2))
    assert c.simplex.event_dim == 1 and c.positive_definite.event_dim == 2
    assert c.is_dependent(c.dependent) and not c.is_dependent(c.real)
    assert c.positive.check(ndgrad.tensor([1.0, -1.0])).numpy().tolist() == [True, False]


def test_default_validation_switch_and_hierarchy():
    assert isinstance(nd.Normal(0.0, 1.0), nd.ExponentialFamily)
    assert isinstance(nd.Bernoulli(0.5), nd.ExponentialFamily)
    assert not isinstance(nd.Uniform(0.0, 1.0), nd.ExponentialFamily)
    nd.Distribution.set_default_validate_args(False)
    try:
        nd.Normal(0.0, -1.0)  # not checked
    finally:
        nd.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="GreaterThan"):
        nd.Normal(0.0, -1.0)
    with pytest.raises(NotImplementedError):
        nd.Normal(0.0, 1.0).enumerate_support()
    assert nd.Normal(0.0, 1.0).has_rsample and not nd.Categorical(ndgrad.ones(2)).has_rsample
    assert nd.Categorical(ndgrad.ones(2)).has_enumerate_support
    x = nd.Normal(ndgrad.zeros(2), 1.0).cdf(ndgrad.tensor([0.0, 1.0]))
    np.testing.assert_allclose(x.numpy(), [0.5, 0.8413447], rtol=1e-6)
    np.testing.assert_allclose(
        nd.Normal(0.0, 1.0).icdf(ndgrad.tensor(0.8413447)).item(), 1.0, rtol=1e-5
    )
    np.testing.assert_allclose(nd.Uniform(0.0, 2.0).cdf(ndgrad.tensor(0.5)).item(), 0.25)
