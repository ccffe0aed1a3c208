"""What each op saves for backward, counted through saved-tensor hooks, over the whole op table.

For every record x sample x which inputs require grad (all, then each differentiable one
alone), under ``saved_tensors_hooks`` that count their calls, then one backward:

* a primitive's node keeps exactly the saved values read by a formula that will run (one whose
  input needs a gradient), and packs each of them once;
* every packed value is unpacked exactly once by the backward (PyTorch unpacks each saved value
  once per node application), for composites too;
* where PyTorch is installed, ndgrad packs as many values as torch, except for the ops listed in
  ``FEWER`` and ``MORE`` below, whose formulas legitimately read other values.

In-place variants run on their out-of-place op's samples, on a non-leaf copy of ``self``.
"""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd
from ndgrad._ops import registry

from test_generic import (
    CASES, _convert, _nd_make, _outputs, _to_torch_kwargs, _torch_fn, _torch_make,
)

try:
    import torch
except ImportError:  # the oracle is optional
    torch = None

_FUSED = "torch's fused backward saves every input and its statistics for any gradient"
_SHAPE = "ndgrad's formula reads the input's shape, not the input"
_OUT = "torch saves its output unconditionally; ndgrad only when the formula reading it runs"
_GRAD_OUT = "the grad_output formula reads only the output; torch saves both for either"
_DECOMP = "ndgrad's decomposition saves less than torch's op (its primitives are checked here)"
_LOSS = "a composite; torch's fused loss saves its inputs only"
_POINTWISE = "a composite whose pointwise parts save their own inputs; torch's kernel saves its operands"
_WRITE = "index_put_ on a clone saves its index positions; torch's view write saves nothing"
_GATHER = "a composite of index_select, where or convolution whose parts save their own inputs"

