"""The code ``inductor`` generates (issue 16, items 1, 2 and 4): pointwise ops as ufunc calls
that reuse dead buffers and run in place; runs of pointwise ops fused into one C loop each
(broadcast operands read by index, never materialised), compiled once and cached on disk by the
source's hash; the switches that turn the C tier off; the output-code log; ``max_autotune``."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import ndgrad as nd
from ndgrad.compiler import cpp
from ndgrad.compiler import inductor as ind
from ndgrad.compiler.aot import aot_function
from ndgrad.compiler.inductor import compile_fx_inner

needs_c = pytest.mark.skipif(not cpp.available(), reason="no C compiler or cffi")


def _compiler(**options):
    def comp(gm, example_inputs):
        return compile_fx_inner(gm, example_inputs, options=options)
    return comp


def _run(fn, args, **options):
    """(outputs, grads) compiled with ``options``, and eager's; plus the AOT cache entry."""
    f = aot_function(fn, _compiler(**options))
    got = f(*args)
    leaves = [a for a in args if isinstance(a, nd.Tensor) and a.requires_grad]
    g_got = nd.autograd.grad(got.sum(), leaves)
    want = fn(*args)
    g_want = nd.autograd.grad(want.sum(), leaves)
    (entry,) = f.cache.values()
    return (got, g_got), (want, g_want), entry


def _close(a, b, rtol, atol=1e-6):
    a, b = a[0:1] + tuple(a[1]), b[0:1] + tuple(b[1])
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=rtol, atol=atol)


def _gelu_mlp(x, w, b):
    h = nd.nn.functional.gelu(x @ w + b, approximate="tanh")
    return (h * h.sigmoid() - 0.5).tanh() * 3.0


@needs_c
@pytest.mark.parametrize("dtype", [nd.float32, nd.float64])
def test_run_of_pointwise_ops_is_one_c_loop(dtype):
    x = nd.randn(64, 32, dtype=dtype, requires_grad=True)
    w = nd.randn(32, 48, dtype=dtype, requires_grad=True)
    b = nd.randn(48, dtype=dtype, requires_grad=True)
    before = dict(ind.counters)
    # (the graph cache off: the fusion counters count generation, which a cache hit skips)
    got, want, entry = _run(_gelu_mlp, (x, w, b), cpp_fusion=True, fx_graph_cache=False)
    # float32: the gradient sums 48 products of values that differ in their last bits
    _close(got, want, *((1e-5, 1e-5) if dtype == nd.float32 else (1e-12, 1e-12)))
    # forward: gelu, mul, sigmoid, mul, sub, tanh, mul after the matmul, in one loop
    assert entry.fw.source.count("_lib.k") == 1, entry.fw.source
    assert "tanh" in entry.fw.c_source and "#pragma omp simd" in entry.fw.c_source
    assert "_lib.k" in entry.bw.source
    assert ind.counters["fused_ops"] - before["fused_ops"] >= 7


@needs_c
def test_broadcast_operands_are_indexed_not_materialised():
    x = nd.randn(8, 5, 6, requires_grad=True)
    col = nd.randn(6, requires_grad=True)  # (6,): read as in[c]
    row = nd.randn(8, 5, 1, requires_grad=True)  # (8, 5, 1): read as in[r]
    s = nd.randn((), requires_grad=True)  # 0-d: in[0]

    def fn(x, col, row, s):
        return ((x * col + row).exp() * s - row).relu()

    got, want, entry = _run(fn, (x, col, row, s), cpp_fusion=True)
    _close(got, want, 1e-5)
    src = entry.fw.c_source
    assert "in1[c]" in src and "in2[r]" in src and "in3[0]" in src, src
    assert "_f_expand" not in entry.fw.source and "broadcast" not in entry.fw.source


@needs_c
def test_c_tier_keeps_nan_and_inf():
    x = nd.tensor([float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 2.0])

    def fn(x):
        return (x * 1.0).relu() + (x * 2.0).tanh() + (x - 1).sigmoid()

    f = aot_function(fn, _compiler(cpp_fusion=True))
    got = f(x).numpy()
    with np.errstate(all="ignore"):
        want = fn(x).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-6)


@needs_c
def test_bool_values_inside_a_loop():
    x = nd.randn(40, 3, requires_grad=True)

    def fn(x):
        m = x > 0.1  # a comparison read by the loop, and an output of it
        return nd.where(m, x * 2, x.exp()) * m + (x < 0) * x

    got, want, entry = _run(fn, (x,), cpp_fusion=True)
    _close(got, want, 1e-6)
    assert "unsigned char" in entry.fw.c_source


@needs_c
def test_non_contiguous_input_is_copied_for_the_loop():
    x = nd.randn(6, 7, requires_grad=True)

    def fn(x):
        return (x.t() * 2 + 1).tanh() * 3

    got, want, _ = _run(fn, (x,), cpp_fusion=True)
    _close(got, want, 1e-6)


def test_numpy_tier_reuses_buffers_and_runs_in_place():
    x = nd.randn(100, 50, requires_grad=True)

    def fn(x):
        return (((x * 2 + 1).tanh() * 3).exp() - 1) / 7

    before = ind.counters["reused_buffers"]
    got, want, entry = _run(fn, (x,), cpp_fusion=False, fx_graph_cache=False)
    _close(got, want, 1e-6)
    assert not entry.fw.c_source
    assert ind.counters["reused_buffers"] > before


