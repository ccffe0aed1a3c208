"""The LU family: ``linalg.lu_factor(_ex)``, ``linalg.lu``, ``lu_unpack``, ``linalg.lu_solve`` and
the legacy ``torch.lu`` / ``torch.lu_solve`` / ``Tensor.lu``.

NumPy has no getrf, so the factorisation is written here on arrays: partial pivoting (the first
row of largest magnitude, as LAPACK's i?amax picks it), a loop over columns, each step one
vectorised update of the whole batch. Pivots are int32 and 1-based, LAPACK's. The gradients are
PyTorch's (the pivots held constant), in Tensor ops, so they differentiate again.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import _backend, return_types
from .. import _dtype as D
from .linalg import _tname, solve_triangular
from .registry import NAMESPACES, defcomposite, defop, write_out
from .samples import nc, sample
from .shape import cat

_FACTOR_DTYPES = frozenset(np.dtype(c) for c in "fdFD")
_TORCH_FORM = {"complex_grad": "torch"}  # formulas with mH: PyTorch's complex gradients as written


# --- arrays: the factorisation, permutations, triangular solves ---
def _H(a):
    """The conjugate transpose of the last two dims of an array."""
    t = a.swapaxes(-1, -2)
    return t.conj() if a.dtype.kind == "c" else t


def _getrf(a, pivot: bool):
    """LU of an (..., m, n) array: ``(LU, pivots, info)`` as LAPACK's getrf gives them (L's unit
    diagonal implicit; pivots 1-based int32; info the first zero pivot, 1-based, or 0)."""
    xp = _backend.namespace_of(a)
    *batch, m, n = a.shape
    k = min(m, n)
    nb = int(np.prod(batch, dtype=np.int64))
    lu = a.reshape((nb, m, n)).copy()
    piv = xp.empty((nb, k), np.int32)
    info = xp.zeros((nb,), np.int32)
    rows = xp.arange(nb)
    tiny = np.finfo(a.dtype).tiny
    with np.errstate(all="ignore"):  # NaN and infinite entries propagate silently, as in LAPACK
        for j in range(k):
            if pivot:
                col = lu[:, j:, j]
                mag = abs(col.real) + abs(col.imag) if col.dtype.kind == "c" else abs(col)
                # i?amax: the first largest; a NaN wins only in first place (NaN > x is false)
                nan = xp.isnan(mag)
                p = j + xp.where(nan[:, 0], 0, xp.where(nan, -1, mag).argmax(-1))
                piv[:, j] = p + 1
                top = lu[rows, j].copy()
                lu[rows, j] = lu[rows, p]
                lu[rows, p] = top
            else:
                piv[:, j] = j + 1
            d = lu[:, j, j]
            zero = d == 0
            info[(info == 0) & zero] = j + 1
            if j + 1 < m:  # a zero pivot leaves its column as it is (all zeros under pivoting)
                d = xp.where(zero, 1, d)[:, None]
                col = lu[:, j + 1:, j]
                # getrf2 scales by the reciprocal unless it would overflow (torch's bits, tested)
                lu[:, j + 1:, j] = xp.where(abs(d) >= tiny, col * (1 / d), col / d)
                if j + 1 < n:
                    lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    return lu.reshape(a.shape), piv.reshape(tuple(batch) + (k,)), info.reshape(tuple(batch))


def _permutation(piv, batch, m: int):
    """The row order ``perm`` (..., m) of P^T A, ``(P^T A)[i] = A[perm[i]]``, from LAPACK's
    interchanges (row i swapped with row piv[i] - 1, in order)."""
    xp = _backend.namespace_of(piv)
    nb = int(np.prod(batch, dtype=np.int64))
    p = xp.broadcast_to(piv, tuple(batch) + piv.shape[-1:]).reshape((nb, piv.shape[-1]))
    p = p.astype(np.int64) - 1
    perm = xp.broadcast_to(xp.arange(m), (nb, m)).copy()
    rows = xp.arange(nb)
    for i in range(p.shape[1]):
        j = p[:, i]
        held = perm[:, i].copy()
        perm[:, i] = perm[rows, j]
        perm[rows, j] = held
    return perm.reshape(tuple(batch) + (m,))


def _perm_matrix(perm, dtype):
    xp = _backend.namespace_of(perm)
    m = perm.shape[-1]
    return (perm[..., None, :] == xp.arange(m)[:, None]).astype(dtype)  # P[perm[i], i] = 1


def _trsm(T, B, lower: bool, unit: bool):
    """X with T X = B, T triangular (only its triangle is read), by column-oriented substitution
    as LAPACK's trsm: one step per row, over the batch (broadcast) and B's columns at once."""
    X = B.copy()
    n = T.shape[-1]
    with np.errstate(all="ignore"):  # a zero pivot gives infinities and NaNs, as LAPACK's getrs
        for i in range(n) if lower else range(n - 1, -1, -1):
            if not unit:
                X[..., i, :] /= T[..., i, i, None]
            rest = slice(i + 1, n) if lower else slice(0, i)
            X[..., rest, :] -= T[..., rest, i, None] * X[..., i, None, :]
    return X


def _check_dims(name: str, a) -> None:
    if a.ndim < 2:
        raise RuntimeError(f"{name}: Expected tensor with 2 or more dimensions. "
                           f"Got size: {list(a.shape)} instead")


def _check_factor(name: str, a, pivot: bool) -> None:
    _check_dims(name, a)
    if a.dtype not in _FACTOR_DTYPES:
        raise NotImplementedError(f"\"lu_cpu\" not implemented for '{_tname(a)}'")
    if not pivot and _backend.device_of(a).type != "cuda":  # NOTE(pytorch): CUDA only
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")


def _singular_error(api: str, info, ndim: int) -> None:
    """PyTorch's error for the first matrix with a zero pivot (``info`` > 0), if any."""
    flat = info.reshape(-1)
    bad = flat != 0
    if flat.size and bool(bad.any()):
        b = int(bad.argmax())
        i = int(flat[b])
        prefix = f"(Batch element {b}): " if ndim > 2 else ""
        raise RuntimeError(
            f"{api}: {prefix}U[{i},{i}] is zero and using it on lu_solve would result in a division by "
            "zero. If you still want to perform the factorization, consider calling linalg.lu(A, pivot) "
            "or linalg.lu_factor_ex(A, pivot)")


