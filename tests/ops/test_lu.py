"""The LU family against PyTorch beyond the generic table: values (P L U = A; LU and pivots as
torch's), pivoting on ties, NaNs and zero columns, singular input and ``info``, ``lu_unpack``'s
and ``lu_solve``'s variants, gradients and forward AD of every variant, the legacy forms, and
errors (type and wording).

Scenarios run under ndgrad always and under torch where it is installed (the ``ref`` fixture);
oracle-only checks take ``torch_or_skip``."""

from __future__ import annotations

import doctest
import warnings

import numpy as np
import pytest

import ndgrad as nd
from ndgrad.autograd import gradcheck, gradgradcheck

rng = np.random.default_rng(0)

SHAPES = [(3, 3), (5, 5), (4, 2), (2, 4), (2, 3, 3), (2, 1, 5, 3), (3, 2, 4), (1, 1), (0, 3), (3, 0),
          (0, 2, 2)]


def _rand(shape, dtype=np.float64):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _tol(dtype):
    if dtype in (np.float32, np.complex64):
        return {"rtol": 1e-4, "atol": 1e-5}
    return {"rtol": 1e-9, "atol": 1e-12}


# --- values ---
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_factor_values_match_torch(ref, shape, dtype):
    a = _rand(shape, dtype)
    # LU and pivots of random input (no ties) are torch's; P L U gives A back
    res = ref.same(lambda T: T.linalg.lu_factor_ex(T.tensor(a)), **_tol(dtype))
    assert type(res).__name__ == "linalg_lu_factor_ex" and res.pivots.dtype == nd.int32
    ref.same(lambda T: tuple(T.linalg.lu_factor(T.tensor(a))), **_tol(dtype))
    P, L, U = ref.same(lambda T: T.linalg.lu(T.tensor(a)), **_tol(dtype))
    np.testing.assert_allclose((P @ L @ U).numpy(), a, **_tol(dtype))
    ref.same(lambda T: T.lu_unpack(*T.linalg.lu_factor(T.tensor(a))), **_tol(dtype))


def test_small_matrices_give_torch_bits(torch_or_skip):
    # getrf2 scales a column by the pivot's reciprocal; so do we (small matrices: bit for bit)
    a = rng.standard_normal((200, 5, 5))
    for dtype in (np.float64, np.float32):
        got = nd.linalg.lu_factor(nd.tensor(a.astype(dtype)))
        want = torch_or_skip.linalg.lu_factor(torch_or_skip.tensor(a.astype(dtype)))
        np.testing.assert_array_equal(got.LU.numpy(), want.LU.numpy())
        np.testing.assert_array_equal(got.pivots.numpy(), want.pivots.numpy())


def test_pivoting_actually_permutes():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    LU, piv = nd.linalg.lu_factor(nd.tensor(a))
    assert piv.tolist() == [2, 2]
    np.testing.assert_allclose(LU.numpy(), [[3.0, 4.0], [1 / 3, 2 - 4 / 3]])
    P = nd.linalg.lu(nd.tensor(a)).P
    assert P.tolist() == [[0.0, 1.0], [1.0, 0.0]]


@pytest.mark.parametrize("case", [
    [[1.0, 1.0], [-1.0, 3.0]],                            # a tie: the first row stays
    [[1.0, 1.0, 2.0], [-1.0, 3.0, 2.0], [1.0, 0.0, 0.0]],  # ties in two columns
    [[float("nan"), 1.0], [2.0, 3.0]],                    # a NaN first: it is the pivot
    [[1.0, 1.0], [float("nan"), 3.0]],                    # a NaN later: never the pivot
    [[1.0, float("nan")], [2.0, 3.0]],
    [[0.0, 1.0], [0.0, 2.0]],                             # a zero column: no swap, info 1
    [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]],  # tall, info 2
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
    [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],  # U[3,3] exactly zero
], ids=lambda c: str(np.array(c).shape))
def test_ties_nans_and_zero_pivots_as_torch(ref, case):
    a = np.array(case)
    for dtype in (np.float64, np.float32, np.complex128):
        ref.same(lambda T, d=dtype: T.linalg.lu_factor_ex(T.tensor(a.astype(d))))
        ref.same(lambda T, d=dtype: T.linalg.lu(T.tensor(a.astype(d))))


