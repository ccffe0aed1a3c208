"""The rarer ``nn.functional`` pieces and their modules against PyTorch: shrinks, rrelu, gumbel
softmax, in-place activations, normalize/pdist, the margin and likelihood losses, unpooling,
affine_grid/grid_sample and the deprecated upsample aliases.

The op table's generic tests already run every sample of these composites (gradcheck,
gradgradcheck, the torch oracle); here: seeded random draws, in-place forms, modules, options
the samples do not reach, warnings and error messages.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ndgrad

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 6))


def _grads(T_, fn, *arrays, dtype="float64", no_grad=()):
    """``fn`` on float tensors made from ``arrays`` (requiring grad unless listed), its output and
    the inputs' gradients after a backward of a fixed random cotangent."""
    ts = [T_.tensor(a, dtype=getattr(T_, dtype), requires_grad=i not in no_grad) if a.dtype.kind == "f"
          else T_.tensor(a) for i, a in enumerate(arrays)]
    out = fn(T_, *ts)
    if out.requires_grad:
        out.backward(T_.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)),
                               dtype=out.dtype))
    return out, [t.grad for t in ts if t.requires_grad]


# --- activations ---
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("lower,upper", [(1 / 8, 1 / 3), (0.05, 0.9), (0.3, 0.3)])
def test_rrelu_training_draws_pytorchs_noise(ref, dtype, lower, upper):
    def f(T_):
        T_.manual_seed(3)
        return _grads(T_, lambda m, x: m.nn.functional.rrelu(x, lower, upper, training=True), X, dtype=dtype)

    tol = {"rtol": 1e-6, "atol": 1e-7} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-14}
    ref.same(f, **tol)


def test_rrelu_eval_inplace_and_module(ref):
    def f(T_):
        x = T_.tensor(X, requires_grad=True)
        y = x * 1
        T_.nn.functional.rrelu_(y, 0.1, 0.3)
        y2 = x * 1
        T_.nn.functional.rrelu(y2, inplace=True)
        m = T_.nn.RReLU(0.2, 0.4)
        m.eval()
        z = m(x)
        (y.sum() + y2.sum() + z.sum()).backward()
        T_.manual_seed(0)
        m.train()
        return y, y2, z, x.grad, m(x), repr(m), repr(T_.nn.RReLU(0.1, 0.2, True))

    ref.same(f, rtol=1e-12)
    ref.raises(lambda T_: T_.nn.functional.rrelu(T_.tensor(X), 0.5, 0.1, True), RuntimeError,
               "Lower bound should be less than or equal to the upper bound")


@pytest.mark.parametrize("lambd", [0.5, 1.0, 0.0])
def test_shrinks(ref, lambd):
    x = np.concatenate([X.ravel(), [lambd, -lambd]])  # the boundaries: zero, with zero gradient
    for name in ("hardshrink", "softshrink"):
        ref.same(lambda T_, name=name: _grads(T_, lambda m, t: getattr(m.nn.functional, name)(t, lambd), x))
        ref.same(lambda T_, name=name: _grads(T_, lambda m, t: getattr(m.nn, name.capitalize())(lambd)(t), x,
                                              dtype="float32"), rtol=1e-6)
    ref.same(lambda T_: _grads(T_, lambda m, t: t.hardshrink(lambd), x))
    ref.same(lambda T_: (repr(T_.nn.Hardshrink()), repr(T_.nn.Softshrink(0.3))))


def test_softshrink_negative_lambda(ref):
    for dtype in ("float32", "float64"):
        ref.raises(lambda T_, dtype=dtype: T_.nn.functional.softshrink(T_.tensor(X, dtype=getattr(T_, dtype)), -1.5),
                   RuntimeError)


@pytest.mark.parametrize("name,args", [("relu_", ()), ("elu_", (0.7,)), ("leaky_relu_", (0.2,)), ("selu_", ()),
                                       ("celu_", (1.3,)), ("threshold_", (0.1, -2.0))])
