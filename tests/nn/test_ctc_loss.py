"""CTC loss against PyTorch: values and gradients for padded and concatenated targets, every
reduction, zero_infinity, unbatched input, a blank other than 0, float32, log-probabilities that
are not normalized; PyTorch's quirks (the gradient taken through an implied log_softmax, NaN
gradients at -inf log-probabilities and at infinite losses, the last frame's blank term when a
target ends with the blank); the errors; ``nn.CTCLoss`` and ``ndgrad.ctc_loss``. The op-table
samples run through the generic tests too (the torch oracle, forward AD, saved values)."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad

RNG = np.random.default_rng(0)


def _log_probs(*shape):
    x = RNG.standard_normal(shape)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


LP = _log_probs(6, 3, 5)
PADDED = np.array([[1, 2, 2, 0], [3, 0, 0, 0], [1, 1, 4, 3]])  # a repeated label, an empty target
CONCAT = np.array([1, 2, 2, 1, 1])
IL, TL = np.array([6, 5, 6]), np.array([3, 0, 2])
W = RNG.standard_normal(3)  # the incoming gradient of a 'none' loss


def _lengths(T_, v):
    return T_.tensor(v) if isinstance(v, np.ndarray) else v


def _case(T_, lp, targets, il, tl, dtype="float64", fn=None, **kw):
    """The loss and the gradient of log_probs (a random incoming gradient for 'none')."""
    x = T_.tensor(lp, dtype=getattr(T_, dtype), requires_grad=True)
    fn = fn or T_.nn.functional.ctc_loss
    loss = fn(x, T_.tensor(targets), _lengths(T_, il), _lengths(T_, tl), **kw)
    w = T_.tensor(W[: loss.numel()].reshape(loss.shape), dtype=loss.dtype) if loss.dim() else None
    loss.backward(w)
    return loss, x.grad


def _tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-7, "atol": 1e-10}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("form", ["padded", "concat"])
@pytest.mark.parametrize("lengths", ["tensor", "tuple"])
def test_targets_reductions_dtypes(ref, dtype, reduction, form, lengths):
    targets = PADDED if form == "padded" else CONCAT
    il, tl = (IL, TL) if lengths == "tensor" else (tuple(IL.tolist()), tuple(TL.tolist()))
    ref.same(lambda T_: _case(T_, LP, targets, il, tl, dtype, reduction=reduction), **_tol(dtype))


@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_impossible_alignment(ref, zero_infinity, reduction):
    """Input 2 frames long for a target of 3 (and 5 frames for 2 equal labels needing 3): an
    infinite loss, whose gradient is NaN within the input unless zero_infinity zeroes both."""
    il, tl = np.array([2, 5, 6]), np.array([3, 0, 2])
    loss, grad = ref.same(lambda T_: _case(T_, LP, PADDED, il, tl, reduction=reduction,
                                           zero_infinity=zero_infinity))
    if zero_infinity:
        assert np.isfinite(loss._data).all() and not grad._data[:, 0].any()
    else:
        assert np.isnan(grad._data[:2, 0]).all() and not grad._data[2:, 0].any()
    ref.same(lambda T_: _case(T_, LP, np.array([[2, 2], [1, 3], [3, 3]]), (6, 5, 2), (2, 2, 2),
                              reduction=reduction, zero_infinity=zero_infinity))


def test_no_frames(ref):
    """An input of length 0: loss -0.0 for an empty target, inf otherwise; no gradient either way."""
    loss, grad = ref.same(lambda T_: _case(T_, LP, PADDED, np.array([0, 0, 6]), TL, reduction="none"))
    assert np.signbit(loss._data[1]) and loss._data[0] == np.inf and not grad._data[:, :2].any()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_unbatched(ref, dtype, reduction):
    lp = _log_probs(6, 4)
    t = np.array([1, 3, 3])
    ref.same(lambda T_: _case(T_, lp, t, np.array(6), np.array(3), dtype, reduction=reduction), **_tol(dtype))
    ref.same(lambda T_: _case(T_, lp, t[None], (5,), (3,), dtype, reduction=reduction), **_tol(dtype))


@pytest.mark.parametrize("blank", [4, 2])
def test_blank_not_zero(ref, blank):
    targets = np.array([[0, 1, 1, 3], [2 if blank != 2 else 4, 0, 0, 0], [3, 1, 0, 0]])
    for reduction in ("mean", "none"):
        ref.same(lambda T_, r=reduction: _case(T_, LP, targets, (6, 6, 5), (4, 1, 2), blank=blank, reduction=r))


def test_unnormalized_log_probs(ref):
    """PyTorch's gradient is exp(lp) minus the occupancy whatever lp holds: for normalized lp the
    gradient of the logits through log_softmax, not the loss's derivative in lp."""
    x = RNG.standard_normal((6, 3, 5)) * 3
    _, grad = ref.same(lambda T_: _case(T_, x, PADDED, IL, TL, reduction="sum"))
    occupancy_sums = (np.exp(x) - grad._data)[:, [0, 2]].sum(-1)  # one per frame within the input
    np.testing.assert_allclose(occupancy_sums, 1.0, rtol=1e-10)


