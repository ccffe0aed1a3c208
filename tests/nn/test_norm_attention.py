"""Norm, embedding and attention modules against PyTorch (state dicts copied across).

The op table's generic tests cover the functional ops; here: modules (outputs, input and
parameter gradients, running statistics over training steps, eval mode), masks, errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad

torch = pytest.importorskip("torch")


def _copy_state(src, dst):
    """Load torch module ``src``'s state dict into ndgrad module ``dst`` (same keys)."""
    sd = {k: ndgrad.tensor(v.detach().numpy().copy()) for k, v in src.state_dict().items()}
    assert list(sd) == list(dst.state_dict()), "state_dict keys"
    dst.load_state_dict(sd)


def _pair(make, seed=0):
    """The same module in both frameworks, ndgrad's loaded from torch's state dict (float64)."""
    torch.manual_seed(seed)
    t = make(torch).double()
    n = make(ndgrad).double()
    _copy_state(t, n)
    return n, t


def _close(a, b, rtol=1e-7, atol=1e-9):
    a = a._data if isinstance(a, ndgrad.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _run(n, t, x, *args, **kwargs):
    """Forward both, backward a fixed random cotangent; compare output, input grad, param grads."""
    xn = ndgrad.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    conv = [a for a in args]
    on = n(xn, *[ndgrad.tensor(a) if isinstance(a, np.ndarray) else a for a in conv], **{
        k: ndgrad.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()})
    ot = t(xt, *[torch.tensor(a) if isinstance(a, np.ndarray) else a for a in conv], **{
        k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()})
    on = on[0] if isinstance(on, tuple) else on
    ot = ot[0] if isinstance(ot, tuple) else ot
    _close(on, ot)
    g = np.random.default_rng(3).standard_normal(tuple(ot.shape))
    on.backward(ndgrad.tensor(g))
    ot.backward(torch.tensor(g))
    _close(xn.grad, xt.grad)
    tp = dict(t.named_parameters())
    for name, p in n.named_parameters():
        if tp[name].grad is None:
            assert p.grad is None
        else:
            _close(p.grad, tp[name].grad)
    return on, ot


def _x(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


# --- normalization modules ---
NORMS = [
    ("bn1d_2d", lambda T: T.nn.BatchNorm1d(3), (4, 3)),
    ("bn1d_3d", lambda T: T.nn.BatchNorm1d(3, momentum=0.3), (4, 3, 5)),
    ("bn1d_cumulative", lambda T: T.nn.BatchNorm1d(3, momentum=None), (4, 3)),
    ("bn1d_no_affine", lambda T: T.nn.BatchNorm1d(3, affine=False), (4, 3)),
    ("bn2d", lambda T: T.nn.BatchNorm2d(2), (3, 2, 4, 4)),
    ("bn2d_no_track", lambda T: T.nn.BatchNorm2d(2, track_running_stats=False), (3, 2, 2, 3)),
    ("ln", lambda T: T.nn.LayerNorm(5), (2, 3, 5)),
    ("ln_2dims_no_bias", lambda T: T.nn.LayerNorm([3, 5], bias=False), (2, 3, 5)),
    ("ln_no_affine", lambda T: T.nn.LayerNorm(5, elementwise_affine=False), (4, 5)),
    ("gn", lambda T: T.nn.GroupNorm(2, 4), (3, 4, 5)),
    ("gn_4d_no_affine", lambda T: T.nn.GroupNorm(1, 4, affine=False), (2, 4, 2, 3)),
    ("rms", lambda T: T.nn.RMSNorm(5), (2, 3, 5)),
    ("rms_eps", lambda T: T.nn.RMSNorm([3, 5], eps=1e-3), (2, 3, 5)),
]


def _perturb(t):
    """Give the torch module non-trivial affine parameters (init is ones/zeros)."""
    with torch.no_grad():
        for p in t.parameters():
            p.add_(torch.randn(p.shape, dtype=p.dtype) * 0.5)


@pytest.mark.parametrize("make,shape", [(m, s) for _, m, s in NORMS], ids=[n for n, _, _ in NORMS])
def test_norm_module_train_steps_and_eval(make, shape):
    torch.manual_seed(0)
    t = make(torch).double()
    _perturb(t)
    n = make(ndgrad).double()
    _copy_state(t, n)
    for step in range(3):
        n.zero_grad()
        t.zero_grad()
        _run(n, t, _x(*shape, seed=step))
    tb = dict(t.named_buffers())
    for name, b in n.named_buffers():
        _close(b, tb[name])
        assert str(b.dtype).split(".")[-1] == str(tb[name].dtype).split(".")[-1]
    n.eval()
    t.eval()
    _run(n, t, _x(*shape, seed=7))
    assert sorted(n.state_dict()) == sorted(t.state_dict())


def test_batchnorm_state_dict_keys_and_repr():
    n, t = ndgrad.nn.BatchNorm2d(4), torch.nn.BatchNorm2d(4)
    assert list(n.state_dict()) == list(t.state_dict())
    assert repr(n) == repr(t)
    assert n.num_batches_tracked.dtype == ndgrad.int64
    n2, t2 = ndgrad.nn.BatchNorm1d(3, track_running_stats=False), torch.nn.BatchNorm1d(3, track_running_stats=False)
    assert list(n2.state_dict()) == list(t2.state_dict())
    for a, b in [(ndgrad.nn.LayerNorm(4), torch.nn.LayerNorm(4)), (ndgrad.nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)),
                 (ndgrad.nn.RMSNorm(4), torch.nn.RMSNorm(4))]:
        assert repr(a) == repr(b)
        assert list(a.state_dict()) == list(b.state_dict())


def test_functional_batch_norm_updates_running_stats(ref):
    x = _x(5, 3, 2)

    def f(T):
        rm, rv = T.zeros(3, dtype=T.float64), T.ones(3, dtype=T.float64)
        out = T.nn.functional.batch_norm(T.tensor(x), rm, rv, training=True, momentum=0.2)
        return out, rm, rv

    ref.same(f)


def test_norm_errors(ref):
    ref.raises(lambda T: T.nn.BatchNorm1d(3)(T.zeros(2, 3, 4, 5)), ValueError)
    ref.raises(lambda T: T.nn.BatchNorm2d(3)(T.zeros(2, 3)), ValueError)
    ref.raises(lambda T: T.nn.BatchNorm1d(3)(T.zeros(1, 3)), ValueError)
    ref.raises(lambda T: T.nn.GroupNorm(3, 4), ValueError)
    ref.raises(lambda T: T.nn.LayerNorm(4)(T.zeros(2, 5)), RuntimeError)
    ref.raises(lambda T: T.nn.functional.layer_norm(T.zeros(2, 5), [5], T.ones(4)), RuntimeError)
    ref.raises(lambda T: T.nn.functional.layer_norm(T.zeros(2, 5), []), RuntimeError)
    ref.raises(lambda T: T.nn.functional.rms_norm(T.zeros(2, 5), [4]), RuntimeError)
    ref.raises(lambda T: T.nn.functional.group_norm(T.zeros(2, 6, 3), 4), RuntimeError)
    ref.raises(lambda T: T.nn.functional.group_norm(T.zeros(6), 3), RuntimeError)
    ref.raises(lambda T: T.nn.functional.group_norm(T.zeros(2, 6, 3), 3, T.ones(4)), RuntimeError)
    ref.raises(lambda T: T.nn.functional.batch_norm(T.zeros(2, 3), None, None), RuntimeError)
    ref.raises(lambda T: T.nn.functional.batch_norm(T.zeros(2, 3), T.zeros(4), T.ones(3), training=True),
               RuntimeError)
    ref.raises(lambda T: T.nn.functional.batch_norm(T.zeros(2, 3), T.zeros(3), T.ones(3), momentum=None),
               TypeError)


# --- embedding / one_hot ---
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 1}, {"padding_idx": -1}, {"scale_grad_by_freq": True},
                                    {"max_norm": 1.0}], ids=["plain", "pad", "neg_pad", "freq", "max_norm"])
