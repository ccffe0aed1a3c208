"""nn.DataParallel against torch's on a machine without GPUs (it runs the wrapped module), and
the one-device path on the stream-logging test device (module and inputs moved there)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import ndgrad
from ndgrad.nn.parallel import data_parallel

Pair = collections.namedtuple("Pair", "x y")


def _net(T):
    """A small float64 MLP with the same weights under both frameworks (and buffers)."""
    net = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.ReLU(), T.nn.Linear(4, 2), T.nn.BatchNorm1d(2))
    net.double()
    with T.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(T.tensor(np.linspace(-1, 1, p.numel()).reshape(tuple(p.shape)) * (i + 1)))
    return net


def _x(T):
    return T.tensor(np.arange(15.0).reshape(5, 3) / 7 - 1, requires_grad=True)


def test_forward_backward_match_torch(ref):
    def run(T):
        dp = T.nn.DataParallel(_net(T))
        x = _x(T)
        out = dp(x)
        # BatchNorm makes sum(out ** 2) nearly constant, its gradient all rounding: weight it
        (out * T.arange(10.0, dtype=T.float64).reshape(5, 2)).sum().backward()
        grads = [p.grad for p in dp.module.parameters()]
        return out, grads, x.grad, dp.module[3].running_mean

    ref.same(run)


def test_state_dict_and_repr_match_torch(ref):
    def run(T):
        dp = T.nn.DataParallel(_net(T))
        sd = dp.state_dict()
        inner = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.ReLU(), T.nn.Linear(4, 2),
                                T.nn.BatchNorm1d(2)).double()
        plain = T.nn.DataParallel(inner)
        plain.load_state_dict(sd)
        return (list(sd), [n for n, _ in dp.named_parameters()], repr(dp),
                [p for p in plain.module.parameters()], dp.device_ids,
                list(dict(dp.named_children())))

    ref.same(run)


def test_args_and_kwargs_pass_through(ref):
    def run(T):
        class Add(T.nn.Module):
            def forward(self, a, b=0, *, pair=None):
                return a + b + pair.x * pair.y

        dp = T.nn.DataParallel(Add(), device_ids=[0], output_device=0, dim=1)
        return dp(T.ones(2), b=T.ones(2) * 2, pair=Pair(T.ones(2) * 3, 4)), dp.device_ids

    ref.same(run)


def test_attributes_and_exports():
    m = ndgrad.nn.Linear(2, 2)
    dp = ndgrad.nn.DataParallel(m, device_ids=[0], output_device=0, dim=1)
    assert dp.module is m and dp.device_ids == [] and dp.dim == 1 and dp.output_device == 0
    assert ndgrad.nn.parallel.DataParallel is ndgrad.nn.DataParallel is data_parallel.DataParallel
    assert isinstance(dp, ndgrad.nn.Module)
    assert data_parallel.DataParallel[ndgrad.nn.Linear].__origin__ is data_parallel.DataParallel
    assert "DistributedDataParallel" in ndgrad.nn.parallel.__all__


def test_distributed_data_parallel_is_lazy():
    """``nn.parallel.DistributedDataParallel`` comes from ``nn/parallel/distributed.py``."""
    try:
        from ndgrad.nn.parallel.distributed import DistributedDataParallel
    except ImportError:
        pytest.skip("ndgrad.nn.parallel.distributed is not there yet")
    assert ndgrad.nn.parallel.DistributedDataParallel is DistributedDataParallel
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        ndgrad.nn.parallel.Nope  # noqa: B018


# --- one accelerator: the stream-logging test device stands in for a GPU ---
@pytest.fixture
def one_device(monkeypatch):
    monkeypatch.setattr(data_parallel, "_accelerator", lambda: ("streamlog", 1))
    return ndgrad.device("streamlog", 0)


def test_one_device_moves_module_and_inputs(one_device):
    net = _net(ndgrad)
    dp = ndgrad.nn.DataParallel(net)
    assert dp.device_ids == [0] and dp.output_device == 0 and dp.src_device_obj == one_device
    assert all(p.device == one_device for p in net.parameters())
    assert all(b.device == one_device for b in net.buffers())
    x = _x(ndgrad)
    out = dp(x)
    assert out.device == one_device
    out.sum().backward()
    assert x.grad is not None and x.grad.device == ndgrad.device("cpu")
    assert all(p.grad is not None and p.grad.device == one_device for p in net.parameters())

    cpu_net = _net(ndgrad)
    cpu_x = _x(ndgrad)
    cpu_out = cpu_net(cpu_x)
    cpu_out.sum().backward()
    np.testing.assert_allclose(np.asarray(out.detach().cpu()._data), cpu_out.detach()._data,
                               rtol=1e-12)
    np.testing.assert_allclose(np.asarray(x.grad._data), cpu_x.grad._data, rtol=1e-12)


def test_one_device_containers(one_device):
    class Echo(ndgrad.nn.Module):
        def forward(self, *args, **kwargs):
            return args, kwargs

    args, kwargs = ndgrad.nn.DataParallel(Echo())(
        [ndgrad.ones(1)], (ndgrad.ones(1), "s"), Pair(ndgrad.ones(1), 2), d={"t": ndgrad.ones(1)})
    assert isinstance(args[0], list) and args[0][0].device == one_device
    assert type(args[1]) is tuple and args[1][1] == "s" and args[1][0].device == one_device
    assert type(args[2]) is Pair and args[2].x.device == one_device and args[2].y == 2
    assert kwargs["d"]["t"].device == one_device
    assert ndgrad.nn.DataParallel(Echo())() == ((), {})


def test_one_device_errors(one_device):
    dp = ndgrad.nn.DataParallel(ndgrad.nn.Linear(2, 2))
    dp.module.cpu()
    with pytest.raises(RuntimeError, match=r"^module must have its parameters and buffers on "
                                           r"device streamlog:0 \(device_ids\[0\]\) but found one "
                                           r"of them on device: cpu$"):
        dp(ndgrad.ones(2))
    with pytest.raises(ValueError, match="^Expected a non cpu device, but got: cpu$"):
        ndgrad.nn.DataParallel(ndgrad.nn.Linear(2, 2), device_ids=["cpu"])
    assert ndgrad.nn.DataParallel(ndgrad.nn.Linear(2, 2), device_ids=["streamlog:0"]).device_ids \
        == [0]