# --- Tensor helpers of the formulas ---
def _inv_LH(L, X):
    """L^-H X for a unit lower triangular L (m, m)."""
    return solve_triangular(L.mH, X, upper=True, unitriangular=True)


def _inv_L(L, X):
    """L^-1 X for a unit lower triangular L."""
    return solve_triangular(L, X, upper=False, unitriangular=True)


def _right_inv_UH(X, U):
    """X U^-H for an upper triangular U."""
    return solve_triangular(U.mH, X, upper=False, left=False)


def _right_inv_U(X, U):
    """X U^-1 for an upper triangular U."""
    return solve_triangular(U, X, upper=True, left=False)


def _pack(L, U):
    """The strict lower triangle of L (m, k) and the upper triangle of U (k, n) in one (m, n)
    matrix, as ``LU`` holds them."""
    m, n = L.shape[-2], U.shape[-1]
    if m < n:
        L = cat([L, L.new_zeros(tuple(L.shape[:-1]) + (n - m,))], -1)
    elif m > n:
        U = cat([U, U.new_zeros(tuple(U.shape[:-2]) + (m - n, n))], -2)
    return L.tril(-1) + U.triu()


def _lu_backward(gL, gU, P, L, U):
    """The gradient of A = P L U (L (m, k) unit lower, U (k, n) upper, P held constant).
    Square: gA = P L^-H [tril_-1(L^H gL) + triu(gU U^H)] U^-H. Wide (U = [U1 | U2]): U2 = L^-1 A2
    moves a term -gU2 U2^H into the lower part and gA2 = P L^-H gU2. Tall (L = [L1; L2]):
    L2 = A2 U^-1 moves -L2^H gL2 into the upper part and gA2 = P gL2 U^-H."""
    m, n = L.shape[-2], U.shape[-1]
    if m == n:
        M = (L.mH @ gL).tril(-1) + (gU @ U.mH).triu()
        gA = _right_inv_UH(_inv_LH(L, M), U)
    elif m < n:
        U1, U2, gU1, gU2 = U[..., :m], U[..., m:], gU[..., :m], gU[..., m:]
        M = (L.mH @ gL - gU2 @ U2.mH).tril(-1) + (gU1 @ U1.mH).triu()
        gA = _inv_LH(L, cat([_right_inv_UH(M, U1), gU2], -1))
    else:
        L1, L2, gL1, gL2 = L[..., :n, :], L[..., n:, :], gL[..., :n, :], gL[..., n:, :]
        M = (L1.mH @ gL1).tril(-1) + (gU @ U.mH - L2.mH @ gL2).triu()
        gA = _right_inv_UH(cat([_inv_LH(L1, M), gL2], -2), U)
    return P @ gA if P.dim() > 1 else gA  # (P is empty without pivoting)


