"""``ndgrad.bfloat16`` (through the optional ml_dtypes package) against PyTorch's: the dtype,
promotion, tensors, ops computed in float32 and rounded once, gradients, random draws, errors and
checkpoints both ways. Without ml_dtypes only the test of its absence runs; without torch, the
ndgrad side of the scenarios still runs."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys

import numpy as np
import pytest

import ndgrad

try:
    import torch
except ImportError:
    torch = None

HAS_BF16 = hasattr(ndgrad, "bfloat16")
needs_bf16 = pytest.mark.skipif(not HAS_BF16, reason="needs ml_dtypes (pip install ml_dtypes)")
needs_torch = pytest.mark.skipif(torch is None, reason="needs torch as the oracle")


def _libs():
    return (ndgrad,) if torch is None else (ndgrad, torch)


def _f32(t) -> np.ndarray:
    """A bfloat16 tensor's values as float32 (exact; torch has no numpy() for bfloat16)."""
    if isinstance(t, ndgrad.Tensor):
        return t.detach()._data.astype(np.float32)
    return t.detach().float().numpy()


def _close(got, want, ulps=1.0):
    """Within ``ulps`` units in the last place of the largest magnitude, for bfloat16 (2**-7
    relative at worst): the ops' rounding differs."""
    g, w = _f32(got), _f32(want)
    assert g.shape == w.shape
    scale = max(float(np.abs(w).max()), 1e-30) if w.size else 1.0
    err = float(np.abs(g - w).max()) if w.size else 0.0
    assert err <= ulps * 2.0**-7 * scale, f"off by {err / (2.0**-7 * scale):.2f} units"


def _dt(t) -> str:
    """The dtype's name, of a tensor or a dtype."""
    return str(getattr(t, "dtype", t)).split(".")[-1]


# --- without ml_dtypes ---
def test_without_ml_dtypes_the_name_explains():
    code = (
        "import sys; sys.modules['ml_dtypes'] = None\n"  # import ml_dtypes now raises ImportError
        "import ndgrad\n"
        "assert not hasattr(ndgrad, 'bfloat16') and not hasattr(ndgrad, 'BFloat16Tensor')\n"
        "try:\n    ndgrad.bfloat16\nexcept AttributeError as e:\n    print(e)\n"
        "print((ndgrad.ones(2) + 1).tolist(), ndgrad.promote_types(ndgrad.float16, ndgrad.int8))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == ("module 'ndgrad' has no attribute 'bfloat16' (bfloat16 needs the ml_dtypes "
                        "package: pip install ml_dtypes)")
    assert lines[1] == "[2.0, 2.0] ndgrad.float16"


# --- the dtype ---
@needs_bf16
def test_dtype_object():
    b = ndgrad.bfloat16
    assert repr(b) == "ndgrad.bfloat16" and b.is_floating_point and not b.is_complex
    assert b.is_signed and b.itemsize == 2 and b.to_complex() is ndgrad.complex64
    assert b.to_real() is b and pickle.loads(pickle.dumps(b)) is b
    assert ndgrad._dtype.SHORT_NAMES[b.np] == "BFloat16"
    x = ndgrad.ones(2, dtype=b)
    assert x.type() == "ndgrad.BFloat16Tensor" and isinstance(x, ndgrad.BFloat16Tensor)
    assert ndgrad.ones(2).type("torch.BFloat16Tensor").dtype is b
    assert ndgrad.BFloat16Tensor([1, 2]).dtype is b and x.element_size() == 2
    if torch is not None:
        assert b.is_signed == torch.bfloat16.is_signed
        assert b.itemsize == torch.bfloat16.itemsize
    if hasattr(ndgrad, "finfo"):
        got = ndgrad.finfo(b)
        if torch is not None:
            want = torch.finfo(torch.bfloat16)
            assert (got.eps, got.max, got.min, got.tiny, got.bits, got.resolution) == (
                want.eps, want.max, want.min, want.tiny, want.bits, want.resolution)


@needs_bf16
@needs_torch
def test_promotion_table():
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
             "complex64", "complex128", "bfloat16"]
    for name in names:
        for a, b in (("bfloat16", name), (name, "bfloat16")):
            got = ndgrad.promote_types(getattr(ndgrad, a), getattr(ndgrad, b))
            want = torch.promote_types(getattr(torch, a), getattr(torch, b))
            assert _dt(got) == _dt(want), (a, b)
            assert ndgrad.can_cast(getattr(ndgrad, a), getattr(ndgrad, b)) == torch.can_cast(
                getattr(torch, a), getattr(torch, b)), (a, b)


