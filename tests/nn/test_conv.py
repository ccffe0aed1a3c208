"""Conv / pooling / resampling modules against PyTorch with copied weights; argument errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ndgrad

X = np.random.default_rng(0).standard_normal((2, 4, 7, 6))

MODULES = [
    ("Conv2d", lambda nn: nn.Conv2d(4, 6, 3, padding=1)),
    ("Conv2d_stride_dil_groups", lambda nn: nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2),
                                                      groups=2, bias=False)),
    ("Conv2d_same", lambda nn: nn.Conv2d(4, 3, 4, padding="same")),
    ("Conv2d_reflect", lambda nn: nn.Conv2d(4, 3, 3, padding=1, padding_mode="reflect")),
    ("Conv2d_circular_same", lambda nn: nn.Conv2d(4, 3, 2, padding="same", padding_mode="circular")),
    ("ConvTranspose2d", lambda nn: nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1, groups=2)),
    ("MaxPool2d", lambda nn: nn.MaxPool2d(2)),
    ("MaxPool2d_ceil_pad", lambda nn: nn.MaxPool2d(3, 2, padding=1, ceil_mode=True)),
    ("AvgPool2d", lambda nn: nn.AvgPool2d(3, 2, padding=1, count_include_pad=False, ceil_mode=True)),
    ("AdaptiveAvgPool2d", lambda nn: nn.AdaptiveAvgPool2d((3, 4))),
    ("Upsample", lambda nn: nn.Upsample(scale_factor=2)),
    ("Upsample_bilinear", lambda nn: nn.Upsample(size=(9, 5), mode="bilinear", align_corners=False)),
]


@pytest.mark.parametrize("name,make", MODULES, ids=[m[0] for m in MODULES])
def test_module_matches_torch(ref, name, make):
    m = make(ndgrad.nn).double()
    params = [np.array(p._data) for p in m.parameters()]

    def run(T):
        mod = make(T.nn).double()
        with T.no_grad():
            for p, v in zip(mod.parameters(), params, strict=True):
                p.copy_(T.tensor(v))
        x = T.tensor(X, requires_grad=True)
        y = mod(x)
        y.backward(T.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape))))
        return [y, x.grad] + [p.grad for p in mod.parameters()]

    ref.same(run)


def test_maxpool_indices_and_unbatched(ref):
    def run(T):
        x = T.tensor(X[0], requires_grad=True)
        y, i = T.nn.MaxPool2d(3, 1, return_indices=True)(x)
        (y * y).sum().backward()
        return y, i, x.grad

    ref.same(run)


def test_conv_unbatched_and_1d(ref):
    def run(T):
        x = T.tensor(X[0], requires_grad=True)
        w = T.tensor(X[1, :3, :2, :4].reshape(3, 4, 2, 1).copy(), requires_grad=True)
        y = T.nn.functional.conv2d(x, w, padding=(1, 0))
        x1 = T.tensor(X[0, :, 0], requires_grad=True)
        w1 = T.tensor(X[1, :2, :4, :2].copy())
        y1 = T.nn.functional.conv1d(x1, w1, stride=2)
        (y.sum() + (y1 ** 2).sum()).backward()
        return y, y1, x.grad, w.grad, x1.grad

    ref.same(run)


def test_double_backward_conv(ref):
    def run(T):
        x = T.tensor(X[:1], requires_grad=True)
        w = T.tensor(X[1, :3, :4, :2, None].repeat(2, axis=-1).reshape(3, 4, 2, 2).copy(), requires_grad=True)
        y = T.nn.functional.conv2d(x, w, stride=2, padding=1)
        gx, gw = T.autograd.grad((y ** 2).sum(), (x, w), create_graph=True)
        (gx.sum() + (gw ** 2).sum()).backward()
        return gx, gw, x.grad, w.grad

    ref.same(run, rtol=1e-6)


def test_node_names():
    x = ndgrad.randn(1, 1, 4, 4, requires_grad=True)
    F = ndgrad.nn.functional
    assert type(F.conv2d(x, ndgrad.randn(1, 1, 3, 3)).grad_fn).__name__ == "ConvolutionBackward0"
    assert type(F.max_pool2d(x, 2).grad_fn).__name__ == "MaxPool2DWithIndicesBackward0"
    assert type(F.avg_pool2d(x, 2).grad_fn).__name__ == "AvgPool2DBackward0"
    assert type(F.adaptive_avg_pool2d(x, 2).grad_fn).__name__ == "AdaptiveAvgPool2DBackward0"
    assert type(F.interpolate(x, scale_factor=2).grad_fn).__name__ == "UpsampleNearest2DBackward0"


def test_default_init_bounds():
    m = ndgrad.nn.Conv2d(3, 8, 3)
    bound = 1 / math.sqrt(27)
    assert tuple(m.weight.shape) == (8, 3, 3, 3) and tuple(m.bias.shape) == (8,)
    assert float(m.weight.abs().max()) <= bound and float(m.bias.abs().max()) <= bound
    assert float(m.weight.std()) > bound / 4  # not all zeros


_X4 = X[:1, :3, :5, :5]
ERRORS = [
    ("channels", lambda T: T.nn.functional.conv2d(T.tensor(_X4), T.zeros(4, 2, 3, 3, dtype=T.float64))),
    ("groups", lambda T: T.nn.functional.conv2d(T.tensor(_X4), T.zeros(4, 3, 3, 3, dtype=T.float64), groups=2)),
    ("dim", lambda T: T.nn.functional.conv2d(T.zeros(5, dtype=T.float64), T.zeros(4, 3, 3, 3, dtype=T.float64))),
    ("kernel", lambda T: T.nn.functional.conv2d(T.tensor(_X4), T.zeros(4, 3, 7, 7, dtype=T.float64))),
    ("same_stride", lambda T: T.nn.functional.conv2d(T.tensor(_X4), T.zeros(4, 3, 3, 3, dtype=T.float64),
                                                      padding="same", stride=2)),
    ("bad_string", lambda T: T.nn.functional.conv2d(T.tensor(_X4), T.zeros(4, 3, 3, 3, dtype=T.float64),
                                                     padding="foo")),
    ("stride0", lambda T: T.nn.functional.conv2d(T.tensor(_X4), T.zeros(4, 3, 3, 3, dtype=T.float64), stride=0)),
    ("neg_pad", lambda T: T.nn.functional.conv2d(T.tensor(_X4), T.zeros(4, 3, 3, 3, dtype=T.float64), padding=-1)),
    ("bias", lambda T: T.nn.functional.conv2d(T.tensor(_X4), T.zeros(4, 3, 3, 3, dtype=T.float64),
                                               T.zeros(3, dtype=T.float64))),
    ("conv1d_dim", lambda T: T.nn.functional.conv1d(T.tensor(_X4), T.zeros(4, 3, 3, dtype=T.float64))),
    ("pool_pad", lambda T: T.nn.functional.max_pool2d(T.tensor(_X4), 2, padding=2)),
    ("pool_small", lambda T: T.nn.functional.max_pool2d(T.tensor(_X4), 7)),
    ("pool_dim", lambda T: T.nn.functional.max_pool2d(T.zeros(5, 5), 2)),
    ("avg_pad", lambda T: T.nn.functional.avg_pool2d(T.tensor(_X4), 2, padding=2)),
    ("avg_small", lambda T: T.nn.functional.avg_pool2d(T.tensor(_X4), 7)),
    ("pool_stride0", lambda T: T.nn.functional.max_pool2d(T.tensor(_X4), 2, stride=0)),
    ("divisor0", lambda T: T.nn.functional.avg_pool2d(T.tensor(_X4), 2, divisor_override=0)),
    ("outpad", lambda T: T.nn.functional.conv_transpose2d(T.tensor(_X4), T.zeros(3, 2, 3, 3, dtype=T.float64),
                                                          stride=2, output_padding=2)),
    ("adaptive_dim", lambda T: T.nn.functional.adaptive_avg_pool2d(T.zeros(5), 2)),
]
VALUE_ERRORS = [
    ("interp_none", lambda T: T.nn.functional.interpolate(T.tensor(_X4), mode="bilinear")),
    ("interp_both", lambda T: T.nn.functional.interpolate(T.tensor(_X4), size=3, scale_factor=2.0)),
    ("interp_align", lambda T: T.nn.functional.interpolate(T.tensor(_X4), size=3, align_corners=True)),
    ("interp_antialias_nearest", lambda T: T.nn.functional.interpolate(T.tensor(_X4), size=3, antialias=True)),
    ("module_groups", lambda T: T.nn.Conv2d(3, 4, 3, groups=2)),
]
MODE_ERRORS = [  # a linear mode for another number of dims (NotImplementedError, PyTorch's words)
    ("linear_4d", lambda T: T.nn.functional.interpolate(T.tensor(_X4), size=3, mode="linear")),
    ("bilinear_5d", lambda T: T.nn.functional.interpolate(T.zeros(1, 1, 2, 2, 2), size=3, mode="bilinear")),
    ("trilinear_4d", lambda T: T.nn.functional.interpolate(T.tensor(_X4), size=3, mode="trilinear")),
    ("bilinear_3d", lambda T: T.nn.functional.interpolate(T.zeros(1, 2, 3), size=3, mode="bilinear")),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(ref, name, fn):
    ref.raises(fn, RuntimeError)


@pytest.mark.parametrize("name,fn", VALUE_ERRORS, ids=[e[0] for e in VALUE_ERRORS])
def test_value_errors(ref, name, fn):
    ref.raises(fn, ValueError)


@pytest.mark.parametrize("name,fn", MODE_ERRORS, ids=[e[0] for e in MODE_ERRORS])
def test_interpolate_mode_errors(ref, name, fn):
    ref.raises(fn, NotImplementedError)


@pytest.mark.parametrize("mode,shape", [("bicubic", (2, 3, 5, 4)), ("trilinear", (1, 2, 3, 4, 2)),
                                        ("nearest", (1, 2, 3, 2, 4)), ("nearest-exact", (2, 2, 7)),
                                        ("nearest-exact", (1, 2, 5, 3)), ("area", (1, 2, 6, 4, 5))])
@pytest.mark.parametrize("how", [{"scale_factor": 1.7}, {"scale_factor": 0.6}, {"size": 3}])
def test_interpolate_modes_match_torch(ref, mode, shape, how):
    """Values and gradients (float64, and float32 loosely), align_corners both ways where the mode
    takes it, node names as PyTorch's."""
    x = np.random.default_rng(0).standard_normal(shape)
    acs = [False, True] if mode in ("bicubic", "trilinear") else [None]
    for ac in acs:
        for dt, tol in (("float64", 1e-12), ("float32", 1e-4)):
            def f(T_, ac=ac, dt=dt):
                t = T_.tensor(x, dtype=getattr(T_, dt), requires_grad=True)
                out = T_.nn.functional.interpolate(t, mode=mode, align_corners=ac, **how)
                out.backward(T_.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)),
                                       dtype=out.dtype))
                name = type(out.grad_fn).__name__
                return out, t.grad, name if mode != "area" or len(shape) == 4 else ""

            ref.same(f, rtol=tol, atol=tol)


