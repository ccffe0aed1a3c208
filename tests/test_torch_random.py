"""Seeded random numbers equal PyTorch's bit for bit on the CPU (torch as the oracle).

Each case seeds both libraries, draws with one call, compares the values byte for byte and then
draws once more, so that a sampler that consumed a different number of words fails too.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import ndgrad as nd

torch = pytest.importorskip("torch")

SEEDS = range(10)
SIZES = [(1,), (2,), (7,), (15,), (16,), (17,), (100,), (1000,), (10000,), (3, 5), (16, 16), (7, 33)]
_IDS = ["x".join(map(str, s)) for s in SIZES]
# NOTE(pytorch): bernoulli_(float p) (and so dropout) runs MKL's own generator on Intel CPUs
_INTEL = "GenuineIntel" in (Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else "")
needs_default_bernoulli = pytest.mark.skipif(_INTEL, reason="torch draws bernoulli_(p) with MKL on Intel")


def _same(t, n) -> None:
    a = t.detach().numpy()
    b = np.asarray(n.detach()._data)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), (
        f"{int((a != b).sum())} values differ")


def _check(seed, t_fn, n_fn) -> None:
    torch.manual_seed(seed)
    nd.manual_seed(seed)
    _same(t_fn(torch), n_fn(nd))
    _same(torch.rand(5), nd.rand(5))  # the streams are still in step


def _both(fn):
    return lambda lib: fn(lib)


DTYPES = ["float32", "float64", "float16"]


@pytest.mark.parametrize("size", SIZES, ids=_IDS)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_rand_randn(seed, size, dtype):
    def draw(lib):
        dt = getattr(lib, dtype)
        return lib.cat([lib.rand(*size, dtype=dt).reshape(-1), lib.randn(*size, dtype=dt).reshape(-1)])

    _check(seed, draw, draw)


@pytest.mark.parametrize("size", SIZES, ids=_IDS)
@pytest.mark.parametrize("seed", SEEDS)
def test_fills(seed, size):
    def draw(lib):
        x = lib.empty(*size)
        y = lib.empty(*size, dtype=lib.float64)
        return [x.normal_(0.5, 2.0).clone(), x.uniform_(-0.3, 0.8).clone(), y.normal_(-1.0, 0.25).clone(),
                y.uniform_(2.0, 5.0).clone(), x.exponential_(1.5).clone()]

    torch.manual_seed(seed)
    nd.manual_seed(seed)
    for t, n in zip(draw(torch), draw(nd), strict=True):
        _same(t, n)
    _same(torch.rand(5), nd.rand(5))


@pytest.mark.parametrize("size", SIZES, ids=_IDS)
@pytest.mark.parametrize("seed", SEEDS)
def test_integers(seed, size):
    def draw(lib):
        return lib.cat([lib.randint(0, 10, size).reshape(-1), lib.randint(-5, 2**30, size).reshape(-1),
                        lib.randint(0, 2**40, size).reshape(-1), lib.randperm(math.prod(size))])

    _check(seed, draw, draw)


@pytest.mark.parametrize("size", SIZES, ids=_IDS)
@pytest.mark.parametrize("seed", SEEDS)
def test_bernoulli_tensor_p(seed, size):
    p32, p64 = np.linspace(0, 1, math.prod(size)).reshape(size), np.linspace(1, 0, math.prod(size)).reshape(size)

    def draw(lib):
        a = lib.bernoulli(lib.tensor(p32, dtype=lib.float32))
        b = lib.empty(*size, dtype=lib.float64).bernoulli_(lib.tensor(p64))
        return lib.cat([a.reshape(-1).double(), b.reshape(-1)])

    _check(seed, draw, draw)


@needs_default_bernoulli
@pytest.mark.parametrize("size", SIZES, ids=_IDS)
@pytest.mark.parametrize("seed", SEEDS)
def test_bernoulli_scalar_p_and_dropout(seed, size):
    def draw(lib):
        x = lib.ones(*size)
        F = lib.nn.functional
        return lib.cat([x.clone().bernoulli_(0.3).reshape(-1), F.dropout(x, 0.2).reshape(-1),
                        lib.nn.Dropout(0.5)(x).reshape(-1), F.dropout(x, 0.123).reshape(-1)])

    _check(seed, draw, draw)


@needs_default_bernoulli
@pytest.mark.parametrize("seed", SEEDS)
def test_feature_and_alpha_dropout(seed):
    def draw(lib):
        x = lib.tensor(np.linspace(-2, 2, 4 * 6 * 9, dtype=np.float32).reshape(4, 6, 3, 3))
        F = lib.nn.functional
        return lib.cat([F.dropout2d(x, 0.3).reshape(-1), F.alpha_dropout(x, 0.3, True).reshape(-1),
                        F.feature_alpha_dropout(x, 0.4, True).reshape(-1)])

    _check(seed, draw, draw)


@pytest.mark.parametrize("cols", [1, 2, 7, 16, 100, 1000])
@pytest.mark.parametrize("seed", SEEDS)
def test_multinomial(seed, cols):
    w = np.random.default_rng(cols).random((3, cols)).astype(np.float32) + 0.01

    def draw(lib):
        p = lib.tensor(w)
        k = min(cols, 5)
        return lib.cat([lib.multinomial(p, k).reshape(-1), lib.multinomial(p, 1).reshape(-1),
                        lib.multinomial(p, 9, True).reshape(-1),
                        lib.multinomial(p[0].double(), 4, True).reshape(-1)])

    _check(seed, draw, draw)


@pytest.mark.parametrize("size", SIZES, ids=_IDS)
@pytest.mark.parametrize("seed", SEEDS)
def test_normal_overloads_and_like(seed, size):
    mean = np.linspace(-1, 1, math.prod(size), dtype=np.float32).reshape(size)

    def draw(lib):
        m = lib.tensor(mean)  # not lib.linspace: ndgrad's rounds differently in the last bit
        out = [lib.normal(m, m.abs() + 0.5), lib.normal(m, 2.0), lib.normal(0.5, m.abs()),
               lib.normal(1.0, 3.0, size), lib.rand_like(m), lib.randn_like(m),
               lib.randint_like(m, 3, 50)]
        return lib.cat([o.reshape(-1) for o in out])

    _check(seed, draw, draw)


@pytest.mark.parametrize("seed", SEEDS)
def test_mixed_sequence(seed):
    """One generator through many kinds of call keeps torch's position in its stream, including
    the cached second normal of the scalar Box-Muller path."""
    def draw(lib):
        g = lib.Generator().manual_seed(seed)
        out = [lib.rand(3, generator=g), lib.randn(5, generator=g, dtype=lib.float64),
               lib.randint(0, 7, (9,), generator=g).double(), lib.randn(20, generator=g),
               lib.randn(1, generator=g), lib.rand(17, dtype=lib.float64, generator=g),
               lib.randperm(12, generator=g).double(), lib.empty(3).normal_(generator=g),
               lib.empty(40).normal_(2, 3, generator=g), lib.randn(3, generator=g)]
        return lib.cat([o.double().reshape(-1) for o in out])

    _check(seed, draw, draw)


def test_non_contiguous_fill_draws_in_memory_order():
    torch.manual_seed(3)
    nd.manual_seed(3)
    _same(torch.empty(20, 30).t().normal_(), nd.empty(20, 30).t().normal_())
    _same(torch.empty(20, 30).t().uniform_(), nd.empty(20, 30).t().uniform_())


def test_complex_draws():
    torch.manual_seed(4)
    nd.manual_seed(4)
    _same(torch.randn(33, dtype=torch.complex64), nd.randn(33, dtype=nd.complex64))
    _same(torch.rand(5, dtype=torch.complex128), nd.rand(5, dtype=nd.complex128))
    _same(torch.empty(20, dtype=torch.complex64).normal_(1, 2), nd.empty(20, dtype=nd.complex64).normal_(1, 2))


def test_random_fills():
    torch.manual_seed(5)
    nd.manual_seed(5)
    for dt in ("float32", "float64", "int64", "int32", "int16", "uint8", "bool"):
        _same(torch.empty(50, dtype=getattr(torch, dt)).random_(), nd.empty(50, dtype=getattr(nd, dt)).random_())
    _same(torch.empty(50).random_(3, 90), nd.empty(50).random_(3, 90))
    _same(torch.empty(50, dtype=torch.int64).random_(2**35), nd.empty(50, dtype=nd.int64).random_(2**35))
    _same(torch.empty(50).geometric_(0.3), nd.empty(50).geometric_(0.3))
    _same(torch.empty(50).cauchy_(0.5, 2.0), nd.empty(50).cauchy_(0.5, 2.0))
    _same(torch.empty(50).log_normal_(0.5, 1.5), nd.empty(50).log_normal_(0.5, 1.5))
    _same(torch.rand(5), nd.rand(5))


# --- nn.init and modules ---
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", [(5,), (30, 20), (8, 3, 3, 3)], ids=["5", "30x20", "8x3x3x3"])
def test_init_functions(seed, shape):
    def draw(lib):
        init = lib.nn.init
        w = lib.empty(*shape)
        out = [init.uniform_(w, -0.2, 0.6).clone(), init.normal_(w, 0.1, 2.0).clone(),
               init.trunc_normal_(w).clone(), init.trunc_normal_(w, 0.5, 1.0, 2.0, 3.0).clone()]
        if len(shape) > 1:
            out += [init.xavier_uniform_(w).clone(), init.xavier_normal_(w, 2.0).clone(),
                    init.kaiming_uniform_(w, math.sqrt(5)).clone(),
                    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu").clone()]
        return lib.cat([o.reshape(-1) for o in out])

    _check(seed, draw, draw)


@pytest.mark.parametrize("seed", SEEDS)
def test_orthogonal_draws_torch_normals(seed):
    torch.manual_seed(seed)
    nd.manual_seed(seed)
    t = torch.nn.init.orthogonal_(torch.empty(6, 10))
    n = nd.nn.init.orthogonal_(nd.empty(6, 10))
    np.testing.assert_allclose(np.asarray(n._data), t.numpy(), atol=1e-5)  # LAPACKs differ
    _same(torch.rand(5), nd.rand(5))


@pytest.mark.parametrize("seed", SEEDS)
def test_seeded_modules_get_torch_weights(seed):
    def build(lib):
        nn = lib.nn
        mods = [nn.Linear(20, 30), nn.Conv2d(3, 8, 3), nn.Linear(7, 1, bias=False), nn.Conv1d(4, 6, 5)]
        return lib.cat([p.detach().reshape(-1) for m in mods for p in m.parameters()])

    _check(seed, build, build)


# --- seeds and state ---
def test_default_seed_and_state_layout():
    assert nd.Generator().initial_seed() == torch.Generator().initial_seed() == 67280421310721
    _same(torch.Generator().get_state(), nd.Generator().get_state())
    for seed in (0, 7, 2**32 + 5, 2**63 + 1, -1):
        torch.manual_seed(seed)
        nd.manual_seed(seed)
        assert nd.initial_seed() == torch.initial_seed()
        _same(torch.get_rng_state(), nd.get_rng_state())
        torch.randn(3, dtype=torch.float64)  # leaves a cached normal
        nd.randn(3, dtype=nd.float64)
        torch.randint(0, 5, (700,))
        nd.randint(0, 5, (700,))
        _same(torch.get_rng_state(), nd.get_rng_state())


def test_state_crosses_over():
    torch.manual_seed(11)
    torch.randn(7, dtype=torch.float64)
    state = torch.get_rng_state()
    nd.set_rng_state(nd.tensor(state.numpy()))
    _same(torch.randn(9, dtype=torch.float64), nd.randn(9, dtype=nd.float64))  # the cached normal too
    nd.randn(3)  # leaves a cached normal, which the state carries back to torch
    torch.set_rng_state(torch.from_numpy(np.asarray(nd.get_rng_state()._data).copy()))
    _same(torch.get_rng_state(), nd.get_rng_state())
    _same(torch.randn(5, dtype=torch.float64), nd.randn(5, dtype=nd.float64))
    with pytest.raises(RuntimeError, match="CPUGeneratorImplState of size 5056"):
        nd.set_rng_state(nd.zeros(10, dtype=nd.uint8))
    with pytest.raises(TypeError, match="ByteTensor"):
        nd.set_rng_state(nd.zeros(5056))


def test_seed_checks():
    with pytest.raises(ValueError, match="Overflow"):
        nd.manual_seed(2**64)
    with pytest.raises(RuntimeError, match="expected a long"):
        nd.Generator().manual_seed(1.5)
    s = nd.seed()
    assert nd.initial_seed() == s and 0 <= s < 2**64
