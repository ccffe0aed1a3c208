"""One dispatch point sees everything (issue 14, item 3).

A training step (forward, ``loss.backward()``, an optimizer step) runs under a mode that records
every op call with copies of its inputs and outputs. The recorded calls are then replayed in
order, from the step's true inputs only (the data and the parameters' values at first use),
re-seeding the generator before each random op as recorded. Every output, every gradient and
every updated parameter must come out bit for bit as in the eager run; an input of a recorded
call that no earlier call produced and that is not a parameter or the data means a computation
ran outside dispatch, and fails the test naming the call.
"""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd
import ndgrad.nn.functional as F
from ndgrad import nn
from ndgrad.utils._python_dispatch import TorchDispatchMode


class Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = []
        self.external = {}  # id(array) -> a copy of its value when first seen as an input
        self.known = {}  # id(array) -> the array (kept alive, so ids stay unique)

    def _key(self, t, as_input):
        a = t._data
        k = id(a)
        if k not in self.known:
            self.known[k] = a
            if as_input:
                self.external[k] = a.copy()
        return k

    def _encode(self, x, as_input):
        if isinstance(x, nd.Tensor):
            return ("T", self._key(x, as_input))
        if type(x) in (list, tuple) and any(isinstance(y, nd.Tensor) for y in x):
            return type(x)(self._encode(y, as_input) for y in x)
        return x

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        state = nd.get_rng_state() if func.extra.get("nondeterministic") else None
        enc_args = [self._encode(a, True) for a in args]
        enc_kwargs = {k: self._encode(v, True) for k, v in kwargs.items()}
        out = func(*args, **kwargs)
        outs = out if type(out) in (tuple, list) else (out,)
        enc_out = [self._encode(o, False) for o in outs]
        values = [o._data.copy() if isinstance(o, nd.Tensor) else o for o in outs]
        self.calls.append((func, enc_args, enc_kwargs, enc_out, values, state))
        return out


def _replay(rec: Recorder, allowed: set):
    """Run the recorded calls again from the step's inputs; return id(array) -> replayed tensor."""
    env = {}

    def dec(x, call):
        if type(x) is tuple and len(x) == 2 and x[0] == "T":
            k = x[1]
            if k not in env:
                assert k in allowed, (
                    f"{call}: an input no recorded call produced (computed outside dispatch)")
                env[k] = nd.Tensor._make(rec.external[k].copy(), None, 0, None)
            return env[k]
        if type(x) in (list, tuple):
            return type(x)(dec(y, call) for y in x)
        return x

    with nd.no_grad():
        for i, (func, args, kwargs, outs, values, state) in enumerate(rec.calls):
            call = f"call {i} ({func})"
            a = [dec(x, call) for x in args]
            kw = {k: dec(v, call) for k, v in kwargs.items()}
            if state is not None:
                nd.set_rng_state(state)
            out = func(*a, **kw)
            got = out if type(out) in (tuple, list) else (out,)
            for o, enc, v in zip(got, outs, values):
                if isinstance(o, nd.Tensor):
                    assert o._data.dtype == v.dtype and o._data.shape == v.shape, call
                    np.testing.assert_array_equal(o._data, v, err_msg=call, strict=True)
                    env[enc[1]] = o
    return env


def _check_step(model, data, step, optimizer):
    """Record one training step of ``model`` and replay it."""
    params = list(model.parameters())
    state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, nd.Tensor)]
    allowed = {id(t._data) for t in params + state + list(data)}  # the step's true inputs
    rec = Recorder()
    with rec:
        optimizer.zero_grad()
        loss = step(model, *data)
        loss.backward()
        grads = {id(p): p.grad._data.copy() for p in params}
        optimizer.step()
    env = _replay(rec, allowed)
    for p in params:
        g = p.grad
        assert id(g._data) in env, f"the .grad of a {tuple(p.shape)} parameter came from no recorded call"
        np.testing.assert_array_equal(env[id(g._data)]._data, grads[id(p)], strict=True)
        assert id(p._data) in env, f"a {tuple(p.shape)} parameter was not updated by recorded calls"
        np.testing.assert_array_equal(env[id(p._data)]._data, p._data, strict=True)
    return rec


def _funcs(rec):
    return {str(c[0]) for c in rec.calls}


def test_mlp_with_dropout_step_replays_bit_for_bit():
    nd.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 5))
    x, y = nd.randn(16, 12), nd.randint(0, 5, (16,))
    opt = nd.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _check_step(model, (x, y), lambda m, x, y: F.cross_entropy(m(x), y), opt)  # momentum made
    rec = _check_step(model, (x, y), lambda m, x, y: F.cross_entropy(m(x), y), opt)
    funcs = _funcs(rec)
    assert any("dropout" in f for f in funcs), funcs  # the mask is drawn by a call
    assert "aten.add_.Tensor" in funcs or "aten.sub_.Tensor" in funcs  # the update is calls too