def test_embedding_module(kwargs):
    n, t = _pair(lambda T: T.nn.Embedding(6, 3, **kwargs))
    idx = np.array([[0, 1, 4], [1, 1, 5]])
    on, ot = n(ndgrad.tensor(idx)), t(torch.tensor(idx))
    _close(on, ot)
    _close(n.weight.detach(), t.weight.detach())  # max_norm renormalises rows in place
    g = _x(2, 3, 3)
    on.backward(ndgrad.tensor(g))
    ot.backward(torch.tensor(g))
    _close(n.weight.grad, t.weight.grad)
    assert repr(n) == repr(t)


def test_embedding_from_pretrained(ref):
    w = _x(4, 2)

    def f(T):
        e = T.nn.Embedding.from_pretrained(T.tensor(w), padding_idx=0)
        return e(T.tensor([0, 3])), e.weight.requires_grad, e.padding_idx

    ref.same(f)
    ref.same(lambda T: T.nn.Embedding.from_pretrained(T.tensor(w), freeze=False).weight.requires_grad)


def test_embedding_errors(ref):
    ref.raises(lambda T: T.nn.functional.embedding(T.tensor([1.0]), T.zeros(4, 3)), RuntimeError)
    ref.raises(lambda T: T.nn.functional.embedding(T.tensor([4]), T.zeros(4, 3)), IndexError)
    ref.raises(lambda T: T.nn.functional.embedding(T.tensor([-1]), T.zeros(4, 3)), IndexError)
    ref.raises(lambda T: T.nn.functional.embedding(T.tensor([1]), T.zeros(4, 3), padding_idx=4), AssertionError)
    ref.raises(lambda T: T.nn.functional.embedding(T.tensor([1]), T.zeros(4)), RuntimeError)
    ref.raises(lambda T: T.nn.Embedding(4, 2, padding_idx=5), AssertionError)


