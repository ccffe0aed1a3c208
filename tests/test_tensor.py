"""The Tensor surface against PyTorch: factories, dtypes and type promotion, the default dtype,
shape/conversion methods, autograd attributes, and ``repr``.

Each scenario is a function of the framework module ``T`` (``ndgrad`` or ``torch``); the ``ref``
fixture (tests/conftest.py) runs it under both and compares the results (strings with the
``ndgrad.`` prefix mapped to ``torch.``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ndgrad

RNG = np.random.default_rng(2024)
A23 = RNG.standard_normal((2, 3))
A234 = RNG.standard_normal((2, 3, 4))


def dt(t):
    """A dtype's name without the module prefix (``float32``)."""
    return str(t.dtype if hasattr(t, "dtype") else t).split(".")[-1]


@pytest.fixture
def default_dtype_restored(ref):
    yield
    ndgrad.set_default_dtype(ndgrad.float32)
    if ref.torch is not None:
        ref.torch.set_default_dtype(ref.torch.float32)


# --- tensor / as_tensor / from_numpy ---


@pytest.mark.parametrize("data", [
    [1, 2, 3], [1.0, 2.0], [1, 2.5], [True, False], [1 + 2j, 3], 3, 2.5, True, [[1, 2], [3, 4]],
    [], [[]], np.arange(3, dtype=np.int32), np.ones(2, dtype=np.float64), np.float32(1.5),
    np.float64(1.0),
], ids=repr)
def test_tensor_dtype_inference(ref, data):
    ref.same(lambda T: (T.tensor(data), dt(T.tensor(data)), tuple(T.tensor(data).shape)))


def test_tensor_keeps_numpy_scalar_dtype_in_lists(ref):
    got = ref.same(lambda T: (dt(T.tensor([np.float64(1.0), 2])), dt(T.tensor([np.int32(1), np.int32(2)]))))
    assert got == ("float64", "int32")


def test_tensor_with_dtype_and_requires_grad(ref):
    def f(T):
        t = T.tensor([1, 2], dtype=T.float64, requires_grad=True)
        return t, t.requires_grad, t.is_leaf, t.grad_fn is None, t.grad is None

    ref.same(f)


def test_tensor_copies_numpy_input(ref):
    def f(T):
        a = np.arange(3.0)
        t = T.tensor(a)
        a[0] = 99.0
        return t

    ref.same(f)


def test_as_tensor_shares_numpy_memory_and_tensor_identity(ref):
    def f(T):
        a = np.arange(3.0)
        t = T.as_tensor(a)
        a[1] = -5.0
        u = T.as_tensor(t)
        c = T.as_tensor(a, dtype=T.float32)  # a dtype change copies
        a[2] = 7.0
        return t, u is t, c, dt(c), T.as_tensor([1, 2]), T.as_tensor(2.5)

    ref.same(f)


def test_from_numpy_shares_memory_both_ways(ref):
    def f(T):
        a = np.arange(6, dtype=np.float64).reshape(2, 3)
        t = T.from_numpy(a)
        a[0, 0] = 100.0
        t[1, 2] = -1.0
        t.add_(1)
        return t, a.tolist(), dt(t), T.from_numpy(np.arange(3, dtype=np.int32)), T.from_numpy(a.T)

    ref.same(f)


# --- zeros / ones / empty / full ---
def test_zeros_ones_sizes_and_dtypes(ref):
    def f(T):
        return (T.zeros(2, 3), T.zeros((2, 3)), T.zeros([4]), T.zeros(()), T.ones(2, dtype=T.int64),
                T.ones(0, 2), T.zeros(T.Size([1, 2])), T.ones(3, dtype=T.bool), T.zeros(2, dtype=T.complex64))

    ref.same(f)


def test_empty_shape_and_dtype(ref):
    def f(T):
        e = T.empty(2, 3)
        e2 = T.empty((4,), dtype=T.int32)
        return tuple(e.shape), dt(e), tuple(e2.shape), dt(e2), T.empty(0).numel()

    ref.same(f)


def test_full_dtype_inference(ref):
    def f(T):
        return (T.full((2,), 3), T.full((2, 2), 3.5), T.full((1,), True), T.full((2,), 1 + 1j),
                T.full((2,), 3, dtype=T.float64), T.full([], 4.0))

    ref.same(f)


