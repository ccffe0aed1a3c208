"""The engine's use of streams and events (DESIGN §5), pinned down on the stream-logging device.

Each case builds a graph whose forward ops ran on chosen streams, runs backward, and compares the
exact sequence of event creations, records and waits with the rule: an event only where a
gradient crosses from one stream to another, none at all where everything is on one stream.
"""

import numpy as np
import pytest

import ndgrad
from ndgrad._backend import current_stream, streams, stream_log as L, use_stream


@pytest.fixture(autouse=True)
def _fresh_log():
    L.log.clear()
    yield
    L.log.clear()


def leaf(*shape):
    x = ndgrad.randn(*shape, dtype=ndgrad.float64, device="streamlog")
    return x.requires_grad_()


def test_device_basics():
    x = leaf(3)
    assert x.device == ndgrad.device("streamlog", 0) and str(x.device) == "streamlog:0"
    assert ndgrad.zeros_like(x).device == x.device and x.new_ones(2).device == x.device
    y = x.cpu()
    assert y.device == ndgrad.device("cpu") and type(y._data) is np.ndarray
    assert y.to("streamlog").device == x.device
    np.testing.assert_array_equal(y.detach().numpy(), x.detach().cpu().numpy())
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at "
                                           "least two devices, streamlog:0 and cpu!"):
        x + ndgrad.ones(3, dtype=ndgrad.float64)
    # a 0-d CPU tensor may join a device tensor, as in PyTorch
    assert (x * ndgrad.tensor(2.0, dtype=ndgrad.float64)).device == x.device
    assert repr(ndgrad.ones(2, device="streamlog", dtype=ndgrad.int32)) == (
        "tensor([1, 1], device='streamlog:0', dtype=ndgrad.int32)")
    with pytest.raises(TypeError, match="can't convert streamlog:0 device type tensor to numpy. Use "
                                        "Tensor.cpu"):
        x.detach().numpy()
    assert type(np.asarray(x.detach())) is np.ndarray


def test_to_device_is_differentiable():
    x = ndgrad.randn(4, dtype=ndgrad.float64, requires_grad=True)
    y = x.to("streamlog")
    assert y.grad_fn.name() == "ToCopyBackward0"
    (y * y).sum().backward()
    assert x.grad.device == ndgrad.device("cpu")
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy())


def test_one_stream_creates_no_events():
    x = leaf(3, 4)
    w = leaf(4, 2)
    loss = ((x @ w).tanh() * x.sum(1, keepdim=True)).sum()
    loss.backward()
    assert L.log == []
    # the same numbers as on the CPU
    xc = x.detach().cpu().requires_grad_()
    wc = w.detach().cpu().requires_grad_()
    ((xc @ wc).tanh() * xc.sum(1, keepdim=True)).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), xc.grad.numpy())
    np.testing.assert_allclose(w.grad.cpu().numpy(), wc.grad.numpy())


def trace() -> list:
    """The log with events renamed e1, e2, ... in order of creation."""
    names = {}
    out = []
    for entry in L.log:
        if entry[0] == "event":
            names[entry[1]] = f"e{len(names) + 1}"
        out.append(tuple(names.get(x, x) for x in entry))
    return out


def test_producer_and_consumer_on_different_streams():
    x = leaf(3)
    x.sin()  # x's AccumulateGrad is made here, on the default stream
    side = L.Stream(name="side")
    with use_stream(side):
        h = x * 2  # MulBackward0 runs on side
    z = h.exp().sum()  # ExpBackward0, SumBackward0: default
    L.log.clear()
    z.backward()
    assert trace() == [
        # ExpBackward0 (default) -> MulBackward0 (side): one event, the consumer waits on it
        ("event", "e1"), ("record", "e1", "default"), ("wait", "side", "e1"),
        # MulBackward0 (side) -> AccumulateGrad (default)
        ("event", "e2"), ("record", "e2", "side"), ("wait", "default", "e2"),
    ]
    np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * np.exp(2 * x.detach().cpu().numpy()))


