"""The ``cudagraphs`` backend and ``ndgrad.compile``'s ``mode=`` (issue 16, items 3 and 4).

On the CPU: mutated inputs found from the ops' alias info, the skip reasons, the runner's
warm-up / record / replay logic driven by ``FakeCapture`` (a stand-in with a CUDA graph's memory
behaviour), the demo models training through it to eager's losses, the cuBLAS calls' row-major
to column-major plans checked by emulating column-major GEMM in NumPy, and the modes. On a GPU
(skipped without CuPy and a device): the same through real CUDA graphs and ctypes cuBLAS."""

from __future__ import annotations

import copy
import ctypes
import functools
import logging
import operator
import sys
import types

import numpy as np
import pytest
from test_compile_models import MODELS, _train

import ndgrad as nd
import ndgrad.nn.functional as F
from ndgrad import nn
from ndgrad._backend import Device, cublas
from ndgrad._ops.overload import aten
from ndgrad.compiler import GraphModule, Graph, capture, cudagraphs as cg
from ndgrad.compiler.aot import make_boxed_func
from ndgrad.compiler.dynamo import counters, list_mode_options
from ndgrad.compiler.node import TensorMeta

LOGGER = "ndgrad.compiler.cudagraphs"


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


class FakeCapture:
    """``CudaGraphCapture`` on the CPU, with a graph's memory behaviour: recording runs the
    function but undoes its writes to the inputs and poisons its outputs (a capture computes
    nothing); a replay reruns it on the static buffers and writes the results into the recorded
    outputs (a replay rewrites the same memory every time)."""

    made = []

    def __init__(self, device=None):
        self.run = self.outs = None
        self.replays = 0
        FakeCapture.made.append(self)

    def warmup(self, run):
        return run()

    def clone(self, array):
        return array.copy(order="K")

    def record(self, run, inputs):
        arrays = [t._data for t in inputs if isinstance(t, nd.Tensor)]
        saved = [(a, a.copy()) for a in arrays]
        outs = run()
        for a, c in saved:
            a[...] = c
        for o in _flat(outs):
            if isinstance(o, nd.Tensor) and not any(np.shares_memory(o._data, a) for a in arrays):
                o._data.fill(np.nan if o._data.dtype.kind in "fc" else -7)
        self.run, self.outs = run, outs
        return outs

    def replay(self):
        self.replays += 1
        for s, n in zip(_flat(self.outs), _flat(self.run()), strict=True):
            if isinstance(s, nd.Tensor) and s._data is not n._data:
                s._data[...] = n._data


class Refuses(FakeCapture):
    """A capture that meets an op it cannot hold (a host read while capturing)."""

    def record(self, run, inputs):
        raise RuntimeError("operation not permitted when stream is capturing")


def _runner(fn, *, mutated=(), static=None, capture=FakeCapture):
    return cg.cudagraphify(make_boxed_func(fn), [], mutated, static,
                           capture_factory=capture)


# --- mutated inputs, from alias info ---
def test_mutated_inputs_from_alias_info():
    def f(x, y, z):
        x.add_(y)
        z[1:].mul_(2)  # through a view
        return (x * y).sum()

    gm = capture(f, nd.ones(3), nd.ones(3), nd.ones(3))
    assert cg.mutated_input_idxs(gm) == (0, 2)
    copies = [n for n in gm.graph.nodes if n.target is aten.copy_.default]
    assert copies and copies[0].target._schema.arguments[0].alias_info.is_write
    assert cg.mutated_input_idxs(capture(lambda x, y: x * y + 1, nd.ones(2), nd.ones(2))) == ()


def test_mutated_input_through_views_in_a_hand_built_graph():
    g = Graph()
    a, b, c = g.placeholder("a"), g.placeholder("b"), g.placeholder("c")
    t = g.call_function(aten.transpose.int, (a, 0, 1))
    parts = g.call_function(aten.unbind.int, (t,))
    row = g.call_function(operator.getitem, (parts, 0))
    g.call_function(aten.add_.Tensor, (row, b))
    s = g.call_function(aten.mul.Tensor, (b, c))  # b and c only read
    g.output((s,))
    assert cg.mutated_input_idxs(GraphModule(nn.Module(), g)) == (0,)