def test_errors_type_only():
    # torch's wording here depends on its kernel choice (dtype) or on set order (padding_mode)
    with pytest.raises(RuntimeError, match="should be the same"):
        ndgrad.nn.functional.conv2d(ndgrad.tensor(_X4).float(), ndgrad.zeros(4, 3, 3, 3, dtype=ndgrad.float64))
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        ndgrad.nn.Conv2d(3, 3, 3, padding_mode="bad")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        ndgrad.nn.Conv2d(3, 3, 3, padding="full")


@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("k", [2, 3])
def test_max_pool_ties_and_nan_pick_what_torch_picks(ref, k, nan):
    """Non-overlapping windows take a fast path: ties (relu zeros) and NaN must still give
    PyTorch's values, indices and gradients."""
    rng = np.random.default_rng(5)
    x = np.maximum(rng.standard_normal((2, 3, 6, 7)), 0)  # many windows of zeros
    x[0, 1, 0, 0] = x[0, 1, 0, 1] = 5.0  # a tie inside one window
    if nan:
        x[1, 2, 4, 4] = np.nan

    def f(T):
        t = T.tensor(x, requires_grad=True)
        vals, idx = T.nn.functional.max_pool2d(t, k, return_indices=True)
        (T.where(vals.isnan(), T.zeros_like(vals), vals) * T.arange(float(vals.numel())).reshape(vals.shape)).sum().backward()
        return vals, idx, t.grad

    ref.same(f)