@needs_bf16
def test_result_types(ref):
    def run(T):
        x = T.tensor([1.5, -2.25], dtype=T.bfloat16)
        i = T.tensor([1, 2])
        return [_dt(r) for r in (
            T.result_type(x, 1.5), T.result_type(x, 2), T.result_type(x, 1j),
            T.result_type(i, T.tensor(1.0, dtype=T.bfloat16)), T.result_type(x, T.tensor(1.0)),
            T.result_type(T.tensor(1.0, dtype=T.bfloat16), T.tensor(1.0, dtype=T.float16)),
            x + 1.5, x + i, x * T.tensor(2.0), x * T.tensor([2.0]), x + T.ones(2, dtype=T.float16),
            x * 1j, x / 3, x > 0, x.sum(), x.float(), i.bfloat16())]

    ref.same(run)


# --- tensors ---
@needs_bf16
def test_tensors_print_and_convert(ref):
    def run(T):
        b = T.bfloat16
        x = T.tensor([1.0, 2.5, 3.14159], dtype=b)
        big = T.tensor(1e10, dtype=b)
        small = T.tensor([1e-5, 1.0], dtype=b)
        return (repr(x), repr(big), repr(small), repr(T.zeros(2, 3, dtype=b)),
                repr(T.ones(2, dtype=b, requires_grad=True)), x.tolist(), x[2].item(),
                type(x[2].item()).__name__, float(x[1]), int(x[2]), bool(x[0]), _dt(x.float()),
                x.double().tolist(), _dt(x.to(T.float32)), T.ones(2).bfloat16().tolist(),
                x.is_floating_point(), T.is_floating_point(x), x.stride(),
                T.tensor([1 + 2**-8 + 2**-30], dtype=T.float64).bfloat16().tolist(),
                T.tensor([257, 1000001]).bfloat16().tolist(), T.arange(5, dtype=b).tolist(),
                T.full((2,), 3.3, dtype=b).tolist(), T.eye(2, dtype=b).tolist(),
                T.zeros_like(x).tolist(), _dt(T.ones_like(x, dtype=T.float32)))

    ref.same(run)


@needs_bf16
def test_numpy_refuses_but_from_numpy_takes_ml_dtypes(ref):
    ref.raises(lambda T: T.ones(2, dtype=T.bfloat16).numpy(), TypeError,
               "Got unsupported ScalarType BFloat16")
    import ml_dtypes

    a = np.array([1.5, -2.0], ml_dtypes.bfloat16)
    t = ndgrad.from_numpy(a)  # NOTE(pytorch): torch refuses ml_dtypes arrays; ndgrad shares them
    assert t.dtype is ndgrad.bfloat16 and t.tolist() == [1.5, -2.0]
    t[0] = 4
    assert a[0] == 4
    assert ndgrad.tensor(a).dtype is ndgrad.bfloat16


@needs_bf16
def test_requires_grad_and_parameter():
    b = ndgrad.bfloat16
    assert ndgrad.zeros(2, dtype=b, requires_grad=True).requires_grad
    assert ndgrad.tensor([1.0], dtype=b, requires_grad=True).requires_grad
    assert ndgrad.ones(2, dtype=b).requires_grad_().requires_grad
    p = ndgrad.nn.Parameter(ndgrad.ones(2, dtype=b))
    assert p.requires_grad and p.dtype is b
    m = ndgrad.nn.Linear(2, 3).bfloat16()
    assert m.weight.dtype is b and m.bias.dtype is b


