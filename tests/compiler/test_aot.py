"""AOT autograd (issue 15, item 5): one joint capture of forward and backward, the two
partitioners, the compiled pair as one custom Function (saved-tensor hooks, checkpointing and
random ops behave as eagerly), parameters lifted to inputs, PyTorch's public names, and every
op-table sample through the ``aot_eager`` backend."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import ndgrad as nd
import ndgrad.nn.functional as F
from ndgrad import nn
from ndgrad.compiler import capture
from ndgrad.compiler.aot import aot_eager_backend, aot_function, boxed_nop, make_boxed_func
from ndgrad.compiler.partitioners import default_partition, min_cut_rematerialization_partition

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
from test_generic import CASES, _convert, _nd_make  # noqa: E402

PARTITIONERS = [default_partition, min_cut_rematerialization_partition]


def _pointwise(x, w):
    h = (x * 2).sin().cos().exp() * x + x.tanh()
    return (h @ w).relu().sum()


class Recorder:
    """A forward and a backward compiler that keep their graphs and count the calls."""

    def __init__(self):
        self.fw = self.bw = None
        self.fw_calls = self.bw_calls = 0

    def fw_compiler(self, gm, example_inputs):
        self.fw = gm

        def run(args):
            self.fw_calls += 1
            return gm(*args)

        run._boxed_call = True
        return run

    def bw_compiler(self, gm, example_inputs):
        self.bw = gm

        def run(*args):  # unboxed: called with the values
            self.bw_calls += 1
            return gm(*args)

        return run


def _inputs(seed=0):
    nd.manual_seed(seed)
    return nd.randn(4, 5, requires_grad=True), nd.randn(5, 3, requires_grad=True)


def _eager_grads(fn, *args):
    out = fn(*args)
    return out, nd.autograd.grad(out, args)


@pytest.mark.parametrize("partition", PARTITIONERS, ids=lambda p: p.__name__)
def test_forward_returns_saved_values_and_backward_runs_once(partition):
    r = Recorder()
    f = aot_function(_pointwise, r.fw_compiler, r.bw_compiler, partition_fn=partition)
    x, w = _inputs()
    want, want_grads = _eager_grads(_pointwise, x, w)
    for k in range(2):
        out = f(x, w)
        np.testing.assert_allclose(out.item(), want.item(), rtol=1e-6)
        grads = nd.autograd.grad(out, (x, w))
        for g, e in zip(grads, want_grads, strict=True):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=1e-7)
        assert (r.fw_calls, r.bw_calls) == (k + 1, k + 1)
    n_saved = r.fw.meta["num_saved"]
    fw_out = list(r.fw.graph.nodes)[-1].args[0]
    assert len(fw_out) == 1 + n_saved  # the output, then the saved values
    bw_inputs = [n.name for n in r.bw.graph.nodes if n.op == "placeholder"]
    assert bw_inputs == [n.name for n in fw_out[1:]] + ["tangents_1"]
    assert not any(n.name.startswith("tangents") for n in r.fw.graph.nodes)


def test_min_cut_saves_fewer_values_than_default():
    saved = {}
    for p in PARTITIONERS:
        r = Recorder()
        f = aot_function(_pointwise, r.fw_compiler, r.bw_compiler, partition_fn=p)
        f(*_inputs()).backward()
        saved[p.__name__] = r.fw.meta["num_saved"]
    assert saved["min_cut_rematerialization_partition"] < saved["default_partition"], saved
    # The matmul's output (not recomputable) is what min-cut keeps beside the inputs.
    r = Recorder()
    aot_function(_pointwise, r.fw_compiler, r.bw_compiler,
                 partition_fn=min_cut_rematerialization_partition)(*_inputs()).backward()
    targets = {str(n.target) for n in r.bw.graph.nodes if n.op == "call_function"}
    assert "aten.sin.default" in targets  # recomputed in the backward
    assert "aten.mm.default" not in targets and "aten.matmul.default" in targets


def test_saved_tensor_hooks_see_the_compiled_regions_saved_values():
    r = Recorder()
    f = aot_function(_pointwise, r.fw_compiler, r.bw_compiler,
                     partition_fn=min_cut_rematerialization_partition)
    x, w = _inputs()
    packed, unpacked = [], []

    def pack(t):
        packed.append(t.shape)
        return t.clone()

    def unpack(t):
        unpacked.append(t.shape)
        return t

    with nd.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = f(x, w)  # compiles inside: the capture's own saves do not reach the hooks
    n = r.fw.meta["num_saved"]
    assert len(packed) == n and not unpacked
    gx, gw = nd.autograd.grad(out, (x, w))
    assert len(unpacked) == n
    _, (ex, ew) = _eager_grads(_pointwise, x, w)
    np.testing.assert_allclose(gx.numpy(), ex.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gw.numpy(), ew.numpy(), rtol=1e-6, atol=1e-7)


def test_checkpoint_and_save_on_cpu_around_a_compiled_region():
    from ndgrad.utils.checkpoint import checkpoint

    f = aot_function(_pointwise, boxed_nop, partition_fn=min_cut_rematerialization_partition)
    x, w = _inputs()
    _, want = _eager_grads(_pointwise, x, w)
    out = checkpoint(f, x, w, use_reentrant=False)
    for g, e in zip(nd.autograd.grad(out, (x, w)), want, strict=True):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=1e-7)
    with nd.autograd.graph.save_on_cpu():
        out = f(x, w)
    for g, e in zip(nd.autograd.grad(out, (x, w)), want, strict=True):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("partition", PARTITIONERS, ids=lambda p: p.__name__)
def test_dropout_matches_eager_and_its_mask_is_saved_not_redrawn(partition):
    def fn(x):
        return (F.dropout(x.sin(), 0.5, training=True) * x).exp().sum()

    r = Recorder()
    f = aot_function(fn, r.fw_compiler, r.bw_compiler, partition_fn=partition)
    x = nd.randn(6, 7, requires_grad=True)
    for seed in (0, 1):
        nd.manual_seed(seed)
        want, (gwant,) = _eager_grads(fn, x)
        nd.manual_seed(seed)
        out = f(x)
        (g,) = nd.autograd.grad(out, (x,))
        np.testing.assert_allclose(out.item(), want.item(), rtol=1e-6)
        np.testing.assert_allclose(g.numpy(), gwant.numpy(), rtol=1e-6)
    random = [n for n in r.fw.graph.nodes if n.op == "call_function"
              and getattr(n.target, "extra", {}).get("nondeterministic")]
    assert random, r.fw.code
    assert not any(n.op == "call_function" and getattr(n.target, "extra", {}).get(
        "nondeterministic") for n in r.bw.graph.nodes), r.bw.code


def test_parameters_are_lifted_and_get_gradients():
    nd.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2))
    x = nd.randn(3, 5)
    r = Recorder()
    from ndgrad._functorch.aot_autograd import aot_module

    f = aot_module(model, r.fw_compiler, r.bw_compiler)
    f(x).sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    assert all(n.op != "get_attr" for n in r.fw.graph.nodes), r.fw.code
    model.zero_grad()
    model(x).sum().backward()
    for g, p in zip(got, model.parameters(), strict=True):
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_public_names_and_backends():
    from ndgrad._dynamo.backends.common import aot_autograd
    from ndgrad._functorch import aot_autograd as aa
    from ndgrad._functorch import partitioners as parts

    assert parts.min_cut_rematerialization_partition is min_cut_rematerialization_partition
    assert aa.make_boxed_func is make_boxed_func
    boxed = make_boxed_func(lambda a, b: a + b)
    assert boxed._boxed_call and boxed([1, 2]) == 3
    compiled_with = []

    def fw(gm, example_inputs):
        compiled_with.append(len(example_inputs))
        return aa.make_boxed_compiler(lambda g, ex: g)(gm, example_inputs)

    backend = aot_autograd(fw_compiler=fw, partition_fn=parts.default_partition)
    x, w = _inputs()
    gm = capture(_pointwise, x, w)
    for be in (backend, aot_eager_backend):
        run = be(gm, [x, w])
        out = run(x, w)
        _, want = _eager_grads(_pointwise, x, w)
        for g, e in zip(nd.autograd.grad(out, (x, w)), want, strict=True):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=1e-7)
    assert compiled_with[0] == 2


def test_inference_under_no_grad_compiles_one_graph():
    r = Recorder()
    f = aot_function(_pointwise, r.fw_compiler, r.bw_compiler)
    x, w = _inputs()
    with nd.no_grad():
        out = f(x, w)
    assert not out.requires_grad and r.bw is None
    assert not any(n.name.startswith("tangents") for n in r.fw.graph.nodes)
    np.testing.assert_allclose(out.item(), _pointwise(x, w).item(), rtol=1e-6)


# --- every op-table sample through a backend ---
def check_backend_on_sample(backend, rec, sample, compile_fn=None):
    """The sample's eager values and gradients, and the backend's on the captured graph (or
    ``compile_fn(fn, args)``'s, e.g. ``ndgrad.compile`` with a backend)."""
    args, kwargs, leaves = _convert(rec, sample, _nd_make)

    def fn(*a):
        return rec.call(*a, **kwargs)

    def run(f):
        nd.manual_seed(0)
        out = f(*args)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        diff = [o for o in outs if isinstance(o, nd.Tensor) and o.requires_grad]
        grads = None
        if diff and leaves:
            ws = [nd.Tensor._make(np.random.RandomState(1).standard_normal(o.shape)
                                  .astype(o._data.dtype), None, 0, None) for o in diff]
            grads = nd.autograd.grad(diff, leaves, ws, allow_unused=True)
        return outs, grads

    try:
        want = run(fn)
    except (RuntimeError, TypeError, ValueError, IndexError) as e:
        pytest.skip(f"eager refuses the sample: {e}")
    nd.manual_seed(0)
    compiled = compile_fn(fn, args) if compile_fn is not None else backend(capture(fn, *args), list(args))
    got = run(compiled)
    for i, (a, b) in enumerate(zip(got[0], want[0], strict=True)):
        if isinstance(b, nd.Tensor):
            assert a.dtype == b.dtype and a.shape == b.shape, f"output {i}"
            np.testing.assert_allclose(a._data, b._data, rtol=1e-6, atol=1e-9,
                                       err_msg=f"output {i}")
            assert a.requires_grad == b.requires_grad, f"output {i}"
        else:
            assert a == b or (a != a and b != b), f"output {i}"
    if want[1] is not None:
        for i, (a, b) in enumerate(zip(got[1], want[1], strict=True)):
            if b is None:
                assert a is None or not a.abs().sum().item(), f"grad {i}"
            else:
                np.testing.assert_allclose(a._data, b._data, rtol=1e-6, atol=1e-9,
                                           err_msg=f"grad {i}")


@pytest.mark.parametrize("rec,sample", CASES)
def test_op_through_aot_eager(rec, sample):
    check_backend_on_sample(aot_eager_backend, rec, sample)


@pytest.mark.parametrize("compiler", ["boxed_nop", "inductor"])
def test_batch_norm_running_stats_update_once_per_call(compiler):
    """Buffers written in the forward (copied back by the forward graph) are updated once per
    compiled call, as eagerly; the compiling call's own capture run leaves no trace."""
    from ndgrad._functorch.aot_autograd import aot_module
    from ndgrad.compiler.inductor import compile_fx_inner

    comp = boxed_nop if compiler == "boxed_nop" else compile_fx_inner
    nd.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    ref = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    ref.load_state_dict(m.state_dict())
    f = aot_module(m, comp)
    x = nd.randn(5, 4)
    for _ in range(2):
        f(x).pow(2).sum().backward()
        ref(x).pow(2).sum().backward()
    assert m[1].num_batches_tracked.item() == ref[1].num_batches_tracked.item() == 2
    np.testing.assert_allclose(m[1].running_mean.numpy(), ref[1].running_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(m[1].running_var.numpy(), ref[1].running_var.numpy(), rtol=1e-6)
    for p, q in zip(m.parameters(), ref.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)


# --- private saved values as bare arrays (inductor) ---
def _inductor_aot(fn, bw_compiler=None):
    from ndgrad.compiler.inductor import compile_fx_inner

    def comp(gm, example_inputs):
        return compile_fx_inner(gm, example_inputs, options={"cpp_fusion": False})

    return aot_function(fn, comp, bw_compiler or comp, partition_fn=default_partition)


def _entry(f):
    (entry,) = f.cache.values()
    return entry


def test_private_saved_values_travel_as_bare_arrays():
    f = _inductor_aot(_pointwise)
    x, w = _inputs()
    out = f(x, w)
    entry = _entry(f)
    names = entry.fw_gm.meta["saved_names"]
    bare = [names[i] for i in entry.bare_saved]
    # intermediates only: never an input (x, w) or a view of one
    assert bare and not any(n.startswith("primals") for n in bare)
    node = out.grad_fn
    assert len(node._saved) == entry.num_saved - len(entry.bare_saved)  # only inputs saved
    gx, gw = nd.autograd.grad(out, (x, w))
    assert entry.bw_takes_arrays  # (compiled at the first backward)
    _, (ex, ew) = _eager_grads(_pointwise, x, w)
    np.testing.assert_allclose(gx.numpy(), ex.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gw.numpy(), ew.numpy(), rtol=1e-6, atol=1e-7)
    assert node.saved_layout is None  # released with the saved tensors
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        nd.autograd.grad(out, (x, w))


def test_bare_saved_values_with_retain_graph_and_a_tensor_backward_compiler():
    r = Recorder()
    f = _inductor_aot(_pointwise, bw_compiler=r.bw_compiler)  # takes Tensors only
    x, w = _inputs()
    out = f(x, w)
    g1 = nd.autograd.grad(out, (x, w), retain_graph=True)
    assert _entry(f).bare_saved and not _entry(f).bw_takes_arrays
    g2 = nd.autograd.grad(out, (x, w))  # the bare arrays were kept for the second one
    _, want = _eager_grads(_pointwise, x, w)
    for a, b, c in zip(g1, g2, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_allclose(a.numpy(), c.numpy(), rtol=1e-6, atol=1e-7)
    assert r.bw_calls == 2


def test_saved_tensor_hooks_see_bare_saved_values_as_tensors():
    f = _inductor_aot(_pointwise)
    x, w = _inputs()
    f(x, w)  # compiled outside the hooks
    entry = _entry(f)
    packed, unpacked = [], []

    def pack(t):
        assert isinstance(t, nd.Tensor)
        packed.append(t)
        return t.clone()

    def unpack(t):
        unpacked.append(t)
        return t

    with nd.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = f(x, w)
    assert len(packed) == entry.num_saved  # every saved value, bare ones included
    gx, gw = nd.autograd.grad(out, (x, w))
    assert len(unpacked) == entry.num_saved
    _, (ex, ew) = _eager_grads(_pointwise, x, w)
    np.testing.assert_allclose(gx.numpy(), ex.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gw.numpy(), ew.numpy(), rtol=1e-6, atol=1e-7)