def _lu_jvp(A_t, P, L, U):
    """(dL, dU) of A = P L U: with X = L^-1 P^T dA U^-1 (square part), dL = L tril_-1(X),
    dU = triu(X) U; the rest of a wide U or a tall L follows from U2 = L^-1 A2 / L2 = A2 U^-1."""
    m, n = L.shape[-2], U.shape[-1]
    dA = P.mT @ A_t if P.dim() > 1 else A_t
    if m == n:
        X = _inv_L(L, _right_inv_U(dA, U))
        return L @ X.tril(-1), X.triu() @ U
    if m < n:
        U1, U2 = U[..., :m], U[..., m:]
        X = _inv_L(L, _right_inv_U(dA[..., :m], U1))
        dL = L @ X.tril(-1)
        return dL, cat([X.triu() @ U1, _inv_L(L, dA[..., m:] - dL @ U2)], -1)
    L1, L2 = L[..., :n, :], L[..., n:, :]
    X = _inv_L(L1, _right_inv_U(dA[..., :n, :], U))
    dU = X.triu() @ U
    return cat([L1 @ X.tril(-1), _right_inv_U(dA[..., n:, :] - L2 @ dU, U)], -2), dU


# --- lu_unpack ---
def _lu_unpack(LU, pivots, unpack_data, unpack_pivots):
    _check_dims("torch.lu_unpack", LU)
    if pivots.dtype != np.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 "
                           "dtype.\nNote: this function is intended to be used with the output produced by "
                           "torch.linalg.lu_factor")
    xp = _backend.namespace_of(LU)
    m, n = LU.shape[-2:]
    k = min(m, n)
    empty = xp.zeros((0,), LU.dtype)
    L = U = P = empty
    if unpack_data:
        L = xp.tril(LU[..., :, :k], -1) + xp.eye(m, k, dtype=LU.dtype)
        U = xp.triu(LU[..., :k, :])
    if unpack_pivots:
        if pivots.size and bool(((pivots < 1) | (pivots > m)).any()):
            raise RuntimeError("pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive."
                               "Did you properly pass the result of lu_factor?")
        P = _perm_matrix(_permutation(pivots, LU.shape[:-2], m), LU.dtype)
    return P, L, U


def _lu_unpack_backward(grads, unpack_data):
    """L and U are LU's triangles (and L's unit diagonal): their gradients packed back."""
    if not unpack_data:
        return None
    _, gL, gU = grads
    return _pack(gL, gU)


def _lu_unpack_jvp(LU_data_t, LU_data_shape, unpack_data):
    if not unpack_data:
        return None, None, None
    k = min(LU_data_shape[-2:])
    return None, LU_data_t[..., :, :k].tril(-1), LU_data_t[..., :k, :].triu()


def _lu_data(rng, shape, dtype=float):
    """LU data: a strict lower part under 1 in magnitude, a well-conditioned upper part."""
    a = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.uniform(-1, 1, shape)
    k = min(shape[-2:])
    a[..., range(k), range(k)] += 3.0
    return a


def _piv(*rows):
    return np.array(rows, np.int32)


unpack_result = return_types._structseq("lu_unpack", ("P", "L", "U"))
return_types.lu_unpack = unpack_result
_unpack_rec = defop(
    "lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) "
    "-> (Tensor P, Tensor L, Tensor U)", _lu_unpack,
    {"LU_data": _lu_unpack_backward}, jvp=_lu_unpack_jvp, method=False, extra=_TORCH_FORM,
    samples=lambda rng: [
        sample("square", _lu_data(rng, (3, 3)), _piv(3, 3, 3)),
        sample("tall", _lu_data(rng, (4, 2)), _piv(4, 2)),
        sample("wide", _lu_data(rng, (2, 4)), _piv(2, 2)),
        sample("batched_nc", nc(_lu_data(rng, (2, 3, 3))), _piv([2, 3, 3], [1, 3, 3])),
        sample("no_pivots", _lu_data(rng, (3, 3)), _piv(2, 2, 3), True, False),
        sample("complex", _lu_data(rng, (3, 3), complex), _piv(2, 3, 3))])