# ndgrad packs fewer values than torch (checked: never more).
FEWER = {
    "gru_cell": "the fused cell op saves its two gate projections and h; torch's composite saves each step's parts",
    "adaptive_avg_pool2d": _SHAPE,
    "matrix_norm": "a composite of svdvals (one saved SVD) or abs, sum and amax: torch's saves more",
    "linalg_norm": "matrix orders are matrix_norm's composite: torch's saves more",
    "_weight_norm": "a composite: with only g requiring grad it saves v and the norms, not g",
    "interpolate": "mode='area' is adaptive average pooling, whose formula reads the input's shape",
    "cholesky_solve": "a composite: with only B requiring grad, solve saves A and X, not L",
    "avg_pool2d": _SHAPE,
    "pad": _SHAPE,
    "gather": _SHAPE + " (self's)",
    "index_add": _SHAPE + " (source's)",
    "masked_select": _SHAPE + " (self's)",
    "convolution": "the input's gradient reads the weight, the weight's the input; torch: both",
    "batch_norm": _FUSED,
    "layer_norm": _FUSED,
    "group_norm": _FUSED,
    "rms_norm": _FUSED,
    "linalg_det": "torch also saves the LU factors and pivots",
    "linalg_slogdet": "torch also saves its factorization",
    "linalg_solve": "torch also saves the LU factors and pivots",
    "linalg_svdvals": "torch saves U and Vh too",
    "linalg_eigvalsh": "ndgrad saves A and recomputes the eigenvectors; torch saves both outputs",
    "linalg_cond": "a composite of svdvals (one saved SVD): torch's saves more",
    "linalg_lu_solve": "torch saves LU, pivots and the result for either input; B's formula reads only LU and pivots",
    "lu_solve": "linalg_lu_solve with only b requiring grad saves LU and pivots; torch also the result",
    "max_pool2d_with_indices": "the formula reads the indices and self's shape; torch: self too",
    "pow.Tensor_Tensor": _OUT,
    "clamp": "torch saves self, min and max for any gradient; a bound's formula reads self and it",
    "lerp.Tensor": "the weight's gradient reads self and end; torch saves the weight too",
    "tanh_backward": _GRAD_OUT,
    "sigmoid_backward": _GRAD_OUT,
    "_softmax_backward_data": _GRAD_OUT,
    "_log_softmax_backward_data": _GRAD_OUT,
    "gelu_backward": "the grad_output formula reads only self; torch saves both for either",
    "native_dropout_backward": "the formula reads only the mask; torch saves grad_output too",
    "einsum": "one einsum primitive; torch decomposes it into permutes and bmm",
    "addcdiv": _DECOMP,
    "binary_cross_entropy": _DECOMP,
    "binary_cross_entropy_with_logits": _DECOMP + " (some samples)",
    "cdist": _DECOMP,
    "conv1d": _DECOMP,
    "conv2d": _DECOMP,
    "conv_transpose2d": _DECOMP,
    "cross_entropy": _DECOMP,
    "det": _DECOMP,
    "max_pool2d": _DECOMP,
    "nll_loss": _DECOMP,
    "pow": _DECOMP,
    "scaled_dot_product_attention": _DECOMP + " (some samples)",
    "take_along_dim": _DECOMP,
    "conv3d": _DECOMP,
    "conv_transpose1d": _DECOMP,
    "conv_transpose3d": _DECOMP,
    "max_pool1d": _DECOMP,
    "avg_pool1d": _DECOMP,
    "adaptive_avg_pool1d": _DECOMP,
    "adaptive_avg_pool3d": _DECOMP,
    "lp_pool1d": _DECOMP,
    "lp_pool2d": _DECOMP,
    "instance_norm": _DECOMP,
    "local_response_norm": _DECOMP,
    "embedding_bag": _DECOMP,
    "quantile": _DECOMP,
    "nanquantile": _DECOMP,
    "cov": _DECOMP,
    "corrcoef": _DECOMP,
    "svd": "compute_uv=False runs svdvals (saves A); torch's linalg_svd saves U, S, Vh",
    "rrelu": "a composite (x * noise or leaky_relu) saves the noise or self; torch: both",
    "multilabel_soft_margin_loss": "logsigmoid as -softplus(-x) saves its input only; torch: also its buffer",
    "combinations": "a composite: one index gather saves the index; torch masks a meshgrid",
    "logdet": "linalg_slogdet saves A only; torch also saves its factorization",
    "slogdet": "linalg_slogdet saves A only; torch also saves its factorization",
    "take": "a composite: reshape and an index gather save the index only",
    "index_copy": "a composite: index_put_ on a clone saves the index only",
    "copysign.Tensor": "other's gradient is zeros and reads nothing; torch saves self and result",
    "ldexp": _DECOMP + " (an integer exponent's power of two needs no gradient)",
    "float_power": "a composite: the conversions save nothing; torch's pow saves self, exponent, result",
    "chain_matmul": "the last mm alone saves only the product before it; torch's multi_dot saves all",
    "_fft_r2c": _SHAPE,
    **{"fft_" + name: "real input goes through _fft_r2c: " + _SHAPE
       for name in ("fft", "ifft", "rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn")},
}
# ndgrad packs more values than torch for some sample.
MORE = {
    "gelu": "the tanh form's formula reads the result (no second tanh), so every gelu saves it",
    "logaddexp": "the formulas read the result instead of recomputing exp(self) + exp(other)",
    "logaddexp2": "the formulas read the result instead of recomputing 2**self + 2**other",
    "einsum": "a one-operand equation saves its operand (torch's views and sums save none)",
    "_weight_norm": "a composite (g / ||v|| times v): torch's fused interface saves v, g and the norms",
    "cholesky_solve": "a composite (L L^T formed, then solve): torch's fused op saves B, L and X",
    "cholesky_inverse": "a composite (L L^T formed, then solve): torch's fused op saves L and the result",
    "rms_norm": "the fused formula saves input and weight for any gradient (torch: 1 for weight)",
    "scaled_dot_product_attention": "a composite whose softmax, matmuls and masking save each",
    "binary_cross_entropy_with_logits": _LOSS,
    "huber_loss": _LOSS,
    "smooth_l1_loss": _LOSS,
    "mse_loss": _LOSS,
    "kl_div": _LOSS,
    "repeat_interleave": "a composite (an index gather); torch's repeat_interleave saves none",
    "max_pool3d": _GATHER,
    "avg_pool3d": _GATHER,
    "lp_pool3d": _GATHER,
    "adaptive_max_pool1d": _GATHER,
    "adaptive_max_pool2d": _GATHER,
    "adaptive_max_pool3d": _GATHER,
    "unfold": _GATHER,
    "fold": _GATHER,
    "prelu": _GATHER,
    "cosine_similarity": _GATHER,
    "pdist": "a composite: two row gathers, their difference and the norm save their own inputs",
    "soft_margin_loss": _LOSS,
    "multi_margin_loss": _LOSS,
    "poisson_nll_loss": "the full form's Stirling term reads a target with its small entries masked",
    "affine_grid": "a composite: the matmul saves the base grid (torch's generator saves sizes only)",
    "grid_sample": "a composite of gathers and weights that save their own inputs; torch: input and grid",
    "chain_matmul": "a chain of mm saves each intermediate product; torch's multi_dot decides its order",
    "addmv": "beta=0 is a where (zero gradient for input) that saves its condition",
    "matrix_power": "n=0 is a where (zero gradient for input) that saves its condition",
    "matrix_exp": "a composite: Taylor terms and squarings are matmuls that save their operands",
    "aminmax": "amin and amax each save self and their result; torch's aminmax saves self and both",
    "ldexp": _POINTWISE,
    "sinc": _POINTWISE,
    "xlogy": _POINTWISE,
    "renorm": "a composite: vector_norm, where and the multiply save their own inputs",
    "select_scatter": _WRITE,
    "slice_scatter": _WRITE,
    "diagonal_scatter": _WRITE,
    "pinverse": "a composite over linalg_svd (U, S, Vh) and its products; torch's pinv saves A and result",
}