# --- ops: float32 inside, one rounding ---
_RNG = np.random.default_rng(0)
_A = _RNG.uniform(-2, 2, (4, 5)).astype(np.float32)
_P = _RNG.uniform(0.1, 3, (4, 5)).astype(np.float32)
_C = _RNG.uniform(-2, 2, (2, 3, 6, 6)).astype(np.float32)
_K = _RNG.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
_I = np.array([0, 4, 2, 1])

# ops PyTorch computes in float32 and rounds once: the same bits here
EXACT = {
    "add": lambda T, a, b: a + b, "mul_scalar": lambda T, a, b: a * 1.7,
    "div": lambda T, a, b: a / (b.abs() + 0.5), "exp": lambda T, a, b: a.exp(),
    "log": lambda T, a, b: b.log(), "tanh": lambda T, a, b: a.tanh(),
    "sigmoid": lambda T, a, b: a.sigmoid(), "sqrt": lambda T, a, b: b.sqrt(),
    "pow": lambda T, a, b: b.pow(1.5), "sin": lambda T, a, b: a.sin(),
    "gelu": lambda T, a, b: T.nn.functional.gelu(a),
    "silu": lambda T, a, b: T.nn.functional.silu(a),
    "relu": lambda T, a, b: a.relu(), "softplus": lambda T, a, b: T.nn.functional.softplus(a),
    "sum": lambda T, a, b: a.sum(), "sum_dim": lambda T, a, b: a.sum(1),
    "mean": lambda T, a, b: a.mean(0), "var": lambda T, a, b: a.var(1),
    "std": lambda T, a, b: a.std(),
    "norm": lambda T, a, b: a.norm(), "max": lambda T, a, b: a.max(1)[0],
    "cumsum": lambda T, a, b: a.cumsum(1), "softmax": lambda T, a, b: a.softmax(1),
    "clamp": lambda T, a, b: a.clamp(-1, 1), "where": lambda T, a, b: T.where(a > 0, a, b),
    "mse": lambda T, a, b: T.nn.functional.mse_loss(a, b),
    "cross_entropy": lambda T, a, b: T.nn.functional.cross_entropy(a, T.tensor(_I)),
    "bce_logits": lambda T, a, b: T.nn.functional.binary_cross_entropy_with_logits(a, b.sigmoid()),
    "layer_norm": lambda T, a, b: T.nn.functional.layer_norm(a, (5,)),
    "rms_norm": lambda T, a, b: T.nn.functional.rms_norm(a, (5,)),
    "mm": lambda T, a, b: T.mm(a, b.T), "bmm": lambda T, a, b: T.bmm(a[None], b.T[None]),
    "linear": lambda T, a, b: T.nn.functional.linear(a, b, b[:, 0]),
    "einsum": lambda T, a, b: T.einsum("ij,kj->ik", a, b),
    "addmm": lambda T, a, b: T.addmm(a[:, :4], a, b.T),
}
# PyTorch's kernels round an intermediate to bfloat16 (the sum in log_softmax) or differ in the
# last float32 bit: within one bfloat16 unit
NEAR = {
    "rsqrt": lambda T, a, b: b.rsqrt(), "prod": lambda T, a, b: b.prod(1),
    "logsumexp": lambda T, a, b: a.logsumexp(1), "log_softmax": lambda T, a, b: a.log_softmax(1),
}
IMAGES = {
    "conv2d": lambda T, c, k: T.nn.functional.conv2d(c, k, padding=1),
    "max_pool": lambda T, c, k: T.nn.functional.max_pool2d(c, 2),
    "avg_pool": lambda T, c, k: T.nn.functional.avg_pool2d(c, 2),
    "batch_norm": lambda T, c, k: T.nn.functional.batch_norm(c, None, None, training=True),
    "group_norm": lambda T, c, k: T.nn.functional.group_norm(c, 1),
    "interpolate": lambda T, c, k: T.nn.functional.interpolate(c, scale_factor=2, mode="bilinear"),
}


def _run(T, f, a, b):
    x = T.tensor(a, dtype=T.bfloat16, requires_grad=True)
    y = T.tensor(b, dtype=T.bfloat16, requires_grad=True)
    out = f(T, x, y)
    w = np.cos(np.arange(out.numel()) * 0.7).reshape(tuple(out.shape)).astype(np.float32)
    (out.float() * T.tensor(w)).sum().backward()  # weights: gradients that do not cancel
    return out, x.grad, y.grad