# --- skip reasons ---
def _meta_graph(devices, op=None):
    g = Graph()
    phs = []
    for i, dev in enumerate(devices):
        p = g.placeholder(f"x{i}")
        p.meta["val"] = TensorMeta((3,), nd.float32, dev, False, (1,))
        phs.append(p)
    out = g.call_function(op or aten.add.Tensor, (phs[0], phs[-1]))
    out.meta["val"] = TensorMeta((3,), nd.float32, devices[0], False, (1,))
    g.output((out,))
    return GraphModule(nn.Module(), g)


def test_skip_reasons():
    cuda0, cuda1 = Device("cuda", 0), Device("cuda", 1)
    assert cg.skip_reason(_meta_graph([cuda0, cuda0]), []) is None
    assert cg.skip_reason(_meta_graph([cuda0, cuda1]), []) == (
        "multiple devices: device(type='cuda', index=0), device(type='cuda', index=1)")
    assert cg.skip_reason(_meta_graph([cuda0, nd.device("cpu")]), []) == "cpu device (x1)"
    x = nd.ones(3)
    why = cg.skip_reason(capture(lambda x: x.exp(), x), [x])
    assert why.startswith("cpu device (x). Found from :") and "x.exp()" in why


@pytest.mark.parametrize("fn,op", [
    (lambda x: F.dropout(x, 0.5, training=True), "random"),
    (lambda x: x + nd.rand_like(x), "random"),
    (lambda x: x.nonzero().float().sum(), "data-dependent"),
    (lambda x: x[x > 0].sum(), "data-dependent"),
])
def test_uncapturable_ops_are_skip_reasons(fn, op):
    x = nd.randn(6)
    why = cg.skip_reason(capture(fn, x), [x], check_devices=False)
    assert why is not None and why.startswith("incompatible op ("), (op, why)


def test_backend_on_cpu_logs_the_skip_and_gives_eager_results(caplog):
    nd._dynamo.reset()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    twin = copy.deepcopy(model)
    compiled = nd.compile(twin, backend="cudagraphs")
    x = nd.randn(5, 4)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(3):
            got, want = compiled(x), model(x)
            got.sum().backward()
            want.sum().backward()
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    skips = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(skips) == 1 and skips[0].startswith("skipping cudagraphs due to cpu device ("), skips
    assert counters["inductor"]["cudagraph_skips"] >= 1
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-6)


def test_reduce_overhead_on_cpu_logs_the_skip_and_gives_eager_results(caplog):
    nd._dynamo.reset()
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    compiled = nd.compile(copy.deepcopy(model), mode="reduce-overhead")
    x = nd.randn(5, 4)
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            np.testing.assert_allclose(compiled(x).detach().numpy(), model(x).detach().numpy(),
                                       rtol=1e-5)
    assert any("skipping cudagraphs due to cpu device" in r.getMessage() for r in caplog.records)


# --- the runner, on a fake capture ---
def test_cudagraphify_leaves_cpu_inputs_uncompiled(caplog):
    def f(args):
        return args[0] + 1

    f._boxed_call = True
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert cg.cudagraphify(f, [nd.ones(2)], names=["x"]) is f
    assert "skipping cudagraphs due to cpu device (x)" in caplog.text