def test_two_producers_on_two_streams_accumulate_into_a_consumer_on_a_third():
    s1, s2, s3 = L.Stream(name="s1"), L.Stream(name="s2"), L.Stream(name="s3")
    x = leaf(3)
    x.sin()
    with use_stream(s3):
        a = x * 3  # the consumer: MulBackward0 on s3 receives two gradients
    with use_stream(s1):
        b1 = a.sin()
    with use_stream(s2):
        b2 = a.cos()  # CosBackward0 is newer, so it runs first
    loss = (b1 + b2).sum()
    L.log.clear()
    loss.backward()
    assert trace() == [
        # AddBackward0 (default) feeds SinBackward0 (s1) and CosBackward0 (s2)
        ("event", "e1"), ("record", "e1", "default"),
        ("event", "e2"), ("record", "e2", "default"),
        ("wait", "s2", "e2"),  # CosBackward0 runs
        ("event", "e3"), ("record", "e3", "s2"),  # first gradient into s3's slot
        ("wait", "s1", "e1"),  # SinBackward0 runs
        ("event", "e4"), ("record", "e4", "s1"),  # second gradient: the accumulation stream
        ("wait", "s3", "e4"), ("wait", "s3", "e3"),  # (s3, the consumer's) waits on both
        # accumulated on s3 = the consumer's stream: no event before MulBackward0 runs
        ("event", "e5"), ("record", "e5", "s3"), ("wait", "default", "e5"),  # -> AccumulateGrad
    ]
    xv = x.detach().cpu().numpy()
    np.testing.assert_allclose(x.grad.cpu().numpy(), 3 * (np.cos(3 * xv) - np.sin(3 * xv)))


def test_producer_on_the_accumulation_stream_needs_no_event_of_its_own():
    s2, s3 = L.Stream(name="s2"), L.Stream(name="s3")
    x = leaf(3)
    x.sin()
    with use_stream(s3):
        a = x * 3
        b1 = a.sin()  # produces a's second gradient on s3, the consumer's (accumulation) stream
    with use_stream(s2):
        b2 = a.cos()
    loss = (b1 + b2).sum()
    L.log.clear()
    loss.backward()
    assert trace() == [
        ("event", "e1"), ("record", "e1", "default"),
        ("event", "e2"), ("record", "e2", "default"),
        ("wait", "s2", "e2"),
        ("event", "e3"), ("record", "e3", "s2"),  # CosBackward0's gradient, first in the slot
        ("wait", "s3", "e1"),  # SinBackward0 runs on s3
        ("wait", "s3", "e3"),  # its gradient is on s3 already: only the first one is waited on
        ("event", "e4"), ("record", "e4", "s3"), ("wait", "default", "e4"),
    ]


def test_two_gradients_from_one_side_stream_wait_once():
    side, c = L.Stream(name="side"), L.Stream(name="c")
    x = leaf(3)
    x.sin()
    with use_stream(c):
        a = x * 3
    with use_stream(side):
        b1, b2 = a.sin(), a.cos()
    with use_stream(side):
        loss = (b1 + b2).sum()
    L.log.clear()
    loss.backward()
    got = trace()
    # everything before the consumer is on `side`: two events recorded there for c's slot
    # (one per gradient), but c waits only on the newer, which covers the older
    assert got == [
        ("event", "e1"), ("record", "e1", "default"), ("wait", "side", "e1"),  # root -> side
        ("event", "e2"), ("record", "e2", "side"),
        ("event", "e3"), ("record", "e3", "side"), ("wait", "c", "e3"),
        ("event", "e4"), ("record", "e4", "c"), ("wait", "default", "e4"),
    ]


