"""Every op of the table on every device: the same values and gradients as on the CPU, with
outputs (and gradients) on the inputs' device.

``streamlog`` runs everywhere: its arrays refuse host operands as CuPy's do, so an op that
would hand a GPU kernel a host array fails here too. ``cuda`` runs where CuPy sees a GPU.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import ndgrad as nd

from test_generic import CASES, _convert, _nd_make, _op, _outputs



def _factory(rec, args) -> bool:
    """Whether ``rec`` makes tensors from no tensor input, on a ``device`` it takes."""
    if rec.params is not None:
        return not rec.tensor_pos and any(p.name == "device" for p in rec.params)
    return (not any(isinstance(a, nd.Tensor) for a in args)
            and "device" in inspect.signature(rec.call).parameters)


def _host(t):
    return nd._backend.to_device(t._data, nd.device("cpu"))


@pytest.mark.parametrize("rec,sample", CASES)
def test_op_on_device(rec, sample, device):
    args, kwargs, leaves = _convert(rec, sample, _nd_make)

    def on_device(a, rg):
        t = _nd_make(a, False).to(device)
        return t.requires_grad_(rg) if rg else t

    dargs, dkwargs, dleaves = _convert(rec, sample, on_device)
    if _factory(rec, dargs):
        dkwargs["device"] = nd.device(device)  # a factory: the device is an argument
    op = _op(rec)
    try:
        expected = _outputs(op(*args, **kwargs))
    except Exception as e:  # bad input: the device raises the same error
        with pytest.raises(type(e)):
            op(*dargs, **dkwargs)
        return
    got = _outputs(op(*dargs, **dkwargs))
    assert len(got) == len(expected)
    dev = nd.device(device)
    for g, e in zip(got, expected, strict=True):
        if not isinstance(e, nd.Tensor):
            assert g == e
            continue
        assert g.device.type == dev.type, f"output on {g.device}"
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(_host(g), e._data, rtol=1e-6, atol=1e-9, equal_nan=True)
    outs = [(g, e) for g, e in zip(got, expected, strict=True)
            if isinstance(e, nd.Tensor) and e.requires_grad]
    if not outs or not rec.differentiable:
        return
    rng = np.random.default_rng(1)
    gos = [rng.standard_normal(e.shape).astype(e._data.dtype) for _, e in outs]
    nd.autograd.backward([e for _, e in outs], [nd.tensor(v) for v in gos])
    nd.autograd.backward([g for g, _ in outs], [nd.tensor(v, device=device) for v in gos])
    for a, b in zip(dleaves, leaves, strict=True):
        if b.grad is None:
            assert a.grad is None
            continue
        assert a.grad.device.type == dev.type
        np.testing.assert_allclose(_host(a.grad), b.grad._data, rtol=1e-6, atol=1e-9)
