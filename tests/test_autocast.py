"""``autocast`` against PyTorch on the CPU: which ops run in lower precision, which in float32,
the region state (nesting, ``enabled=False``, per thread), the weight-cast cache, gradients
through the casts, ``custom_fwd``/``custom_bwd`` and the deprecated spellings.

float16 is the lower dtype here (PyTorch's CPU autocast takes it as well as bfloat16); the op
lists are the same for both.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import ndgrad

RNG = np.random.default_rng(0)
A = RNG.standard_normal((4, 4)).astype(np.float32)
V = RNG.standard_normal(4).astype(np.float32)
B3 = RNG.standard_normal((2, 4, 4)).astype(np.float32)
IM = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
W2 = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
P = RNG.random((4, 4)).astype(np.float32)
TGT = np.array([0, 1, 2, 3])


def _probes(T, low: bool):
    F = T.nn.functional
    c = (lambda a: T.tensor(a).half()) if low else T.tensor
    x, v, b3, im, w2, p, tgt = c(A), c(V), c(B3), c(IM), c(W2), c(P), T.tensor(TGT)
    return {
        "mm": lambda: T.mm(x, x), "bmm": lambda: T.bmm(b3, b3), "matmul": lambda: x @ x,
        "matmul_1d": lambda: v @ x, "addmm": lambda: T.addmm(x, x, x),
        "conv2d": lambda: F.conv2d(im, w2), "linear": lambda: F.linear(x, x, v),
        "einsum": lambda: T.einsum("ij,jk->ik", x, x), "tensordot": lambda: T.tensordot(x, x, 1),
        "sdpa": lambda: F.scaled_dot_product_attention(b3, b3, b3),
        "softmax": lambda: T.softmax(x, 1), "sum": lambda: x.sum(), "exp": lambda: x.exp(),
        "cross_entropy": lambda: F.cross_entropy(x, tgt), "nll_loss": lambda: F.nll_loss(x, tgt),
        "bce": lambda: F.binary_cross_entropy(p, p), "svd": lambda: T.linalg.svd(x)[0],
        "qr": lambda: T.linalg.qr(x)[0], "inverse": lambda: T.linalg.inv(x + 4 * T.eye(4)),
        "relu": lambda: x.relu(), "add": lambda: x + x, "layer_norm": lambda: F.layer_norm(x, (4,)),
        "max_pool2d": lambda: F.max_pool2d(im, 2), "cat_mixed": lambda: T.cat([x, x.double()]),
        "mm_f64": lambda: T.mm(x.double(), x.double()), "mv": lambda: T.mv(x, v),
        "dot": lambda: T.dot(v, v),
    }


# Functions that are one op in PyTorch's lists and a composite of pointwise ops here: no mode sees
# them whole, so they compute in their inputs' dtypes (with float16 inputs, float16).
COMPOSITE_DEVIATIONS = {"mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss", "kl_div", "trace"}


@pytest.mark.parametrize("low", [False, True], ids=["float32_in", "float16_in"])
def test_output_dtypes_match_torch(low, torch_or_skip):
    torch = torch_or_skip

    def dtypes(T):
        with T.autocast("cpu", dtype=T.float16):
            return {k: str(f().dtype).split(".")[-1] for k, f in _probes(T, low).items()}

    got, want = dtypes(ndgrad), dtypes(torch)
    assert got == want
    if not low:
        assert got["mm"] == "float16" and got["cross_entropy"] == "float32" and got["mm_f64"] == "float64"


def test_values_and_gradients_match_torch(torch_or_skip):
    """A small network under autocast: the forward in float16 where PyTorch computes in float16,
    float32 gradients for float32 weights, equal to PyTorch's within float16 rounding."""
    torch = torch_or_skip
    w1, w2 = RNG.standard_normal((8, 4)).astype(np.float32), RNG.standard_normal((3, 8)).astype(np.float32)
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    y = np.array([0, 2, 1, 1, 0])

    def run(T):
        a, b = T.tensor(w1, requires_grad=True), T.tensor(w2, requires_grad=True)
        with T.autocast("cpu", dtype=T.float16):
            h = T.nn.functional.linear(T.tensor(x), a).relu()
            out = T.nn.functional.linear(h, b)
            loss = T.nn.functional.cross_entropy(out, T.tensor(y))
        loss.backward()
        return (str(h.dtype), str(out.dtype), str(loss.dtype), loss.item(), a.grad.numpy(), b.grad.numpy(),
                str(a.grad.dtype))

    got, want = run(ndgrad), run(torch)
    assert [g.split(".")[-1] for g in got[:3]] == [w.split(".")[-1] for w in want[:3]] == \
        ["float16", "float16", "float32"]
    assert abs(got[3] - want[3]) < 1e-3
    np.testing.assert_allclose(got[4], want[4], rtol=2e-2, atol=2e-3)
    np.testing.assert_allclose(got[5], want[5], rtol=2e-2, atol=2e-3)
    assert got[6].split(".")[-1] == "float32"


def test_region_state_matches_torch(torch_or_skip):
    torch = torch_or_skip

    def states(T):
        out = [T.is_autocast_enabled("cpu"), T.is_autocast_enabled()]
        with T.autocast("cpu", dtype=T.float16):
            out += [T.is_autocast_enabled("cpu"), T.is_autocast_enabled(), str(T.get_autocast_dtype("cpu"))]
            with T.autocast("cpu", enabled=False):
                out += [T.is_autocast_enabled("cpu"), str((T.ones(2, 2) @ T.ones(2, 2)).dtype)]
            out.append(str((T.ones(2, 2) @ T.ones(2, 2)).dtype))

            @T.autocast("cpu", enabled=False)
            def off():
                return str((T.ones(2, 2) @ T.ones(2, 2)).dtype)

            out.append(off())
            seen = []
            th = threading.Thread(target=lambda: seen.append(T.is_autocast_enabled("cpu")))
            th.start()
            th.join()
            out.append(seen)
        out.append(T.is_autocast_enabled("cpu"))
        return [str(o).split(".")[-1] for o in out]

    assert states(ndgrad) == states(torch)