def test_a_buffer_another_op_may_view_is_never_reused():
    """``t()`` is a view of the product: writing the next op into that buffer would change it."""
    x = nd.randn(30, 30, requires_grad=True)

    def fn(x):
        y = x * 2
        z = y.t()  # a view of y
        return (y + 1).exp() * z

    got, want, _ = _run(fn, (x,), cpp_fusion=False)
    _close(got, want, 1e-6)


@needs_c
def test_disk_cache_is_used_across_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("NDGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cpp, "_loaded", {})
    x = nd.randn(17, 3, requires_grad=True)
    fn = lambda x: ((x * 1.25 + 0.5).tanh() * x).sigmoid()  # noqa: E731
    before = dict(cpp.counters)
    _run(fn, (x,), cpp_fusion=True)
    assert cpp.counters["compiled"] > before["compiled"]
    built = sorted(p.name for p in (tmp_path / "inductor").iterdir())
    assert built and all(p.endswith(".so") for p in built)  # no temporary left behind
    monkeypatch.setattr(cpp, "_loaded", {})  # as a new process: only the disk has them
    before = dict(cpp.counters)
    got, want, _ = _run(fn, (x,), cpp_fusion=True)
    _close(got, want, 1e-6)
    assert cpp.counters["compiled"] == before["compiled"]
    assert cpp.counters["disk_hits"] > before["disk_hits"]


def test_environment_variable_turns_the_c_tier_off(monkeypatch, caplog):
    monkeypatch.setenv("NDGRAD_INDUCTOR_CPP", "0")
    monkeypatch.setattr(cpp, "_state", {})
    with caplog.at_level(logging.INFO, logger="ndgrad.compiler.inductor"):
        assert not cpp.available()
        assert not cpp.available()
    assert [r.getMessage() for r in caplog.records].count(
        "inductor: fused C kernels off (turned off by NDGRAD_INDUCTOR_CPP); using NumPy code") == 1
    x = nd.randn(9, requires_grad=True)
    got, want, entry = _run(lambda x: (x * 3).tanh() * 2, (x,))
    _close(got, want, 1e-6)
    assert not entry.fw.c_source and "_u_tanh(" in entry.fw.source


def test_options_turn_the_c_tier_off_and_unknown_options_raise():
    x = nd.randn(9, requires_grad=True)
    _, _, entry = _run(lambda x: (x * 3).tanh() * 2, (x,), cpp_fusion=False)
    assert not entry.fw.c_source
    f = nd.compile(lambda x: x * 2, backend="inductor", options={"no_such_option": 1})
    with pytest.raises(Exception, match="no_such_option"):
        f(x)


def test_output_code_log_prints_python_and_c(caplog):
    nd._logging.set_logs(output_code=True)
    try:
        with caplog.at_level(logging.DEBUG, logger="ndgrad.compiler.output_code"):
            x = nd.randn(5, 4, requires_grad=True)
            aot_function(lambda x: (x * 2 + 1).tanh().sum(), compile_fx_inner)(x).backward()
    finally:
        nd._logging.set_logs()
    err = caplog.text
    assert "Output code" in err and "def compiled(args):" in err
    if cpp.available():
        assert "/* fused C */" in err and "void k0(" in err


@needs_c
def test_max_autotune_keeps_a_correct_version():
    x = nd.randn(64, 64, requires_grad=True)
    got, want, entry = _run(lambda x: ((x * 2).tanh() * x).exp(), (x,), cpp_fusion=True,
                            max_autotune=True)
    _close(got, want, 1e-5)
    assert entry.fw.source.startswith("def compiled(args):")


@needs_c
@pytest.mark.parametrize("dtype", [nd.float32, nd.float64])
def test_max_pool_over_disjoint_windows_is_a_c_kernel(dtype):
    """CNN pooling (kernel = stride, no padding) and its backward are generated C loops with
    eager's exact values, indices and gradients: the first maximum of a window, a NaN when the
    window holds one (the first), ties and -inf included."""
    x = nd.randn(2, 3, 9, 8, dtype=dtype)
    x[0, 0, :2, :2] = 1.0  # a tie: the first position
    x[0, 1, 2, 3] = float("nan")
    x[1, 2, 4:6, 6:8] = float("-inf")
    x[1, 0, 0, 1] = float("nan")
    x[1, 0, 1, 0] = float("nan")  # two NaNs in one window: the first
    x.requires_grad_()

    def fn(x):
        y, i = nd.nn.functional.max_pool2d(x, 2, return_indices=True)
        return y * 2, i

    f = aot_function(fn, _compiler(cpp_fusion=True, fx_graph_cache=False))
    (got, gi), (want, wi) = f(x), fn(x)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())
    g = nd.randn(*got.shape, dtype=dtype)
    (gx,), (wx,) = nd.autograd.grad(got, [x], g), nd.autograd.grad(want, [x], g)
    np.testing.assert_array_equal(gx.numpy(), wx.numpy())
    (entry,) = f.cache.values()
    assert "void k" in entry.fw.c_source and "take ? v : m" in entry.fw.c_source
    assert "op[ip[i]] = gp[i]" in entry.bw.c_source


@needs_c
def test_overlapping_or_padded_pooling_stays_on_the_op():
    x = nd.randn(2, 3, 9, 8, requires_grad=True)
    for kw in ({"stride": 1}, {"padding": 1}, {"dilation": 2}):
        f = aot_function(lambda x: nd.nn.functional.max_pool2d(x, 3, **kw),  # noqa: B023
                         _compiler(cpp_fusion=True, fx_graph_cache=False))
        got, want = f(x), nd.nn.functional.max_pool2d(x, 3, **kw)
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        (entry,) = f.cache.values()
        assert "take ? v : m" not in entry.fw.c_source