def _differentiable_positions(rec, sample):
    pos = []
    for i, a in enumerate(sample.args):
        floaty = isinstance(a, np.ndarray) and a.dtype.kind == "f"
        if isinstance(a, (list, tuple)):
            floaty = any(isinstance(x, np.ndarray) and x.dtype.kind == "f" for x in a)
        if floaty and i not in sample.no_grad:
            pos.append(i)
    return pos


def _only(args, keep, tensor_cls):
    """Requires-grad off on every tensor argument except those at position ``keep``."""
    for i, a in enumerate(args):
        for t in a if isinstance(a, (list, tuple)) else (a,):
            if isinstance(t, tensor_cls) and t.requires_grad and i != keep:
                t.requires_grad_(False)


def _count(T, fn, args, kwargs):
    """Pack calls while ``fn`` runs under counting hooks; unpack calls during one backward (None
    when no output requires grad); the first output's node and (ndgrad) the values it kept."""
    calls = {"pack": 0, "unpack": 0}

    def pack(t):
        calls["pack"] += 1
        return t

    def unpack(t):
        calls["unpack"] += 1
        return t

    with T.autograd.graph.saved_tensors_hooks(pack, unpack):
        outs = _outputs(fn(*args, **kwargs))
    packs = calls["pack"]
    outs = [o for o in outs if isinstance(o, T.Tensor) and o.requires_grad]
    if not outs:
        return packs, None, None
    node = outs[0].grad_fn
    saved = tuple(node._saved) if T is nd and node is not None and node._saved is not None else None
    T.autograd.backward(outs, [T.ones_like(o) for o in outs])
    return packs, calls["unpack"], (node, saved)


def _expected_saved(rec, node):
    """Indices of the saved values that a formula which will run reads."""
    lens = node._args[-1] if rec.has_list else None
    live = registry._live(rec, node.next_edges, lens)
    want = set()
    for slot, _, _, srcs in rec.vjp_plan:
        if any(live[s] for s in (slot if type(slot) is tuple else (slot,))):
            want.update(k for k in range(rec.n_saved) if f"S[{k}]" in srcs)
    return want


def _n_packed(saved) -> int:
    """Saved tensors (a weak Python scalar operand is kept as is, not packed)."""
    n = 0
    for s in saved:
        for x in s if type(s) is list else (s,):
            n += x is not None and type(x) is not registry._ScalarSaved
    return n


def _check_node(rec, node, saved, packs=None):
    if type(node) is not rec.node_cls or saved is None:
        return
    kept = {k for k, s in enumerate(saved) if s is not None}
    assert kept == _expected_saved(rec, node), "kept a value no formula that runs reads (save_need)"
    if packs is not None:
        assert _n_packed(saved) == packs, "pack count differs from the values the node keeps"


def _args(rec, sample, keep, make=_nd_make, T=nd):
    args, kwargs, _ = _convert(rec, sample, make)
    if keep is not None:
        _only(args, keep, T.Tensor)
    return args, kwargs


def _without_hooks(rec, sample, keep):
    """The first differentiable output of the op run with no hooks on (the fast path then
    stores tensors as themselves), or None."""
    args, kwargs = _args(rec, sample, keep)
    outs = _outputs(rec.call(*args, **kwargs))
    outs = [o for o in outs if isinstance(o, nd.Tensor) and o.requires_grad]
    return outs[0] if outs else None


def _torch_packs(rec, sample, keep):
    tfn = _torch_fn(rec)
    if tfn is None:
        return None
    targs, tkwargs = _args(rec, sample, keep, _torch_make, torch)
    targs = [getattr(torch, a.name) if isinstance(a, nd.dtype) else a for a in targs]
    try:
        return _count(torch, tfn, targs, _to_torch_kwargs(tkwargs))[0]
    except Exception:  # torch rejects the sample or has no gradient for it
        return None


