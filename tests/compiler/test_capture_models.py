"""Models captured in forward (issue 15, item 2): the MLP with dropout, the CNN and the
transformer block of tests/ops/test_replay.py. No tensor becomes a constant (everything that
computes passes dispatch; parameters are get_attr nodes); the GraphModule gives eager's outputs
and, since replaying calls ops, eager's gradients."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd
import ndgrad.nn.functional as F
from ndgrad import nn
from ndgrad.compiler import capture, capture_and_run, counters


def _mlp():
    nd.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 5))
    return model, (nd.randn(16, 12), nd.randint(0, 5, (16,))), \
        lambda m, x, y: F.cross_entropy(m(x), y)


def _cnn():
    nd.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(4 * 4 * 4, 10))
    return model, (nd.randn(6, 1, 8, 8), nd.randint(0, 10, (6,))), \
        lambda m, x, y: F.cross_entropy(m(x), y)


def _transformer():
    nd.manual_seed(2)
    block = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.1,
                                       activation="gelu", batch_first=True)
    model = nn.ModuleList([block, nn.Linear(16, 7)])
    x, y = nd.randn(3, 5, 16), nd.randint(0, 7, (3, 5))
    mask = nd.triu(nd.full((5, 5), float("-inf")), diagonal=1)

    def step(m, x, y, mask):
        h = m[0](x, src_mask=mask)
        return F.cross_entropy(m[1](h).reshape(-1, 7), y.reshape(-1))

    return model, (x, y, mask), step


MODELS = {"mlp-dropout": _mlp, "cnn": _cnn, "transformer-block": _transformer}


def _grads(model):
    return [p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("name", list(MODELS))
def test_model_forward_captured_without_constants_replays_values_and_gradients(name):
    model, data, step = MODELS[name]()
    fn = lambda *d: step(model, *d)  # noqa: E731  (model: a closure; its parameters get_attr)
    before = counters["tensor_constants"]
    nd.manual_seed(5)
    gm, loss = capture_and_run(fn, data)
    assert gm.meta["tensor_constants"] == [] and counters["tensor_constants"] == before, gm.code
    gm.graph.lint()
    attrs = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    names = {f"model.{k}" for k, _ in model.named_parameters()}
    assert attrs == names, attrs ^ names  # every parameter read, each as itself
    for n, p in model.named_parameters():
        assert gm.get_parameter(f"model.{n}") is p

    nd.manual_seed(5)
    eager = fn(*data)
    eager.backward()
    want = _grads(model)
    model.zero_grad()
    nd.manual_seed(5)
    got = gm(*data)
    np.testing.assert_array_equal(got.detach().numpy(), eager.detach().numpy())
    np.testing.assert_array_equal(loss.detach().numpy(), eager.detach().numpy())
    got.backward()
    for g, w in zip(_grads(model), want, strict=True):
        np.testing.assert_array_equal(g, w)
    if name == "mlp-dropout":
        assert any(n.target is nd.ops.aten.native_dropout.default for n in gm.graph.nodes)
        nd.manual_seed(6)  # other numbers: the mask is drawn again by the replay
        assert not np.array_equal(gm(*data).detach().numpy(), eager.detach().numpy())


def test_mlp_module_capture_prints_readable_code(capsys):
    nd.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    x = nd.randn(2, 4)
    gm = capture(mlp, x)
    print(gm.code)
    code = capsys.readouterr().out
    assert code.startswith("def forward(self, input):")
    assert "# input: f32[2, 4]" in code.splitlines()[0]
    assert "_0_weight = getattr(self, '0').weight" in code
    assert "aten.addmm.default(_0_bias, input, t);  _0_bias = input = t = None" in code
    assert "relu = aten.relu.default(addmm);  addmm = None" in code
    assert "# f32[2, 8]" in code and "view of _0_weight" in code
    assert code.rstrip().endswith("return addmm_1")
    assert sorted(dict(gm.named_parameters())) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    np.testing.assert_array_equal(gm(x).detach().numpy(), mlp(x).detach().numpy())
    with nd.no_grad():  # an optimizer's update is seen: the graph reads the parameters
        mlp[0].weight.mul_(2)
    np.testing.assert_array_equal(gm(x).detach().numpy(), mlp(x).detach().numpy())
    text = gm.print_readable(print_output=False)
    assert text.startswith("class GraphModule(ndgrad.nn.Module):")
    assert "# File: " in text and "in linear, code: " in text


def test_batchnorm_buffers_written_in_the_graph_are_copied_back():
    """Training-mode batch norm updates its running statistics in place: the graph reads the
    buffers as get_attr nodes, computes the new values functionally and copies them back."""
    nd.manual_seed(0)
    bn = nn.BatchNorm1d(3)
    x = nd.randn(8, 3)
    twin = nn.BatchNorm1d(3)
    gm = capture(bn, x)
    twin(x)
    gm.graph.lint()
    for b in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(bn, b).numpy(), getattr(twin, b).numpy(), rtol=1e-6)
        assert gm.get_buffer(b) is getattr(bn, b)
    copies = [n for n in gm.graph.nodes if str(n.target) == "aten.copy_.default"]
    assert {n.args[0].target for n in copies} >= {"running_mean", "running_var"}
    assert all(n.args[0].op == "get_attr" for n in copies)
    gm(x)
    twin(x)
    for b in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(bn, b).numpy(), getattr(twin, b).numpy(), rtol=1e-6)
    assert gm.meta["tensor_constants"] == []
