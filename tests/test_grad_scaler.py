"""``GradScaler`` (ndgrad/amp/grad_scaler.py) against torch's CPU GradScaler: the scale's schedule
(skipped steps, backoff, growth), unscaling, errors, state dicts, the disabled pass-through and
training that ends where unscaled training does. Scenarios are functions of the framework module.
"""

from __future__ import annotations

import doctest
import pickle
import warnings
from typing import ClassVar

import numpy as np
import pytest

import ndgrad
from ndgrad.amp import grad_scaler as grad_scaler_module
from ndgrad.amp.grad_scaler import GradScaler, OptState

RNG = np.random.default_rng(0)
W1, B1 = RNG.standard_normal((3, 4)), RNG.standard_normal(3)
W2, B2 = RNG.standard_normal((1, 3)), RNG.standard_normal(1)
X, Y = RNG.standard_normal((8, 4)), RNG.standard_normal((8, 1))


def _scaler_cls(T):
    return GradScaler if T is ndgrad else T.amp.GradScaler


def _params(T, dtype="float32"):
    return [T.tensor(a.astype(dtype), requires_grad=True) for a in (W1, B1, W2, B2)]


def _loss(T, params, dtype="float32"):
    w1, b1, w2, b2 = params
    x, y = T.tensor(X.astype(dtype)), T.tensor(Y.astype(dtype))
    out = T.tanh(x @ w1.T + b1) @ w2.T + b2
    return ((out - y) ** 2).mean()


def _setup(T, dtype="float32", opt="SGD", **kw):
    params = _params(T, dtype)
    optimizer = getattr(T.optim, opt)(params, lr=0.05)
    return _scaler_cls(T)("cpu", **kw), params, optimizer


def _poison(T, params, value):
    with T.no_grad():
        params[0].grad[1, 2] = value


def _iteration(T, scaler, params, opt, poison=None, dtype="float32"):
    opt.zero_grad()
    scaler.scale(_loss(T, params, dtype)).backward()
    if poison is not None:
        _poison(T, params, poison)
    ret = scaler.step(opt)
    scaler.update()
    return ret


# --- the scale's schedule ---
POISONS = [None, float("inf"), None, None, None, None, float("nan"), None, float("-inf"),
           float("-inf"), None, None, None, None]


def test_schedule_with_skipped_steps(ref):
    """inf and NaN grads skip the step and back off; clean runs grow after growth_interval;
    factors that are not powers of two round as PyTorch's (float64 product, float32 store)."""

    def run(T):
        scaler, params, opt = _setup(T, init_scale=3.0, growth_factor=1.1, backoff_factor=0.3,
                                     growth_interval=3)
        trace = []
        for poison in POISONS:
            _iteration(T, scaler, params, opt, poison)
            trace.append((scaler.get_scale(), scaler.state_dict()["_growth_tracker"],
                          [p.detach().clone() for p in params]))
        return trace

    trace = ref.same(run, rtol=1e-6, atol=1e-7)
    expected, scale, count = [], np.float32(3.0), 0
    for poison in POISONS:
        count = 0 if poison is not None else count + 1
        if poison is not None or count == 3:
            scale = np.float32(float(scale) * (0.3 if poison is not None else 1.1))
            count = 0
        expected.append((float(scale), count))
    assert [t[:2] for t in trace] == expected  # exactly: float32 products would differ here


def test_skipped_step_leaves_params_and_unscales_all_grads(ref):
    def run(T):
        scaler, params, opt = _setup(T, init_scale=2.0**10)
        before = [p.detach().clone() for p in params]
        opt.zero_grad()
        scaler.scale(_loss(T, params)).backward()
        _poison(T, params, float("nan"))
        ret = scaler.step(opt)
        found = scaler._found_inf_per_device(opt)
        assert [str(d) for d in found] == ["cpu"]
        return ret, [p.grad for p in params], before, [p.detach() for p in params], \
            [f.item() for f in found.values()]

    ret, _, before, after, found = ref.same(run, rtol=1e-5, atol=1e-6)  # float32 backward
    assert ret is None and found == [1.0]
    for b, a in zip(before, after, strict=True):
        assert np.array_equal(b.numpy(), a.numpy())