def test_complex_pivot_uses_abs_re_plus_abs_im(ref):
    # LAPACK's izamax compares |re| + |im|: 2+2j (4) beats 3.5 although |3.5| > |2+2j|
    a = np.array([[3.5, 1.0], [2.0 + 2.0j, 1.0]])
    res = ref.same(lambda T: T.linalg.lu_factor(T.tensor(a)))
    assert res.pivots.tolist() == [2, 2]


def test_singular_batch_info(ref):
    a = np.stack([np.eye(3), np.zeros((3, 3)), [[1.0, 0, 0], [0, 0, 0], [0, 0, 2]]])
    res = ref.same(lambda T: T.linalg.lu_factor_ex(T.tensor(a)))
    assert res.info.tolist() == [0, 1, 2]
    ref.same(lambda T: T.linalg.lu(T.tensor(a)))


@pytest.mark.parametrize("unpack_data,unpack_pivots", [(True, False), (False, True), (False, False)])
@pytest.mark.parametrize("shape", [(3, 3), (2, 5, 3), (3, 4)], ids=str)
def test_lu_unpack_variants(ref, shape, unpack_data, unpack_pivots):
    a = _rand(shape)
    res = ref.same(lambda T: T.lu_unpack(*T.linalg.lu_factor(T.tensor(a)), unpack_data, unpack_pivots))
    assert type(res).__name__ == "lu_unpack"


def test_lu_unpack_any_lu_data_and_dtype(ref):
    data = rng.standard_normal((2, 3, 3))
    piv = np.array([[3, 3, 3], [1, 3, 3]], np.int32)
    ref.same(lambda T: T.lu_unpack(T.tensor(data), T.tensor(piv)))
    ref.same(lambda T: T.lu_unpack(T.tensor(np.arange(9).reshape(3, 3)), T.tensor(piv[0])))


# --- lu_solve ---
def _system(n=3, batch=(), k=2):
    a = rng.standard_normal(batch + (n, n)) + 0.5 * np.eye(n)
    return a, rng.standard_normal(batch + (n, k))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_lu_solve_variants(ref, left, adjoint, dtype):
    a = (_rand((2, 4, 4), dtype) + 2 * np.eye(4)).astype(dtype)
    b = _rand((3, 1, 4, 2) if left else (3, 1, 2, 4), dtype)
    x = ref.same(lambda T: T.linalg.lu_solve(*T.linalg.lu_factor(T.tensor(a)), T.tensor(b),
                                             left=left, adjoint=adjoint), **_tol(dtype))
    op = np.conj(np.swapaxes(a, -1, -2)) if adjoint else a
    np.testing.assert_allclose((op @ x.numpy()) if left else (x.numpy() @ op), np.broadcast_to(b, x.shape),
                               **_tol(dtype))


def test_lu_solve_of_singular_factor(ref):
    # a zero pivot: division by zero gives infinities and NaNs, as LAPACK's getrs
    ref.same(lambda T: T.linalg.lu_solve(*T.linalg.lu_factor_ex(T.zeros(2, 2, dtype=T.float64))[:2],
                                         T.ones(2, 1, dtype=T.float64)))


def test_lu_solve_empty(ref):
    ref.same(lambda T: T.linalg.lu_solve(T.zeros(0, 0), T.zeros(0, dtype=T.int32), T.zeros(0, 2)))
    ref.same(lambda T: T.linalg.lu_solve(T.eye(2).expand(0, 2, 2), T.ones(0, 2, dtype=T.int32),
                                         T.ones(2, 3)))