def test_errors_and_warnings_match_torch(torch_or_skip):
    torch = torch_or_skip
    for T in (ndgrad, torch):
        with pytest.raises(ValueError, match="Expected `device_type` of type `str`, got: `<class 'int'>`"):
            T.autocast(1)
        with pytest.raises(RuntimeError, match="^Expected one of cpu, cuda, .*device string: foo$"):
            T.autocast("foo")
        with pytest.warns(UserWarning, match="In CPU autocast, but the target dtype is not supported"):
            a = T.autocast("cpu", dtype=T.float32)
        with a:
            assert not T.is_autocast_enabled("cpu")
        if not T.cuda.is_available():
            with pytest.warns(UserWarning, match="CUDA is not available or torch_xla is imported"):
                T.autocast("cuda")
        with pytest.warns(FutureWarning, match=r"`torch.cpu.amp.autocast\(args...\)` is deprecated"):
            T.cpu.amp.autocast(dtype=T.float16)


def test_weight_casts_are_cached_within_a_region():
    w = ndgrad.randn(4, 4, requires_grad=True)
    x = ndgrad.randn(2, 4)
    with ndgrad.autocast("cpu", dtype=ndgrad.float16):
        a, b = x @ w, x @ w
        assert a.grad_fn.next_functions[1][0] is b.grad_fn.next_functions[1][0]  # one cast of w
        with ndgrad.autocast("cpu", dtype=ndgrad.float16, cache_enabled=False):
            c = x @ w
        assert c.grad_fn.next_functions[1][0] is not a.grad_fn.next_functions[1][0]
    with ndgrad.autocast("cpu", dtype=ndgrad.float16):
        d = x @ w  # a new region: a new cast
    assert d.grad_fn.next_functions[1][0] is not a.grad_fn.next_functions[1][0]
    (a.sum() + b.sum() + d.sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), 3 * np.repeat(x.numpy().sum(0, keepdims=True).T, 4, 1),
                               rtol=1e-2, atol=1e-2)


def test_custom_fwd_and_bwd(torch_or_skip):
    torch = torch_or_skip

    def run(T):
        seen = []

        class Scale(T.autograd.Function):
            @staticmethod
            @T.amp.custom_fwd(device_type="cpu", cast_inputs=T.float32)
            def forward(ctx, x):
                seen.append((str(x.dtype), T.is_autocast_enabled("cpu")))
                return (x @ x) * 2

            @staticmethod
            @T.amp.custom_bwd(device_type="cpu")
            def backward(ctx, g):
                seen.append(T.is_autocast_enabled("cpu"))
                return g * 2

        x = T.ones(2, 2, requires_grad=True)
        with T.autocast("cpu", dtype=T.float16):
            y = Scale.apply(x.half())
        y.sum().backward()
        return [str(s).replace("torch.", "").replace("ndgrad.", "") for s in seen], str(y.dtype).split(".")[-1]

    assert run(ndgrad) == run(torch)


def test_mode_leaves_the_stack_and_costs_nothing_after():
    from ndgrad.autograd import dispatch_mode

    before = list(dispatch_mode.active)
    with ndgrad.autocast("cpu", dtype=ndgrad.float16):
        with ndgrad.autocast("cpu", dtype=ndgrad.float16):
            pass
        assert len(dispatch_mode.active) == len(before) + 1  # one mode however deep the nesting
    assert dispatch_mode.active == before
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ndgrad.get_autocast_dtype("cuda") == ndgrad.float16


def test_deprecated_grad_scaler_spellings(torch_or_skip):
    torch = torch_or_skip
    for T in (ndgrad, torch):
        with pytest.warns(FutureWarning, match=r"`torch.cpu.amp.GradScaler\(args...\)` is deprecated"):
            s = T.cpu.amp.GradScaler(init_scale=4.0)
        assert s.get_scale() == 4.0 and s.is_enabled()
        assert isinstance(s, T.amp.GradScaler)


def test_default_cpu_autocast_is_bfloat16_as_torch(torch_or_skip):
    """With no dtype, CPU autocast runs in bfloat16 (through ml_dtypes): the same values,
    loss and gradients as PyTorch, bit for bit on this small network."""
    torch = torch_or_skip
    if not hasattr(ndgrad, "bfloat16"):
        pytest.skip("bfloat16 needs ml_dtypes")
    a = RNG.standard_normal((4, 4)).astype(np.float32)

    def run(T):
        x = T.tensor(a, requires_grad=True)
        with T.autocast("cpu"):
            y = x @ x
            loss = T.nn.functional.cross_entropy(y, T.tensor([0, 1, 2, 3]))
        loss.backward()
        return (str(T.get_autocast_dtype("cpu")).split(".")[-1], str(y.dtype).split(".")[-1],
                y.detach().float().numpy(), loss.item(), x.grad.numpy())

    got, want = run(ndgrad), run(torch)
    assert got[:2] == want[:2] == ("bfloat16", "bfloat16")
    np.testing.assert_array_equal(got[2], want[2])
    assert got[3] == want[3]
    np.testing.assert_array_equal(got[4], want[4])