def test_cnn_step_replays_bit_for_bit():
    nd.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(4 * 4 * 4, 10))
    x, y = nd.randn(6, 1, 8, 8), nd.randint(0, 10, (6,))
    opt = nd.optim.SGD(model.parameters(), lr=0.05)
    _check_step(model, (x, y), lambda m, x, y: F.cross_entropy(m(x), y), opt)


def test_transformer_block_step_replays_bit_for_bit():
    nd.manual_seed(2)
    block = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.1,
                                       activation="gelu", batch_first=True)
    head = nn.Linear(16, 7)
    model = nn.ModuleList([block, head])
    x, y = nd.randn(3, 5, 16), nd.randint(0, 7, (3, 5))
    mask = nd.triu(nd.full((5, 5), float("-inf")), diagonal=1)

    def step(m, x, y, mask):
        h = m[0](x, src_mask=mask)
        return F.cross_entropy(m[1](h).reshape(-1, 7), y.reshape(-1))

    opt = nd.optim.AdamW(model.parameters(), lr=0.01, amsgrad=True)
    _check_step(model, (x, y, mask), step, opt)  # the optimizer's state is made by calls too
    rec = _check_step(model, (x, y, mask), step, opt)
    funcs = _funcs(rec)
    assert any("layer_norm" in f for f in funcs) and any("gelu" in f for f in funcs), funcs


def test_recording_sees_factories_dropout_buffer_sums_and_accumulation():
    a = nd.randn(4, requires_grad=True)
    with Recorder() as rec:
        z = nd.zeros(4)
        y = F.dropout(a * 2, 0.5) + a.sin() + z  # a's gradient arrives twice: a buffer sum
        y.sum().backward()
        y = (a * 3).sum()
        y.backward()  # a second gradient into an existing .grad: accumulation
    funcs = [str(c[0]) for c in rec.calls]
    assert "aten.zeros.default" in funcs
    assert any("dropout" in f for f in funcs)
    assert "aten.add.Tensor" in funcs  # the two gradients of ``a`` summed in its input buffer
    assert funcs[-1] == "aten.add_.Tensor"  # the accumulation into a.grad
    assert any(f in ("aten.ones_like.default", "aten.expand.default") for f in funcs)


class _Nop(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("make", [
    lambda w: nd.optim.SGD(w, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
    lambda w: nd.optim.SGD(w, lr=0.1, momentum=0.5, dampening=0.3, maximize=True),
    lambda w: nd.optim.Adam(w, lr=0.1, amsgrad=True, weight_decay=0.1),
    lambda w: nd.optim.AdamW(w, lr=0.1, betas=(0.3, 0.9), maximize=True),
    lambda w: nd.optim.RMSprop(w, lr=0.1, momentum=0.5, centered=True, weight_decay=0.1),
    lambda w: nd.optim.RMSprop(w, lr=0.1, alpha=0.3, maximize=True),
    lambda w: nd.optim.Adagrad(w, lr=0.1, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.2),
], ids=["sgd-nesterov", "sgd-dampening", "adam-amsgrad", "adamw-maximize", "rmsprop-centered",
        "rmsprop-maximize", "adagrad"])
def test_optimizer_steps_under_a_mode_match_the_array_code_bit_for_bit(make):
    """Under a mode the optimizers update with ops (a capture sees them); the result is the
    array code's, bit for bit."""
    results = []
    for mode in (False, True):
        nd.manual_seed(0)
        w = nd.randn(7, requires_grad=True)
        opt = make([w])
        for _ in range(3):
            w.grad = nd.randn(7)
            if mode:
                with _Nop():
                    opt.step()
            else:
                opt.step()
        results.append(w.detach().numpy().copy())
    np.testing.assert_array_equal(results[0], results[1], strict=True)


def test_computed_indices_are_data_not_constants():
    """Index tensors reach ``index``/``index_put`` as arguments, so a recording links them to
    the calls that computed them (a replay from other inputs picks other elements)."""
    x = nd.randn(4, 5, requires_grad=True)
    with Recorder() as rec:
        idx = x.argmax(1)
        picked = x[nd.arange(4), idx]
        mask = x > 0
        y = x.clone()
        y[mask] = 0.0
        (picked.sum() + y.sum()).backward()
    _replay(rec, {id(x._data)})  # no input but x: every index was computed by a recorded call
    funcs = _funcs(rec)
    assert "aten.index.Tensor" in funcs and "aten.index_put_.default" in funcs