_unpack_raw = _unpack_rec.call


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True) -> (P, L, U): the
    permutation and the triangular factors packed by ``linalg.lu_factor``.

    >>> import ndgrad
    >>> P, L, U = ndgrad.lu_unpack(*ndgrad.linalg.lu_factor(ndgrad.tensor([[1., 2.], [3., 4.]])))
    >>> (P @ L @ U).tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    if out is not None:
        return write_out("lu_unpack", lambda: lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots),
                         (LU_data, LU_pivots), out)
    P, L, U = _unpack_raw(LU_data, LU_pivots, unpack_data, unpack_pivots)
    return unpack_result(P.detach(), L, U)  # NOTE(pytorch): P never requires grad


_unpack_rec.call = lu_unpack
NAMESPACES[""]["lu_unpack"] = lu_unpack


# --- linalg.lu_factor_ex, linalg.lu_factor, linalg.lu ---
def _pivoting(rng, shape, dtype=float):
    """A well-conditioned matrix (or batch) whose partial pivoting swaps rows: column-diagonally
    dominant (each pivot clearly the largest of its column, so small perturbations keep the
    pivots), its rows then rotated."""
    a = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.uniform(-1, 1, shape)
    m, n = shape[-2:]
    k = min(m, n)
    a[..., range(k), range(k)] += 2.0 * m + 1
    return a[..., np.roll(np.arange(m), 1), :]


def _singular():
    return np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])  # U[3,3] is exactly zero


def _factor_samples(rng):
    return [sample("square", _pivoting(rng, (3, 3))),
            sample("batched", _pivoting(rng, (2, 3, 3))),
            sample("tall", _pivoting(rng, (4, 3))),
            sample("wide", _pivoting(rng, (3, 5))),
            sample("batched_tall", _pivoting(rng, (2, 4, 2))),
            sample("batched_wide_nc", nc(_pivoting(rng, (2, 2, 4)))),
            sample("1x1", _pivoting(rng, (1, 1))),
            sample("complex", _pivoting(rng, (3, 3), complex)),
            sample("singular", _singular(), no_grad=(0,)),
            sample("empty_batch", np.zeros((0, 3, 3)))]


def _factor_ex(A, pivot, check_errors):
    _check_factor("torch.lu_factor", A, pivot)
    LU, piv, info = _getrf(A, pivot)
    if check_errors:
        _singular_error("torch.linalg.lu_factor_ex", info, A.ndim)
    return LU, piv, info


def _factor_ex_backward(grads, LU, pivots):
    """PyTorch's: the packed gradient split into L's and U's, then linalg.lu's formula."""
    k = min(LU.shape[-2:])
    gLU = grads[0]
    P, L, U = _unpack_raw(LU, pivots)
    return _lu_backward(gLU[..., :, :k].tril(-1), gLU[..., :k, :].triu(), P, L, U)


def _factor_ex_jvp(A_t, LU, pivots):
    P, L, U = _unpack_raw(LU, pivots)
    return _pack(*_lu_jvp(A_t, P, L, U)), None, None


factor_ex_result = return_types._structseq("linalg_lu_factor_ex", ("LU", "pivots", "info"))
return_types.linalg_lu_factor_ex = factor_ex_result
factor_result = return_types._structseq("linalg_lu_factor", ("LU", "pivots"))
return_types.linalg_lu_factor = factor_result
_factor_ex_rec = defop(
    "linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) "
    "-> (Tensor LU, Tensor pivots, Tensor info)", _factor_ex,
    {"A": _factor_ex_backward}, jvp=_factor_ex_jvp, api="linalg.lu_factor_ex", method=False,
    extra=dict(_TORCH_FORM, bfloat16_native=True), samples=_factor_samples)
