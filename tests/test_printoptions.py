"""``set_printoptions`` against PyTorch: the same text for the same tensors and options."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd

torch = pytest.importorskip("torch")

ARRAYS = [
    np.array([1.5, -2.25, 3.125]),
    np.array([1e-5, 1.0, 2.0]),
    np.arange(12.0).reshape(3, 4),
    np.linspace(-1, 1, 2000).reshape(40, 50),
    np.array([123456789.0, 1.0]),
    np.arange(30.0) / 7,
]
OPTIONS = [
    {}, {"precision": 2}, {"precision": 8}, {"threshold": 5}, {"edgeitems": 1, "threshold": 10},
    {"linewidth": 40}, {"profile": "short"}, {"profile": "full"}, {"sci_mode": True},
    {"sci_mode": False}, {"profile": "short", "precision": 6},
]


def _flat_suffix(text: str) -> str:
    # "ndgrad." is one character longer than "torch.", which may move a suffix to its own line
    return text.replace(",\n       dtype=", ", dtype=")


def _texts(options):
    t_old, n_old = torch._tensor_str.PRINT_OPTS.__dict__.copy(), nd.get_printoptions()
    torch.set_printoptions(**options)
    nd.set_printoptions(**options)
    try:
        return ([_flat_suffix(repr(torch.tensor(a))).replace("torch.", "") for a in ARRAYS],
                [_flat_suffix(repr(nd.tensor(a))).replace("ndgrad.", "") for a in ARRAYS])
    finally:
        torch.set_printoptions(profile="default")
        nd.set_printoptions(profile="default")
        assert nd.get_printoptions() == n_old
        torch._tensor_str.PRINT_OPTS.__dict__.update(t_old)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_reprs_match_pytorch(options):
    want, got = _texts(options)
    for w, g in zip(want, got):
        assert g == w


def test_get_printoptions_and_context():
    assert nd.get_printoptions() == {"precision": 4, "threshold": 1000, "edgeitems": 3,
                                     "linewidth": 80, "sci_mode": None}
    with nd._tensor_str.printoptions(precision=1):
        assert repr(nd.tensor([1.25])) == "tensor([1.2])"
    assert repr(nd.tensor([1.25])) == "tensor([1.2500])"
