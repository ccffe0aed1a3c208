"""``ndgrad.fft`` beyond the generic table: every function over dtypes, sizes and norm modes
against torch (values, dtypes, gradients, double backward, forward AD with complex tangents),
bad arguments raising PyTorch's error, sample frequencies and shifts, ``out=``, and gradcheck
through compositions (a filter in the frequency domain, a round trip)."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd
from ndgrad.autograd import gradcheck, gradgradcheck

rng = np.random.default_rng(0)

ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
TWO_D = ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2"]
N_D = ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"]
REAL_ONLY = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}


def _data(dtype, shape):
    """An array of ``dtype`` (a name) with ``shape``."""
    if dtype.startswith("complex"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.startswith("int"):
        return rng.integers(-4, 5, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _inputs(name):
    return ["float32", "float64", "int64"] + ([] if name in REAL_ONLY else ["complex64", "complex128"])


def _close(dtype):
    single = dtype in ("float32", "complex64", "int64")  # int64: the default float's precision
    return dict(rtol=1e-4, atol=1e-5) if single else dict(rtol=1e-10, atol=1e-12)


# --- values and dtypes ---
ONE_D_ARGS = [{}, {"n": 3}, {"n": 9}, {"dim": 0}, {"norm": "ortho"}, {"norm": "forward"},
              {"n": 4, "dim": -2, "norm": "backward"}]


@pytest.mark.parametrize("kwargs", ONE_D_ARGS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()) or "default")
@pytest.mark.parametrize("name", ONE_D)
def test_one_d_values(ref, name, kwargs):
    for dtype in _inputs(name):
        a = _data(dtype, (4, 6))
        ref.same(lambda T: getattr(T.fft, name)(T.tensor(a), **kwargs), **_close(dtype))


ND_ARGS = [{}, {"s": (3, 5)}, {"s": (-1, 8)}, {"dim": (0, 2)}, {"dim": (2, 0), "s": (3, 4)},
           {"dim": 1, "norm": "ortho"}, {"s": (2,), "norm": "forward"}, {"dim": [-1, 0, 1]}]


@pytest.mark.parametrize("kwargs", ND_ARGS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()) or "default")
@pytest.mark.parametrize("name", N_D)
def test_n_d_values(ref, name, kwargs):
    for dtype in _inputs(name):
        a = _data(dtype, (3, 4, 5))
        ref.same(lambda T: getattr(T.fft, name)(T.tensor(a), **kwargs), **_close(dtype))


@pytest.mark.parametrize("kwargs", [{}, {"s": (3, 5)}, {"dim": (0, 2)}, {"dim": (-1, -3), "norm": "ortho"}],
                         ids=["default", "s", "dim", "dim_rev_ortho"])
@pytest.mark.parametrize("name", TWO_D)
def test_two_d_values(ref, name, kwargs):
    for dtype in _inputs(name):
        a = _data(dtype, (3, 4, 5))
        ref.same(lambda T: getattr(T.fft, name)(T.tensor(a), **kwargs), **_close(dtype))


def test_public_module_and_promotion(ref):
    import ndgrad as torch  # the user's spelling

    x = torch.randn(4, 6)
    assert torch.fft.rfft(x).dtype == torch.complex64 and torch.fft.rfft(x).shape == (4, 4)
    assert torch.fft.fft(x.double()).dtype == torch.complex128
    assert torch.fft.fft(torch.arange(4)).dtype == torch.complex64  # the default float's complex
    assert torch.fft.irfft(torch.fft.rfft(x), n=6).dtype == torch.float32
    np.testing.assert_allclose(torch.fft.irfft(torch.fft.rfft(x), n=6).numpy(), x.numpy(), atol=1e-6)
    ref.same(lambda T: T.fft.fftn(T.tensor(2.5)))  # 0-d: no dims to transform
    c = _data("complex128", (2, 3))
    ref.same(lambda T: T.fft.fftn(T.tensor(c), dim=()))
    ref.same(lambda T: T.fft.fft(T.tensor([True, False, True])), rtol=1e-6)


def test_default_dtype_float64(ref):
    prev = nd.get_default_dtype()
    nd.set_default_dtype(nd.float64)
    try:
        assert nd.fft.fft(nd.arange(4)).dtype == nd.complex128
        assert nd.fft.fftfreq(4).dtype == nd.float64
    finally:
        nd.set_default_dtype(prev)


# --- gradients: backward, double backward and forward AD against torch ---
# (name, input dtype, input shape, kwargs)
GRAD_CASES = [
    ("fft", "float64", (5,), {}), ("fft", "complex128", (3, 4), {"n": 6, "norm": "ortho"}),
    ("ifft", "float64", (2, 5), {"n": 3, "dim": 0}), ("ifft", "complex128", (4,), {"norm": "forward"}),
    ("rfft", "float64", (6,), {}), ("rfft", "float64", (3, 5), {"n": 8, "norm": "ortho"}),
    ("rfft", "float64", (4, 7), {"n": 5, "dim": 0, "norm": "forward"}),
    ("irfft", "complex128", (4,), {}), ("irfft", "complex128", (3, 4), {"n": 7}),
    ("irfft", "complex128", (5, 3), {"n": 3, "dim": 0, "norm": "ortho"}),
    ("irfft", "float64", (4,), {"norm": "forward"}),
    ("hfft", "complex128", (4,), {}), ("hfft", "complex128", (2, 4), {"n": 5, "norm": "ortho"}),
    ("hfft", "float64", (3,), {"n": 6}),
    ("ihfft", "float64", (6,), {}), ("ihfft", "float64", (2, 5), {"n": 7, "norm": "forward"}),
    ("fft2", "complex128", (3, 4), {"s": (4, 3)}), ("fft2", "float64", (2, 3, 4), {}),
    ("ifft2", "float64", (3, 4), {"norm": "ortho"}),
    ("rfft2", "float64", (3, 4), {}), ("rfft2", "float64", (2, 3, 5), {"s": (4, 6), "dim": (0, 2)}),
    ("irfft2", "complex128", (3, 3), {}), ("irfft2", "complex128", (2, 3, 4), {"s": (4, 5)}),
    ("hfft2", "complex128", (3, 3), {"norm": "forward"}), ("ihfft2", "float64", (3, 4), {}),
    ("fftn", "complex128", (2, 3, 4), {"dim": (0, 2)}), ("ifftn", "float64", (2, 3, 4), {}),
    ("rfftn", "float64", (2, 3, 4), {"dim": (2, 0)}), ("irfftn", "complex128", (2, 3, 4), {"s": (3, 2, 6)}),
    ("irfftn", "complex128", (2, 3, 4), {"dim": (1, 0)}),
    ("hfftn", "complex128", (2, 3), {"s": (3, 5)}), ("ihfftn", "float64", (2, 3, 4), {"norm": "ortho"}),
]


def _gid(c):
    return f"{c[0]}-{c[1]}-{'-'.join(f'{a}={b}' for a, b in c[3].items()) or 'default'}"


def _grad_out(t):
    g = rng.standard_normal(t.shape)
    return g + 1j * rng.standard_normal(t.shape) if t.is_complex() else g


@pytest.mark.parametrize("case", GRAD_CASES, ids=[_gid(c) for c in GRAD_CASES])
def test_gradients_match_torch(torch_or_skip, case):
    torch = torch_or_skip
    name, dtype, shape, kwargs = case
    a = _data(dtype, shape)
    x, tx = nd.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = getattr(nd.fft, name)(x, **kwargs), getattr(torch.fft, name)(tx, **kwargs)
    g = _grad_out(ty)
    # first order, keeping the graph of the gradient
    (gx,) = nd.autograd.grad(y, x, nd.tensor(g), create_graph=True)
    (tgx,) = torch.autograd.grad(ty, tx, torch.tensor(g), create_graph=True)
    assert gx.dtype == x.dtype
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().resolve_conj().numpy(), rtol=1e-10, atol=1e-12)
    # second order: the gradient's own gradient, with respect to the input and to the grad_output
    h = _grad_out(tgx)
    gg = nd.tensor(g, requires_grad=True)
    tgg = torch.tensor(g, requires_grad=True)
    (gx2,) = nd.autograd.grad(y, x, gg, create_graph=True)
    (tgx2,) = torch.autograd.grad(ty, tx, tgg, create_graph=True)
    (ggg,) = nd.autograd.grad(gx2, gg, nd.tensor(h))
    (tggg,) = torch.autograd.grad(tgx2, tgg, torch.tensor(h))
    np.testing.assert_allclose(ggg.numpy(), tggg.resolve_conj().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[_gid(c) for c in GRAD_CASES])
def test_forward_ad_matches_torch(torch_or_skip, case):
    """Complex inputs too (the generic forward-AD tests take real tangents only)."""
    torch = torch_or_skip
    name, dtype, shape, kwargs = case
    a, t = _data(dtype, shape), _data(dtype, shape)

    def run(T):
        fwad = T.autograd.forward_ad
        with fwad.dual_level():
            x = fwad.make_dual(T.tensor(a), T.tensor(t))
            return fwad.unpack_dual(getattr(T.fft, name)(x, **kwargs)).tangent

    got, want = run(nd), run(torch)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.resolve_conj().numpy(), rtol=1e-10, atol=1e-12)


def test_node_names_and_double_backward_graph():
    x = nd.tensor(_data("float64", (6,)), requires_grad=True)
    y = nd.fft.rfft(x)
    assert y.grad_fn.name() == "FftR2CBackward0"
    z = nd.fft.irfft(y * 2)
    assert z.grad_fn.name() == "FftC2RBackward0"
    assert nd.fft.ifft(y).grad_fn.name() == "FftC2CBackward0"
    (g,) = nd.autograd.grad(z.square().sum(), x, create_graph=True)
    names, todo = set(), [g.grad_fn]
    while todo:  # the gradient's graph: each primitive's gradient is another primitive
        node = todo.pop()
        names.add(node.name())
        todo += [e[0] for e in node.next_functions if e[0] is not None]
    assert {"FftR2CBackward0", "FftC2CBackward0", "FftC2RBackward0"} <= names


# --- gradcheck through compositions (float64) ---
def _w(*shape):
    return nd.tensor(rng.standard_normal(shape + (2,)), dtype=nd.float64, requires_grad=True)


def test_gradcheck_frequency_filter():
    """irfft(rfft(x) * w): a filter applied in the frequency domain, w complex."""
    x = nd.tensor(rng.standard_normal((2, 7)), dtype=nd.float64, requires_grad=True)
    w = _w(4)

    def f(x, w):
        return nd.fft.irfft(nd.fft.rfft(x) * nd.view_as_complex(w), n=7)

    assert gradcheck(f, (x, w))
    assert gradgradcheck(f, (x, w))


def test_gradcheck_two_d_filter_and_shift():
    x = nd.tensor(rng.standard_normal((4, 6)), dtype=nd.float64, requires_grad=True)
    w = _w(4, 4)

    def f(x, w):
        spec = nd.fft.fftshift(nd.fft.rfft2(x, norm="ortho"), dim=0) * nd.view_as_complex(w)
        return nd.fft.irfft2(nd.fft.ifftshift(spec, dim=0), s=(4, 6), norm="ortho")

    assert gradcheck(f, (x, w))
    assert gradgradcheck(f, (x, w))


def test_gradcheck_complex_chain_with_sizes():
    z = _w(3, 5)

    def f(z):
        c = nd.view_as_complex(z)
        y = nd.fft.ifft(nd.fft.fft2(c, s=(4, 4)), n=6, dim=0, norm="ortho")
        return nd.view_as_real(nd.fft.hfft(y, n=5)[None] * 1j + nd.fft.ihfft(y.real, n=3).sum())

    assert gradcheck(f, (z,))
    assert gradgradcheck(f, (z,))


def test_round_trips(ref):
    a = _data("float64", (3, 8))
    c = _data("complex128", (3, 8))
    for norm in ("backward", "ortho", "forward"):
        x, z = nd.tensor(a), nd.tensor(c)
        np.testing.assert_allclose(nd.fft.ifft(nd.fft.fft(z, norm=norm), norm=norm).numpy(), c, atol=1e-12)
        np.testing.assert_allclose(nd.fft.irfftn(nd.fft.rfftn(x, norm=norm), s=(3, 8), norm=norm).numpy(), a,
                                   atol=1e-12)
        np.testing.assert_allclose(nd.fft.hfft(nd.fft.ihfft(x, norm=norm), n=8, norm=norm).numpy(), a, atol=1e-12)


# --- errors: PyTorch's type and message ---
ERRORS = [
    ("rfft_complex", lambda T: T.fft.rfft(T.ones(4, dtype=T.complex64)), RuntimeError),
    ("ihfft_complex", lambda T: T.fft.ihfft(T.ones(4, dtype=T.complex128)), RuntimeError),
    ("rfft2_complex", lambda T: T.fft.rfft2(T.ones(2, 4, dtype=T.complex64)), RuntimeError),
    ("rfftn_complex", lambda T: T.fft.rfftn(T.ones(2, 4, dtype=T.complex64)), RuntimeError),
    ("ihfftn_complex", lambda T: T.fft.ihfftn(T.ones(2, 4, dtype=T.complex128)), RuntimeError),
    ("half", lambda T: T.fft.fft(T.ones(4, dtype=T.float16)), RuntimeError),
    ("rfft_half", lambda T: T.fft.rfft(T.ones(4, dtype=T.float16)), RuntimeError),
    ("n_zero", lambda T: T.fft.fft(T.ones(4), n=0), RuntimeError),
    ("n_negative", lambda T: T.fft.irfft(T.ones(4), n=-1), RuntimeError),
    ("irfft_one_point", lambda T: T.fft.irfft(T.ones(1, dtype=T.complex64)), RuntimeError),
    ("empty_signal", lambda T: T.fft.fft(T.ones(0)), RuntimeError),
    ("dim_out_of_range", lambda T: T.fft.fft(T.ones(2, 3), dim=2), IndexError),
    ("dim_negative_out_of_range", lambda T: T.fft.rfft(T.ones(2, 3), dim=-3), IndexError),
    ("0d", lambda T: T.fft.fft(T.tensor(1.0)), IndexError),
    ("fft2_of_1d", lambda T: T.fft.fft2(T.ones(5)), IndexError),
    ("bad_norm", lambda T: T.fft.fft(T.ones(4), norm="bad"), RuntimeError),
    ("dup_dims", lambda T: T.fft.fft2(T.ones(3, 4), dim=(0, 0)), RuntimeError),
    ("s_dim_lengths", lambda T: T.fft.fftn(T.ones(3, 4), s=(3,), dim=(0, 1)), RuntimeError),
    ("s_too_long", lambda T: T.fft.fftn(T.ones(3, 4), s=(2, 5, 3)), RuntimeError),
    ("s_zero", lambda T: T.fft.fftn(T.ones(3, 4), s=(0, 3)), RuntimeError),
    ("rfftn_no_dims", lambda T: T.fft.rfftn(T.ones(3, 4), dim=()), RuntimeError),
    ("irfftn_no_dims", lambda T: T.fft.irfftn(T.ones(3, 4, dtype=T.complex64), dim=()), RuntimeError),
    ("fftfreq_int_dtype", lambda T: T.fft.fftfreq(4, dtype=T.int64), RuntimeError),
    ("fftfreq_negative", lambda T: T.fft.fftfreq(-1), RuntimeError),
    ("fftfreq_float_n", lambda T: T.fft.fftfreq(4.0), TypeError),
    ("fftshift_0d", lambda T: T.fft.fftshift(T.tensor(1.0)), RuntimeError),
    ("fftshift_dim", lambda T: T.fft.fftshift(T.ones(2, 3), dim=5), IndexError),
    ("out_real", lambda T: T.fft.fft(T.ones(4), out=T.empty(0)), RuntimeError),
]


@pytest.mark.parametrize("fn,exc", [pytest.param(f, e, id=i) for i, f, e in ERRORS])
def test_errors_match_torch(ref, fn, exc):
    ref.raises(fn, exc)


# --- sample frequencies, shifts, out= ---
@pytest.mark.parametrize("n", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("d", [1.0, 0.3, 2, 0.0])
def test_fftfreq_values(ref, n, d):
    for dtype in (None, "float64", "float16"):
        def f(T, fn):
            kw = {} if dtype is None else {"dtype": getattr(T, dtype)}
            return fn(T)(n, d, **kw)

        ref.same(lambda T: f(T, lambda T: T.fft.fftfreq), rtol=1e-6, atol=0)
        ref.same(lambda T: f(T, lambda T: T.fft.rfftfreq), rtol=1e-6, atol=0)


def test_fftfreq_options(ref):
    f = nd.fft.fftfreq(4, requires_grad=True)
    assert f.requires_grad and f.is_leaf
    ref.same(lambda T: T.fft.rfftfreq(6, d=T.tensor(0.5).item()))
    out = nd.empty(0)
    assert nd.fft.fftfreq(3, out=out) is out
    np.testing.assert_allclose(out.numpy(), [0, 1 / 3, -1 / 3], rtol=1e-6)


@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 1), [1]])
def test_shifts(ref, dim):
    a = _data("float64", (4, 5))
    ref.same(lambda T: T.fft.fftshift(T.tensor(a), dim=dim))
    ref.same(lambda T: T.fft.ifftshift(T.tensor(a), dim=dim))
    x = nd.tensor(a)
    np.testing.assert_array_equal(nd.fft.ifftshift(nd.fft.fftshift(x, dim), dim).numpy(), a)


def test_shift_puts_zero_frequency_in_the_middle(ref):
    ref.same(lambda T: T.fft.fftshift(T.fft.fftfreq(5)))
    ref.same(lambda T: T.fft.fftshift(T.fft.fftfreq(6)))
    ref.same(lambda T: T.fft.ifftshift(T.fft.fftshift(T.arange(7))))


def test_out(ref):
    a = _data("float64", (3, 4))

    def run(T):
        out = T.empty(0, dtype=T.complex128)
        res = T.fft.rfft2(T.tensor(a), out=out)
        return res is out, out

    ref.same(run)
    x = nd.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        nd.fft.fft(x, out=nd.empty(0, dtype=nd.complex128))


def test_doctests():
    import doctest

    import ndgrad._ops.fft as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5 and result.failed == 0
