"""Checkpoints crossing over: files from ``torch.save`` load into ndgrad (without torch doing the
reading) and files from ``ndgrad.save`` load in ``torch.load``, ``weights_only=True`` included."""

from __future__ import annotations

import collections
import io
import pickle
import subprocess
import sys

import numpy as np
import pytest

import ndgrad

torch = pytest.importorskip("torch")


def _t2n(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return ndgrad.load(buf, **kw)


def _n2t(obj, **kw):
    buf = io.BytesIO()
    ndgrad.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **kw)


def _eq(nd, th):
    assert tuple(nd.shape) == tuple(th.shape)
    assert nd.stride() == th.stride() or nd.numel() == 0  # NumPy gives empty arrays 0 strides
    assert str(nd.dtype).split(".")[-1] == str(th.dtype).split(".")[-1]
    assert nd.requires_grad == th.requires_grad
    np.testing.assert_array_equal(np.asarray(nd._data), th.detach().numpy())


DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
          "complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_both_ways(dtype):
    vals = np.arange(-3, 9).reshape(3, 4)
    vals = vals * (1 - 2j) if "complex" in dtype else vals % 2 if dtype == "bool" else vals
    arr = vals.astype(getattr(ndgrad, dtype).np)
    t, n = torch.from_numpy(arr.copy()), ndgrad.tensor(arr)
    _eq(_t2n(t), t)
    _eq(n, _n2t(n))
    _eq(n, _n2t(n, weights_only=True))


def test_views_0d_empty_requires_grad_both_ways():
    def make(T):
        x = T.arange(24.0)
        return {"x": x, "v": x[2:].view(2, 11).t(), "s": x.view(4, 6)[1::2, ::3], "same": x,
                "z": T.tensor(3), "e": T.zeros(0, 3), "rg": T.ones(2, requires_grad=True),
                "p": T.nn.Parameter(T.ones(2, 2)), "q": T.nn.Parameter(T.ones(2), requires_grad=False)}

    got, want = _t2n(make(torch)), make(torch)
    for k in want:
        assert type(got[k]).__name__ == type(want[k]).__name__
        _eq(got[k], want[k])
    assert got["same"] is got["x"]
    got["x"]._data[9] = -1.0  # views of one storage share memory after loading, as in PyTorch
    assert got["v"][7, 0].item() == -1.0 and got["s"][0, 1].item() == -1.0
    nd = make(ndgrad)
    back = _n2t(nd)
    for k in nd:
        assert type(back[k]).__name__ == type(nd[k]).__name__
        _eq(nd[k], back[k])
    back["x"][9] = -1.0
    assert back["v"][7, 0].item() == -1.0 and back["s"][0, 1].item() == -1.0
    assert back["same"] is back["x"]


def test_containers_and_metadata_both_ways():
    def make(T):
        sd = collections.OrderedDict(w=T.ones(2))
        sd._metadata = collections.OrderedDict({"": {"version": 1}})
        return {"sd": sd, "t": (1, 2.5, None, True), "l": [[1], {"a": "b"}], "dt": T.float16,
                "dev": T.device("cpu"), "size": T.Size([2, 3]), "bytes": b"\x00\xff", "set": {1, 2},
                "c": 1 - 2j, "big": 2**70, "inf": float("inf"), "i": {0: 1}}

    for got, want in ((_t2n(make(torch)), make(ndgrad)), (_n2t(make(ndgrad)), make(torch))):
        assert type(got["sd"]) is collections.OrderedDict
        assert got["sd"]._metadata == {"": {"version": 1}}
        assert got["t"] == want["t"] and got["l"] == want["l"] and got["set"] == {1, 2}
        assert str(got["dt"]).endswith("float16") and str(got["dev"]) == "cpu"
        assert tuple(got["size"]) == (2, 3) and type(got["size"]).__name__ == "Size"
        assert got["bytes"] == b"\x00\xff" and got["c"] == 1 - 2j and got["big"] == 2**70
        assert got["inf"] == float("inf") and got["i"] == {0: 1}


class Custom:
    pass