@needs_bf16
@needs_torch
@pytest.mark.parametrize("name", sorted(EXACT) + sorted(NEAR) + sorted(IMAGES))
def test_op_against_torch(name):
    f = EXACT.get(name) or NEAR.get(name) or IMAGES[name]
    a, b = (_C, _K) if name in IMAGES else (_A, _P)
    got, want = _run(ndgrad, f, a, b), _run(torch, f, a, b)
    assert _dt(got[0]) == _dt(want[0]) == "bfloat16"
    if name in EXACT:
        np.testing.assert_array_equal(_f32(got[0]), _f32(want[0]))
    else:
        _close(got[0], want[0])
    for g, w in zip(got[1:], want[1:], strict=True):
        assert (g is None) == (w is None)
        if w is not None:
            assert _dt(g) == "bfloat16"
            _close(g, w, ulps=4)  # formulas of several ops round in between, as torch's do


@needs_bf16
def test_ops_that_numpy_lacks_compute_in_float32():
    """matmul of two bfloat16 arrays gives float32 in NumPy, einsum refuses bfloat16, clip
    answers float32, and a sum would accumulate in bfloat16: all give bfloat16 here, rounded
    once."""
    b = ndgrad.bfloat16
    x = ndgrad.tensor(_A, dtype=b)
    ones = ndgrad.full((4096,), 1.0 + 2**-7, dtype=b)  # a bfloat16 accumulator stalls at 256
    assert ones.sum().item() == np.float32(np.float32(1 + 2**-7) * 4096).item()
    for y in (x @ x.T, ndgrad.einsum("ij,kj->ik", x, x), x.clamp(-1, 1), x.sum(0)):
        assert y.dtype is b
    once = (_f32(x) @ _f32(x).T).astype(b.np).astype(np.float32)
    np.testing.assert_array_equal(_f32(x @ x.T), once)


SCALAR_OPS = {  # a number operand: cast to bfloat16 first, but read as float32 by mul and div
    "add": lambda T, x, s: x + s, "sub": lambda T, x, s: x - s, "mul": lambda T, x, s: x * s,
    "div": lambda T, x, s: x / s, "remainder": lambda T, x, s: x % s,
    "fmod": lambda T, x, s: T.fmod(x, s), "where": lambda T, x, s: T.where(x > 0, x, s),
    "clamp": lambda T, x, s: x.clamp(-s, s), "add_": lambda T, x, s: x.clone().add_(s),
    "mul_": lambda T, x, s: x.clone().mul_(s), "mul_0d": lambda T, x, s: x * T.tensor(s),
    "div_0d": lambda T, x, s: x / T.tensor(s, dtype=T.float64),
    "add_0d": lambda T, x, s: x + T.tensor(s),
    "lerp": lambda T, x, s: T.lerp(x, x * 2, s / 300),
}


@needs_bf16
@needs_torch
@pytest.mark.parametrize("name", sorted(SCALAR_OPS))
def test_number_operands(name):
    xs = np.random.default_rng(2).uniform(-4, 4, 2000).astype(np.float32)
    for s in (0.7, 257):
        got = SCALAR_OPS[name](ndgrad, ndgrad.tensor(xs).to(ndgrad.bfloat16), s)
        want = SCALAR_OPS[name](torch, torch.tensor(xs).to(torch.bfloat16), s)
        assert _dt(got) == _dt(want)
        np.testing.assert_array_equal(_f32(got), _f32(want), err_msg=f"{name} {s}")


@needs_bf16
def test_nan_to_num_takes_bfloat16_extremes(ref):
    def run(T):
        x = T.tensor([float("nan"), float("inf"), -float("inf"), 1.7], dtype=T.bfloat16)
        return [t.float() for t in (x.nan_to_num(), x.nan_to_num(1.0, 2.0, -3.5),
                                    x.clone().nan_to_num_())]

    ref.same(run, rtol=0, atol=0)