# --- arange / linspace / eye ---
@pytest.mark.parametrize("args,kw", [
    ((5,), {}), ((2, 7), {}), ((1, 10, 3), {}), ((0.0, 1.0, 0.25), {}), ((0, 1, 0.1), {}),
    ((5,), {"dtype": "float64"}), ((1.5,), {}), ((10, 0, -3), {}), ((0, 5), {"dtype": "int32"}),
], ids=str)
def test_arange(ref, args, kw):
    def f(T):
        kws = {k: getattr(T, v) for k, v in kw.items()}
        t = T.arange(*args, **kws)
        return t, dt(t)

    ref.same(f)


def test_linspace(ref):
    def f(T):
        return (T.linspace(0, 1, 5), T.linspace(-2, 2, 1), T.linspace(0, 10, 4, dtype=T.float64),
                T.linspace(3, 3, 0), T.linspace(1, 0, 3))

    ref.same(f, rtol=1e-6)


def test_eye(ref):
    ref.same(lambda T: (T.eye(3), T.eye(2, 3), T.eye(3, 1, dtype=T.int64), T.eye(0)))


# --- random ---
def test_random_shapes_and_dtypes(ref):
    def f(T):
        r, n = T.rand(2, 3), T.randn((4,), dtype=T.float64)
        i = T.randint(0, 10, (3, 2))
        j = T.randint(0, 5, (7,), dtype=T.int32)
        ok = bool(((r >= 0) & (r < 1)).all()) and bool(((i >= 0) & (i < 10)).all())
        ok = ok and bool(((j >= 0) & (j < 5)).all())
        return [(tuple(t.shape), dt(t)) for t in (r, n, i, j, T.rand(()), T.randn(0, 2))], ok

    ref.same(f)


def test_randint_high_size_overload(ref):
    def f(T):
        j = T.randint(5, (7,), dtype=T.int32)
        return tuple(j.shape), dt(j), bool(((j >= 0) & (j < 5)).all())

    ref.same(f)


def test_manual_seed_reproducibility(ref):
    def f(T):
        T.manual_seed(123)
        a = (T.rand(5), T.randn(3), T.randint(0, 100, (4,)))
        T.manual_seed(123)
        b = (T.rand(5), T.randn(3), T.randint(0, 100, (4,)))
        c = T.rand(5)
        return [bool((x == y).all()) for x, y in zip(a, b)], bool((a[0] == c).all())

    ref.same(f)


def test_like_factories(ref):
    def f(T):
        x = T.tensor(A23, dtype=T.float64, requires_grad=True)
        i = T.tensor([[1, 2]], dtype=T.int32)
        outs = [T.zeros_like(x), T.ones_like(x), T.full_like(x, 2.5), T.zeros_like(i), T.ones_like(i),
                T.full_like(i, 7), T.zeros_like(x, dtype=T.float32), T.ones_like(i, requires_grad=False)]
        shapes = [(tuple(T.empty_like(t).shape), dt(T.empty_like(t))) for t in (x, i)]
        rand = [(tuple(g(x).shape), dt(g(x)), g(x).requires_grad) for g in (T.rand_like, T.randn_like)]
        return outs, [o.requires_grad for o in outs], shapes, rand, T.ones_like(x, requires_grad=True).is_leaf

    ref.same(f)