def test_one_hot(ref):
    ref.same(lambda T: T.nn.functional.one_hot(T.tensor([[0, 2], [1, 1]])))
    ref.same(lambda T: T.nn.functional.one_hot(T.tensor(1), 3))
    for fn in (lambda T: T.nn.functional.one_hot(T.tensor([1.0])),
               lambda T: T.nn.functional.one_hot(T.tensor([1], dtype=T.int32)),
               lambda T: T.nn.functional.one_hot(T.tensor([-1])),
               lambda T: T.nn.functional.one_hot(T.tensor([3]), 3),
               lambda T: T.nn.functional.one_hot(T.tensor([], dtype=T.int64)),
               lambda T: T.nn.functional.one_hot(T.tensor([1]), -2)):
        ref.raises(fn, RuntimeError)


# --- attention ---
def test_sdpa_errors_and_dropout(ref):
    def sdpa(T):
        return T.nn.functional.scaled_dot_product_attention

    q = _x(2, 3, 4)
    ref.raises(lambda T: sdpa(T)(T.tensor(q), T.tensor(q), T.tensor(q), T.ones(3, 3, dtype=T.bool),
                                 is_causal=True), RuntimeError)
    ref.raises(lambda T: sdpa(T)(T.tensor(q), T.tensor(q), T.tensor(q), T.ones(3, 3, dtype=T.int64)), RuntimeError)
    ref.raises(lambda T: sdpa(T)(T.zeros(4), T.zeros(4), T.zeros(4)), RuntimeError)
    ref.raises(lambda T: sdpa(T)(T.zeros(2, 4), T.zeros(2, 4, dtype=T.float64), T.zeros(2, 4)), RuntimeError)
    # dropout_p: the expected value is unchanged; p=1 drops everything
    out = ndgrad.nn.functional.scaled_dot_product_attention(
        ndgrad.tensor(q), ndgrad.tensor(q), ndgrad.tensor(q), dropout_p=1.0)
    assert not np.any(out._data)


MHA = [
    ("self_seq_first", dict(), False),
    ("self_batch_first", dict(batch_first=True), False),
    ("no_bias", dict(bias=False, batch_first=True), False),
    ("cross_kvdim", dict(kdim=3, vdim=5, batch_first=True), True),
    ("bias_kv_zero_attn", dict(add_bias_kv=True, add_zero_attn=True), False),
]


def _mha_inputs(batch_first, cross, N=2, L=3, S=4, E=8):
    rng = np.random.default_rng(5)
    shp = (lambda n, ln, e: (n, ln, e)) if batch_first else (lambda n, ln, e: (ln, n, e))
    q = rng.standard_normal(shp(N, L, E))
    if cross:
        return q, rng.standard_normal(shp(N, S, 3)), rng.standard_normal(shp(N, S, 5))
    return q, None, None