@needs_bf16
def test_default_dtype(ref):
    def run(T):
        T.manual_seed(0)
        T.set_default_dtype(T.bfloat16)
        try:
            return (_dt(T.ones(2)), T.tensor([1.1]).float(), T.arange(0, 1, 0.3).float(),
                    (T.arange(3) / 3).float(), T.randn(3).float(), (T.arange(4) * 1.5).float(),
                    T.arange(3).sqrt().float(), _dt(T.tensor([1, 2]).float()))
        finally:
            T.set_default_dtype(T.float32)

    ref.same(run, rtol=0, atol=0)


@needs_bf16
def test_in_place_and_copies(ref):
    def run(T):
        b = T.bfloat16
        x = T.tensor([1.5, -2.25, 3.3], dtype=b)
        y = x.clone()
        y.add_(T.ones(3) * 0.001)  # float32 other: computed in float32, written as bfloat16
        z = x.clone().mul_(1.001)
        c = T.zeros(3, dtype=b).copy_(T.tensor([1.001, 2.002, 3.3]))
        d = T.zeros(3).copy_(x)
        x2 = x.clone()
        x2[1] = 7.77
        return [t.float() for t in (y, z, c, d, x2, x.masked_fill(x > 0, 0.1), T.cat([x, x]),
                                    T.stack([x, x]), x[T.tensor([2, 0])], x.sort()[0])] + [
            _dt(y), _dt(d), _dt(T.cat([x, T.ones(2)]))]

    ref.same(run, rtol=0, atol=0)


@needs_bf16
def test_dtype_argument(ref):
    def run(T):
        b = T.bfloat16
        x = T.tensor([1.5, -2.25, 3.3], dtype=b)
        f = T.tensor([257.0, 1.0])
        return (_dt(x.sum(dtype=T.float32)), x.sum(dtype=T.float32).item(),
                _dt(x.softmax(0, dtype=T.float32)), f.mean(dtype=b).item(), _dt(f.mean(dtype=b)))

    ref.same(run)


# --- autograd ---
@needs_bf16
def test_mlp_backward_and_steps(ref):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((16, 8)).astype(np.float32)
    Y = rng.integers(0, 3, 16)
    W1, B1 = rng.standard_normal((16, 8)).astype(np.float32) * 0.3, np.zeros(16, np.float32)
    W2, B2 = rng.standard_normal((3, 16)).astype(np.float32) * 0.3, np.zeros(3, np.float32)

    def run(T):
        m = T.nn.Sequential(T.nn.Linear(8, 16), T.nn.ReLU(), T.nn.LayerNorm(16), T.nn.Linear(16, 3))
        m.load_state_dict({"0.weight": T.tensor(W1), "0.bias": T.tensor(B1), "2.weight": T.ones(16),
                           "2.bias": T.zeros(16), "3.weight": T.tensor(W2), "3.bias": T.tensor(B2)})
        m = m.bfloat16()
        opt = T.optim.Adam(m.parameters(), lr=1e-2)
        x, y = T.tensor(X).bfloat16(), T.tensor(Y)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = T.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        g = m[0].weight.grad
        return losses, _dt(loss), _dt(g), g.float(), m[3].weight.detach().float()

    got = ref.same(run, rtol=2e-2, atol=2e-2)  # bfloat16 keeps about 3 significant digits
    assert got[1] == got[2] == "bfloat16"


@needs_bf16
def test_forward_mode_and_func(ref):
    def run(T):
        x = T.tensor([0.5, 1.5, -2.0], dtype=T.bfloat16)
        out, tan = T.func.jvp(lambda x: (x.sin() * x).sum(), (x,), (T.ones(3, dtype=T.bfloat16),))
        g = T.func.grad(lambda x: (x.exp() * x).sum())(x)
        return out.float(), tan.float(), g.float(), _dt(tan), _dt(g)

    ref.same(run, rtol=0, atol=0)


@needs_bf16
def test_compiled_function_matches_eager():
    def f(x, w):
        return ((x @ w).tanh() * 2 + 1).sum(1).softmax(0)

    x = ndgrad.tensor(_A[:4, :4], dtype=ndgrad.bfloat16)
    want = f(x, x.T)
    for backend in ("inductor", "aot_eager"):
        got = ndgrad.compile(f, backend=backend)(x, x.T)
        assert got.dtype is ndgrad.bfloat16
        np.testing.assert_array_equal(_f32(got), _f32(want))