def test_inplace_functional_forms(ref, name, args):
    def f(T_):
        x = T_.tensor(X, requires_grad=True)
        y = x * 2
        out = getattr(T_.nn.functional, name)(y, *args)
        assert out is y
        y.sum().backward()
        return y, x.grad

    ref.same(f)


@pytest.mark.parametrize("name,args", [("elu", (0.7,)), ("leaky_relu", (0.2,)), ("selu", ()), ("celu", (1.3,)),
                                       ("threshold", (0.1, -2.0))])
def test_inplace_keyword(ref, name, args):
    def f(T_):
        x = T_.tensor(X, requires_grad=True)
        y = x * 2
        out = getattr(T_.nn.functional, name)(y, *args, inplace=True)
        z = getattr(T_.nn.functional, name)(x, *args, inplace=False)
        (out.sum() + z.sum()).backward()
        return out is y, y, z, x.grad

    ref.same(f)


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gumbel_softmax_seeded(ref, hard, dtype):
    def f(T_):
        T_.manual_seed(4)
        return _grads(T_, lambda m, x: m.nn.functional.gumbel_softmax(x, 0.5, hard, dim=0), X, dtype=dtype)

    ref.same(f, rtol=1e-5, atol=1e-6)


def test_gumbel_softmax_eps_warning():
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated and has no effect."):
        ndgrad.nn.functional.gumbel_softmax(ndgrad.tensor(X), eps=1e-5)


# --- normalize, pdist ---
@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (float("inf"), 1)])
def test_normalize(ref, p, dim):
    ref.same(lambda T_: _grads(T_, lambda m, x: m.nn.functional.normalize(x, p, dim), X))


def test_normalize_out_and_errors(ref):
    def f(T_):
        out = T_.empty(4, 6, dtype=T_.float64)
        r = T_.nn.functional.normalize(T_.tensor(X), out=out)
        return r is out, out

    ref.same(f)
    ref.raises(lambda T_: T_.nn.functional.normalize(T_.tensor(X), dim=2), IndexError)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.5, 3.0, float("inf")])
def test_pdist(ref, p):
    x = np.concatenate([X, X[:1]])  # a repeated row: distance 0
    ref.same(lambda T_: _grads(T_, lambda m, t: m.nn.functional.pdist(t, p), x))


def test_pdist_errors(ref):
    ref.raises(lambda T_: T_.nn.functional.pdist(T_.tensor(X[0])), RuntimeError,
               "pdist only supports 2D tensors, got: 1D")
    ref.raises(lambda T_: T_.nn.functional.pdist(T_.tensor(X), -1.0), RuntimeError)
    ref.raises(lambda T_: T_.nn.functional.pdist(T_.ones(3, 2, dtype=T_.long)), RuntimeError)