def test_leaf_gradient_on_a_side_stream_is_waited_for_by_the_caller():
    side = L.Stream(name="side")
    y = leaf(3)
    with use_stream(side):
        h = y * 2  # y's AccumulateGrad is made here: it runs on side
    loss = h.sum()
    L.log.clear()
    loss.backward()
    assert trace() == [
        ("event", "e1"), ("record", "e1", "default"), ("wait", "side", "e1"),
        # AccumulateGrad ran on side; the caller's stream (default) waits for it at the end
        ("event", "e2"), ("record", "e2", "side"), ("wait", "default", "e2"),
    ]
    assert current_stream(y.device) is L._default
    with use_stream(side):  # called from the leaf's stream: nothing to wait for
        h = y * 2
        loss = h.sum()
        L.log.clear()
        loss.backward()
    assert trace() == []


def test_cpu_path_touches_no_stream_code(monkeypatch):
    streams.in_use[0] = False

    def boom(*a, **k):
        raise AssertionError("stream code on the CPU path")

    import ndgrad.autograd.engine as E
    monkeypatch.setattr(E, "_add", boom)
    monkeypatch.setattr(E, "_stream_of", boom)
    monkeypatch.setattr(E._backend, "current_stream", boom)
    x = ndgrad.randn(3, requires_grad=True)
    ((x * 2).sin() + x).sum().backward()
    assert x.grad is not None


def test_create_graph_records_nodes_on_the_node_stream():
    side = L.Stream(name="side")
    x = leaf(3)
    x.sin()
    with use_stream(side):
        h = x * x
    (g,) = ndgrad.autograd.grad(h.sum(), x, create_graph=True)
    # g was computed by MulBackward0 on side: its graph records side as its stream
    assert g.grad_fn._in_meta[3] is side
    (gg,) = ndgrad.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.cpu().numpy(), np.full(3, 2.0))


def test_default_streams_only_keep_the_stream_free_loop():
    streams.in_use[0] = False
    x = leaf(3)
    (x * 2).sum().backward()  # device arrays, but one stream: the engine's plain loop runs
    assert streams.in_use[0] is False and L.log == []
    with use_stream(L._default):  # making the default stream current changes nothing
        pass
    assert streams.in_use[0] is False
    with use_stream(L.Stream(name="side")):
        pass
    assert streams.in_use[0] is True


def _side_stream_model(x, w1, w2, w3, side_a, side_b):
    """Two branches on two side streams (each waiting on the caller's stream for its inputs),
    joined on the caller's stream: missing synchronisation would show as wrong numbers."""
    main = current_stream(x.device)
    side_a.wait_stream(main)
    side_b.wait_stream(main)
    with use_stream(side_a):
        a = (x @ w1).relu() @ w2
    with use_stream(side_b):
        b = (x @ w3).tanh()
    main.wait_stream(side_a)
    main.wait_stream(side_b)
    return ((a * b).sum(1) ** 2).mean()


def test_side_stream_model_matches_a_single_stream_run(device):
    n, trials = (2048, 50) if device == "cuda" else (64, 5)
    if device == "cuda":
        side_a, side_b = ndgrad.cuda.Stream(), ndgrad.cuda.Stream()
    else:
        side_a, side_b = L.Stream(name="a"), L.Stream(name="b")
    rng = np.random.default_rng(0)
    for _ in range(trials):
        arrays = [rng.standard_normal((n, n)).astype(np.float32) / np.sqrt(n) for _ in range(4)]
        ref = [ndgrad.tensor(a, requires_grad=i > 0) for i, a in enumerate(arrays)]
        main = current_stream(ndgrad.device(device))
        ref_dev = [t.detach().to(device).requires_grad_(t.requires_grad) for t in ref]
        loss_ref = _side_stream_model(*ref_dev, main, main)  # everything on one stream
        loss_ref.backward()
        got = [t.detach().to(device).requires_grad_(t.requires_grad) for t in ref]
        loss = _side_stream_model(*got, side_a, side_b)
        loss.backward()
        np.testing.assert_allclose(loss.item(), loss_ref.item(), rtol=1e-5)
        for a, b in zip(got[1:], ref_dev[1:]):
            np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.cpu().numpy(), rtol=1e-4, atol=1e-6)
