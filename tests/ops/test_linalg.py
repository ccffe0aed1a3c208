"""Linear algebra beyond the generic table: cholesky's gradient through a symmetric input, the
public call forms (einsum's operand list, named-tuple results, det/inverse aliases) and bad input
raising PyTorch's error type and message."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd
from ndgrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)


def _x(*shape):
    return nd.tensor(rng.standard_normal(shape), dtype=nd.float64, requires_grad=True)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3)])
def test_cholesky_gradcheck_through_spd(upper, shape):
    # Finite differences need a symmetric perturbation: differentiate through X X^T + n I.
    n = shape[-1]

    def f(x):
        return nd.linalg.cholesky(x @ x.mT + n * nd.eye(n, dtype=nd.float64), upper=upper)

    x = _x(*shape)
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def test_cholesky_grad_matches_torch_on_general_input():
    a = rng.standard_normal((3, 3))
    a = a @ a.T + 3 * np.eye(3) + 0.1 * rng.standard_normal((3, 3))  # not symmetric
    g = rng.standard_normal((3, 3))
    x = nd.tensor(a, requires_grad=True)
    nd.linalg.cholesky(x).backward(nd.tensor(g))
    t = torch.tensor(a, requires_grad=True)
    torch.linalg.cholesky(t).backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_einsum_call_forms():
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    expected = a @ b
    for res in (nd.einsum("ij,jk->ik", nd.tensor(a), nd.tensor(b)),
                nd.einsum("ij,jk", [nd.tensor(a), nd.tensor(b)]),
                nd.einsum("ij,jk", (nd.tensor(a), nd.tensor(b)))):
        np.testing.assert_allclose(res.numpy(), expected)


def test_named_results_and_aliases():
    a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    x = nd.tensor(a)
    r = nd.linalg.slogdet(x)
    assert r.sign is r[0] and r.logabsdet is r[1]
    q = nd.linalg.qr(x)
    np.testing.assert_allclose((q.Q @ q.R).numpy(), a)
    assert nd.linalg.qr(x, mode="r").Q.shape == (0,)
    np.testing.assert_allclose(x.det().item(), np.linalg.det(a))
    np.testing.assert_allclose(nd.det(x).item(), np.linalg.det(a))
    np.testing.assert_allclose(x.inverse().numpy(), np.linalg.inv(a))
    np.testing.assert_allclose(nd.inverse(x).numpy(), np.linalg.inv(a))
    assert issubclass(nd.linalg.LinAlgError, RuntimeError)


def test_qr_backward_errors_match_torch():
    for mode, shape in (("r", (3, 2)), ("complete", (3, 2))):
        msgs = []
        for lib in (torch, nd):
            x = lib.tensor(np.ones(shape) + np.eye(*shape), requires_grad=True)
            with pytest.raises(RuntimeError) as e:
                lib.linalg.qr(x, mode=mode).R.sum().backward()
            msgs.append(str(e.value).splitlines()[0])
        assert msgs[0] == msgs[1]


CASES = """lib.bmm(d(2, 3), d(2, 3, 4))
lib.bmm(d(2, 3, 4), d(2, 3))
lib.bmm(d(2, 3, 4), d(3, 4, 5))
lib.bmm(d(2, 3, 4), d(2, 4, 5).float())
lib.addmm(d(3), d(3, 4), d(4, 5))
lib.addmm(d(5), d(3, 4), d(3, 5))
lib.addmm(d(5), d(3, 4, 1), d(3, 5))
lib.addmm(d(5).float(), d(3, 4), d(4, 5))
lib.addmm(d(5), d(3, 4).float(), d(4, 5))
lib.addmm(d(2, 3, 5), d(3, 4), d(4, 5))
lib.dot(d(3), d(4))
lib.dot(d(3, 1), d(3))
lib.dot(d(3), d(3).float())
lib.outer(d(3), d(3, 2))
lib.outer(d(3, 2), d(3))
lib.einsum('ij,jk', d(2, 3))
lib.einsum('ij', d(2, 3), d(3, 4))
lib.einsum('ij,jk', d(2, 3), d(4, 5))
lib.einsum('ij->ij', d(2))
lib.einsum('ij->k', d(2, 2))
lib.einsum('ii->i', d(2, 3))
lib.einsum('ij,jk', d(2, 3), d(3, 5).float())
lib.einsum('i->ii', d(2))
lib.einsum('i1', d(2))
lib.einsum('i.j', d(2, 3))
lib.einsum('......', d(2, 3))
lib.einsum('...ij', d(2))
lib.linalg.inv(d(3, 4))
lib.linalg.inv(d(3))
lib.linalg.inv(lib.zeros(3, 3, dtype=lib.float64))
lib.linalg.inv(lib.zeros(2, 3, 3, dtype=lib.float64))
lib.linalg.inv(lib.ones(3, 3, dtype=lib.float64))
lib.linalg.inv(lib.arange(9).reshape(3, 3))
lib.inverse(d(3, 4))
lib.linalg.det(d(3, 4))
lib.linalg.det(d(3))
lib.linalg.det(lib.arange(9).reshape(3, 3))
lib.linalg.slogdet(d(3, 4))
lib.linalg.solve(d(3, 3), d(4))
lib.linalg.solve(d(3, 3), d(3), left=False)
lib.linalg.solve(d(3, 3), d(3, 4), left=False)
lib.linalg.solve(lib.zeros(3, 3, dtype=lib.float64), d(3))
lib.linalg.solve(d(3, 4), d(3))
lib.linalg.solve(d(3, 3), d(3).float())
lib.linalg.solve(d(2, 3, 3), d(4, 3, 1))
lib.linalg.solve(lib.arange(9).reshape(3, 3), lib.arange(3))
lib.linalg.cholesky(-lib.eye(3, dtype=lib.float64))
lib.linalg.cholesky(d(3, 4))
lib.linalg.cholesky(lib.eye(3, dtype=lib.float64).expand(2, 3, 3) * lib.tensor([1., -1.]).view(2, 1, 1))
lib.linalg.cholesky(lib.eye(3, dtype=lib.int64))
lib.linalg.qr(d(3))
lib.linalg.qr(d(3, 4), mode='foo')
lib.linalg.svdvals(d(3))
lib.linalg.svdvals(lib.eye(3, dtype=lib.int64))
lib.linalg.matrix_norm(d(3))
lib.linalg.matrix_norm(d(3, 3), 'foo')
lib.linalg.matrix_norm(d(3, 3), 3)
lib.linalg.matrix_norm(d(3, 3), dim=(0, 0))
lib.linalg.matrix_norm(d(2, 3, 3), dim=(0, 1, 2))
lib.linalg.norm(d(2, 3, 3), 'fro')
lib.linalg.norm(d(3, 3), dim=(0, 1, 2))
lib.linalg.norm(d(3), 'fro')
lib.linalg.multi_dot([d(3, 3)])
lib.linalg.multi_dot([d(3, 3), d(2, 3, 3)])
lib.linalg.multi_dot([d(2, 3, 3), d(3, 3)])
lib.linalg.multi_dot([d(3, 3), d(3), d(3, 3)])
lib.linalg.multi_dot([d(3, 4), d(3, 3)])
lib.vdot(d(2, 2), d(2))
lib.linalg.eigh(d(3, 4))
lib.linalg.eigh(d(3, 3), UPLO='X')
lib.linalg.eigvalsh(d(2, 3))
lib.linalg.lstsq(d(3, 3), d(3), driver='foo')
lib.linalg.pinv(d(3))""".splitlines()


def _run(lib, expr):
    g = np.random.default_rng(0)
    env = dict(lib=lib, d=lambda *s: lib.tensor(g.standard_normal(s)))
    try:
        eval(expr, env)  # noqa: S307 - the fixed cases above
    except Exception as e:  # noqa: BLE001
        linalg = isinstance(e, (torch.linalg.LinAlgError, nd.linalg.LinAlgError))
        return isinstance(e, RuntimeError), linalg, str(e).splitlines()[0].replace("torch.Double", "ndgrad.Double")
    return None


@pytest.mark.parametrize("expr", CASES)
def test_error_matches_torch(expr):
    expected = _run(torch, expr)
    assert expected is not None, "torch accepts this input; the case is wrong"
    assert _run(nd, expr) == expected


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_eigh_gradients_through_symmetric_input(uplo, shape):
    """eigh reads one triangle: gradcheck runs through X + X^T (as PyTorch's own tests do), for
    eigenvalues and sign-free functions of the eigenvectors, first and second order."""
    x = nd.tensor(np.random.default_rng(1).standard_normal(shape), requires_grad=True)

    def f(x):
        L, V = nd.linalg.eigh(x + x.mT, UPLO=uplo)
        return L, V * V, nd.linalg.eigvalsh(x + x.mT, UPLO=uplo)

    assert nd.autograd.gradcheck(f, (x,))
    assert nd.autograd.gradgradcheck(lambda x: f(x)[0], (x,))


def test_eigh_matches_torch_up_to_signs():
    a = np.random.default_rng(2).standard_normal((2, 4, 4))
    a = a + np.swapaxes(a, -1, -2)
    w, W = np.random.default_rng(3).standard_normal(4), np.random.default_rng(4).standard_normal((4, 4))
    got = []
    for lib in (nd, torch):
        x = lib.tensor(a, requires_grad=True)
        L, V = lib.linalg.eigh(x)
        ((L * lib.tensor(w)).sum() + (V * V * lib.tensor(W)).sum()).backward()
        got.append((L.detach().numpy(), np.abs(V.detach().numpy()), x.grad.numpy(),
                    type(L.grad_fn).__name__))
    for g, t in zip(got[0][:3], got[1][:3]):
        np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-12)
    assert got[0][3] == got[1][3]


_RNG = np.random.default_rng(5)
_A, _B, _T = _RNG.standard_normal((4, 3)), _RNG.standard_normal((4, 2)), _RNG.standard_normal((3, 3)) + 3 * np.eye(3)
SOLVERS = {
    "pinv_tall": (lambda L, a: L.linalg.pinv(a), [_A]),
    "pinv_wide_batched": (lambda L, a: L.linalg.pinv(a), [_RNG.standard_normal((2, 2, 5))]),
    "pinv_rcond": (lambda L, a: L.linalg.pinv(a, 0.5), [_A]),
    "pinv_rank_deficient": (lambda L, a: L.linalg.pinv(a.detach()), [np.ones((3, 3))]),
    "matrix_rank": (lambda L, a: L.linalg.matrix_rank(a.detach()), [np.ones((3, 3))]),
    "matrix_rank_tols": (lambda L, a: L.linalg.matrix_rank(a.detach(), atol=1.0, rtol=0.1), [_A]),
    "lstsq": (lambda L, a, b: tuple(L.linalg.lstsq(a, b)), [_A, _B]),
    "lstsq_vector_gelsd": (lambda L, a, b: tuple(L.linalg.lstsq(a, b[:, 0], driver="gelsd")), [_A, _B]),
    "lstsq_gels": (lambda L, a, b: tuple(L.linalg.lstsq(a, b, driver="gels")), [_A, _B]),
    "lstsq_gelss_wide": (lambda L, a, b: tuple(L.linalg.lstsq(a.mT, b[:3], driver="gelss")), [_A, _B]),
}
for _up in (True, False):
    for _left in (True, False):
        for _unit in (True, False):
            SOLVERS[f"solve_triangular_{'up' if _up else 'low'}_{'left' if _left else 'right'}"
                    f"{'_unit' if _unit else ''}"] = (
                lambda L, a, b, up=_up, left=_left, unit=_unit: L.linalg.solve_triangular(
                    a, b if left else b.mT, upper=up, left=left, unitriangular=unit), [_T, _B[:3]])


@pytest.mark.parametrize("name", list(SOLVERS))
def test_solvers_match_torch(name):
    """Values, dtypes and gradients (through every floating output) against torch."""
    fn, arrays = SOLVERS[name]
    got = []
    for lib in (nd, torch):
        ts = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = fn(lib, *ts)
        out = out if isinstance(out, tuple) else (out,)
        diff = [o for o in out if o.requires_grad]
        if diff:
            sum((o * lib.tensor(np.cos(np.arange(o.numel())).reshape(tuple(o.shape)))).sum()
                for o in diff).backward()
        got.append(([o.detach().numpy() for o in out],
                    [None if t.grad is None else t.grad.numpy() for t in ts]))
    (vals, grads), (want_vals, want_grads) = got
    for a, b in zip(vals + grads, want_vals + want_grads, strict=True):
        if b is None:
            assert a is None
            continue
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_ex_variants_report_info_per_matrix():
    spd_or_not = np.stack([np.eye(2), -np.eye(2), np.eye(2), np.diag([1.0, -1.0])])
    singular_or_not = np.stack([np.eye(2), np.zeros((2, 2)), np.array([[1.0, 2.0], [2.0, 4.0]])])
    for lib in (nd, torch):
        assert lib.linalg.cholesky_ex(lib.tensor(spd_or_not)).info.tolist() == [0, 1, 0, 2]
        assert lib.linalg.inv_ex(lib.tensor(singular_or_not)).info.tolist() == [0, 1, 2]
        r = lib.linalg.cholesky_ex(lib.eye(2, dtype=lib.float64))
        assert r.info.item() == 0 and r.L.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    for name, x in (("cholesky_ex", -np.eye(3)), ("inv_ex", np.zeros((2, 2)))):
        msgs = []
        for lib in (nd, torch):
            with pytest.raises(RuntimeError) as e:
                getattr(lib.linalg, name)(lib.tensor(x), check_errors=True)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


@pytest.mark.parametrize("p", ["fro", "nuc", float("inf"), float("-inf"), 1, -1])
def test_cond_other_orders(p):
    """Values as torch's; gradients by gradcheck (torch 2.13's backward of these orders fails
    on an in-place write of its own)."""
    a = np.random.default_rng(6).standard_normal((2, 3, 3)) + 3 * np.eye(3)
    np.testing.assert_allclose(nd.linalg.cond(nd.tensor(a), p).numpy(),
                               torch.linalg.cond(torch.tensor(a), p).numpy(), rtol=1e-12)
    assert nd.autograd.gradcheck(lambda x: nd.linalg.cond(x, p), (nd.tensor(a, requires_grad=True),))
