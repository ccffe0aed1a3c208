"""``set_default_device``, ``get_default_device`` and ``with device(...)`` against PyTorch.

ndgrad's stand-in for a second device is the stream-logging test device (``streamlog``); PyTorch's
is ``meta``: both show where each constructor put its tensor without a GPU.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ndgrad
from ndgrad import nn

CONSTRUCTORS = {
    "ones": lambda T: T.ones(2), "zeros": lambda T: T.zeros(2), "empty": lambda T: T.empty(2),
    "full": lambda T: T.full((2,), 1.0), "arange": lambda T: T.arange(3),
    "linspace": lambda T: T.linspace(0, 1, 3), "eye": lambda T: T.eye(2), "rand": lambda T: T.rand(2),
    "randn": lambda T: T.randn(2), "randint": lambda T: T.randint(0, 3, (2,)),
    "randperm": lambda T: T.randperm(3), "tensor": lambda T: T.tensor([1.0]),
    "as_tensor": lambda T: T.as_tensor([1.0]), "Linear": lambda T: T.nn.Linear(2, 2).weight,
}
# Constructors that take their device from a tensor, or wrap host memory: the default is not theirs.
FROM_INPUT = {
    "zeros_like": lambda T, c: T.zeros_like(c), "ones_like": lambda T, c: T.ones_like(c),
    "new_zeros": lambda T, c: c.new_zeros(2), "explicit": lambda T, c: T.ones(1, device="cpu"),
    "from_numpy": lambda T, c: T.from_numpy(np.ones(2)), "mul": lambda T, c: c * 2,
}


@pytest.fixture(autouse=True)
def _reset():
    yield
    ndgrad.set_default_device(None)
    assert ndgrad.get_default_device() == "cpu"


def _other(T):
    return "meta" if T.__name__ == "torch" else "streamlog"


def _where(T):
    """Which constructors land on the other device under set_default_device and under ``with``."""
    dev = _other(T)
    T.set_default_device(dev)
    try:
        c = T.ones(2, device="cpu")
        set_ = {k: f(T).device.type == dev for k, f in CONSTRUCTORS.items()}
        set_.update({k: f(T, c).device.type == dev for k, f in FROM_INPUT.items()})
        got = T.get_default_device().type == dev
    finally:
        T.set_default_device(None)
    with T.device(dev) as d:
        inside = ({k: f(T).device.type == dev for k, f in CONSTRUCTORS.items()},
                  d.type == dev, T.get_default_device().type == dev)
        with T.device("cpu"):
            nested = (repr(T.get_default_device()), T.ones(1).device.type)
    return set_, got, inside, nested, repr(T.get_default_device())


def test_constructors_follow_the_default_device(torch_or_skip):
    got = _where(ndgrad)
    assert got == _where(torch_or_skip)
    assert all(got[0][k] for k in CONSTRUCTORS) and not any(got[0][k] for k in FROM_INPUT)


def test_default_device_values(ref):
    def f(T):
        out = [repr(T.get_default_device())]
        T.set_default_device(T.device("cpu", 0))
        out.append(repr(T.get_default_device()))
        T.set_default_device("cpu")
        out += [repr(T.get_default_device()), str(T.ones(1).device)]
        T.set_default_device(None)
        out.append(repr(T.get_default_device()))
        return out

    ref.same(f)
    # The messages list the device types each library knows: compared by their start.
    with pytest.raises(RuntimeError, match="^Expected one of cpu, cuda, .* device type at start of device string: foo$"):
        ndgrad.set_default_device("foo")
    with pytest.raises(TypeError, match=r"^device\(\) received an invalid combination of arguments - got \(float\)"):
        ndgrad.set_default_device(3.5)
    assert ndgrad.get_default_device() == "cpu"  # a refused device leaves the default alone


def test_default_device_is_per_thread(torch_or_skip):
    def f(T):
        T.set_default_device(_other(T))
        seen = []
        th = threading.Thread(target=lambda: seen.append((repr(T.get_default_device()), T.ones(1).device.type)))
        th.start()
        th.join()
        T.set_default_device(None)
        return seen

    assert f(ndgrad) == f(torch_or_skip) == [("device(type='cpu')", "cpu")]


def test_module_built_on_the_default_device_trains():
    from ndgrad._backend import stream_log  # noqa: F401  (registers the device)

    with ndgrad.device("streamlog"):
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        x = ndgrad.randn(8, 3)
    assert {p.device.type for p in model.parameters()} == {"streamlog"}
    loss = model(x).pow(2).mean()
    loss.backward()
    assert all(p.grad is not None and p.grad.device.type == "streamlog" for p in model.parameters())