def test_warmup_then_record_then_replays_with_distinct_outputs():
    runner = _runner(lambda x, w: (x @ w).tanh())
    w = nd.randn(3, 2)
    outs = []
    for i in range(4):
        x = nd.randn(4, 3)
        args = [x, w]
        out = runner(args)
        assert args == []  # the boxed convention: the inputs list is handed over
        np.testing.assert_allclose(out.numpy(), (x @ w).tanh().numpy(), rtol=1e-6)
        outs.append((out, (x @ w).tanh().numpy()))
        assert runner.state == ("record" if i == 0 else "replay")
    cap = runner.capture
    assert cap.replays == 3  # the recording ran nothing: call 2 replayed too
    for out, want in outs:  # no later call overwrote an earlier call's result
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    assert len({id(o._data) for o, _ in outs}) == 4
    assert not any(np.shares_memory(o._data, s._data) for o, _ in outs for s in _flat(cap.outs))


def test_mutated_input_is_updated_for_the_caller():
    def f(x, y):
        x.add_(y)
        return x * 2

    gm = capture(f, nd.ones(3), nd.ones(3))
    runner = _runner(gm.forward, mutated=cg.mutated_input_idxs(gm))
    y = nd.tensor([1.0, 2.0, 3.0])
    for i in range(4):
        x = nd.full((3,), float(i))
        v = x._version
        out = runner([x, y])
        np.testing.assert_allclose(x.numpy(), i + y.numpy())
        np.testing.assert_allclose(out.numpy(), 2 * (i + y.numpy()))
        assert x._version > v
        assert not np.shares_memory(out._data, x._data)


def test_input_returned_as_output_is_the_callers_tensor():
    runner = _runner(lambda x, w: (x, x * w))
    w = nd.ones(2)
    for _ in range(3):
        x = nd.randn(2)
        a, b = runner([x, w])
        assert a is x
        np.testing.assert_allclose(b.numpy(), x.numpy())


def test_static_inputs_read_in_place_and_address_checked(caplog):
    w = nd.randn(3)
    runner = _runner(lambda x, w: x * w, static=(1,))
    for _ in range(3):
        x = nd.randn(3)
        np.testing.assert_allclose(runner([x, w]).numpy(), (x * w).numpy())
    assert [i for i, _ in runner.copy_in] == [0]  # the parameter is never copied in
    with nd.no_grad():
        w.mul_(3)  # same memory: the graph reads the new values
    x = nd.randn(3)
    np.testing.assert_allclose(runner([x, w]).numpy(), (x * w).numpy())
    w2 = nd.randn(3)  # another address: re-recorded
    with caplog.at_level(logging.INFO, logger=LOGGER):
        np.testing.assert_allclose(runner([x, w2]).numpy(), (x * w2).numpy())
    assert "static input data pointer changed (input 1)" in caplog.text
    assert runner.state == "replay" and runner.rerecords == 1


def test_rerecord_limit_falls_back_with_a_reason(caplog, monkeypatch):
    monkeypatch.setattr(cg, "rerecord_limit", 1)
    runner = _runner(lambda x, w: x + w, static=(1,))
    x = nd.ones(2)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for k in range(5):
            w = nd.full((2,), float(k))
            np.testing.assert_allclose(runner([x, w]).numpy(), 1.0 + k)
    assert runner.state == "eager"
    assert "skipping cudagraphs due to static input data pointer changed" in caplog.text
    assert "rerecord_limit (1)" in caplog.text


def test_statics_inferred_from_the_arrays_seen_again():
    w = nd.randn(4)
    runner = _runner(lambda x, w: x - w)  # no static_input_idxs: inferred at the record
    for _ in range(3):
        x = nd.randn(4)
        np.testing.assert_allclose(runner([x, w]).numpy(), (x - w).numpy())
    assert [i for i, *_ in runner.checks] == [1] and [i for i, _ in runner.copy_in] == [0]


def test_non_tensor_input_change_rerecords():
    runner = _runner(lambda x, k: x * k)
    x = nd.ones(2)
    for k in (2.0, 2.0, 2.0, 5.0, 5.0):
        np.testing.assert_allclose(runner([x, k]).numpy(), k)
    assert runner.rerecords == 1