@pytest.mark.parametrize("case", [
    (4, 6, 5, (7, 6), (3, 3), (1, 1), (1, 1)), (3, 5, 4, (9,), (3,), (2,), (2,)),
    (2, 7, 3, (5, 6), (2, 3), (0, 2), (1, 2)), (2, 6, 8, (4, 4, 3), (3, 2, 2), (1, 0, 1), (1, 1, 1)),
    (2, 1, 16, (28, 28), (3, 3), (1, 1), (1, 1))])
def test_batch_last_layout_matches_window_layout(monkeypatch, case):
    """Both im2col layouts (conv.py picks one by cost) give the same convolution and gradients."""
    from ndgrad._ops import conv

    N, cin, cout, L, K, pad, dil = case
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((N, cin) + L), rng.standard_normal((cout, cin) + K)
    one = (1,) * len(L)

    def run():
        y = conv._conv_fwd(x, w, one, pad, dil, 1)
        g = np.cos(y)
        return (y, conv._conv_input_grad(g, w, list(L), one, pad, dil, 1),
                conv._conv_weight_grad(g, x, w.shape, one, pad, dil, 1))

    for choice in (True, False):
        monkeypatch.setattr(conv, "_batch_last_pays", lambda *a, c=choice: c)
        got = run()
        if choice:
            first = got
            assert all(a.flags.c_contiguous for a in got)
    for a, b in zip(first, got):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