_factor_ex_raw = _factor_ex_rec.call


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """linalg.lu_factor_ex(A, *, pivot=True, check_errors=False) -> (LU, pivots, info): the LU
    factorisation with partial pivoting, without raising on a singular matrix (``info`` is the
    first zero diagonal element of U, 1-based, or 0) unless ``check_errors``.

    >>> import ndgrad
    >>> ndgrad.linalg.lu_factor_ex(ndgrad.zeros(2, 2)).info.item()
    1
    """
    if out is not None:
        return write_out("linalg_lu_factor_ex",
                         lambda: lu_factor_ex(A, pivot=pivot, check_errors=check_errors), (A,), out)
    return factor_ex_result(*_factor_ex_raw(A, pivot=pivot, check_errors=check_errors))


_factor_ex_rec.call = lu_factor_ex
NAMESPACES["linalg"]["lu_factor_ex"] = lu_factor_ex


def lu_factor(A, *, pivot=True, out=None):
    """linalg.lu_factor(A, *, pivot=True) -> (LU, pivots): the LU factorisation with partial
    pivoting, ``A = P L U``, packed as LAPACK's getrf (L's strict lower part and U in ``LU``,
    1-based int32 row interchanges in ``pivots``). Raises on a matrix with a zero pivot.

    >>> import ndgrad
    >>> ndgrad.linalg.lu_factor(ndgrad.tensor([[1., 2.], [3., 4.]])).pivots.tolist()
    [2, 2]
    """
    if out is not None:
        return write_out("linalg_lu_factor", lambda: lu_factor(A, pivot=pivot), (A,), out)
    LU, pivots, info = _factor_ex_raw(A, pivot=pivot)
    _singular_error("torch.linalg.lu_factor", info._data, A.dim())
    return factor_result(LU, pivots)


defcomposite(lu_factor, name="linalg_lu_factor", api="linalg.lu_factor", method=False,
             samples=lambda rng: [s for s in _factor_samples(rng) if s.name != "singular"])


def _lu(A, pivot):
    _check_factor("linalg.lu", A, pivot)
    LU, piv, _ = _getrf(A, pivot)
    P, L, U = _lu_unpack(LU, piv, True, pivot)
    return P, L, U


lu_result = return_types._structseq("linalg_lu", ("P", "L", "U"))
return_types.linalg_lu = lu_result
_lu_rec = defop(
    "linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)", _lu,
    {"A": lambda grads, P, L, U: _lu_backward(grads[1], grads[2], P, L, U)},
    jvp=lambda A_t, P, L, U: (None, *_lu_jvp(A_t, P, L, U)), api="linalg.lu", method=False,
    extra=dict(_TORCH_FORM, bfloat16_native=True), samples=_factor_samples)
_lu_raw = _lu_rec.call


def linalg_lu(A, *, pivot=True, out=None):
    """linalg.lu(A, *, pivot=True) -> (P, L, U): ``A = P L U`` with P a permutation matrix, L
    (m, k) unit lower and U (k, n) upper triangular, k = min(m, n).

    >>> import ndgrad
    >>> P, L, U = ndgrad.linalg.lu(ndgrad.tensor([[1., 2.], [3., 4.]]))
    >>> L.tolist()
    [[1.0, 0.0], [0.3333333432674408, 1.0]]
    """
    if out is not None:
        return write_out("linalg_lu", lambda: linalg_lu(A, pivot=pivot), (A,), out)
    P, L, U = _lu_raw(A, pivot=pivot)
    return lu_result(P.detach(), L, U)  # NOTE(pytorch): P never requires grad


_lu_rec.call = linalg_lu
NAMESPACES["linalg"]["lu"] = linalg_lu