# --- losses ---
S = np.where(RNG.uniform(size=4) > 0.5, 1.0, -1.0)
W6 = RNG.uniform(0.5, 2, 6)
LOSS_CASES = {
    "cosine_embedding_loss": (lambda F, a, b, t, **k: F.cosine_embedding_loss(a, b, t, 0.2, **k),
                              (X, RNG.standard_normal((4, 6)), S), (2,)),
    "hinge_embedding_loss": (lambda F, a, t, **k: F.hinge_embedding_loss(a, t, 0.7, **k),
                             (X, np.where(X > 0, 1.0, -1.0)), (1,)),
    "margin_ranking_loss": (lambda F, a, b, t, **k: F.margin_ranking_loss(a, b, t, 0.1, **k),
                            (X[0], X[1], S[:1].repeat(6)), ()),
    "soft_margin_loss": (lambda F, a, t, **k: F.soft_margin_loss(a, t, **k), (X, np.sign(X[::-1].copy())), (1,)),
    "multi_margin_loss": (lambda F, a, t, **k: F.multi_margin_loss(a, t, 2, 0.5, **k), (X, np.array([0, 5, 2, 2])),
                          ()),
    "multilabel_margin_loss": (lambda F, a, t, **k: F.multilabel_margin_loss(a, t, **k),
                               (X, np.array([[3, 0, -1, 1, 2, 2], [1, 2, 3, 0, 4, 5], [-1, 1, 2, 0, 0, 0],
                                             [5, 5, 4, -1, 3, 1]])), ()),
    "multilabel_soft_margin_loss": (lambda F, a, t, **k: F.multilabel_soft_margin_loss(a, t, **k),
                                    (X, RNG.uniform(0, 1, (4, 6))), ()),
    "poisson_nll_loss": (lambda F, a, t, **k: F.poisson_nll_loss(a, t, True, True, **k),
                         (X, RNG.integers(0, 6, (4, 6)).astype(float)), (1,)),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_loss_values_and_gradients(ref, name, reduction):
    fn, arrays, no_grad = LOSS_CASES[name]
    ref.same(lambda T_: _grads(T_, lambda m, *t: fn(m.nn.functional, *t, reduction=reduction), *arrays,
                               no_grad=no_grad))
    ref.same(lambda T_: _grads(T_, lambda m, *t: fn(m.nn.functional, *t, reduction=reduction), *arrays,
                               dtype="float32", no_grad=no_grad), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size_average,reduce", [(False, None), (None, False), (True, True)])
@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_loss_legacy_reduction_args(ref, name, size_average, reduce):
    fn, arrays, no_grad = LOSS_CASES[name]

    def f(T_):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = _grads(T_, lambda m, *t: fn(m.nn.functional, *t, size_average=size_average, reduce=reduce),
                         *arrays, no_grad=no_grad)
        return out, [str(x.message) for x in w]

    ref.same(f)


@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_loss_bad_reduction(ref, name):
    fn, arrays, _ = LOSS_CASES[name]
    ref.raises(lambda T_: fn(T_.nn.functional, *[T_.tensor(a) for a in arrays], reduction="batch"), ValueError)


def test_loss_modules(ref):
    a, b, t = X, RNG.standard_normal((4, 6)), S

    def f(T_):
        n = T_.nn
        x, y, s = T_.tensor(a, requires_grad=True), T_.tensor(b), T_.tensor(t)
        idx = T_.tensor([0, 5, 2, 2])
        w = T_.tensor(W6)
        ml = T_.tensor([[3, 0, -1, 1, 2, 2]] * 4)
        outs = [n.CosineEmbeddingLoss(0.3)(x, y, s), n.CosineEmbeddingLoss(reduction="none")(x, y, s),
                n.HingeEmbeddingLoss()(x, T_.sign(y)), n.HingeEmbeddingLoss(0.4, reduction="sum")(x, T_.sign(y)),
                n.MarginRankingLoss(0.2)(x[0], x[1], s[:1].expand(6)), n.SoftMarginLoss()(x, T_.sign(y)),
                n.MultiMarginLoss()(x, idx), n.MultiMarginLoss(2, 0.5, weight=w, reduction="none")(x, idx),
                n.MultiLabelMarginLoss()(x, ml), n.MultiLabelSoftMarginLoss(weight=w)(x, T_.sigmoid(y)),
                n.PoissonNLLLoss()(x, y.abs()), n.PoissonNLLLoss(False, True, eps=1e-3)(x.abs(), y.abs() * 3),
                n.GaussianNLLLoss()(x, y, T_.ones(4, 6) * 0.5), n.GaussianNLLLoss(full=True, eps=0.1)(x, y, 0.05),
                n.TripletMarginWithDistanceLoss()(x, y, y.flip(0)),
                n.TripletMarginWithDistanceLoss(distance_function=lambda p, q: (p - q).abs().sum(-1), margin=2.0,
                                                swap=True, reduction="none")(x, y, y.flip(0))]
        sum(o.sum() for o in outs).backward()
        mods = [n.CosineEmbeddingLoss(), n.HingeEmbeddingLoss(), n.MarginRankingLoss(), n.SoftMarginLoss(),
                n.MultiMarginLoss(), n.MultiLabelMarginLoss(), n.MultiLabelSoftMarginLoss(), n.PoissonNLLLoss(),
                n.GaussianNLLLoss(), n.TripletMarginWithDistanceLoss()]
        state = [(m.reduction, getattr(m, "margin", None), sorted(dict(m.named_buffers())), repr(m)) for m in mods]
        return outs, x.grad, state

    ref.same(f)


def test_module_option_errors(ref):
    ref.raises(lambda T_: T_.nn.MultiMarginLoss(3), ValueError, "only p == 1 and p == 2 supported")
    ref.raises(lambda T_: T_.nn.MultiMarginLoss(weight=T_.ones(2, 2)), ValueError)
    ref.raises(lambda T_: T_.nn.TripletMarginWithDistanceLoss(margin=0), ValueError)


def _t(T_, a, **k):
    return T_.tensor(np.asarray(a), **k)


LOSS_ERRORS = [
    lambda F, T_: F.cosine_embedding_loss(_t(T_, X), _t(T_, X), T_.ones(4, 2)),
    lambda F, T_: F.cosine_embedding_loss(_t(T_, X[None]), _t(T_, X[None]), T_.ones(4)),
    lambda F, T_: F.cosine_embedding_loss(_t(T_, X), _t(T_, X), T_.tensor(1.0)),
    lambda F, T_: F.margin_ranking_loss(_t(T_, X[0]), _t(T_, X[1]), T_.ones(6, 1)),
    lambda F, T_: F.multi_margin_loss(_t(T_, X[None]), T_.tensor([1])),
    lambda F, T_: F.multi_margin_loss(_t(T_, X[:, :0]), T_.tensor([0, 0, 0, 0])),
    lambda F, T_: F.multi_margin_loss(_t(T_, X), T_.tensor([1, 2, 3])),
    lambda F, T_: F.multi_margin_loss(_t(T_, X), T_.tensor([1, 2, 3, 6])),
    lambda F, T_: F.multi_margin_loss(_t(T_, X), T_.tensor([1, 2, 3, -1])),
    lambda F, T_: F.multi_margin_loss(_t(T_, X), T_.tensor([1.0, 2, 3, 0])),
    lambda F, T_: F.multi_margin_loss(_t(T_, X), T_.tensor([1, 2, 3, 0]), p=3),
    lambda F, T_: F.multi_margin_loss(_t(T_, X), T_.tensor([1, 2, 3, 0]), weight=T_.ones(5, dtype=T_.float64)),
    lambda F, T_: F.multi_margin_loss(_t(T_, X), T_.tensor([1, 2, 3, 0]), weight=T_.ones(1, 6)),
    lambda F, T_: F.multi_margin_loss(_t(T_, X), T_.tensor([1, 2, 3, 0]), weight=T_.ones(6)),
    lambda F, T_: F.multi_margin_loss(_t(T_, X), T_.tensor([1, 2, 3, 0]),
                                      weight=T_.ones(6, dtype=T_.float64, requires_grad=True)),
    lambda F, T_: F.multilabel_margin_loss(_t(T_, X), T_.zeros(1, 6, dtype=T_.long)),
    lambda F, T_: F.multilabel_margin_loss(_t(T_, X), T_.full((4, 6), 6)),
    lambda F, T_: F.multilabel_margin_loss(_t(T_, X), T_.full((4, 6), -2)),
    lambda F, T_: F.multilabel_margin_loss(_t(T_, X[None]), T_.zeros(1, 4, 6, dtype=T_.long)),
    lambda F, T_: F.multilabel_margin_loss(_t(T_, X), T_.zeros(4, 6)),
    lambda F, T_: F.soft_margin_loss(_t(T_, X), _t(T_, X, requires_grad=True)),
    lambda F, T_: F.multilabel_soft_margin_loss(_t(T_, X), _t(T_, X), reduction="avg"),
    lambda F, T_: F.gaussian_nll_loss(_t(T_, X), _t(T_, X), -1.0),
    lambda F, T_: F.gaussian_nll_loss(_t(T_, X), _t(T_, X), -T_.ones(4, 6)),
    lambda F, T_: F.gaussian_nll_loss(_t(T_, X), _t(T_, X), T_.ones(2, 6)),
    lambda F, T_: F.gaussian_nll_loss(_t(T_, X), _t(T_, X), T_.ones(4, 6), reduction="avg"),
    lambda F, T_: F.triplet_margin_with_distance_loss(_t(T_, X), _t(T_, X), _t(T_, X), margin=-1.0),
    lambda F, T_: F.triplet_margin_with_distance_loss(_t(T_, X), _t(T_, X), _t(T_, X), reduction="avg"),
    lambda F, T_: F.triplet_margin_with_distance_loss(_t(T_, X), _t(T_, X), _t(T_, X[0])),
]


def _same_error(ref, case, torch):
    """``case(F, T)`` raises in torch, and the same type in ndgrad."""
    with pytest.raises(Exception) as want:
        case(torch.nn.functional, torch)
    ref.raises(lambda T_: case(T_.nn.functional, T_), type(want.value))


@pytest.mark.parametrize("k", range(len(LOSS_ERRORS)))
def test_loss_errors(ref, k, torch_or_skip):
    _same_error(ref, LOSS_ERRORS[k], torch_or_skip)


def test_multi_margin_unbatched(ref):
    for t in (np.array(2), np.array([4])):
        for reduction in ("none", "mean"):
            ref.same(lambda T_, t=t, r=reduction: _grads(
                T_, lambda m, x, y: m.nn.functional.multi_margin_loss(x, y, reduction=r), X[0], t))
    ref.same(lambda T_: _grads(T_, lambda m, x, y: m.nn.functional.multilabel_margin_loss(x, y, reduction="none"),
                               X[0], np.array([2, 1, -1, 0, 0, 0])))


@pytest.mark.parametrize("var_shape", [(4, 6), (4,), (4, 1), (1, 6)])
@pytest.mark.parametrize("full", [False, True])
def test_gaussian_nll_variance_shapes(ref, var_shape, full):
    v = RNG.uniform(1e-8, 2, var_shape)  # some entries below eps: clamped without a gradient cut
    v.flat[0] = 1e-9
    ref.same(lambda T_: _grads(T_, lambda m, x, y, var: m.nn.functional.gaussian_nll_loss(x, y, var, full, 1e-3,
                                                                                          "sum"),
                               X, X[::-1].copy(), v))


def test_poisson_full_small_targets(ref):
    t = RNG.integers(0, 4, (4, 6)).astype(float)
    for log_input in (True, False):
        ref.same(lambda T_, li=log_input: _grads(T_, lambda m, x, y: m.nn.functional.poisson_nll_loss(
            x, y, li, True, reduction="none"), np.abs(X) + 0.1, t, no_grad=(1,)))


# --- pooling with indices, unpooling ---
@pytest.mark.parametrize("n", [1, 2, 3])
def test_pool_with_indices(ref, n):
    x = RNG.standard_normal((2, 3) + (5,) * n)

    def f(T_):
        F = T_.nn.functional
        a = getattr(F, f"max_pool{n}d_with_indices")(T_.tensor(x), 2, 1, 1)
        b = getattr(F, f"adaptive_max_pool{n}d_with_indices")(T_.tensor(x), 3)
        return tuple(a), tuple(b)

    ref.same(f)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("k,s,p,out", [(2, None, 0, None), (3, 2, 1, 6), (2, 2, 0, 7)])
def test_max_unpool(ref, n, k, s, p, out):
    shape = (2, 3) + (6,) * n
    x = RNG.permutation(int(np.prod(shape))).reshape(shape).astype(float)

    def f(T_):
        F = T_.nn.functional
        pool = getattr(F, f"max_pool{n}d")
        v, i = pool(T_.tensor(x), k, s, p, return_indices=True)
        v = v.detach().requires_grad_()
        size = None if out is None else [out] * n
        y = getattr(F, f"max_unpool{n}d")(v * 2, i, k, s, p, size)
        y.backward(T_.tensor(np.random.default_rng(1).standard_normal(tuple(y.shape))))
        mod = getattr(T_.nn, f"MaxUnpool{n}d")(k, s, p)
        return y, v.grad, mod(v.detach(), i, size), repr(mod)

    ref.same(f)


UNPOOL_ERRORS = [
    lambda F, T_, v, i: F.max_unpool2d(v, i.float(), 2),
    lambda F, T_, v, i: F.max_unpool2d(v, i[..., :1], 2),
    lambda F, T_, v, i: F.max_unpool2d(v[0, 0], i[0, 0], 2),
    lambda F, T_, v, i: F.max_unpool2d(v, i * 10, 2),
    lambda F, T_, v, i: F.max_unpool2d(v, i, 2, output_size=(5,)),
    lambda F, T_, v, i: F.max_unpool2d(v, i, 2, output_size=(9, 4)),
    lambda F, T_, v, i: F.max_unpool1d(v[0], i[0, 0] * 10, 2),
    lambda F, T_, v, i: F.max_unpool3d(v, i * 10, 2),
    lambda F, T_, v, i: F.max_unpool3d(v[0], i[0], 2),
]


@pytest.mark.parametrize("k", range(len(UNPOOL_ERRORS)))
def test_max_unpool_errors(ref, k):
    def f(T_):
        v, i = T_.nn.functional.max_pool2d(T_.tensor(X[None, None]), 2, return_indices=True)
        return UNPOOL_ERRORS[k](T_.nn.functional, T_, v, i)

    if k in (3, 7):  # which invalid index PyTorch names depends on its loop order: the type and text only
        with pytest.raises(RuntimeError, match=r"Found an invalid max index: \d+ \(output volumes are of size"):
            f(ndgrad)
        return
    ref.raises(f, RuntimeError if k not in (4, 5) else ValueError)


# --- affine_grid, grid_sample ---
THETA = np.array([[[0.9, -0.3, 0.1], [0.2, 1.1, -0.2]], [[1.2, 0.4, 0.3], [-0.5, 0.8, 0.05]]])


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_affine_grid_then_grid_sample(ref, align_corners, mode, padding_mode):
    img = RNG.standard_normal((2, 3, 5, 6))

    def f(T_):
        theta = T_.tensor(THETA * 1.4, requires_grad=True)  # some points land outside the image
        x = T_.tensor(img, requires_grad=True)
        grid = T_.nn.functional.affine_grid(theta, (2, 3, 4, 7), align_corners=align_corners)
        out = T_.nn.functional.grid_sample(x, grid, mode, padding_mode, align_corners)
        out.backward(T_.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape))))
        return grid, out, x.grad, theta.grad

    ref.same(f)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_3d_float32_and_far_points(ref, padding_mode):
    vol = RNG.standard_normal((1, 2, 3, 4, 5))
    grid = RNG.uniform(-3.5, 3.5, (1, 2, 3, 4, 3))  # far outside: several reflections
    for mode in ("bilinear", "nearest"):
        def sample(m, x, g, mode=mode, align_corners=False):
            return m.nn.functional.grid_sample(x, g, mode, padding_mode, align_corners)

        ref.same(lambda T_: _grads(T_, sample, vol, grid, dtype="float32"), rtol=1e-4, atol=1e-5)
        ref.same(lambda T_: _grads(T_, lambda m, x, g: sample(m, x, g, align_corners=True), vol, grid))


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_bicubic_float32_far_points_and_tiny_images(ref, padding_mode):
    """The 4x4 stencil padded tap by tap: points far outside (several reflections), images
    smaller than the stencil, float32."""
    for shape in ((1, 2, 5, 4), (2, 1, 1, 3), (1, 1, 2, 1)):
        img = RNG.standard_normal(shape)
        grid = RNG.uniform(-3.5, 3.5, (shape[0], 3, 2, 2))
        for ac in (False, True):
            def sample(m, x, g, ac=ac):
                return m.nn.functional.grid_sample(x, g, "bicubic", padding_mode, ac)

            ref.same(lambda T_: _grads(T_, sample, img, grid))
            ref.same(lambda T_: _grads(T_, sample, img, grid, dtype="float32"), rtol=1e-4, atol=1e-5)