def test_neg_inf_log_probs(ref):
    """NOTE(pytorch): a -inf log-probability gets a NaN gradient (0 * inf in the kernel's formula)."""
    lp = LP.copy()
    lp[2, 0, 4] = lp[3, 0, 1] = -np.inf
    _, grad = ref.same(lambda T_: _case(T_, lp, PADDED, IL, TL, reduction="none"))
    assert np.isnan(grad._data).sum() == 2


def test_target_ending_with_blank(ref):
    """NOTE(pytorch): a target whose last label is the blank loses the final blank's term at the
    last frame (the kernel assigns that term instead of adding it); mirrored."""
    targets = np.array([[1, 0, 2, 0], [3, 0, 0, 0], [1, 1, 4, 3]])
    ref.same(lambda T_: _case(T_, LP, targets, (6, 6, 6), (2, 1, 4), reduction="none"))


@pytest.mark.parametrize("dtype", ["int32", "uint8", "float64", "bool"])
def test_target_dtypes(ref, dtype):
    """Targets are converted to int64 first, as PyTorch does (a float target is truncated)."""
    targets = np.array([[1, 1], [0, 1], [1, 0]]) if dtype == "bool" else PADDED

    def case(T_):
        x = T_.tensor(LP, requires_grad=True)
        loss = T_.nn.functional.ctc_loss(x, T_.tensor(targets).to(getattr(T_, dtype)), T_.tensor(IL),
                                         T_.tensor([2, 1, 2]))
        loss.backward()
        return loss, x.grad

    ref.same(case)


def test_larger_batch(ref):
    lp = _log_probs(40, 4, 12)
    targets = RNG.integers(1, 12, (4, 15))
    for dtype in ("float64", "float32"):
        ref.same(lambda T_, d=dtype: _case(T_, lp, targets, (40, 31, 25, 40), (15, 10, 12, 0), d), **_tol(dtype))


def test_gradcheck_through_log_softmax():
    """The composition with log_softmax has PyTorch's gradient as its true derivative."""
    x = ndgrad.tensor(RNG.standard_normal((5, 2, 4)), requires_grad=True)
    targets, il, tl = ndgrad.tensor([[1, 2, 2], [3, 1, 0]]), ndgrad.tensor([5, 4]), ndgrad.tensor([3, 2])
    for reduction in ("mean", "sum", "none"):
        def f(x, reduction=reduction):
            return ndgrad.nn.functional.ctc_loss(x.log_softmax(2), targets, il, tl, reduction=reduction)

        assert ndgrad.autograd.gradcheck(f, (x,))


def test_forward_ad_pairs_tangent_with_gradient():
    """PyTorch has no forward AD for ctc_loss; ndgrad's tangent is the gradient's inner product."""
    import ndgrad.autograd.forward_ad as fwad

    x = ndgrad.tensor(LP, requires_grad=True)
    v = RNG.standard_normal(LP.shape)
    loss = ndgrad.nn.functional.ctc_loss(x, ndgrad.tensor(PADDED), IL.tolist(), TL.tolist(), reduction="sum")
    (g,) = ndgrad.autograd.grad(loss, x)
    with fwad.dual_level():
        dual = fwad.make_dual(ndgrad.tensor(LP), ndgrad.tensor(v))
        out = ndgrad.nn.functional.ctc_loss(dual, ndgrad.tensor(PADDED), IL.tolist(), TL.tolist(), reduction="sum")
        tangent = fwad.unpack_dual(out).tangent
    assert float(tangent) == pytest.approx(float((g._data * v).sum()), rel=1e-10)