def test_capture_failure_logs_and_runs_uncompiled(caplog):
    runner = _runner(lambda x: x.sin(), capture=Refuses)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(3):
            x = nd.randn(3)
            np.testing.assert_allclose(runner([x]).numpy(), x.sin().numpy())
    assert runner.state == "eager"
    assert "skipping cudagraphs due to RuntimeError while recording: operation not permitted" \
        in caplog.text


def _bn_cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 6 * 6, 5)), \
        lambda: (nd.randn(8, 1, 6, 6), nd.randint(0, 5, (8,))), {}


@pytest.mark.parametrize("name", ["cnn", "bn-cnn", "digits-mlp", "digits-cnn", "mlp-dropout",
                                  "transformer-block"])
def test_models_train_through_the_backend_to_eager_losses(name, caplog):
    """The whole backend (AOT, both halves as runners) on the fake capture. BatchNorm's running
    statistics are static inputs the forward graph writes; where dropout makes the forward a
    skip, the backward is still a graph."""
    nd._dynamo.reset()
    FakeCapture.made.clear()
    nd.manual_seed(0)
    model, data, kwargs = (_bn_cnn if name == "bn-cnn" else MODELS[name])()
    batches = [data() for _ in range(3)]
    twin = copy.deepcopy(model)
    eager = _train(model, model, batches, kwargs)
    backend = functools.partial(cg.cudagraphs_backend, capture_factory=FakeCapture)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        got = _train(twin, nd.compile(twin, backend=backend), batches, kwargs)
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    for (k, b), (_, c) in zip(model.named_buffers(), twin.named_buffers(), strict=True):
        np.testing.assert_allclose(c.numpy(), b.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)
    random = any(isinstance(m, nn.Dropout) or getattr(m, "dropout", None) for m in model.modules())
    assert len(FakeCapture.made) == (1 if random else 2)
    assert all(c.replays >= 18 for c in FakeCapture.made)
    assert ("skipping cudagraphs due to incompatible op (" in caplog.text) == bool(random)


# --- cuBLAS's column-major calls, emulated ---
def _colmajor(base, offset, op, rows, cols, ld):
    """The matrix ``op(X)`` (rows x cols) cuBLAS reads at ``offset`` elements into ``base``."""
    it = base.itemsize
    if op == cublas.OP_N:
        return np.lib.stride_tricks.as_strided(base[offset:], (rows, cols), (it, ld * it))
    return np.lib.stride_tricks.as_strided(base[offset:], (rows, cols), (ld * it, it))


def _emulate(a, b):
    """Row-major ``a @ b`` computed as cuBLAS would from ``operand`` and ``gemm_args``."""
    ops = []
    for x in (a, b):
        op = cublas.operand(x.shape, x.strides, x.itemsize)
        if op is None:
            x = np.ascontiguousarray(x)
            op = cublas.operand(x.shape, x.strides, x.itemsize)
        ops.append((x, op))
    (a, a_op), (b, b_op) = ops
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = a.shape[0] if a.ndim == 3 else 1
    ta, tb, mm, nn_, kk, lda, sa, ldb, sb, ldc, sc = cublas.gemm_args(a_op, b_op, m, n, k)
    out = np.empty(batch * m * n, a.dtype)
    for i in range(batch):
        A = _colmajor(_flatmem(b), _off(b) + i * sa, ta, mm, kk, lda)
        B = _colmajor(_flatmem(a), _off(a) + i * sb, tb, kk, nn_, ldb)
        c = _colmajor(out, i * sc, cublas.OP_N, mm, nn_, ldc)
        c[...] = A @ B
    return out.reshape((batch, m, n) if a.ndim == 3 else (m, n))


def _flatmem(x):
    root = x
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root.ravel(order="K")  # memory order (a view: the root is contiguous)