@pytest.mark.parametrize("rec,sample", [c for c in CASES if c.values[0].differentiable])
def test_pack_and_unpack_counts(rec, sample):
    positions = _differentiable_positions(rec, sample)
    ran = False
    for keep in [None] + (positions if len(positions) > 1 else []):
        try:
            plain = _without_hooks(rec, sample, keep)
        except Exception:  # a sample that checks an error (test_generic compares it with torch)
            continue
        ran = True
        packs, unpacks, node = _count(nd, rec.call, *_args(rec, sample, keep))
        if unpacks is None:
            continue
        where = f"requires_grad on {'all' if keep is None else f'argument {keep} alone'}"
        assert unpacks == packs, f"{where}: {packs} packed, {unpacks} unpacked (want each once)"
        if rec.kind != "composite":
            _check_node(rec, *node, packs)
            if plain.grad_fn is not None and plain.grad_fn._saved is not None:
                _check_node(rec, plain.grad_fn, tuple(plain.grad_fn._saved))
        if torch is None:
            continue
        want = _torch_packs(rec, sample, keep)
        if want is None:
            continue
        name = rec.name
        if name in MORE and packs > want or name in FEWER and packs < want:
            continue
        assert packs == want, f"{where}: ndgrad packed {packs}, torch {want}"
    if not ran:
        pytest.skip("the sample raises")


INPLACE = [(name, rec) for name, rec in registry.OPS.items()
           if rec.kind == "inplace" and rec.outplace.samples and rec.outplace.node_cls is not None]


def _inplace_counts(T, ip, sample, make, keep):
    """Counts for ``ip`` on a non-leaf copy of the sample's self (None when nothing records)."""
    args, kwargs = _args(ip.outplace, sample, keep, make, T)
    if T is not nd:
        kwargs = _to_torch_kwargs(kwargs)
    if not isinstance(args[0], T.Tensor) or not args[0].requires_grad and keep is None:
        return None
    self = args[0].detach().requires_grad_(keep in (None, 0)) * 1.0
    with T.no_grad():  # an in-place case at all? (shapes, dtypes; test_generic covers the errors)
        try:
            getattr(self.detach(), ip.name)(*args[1:], **kwargs)
        except Exception:
            return None
    packs, unpacks, _ = _count(T, lambda *a, **k: getattr(self, ip.name)(*a[1:], **k), args, kwargs)
    return None if unpacks is None else (packs, unpacks)


@pytest.mark.parametrize("name,ip", INPLACE, ids=[n for n, _ in INPLACE])
@np.errstate(all="ignore")  # values outside the op's domain only give NaNs; counts are the point
def test_inplace_pack_and_unpack_counts(name, ip):
    """An in-place op saves its formulas' values as the out-of-place op does (self copied first)."""
    rng = np.random.default_rng(0)
    for sample in ip.outplace.samples(rng):
        for keep in [None] + _differentiable_positions(ip.outplace, sample):
            got = _inplace_counts(nd, ip, sample, _nd_make, keep)
            if got is None:
                continue
            assert got[0] == got[1], f"{sample.name}: {got[0]} packed, {got[1]} unpacked"
            if torch is None:
                continue
            try:
                want = _inplace_counts(torch, ip, sample, _torch_make, keep)
            except NotImplementedError:  # torch has no derivative for some in-place ops (acosh_)
                continue
            if want is not None and not (ip.outplace.name in FEWER and got[0] < want[0]):
                assert got[0] == want[0], f"{sample.name}, {keep}: packed {got[0]}, torch {want[0]}"


def test_exception_lists_name_ops_of_the_table():
    for name in {**FEWER, **MORE}:
        assert name in registry.OPS, name


# --- the cases of the issue, by hand ---
def _hooks(T, log):
    return T.autograd.graph.saved_tensors_hooks(lambda t: (log.append("pack"), t)[1],
                                                lambda p: (log.append("unpack"), p)[1])


def test_div_unpacks_each_saved_value_once(ref):
    def f(T):
        log = []
        a = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        b = T.tensor([4.0, 5.0, 6.0], requires_grad=True)
        with _hooks(T, log):
            y = a / b  # both formulas read other
        y.sum().backward()
        return log, a.grad, b.grad

    log = ref.same(f)[0]
    assert log == ["pack"] * 2 + ["unpack"] * 2


def test_mm_saves_only_what_the_needed_gradient_reads(ref):
    def f(T):
        log = []
        x = T.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        w = T.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
        with _hooks(T, log):
            y = T.mm(x, w.t())
        node = y.grad_fn
        y.sum().backward(retain_graph=True)
        counts = list(log)
        saved = (node._saved_mat2 is None, node._saved_mat2_sym_strides)
        return counts, saved, w.grad

    log = ref.same(f)[0]
    assert log == ["pack", "unpack"]


def test_weight_gradient_keeps_the_weights_layout():
    x = nd.randn(3, 4, dtype=nd.float64)
    w = nd.randn(5, 4, dtype=nd.float64, requires_grad=True)
    nd.mm(x, w.t()).sum().backward()
    assert w.grad._data.flags.c_contiguous  # computed as (grad.T @ x), not transposed after
    np.testing.assert_allclose(w.grad._data, np.ones((3, 5)).T @ x._data)