@pytest.mark.parametrize("kwargs,cross", [(k, c) for _, k, c in MHA], ids=[n for n, _, _ in MHA])
@pytest.mark.parametrize("masks", ["none", "bool", "float_kpm", "3d"])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_mha(kwargs, cross, masks, need_weights, average):
    n, t = _pair(lambda T: T.nn.MultiheadAttention(8, 2, **kwargs))
    _perturb(t)
    _copy_state(t, n)
    bf = kwargs.get("batch_first", False)
    q, k, v = _mha_inputs(bf, cross)
    N, L, S = 2, 3, (4 if cross else 3)
    rng = np.random.default_rng(9)
    am = kpm = None
    if masks == "bool":
        am = np.triu(np.ones((L, S), bool), 1)
        kpm = np.zeros((N, S), bool)
        kpm[1, -1] = True
    elif masks == "float_kpm":
        am = rng.standard_normal((L, S))
        kpm = rng.standard_normal((N, S))
    elif masks == "3d":
        am = rng.standard_normal((N * 2, L, S))
    xs = {}
    for T, mk in ((ndgrad, ndgrad.tensor), (torch, torch.tensor)):
        qq = mk(q).requires_grad_()
        kk = qq if k is None else mk(k).requires_grad_()
        vv = qq if v is None else mk(v).requires_grad_()
        mod = n if T is ndgrad else t
        out, w = mod(qq, kk, vv, key_padding_mask=None if kpm is None else mk(kpm), need_weights=need_weights,
                     attn_mask=None if am is None else mk(am), average_attn_weights=average)
        g = np.random.default_rng(2).standard_normal(tuple(out.shape))
        loss = (out * mk(g)).sum() + (0 if w is None else (w * mk(np.ones(tuple(w.shape)) * 0.3)).sum())
        loss.backward()
        xs[T] = (out, w, qq.grad, None if k is None else kk.grad, None if v is None else vv.grad)
    for a, b in zip(xs[ndgrad], xs[torch], strict=True):
        if b is None:
            assert a is None
        else:
            _close(a, b)
    tp = dict(t.named_parameters())
    for name, p in n.named_parameters():
        _close(p.grad, tp[name].grad)


def test_mha_unbatched_and_state_dict():
    n, t = _pair(lambda T: T.nn.MultiheadAttention(4, 2))
    assert list(n.state_dict()) == list(t.state_dict()) == [
        "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    x = _x(3, 4)
    on, wn = n(ndgrad.tensor(x), ndgrad.tensor(x), ndgrad.tensor(x))
    ot, wt = t(torch.tensor(x), torch.tensor(x), torch.tensor(x))
    _close(on, ot)
    _close(wn, wt)


def test_mha_errors(ref):
    ref.raises(lambda T: T.nn.MultiheadAttention(6, 4), AssertionError)
    ref.raises(lambda T: T.nn.MultiheadAttention(4, 2)(T.zeros(3, 1, 4), T.zeros(3, 1, 4), T.zeros(3, 1, 4),
                                                          attn_mask=T.zeros(2, 2)), RuntimeError)
    ref.raises(lambda T: T.nn.MultiheadAttention(4, 2)(T.zeros(3, 1, 4), T.zeros(3, 1, 4), T.zeros(3, 1, 4),
                                                          is_causal=True), RuntimeError)


ENC = [
    ("post_relu", dict(), False),
    ("pre_gelu_bf", dict(norm_first=True, activation="gelu", batch_first=True), True),
    ("callable_act", dict(activation=lambda x: x.tanh(), batch_first=True), True),
    ("no_bias", dict(bias=False, norm_first=True), False),
]


@pytest.mark.parametrize("kwargs,bf", [(k, b) for _, k, b in ENC], ids=[n for n, _, _ in ENC])
@pytest.mark.parametrize("masks", ["none", "causal_kpm", "float"])
def test_transformer_encoder_layer(kwargs, bf, masks):
    def make(T):
        kw = dict(kwargs)
        if callable(kw.get("activation")):
            kw["activation"] = lambda x: x.tanh()
        return T.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kw)

    n, t = _pair(make)
    _perturb(t)
    _copy_state(t, n)
    N, L = 2, 5
    x = _x(N, L, 8) if bf else _x(L, N, 8)
    kw = {}
    if masks == "causal_kpm":
        kw["src_mask"] = np.triu(np.ones((L, L), bool), 1)
        kpm = np.zeros((N, L), bool)
        kpm[0, -2:] = True
        kw["src_key_padding_mask"] = kpm
        kw["is_causal"] = True
    elif masks == "float":
        kw["src_mask"] = _x(L, L, seed=4)
    _run(n, t, x, **kw)
    n.eval()
    t.eval()
    # grad mode on: torch's inference fast path (not what is compared here) gives NaN with float masks
    ot = t(torch.tensor(x), **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
    on = n(ndgrad.tensor(x), **{k: ndgrad.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
    _close(on, ot)


def test_transformer_encoder_layer_names_and_errors(ref):
    n = ndgrad.nn.TransformerEncoderLayer(8, 2, 16)
    t = torch.nn.TransformerEncoderLayer(8, 2, 16)
    assert list(n.state_dict()) == list(t.state_dict())
    assert [k for k, _ in n.named_children()] == [k for k, _ in t.named_children()]
    ref.raises(lambda T: T.nn.TransformerEncoderLayer(8, 2, activation="tanh"), RuntimeError)