def _off(x):
    root = _flatmem(x)
    return (x.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // x.itemsize


def _layouts(rng, r, c):
    big = rng.standard_normal((r + 3, c + 5))
    return {"c": rng.standard_normal((r, c)), "f": np.asfortranarray(rng.standard_normal((r, c))),
            "t": rng.standard_normal((c, r)).T, "sliced": big[1:r + 1, 2:c + 2],
            "sliced_t": big.T[2:c + 2, 1:r + 1].T,
            "strided": big[:r, ::2][:, :c] if c <= 3 else None}  # copied: no cuBLAS reading


@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 4, 5), (3, 1, 5), (3, 4, 1), (1, 1, 1)])
def test_gemm_plan_matches_matmul_for_every_layout(m, k, n):
    rng = np.random.default_rng(0)
    for la, a in _layouts(rng, m, k).items():
        for lb, b in _layouts(rng, k, n).items():
            if a is None or b is None:
                continue
            np.testing.assert_allclose(_emulate(a, b), a @ b, rtol=1e-12, err_msg=f"{la} @ {lb}")


def test_batched_gemm_plan_with_broadcast_and_transposed_batches():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 3, 5))
    w = rng.standard_normal((5, 2))
    shared = np.broadcast_to(w, (4, 5, 2))  # batch stride 0
    bt = rng.standard_normal((4, 2, 5)).transpose(0, 2, 1)
    for b in (shared, bt, rng.standard_normal((4, 5, 2))):
        np.testing.assert_allclose(_emulate(a, b), a @ b, rtol=1e-12)
    assert cublas.operand(shared.shape, shared.strides, shared.itemsize)[2] == 0


