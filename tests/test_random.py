"""Random sampling: in-place fills (``uniform_`` ...) and ``normal``/``bernoulli``/``poisson``/
``randperm``/``multinomial``. Values are ndgrad's own (seeded), so statistics are checked on large
samples with fixed seeds; shapes, dtypes, grad_fn names and errors are compared with PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ndgrad as nd

N = 200_000


def _stats(t):
    a = np.asarray(t._data, dtype=np.float64).ravel()
    return a.mean(), a.var()


def _close(got, want, sd, k=5):
    assert abs(got - want) < k * sd, (got, want, sd)


FILLS = [  # method, args, mean, variance
    ("uniform_", (-1.0, 3.0), 1.0, 16 / 12),
    ("normal_", (2.0, 3.0), 2.0, 9.0),
    ("bernoulli_", (0.3,), 0.3, 0.21),
    ("exponential_", (2.0,), 0.5, 0.25),
    ("geometric_", (0.25,), 4.0, 0.75 / 0.0625),
    ("log_normal_", (0.0, 0.5), math.exp(0.125), (math.exp(0.25) - 1) * math.exp(0.25)),
    ("random_", (10,), 4.5, (100 - 1) / 12),
    ("random_", (-3, 5), 0.5, (64 - 1) / 12),
]


@pytest.mark.parametrize("name,args,mean,var", FILLS, ids=[f[0] + str(len(f[1])) for f in FILLS])
def test_fill_statistics(name, args, mean, var):
    nd.manual_seed(0)
    t = getattr(nd.empty(N, dtype=nd.float64), name)(*args)
    m, v = _stats(t)
    _close(m, mean, math.sqrt(var / N))
    _close(v, var, var * 0.05)


def test_cauchy_median_and_quartiles():
    t = nd.empty(N, dtype=nd.float64).cauchy_(1.0, 2.0, generator=nd.Generator().manual_seed(3))
    q = np.quantile(t._data, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(q, [-1.0, 1.0, 3.0], atol=0.1)


def test_complex_normal_splits_variance():
    t = nd.empty(N, dtype=nd.complex128).normal_(1.0, 2.0, generator=nd.Generator().manual_seed(1))
    for part in (t._data.real, t._data.imag):
        _close(part.mean(), 1.0, math.sqrt(2 / N))
        _close(part.var(), 2.0, 0.1)


@pytest.mark.parametrize("dt,top", [(nd.float32, 2**24), (nd.int64, 2**63 - 1), (nd.uint8, 255),
                                    (nd.bool, 1)])
def test_random_default_range(dt, top):
    t = nd.empty(2000, dtype=dt).random_(generator=nd.Generator().manual_seed(2))
    a = t._data.astype(np.float64)
    assert a.min() >= 0 and a.max() <= top and a.max() > top / 2
    assert t.dtype == dt


@pytest.mark.parametrize("name,args", [(f[0], f[1]) for f in FILLS] + [("cauchy_", ())])
def test_fill_reproducible_and_in_place(name, args, device):
    def draw(seed):
        t = nd.zeros(4, 5, device=device)
        data = t._data
        out = getattr(t, name)(*args, generator=nd.Generator().manual_seed(seed))
        assert out is t and t._data is data and t._version == 1 and t.device.type == device
        return np.asarray(t._data)

    np.testing.assert_array_equal(draw(7), draw(7))
    assert not np.array_equal(draw(7), draw(8))


def test_default_generator_reproducible():
    nd.manual_seed(5)
    a = nd.empty(10).uniform_(), nd.normal(0.0, 1.0, (3,)), nd.randperm(10)
    nd.manual_seed(5)
    b = nd.empty(10).uniform_(), nd.normal(0.0, 1.0, (3,)), nd.randperm(10)
    for x, y in zip(a, b, strict=True):
        assert nd.equal(x, y)


@pytest.mark.parametrize("name,args", [(f[0], f[1]) for f in FILLS] + [("cauchy_", ())])
def test_fill_autograd_like_torch(ref, name, args):
    def leaf(T):
        x = T.ones(3, requires_grad=True)
        getattr(x, name)(*args)

    ref.raises(leaf, RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation.")

    def nonleaf(T):
        x = T.ones(3, requires_grad=True)
        y = x * 2
        getattr(y, name)(*args)
        y.sum().backward()
        return type(y.grad_fn).__name__, x.grad

    ref.same(nonleaf)

    def under_no_grad(T):
        x = T.ones(3, requires_grad=True)
        with T.no_grad():
            getattr(x, name)(*args)
        return x.requires_grad, x.is_leaf, x._version

    ref.same(under_no_grad)


def test_bernoulli_tensor_p_grad_fn(ref):
    def f(T):
        x, p = T.ones(3, requires_grad=True), T.rand(3, requires_grad=True)
        y = (x * 1).bernoulli_(p)
        y.sum().backward()
        return type(y.grad_fn).__name__, x.grad, p.grad

    ref.same(f)


def test_version_bump_invalidates_saved(ref):
    def f(T):
        x = T.ones(3, requires_grad=True)
        y = x * 1
        z = y * y
        y.uniform_()
        z.sum().backward()

    ref.raises(f, RuntimeError)


FILL_ERRORS = [
    ("float32", "uniform_", (1.0, 0.0)), ("float32", "uniform_", (0.0, math.inf)),
    ("float32", "uniform_", (-3e38, 3e38)), ("int64", "uniform_", ()), ("bool", "uniform_", ()),
    ("float32", "normal_", (0.0, -1.0)), ("int64", "normal_", ()),
    ("float32", "bernoulli_", (1.5,)), ("complex64", "bernoulli_", ()),
    ("float32", "exponential_", (0.0,)), ("int64", "exponential_", ()),
    ("float32", "geometric_", (1.0,)), ("bool", "geometric_", (0.5,)),
    ("float32", "log_normal_", (1.0, 0.0)), ("int64", "log_normal_", ()),
    ("float32", "cauchy_", (0.0, -1.0)), ("int64", "cauchy_", ()), ("int8", "cauchy_", ()),
    ("float32", "random_", (5, 3)), ("float32", "random_", (0,)), ("uint8", "random_", (-1, 5)),
    ("uint8", "random_", (0, 300)), ("bool", "random_", (0, 3)), ("complex64", "random_", ()),
    ("float32", "random_", (0.5,)),
]


@pytest.mark.parametrize("dt,name,args", FILL_ERRORS, ids=[f"{n}-{d}-{a}" for d, n, a in FILL_ERRORS])
def test_fill_errors_match_torch(ref, dt, name, args):
    def f(T):
        getattr(T.empty(3, dtype=getattr(T, dt)), name)(*args)

    _raises_same(ref, f)


def _raises_same(ref, f):
    """``f`` raises the same exception type and message under ndgrad and torch."""
    with pytest.raises(Exception) as got:
        f(nd)
    if ref.torch is not None:
        with pytest.raises(Exception) as want:
            f(ref.torch)
        assert type(got.value) is type(want.value), (got.value, want.value)
        assert ref.norm(str(got.value)) == ref.norm(str(want.value))


def test_bernoulli_tensor_p_errors(ref):
    _raises_same(ref, lambda T: T.empty(3).bernoulli_(T.tensor([0.5, 1.5, 0.2])))
    _raises_same(ref, lambda T: T.empty(3).bernoulli_(T.rand(2)))


# --- functions ---
def test_normal_overloads(ref):
    def shapes(T):
        m, s = T.zeros(2, 1, dtype=T.float64), T.ones(3)
        return [(tuple(r.shape), str(r.dtype)) for r in (
            T.normal(m, s), T.normal(m, 2.0), T.normal(m), T.normal(1.0, s),
            T.normal(0.0, 1.0, (2, 3)), T.normal(0.0, 1.0, size=(4,), dtype=T.float64))]

    ref.same(shapes)

    def grads(T):
        m, s = T.zeros(3, requires_grad=True), T.ones(3, requires_grad=True)
        names = [type(r.grad_fn).__name__ for r in (T.normal(m, s), T.normal(m, 1.0), T.normal(0.0, s))]
        T.normal(m, s).sum().backward()
        return names, m.grad, s.grad, T.normal(0.0, 1.0, (2,), requires_grad=True).requires_grad

    ref.same(grads)


def test_normal_statistics(device):
    g = nd.Generator().manual_seed(4)
    m = nd.full((N,), 3.0, dtype=nd.float64, device=device)
    s = nd.full((N,), 2.0, dtype=nd.float64, device=device)
    for r in (nd.normal(m, s, generator=g), nd.normal(m, 2.0, generator=g),
              nd.normal(3.0, s, generator=g)):
        assert r.device.type == device
        mean, var = _stats(r)
        _close(mean, 3.0, math.sqrt(4 / N))
        _close(var, 4.0, 0.2)
    mean, var = _stats(nd.normal(3.0, 2.0, (N,), generator=g, dtype=nd.float64, device=device))
    _close(mean, 3.0, math.sqrt(4 / N))


@pytest.mark.parametrize("f", [
    lambda T: T.normal(T.zeros(3), -T.ones(3)), lambda T: T.normal(T.zeros(3), -1.0),
    lambda T: T.normal(0.0, -T.ones(3)), lambda T: T.normal(T.zeros(3, dtype=T.int64), 1.0),
    lambda T: T.normal(0.0, 1.0), lambda T: T.normal(T.zeros(2), 1.0, (3,)),
    lambda T: T.normal(T.zeros(3), T.ones(2)),
    lambda T: T.normal(0.0, 1.0, (2,), generator=3),
])
def test_normal_errors(ref, f):
    _raises_same(ref, f)


def test_bernoulli_and_poisson(ref, device):
    g = nd.Generator().manual_seed(6)
    p = nd.full((N,), 0.25, dtype=nd.float64, device=device)
    b = nd.bernoulli(p, generator=g)
    assert b.dtype == nd.float64 and b.device.type == device
    _close(_stats(b)[0], 0.25, math.sqrt(0.25 * 0.75 / N))
    _close(_stats(p.bernoulli(0.5, generator=g))[0], 0.5, math.sqrt(0.25 / N))
    r = nd.poisson(nd.full((N,), 3.0, device=device), generator=g)
    assert r.dtype == nd.float32 and r.device.type == device
    m, v = _stats(r)
    _close(m, 3.0, math.sqrt(3 / N))
    _close(v, 3.0, 0.15)

    def grads(T):
        x = T.rand(3, requires_grad=True)
        names = [type(T.bernoulli(x).grad_fn).__name__, type(T.poisson(x).grad_fn).__name__]
        T.poisson(x).sum().backward()
        return names, x.grad

    ref.same(grads)
    for f in (lambda T: T.bernoulli(T.tensor([0.2, 1.5])), lambda T: T.bernoulli(T.tensor([1, 0])),
              lambda T: T.bernoulli(T.rand(3), p=1.5), lambda T: T.poisson(T.tensor([-1.0, 2.0])),
              lambda T: T.poisson(T.tensor([1, 2]))):
        _raises_same(ref, f)


def test_randperm(ref, device):
    p = nd.randperm(1000, generator=nd.Generator().manual_seed(1), device=device)
    assert p.dtype == nd.int64 and p.device.type == device
    assert sorted(np.asarray(p._data).tolist()) == list(range(1000))
    assert nd.equal(nd.randperm(50, generator=nd.Generator().manual_seed(3)),
                    nd.randperm(50, generator=nd.Generator().manual_seed(3)))
    ref.same(lambda T: (T.randperm(0).shape, str(T.randperm(5, dtype=T.float32).dtype),
                        T.randperm(4, dtype=T.float64, requires_grad=True).requires_grad))
    for f in (lambda T: T.randperm(-1), lambda T: T.randperm(5.0),
              lambda T: T.randperm(5, requires_grad=True), lambda T: T.randperm(257, dtype=T.uint8),
              lambda T: T.randperm(129, dtype=T.int8), lambda T: T.randperm(3, dtype=T.bool),
              lambda T: T.randperm(2050, dtype=T.float16)):
        _raises_same(ref, f)


def test_multinomial_frequencies(device):
    g = nd.Generator().manual_seed(9)
    w = nd.tensor([[1.0, 0.0, 3.0, 4.0], [0.0, 0.0, 0.0, 2.0]], device=device)
    s = nd.multinomial(w, 40_000, True, generator=g)
    assert s.shape == (2, 40_000) and s.dtype == nd.int64 and s.device.type == device
    counts = np.bincount(np.asarray(s._data)[0], minlength=4) / 40_000
    np.testing.assert_allclose(counts, [0.125, 0.0, 0.375, 0.5], atol=0.01)
    assert (np.asarray(s._data)[1] == 3).all()
    # without replacement: each row a set of distinct indices; first draw follows the weights
    s = w[0].multinomial(3, generator=g)
    assert sorted(np.asarray(s._data).tolist()) == [0, 2, 3]
    first = nd.multinomial(nd.tensor([1.0, 3.0]).expand(20_000, 2), 2, generator=g)
    rows = np.asarray(first._data)
    assert (np.sort(rows, 1) == [0, 1]).all()
    _close((rows[:, 0] == 1).mean(), 0.75, math.sqrt(0.75 * 0.25 / 20_000))


def test_multinomial_like_torch(ref):
    ref.same(lambda T: (T.multinomial(T.tensor([1.0, 1.0, 0.0]), 3).sort().values,
                        T.multinomial(T.ones(0, 3), 2).shape, T.multinomial(T.rand(3, requires_grad=True), 2).grad_fn))
    for f in (lambda T: T.multinomial(T.tensor([0.2, 0.8]), 3),
              lambda T: T.multinomial(T.tensor([-0.2, 0.8]), 1),
              lambda T: T.multinomial(T.tensor([0.0, 0.0]), 1),
              lambda T: T.multinomial(T.tensor([math.inf, 0.0]), 1),
              lambda T: T.multinomial(T.tensor([math.nan, 0.0]), 1),
              lambda T: T.multinomial(T.tensor([1, 2]), 1), lambda T: T.multinomial(T.tensor(1.0), 1),
              lambda T: T.multinomial(T.ones(2, 3), 0), lambda T: T.multinomial(T.ones(2, 0), 2),
              lambda T: T.multinomial(T.tensor([[1.0, 0, 0], [0, 0, 0]]), 1)):
        _raises_same(ref, f)


def test_profiler_names():
    assert nd.randperm.__name__ == "randperm" and nd.normal.__name__ == "normal"