# --- dtypes and promotion ---
PROMOTION = [
    ("float32 tensor + int scalar", lambda T: T.ones(2) + 3),
    ("float32 tensor + float scalar", lambda T: T.ones(2) * 2.5),
    ("float64 tensor + float scalar", lambda T: T.ones(2, dtype=T.float64) + 2.5),
    ("float16 tensor + float scalar", lambda T: T.ones(2, dtype=T.float16) + 2.5),
    ("int64 tensor + float scalar", lambda T: T.tensor([1, 2]) + 2.5),
    ("int32 tensor + int scalar", lambda T: T.tensor([1, 2], dtype=T.int32) + 7),
    ("int8 tensor + int scalar", lambda T: T.tensor([1], dtype=T.int8) * 3),
    ("uint8 + int8", lambda T: T.tensor([1], dtype=T.uint8) + T.tensor([1], dtype=T.int8)),
    ("uint8 + int16", lambda T: T.tensor([1], dtype=T.uint8) + T.tensor([1], dtype=T.int16)),
    ("int32 + int64", lambda T: T.tensor([1], dtype=T.int32) + T.tensor([1])),
    ("int32 / int32", lambda T: T.tensor([1, 3], dtype=T.int32) / T.tensor([2, 2], dtype=T.int32)),
    ("int // int", lambda T: T.tensor([7, -7]) // T.tensor([2, 2])),
    ("float32 + float64", lambda T: T.ones(2) + T.ones(2, dtype=T.float64)),
    ("float32 dim + float64 0-dim", lambda T: T.ones(2) + T.tensor(1.0, dtype=T.float64)),
    ("int64 dim + float64 0-dim", lambda T: T.tensor([1, 2]) + T.tensor(1.0, dtype=T.float64)),
    ("int32 dim + int64 0-dim", lambda T: T.tensor([1, 2], dtype=T.int32) + T.tensor(5)),
    ("float16 dim + float32 0-dim", lambda T: T.ones(2, dtype=T.float16) + T.tensor(1.0)),
    ("0-dim + 0-dim", lambda T: T.tensor(1, dtype=T.int32) + T.tensor(1.0, dtype=T.float64)),
    ("bool + bool", lambda T: T.tensor([True]) & T.tensor([False])),
    ("bool + bool add", lambda T: T.tensor([True]) + T.tensor([True])),
    ("bool + int scalar", lambda T: T.tensor([True, False]) + 1),
    ("bool + float scalar", lambda T: T.tensor([True, False]) * 1.5),
    ("bool + bool scalar", lambda T: T.tensor([True, False]) + True),
    ("int + bool scalar", lambda T: T.tensor([1, 2], dtype=T.int16) + True),
    ("bool + uint8", lambda T: T.tensor([True]) + T.tensor([3], dtype=T.uint8)),
    ("float32 + complex scalar", lambda T: T.ones(2) + 1j),
    ("float64 + complex scalar", lambda T: T.ones(2, dtype=T.float64) * (2 - 1j)),
    ("int + complex scalar", lambda T: T.tensor([1, 2]) + 1j),
    ("complex64 + float64", lambda T: T.ones(1, dtype=T.complex64) + T.ones(1, dtype=T.float64)),
    ("complex64 + float64 0-dim", lambda T: T.ones(1, dtype=T.complex64) + T.tensor(1.0, dtype=T.float64)),
    ("float64 0-dim + complex64 dim", lambda T: T.tensor(1.0, dtype=T.float64) + T.ones(1, dtype=T.complex64)),
    ("comparison dtype", lambda T: T.ones(2) < 3),
    ("scalar - tensor", lambda T: 3 - T.tensor([1, 2], dtype=T.uint8)),
    ("scalar ** int tensor", lambda T: 2 ** T.tensor([1, 2])),
    ("int tensor ** float", lambda T: T.tensor([1, 4]) ** 0.5),
]


@pytest.mark.parametrize("case", PROMOTION, ids=[c[0] for c in PROMOTION])
def test_type_promotion(ref, case):
    _, fn = case
    ref.same(lambda T: (dt(fn(T)), fn(T)))


def test_promote_types_result_type_can_cast(ref):
    def f(T):
        return (dt(T.promote_types(T.uint8, T.int8)), dt(T.promote_types(T.int32, T.float16)),
                dt(T.promote_types(T.bool, T.int8)), dt(T.promote_types(T.float32, T.complex64)),
                dt(T.promote_types(T.float64, T.complex64)),
                dt(T.result_type(T.tensor([1]), 1.0)), dt(T.result_type(T.tensor([1], dtype=T.int8), 1000)),
                T.can_cast(T.float64, T.int32), T.can_cast(T.int32, T.float64), T.can_cast(T.bool, T.uint8))

    ref.same(f)


def test_dtype_attributes(ref):
    def f(T):
        ds = [T.float16, T.float32, T.float64, T.int8, T.int16, T.int32, T.int64, T.uint8, T.bool,
              T.complex64, T.complex128]
        return ([(str(d), d.is_floating_point, d.is_complex, d.itemsize) for d in ds],
                T.float is T.float32, T.double is T.float64, T.long is T.int64, T.int is T.int32,
                T.half is T.float16, T.short is T.int16, T.cfloat is T.complex64, T.cdouble is T.complex128)

    ref.same(f)


# --- default dtype ---
def test_default_dtype_is_float32(ref):
    ref.same(lambda T: (dt(T.get_default_dtype()), dt(T.tensor([1.0])), dt(T.zeros(1)), dt(T.rand(1)),
                        dt(T.tensor([1j])), dt(T.arange(0.0, 1.0))))


def test_set_default_dtype(ref, default_dtype_restored):
    def f(T):
        T.set_default_dtype(T.float64)
        try:
            return (dt(T.get_default_dtype()), dt(T.tensor([1.0])), dt(T.zeros(2)), dt(T.ones(1)),
                    dt(T.arange(0.0, 1.0, 0.5)), dt(T.linspace(0, 1, 3)), dt(T.tensor([1 + 1j])),
                    dt(T.tensor([1, 2]) + 2.5), dt(T.tensor([1, 2]) / 2), dt(T.full((1,), 1.0)),
                    dt(T.tensor([1, 2])), dt(T.randn(2)), dt(T.tensor([1.0], dtype=T.float32) + 1.0))
        finally:
            T.set_default_dtype(T.float32)

    ref.same(f)


def test_set_default_dtype_rejects_int(ref, default_dtype_restored):
    ref.raises(lambda T: T.set_default_dtype(T.int64), TypeError,
               "only floating-point types are supported as the default type")


# --- shape and conversions ---
def test_shape_size_dim_numel(ref):
    def f(T):
        x = T.tensor(A234)
        return (x.shape, tuple(x.shape), x.size(), x.size(1), x.size(-1), x.dim(), x.ndim, x.numel(),
                T.numel(x), x.shape == (2, 3, 4), type(x.shape).__name__, repr(x.shape), x.shape[1:],
                T.tensor(1.0).shape, T.tensor(1.0).dim(), T.tensor(1.0).numel(), len(x), x.nelement())

    ref.same(f)


def test_dtype_and_device(ref):
    def f(T):
        x = T.ones(2)
        return (str(x.device), x.device.type, x.dtype == T.float32, str(x.dtype), x.is_floating_point(),
                x.is_complex(), T.is_tensor(x), T.is_tensor([1]), T.is_floating_point(T.tensor([1])))

    ref.same(f)


def test_transpose_properties(ref):
    def f(T):
        m, b = T.tensor(A23), T.tensor(A234)
        return m.T, m.mT, b.mT, m.t(), T.tensor([1.0, 2.0]).t(), m.T.is_contiguous(), m.is_contiguous()

    ref.same(f)


def test_item_and_tolist(ref):
    def f(T):
        vals = [T.tensor(2.5).item(), T.tensor([7]).item(), T.tensor(True).item(), T.tensor(1 + 2j).item()]
        return ([(v, type(v).__name__) for v in vals], T.tensor(A23).tolist(), T.tensor([1, 2]).tolist(),
                T.tensor(3).tolist(), type(T.tensor([True]).tolist()[0]).__name__)

    ref.same(f)


def test_item_on_multi_element_raises(ref):
    ref.raises(lambda T: T.ones(2).item(), RuntimeError,
               "a Tensor with 2 elements cannot be converted to Scalar")


def test_numpy_shares_memory(ref):
    def f(T):
        t = T.zeros(3)
        a = t.numpy()
        a[0] = 5.0
        t[1] = 2.0
        return t, a.dtype.name, a.tolist()

    ref.same(f)


def test_numpy_on_requires_grad_raises(ref):
    ref.raises(lambda T: T.ones(2, requires_grad=True).numpy(), RuntimeError,
               "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")


def test_to_and_casts(ref):
    def f(T):
        x = T.tensor([1.7, -2.2, 0.0])
        outs = [x.to(T.float64), x.to(dtype=T.int32), x.to("cpu"), x.float(), x.double(), x.int(), x.long(),
                x.bool(), x.half(), x.to(T.complex64)]
        same = x.to(T.float32) is x, x.float() is x, x.to("cpu") is x
        return outs, [dt(o) for o in outs], same, x.to(T.float64, copy=True) is x

    ref.same(f, rtol=1e-3)


def test_type_method(ref):
    ref.same(lambda T: (T.ones(2).type(T.float64), T.ones(2).type(), T.ones(2, dtype=T.int64).type()))


def test_equal(ref):
    ref.same(lambda T: (T.equal(T.ones(2), T.ones(2)), T.equal(T.ones(2), T.zeros(2)),
                        T.equal(T.ones(2), T.ones(3))))


def test_to_keeps_graph(ref):
    def f(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = x.double()
        (y * y).sum().backward()
        return type(y.grad_fn).__name__, x.grad

    ref.same(f)


def test_clone_and_contiguous(ref):
    def f(T):
        x = T.tensor(A23)
        c = x.clone()
        c[0, 0] = 100.0
        t = x.t()
        tc = t.contiguous()
        tc[0, 0] = -100.0
        return (x, c, t.is_contiguous(), tc.is_contiguous(), tc, x.contiguous() is x, tc.stride(),
                t.stride(), x.stride())

    ref.same(f)


def test_clone_contiguous_keep_grad(ref):
    def f(T):
        x = T.tensor(A23, requires_grad=True)
        y = x.clone()
        z = x.t().contiguous()
        (y * 2 + z.t() * 3).sum().backward()
        return type(y.grad_fn).__name__, x.grad

    ref.same(f)


# --- autograd attributes ---
def test_leaf_attributes(ref):
    def f(T):
        a = T.ones(2)
        b = T.ones(2).requires_grad_()
        c = b * 2
        d = T.ones(2).requires_grad_(False)
        return [(t.requires_grad, t.is_leaf, t.grad_fn is None) for t in (a, b, c, d)], \
            [t.grad for t in (a, b, d)], b.requires_grad_() is b

    ref.same(f)


def test_grad_fn_names_and_output_nr(ref):
    def f(T):
        x = T.tensor(A23, requires_grad=True)
        parts = x.unbind(0)
        halves = x.split(2, dim=1)
        y = x * 2
        return ([p.output_nr for p in parts], [h.output_nr for h in halves], y.output_nr, x.output_nr,
                type(parts[1].grad_fn).__name__, y.grad_fn.name(), type(x.sum().grad_fn).__name__)

    ref.same(f)


def test_grad_fn_next_functions_to_leaf(ref):
    def f(T):
        x = T.tensor(A23, requires_grad=True)
        y = x.exp()
        fn, idx = y.grad_fn.next_functions[0]
        return type(fn).__name__, idx, fn.variable is x

    ref.same(f)


def test_version_counter(ref):
    def f(T):
        x = T.zeros(3)
        v = [x._version]
        x.add_(1)
        v.append(x._version)
        x[0] = 2.0
        v.append(x._version)
        x.mul_(2).sub_(1)
        v.append(x._version)
        x.zero_()
        v.append(x._version)
        return v, x

    ref.same(f)


def test_data_attribute(ref):
    def f(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        d = y.data
        return d, d.requires_grad, d.is_leaf, d.grad_fn is None, x.data.requires_grad

    ref.same(f)


def test_detach_and_detach_(ref):
    def f(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        d = y.detach()
        d[0] = 10.0  # shares memory with y
        z = x * 4
        r = z.detach_()
        return (y.detach(), d.requires_grad, d.is_leaf, r is z, z.requires_grad, z.is_leaf,
                z.grad_fn is None)

    ref.same(f)


def test_retain_grad(ref):
    def f(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        z = y.exp()
        flags_before = (x.retains_grad, y.retains_grad, z.retains_grad)
        y.retain_grad()
        x.retain_grad()  # no-op on a leaf
        (z * 2).sum().backward()
        return flags_before, (x.retains_grad, y.retains_grad, z.retains_grad), y.grad, z.grad, x.grad

    with warnings.catch_warnings():  # z.grad of a non-leaf warns (test_non_leaf_grad_access_warns)
        warnings.simplefilter("ignore", UserWarning)
        out = ref.same(f)
    assert out[4] is not None and out[3] is None


def test_non_leaf_grad_access_warns(ref):
    def f(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
            g = y.grad
        return g

    ref.same(f)


def test_grad_assignment(ref):
    def f(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        x.grad = T.tensor([5.0, 6.0])
        (x * 2).sum().backward()
        return x.grad

    ref.same(f)


def test_grad_assignment_wrong_size_raises(ref):
    ref.raises(lambda T: setattr(T.tensor([1.0, 2.0], requires_grad=True), "grad", T.ones(3)),
               RuntimeError,
               "attempting to assign a gradient of size '[3]' to a tensor of size '[2]'. Please "
               "ensure that the gradient and the tensor are the same size")


def test_requires_grad_on_non_leaf_cannot_be_cleared(ref):
    def f(T):
        x = T.tensor([1.0], requires_grad=True)
        (x * 2).requires_grad_(False)

    ref.raises(
        f, RuntimeError,
        "you can only change requires_grad flags of leaf variables. If you want to use a computed "
        "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().",
    )


# --- repr ---
REPRS = [  # (id, scenario, PyTorch 2.13's text)
    ("mul grad_fn", lambda T: T.tensor([1.0], requires_grad=True) * 2, "tensor([2.], grad_fn=<MulBackward0>)"),
    ("requires_grad", lambda T: T.tensor([1.0], requires_grad=True), "tensor([1.], requires_grad=True)"),
    ("int", lambda T: T.tensor([1, 2, 3]), "tensor([1, 2, 3])"),
    ("float64", lambda T: T.tensor([1.5, 2.0], dtype=T.float64), "tensor([1.5000, 2.0000], dtype=torch.float64)"),
    ("float64 requires_grad", lambda T: T.tensor([1.0, 2.0], dtype=T.float64, requires_grad=True),
     "tensor([1., 2.], dtype=torch.float64, requires_grad=True)"),
    ("float64 0-d grad_fn", lambda T: (T.tensor([1.0, 2.0], dtype=T.float64, requires_grad=True) * 2).sum(),
     "tensor(6., dtype=torch.float64, grad_fn=<SumBackward0>)"),
    ("0-d float", lambda T: T.tensor(3.5), "tensor(3.5000)"),
    ("0-d int", lambda T: T.tensor(7), "tensor(7)"),
    ("0-d float64", lambda T: T.tensor(2.5, dtype=T.float64), "tensor(2.5000, dtype=torch.float64)"),
    ("2-d", lambda T: T.tensor([[1.0, 2.0], [3.0, 4.0]]), "tensor([[1., 2.],\n        [3., 4.]])"),
    ("empty", lambda T: T.tensor([]), "tensor([])"),
    ("empty 0x3", lambda T: T.zeros(0, 3), "tensor([], size=(0, 3))"),
    ("empty 1x0", lambda T: T.tensor([[]]), "tensor([], size=(1, 0))"),
    ("int32", lambda T: T.tensor([1, 2], dtype=T.int32), "tensor([1, 2], dtype=torch.int32)"),
    ("float16", lambda T: T.tensor([1.0, 2.0], dtype=T.float16), "tensor([1., 2.], dtype=torch.float16)"),
    ("sci", lambda T: T.tensor([0.1, 123456.0]), "tensor([1.0000e-01, 1.2346e+05])"),
    ("small sci", lambda T: T.tensor([1e-5, 1.0]), "tensor([1.0000e-05, 1.0000e+00])"),
    ("nan inf", lambda T: T.tensor([float("nan"), float("inf"), -1.0]), "tensor([nan, inf, -1.])"),
    ("negatives", lambda T: T.tensor([-1.25, 3.0]), "tensor([-1.2500,  3.0000])"),
    ("bool", lambda T: T.tensor([True, False]), "tensor([ True, False])"),
    ("complex", lambda T: T.tensor([1 + 2j]), "tensor([1.+2.j])"),
    ("int 2-d padded", lambda T: T.arange(12).reshape(3, 4),
     "tensor([[ 0,  1,  2,  3],\n        [ 4,  5,  6,  7],\n        [ 8,  9, 10, 11]])"),
    ("int negative", lambda T: T.tensor([-1, 10, 100]), "tensor([ -1,  10, 100])"),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c[0]) for c in REPRS])
def test_repr(ref, case):
    _, fn, text = case
    assert ref.norm(ref.same(lambda T: repr(fn(T)))) == text


def test_repr_exact_literals():
    """The exact text PyTorch prints (checked without torch installed, too)."""
    T = ndgrad
    x = T.tensor([1.0], requires_grad=True)
    assert repr(x * 2) == "tensor([2.], grad_fn=<MulBackward0>)"
    assert repr(x) == "tensor([1.], requires_grad=True)"
    assert repr(T.tensor([1, 2, 3])) == "tensor([1, 2, 3])"
    assert repr(T.tensor([1.5, 2.0], dtype=T.float64)) == "tensor([1.5000, 2.0000], dtype=ndgrad.float64)"
    assert repr(T.tensor(3.5)) == "tensor(3.5000)"
    assert repr(T.tensor([[1.0, 2.0], [3.0, 4.0]])) == "tensor([[1., 2.],\n        [3., 4.]])"
    assert repr(T.tensor([])) == "tensor([])"
    assert repr(T.zeros(0, 3)) == "tensor([], size=(0, 3))"