def test_torch_load_refuses_what_torch_would():
    buf = io.BytesIO()
    ndgrad.save({"c": Custom()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(buf)
    buf.seek(0)
    # the same message from both
    with pytest.raises(pickle.UnpicklingError) as n:
        ndgrad.load(buf)
    tb = io.BytesIO()
    torch.save({"c": Custom()}, tb)
    tb.seek(0)
    with pytest.raises(pickle.UnpicklingError) as t:
        torch.load(tb)
    assert str(n.value) == str(t.value)


def test_bfloat16_and_other_torch_only_dtypes():
    if "bfloat16" in ndgrad._dtype._NAMES:
        got = _t2n({"w": torch.arange(4.0, dtype=torch.bfloat16)})
        assert got["w"].float().tolist() == [0.0, 1.0, 2.0, 3.0]
    else:
        with pytest.raises(RuntimeError, match="it holds data of dtype torch.bfloat16, which "
                                               "ndgrad does not support"):
            _t2n({"w": torch.ones(2, dtype=torch.bfloat16)})
    with pytest.raises(RuntimeError, match="dtype torch.uint16"):
        _t2n({"w": torch.ones(2, dtype=torch.uint16)})
    missing = "uint16" if "bfloat16" in ndgrad._dtype._NAMES else "bfloat16"
    with pytest.raises(RuntimeError, match=f"dtype torch.{missing}"):  # a dtype object, not data
        _t2n({"dt": getattr(torch, missing)})


def test_truncated_file_error_type(tmp_path):
    p = tmp_path / "a.pt"
    torch.save({"w": torch.ones(100)}, p)
    cut = tmp_path / "cut.pt"
    cut.write_bytes(p.read_bytes()[:-10])
    with pytest.raises(RuntimeError, match="failed finding central directory"):
        torch.load(cut)
    with pytest.raises(RuntimeError, match="failed finding central directory"):
        ndgrad.load(cut)
    # torch's own file names: the archive folder is the file's stem
    assert ndgrad.load(p)["w"].tolist() == [1.0] * 100
    ndgrad.save({"w": ndgrad.ones(2)}, tmp_path / "b.pt")
    import zipfile

    assert zipfile.ZipFile(tmp_path / "b.pt").namelist()[0] == "b/data.pkl"
    assert torch.load(tmp_path / "b.pt", mmap=True)["w"].tolist() == [1.0, 1.0]


# --- models ---
def _cnn(T):
    nn = T.nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(8, 4, 3), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 2 * 2, 10))


def _run(T, model, x):
    model.eval()
    with T.no_grad():
        return model(T.tensor(x)).numpy()