class _DevArray(np.ndarray):
    """A NumPy array that answers as a CuPy one does where ``cublas.matmul`` asks."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])

    @property
    def device(self):
        return types.SimpleNamespace(id=0)


_CTYPES = {0: ctypes.c_float, 1: ctypes.c_double, 2: ctypes.c_uint16, 4: ctypes.c_float,
           5: ctypes.c_double}
_NP = {0: np.float32, 1: np.float64, 2: np.float16, 4: np.complex64, 5: np.complex128}


class _FakeCublas:
    """cuBLAS's GEMM entry points over raw host addresses, column-major, with its argument
    order: what ``cublas._gemm`` passes reaches the right parameter or the product is wrong."""

    def __init__(self):
        self.calls = []

    @staticmethod
    def _view(ptr, dtype, op, rows, cols, ld):
        extent = (rows - 1) * (ld if op else 1) + (cols - 1) * (1 if op else ld) + 1
        n = extent * np.dtype(dtype).itemsize // ctypes.sizeof(_CTYPES[_code(dtype)])
        raw = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(_CTYPES[_code(dtype)])), (n,))
        flat = raw.view(dtype)
        it = flat.itemsize
        strides = (ld * it, it) if op == cublas.OP_T else (it, ld * it)
        return np.lib.stride_tricks.as_strided(flat, (rows, cols), strides)

    def _run(self, name, dtype, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc,
             sc, batch):
        self.calls.append(name)
        a_, b_ = np.array(alpha._obj[:] if hasattr(alpha._obj, "__len__") else alpha._obj.value), \
            np.array(beta._obj[:] if hasattr(beta._obj, "__len__") else beta._obj.value)
        scal = (lambda v: complex(*v)) if a_.ndim else (lambda v: float(v))
        it = np.dtype(dtype).itemsize
        for i in range(batch):
            x = self._view(A + i * sa * it, dtype, ta, m, k, lda)
            y = self._view(B + i * sb * it, dtype, tb, k, n, ldb)
            c = self._view(C + i * sc * it, dtype, cublas.OP_N, m, n, ldc)
            assert scal(b_) == 0
            c[...] = scal(a_) * (x @ y)
        return 0

    def cublasSgemm_v2(self, h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
        return self._run("Sgemm", np.float32, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta,
                         C, ldc, 0, 1)

    def cublasDgemm_v2(self, h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
        return self._run("Dgemm", np.float64, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta,
                         C, ldc, 0, 1)

    def cublasGemmEx(self, h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc,
                     compute, algo):
        assert at == bt == ct
        return self._run("GemmEx", _NP[at], ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta,
                         C, ldc, 0, 1)

    def cublasGemmStridedBatchedEx(self, h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb,
                                   sb, beta, C, ct, ldc, sc, batch, compute, algo):
        assert at == bt == ct
        return self._run("StridedBatchedEx", _NP[at], ta, tb, m, n, k, alpha, A, lda, sa, B, ldb,
                         sb, beta, C, ldc, sc, batch)


def _code(dtype):
    return {np.dtype(v): k for k, v in _NP.items()}[np.dtype(dtype)]


@pytest.fixture
def fake_cupy(monkeypatch):
    """``cublas.matmul`` as inside a capture, its CuPy and cuBLAS NumPy stand-ins."""
    dev = lambda a: a.view(_DevArray)  # noqa: E731
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=77)),
        empty=lambda shape, dtype: dev(np.empty(shape, dtype)),
        ascontiguousarray=lambda a: dev(np.ascontiguousarray(a)),
        broadcast_to=lambda a, shape: np.broadcast_to(a, shape, subok=True),
        result_type=np.result_type, matmul=lambda a, b: pytest.fail("CuPy's matmul called"))
    lib = _FakeCublas()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(cublas, "_lib", [lib, "fake"])
    monkeypatch.setattr(cublas._local, "stream", 77, raising=False)
    monkeypatch.setattr(cublas._local, "handles", {0: "handle"}, raising=False)
    return dev, lib


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.complex64,
                                   np.complex128])
def test_cublas_matmul_through_its_entry_points(fake_cupy, dtype):
    dev, lib = fake_cupy
    rng = np.random.default_rng(0)

    def r(*shape):
        x = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal(shape)
        return x.astype(dtype)

    pairs = [(r(5, 7), r(7, 3)), (r(7, 5).T, r(3, 7).T), (r(6, 9)[1:, 2:], r(7, 3)),
             (r(7), r(7, 3)), (r(5, 7), r(7)), (r(7), r(7)), (r(2, 5, 7), r(7, 3)),
             (r(2, 5, 7), r(2, 7, 3)), (r(5, 7), r(2, 7, 3)), (r(3, 1, 5, 7), r(2, 7, 3)),
             (r(2, 7, 5).transpose(0, 2, 1), r(2, 3, 7).transpose(0, 2, 1)),
             (r(4, 6)[:, ::2], r(3, 2))]
    tol = 2e-2 if dtype == np.float16 else 1e-5
    for a, b in pairs:
        got = cublas.matmul(dev(a), dev(b))
        want = np.matmul(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
                         b.astype(np.complex128 if b.dtype.kind == "c" else np.float64))
        assert got.shape == want.shape, (a.shape, b.shape)
        np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)
    first = {np.float32: "Sgemm", np.float64: "Dgemm"}.get(dtype, "GemmEx")
    assert lib.calls[0] == first and "StridedBatchedEx" in lib.calls
    with pytest.raises(ValueError):
        cublas.matmul(dev(r(5, 7)), dev(r(6, 3)))


def test_operand_refuses_layouts_cublas_cannot_read():
    x = np.arange(24.0).reshape(4, 6)[:, ::2]  # a column step of 2
    assert cublas.operand(x.shape, x.strides, x.itemsize) is None
    y = np.broadcast_to(np.arange(3.0), (4, 3)).T  # a zero stride inside the matrix
    assert cublas.operand(y.shape, y.strides, y.itemsize) is None


def test_numpy_products_ignore_the_capture_flag():
    cublas.capturing[0] += 1  # a capture on another thread: NumPy arrays never look further
    try:
        a, b = nd.randn(3, 4), nd.randn(2, 4, 5)
        np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-6)
        np.testing.assert_allclose(nd.mm(a, b[0]).numpy(), a.numpy() @ b.numpy()[0], rtol=1e-6)
    finally:
        cublas.capturing[0] -= 1


# --- modes ---
def test_mode_options_are_pytorchs():
    assert list_mode_options("default") == {}
    assert list_mode_options("reduce-overhead") == {"triton.cudagraphs": True}
    assert list_mode_options("max-autotune") == {"max_autotune": True, "triton.cudagraphs": True}
    assert list_mode_options("max-autotune-no-cudagraphs") == {"max_autotune": True}
    assert set(list_mode_options()) == {"default", "reduce-overhead", "max-autotune",
                                        "max-autotune-no-cudagraphs"}


def test_unknown_mode_and_mode_with_options_raise():
    with pytest.raises(RuntimeError, match=r"^Unrecognized mode=fast, should be one of: default, "
                       r"reduce-overhead, max-autotune-no-cudagraphs, max-autotune$"):
        nd.compile(lambda x: x, mode="fast")
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        nd.compile(lambda x: x, mode="max-autotune", options={"max_autotune": True})


@pytest.mark.parametrize("mode,options,want", [
    (None, None, None), ("default", None, None),
    ("reduce-overhead", None, {"triton.cudagraphs": True}),
    ("max-autotune", None, {"max_autotune": True, "triton.cudagraphs": True}),
    ("max-autotune-no-cudagraphs", None, {"max_autotune": True}),
    (None, {"cpp_fusion": False}, {"cpp_fusion": False}),
])
def test_modes_reach_the_inductor_backend_as_options(monkeypatch, mode, options, want):
    from ndgrad.compiler import inductor

    seen = []

    def fake(gm, example_inputs, options=None):
        seen.append(options)
        return gm.forward

    monkeypatch.setattr(inductor, "inductor_backend", fake)
    nd._dynamo.reset()
    f = nd.compile(lambda x: (x * 2).sum(), mode=mode, options=options)
    assert f(nd.ones(3)).item() == 6.0
    assert seen == [want]
    seen.clear()
    m = nn.Linear(2, 2)
    m.compile(mode=mode, options=options)
    m(nd.ones(1, 2))
    assert seen == [want]


def test_other_backends_receive_mode_and_options_as_keywords():
    seen = []

    def custom(gm, example_inputs, **kwargs):
        seen.append(kwargs)
        return gm.forward

    nd._dynamo.reset()
    for kw in ({}, {"mode": "default"}, {"mode": "reduce-overhead"}, {"options": {"a": 1}}):
        nd.compile(lambda x: x + 1, backend=custom, **kw)(nd.ones(2))
    assert seen == [{}, {}, {"mode": "reduce-overhead"}, {"options": {"a": 1}}]


# --- on a GPU ---
gpu = pytest.mark.skipif(not nd.cuda.is_available(), reason="needs CuPy and a GPU")


def _mlp_step(model, loss_fn):
    opt = nd.optim.SGD(model.parameters(), lr=0.05)

    def step(x, onehot):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), onehot)
        loss.backward()
        opt.step()
        return loss

    return step


def _nll_onehot(z, onehot):  # no host read: CUDA graphs can hold it
    return -(F.log_softmax(z, 1) * onehot).sum() / z.shape[0]


def _runners(compiled):
    cf = compiled._compiled
    for e in cf.entries:
        for entry in e.run._aot.cache.values():
            yield from (r for r in (entry.fw, entry.bw) if isinstance(r, cg.CUDAGraphRunner))


@gpu
@pytest.mark.parametrize("loss", ["nll_onehot", "cross_entropy"])
def test_gpu_mlp_step_replays_to_eager_losses(loss):
    nd._dynamo.reset()
    nd.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 10)).to("cuda")
    twin = copy.deepcopy(model)
    x = nd.randn(16, 32, device="cuda")
    y = nd.randint(0, 10, (16,), device="cuda")
    onehot = F.one_hot(y, 10).float()
    if loss == "nll_onehot":
        fn, target = _nll_onehot, onehot
    else:
        fn, target = F.cross_entropy, y
    eager = _mlp_step(model, fn)
    compiled = nd.compile(twin, backend="cudagraphs")
    graphed = _mlp_step(compiled, fn)
    want = [eager(x, target).item() for _ in range(20)]
    got = [graphed(x, target).item() for _ in range(20)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    runners = list(_runners(compiled))  # the loss is outside the compiled model
    assert len(runners) == 2
    assert all(r.state == "replay" for r in runners), [(r.state, r.skipped) for r in runners]


@gpu
@pytest.mark.parametrize("loss", ["nll_onehot", "cross_entropy"])
def test_gpu_whole_step_graph_to_eager_losses(loss):
    """The whole step (zero_grad, forward, loss, backward, SGD) captured by ``cudagraphify``, as
    benchmarks/gpu.py times it."""
    nd.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to("cuda")
    twin = copy.deepcopy(model)
    x = nd.randn(16, 32, device="cuda")
    y = nd.randint(0, 10, (16,), device="cuda")
    fn, target = (_nll_onehot, F.one_hot(y, 10).float()) if loss == "nll_onehot" else \
        (F.cross_entropy, y)
    eager = _mlp_step(model, fn)
    step = _mlp_step(twin, fn)

    def whole(args):
        return step(x, target)

    whole._boxed_call = True
    runner = cg.cudagraphify(whole, [], mutated_inputs=(), static_input_idxs=())
    want = [eager(x, target).item() for _ in range(20)]
    got = [runner([]).item() for _ in range(20)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    if loss == "nll_onehot":  # cross_entropy's target checks read the host (loss.py _targets)
        assert runner.state == "replay", runner.skipped


@gpu
def test_gpu_mutated_input_and_distinct_outputs():
    def f(x, w):
        x.mul_(2)
        return (x @ w).relu()

    w = nd.randn(8, 8, device="cuda")
    gm = capture(f, nd.randn(4, 8, device="cuda"), w)
    runner = cg.cudagraphify(make_boxed_func(gm.forward), [nd.randn(4, 8, device="cuda"), w],
                             cg.mutated_input_idxs(gm), (1,))
    outs = []
    for _ in range(4):
        x = nd.randn(4, 8, device="cuda")
        x0 = x.cpu().numpy().copy()
        out = runner([x, w])
        np.testing.assert_allclose(x.cpu().numpy(), 2 * x0, rtol=1e-6)
        want = np.maximum((2 * x0) @ w.cpu().numpy(), 0)
        np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-5, atol=1e-5)
        outs.append((out, want))
    assert runner.state == "replay", runner.skipped
    for out, want in outs:
        np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-5, atol=1e-5)
    assert len({o._data.data.ptr for o, _ in outs}) == len(outs)


@gpu
def test_gpu_cublas_products_under_capture_match_cupy():
    import cupy

    rng = np.random.default_rng(0)
    cases = [((5, 7), (7, 3)), ((7,), (7, 3)), ((5, 7), (7,)), ((2, 5, 7), (7, 3)),
             ((2, 5, 7), (2, 7, 3)), ((5, 7), (2, 7, 3)), ((3, 1, 5, 7), (2, 7, 3))]
    arrays = [(cupy.asarray(rng.standard_normal(a).astype(np.float32)),
               cupy.asarray(rng.standard_normal(b).astype(np.float32))) for a, b in cases]
    arrays.append((arrays[0][0].T.copy().T, arrays[0][1]))  # a column-major operand
    arrays.append((arrays[0][0].astype(np.float64), arrays[0][1].astype(np.float64)))

    def products(_args):
        return [nd.matmul(nd.Tensor._make(a, None, 0, None), nd.Tensor._make(b, None, 0, None))
                for a, b in arrays]

    products._boxed_call = True
    runner = cg.cudagraphify(products, [], (), (), names=None)
    for _ in range(3):
        got = runner([])
    assert runner.state == "replay", runner.skipped
    for (a, b), g in zip(arrays, got, strict=True):
        np.testing.assert_allclose(cupy.asnumpy(g._data), cupy.asnumpy(cupy.matmul(a, b)),
                                   rtol=1e-5, atol=1e-5)