# --- linalg.lu_solve ---
def _lu_solve(LU, pivots, B, left, adjoint):
    if LU.ndim < 2:
        raise RuntimeError("torch.linalg.lu_solve: The input tensor A must have at least 2 dimensions.")
    if LU.dtype not in D.INEXACT:
        raise RuntimeError(f"torch.linalg.lu_solve: Expected a floating point or complex tensor as input. "
                           f"Got {_tname(LU)}")
    if LU.dtype != B.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
                           f"{_tname(LU)} and B of type {_tname(B)} instead")
    if pivots.dtype != np.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32")
    n = LU.shape[-1]
    if LU.shape[-2] != n:
        raise RuntimeError(f"torch.linalg.lu_solve: A must be batches of square matrices, but they are "
                           f"{LU.shape[-2]} by {n} matrices")
    if B.ndim < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if pivots.ndim < 1 or pivots.shape[-1] != n:
        raise RuntimeError("linalg.lu_solve: Number of pivots per batch should be same as the dimension "
                           "of the matrix")
    if pivots.shape != LU.shape[:-1]:
        raise RuntimeError(f"linalg.lu_solve: Expected LU.shape[:-1] and pivots.shape to be the same, but got "
                           f"pivots with shape {list(pivots.shape)} instead")
    try:
        batch = np.broadcast_shapes(B.shape[:-2], LU.shape[:-2])
    except ValueError:
        sa, sb = B.shape[:-2], LU.shape[:-2]
        d = max(len(sa), len(sb))
        sa, sb = (1,) * (d - len(sa)) + sa, (1,) * (d - len(sb)) + sb
        i = next(i for i in range(d - 1, -1, -1) if sa[i] != sb[i] and 1 not in (sa[i], sb[i]))
        raise RuntimeError(f"The size of tensor a ({sa[i]}) must match the size of tensor b ({sb[i]}) "
                           f"at non-singleton dimension {i}") from None
    if LU.dtype not in _FACTOR_DTYPES:
        raise NotImplementedError(f"\"linalg.lu_solve_cpu\" not implemented for '{_tname(LU)}'")
    if pivots.size and bool((pivots > n).any()):
        raise RuntimeError("Pivots given to lu_solve must all be smaller or equal to LU.size(-2). "
                           "Did you properly pass the result of lu_factor?")
    if pivots.size and bool((pivots < 1).any()):
        raise RuntimeError("Pivots given to lu_solve must all be greater or equal to 1. "
                           "Did you properly pass the result of lu_factor?")
    xp = _backend.namespace_of(LU)
    if not left:  # X A = B  <=>  A^H X^H = B^H (and X A^H = B  <=>  A X^H = B^H)
        B, adjoint = _H(B), not adjoint
    B = xp.broadcast_to(B, batch + B.shape[-2:])
    perm = _permutation(pivots, LU.shape[:-2], n)[..., :, None]
    if not adjoint:  # A = P L U: X = U^-1 L^-1 P^T B
        X = _trsm(LU, xp.take_along_axis(B, xp.broadcast_to(perm, batch + (n, 1)), -2), True, True)
        X = _trsm(LU, X, False, False)
    else:  # A^H = U^H L^H P^T: X = P L^-H U^-H B
        LUh = _H(LU)
        X = _trsm(LUh, _trsm(LUh, B, True, False), False, True)
        inv = xp.argsort(perm, axis=-2)  # (P Y)[perm[i]] = Y[i]
        X = xp.take_along_axis(X, xp.broadcast_to(inv, batch + (n, 1)), -2)
    return _H(X) if not left else X


def _lu_solve_B(grad, LU, pivots, left, adjoint):
    """X = op(A)^-1 B: gB = op(A)^-H grad, one more solve with the adjoint flag flipped."""
    return _lu_solve_op(LU, pivots, grad, left=left, adjoint=not adjoint)


def _lu_solve_LU(grad, LU, pivots, result, left, adjoint):
    """gA from gB (left: -gB X^H, or -X gB^H for A^H; right: -X^H gB, or -gB^H X), then carried
    onto LU's triangles through A = P L U: tril_-1(P^T gA U^H) + triu(L^H P^T gA)."""
    gB = _lu_solve_op(LU, pivots, grad, left=left, adjoint=not adjoint)
    X = result
    if left:
        gA = -(X @ gB.mH) if adjoint else -(gB @ X.mH)
    else:
        gA = -(gB.mH @ X) if adjoint else -(X.mH @ gB)
    P, L, U = _unpack_raw(LU, pivots)
    G = P.mT @ gA
    return (G @ U.mH).tril(-1) + (L.mH @ G).triu()


def _lu_solve_jvp(LU_p, LU_t, pivots, B_t, result, left, adjoint):
    """dX = op(A)^-1 (dB - op(dA) X) (left; X op(dA) on the right), dA = P (dL U + L dU)."""
    rhs = B_t
    if LU_t is not None:
        P, L, U = _unpack_raw(LU_p, pivots)
        dA = P @ (LU_t.tril(-1) @ U + L @ LU_t.triu())
        if adjoint:
            dA = dA.mH
        t = dA @ result if left else result @ dA
        rhs = -t if rhs is None else rhs - t
    return _lu_solve_op(LU_p, pivots, rhs, left=left, adjoint=adjoint)