# --- random numbers: PyTorch's bfloat16 draws, bit for bit ---
RANDOM = {
    "rand": lambda T, n: T.rand(n, dtype=T.bfloat16),
    "randn": lambda T, n: T.randn(n, dtype=T.bfloat16),
    "randn_like": lambda T, n: T.randn_like(T.zeros(n, dtype=T.bfloat16)),
    "uniform_": lambda T, n: T.zeros(n, dtype=T.bfloat16).uniform_(-3, 5),
    "normal_": lambda T, n: T.zeros(n, dtype=T.bfloat16).normal_(1, 2),
    "normal_tensors": lambda T, n: T.normal(T.zeros(n, dtype=T.bfloat16),
                                           T.ones(n, dtype=T.bfloat16)),
    "normal_float_tensor": lambda T, n: T.normal(1.0, T.full((n,), 0.7, dtype=T.bfloat16)),
    "random_": lambda T, n: T.zeros(n, dtype=T.bfloat16).random_(),
    "exponential_": lambda T, n: T.zeros(n, dtype=T.bfloat16).exponential_(),
    "bernoulli": lambda T, n: T.bernoulli(T.full((n,), 0.3, dtype=T.bfloat16)),
    "dropout": lambda T, n: T.nn.functional.dropout(T.full((n,), 1.3, dtype=T.bfloat16), 0.1),
    "alpha_dropout": lambda T, n: T.nn.functional.alpha_dropout(T.full((n,), 1.3, dtype=T.bfloat16),
                                                                0.3, True),
    "multinomial": lambda T, n: T.multinomial(T.rand(n, dtype=T.bfloat16), 3),
}


@needs_bf16
@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_draws(ref, name):
    def run(T):
        T.manual_seed(3)
        return [RANDOM[name](T, n).float() for n in (5, 37)]  # 37: torch's 16-wide normal fill

    ref.same(run, rtol=0, atol=0)


# --- errors ---
@needs_bf16
def test_errors_name_bfloat16(ref):
    ref.raises(lambda T: T.ones(2, dtype=T.bfloat16).view(2).add_(T.ones(2, dtype=T.complex64)),
               RuntimeError,
               "result type ComplexFloat can't be cast to the desired output type BFloat16")


# --- checkpoints ---
@needs_bf16
@needs_torch
def test_save_load_both_ways():
    x = ndgrad.tensor([[1.5, -2.25, 3.14159]], dtype=ndgrad.bfloat16)
    buf = io.BytesIO()
    ndgrad.save({"x": x, "m": ndgrad.nn.Linear(2, 2).bfloat16().state_dict()}, buf)
    buf.seek(0)
    got = torch.load(buf)
    assert got["x"].dtype == torch.bfloat16 and got["x"].tolist() == x.tolist()
    assert got["m"]["weight"].dtype == torch.bfloat16
    buf = io.BytesIO()
    t = torch.tensor([1.5, 2.7, -1e-3], dtype=torch.bfloat16)
    torch.save({"t": t, "view": t[1:]}, buf)
    buf.seek(0)
    back = ndgrad.load(buf)
    assert back["t"].dtype is ndgrad.bfloat16 and back["t"].tolist() == t.tolist()
    assert back["view"].tolist() == t[1:].tolist()


@needs_bf16
@needs_torch
def test_safetensors_bf16_both_ways(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    t = torch.tensor([1.5, 2.7, -1e-3], dtype=torch.bfloat16)
    st.save_file({"w": t, "f": torch.ones(2)}, str(tmp_path / "t.safetensors"))
    got = ndgrad.load(tmp_path / "t.safetensors")
    assert got["w"].dtype is ndgrad.bfloat16 and got["w"].tolist() == t.tolist()
    assert got["f"].dtype is ndgrad.float32
    ndgrad.serialization.save_safetensors(got, tmp_path / "n.safetensors")
    back = st.load_file(str(tmp_path / "n.safetensors"))
    assert back["w"].dtype == torch.bfloat16 and torch.equal(back["w"], t)