def test_cnn_state_dict_both_ways(tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    tm = _cnn(torch)
    tm.train()
    tm(torch.tensor(x))  # running statistics move away from their initial values
    torch.save(tm.state_dict(), tmp_path / "torch.pt")
    nm = _cnn(ndgrad)
    sd = ndgrad.load(tmp_path / "torch.pt")
    assert list(sd) == list(tm.state_dict()) and sd["1.num_batches_tracked"].item() == 1
    nm.load_state_dict(sd)
    np.testing.assert_allclose(_run(ndgrad, nm, x), _run(torch, tm, x), rtol=1e-5, atol=1e-5)
    # and back: an ndgrad model's weights in torch give ndgrad's outputs
    nm2 = _cnn(ndgrad)
    nm2.train()
    nm2(ndgrad.tensor(x))
    ndgrad.save(nm2.state_dict(), tmp_path / "nd.pt")
    tm2 = _cnn(torch)
    tm2.load_state_dict(torch.load(tmp_path / "nd.pt", weights_only=True))
    np.testing.assert_allclose(_run(torch, tm2, x), _run(ndgrad, nm2, x), rtol=1e-5, atol=1e-5)


def test_lstm_weights_both_ways():
    lstm = torch.nn.LSTM(5, 7, num_layers=2, bidirectional=True)
    sd = lstm.state_dict()
    got = _t2n(sd)
    assert list(got) == list(sd) and "weight_ih_l0" in got and "bias_hh_l1_reverse" in got
    for k in sd:
        _eq(got[k], sd[k])
    if hasattr(ndgrad.nn, "LSTM"):
        nl = ndgrad.nn.LSTM(5, 7, num_layers=2, bidirectional=True)
        nl.load_state_dict(got)
        x = np.random.default_rng(1).standard_normal((4, 3, 5)).astype(np.float32)
        with torch.no_grad(), ndgrad.no_grad():
            np.testing.assert_allclose(nl(ndgrad.tensor(x))[0].numpy(),
                                       lstm(torch.tensor(x))[0].numpy(), rtol=1e-5, atol=1e-5)
        nsd = nl.state_dict()
    else:  # plain tensors under LSTM's parameter names
        nsd = collections.OrderedDict((k, ndgrad.randn(*v.shape)) for k, v in sd.items())
    lstm.load_state_dict(_n2t(nsd))
    for k, v in lstm.state_dict().items():
        _eq(nsd[k].detach(), v)


def test_optimizer_state_dicts_both_ways():
    def train(T, w0):
        w = T.nn.Parameter(T.tensor(w0))
        opt = T.optim.Adam([w], lr=0.1, betas=(0.8, 0.9))
        for _ in range(3):
            opt.zero_grad()
            (w ** 2).sum().backward()
            opt.step()
        return w, opt

    w0 = np.array([1.0, -2.0, 3.0], np.float32)
    tw, topt = train(torch, w0)
    nw, nopt = train(ndgrad, w0)
    got = _t2n(topt.state_dict())
    assert got["param_groups"][0]["betas"] == (0.8, 0.9) and list(got["state"]) == [0]
    nopt.load_state_dict(got)
    back = _n2t(nopt.state_dict(), weights_only=True)
    topt.load_state_dict(back)
    for a, b in ((nopt, nw), (topt, tw)):
        a.zero_grad()
        (b ** 2).sum().backward()
        a.step()
    np.testing.assert_allclose(nw.detach().numpy(), tw.detach().numpy(), rtol=1e-6)


def test_reads_torch_files_without_torch(tmp_path):
    """The reader never imports torch: load a torch.save file in a process where it cannot."""
    p = tmp_path / "sd.pt"
    torch.save({"w": torch.arange(6.0).view(2, 3), "p": torch.nn.Parameter(torch.ones(2))}, p)
    code = ("import sys; sys.modules['torch'] = None\n"
            "import ndgrad\n"
            f"sd = ndgrad.load({str(p)!r})\n"
            "assert sd['w'].tolist() == [[0, 1, 2], [3, 4, 5]]\n"
            "assert type(sd['p']).__name__ == 'Parameter'\n"
            "ndgrad.save(sd, sys.argv[1])\n")
    out = tmp_path / "nd.pt"
    subprocess.run([sys.executable, "-c", code, str(out)], check=True)
    assert torch.load(out)["w"].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_safetensors_from_torch(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    sd = {"w": torch.randn(3, 4), "i": torch.arange(3)}
    st.save_file(sd, str(tmp_path / "t.safetensors"))
    got = ndgrad.load(tmp_path / "t.safetensors")
    for k, v in sd.items():
        _eq(got[k], v)
    ndgrad.serialization.save_safetensors(got, tmp_path / "n.safetensors")
    back = st.load_file(str(tmp_path / "n.safetensors"))
    for k, v in sd.items():
        assert torch.equal(back[k], v)
    st.save_file({"w": torch.ones(2, dtype=torch.uint16)}, str(tmp_path / "u16.safetensors"))
    with pytest.raises(RuntimeError, match="it holds data of dtype U16, which ndgrad does not"):
        ndgrad.load(tmp_path / "u16.safetensors")


def test_whole_torch_module_with_weights_only_false():
    m = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())
    got = _t2n(m, weights_only=False)
    assert type(got) is ndgrad.nn.Sequential and type(got[0]) is ndgrad.nn.Linear
    with torch.no_grad(), ndgrad.no_grad():
        np.testing.assert_allclose(got(ndgrad.ones(1, 2)).numpy(), m(torch.ones(1, 2)).numpy(),
                                   rtol=1e-6)
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global: GLOBAL "
                                                     "torch.nn.modules.container.Sequential"):
        _t2n(m)


def test_tensor_attributes_dropped_with_a_warning():
    t = torch.ones(2)
    t.foo = 3
    with pytest.warns(UserWarning, match=r"attributes \['foo'\] of a saved tensor are dropped"):
        assert _t2n({"t": t})["t"].tolist() == [1.0, 1.0]
    p = torch.nn.Parameter(torch.ones(2))
    p.bar = 4
    got = _t2n(p)
    assert type(got) is ndgrad.nn.Parameter and got.bar == 4
    n = ndgrad.nn.Parameter(ndgrad.ones(2))
    n.bar = 5
    assert _n2t(n).bar == 5


def test_zip64_records(monkeypatch):
    """Storages over 4 GiB take zip64 headers; shrink the limit to test that path cheaply."""
    import zipfile

    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1000)
    sd = {"w": ndgrad.arange(2000.0), "b": ndgrad.ones(3)}
    buf = io.BytesIO()
    ndgrad.save(sd, buf)
    raw = buf.getvalue()
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        for info in zf.infolist():
            nl, el = np.frombuffer(raw[info.header_offset + 26:info.header_offset + 30], "<u2")
            assert (info.header_offset + 30 + int(nl) + int(el)) % 64 == 0, info.filename
    monkeypatch.undo()
    assert ndgrad.load(io.BytesIO(raw))["w"].tolist() == sd["w"].tolist()
    got = torch.load(io.BytesIO(raw))
    assert got["w"].tolist() == sd["w"].tolist() and got["b"].tolist() == [1.0] * 3