# --- gradients ---
def _grads(T, fn, *arrays, seed=1):
    """fn's outputs' gradients for fixed random grad_outputs, as numpy arrays."""
    xs = [T.tensor(a, requires_grad=True) for a in arrays]
    outs = [o for o in fn(T, *xs) if o.requires_grad]
    g = np.random.default_rng(seed)
    gos = [T.tensor(g.standard_normal(tuple(o.shape)) + (1j * g.standard_normal(tuple(o.shape))
                                                          if o.is_complex() else 0)) for o in outs]
    T.autograd.backward(outs, gos)
    return [x.grad for x in xs]


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 5), (2, 4, 2), (2, 2, 4)], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_factor_gradients_match_torch(ref, shape, dtype):
    a = _rand(shape, dtype)
    ref.same(lambda T: _grads(T, lambda T, x: T.linalg.lu(x)[1:], a))
    ref.same(lambda T: _grads(T, lambda T, x: T.linalg.lu_factor(x)[:1], a))
    ref.same(lambda T: _grads(T, lambda T, x: T.linalg.lu_factor_ex(x)[:1], a))
    ref.same(lambda T: _grads(T, lambda T, x: T.lu_unpack(*T.linalg.lu_factor(x))[1:], a))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_lu_solve_gradients_match_torch(ref, left, adjoint, dtype):
    a = (_rand((2, 3, 3), dtype) + 2 * np.eye(3)).astype(dtype)
    b = _rand((4, 1, 3, 2) if left else (4, 1, 2, 3), dtype)

    def f(T, x, y):  # through the factorisation too: A's gradient from both ops
        return (T.linalg.lu_solve(*T.linalg.lu_factor(x), y, left=left, adjoint=adjoint),)

    ref.same(lambda T: _grads(T, f, a, b))


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (2, 4)], ids=str)
def test_double_backward_matches_torch(ref, shape):
    a = _rand(shape)

    def hvp(T):
        x = T.tensor(a, requires_grad=True)
        L, U = T.linalg.lu(x)[1:]
        y = (L.sin().sum() + (U * U).sum())
        (g,) = T.autograd.grad(y, x, create_graph=True)
        (h,) = T.autograd.grad((g * g).sum(), x)
        return h

    ref.same(hvp, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_gradcheck_through_factor(left, adjoint):
    a = nd.tensor(rng.standard_normal((3, 3)) + 3 * np.eye(3), requires_grad=True)
    b = nd.tensor(rng.standard_normal((3, 2) if left else (2, 3)), requires_grad=True)

    def f(x, y):
        return nd.linalg.lu_solve(*nd.linalg.lu_factor(x), y, left=left, adjoint=adjoint)

    assert gradcheck(f, (a, b))
    assert gradgradcheck(f, (a, b))


def test_forward_ad_matches_torch(ref):
    a, b = _rand((3, 4)), _rand((2, 3, 3)) + 2 * np.eye(3)
    ta, tb, tc = _rand((3, 4)), _rand((2, 3, 3)), _rand((2, 3, 1))
    c = _rand((2, 3, 1))

    def jvp(T):
        fw = T.autograd.forward_ad
        with fw.dual_level():
            x = fw.make_dual(T.tensor(a), T.tensor(ta))
            y = fw.make_dual(T.tensor(b), T.tensor(tb))
            z = fw.make_dual(T.tensor(c), T.tensor(tc))
            L, U = T.linalg.lu(x)[1:]
            LU, piv = T.linalg.lu_factor(y)
            X = T.linalg.lu_solve(LU, piv, z, adjoint=True)
            return [fw.unpack_dual(t).tangent for t in (L, U, LU, X)]

    ref.same(jvp)


def test_p_pivots_info_not_differentiable(ref):
    def flags(T):
        x = T.tensor(_rand((3, 3)), requires_grad=True)
        P, L, U = T.linalg.lu(x)
        LU, piv, info = T.linalg.lu_factor_ex(x)
        P2 = T.lu_unpack(LU, piv).P
        return [t.requires_grad for t in (P, L, U, LU, piv, info, P2)]

    assert ref.same(flags) == [False, True, True, True, False, False, False]


def test_node_names():
    x = nd.tensor(_rand((3, 3)), requires_grad=True)
    LU, piv = nd.linalg.lu_factor(x)
    assert LU.grad_fn.name() == "LinalgLuFactorExBackward0"
    assert nd.linalg.lu(x).L.grad_fn.name() == "LinalgLuBackward0"
    assert nd.lu_unpack(LU, piv).L.grad_fn.name() == "LuUnpackBackward0"
    assert nd.linalg.lu_solve(LU, piv, x).grad_fn.name() == "LinalgLuSolveBackward0"


# --- legacy forms ---
def test_legacy_lu_and_lu_solve(ref):
    a, b = _system()

    def legacy(T):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            A = T.tensor(a)
            LU, piv = T.lu(A)
            info = T.lu(A, get_infos=True)
            zero = T.lu(T.zeros(3, 3), get_infos=False)  # NOTE(pytorch): torch.lu never raises
            return (type(LU), LU, piv, tuple(info), type(info).__name__, A.lu(), tuple(zero),
                    T.lu_solve(T.tensor(b), LU, piv), T.tensor(b).lu_solve(LU, piv))

    got = legacy(nd)
    assert got[0] is nd.Tensor and got[4] == "_lu_with_info"
    ref.same(lambda T: legacy(T)[1:])


def test_legacy_deprecation_warnings(ref):
    a, b = _system()
    for fn in (lambda T: T.lu(T.tensor(a)),
               lambda T: T.lu_solve(T.tensor(b), *T.linalg.lu_factor(T.tensor(a)))):
        with pytest.warns(UserWarning, match="is deprecated in favor of"):
            fn(nd)


def test_out(ref):
    a = _rand((3, 3))

    def with_out(T):
        LU, piv = T.empty(0, dtype=T.float64), T.empty(0, dtype=T.int32)
        r = T.linalg.lu_factor(T.tensor(a), out=(LU, piv))
        return r[0] is LU, LU, piv

    ref.same(with_out)


# --- errors ---
def _lu_data():
    return np.array([[2.0, 1.0, 0.5], [0.5, 3.0, 1.0], [0.25, 0.5, 4.0]]), np.array([2, 3, 3], np.int32)


FACTOR_ERRORS = {
    "1d": (lambda T: T.linalg.lu_factor(T.zeros(3)), RuntimeError),
    "1d_ex": (lambda T: T.linalg.lu_factor_ex(T.zeros(3)), RuntimeError),
    "1d_lu": (lambda T: T.linalg.lu(T.zeros(3)), RuntimeError),
    "long": (lambda T: T.linalg.lu_factor(T.zeros(3, 3, dtype=T.long)), NotImplementedError),
    "long_no_pivot": (lambda T: T.linalg.lu_factor(T.zeros(3, 3, dtype=T.long), pivot=False),
                      NotImplementedError),
    "half": (lambda T: T.linalg.lu_factor_ex(T.zeros(3, 3, dtype=T.float16)), NotImplementedError),
    "bfloat16": (lambda T: T.linalg.lu(T.zeros(3, 3, dtype=T.bfloat16)), NotImplementedError),
    "bool": (lambda T: T.linalg.lu(T.zeros(3, 3, dtype=T.bool)), NotImplementedError),
    "no_pivot": (lambda T: T.linalg.lu_factor(T.eye(3), pivot=False), RuntimeError),
    "no_pivot_ex": (lambda T: T.linalg.lu_factor_ex(T.eye(3), pivot=False), RuntimeError),
    "no_pivot_lu": (lambda T: T.linalg.lu(T.eye(3), pivot=False), RuntimeError),
    "no_pivot_1d": (lambda T: T.linalg.lu_factor(T.zeros(3), pivot=False), RuntimeError),
    "singular": (lambda T: T.linalg.lu_factor(T.tensor([[1.0, 0.0], [0.0, 0.0]])), RuntimeError),
    "singular_batch": (lambda T: T.linalg.lu_factor(T.stack([T.eye(3), T.zeros(3, 3)])), RuntimeError),
    "singular_batch_of_one": (lambda T: T.linalg.lu_factor(T.zeros(1, 3, 3)), RuntimeError),
    "singular_wide": (lambda T: T.linalg.lu_factor(T.zeros(2, 3, 4).index_fill(0, T.tensor([0]), 1.0)),
                      RuntimeError),
    "check_errors": (lambda T: T.linalg.lu_factor_ex(T.zeros(2, 2), check_errors=True), RuntimeError),
    "check_errors_batch": (lambda T: T.linalg.lu_factor_ex(T.stack([T.eye(2), T.zeros(2, 2)]),
                                                           check_errors=True), RuntimeError),
}


@pytest.mark.parametrize("case", FACTOR_ERRORS)
def test_factor_errors(ref, case):
    fn, exc = FACTOR_ERRORS[case]
    ref.raises(fn, exc)


def test_singular_message():
    with pytest.raises(RuntimeError) as e:
        nd.linalg.lu_factor(nd.stack([nd.eye(2), nd.tensor([[1.0, 0.0], [0.0, 0.0]])]))
    assert str(e.value) == (
        "torch.linalg.lu_factor: (Batch element 1): U[2,2] is zero and using it on lu_solve would "
        "result in a division by zero. If you still want to perform the factorization, consider calling "
        "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def _solve_case(lu=None, piv=None, b=None, **kw):
    def fn(T):
        LU, p = _lu_data()
        args = [LU if lu is None else lu(LU), p if piv is None else piv(p),
                np.ones((3, 2)) if b is None else b]
        return T.linalg.lu_solve(*(T.tensor(x) for x in args), **kw)
    return fn


SOLVE_ERRORS = {
    "LU_1d": _solve_case(lu=lambda a: a[0]),
    "LU_1d_B_1d": _solve_case(lu=lambda a: a[0], b=np.ones(3)),
    "LU_long": _solve_case(lu=lambda a: a.astype(np.int64), b=np.ones((3, 2), np.int64)),
    "LU_long_only": _solve_case(lu=lambda a: a.astype(np.int64)),
    "B_long": _solve_case(b=np.ones((3, 2), np.int64)),
    "B_float32_pivots_long": _solve_case(piv=lambda p: p.astype(np.int64), b=np.ones((3, 2), np.float32)),
    "pivots_long": _solve_case(piv=lambda p: p.astype(np.int64)),
    "not_square_pivots_long": _solve_case(lu=lambda a: a[:2], piv=lambda p: p.astype(np.int64)),
    "not_square": _solve_case(lu=lambda a: a[:2], piv=lambda p: p[:2]),
    "not_square_B_1d": _solve_case(lu=lambda a: a[:2], b=np.ones(3)),
    "not_square_B_bad": _solve_case(lu=lambda a: a[:2], b=np.ones((2, 2))),
    "B_1d": _solve_case(b=np.ones(3)),
    "B_1d_right": _solve_case(b=np.ones(3), left=False),
    "B_bad": _solve_case(b=np.ones((4, 2))),
    "B_bad_right": _solve_case(b=np.ones((2, 4)), left=False),
    "B_bad_pivots_short": _solve_case(piv=lambda p: p[:2], b=np.ones((2, 2))),
    "pivots_short": _solve_case(piv=lambda p: p[:2]),
    "pivots_batched": _solve_case(piv=lambda p: p[None]),
    "LU_batched_pivots_not": _solve_case(lu=lambda a: np.stack([a, a])),
    "pivots_other_batch": _solve_case(lu=lambda a: np.stack([a, a]), piv=lambda p: np.stack([p] * 5)),
    "batch_mismatch": _solve_case(lu=lambda a: np.stack([a, a]), piv=lambda p: np.stack([p, p]),
                                  b=np.ones((3, 3, 2))),
    "half": _solve_case(lu=lambda a: a.astype(np.float16), b=np.ones((3, 2), np.float16)),
    "half_pivots_long": _solve_case(lu=lambda a: a.astype(np.float16), piv=lambda p: p.astype(np.int64),
                                    b=np.ones((3, 2), np.float16)),
    "half_B_bad": _solve_case(lu=lambda a: a.astype(np.float16), b=np.ones((2, 2), np.float16)),
    "pivots_too_big": _solve_case(piv=lambda p: p + 10),
    "pivots_too_small": _solve_case(piv=lambda p: p - 10),
}


@pytest.mark.parametrize("case", SOLVE_ERRORS)
def test_lu_solve_errors(ref, case):
    fn = SOLVE_ERRORS[case]
    with pytest.raises(Exception) as e:
        fn(nd)
    ref.raises(fn, type(e.value))


UNPACK_ERRORS = {
    "1d": lambda T: T.lu_unpack(T.zeros(3), T.ones(3, dtype=T.int32)),
    "pivots_long": lambda T: T.lu_unpack(T.zeros(3, 3), T.ones(3, dtype=T.long)),
    "pivots_too_big": lambda T: T.lu_unpack(T.zeros(3, 3), T.full((3,), 5, dtype=T.int32)),
    "pivots_zero": lambda T: T.lu_unpack(T.zeros(3, 3), T.zeros(3, dtype=T.int32)),
}


@pytest.mark.parametrize("case", UNPACK_ERRORS)
def test_lu_unpack_errors(ref, case):
    ref.raises(UNPACK_ERRORS[case], RuntimeError)


def test_doctests():
    import ndgrad._ops.lu as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 4 and result.failed == 0
