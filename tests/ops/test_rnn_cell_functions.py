"""``torch.lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell`` against PyTorch:
values and gradients of every argument, with and without biases."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad

R = np.random.default_rng(3).standard_normal
CHUNKS = {"lstm_cell": 4, "gru_cell": 3, "rnn_tanh_cell": 1, "rnn_relu_cell": 1}


@pytest.mark.parametrize("name", list(CHUNKS))
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch", [(3,), (1,)])  # PyTorch's functional cells take 2-D input only
def test_cell_function_matches_torch(name, bias, batch, torch_or_skip):
    torch = torch_or_skip
    k, hid = CHUNKS[name], 2
    arrays = [R(batch + (4,)), R(batch + (hid,)), R(batch + (hid,)), R((k * hid, 4)), R((k * hid, hid))]
    if bias:
        arrays += [R(k * hid), R(k * hid)]

    def run(T):
        ts = [T.tensor(a, requires_grad=True) for a in arrays]
        x, h, c, *rest = ts
        out = getattr(T, name)(x, (h, c) if name == "lstm_cell" else h, *rest)
        outs = out if isinstance(out, tuple) else (out,)
        sum(o.sum() * (i + 1) for i, o in enumerate(outs)).backward()
        return [o.detach().numpy() for o in outs] + [t.grad.numpy() if t.grad is not None else None for t in ts]

    for g, w in zip(run(ndgrad), run(torch)):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