@pytest.mark.parametrize("interval", [1, 2, 5])
def test_growth_after_interval(ref, interval):
    def run(T):
        scaler, params, opt = _setup(T, init_scale=4.0, growth_interval=interval)
        return [(_iteration(T, scaler, params, opt), scaler.get_scale(),
                 scaler._get_growth_tracker()) for _ in range(7)]

    trace = ref.same(run)
    assert trace[-1][1] == 4.0 * 2 ** (7 // interval)


def test_growth_that_overflows_float32_is_dropped(ref):
    def run(T):
        scaler = _scaler_cls(T)("cpu", init_scale=3e38, growth_interval=1)
        w = T.ones(1, requires_grad=True)
        opt = T.optim.SGD([w], lr=1.0)
        scaler.scale(w.sum() * 1e-6).backward()  # grads stay finite: a clean step
        scaler.step(opt)
        scaler.update()
        return scaler.get_scale(), scaler._get_growth_tracker()

    assert ref.same(run) == (float(np.float32(3e38)), 0)


def test_lowering_interval_below_the_count_stops_growth(ref):
    """The count must reach growth_interval exactly, as in PyTorch."""

    def run(T):
        scaler, params, opt = _setup(T, init_scale=8.0, growth_interval=10)
        for _ in range(5):
            _iteration(T, scaler, params, opt)
        scaler.set_growth_interval(3)
        for _ in range(5):
            _iteration(T, scaler, params, opt)
        return scaler.get_scale(), scaler._get_growth_tracker(), scaler.get_growth_interval()

    assert ref.same(run) == (8.0, 10, 3)


def test_two_optimizers_one_with_inf(ref):
    """Only the optimizer whose grads overflowed skips; update backs off once."""

    def run(T):
        scaler = _scaler_cls(T)("cpu", init_scale=64.0)
        params = _params(T)
        opt_a, opt_b = T.optim.SGD(params[:2], lr=0.1), T.optim.Adam(params[2:], lr=0.1)
        scaler.scale(_loss(T, params)).backward()
        _poison(T, params, float("inf"))
        rets = scaler.step(opt_a), scaler.step(opt_b)
        scaler.update()
        return rets, scaler.get_scale(), [p.detach() for p in params]

    rets, scale, _ = ref.same(run, rtol=1e-6)
    assert rets == (None, None) and scale == 32.0


# --- training ---
@pytest.mark.parametrize("opt", ["SGD", "Adam"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_training_equals_unscaled(ref, opt, dtype):
    """Scaled training (with growth and one skipped step) ends where unscaled training with the
    skipped step left out does, and where torch's scaled training does."""

    def run(T):
        scaler, params, optimizer = _setup(T, dtype, opt, init_scale=2.0**12, growth_interval=4)
        plain = _params(T, dtype)
        plain_opt = getattr(T.optim, opt)(plain, lr=0.05)
        for i in range(12):
            skipped = i == 5
            _iteration(T, scaler, params, optimizer, float("inf") if skipped else None, dtype)
            if not skipped:
                plain_opt.zero_grad()
                _loss(T, plain, dtype).backward()
                plain_opt.step()
        for p, q in zip(params, plain, strict=True):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                       atol=1e-6 if dtype == "float32" else 1e-12)
        return [p.detach() for p in params], scaler.get_scale()

    _, scale = ref.same(run, rtol=1e-5, atol=1e-6)
    assert scale == 2.0**13  # grown at steps 3 and 9, backed off at step 5


def test_unscale_then_clip_then_step(ref):
    def run(T):
        scaler, params, opt = _setup(T, init_scale=2.0**8)
        scaler.scale(_loss(T, params)).backward()
        scaler.unscale_(opt)
        grads = [p.grad.clone() for p in params]
        norm = T.nn.utils.clip_grad_norm_(params, 0.1)
        ret = scaler.step(opt)  # does not unscale again
        scaler.update()
        return ret, grads, norm, [p.detach() for p in params]

    ref.same(run, rtol=1e-5, atol=1e-6)


def test_step_returns_optimizer_result(ref):
    """A closure passed positionally reaches optimizer.step (only the keyword is refused)."""

    def run(T):
        scaler, params, opt = _setup(T)
        scaler.scale(_loss(T, params)).backward()
        return scaler.step(opt, lambda: 5.0)

    assert ref.same(run) == 5.0


# --- scale() ---
def test_scale_nested_outputs_and_dtypes(ref):
    def run(T):
        scaler = _scaler_cls(T)("cpu", init_scale=3.0)
        nested = scaler.scale([T.ones(2), (T.ones(1, dtype=T.float64), [T.ones(1) * 2])])
        assert type(nested) is list and type(nested[1]) is tuple and type(nested[1][1]) is list
        lazy = scaler.scale(iter([T.ones(1)]))
        assert type(lazy) is map
        dtypes = [scaler.scale(T.ones(1, dtype=dt)).dtype
                  for dt in (T.float16, T.bfloat16, T.float64, T.int64)]
        return nested, list(lazy), [str(d).split(".")[-1] for d in dtypes], scaler._scale, \
            scaler._growth_tracker

    ref.same(run)


def test_scale_of_non_tensor_raises(ref):
    msg = "outputs must be a Tensor or an iterable of Tensors"
    ref.raises(lambda T: _scaler_cls(T)("cpu").scale(3), ValueError, msg)
    ref.raises(lambda T: _scaler_cls(T)("cpu").scale([T.ones(1), 3]), ValueError, msg)


def test_scale_lives_on_the_outputs_device(device):
    """The scale tensor is made on the first output's device; unscaling keeps one found-inf flag
    per device of the grads."""
    scaler = GradScaler(device, init_scale=16.0)
    w_dev = ndgrad.ones(2, device=device, requires_grad=True)
    w_cpu = ndgrad.ones(2, requires_grad=True)
    loss = scaler.scale(w_dev.sum())
    assert scaler._scale.device == w_dev.device and scaler._scale.dtype == ndgrad.float32
    loss.backward()
    w_cpu.grad = ndgrad.full((2,), 32.0)
    opt = ndgrad.optim.SGD([w_dev, w_cpu], lr=0.5)
    scaler.unscale_(opt)
    assert sorted(d.type for d in scaler._found_inf_per_device(opt)) == sorted([device, "cpu"])
    assert w_dev.grad.tolist() == [1.0, 1.0] and w_cpu.grad.tolist() == [2.0, 2.0]
    scaler.step(opt)
    scaler.update(ndgrad.tensor(4.0, device=device))
    assert scaler.get_scale() == 4.0 and w_cpu.tolist() == [0.0, 0.0]


# --- update(new_scale) ---
def test_update_with_new_scale(ref):
    def run(T):
        scaler, params, _ = _setup(T)
        scaler.scale(_loss(T, params))
        scaler.update(8.5)
        a = scaler.get_scale()
        src = T.tensor(5, dtype=T.int64)
        scaler.update(src)
        src.fill_(7)  # copied, not kept
        return a, scaler.get_scale(), scaler._scale

    assert ref.same(run)[:2] == (8.5, 5.0)


@pytest.mark.parametrize("bad", ["two", "grad", "device"])
def test_update_rejects_bad_new_scale(ref, bad):
    def run(T):
        # The device check compares with the scaler's own device string ("xpu" here), not the
        # scale tensor's device (cpu).
        scaler = _scaler_cls(T)("xpu" if bad == "device" else "cpu")
        scaler.scale(T.ones(1))
        scaler.update({"two": T.tensor([1.0, 2.0]), "grad": T.tensor(2.0, requires_grad=True),
                       "device": T.tensor(2.0)}[bad])

    ref.raises(run, AssertionError,
               "new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
               "torch.FloatTensor with requires_grad=False.")


def test_update_with_int_new_scale_is_not_a_float(ref):
    """NOTE(pytorch): only a float is filled in; an int is taken for a tensor."""

    def run(T):
        scaler = _scaler_cls(T)("cpu")
        scaler.scale(T.ones(1))
        scaler.update(4)

    ref.raises(run, AttributeError, "'int' object has no attribute 'device'")


# --- errors ---
def _fresh(T):
    scaler, params, opt = _setup(T)
    scaler.scale(_loss(T, params)).backward()
    return scaler, params, opt


def _pickle_mid_iteration(T):
    scaler, _, opt = _fresh(T)
    scaler.unscale_(opt)
    pickle.dumps(scaler)


def _step_with_closure_kwarg(T):
    scaler, _, opt = _fresh(T)
    scaler.step(opt, closure=lambda: 1.0)


def _step_without_grads(T):
    scaler, _, _ = _fresh(T)
    scaler.step(T.optim.SGD([T.ones(1, requires_grad=True)], lr=1.0))


def _call_twice(first, second):
    def run(T):
        scaler, _, opt = _fresh(T)
        getattr(scaler, first)(opt)
        getattr(scaler, second)(opt)
    return run


FIX = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."


@pytest.mark.parametrize("case, exc, msg", [
    (_call_twice("unscale_", "unscale_"), RuntimeError,
     "unscale_() has already been called on this optimizer since the last update()."),
    (_call_twice("step", "step"), RuntimeError,
     "step() has already been called since the last update()."),
    (_call_twice("step", "unscale_"), RuntimeError,
     "unscale_() is being called after step()."),
    (lambda T: _setup(T)[0].step(_setup(T)[2]), AssertionError,
     "Attempted step but _scale is None.  " + FIX),
    (lambda T: _setup(T)[0].unscale_(_setup(T)[2]), AssertionError,
     "Attempted unscale_ but _scale is None.  " + FIX),
    (lambda T: _setup(T)[0].update(), AssertionError,
     "Attempted update but _scale is None.  " + FIX),
    (lambda T: _fresh(T)[0].update(), AssertionError,
     "No inf checks were recorded prior to update."),
    (_step_with_closure_kwarg, RuntimeError,
     "Closure use is not currently supported if GradScaler is enabled."),
    (_step_without_grads, AssertionError, "No inf checks were recorded for this optimizer."),
    (lambda T: _scaler_cls(T)("cpu", growth_factor=1.0), AssertionError,
     "The growth factor must be > 1.0."),
    (lambda T: _scaler_cls(T)("cpu", backoff_factor=1.0), AssertionError,
     "The backoff factor must be < 1.0."),
    (_pickle_mid_iteration, AssertionError, ("A GradScaler instance may only be pickled at the "
     "beginning of an iteration, or at the end after scaler.update().")),
    (lambda T: _scaler_cls(T)("cpu").load_state_dict({}), RuntimeError,
     ("The source state dict is empty, possibly because it was saved from a disabled instance "
      "of GradScaler.")),
], ids=["unscale_twice", "step_twice", "unscale_after_step", "step_before_scale",
        "unscale_before_scale", "update_before_scale", "update_without_step", "closure",
        "no_grads", "growth_factor", "backoff_factor", "pickle_mid_iteration", "load_empty"])
def test_errors(ref, case, exc, msg):
    ref.raises(case, exc, msg)


def test_fp16_grads_refused(ref):
    def run(T):
        scaler = _scaler_cls(T)("cpu", init_scale=256.0)  # the scaled fp16 loss stays finite
        w = T.ones(2, dtype=T.float16, requires_grad=True)
        opt = T.optim.SGD([w], lr=0.1)
        scaler.scale((w * 2).sum()).backward()
        with pytest.raises(ValueError) as err:
            scaler.step(opt)
        return str(err.value), scaler._per_optimizer_states[id(opt)]["stage"].name, w.grad

    assert ref.same(run)[:2] == ("Attempting to unscale FP16 gradients.", "READY")


def test_non_tensor_param_refused(ref):
    def run(T):
        scaler, _, opt = _fresh(T)
        opt.param_groups[0]["params"].append(3)
        scaler.unscale_(opt)

    ref.raises(run, AssertionError, "expected param to be torch.Tensor, got int")


# --- settings and state ---
def test_state_dict_round_trip(ref):
    def run(T):
        scaler, params, opt = _setup(T, init_scale=256.0, growth_factor=3.0, backoff_factor=0.25,
                                     growth_interval=3)
        before = scaler.state_dict()
        for poison in (None, None, float("inf"), None, None):
            _iteration(T, scaler, params, opt, poison)
        sd = scaler.state_dict()
        lazy = _scaler_cls(T)("cpu")  # loaded before its first scale()
        lazy.load_state_dict(sd)
        made = _scaler_cls(T)("cpu")  # loaded after
        made.scale(T.ones(1))
        made.load_state_dict(sd)
        for s in (lazy, made):
            assert s.state_dict() == sd
        _iteration(T, lazy, params, opt)
        return before, sd, lazy.state_dict(), made._scale, made._growth_tracker

    _, sd, after, *_ = ref.same(run)
    assert list(sd) == ["scale", "growth_factor", "backoff_factor", "growth_interval",
                        "_growth_tracker"]
    assert sd == {"scale": 64.0, "growth_factor": 3.0, "backoff_factor": 0.25,
                  "growth_interval": 3, "_growth_tracker": 2}
    assert after["scale"] == 192.0 and after["_growth_tracker"] == 0


def test_getters_and_setters(ref):
    def run(T):
        s = _scaler_cls(T)("cpu", init_scale=4, growth_interval=7)
        out = [s.get_scale(), s.get_growth_factor(), s.get_backoff_factor(),
               s.get_growth_interval(), s.is_enabled()]
        s.set_growth_factor(4.0)
        s.set_backoff_factor(0.125)
        s.set_growth_interval(9)
        s.scale(T.ones(1))
        return out + [s.get_scale(), s.get_growth_factor(), s.get_backoff_factor(),
                      s.get_growth_interval(), s._get_scale_async()]

    ref.same(run)


def test_pickle_round_trip():
    scaler, params, opt = _setup(ndgrad, init_scale=32.0, growth_interval=2)
    for _ in range(3):
        _iteration(ndgrad, scaler, params, opt)
    state = scaler.__getstate__()
    assert state["_scale"] is None and state["_init_scale"] == 64.0
    assert state["_init_growth_tracker"] == 1
    clone = pickle.loads(pickle.dumps(scaler))
    assert clone.state_dict() == scaler.state_dict() and clone._scale is None
    _iteration(ndgrad, clone, params, opt)
    assert clone.get_scale() == 128.0


def test_attributes_as_torch(torch_or_skip):
    """Same private state as torch's (code that reaches into it keeps working)."""
    ours, theirs = GradScaler("cpu"), torch_or_skip.amp.GradScaler("cpu")
    assert ours.__getstate__().keys() == theirs.__getstate__().keys()
    assert [s.name for s in OptState] == [s.name for s in torch_or_skip.amp.grad_scaler.OptState]


# --- disabled ---
def test_disabled_is_a_pass_through(ref):
    def run(T):
        scaler, params, opt = _setup(T, enabled=False)
        loss = _loss(T, params)
        assert scaler.scale(loss) is loss and scaler.scale([1, "x"]) == [1, "x"]
        loss.backward()
        assert scaler.unscale_(opt) is None
        ret = scaler.step(opt, closure=lambda: 2.5)
        scaler.update()
        scaler.update(4.0)
        scaler.load_state_dict({})
        return (ret, scaler.get_scale(), scaler.state_dict(), scaler.is_enabled(),
                scaler._get_growth_tracker(), [p.detach() for p in params],
                scaler.__getstate__())

    ret, scale, sd, enabled, tracker, _, state = ref.same(run, rtol=1e-6, atol=1e-7)
    assert (ret, scale, sd, enabled, tracker) == (2.5, 1.0, {}, False, 0)
    assert state == {"_device": "cpu", "_enabled": False}


def test_disabled_keeps_no_settings(ref):
    """NOTE(pytorch): a disabled scaler stores no factors; asking for one raises there too."""
    ref.raises(lambda T: _scaler_cls(T)("cpu", enabled=False).get_growth_factor(),
               AttributeError, "'GradScaler' object has no attribute '_growth_factor'")
    ref.same(lambda T: _scaler_cls(T)("cpu", growth_factor=0.5, enabled=False).is_enabled())


@pytest.mark.skipif(ndgrad.cuda.is_available(), reason="CUDA is available")
def test_cuda_scaler_without_cuda_disables_itself():
    msg = "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling."
    with pytest.warns(UserWarning) as record:
        scaler = GradScaler()
    assert [str(w.message) for w in record] == [msg]
    assert record[0].filename == __file__  # blamed on the caller
    assert not scaler.is_enabled() and scaler.get_scale() == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not GradScaler(enabled=False).is_enabled()  # no warning when asked for disabled


def test_cuda_warning_text_as_torch(torch_or_skip):
    if torch_or_skip.cuda.is_available():
        pytest.skip("torch sees CUDA")
    with pytest.warns(UserWarning) as record:
        torch_or_skip.amp.GradScaler()
    assert str(record[0].message) == \
        "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling."


# --- optimizers that unscale by themselves ---
def _aware_optimizer(T, by_kwarg):
    class Aware(T.optim.SGD):
        _step_supports_amp_scaling = True
        seen: ClassVar[list] = []

        if by_kwarg:
            def step(self, closure=None, grad_scaler=None):
                found = grad_scaler._check_inf_per_device(self)  # records for update()
                self.seen.append((type(grad_scaler).__name__, [f.item() for f in found.values()]))
                return "stepped"
        else:
            def step(self, closure=None):
                scale = None if self.grad_scale is None else self.grad_scale.item()
                self.seen.append((scale, self.found_inf.item()))
                return "stepped"

    return Aware


@pytest.mark.parametrize("by_kwarg", [False, True])
@pytest.mark.parametrize("unscale_first", [False, True])
def test_optimizer_that_supports_amp_scaling(ref, by_kwarg, unscale_first):
    def run(T):
        scaler, params, _ = _setup(T, init_scale=16.0)
        opt = _aware_optimizer(T, by_kwarg)(params, lr=0.1)
        scaler.scale(_loss(T, params)).backward()
        _poison(T, params, float("inf"))
        if unscale_first:
            scaler.unscale_(opt)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ret = scaler.step(opt)
        seen = opt.seen
        assert not hasattr(opt, "grad_scale") and not hasattr(opt, "found_inf")
        scaler.update()
        return ret, seen, [(x.category.__name__, str(x.message)) for x in w], \
            scaler.get_scale(), [p.grad for p in params if p.grad is not None]

    ret, seen, warned, scale, _ = ref.same(run, rtol=1e-5, atol=1e-6)
    assert ret == "stepped" and scale == 8.0
    if by_kwarg:
        assert seen == [("GradScaler", [1.0])] and [w[0] for w in warned] == ["FutureWarning"]
    else:  # after unscale_(), the grads are unscaled already: no grad_scale to divide by
        assert seen == [(None if unscale_first else 16.0, 1.0)] and warned == []


def test_doctest():
    result = doctest.testmod(grad_scaler_module,
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
