"""The ``inductor`` backend (issue 15, item 6): each half of the AOT pair compiled to one
straight-line function of array calls. Op-table samples give eager values and gradients; the
source calls the ops' array forwards with no dispatch where the example shows no promotion, goes
through dispatch where it does, frees values after their last use and is cached by structure;
the three demo models train 20 steps to eager's losses."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from test_aot import CASES, check_backend_on_sample
from test_capture_models import MODELS

import ndgrad as nd
from ndgrad.compiler import capture, cpp
from ndgrad.compiler import inductor as ind
from ndgrad.compiler.aot import aot_function
from ndgrad.compiler.inductor import compile_fx_inner, inductor_backend


TIERS = [pytest.param(True, id="c", marks=pytest.mark.skipif(
    not cpp.available(), reason="no C compiler or cffi: the C tier is off")),
    pytest.param(False, id="numpy")]


@pytest.mark.parametrize("cpp_fusion", TIERS)
@pytest.mark.parametrize("rec,sample", CASES)
def test_op_through_inductor(rec, sample, cpp_fusion):
    check_backend_on_sample(
        functools.partial(inductor_backend, options={"cpp_fusion": cpp_fusion}), rec, sample)


def _fn(x, w):
    return ((x * 2).sin() @ w).tanh().sum()


def _numpy_tier(gm, example_inputs):
    return compile_fx_inner(gm, example_inputs, options={"cpp_fusion": False})


def test_source_is_straight_line_array_calls():
    x, w = nd.randn(3, 4, requires_grad=True), nd.randn(4, 2, requires_grad=True)
    f = aot_function(_fn, _numpy_tier)
    f(x, w).backward()
    (entry,) = f.cache.values()
    for compiled in (entry.fw, entry.bw):
        src = compiled.source
        assert src.startswith("def compiled(args):") and "args.clear()" in src
        assert "_d_" not in src, src  # no op went through dispatch
        assert " = None" in src  # values dropped after their last use
        assert not compiled.c_source
    assert "_u_tanh(" in entry.fw.source  # pointwise ops are ufunc calls
    assert "_f_mm(" in entry.fw.source or "_f_matmul(" in entry.fw.source


def test_mixed_float_dtypes_are_ufunc_calls():
    def fn(x, y):
        return (x * y + 1).exp()

    x = nd.randn(5, dtype=nd.float32, requires_grad=True)
    y = nd.randn(5, dtype=nd.float64)
    for compiler in (_numpy_tier, compile_fx_inner):
        f = aot_function(fn, compiler)
        out = f(x, y)
        want = fn(x, y)
        assert out.dtype == want.dtype == nd.float64
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-12)
        (g,) = nd.autograd.grad(out.sum(), (x,))
        (gw,) = nd.autograd.grad(want.sum(), (x,))
        assert g.dtype == nd.float32
        np.testing.assert_allclose(g.numpy(), gw.numpy(), rtol=1e-6)
        (entry,) = f.cache.values()
        assert "_d_" not in entry.fw.source


def test_promotion_numpy_would_get_wrong_goes_through_dispatch():
    def fn(x, k):
        return (x * k).exp()  # float32 * int64 is float32 in PyTorch, float64 in NumPy

    x = nd.randn(5, dtype=nd.float32, requires_grad=True)
    k = nd.arange(5)
    f = aot_function(fn, _numpy_tier)
    out = f(x, k)
    assert out.dtype == nd.float32
    np.testing.assert_allclose(out.detach().numpy(), fn(x, k).detach().numpy(), rtol=1e-6)
    (entry,) = f.cache.values()
    assert "_d_mul_Tensor(" in entry.fw.source  # promotion: the op's own dispatch
    assert "_u_exp(" in entry.fw.source  # float32 from there on: a ufunc


def test_code_is_cached_by_graph_structure():
    x, w = nd.randn(3, 4, requires_grad=True), nd.randn(4, 2, requires_grad=True)
    aot_function(_fn, compile_fx_inner)(x, w).backward()
    before = dict(ind.counters)
    aot_function(_fn, compile_fx_inner)(x, w).backward()
    assert ind.counters["compiled"] == before["compiled"]
    assert ind.counters["cache_hits"] == before["cache_hits"] + 2


# --- the demo models (tests/ops/test_replay.py's, as test_capture_models builds them), 20 steps
def _with_optimizer(name, make_opt):
    def make():
        return (*MODELS[name](), make_opt)
    return make


_mlp = _with_optimizer("mlp-dropout", lambda p: nd.optim.SGD(p, lr=0.1, momentum=0.9))
_cnn = _with_optimizer("cnn", lambda p: nd.optim.SGD(p, lr=0.05))
_transformer = _with_optimizer("transformer-block", lambda p: nd.optim.AdamW(p, lr=0.01))


def _train(make, compiled: bool, cpp_fusion=None):
    nd.manual_seed(0)
    model, data, step, make_opt = make()
    opt = make_opt(model.parameters())

    def loss_fn(*d):
        return step(model, *d)

    if compiled:
        run = inductor_backend(capture(loss_fn, *data), list(data),
                               options={"cpp_fusion": cpp_fusion})
    losses = []
    for i in range(20):
        nd.manual_seed(100 + i)
        opt.zero_grad()
        loss = run(*data) if compiled else loss_fn(*data)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, run if compiled else None


@pytest.mark.parametrize("cpp_fusion", TIERS)
@pytest.mark.parametrize("make", [_mlp, _cnn, _transformer], ids=["mlp", "cnn", "transformer"])
def test_models_train_to_eager_losses(make, cpp_fusion):
    want, _ = _train(make, False)
    got, run = _train(make, True, cpp_fusion)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    (entry,) = run._aot.cache.values()
    assert entry.fn_cls is not None and entry.bw is not None
