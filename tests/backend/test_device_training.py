"""Training on a device gives the CPU's numbers: modules, losses and optimizers keep every
array on the device (``streamlog`` refuses host operands as CuPy does; ``cuda`` where present)."""

import numpy as np
import pytest

import ndgrad as nd



def _train(device, opt_name):
    nd.manual_seed(0)
    model = nd.nn.Sequential(nd.nn.Linear(8, 16), nd.nn.ReLU(), nd.nn.Linear(16, 3))
    model.to(device)
    opt = {"sgd": lambda p: nd.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
           "adam": lambda p: nd.optim.Adam(p, lr=0.01, amsgrad=True),
           "adamw": lambda p: nd.optim.AdamW(p, lr=0.01),
           "rmsprop": lambda p: nd.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
           "adagrad": lambda p: nd.optim.Adagrad(p, lr=0.1)}[opt_name](model.parameters())
    rng = np.random.default_rng(1)
    x = nd.tensor(rng.standard_normal((32, 8)).astype(np.float32), device=device)
    y = nd.tensor(rng.integers(0, 3, 32), device=device)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = nd.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        nd.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    for p in model.parameters():
        assert p.device.type == nd.device(device).type and p.grad.device == p.device
    return losses, [p.detach().cpu().numpy() for p in model.parameters()]


@pytest.mark.parametrize("opt_name", ["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_training_on_a_device_matches_the_cpu(device, opt_name):
    cpu_losses, cpu_params = _train("cpu", opt_name)
    dev_losses, dev_params = _train(device, opt_name)
    np.testing.assert_allclose(dev_losses, cpu_losses, rtol=1e-5)
    for a, b in zip(dev_params, cpu_params, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_save_on_cpu_keeps_saved_activations_on_the_host(device):
    from ndgrad.autograd.graph import save_on_cpu
    from ndgrad.autograd.saved import PackedSaved

    x = nd.randn(64, 64, device=device, requires_grad=True)
    with save_on_cpu(pin_memory=True):
        h = (x @ x).tanh()
        y = h.sum()
    packed = [s for s in h.grad_fn._saved if isinstance(s, PackedSaved)]
    assert packed and all(s.packed[0] == x.device and s.packed[1].device.type == "cpu" for s in packed)
    y.backward()
    xc = x.detach().cpu().requires_grad_()
    (xc @ xc).tanh().sum().backward()
    assert x.grad.device == x.device
    np.testing.assert_allclose(x.grad.cpu().numpy(), xc.grad.numpy(), rtol=1e-5)


@pytest.mark.skipif(not nd.cuda.is_available(), reason="needs a GPU")
def test_save_on_cpu_lowers_peak_device_memory():
    def run(offload):
        x = nd.randn(1024, 1024, device="cuda", requires_grad=True)
        nd.cuda.synchronize()
        nd.cuda.reset_peak_memory_stats()
        base = nd.cuda.memory_allocated()
        ctx = nd.autograd.graph.save_on_cpu(pin_memory=True) if offload else nd.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
        with ctx:
            y = x
            for _ in range(8):
                y = (y * 1.01).tanh()
        peak = nd.cuda.max_memory_allocated() - base
        y.sum().backward()
        return peak

    plain, offloaded = run(False), run(True)
    assert offloaded < 0.5 * plain


@pytest.mark.parametrize("op,matrix,message", [
    ("cholesky", [[1.0, 2.0], [2.0, 1.0]], "the leading minor of order 2 is not positive-definite"),
    ("inv", [[1.0, 2.0], [2.0, 4.0]], "The diagonal element 2 is zero"),
    ("solve", [[1.0, 2.0], [2.0, 4.0]], "the input matrix is singular"),
])
def test_failing_factorization_raises_on_device(device, op, matrix, message):
    """CuPy reports a failed factorization with NaNs; ndgrad asks it to raise, so a device gives
    the CPU's LinAlgError (the stream-log device returns NaNs unless asked, as CuPy does)."""
    a = nd.tensor(matrix, device=device)
    args = (a, nd.ones(2, device=device)) if op == "solve" else (a,)
    with pytest.raises(nd.linalg.LinAlgError, match=message):
        getattr(nd.linalg, op)(*args)
    ok = nd.tensor([[2.0, 1.0], [1.0, 2.0]], device=device)
    good = getattr(nd.linalg, op)(*((ok,) + args[1:]))
    cpu = getattr(nd.linalg, op)(*((ok.cpu(),) + tuple(t.cpu() for t in args[1:])))
    np.testing.assert_allclose(good.cpu().numpy(), cpu.numpy())
