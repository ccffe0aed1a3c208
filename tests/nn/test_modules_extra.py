"""Modules of issue 19 (3-d conv, 1-d/3-d and adaptive pooling, padding, shuffles, lazy, bags, ...)
against PyTorch: float64 outputs, input and parameter gradients, state_dict keys, repr, errors.

The functional forms are op-table composites: ``tests/ops/test_generic.py`` gradchecks them.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ndgrad as nd

torch = pytest.importorskip("torch")


def _walk(obj, name):
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _copy_state(t_mod, n_mod):
    with nd.no_grad():
        for name, value in t_mod.state_dict().items():
            _walk(n_mod, name).copy_(nd.tensor(value.detach().numpy()))


def _run(mod, lib, arrays, call):
    ins = [lib.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a for a in arrays]
    out = call(mod, ins) if call else mod(*ins)
    outs = out if isinstance(out, tuple) else (out,)
    loss = 0
    rng = np.random.default_rng(0)
    for o in outs:
        if o.dtype.is_floating_point:
            loss = loss + (o * lib.tensor(rng.standard_normal(tuple(o.shape)))).sum()
    if not isinstance(loss, int) and loss.requires_grad:
        loss.backward()
    return outs, ins


def check(n_mod, t_mod, *arrays, call=None, train=True, atol=1e-10):
    """Same parameters in both; compare repr, state_dict keys, outputs and all gradients."""
    t_mod = t_mod.double()
    n_mod = n_mod.double()
    assert repr(n_mod) == repr(t_mod)
    assert list(n_mod.state_dict().keys()) == list(t_mod.state_dict().keys())
    _copy_state(t_mod, n_mod)
    t_mod.train(train)
    n_mod.train(train)
    t_outs, t_ins = _run(t_mod, torch, arrays, call)
    n_outs, n_ins = _run(n_mod, nd, arrays, call)
    assert len(t_outs) == len(n_outs)
    for t, n in zip(t_outs, n_outs, strict=True):
        assert tuple(t.shape) == tuple(n.shape)
        np.testing.assert_allclose(n.detach().numpy(), t.detach().numpy(), atol=atol, rtol=1e-7)
    for t, n in zip(t_ins, n_ins, strict=True):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            np.testing.assert_allclose(n.grad.numpy(), t.grad.numpy(), atol=atol, rtol=1e-7)
    for (name, tp), (nname, np_) in zip(t_mod.named_parameters(), n_mod.named_parameters(), strict=True):
        assert name == nname
        np.testing.assert_allclose(np_.grad.numpy(), tp.grad.numpy(), atol=atol, rtol=1e-7, err_msg=name)
    for (name, tb), (_, nb) in zip(t_mod.named_buffers(), n_mod.named_buffers(), strict=True):
        np.testing.assert_allclose(nb.numpy(), tb.numpy(), atol=atol, rtol=1e-7, err_msg=name)
    return n_mod, t_mod


def r(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape)


def both(name, *args, **kwargs):
    return getattr(nd.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


# --- modules x inputs, compared with torch ---
CASES = [
    ("Conv3d", (2, 3, 2), {}, [r(2, 2, 3, 4, 4)]),
    ("Conv3d", (4, 2, (2, 1, 3)), {"stride": (1, 2, 1), "padding": 1, "groups": 2, "bias": False},
     [r(1, 4, 3, 5, 4)]),
    ("Conv3d", (2, 2, 3), {"padding": "same", "padding_mode": "reflect"}, [r(1, 2, 3, 4, 4)]),
    ("Conv3d", (2, 2, 2), {"padding": 1, "padding_mode": "circular"}, [r(2, 3, 3, 3)]),
    ("ConvTranspose1d", (2, 3, 3), {"stride": 2, "output_padding": 1}, [r(2, 2, 4)]),
    ("ConvTranspose1d", (4, 2, 2), {"groups": 2, "dilation": 2, "padding": 1}, [r(4, 5)]),
    ("ConvTranspose3d", (2, 4, 2), {"groups": 2, "stride": (1, 2, 2)}, [r(1, 2, 2, 3, 3)]),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, [r(2, 3, 8)]),
    ("MaxPool1d", (2,), {"return_indices": True, "dilation": 2}, [r(3, 7)]),
    ("MaxPool3d", (2,), {}, [r(2, 2, 4, 4, 4)]),
    ("MaxPool3d", ((3, 2, 2),), {"stride": 1, "padding": 1, "return_indices": True}, [r(2, 3, 4, 5)]),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
     [r(2, 3, 8)]),
    ("AvgPool3d", (3,), {"stride": 2, "padding": 1}, [r(1, 2, 5, 4, 5)]),
    ("AvgPool3d", (2,), {"ceil_mode": True, "count_include_pad": False, "padding": 1}, [r(2, 3, 5, 4)]),
    ("AvgPool3d", (2,), {"divisor_override": 3}, [r(1, 2, 4, 4, 4)]),
    ("AdaptiveAvgPool1d", (3,), {}, [r(2, 3, 7)]),
    ("AdaptiveAvgPool3d", ((2, None, 3),), {}, [r(2, 2, 5, 4, 7)]),
    ("AdaptiveAvgPool3d", (1,), {}, [r(3, 4, 4, 4)]),
    ("AdaptiveMaxPool1d", (3, True), {}, [r(2, 3, 7)]),
    ("AdaptiveMaxPool2d", ((3, 2),), {"return_indices": True}, [r(2, 2, 7, 5)]),
    ("AdaptiveMaxPool2d", (1,), {}, [r(3, 4, 4)]),
    ("AdaptiveMaxPool3d", ((2, 3, 2),), {}, [r(1, 2, 3, 5, 4)]),
    ("LPPool1d", (2, 3), {"stride": 2}, [np.abs(r(2, 3, 8)) + 0.5]),
    ("LPPool2d", (1.5, 2), {}, [np.abs(r(2, 2, 4, 6)) + 0.5]),
    ("PReLU", (), {}, [r(2, 3, 4)]),
    ("PReLU", (3, 0.1), {}, [r(2, 3, 4, 2)]),
    ("InstanceNorm1d", (3,), {}, [r(2, 3, 5)]),
    ("InstanceNorm2d", (3,), {"affine": True}, [r(2, 3, 4, 4)]),
    ("InstanceNorm3d", (2,), {"affine": True, "track_running_stats": True, "momentum": 0.3},
     [r(2, 2, 2, 3, 3)]),
    ("InstanceNorm1d", (3,), {"track_running_stats": True, "momentum": None}, [r(3, 6)]),
    ("LocalResponseNorm", (3,), {}, [r(2, 5, 4)]),
    ("LocalResponseNorm", (2, 1e-2, 0.5, 2.0), {}, [r(2, 4, 3, 3, 2)]),
    ("ZeroPad1d", (2,), {}, [r(2, 3, 4)]),
    ("ZeroPad2d", ((1, 2, 0, 3),), {}, [r(2, 3, 4)]),
    ("ZeroPad3d", (1,), {}, [r(1, 2, 2, 3, 3)]),
    ("ConstantPad1d", ((1, 3), 2.5), {}, [r(3, 4)]),
    ("ConstantPad2d", (1, -1.0), {}, [r(1, 2, 3, 3)]),
    ("ConstantPad3d", ((1, 0, 2, 1, 0, 1), 0.5), {}, [r(2, 2, 3, 3)]),
    ("ReflectionPad1d", ((2, 3),), {}, [r(2, 3, 5)]),
    ("ReflectionPad2d", (2,), {}, [r(2, 3, 4, 5)]),
    ("ReflectionPad3d", ((1, 2, 0, 1, 2, 1),), {}, [r(1, 2, 3, 4, 3)]),
    ("ReplicationPad1d", (3,), {}, [r(3, 4)]),
    ("ReplicationPad2d", ((1, 0, 2, 3),), {}, [r(2, 2, 3, 3)]),
    ("ReplicationPad3d", (2,), {}, [r(2, 2, 3, 3)]),
    ("CircularPad1d", ((1, 2),), {}, [r(2, 3, 4)]),
    ("CircularPad2d", (1,), {}, [r(2, 3, 4, 5)]),
    ("CircularPad3d", ((1, 2, 0, 1, 2, 0),), {}, [r(1, 2, 3, 3, 3)]),
    ("PixelShuffle", (2,), {}, [r(2, 8, 3, 2)]),
    ("PixelShuffle", (3,), {}, [r(9, 2, 2)]),
    ("PixelUnshuffle", (2,), {}, [r(2, 2, 4, 6)]),
    ("ChannelShuffle", (2,), {}, [r(2, 6, 3, 3)]),
    ("Unfold", ((2, 3),), {"dilation": (1, 2), "padding": 1, "stride": (2, 1)}, [r(2, 3, 5, 6)]),
    ("Unfold", (2,), {}, [r(3, 4, 4)]),
    ("Fold", ((4, 5), 2), {}, [r(2, 12, 12)]),
    ("Fold", ((5, 6), (2, 3)), {"dilation": (2, 1), "padding": 1, "stride": (2, 1)}, [r(1, 12, 18)]),
    ("CosineSimilarity", (), {}, [r(3, 4), r(3, 4, seed=1)]),
    ("CosineSimilarity", (-1, 1e-6), {}, [r(2, 3, 4), r(3, 4, seed=1)]),
    ("PairwiseDistance", (), {}, [r(3, 4), r(3, 4, seed=1)]),
    ("PairwiseDistance", (1.0, 1e-6, True), {}, [r(3, 4), r(4, seed=1)]),
    ("Softmax2d", (), {}, [r(2, 3, 2, 2)]),
    ("Softmax2d", (), {}, [r(3, 2, 2)]),
]


@pytest.mark.parametrize("name,args,kwargs,inputs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_module_matches_torch(name, args, kwargs, inputs):
    torch.manual_seed(0)
    n_mod, t_mod = both(name, *args, **kwargs)
    check(n_mod, t_mod, *inputs)


def test_instance_norm_running_stats_and_eval():
    n_mod, t_mod = both("InstanceNorm2d", 3, affine=True, track_running_stats=True)
    for seed in range(3):
        check(n_mod, t_mod, r(2, 3, 4, 4, seed=seed))
    n_mod.zero_grad()
    t_mod.zero_grad()
    check(n_mod, t_mod, r(2, 3, 4, 4, seed=7), train=False)
    assert int(n_mod.num_batches_tracked) == int(t_mod.num_batches_tracked) == 0


def test_instance_norm_errors():
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 2D input\)"):
        nd.nn.InstanceNorm2d(3)(nd.ones(3, 4))
    with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match num_features \(4\), but got: 3"):
        nd.nn.InstanceNorm1d(4, affine=True)(nd.ones(2, 3, 5))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        nd.nn.InstanceNorm1d(4)(nd.randn(2, 3, 5))
    assert any("does not match num_features" in str(x.message) for x in w)
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        nd.nn.functional.instance_norm(nd.ones(2, 3, 1))


# --- EmbeddingBag ---
BAG_CASES = [
    ({"mode": "sum"}, [np.array([1, 2, 4, 5, 4, 3, 2, 0]), np.array([0, 2, 2, 5])], {}),
    ({"mode": "mean"}, [np.array([1, 2, 4, 5, 4, 3, 2, 0]), np.array([0, 2, 2, 5])], {}),
    ({"mode": "max"}, [np.array([1, 2, 4, 5, 4, 3, 2, 0]), np.array([0, 2, 2, 5])], {}),
    ({"mode": "max", "include_last_offset": True}, [np.array([1, 2, 4, 5, 4, 3]), np.array([0, 3, 3, 6])], {}),
    ({"mode": "mean", "padding_idx": 0}, [np.array([[1, 2, 0], [0, 0, 0], [3, 4, 5]])], {}),
    ({"mode": "sum", "padding_idx": -1}, [np.array([1, 5, 5, 2, 3]), np.array([0, 3])], {}),
    ({"mode": "sum"}, [np.array([1, 2, 4, 5, 4]), np.array([0, 2]), r(5)], {}),
]


@pytest.mark.parametrize("kwargs,inputs,_", BAG_CASES, ids=[str(i) for i in range(len(BAG_CASES))])
def test_embedding_bag(kwargs, inputs, _):
    torch.manual_seed(0)
    n_mod, t_mod = both("EmbeddingBag", 6, 3, **kwargs)

    def call(mod, ins):
        return mod(ins[0], *ins[1:2], per_sample_weights=ins[2] if len(ins) > 2 else None)

    check(n_mod, t_mod, *inputs, call=call)


def test_embedding_bag_padding_row_zero_and_errors():
    m = nd.nn.EmbeddingBag(5, 2, padding_idx=2)
    assert m.weight[2].tolist() == [0.0, 0.0]
    F = nd.nn.functional
    w = nd.randn(4, 3)
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(nd.tensor([1, 2, 3]), w)
    with pytest.raises(RuntimeError, match=r"offsets\[0\] has to be 0"):
        F.embedding_bag(nd.tensor([1, 2, 3]), w, nd.tensor([1, 2]))
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        F.embedding_bag(nd.tensor([[1, 2, 3]]), w, nd.tensor([0]))
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        F.embedding_bag(nd.tensor([1, 2, 3]), w, nd.tensor([0, 2]), mode="foo")
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for mode='sum'"):
        F.embedding_bag(nd.tensor([[1, 2]]), w, mode="mean", per_sample_weights=nd.ones(1, 2))
    with pytest.raises(RuntimeError, match=r"Index 1 of input takes value 5 which is not in the valid range \[0, 4\)"):
        F.embedding_bag(nd.tensor([1, 5, 3]), w, nd.tensor([0, 2]))
    with pytest.raises(RuntimeError, match=r"offsets\[-1\] can not be greater than input's length 3"):
        F.embedding_bag(nd.tensor([1, 2, 3]), w, nd.tensor([0, 4]))


# --- lazy modules ---
def test_lazy_linear_materialises_and_becomes_linear():
    m = nd.nn.LazyLinear(3)
    t = torch.nn.LazyLinear(3)
    assert repr(m) == repr(t)
    assert m.in_features == 0
    assert isinstance(m.weight, nd.nn.UninitializedParameter)
    assert list(m.state_dict().keys()) == list(t.state_dict().keys())
    x = nd.randn(5, 4)
    y = m(x)
    t(torch.randn(5, 4))
    assert type(m) is nd.nn.Linear and m.in_features == 4
    assert repr(m) == repr(t)
    assert type(m.weight) is nd.nn.Parameter and tuple(m.weight.shape) == (3, 4)
    assert tuple(y.shape) == (5, 3)
    bound = 1 / 2  # U(-1/sqrt(in_features), 1/sqrt(in_features))
    assert float(m.weight.abs().max()) <= bound and float(m.bias.abs().max()) <= bound
    y.sum().backward()
    assert tuple(m.weight.grad.shape) == (3, 4)
    assert len(m._forward_pre_hooks) == 0
    m2 = nd.nn.LazyLinear(2, bias=False)
    m2(nd.randn(1, 6))
    assert m2.bias is None and tuple(m2.weight.shape) == (2, 6)


def test_lazy_conv2d():
    m, t = nd.nn.LazyConv2d(4, 3, padding=1, groups=2), torch.nn.LazyConv2d(4, 3, padding=1, groups=2)
    assert repr(m) == repr(t)
    m(nd.randn(2, 6, 5, 5))
    t(torch.randn(2, 6, 5, 5))
    assert type(m) is nd.nn.Conv2d and repr(m) == repr(t)
    assert tuple(m.weight.shape) == tuple(t.weight.shape)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nd.nn.LazyConv2d(4, 3, groups=2)(nd.randn(1, 3, 5, 5))


# --- errors against torch's messages ---
def _same_error(fn_nd, fn_t):
    with pytest.raises(Exception) as t_err:
        fn_t()
    with pytest.raises(type(t_err.value)) as n_err:
        fn_nd()
    assert str(n_err.value).replace("ndgrad", "torch") == str(t_err.value)


ERRORS = [
    ("pixel_shuffle", lambda lib: (lib.randn(2, 5, 2, 2), 2)),
    ("pixel_shuffle", lambda lib: (lib.randn(2, 2), 2)),
    ("pixel_shuffle", lambda lib: (lib.randn(2, 4, 2, 2), 0)),
    ("pixel_unshuffle", lambda lib: (lib.randn(2, 4, 3, 2), 2)),
    ("pixel_unshuffle", lambda lib: (lib.randn(2, 4, 2, 3), 2)),
    ("channel_shuffle", lambda lib: (lib.randn(1, 4, 2, 2), 3)),
    ("channel_shuffle", lambda lib: (lib.randn(1, 4, 2, 2), 0)),
    ("prelu", lambda lib: (lib.randn(1, 2, 3), lib.ones(3))),
    ("fold", lambda lib: (lib.randn(1, 7, 4), (3, 3), (2, 2))),
    ("fold", lambda lib: (lib.randn(1, 8, 3), (3, 3), (2, 2))),
    ("unfold", lambda lib: (lib.randn(1, 2, 2, 2), 3)),
    ("max_pool3d", lambda lib: (lib.randn(1, 2, 2, 2), 3)),
    ("max_pool1d", lambda lib: (lib.randn(2, 2, 2, 2), 2)),
    ("max_pool1d", lambda lib: (lib.randn(1, 2, 3), 4)),
    ("max_pool1d", lambda lib: (lib.randn(1, 2, 5), 3, 1, 2)),
    ("avg_pool1d", lambda lib: (lib.randn(2, 2, 2, 2), 2)),
    ("adaptive_avg_pool1d", lambda lib: (lib.randn(2, 3, 4, 5), 2)),
    ("adaptive_max_pool1d", lambda lib: (lib.randn(2, 3, 4, 5), 2)),
    ("adaptive_max_pool2d", lambda lib: (lib.randn(2, 3), 2)),
    ("adaptive_avg_pool3d", lambda lib: (lib.randn(2, 3), 2)),
    ("adaptive_max_pool3d", lambda lib: (lib.randn(2, 3), 2)),
    ("avg_pool3d", lambda lib: (lib.randn(1, 2, 4, 4), 2, 2, 2)),
    ("conv_transpose1d", lambda lib: (lib.randn(1, 2, 3), lib.randn(2, 2, 3), None, 1, 0, 1)),
    ("conv_transpose3d", lambda lib: (lib.randn(1, 2, 3, 3, 3), lib.randn(2, 2, 3, 3, 3), None, 1, 0, 1)),
    ("conv3d", lambda lib: (lib.randn(1, 3, 4, 4, 4), lib.randn(2, 2, 2, 2, 2))),
    ("local_response_norm", lambda lib: (lib.randn(2, 3), 2)),
    ("triplet_margin_loss", lambda lib: (lib.randn(3, 2), lib.randn(2), lib.randn(3, 2))),
    ("pad", lambda lib: (lib.randn(1, 2, 3), (3, 0), "reflect")),
    ("pad", lambda lib: (lib.randn(2, 3, 3), (0, 0, 3, 3), "reflect")),
    ("pad", lambda lib: (lib.randn(1, 2, 3), (4, 0), "circular")),
    ("pad", lambda lib: (lib.randn(1, 2, 3), (1, 1, 1, 1, 1, 1), "reflect")),
]


@pytest.mark.parametrize("fn,make", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_errors_match_torch(fn, make):
    _same_error(lambda: getattr(nd.nn.functional, fn)(*make(nd)),
                lambda: getattr(torch.nn.functional, fn)(*make(torch)))


def test_module_errors():
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nd.nn.CircularPad1d(1)(nd.ones(1, 1, 2, 2))
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D instead"):
        nd.nn.Softmax2d()(nd.ones(2, 2))
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose3d'):
        nd.nn.ConvTranspose3d(2, 2, 2, padding_mode="reflect")


def test_prelu_init_and_state():
    n, t = both("PReLU", 4, init=0.3)
    assert n.weight.tolist() == pytest.approx(t.weight.tolist())
    assert list(n.state_dict()) == ["weight"]


def test_functional_names_exist():
    F = nd.nn.functional
    for name in ("conv3d", "conv_transpose1d", "conv_transpose3d", "max_pool1d", "max_pool3d", "avg_pool1d",
                 "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
                 "adaptive_max_pool2d", "lp_pool1d", "lp_pool2d", "prelu", "instance_norm", "local_response_norm",
                 "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "embedding_bag", "unfold", "fold",
                 "cosine_similarity", "pairwise_distance", "triplet_margin_loss"):
        assert callable(getattr(F, name)), name


@pytest.mark.parametrize("kw", [{}, {"margin": 0.5, "p": 1, "swap": True}, {"reduction": "none"}])
def test_triplet_margin_loss_module(kw):
    a, p, n = (np.random.default_rng(i).standard_normal((4, 5)) for i in range(3))
    want = torch.nn.TripletMarginLoss(**kw)(*(torch.tensor(x) for x in (a, p, n)))
    got = nd.nn.TripletMarginLoss(**kw)(*(nd.tensor(x) for x in (a, p, n)))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    assert repr(nd.nn.TripletMarginLoss(**kw)) == repr(torch.nn.TripletMarginLoss(**kw))