def test_graph_and_double_backward(ref):
    def names(T_):
        x = T_.tensor(LP, requires_grad=True)
        out = []
        for kw in ({}, {"reduction": "none", "zero_infinity": True}, {"zero_infinity": True}):
            node = T_.nn.functional.ctc_loss(x, T_.tensor(PADDED), T_.tensor(IL), T_.tensor(TL), **kw).grad_fn
            chain = []
            while node is not None:
                chain.append(node.name())
                inner = [n for n, _ in node.next_functions if n is not None and "AccumulateGrad" not in n.name()]
                node = inner[0] if inner else None
            out.append(chain)
        return out

    assert ref.same(names)[0] == ["MeanBackward0", "DivBackward0", "CtcLossBackward0"]

    def double(T_):
        x = T_.tensor(LP, requires_grad=True)
        loss = T_.nn.functional.ctc_loss(x, T_.tensor(PADDED), T_.tensor(IL), T_.tensor(TL))
        (g,) = T_.autograd.grad(loss, x, create_graph=True)
        g.sum().backward()

    ref.raises(double, RuntimeError, "derivative for aten::_ctc_loss_backward is not implemented")


def _err(lp=LP, targets=PADDED, il=IL, tl=TL, **kw):
    def f(T_):
        return T_.nn.functional.ctc_loss(T_.tensor(lp), T_.tensor(targets), _lengths(T_, il), _lengths(T_, tl), **kw)

    return f


@pytest.mark.parametrize("case,exc", [
    (_err(blank=5), RuntimeError),
    (_err(blank=-1), RuntimeError),
    (_err(il=IL[:2]), RuntimeError),
    (_err(tl=TL[:2]), RuntimeError),
    (_err(il=np.array([7, 5, 6])), RuntimeError),
    (_err(il=np.array([-1, 5, 6])), RuntimeError),
    (_err(tl=np.array([-1, 0, 2])), RuntimeError),
    (_err(tl=np.array([5, 0, 2])), RuntimeError),
    (_err(targets=PADDED[:2]), RuntimeError),
    (_err(targets=CONCAT[:4]), RuntimeError),
    (_err(targets=PADDED[:, :, None]), RuntimeError),
    (_err(targets=np.array(1)), RuntimeError),
    (_err(lp=LP[None]), RuntimeError),
    (_err(lp=LP[:, 0, 0]), RuntimeError),
    (_err(lp=LP[:0]), RuntimeError),
    (_err(lp=LP[:, :0], targets=PADDED[:0], il=(), tl=()), RuntimeError),
    (_err(il=IL.astype(float)), RuntimeError),
    (_err(tl=TL.astype(bool)), RuntimeError),
    (_err(lp=LP.astype(np.float16)), NotImplementedError),
    (_err(lp=LP.astype(np.int64)), NotImplementedError),
    (_err(reduction="batchmean"), ValueError),
])
def test_errors(ref, case, exc):
    ref.raises(case, exc)


def test_mixed_length_types_raise_type_error(ref):
    for il, tl in ((IL, (3, 0, 2)), ((6, 5, 6), TL)):
        with pytest.raises(TypeError):
            _err(il=il, tl=tl)(ndgrad)
        if ref.torch is not None:
            with pytest.raises(TypeError):
                _err(il=il, tl=tl)(ref.torch)


def test_module(ref):
    def case(T_):
        m = T_.nn.CTCLoss(blank=4, reduction="sum", zero_infinity=True)
        x = T_.tensor(LP, requires_grad=True)
        loss = m(x, T_.tensor(PADDED), T_.tensor([6, 2, 6]), T_.tensor([3, 1, 2]))
        loss.backward()
        return loss, x.grad, m.blank, m.reduction, m.zero_infinity, repr(m)

    ref.same(case)
    m = ndgrad.nn.CTCLoss()
    assert (m.blank, m.reduction, m.zero_infinity) == (0, "mean", False)


def test_top_level_takes_the_reduction_enum(ref):
    for r in (0, 1, 2):
        ref.same(lambda T_, r=r: _case(T_, LP, PADDED, IL, TL, fn=T_.ctc_loss, blank=0, reduction=r,
                                       zero_infinity=False))
    with pytest.raises(TypeError):
        ndgrad.ctc_loss(ndgrad.tensor(LP), ndgrad.tensor(PADDED), IL.tolist(), TL.tolist(), 0, "mean")


def test_doctests():
    import doctest

    import ndgrad._ops.ctc as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 2 and result.failed == 0