def test_affine_grid_3d_and_unit(ref):
    th = RNG.standard_normal((2, 3, 4))
    ref.same(lambda T_: _grads(T_, lambda m, t: m.nn.functional.affine_grid(t, (2, 1, 3, 4, 2), False), th))
    ref.same(lambda T_: _grads(T_, lambda m, t: m.nn.functional.affine_grid(t, (2, 1, 1, 3), False), THETA))


def test_grid_warnings(ref):
    for fn in (lambda F, T_: F.affine_grid(T_.tensor(THETA), (2, 1, 3, 3)),
               lambda F, T_: F.grid_sample(T_.ones(1, 1, 3, 3), T_.zeros(1, 2, 2, 2)),
               lambda F, T_: F.affine_grid(T_.tensor(THETA), (2, 1, 1, 3), align_corners=True)):
        def f(T_, fn=fn):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                fn(T_.nn.functional, T_)
            return [(x.category.__name__, str(x.message)) for x in w]

        assert ref.same(f)


GRID_ERRORS = [
    lambda F, T_: F.affine_grid(T_.ones(2, 2, 3, dtype=T_.long), (2, 1, 3, 3), False),
    lambda F, T_: F.affine_grid(T_.tensor(THETA), (2, 1, 3, 3, 3), False),
    lambda F, T_: F.affine_grid(T_.ones(2, 3, 4), (2, 1, 3, 3), False),
    lambda F, T_: F.affine_grid(T_.tensor(THETA), (2, 1, 3), False),
    lambda F, T_: F.affine_grid(T_.tensor(THETA), (2, 1, 0, 3), False),
    lambda F, T_: F.grid_sample(T_.ones(1, 1, 3, 3), T_.zeros(1, 2, 2, 2), mode="cubic", align_corners=False),
    lambda F, T_: F.grid_sample(T_.ones(1, 1, 3, 3), T_.zeros(1, 2, 2, 2), padding_mode="wrap", align_corners=False),
    lambda F, T_: F.grid_sample(T_.ones(1, 1, 3, 3), T_.zeros(1, 2, 2, 2, dtype=T_.float64), align_corners=False),
    lambda F, T_: F.grid_sample(T_.ones(2, 1, 3, 3), T_.zeros(1, 2, 2, 2), align_corners=False),
    lambda F, T_: F.grid_sample(T_.ones(1, 1, 3, 3), T_.zeros(1, 2, 2, 3), align_corners=False),
    lambda F, T_: F.grid_sample(T_.ones(1, 3, 3), T_.zeros(1, 2, 2), align_corners=False),
    lambda F, T_: F.grid_sample(T_.ones(1, 1, 0, 3), T_.zeros(1, 2, 2, 2), align_corners=False),
    lambda F, T_: F.grid_sample(T_.ones(1, 1, 3, 3, 3), T_.zeros(1, 2, 2, 2, 3), mode="bicubic", align_corners=False),
]


@pytest.mark.parametrize("k", range(len(GRID_ERRORS)))
def test_grid_errors(ref, k, torch_or_skip):
    _same_error(ref, GRID_ERRORS[k], torch_or_skip)


# --- deprecated upsampling aliases ---
def test_upsample_aliases(ref):
    x = RNG.standard_normal((1, 2, 3, 4))

    def f(T_):
        F = T_.nn.functional
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            outs = [F.upsample(T_.tensor(x), scale_factor=2), F.upsample(T_.tensor(x), (5, 7), mode="bilinear",
                                                                          align_corners=False),
                    F.upsample_nearest(T_.tensor(x), (6, 5)), F.upsample_bilinear(T_.tensor(x), scale_factor=2),
                    T_.nn.UpsamplingNearest2d(scale_factor=2)(T_.tensor(x)),
                    T_.nn.UpsamplingBilinear2d((4, 5))(T_.tensor(x))]
        reprs = [repr(T_.nn.UpsamplingNearest2d(scale_factor=2)), repr(T_.nn.UpsamplingBilinear2d((3, 4)))]
        return outs, reprs, [(x.category.__name__, str(x.message), x.filename == __file__) for x in w]

    ref.same(f)