def _lu_solve_samples(rng):
    lu3, lu3b = _lu_data(rng, (3, 3)), _lu_data(rng, (2, 3, 3))
    p3, p3b = _piv(3, 3, 3), _piv([2, 3, 3], [3, 2, 3])
    return [sample("left", lu3, p3, rng.standard_normal((3, 2))),
            sample("adjoint", lu3, p3, rng.standard_normal((3, 2)), adjoint=True),
            sample("right", lu3, p3, rng.standard_normal((2, 3)), left=False),
            sample("right_adjoint", lu3, p3, nc(rng.standard_normal((4, 3))), left=False, adjoint=True),
            sample("batched", lu3b, p3b, rng.standard_normal((2, 3, 1))),
            sample("bcast_B", lu3b, p3b, rng.standard_normal((3, 2)), adjoint=True),
            sample("bcast_LU", lu3, _piv(2, 2, 3), rng.standard_normal((2, 3, 2))),
            sample("nc", nc(lu3), p3, nc(rng.standard_normal((3, 2)))),
            sample("complex", _lu_data(rng, (3, 3), complex), p3,
                   rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))),
            sample("complex_right_adjoint", _lu_data(rng, (3, 3), complex), _piv(2, 3, 3),
                   rng.standard_normal((2, 3)) - 1j * rng.standard_normal((2, 3)), left=False, adjoint=True)]


_lu_solve_op = defop(
    "linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) -> Tensor",
    _lu_solve, {"LU": _lu_solve_LU, "B": _lu_solve_B}, jvp=_lu_solve_jvp,
    api="linalg.lu_solve", method=False, extra=dict(_TORCH_FORM, bfloat16_native=True),
    samples=_lu_solve_samples).call


# --- legacy: torch.lu, Tensor.lu, torch.lu_solve ---
lu_with_info_result = return_types._structseq("_lu_with_info", ("LU", "pivots", "info"))
return_types._lu_with_info = lu_with_info_result


def lu(A, pivot=True, get_infos=False, out=None):
    """``torch.lu`` (deprecated in PyTorch for ``linalg.lu_factor(_ex)``): ``(LU, pivots)``, with
    ``info`` when ``get_infos``; never raises on a singular matrix, as PyTorch's."""
    warnings.warn(
        "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will be "
        "removed in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\nshould be replaced "
        "with\nLU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\nLU, pivots, info = torch.lu(A, "
        "compute_pivots, get_infos=True)\nshould be replaced with\nLU, pivots, info = "
        "torch.linalg.lu_factor_ex(A, compute_pivots)", UserWarning, stacklevel=2)
    if out is not None:
        return write_out("lu", lambda: lu(A, pivot, get_infos), (A,), out)
    LU, pivots, info = _factor_ex_raw(A, pivot=pivot)
    return lu_with_info_result(LU, pivots, info) if get_infos else (LU, pivots)


defcomposite(lu, samples=lambda rng: [sample("square", _pivoting(rng, (3, 3))),
                                      sample("infos_batched_tall", _pivoting(rng, (2, 4, 3)), True, True)])


def lu_solve(input, LU_data, LU_pivots, *, out=None):
    """``torch.lu_solve`` (deprecated in PyTorch for ``linalg.lu_solve``, whose arguments are
    reversed): ``X`` with ``A X = b`` from ``A``'s ``lu_factor``."""
    warnings.warn(
        "torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future "
        "PyTorch release.\nNote that torch.linalg.lu_solve has its arguments reversed.\nX = "
        "torch.lu_solve(B, LU, pivots)\nshould be replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)",
        UserWarning, stacklevel=2)
    if out is not None:
        return write_out("lu_solve", lambda: _lu_solve_op(LU_data, LU_pivots, input), (input, LU_data), out)
    return _lu_solve_op(LU_data, LU_pivots, input)


defcomposite(lu_solve, samples=lambda rng: [
    sample("square", rng.standard_normal((3, 2)), _lu_data(rng, (3, 3)), _piv(2, 3, 3)),
    sample("batched", rng.standard_normal((2, 3, 1)), _lu_data(rng, (2, 3, 3)), _piv([3, 3, 3], [1, 2, 3]))])
