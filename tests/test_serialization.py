"""ndgrad.save / ndgrad.load: round trips (dtypes, views, containers) and bad files."""

from __future__ import annotations

import collections
import io
import json
import pickle
import zipfile

import numpy as np
import pytest

import ndgrad


def _roundtrip(obj, **kw):
    buf = io.BytesIO()
    ndgrad.save(obj, buf)
    buf.seek(0)
    return ndgrad.load(buf, **kw)


def _same(a, b):
    assert type(a) is type(b)
    assert a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
    assert a.stride() == b.stride()
    np.testing.assert_array_equal(a._data, b._data)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16",
                                   "float32", "float64", "complex64", "complex128"])
def test_dtypes(dtype):
    vals = np.arange(-3, 9).reshape(3, 4)
    vals = vals * (1 - 2j) if "complex" in dtype else vals % 2 if dtype == "bool" else vals
    x = ndgrad.tensor(vals.astype(getattr(ndgrad, dtype).np))
    _same(_roundtrip(x), x)


def test_0d_empty_noncontiguous():
    for x in (ndgrad.tensor(3.5), ndgrad.tensor(7), ndgrad.zeros(0, 3), ndgrad.ones(2, 0, 4),
              ndgrad.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
              ndgrad.arange(24.0).reshape(4, 6)[1::2, ::3]):
        _same(_roundtrip(x), x)


def test_requires_grad_and_parameters():
    x = ndgrad.ones(2, requires_grad=True)
    y = x * 2  # non-leaf: comes back a leaf that requires grad, as in PyTorch
    p = ndgrad.nn.Parameter(ndgrad.zeros(3))
    q = ndgrad.nn.Parameter(ndgrad.zeros(3), requires_grad=False)
    gx, gy, gp, gq = _roundtrip([x, y, p, q])
    assert gx.requires_grad and gx.is_leaf and gy.requires_grad and gy.is_leaf
    assert type(gp) is ndgrad.nn.Parameter and gp.requires_grad
    assert type(gq) is ndgrad.nn.Parameter and not gq.requires_grad


def test_views_share_storage():
    x = ndgrad.arange(12.0)
    objs = {"x": x, "tail": x[4:], "t": x.reshape(3, 4).t(), "same": x}
    buf = io.BytesIO()
    ndgrad.save(objs, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        assert [n for n in zf.namelist() if n.startswith("storages/")] == ["storages/0.npy"]
    buf.seek(0)
    got = ndgrad.load(buf)
    assert got["same"] is got["x"]  # identity kept, like pickle's memo
    assert got["tail"].stride() == (1,) and got["t"].stride() == (1, 4)
    _same(got["t"], objs["t"])
    got["x"]._data[5] = -1.0  # one memory: a write through one shows through the others
    assert got["tail"][1].item() == -1.0 and got["t"][1, 1].item() == -1.0


def test_nested_state_dicts(ref):
    sd = collections.OrderedDict(w=ndgrad.randn(3, 2), b=ndgrad.zeros(2))
    sd._metadata = collections.OrderedDict({"": {"version": 1}})
    opt = {"state": {0: {"step": ndgrad.tensor(3.0), "exp_avg": ndgrad.ones(3, 2)}},
           "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1], "amsgrad": False,
                             "name": None, "eps": float("inf"), "nan": float("nan")}]}
    extras = {"size": ndgrad.Size([2, 3]), "dtype": ndgrad.float16, "dev": ndgrad.device("cpu"),
              "c": 1 - 2j, "b": b"\x00\xff", "s": {1, 2}, "big": 2**70, "np": np.arange(3),
              "npf": np.float32(2.5)}
    got = _roundtrip({"model": sd, "opt": opt, "extras": extras, "epoch": 4})
    assert type(got["model"]) is collections.OrderedDict and list(got["model"]) == ["w", "b"]
    assert got["model"]._metadata == {"": {"version": 1}}
    _same(got["model"]["w"], sd["w"])
    g = got["opt"]["param_groups"][0]
    assert g["betas"] == (0.9, 0.999) and g["params"] == [0, 1] and g["eps"] == float("inf")
    assert g["nan"] != g["nan"] and g["name"] is None and g["amsgrad"] is False
    assert list(got["opt"]["state"]) == [0]
    _same(got["opt"]["state"][0]["step"], opt["state"][0]["step"])
    e = got["extras"]
    assert e["size"] == (2, 3) and type(e["size"]) is ndgrad.Size and e["dtype"] is ndgrad.float16
    assert e["dev"] == ndgrad.device("cpu") and e["c"] == 1 - 2j and e["b"] == b"\x00\xff"
    assert e["s"] == {1, 2} and e["big"] == 2**70 and e["npf"] == np.float32(2.5)
    np.testing.assert_array_equal(e["np"], np.arange(3))
    assert got["epoch"] == 4


def test_paths(tmp_path):
    p = tmp_path / "ckpt.pt"
    ndgrad.save({"a": ndgrad.ones(2)}, p)
    assert ndgrad.load(str(p))["a"].tolist() == [1.0, 1.0]
    assert ndgrad.load(p, map_location="cpu")["a"].tolist() == [1.0, 1.0]
    assert ndgrad.load(p, map_location=lambda t, loc: t * 2)["a"].tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="Parent directory .* does not exist."):
        ndgrad.save(1, tmp_path / "nope" / "x.pt")
    with pytest.raises(FileNotFoundError):
        ndgrad.load(tmp_path / "missing.pt")


def test_structure_is_plain_json():
    buf = io.BytesIO()
    ndgrad.save({"w": ndgrad.ones(2, 3, dtype=ndgrad.int32)}, buf)
    with zipfile.ZipFile(buf) as zf:
        doc = json.loads(zf.read("structure.json"))
    assert doc["format"] == "ndgrad.checkpoint" and doc["version"] == 1
    assert doc["tensors"] == [{"storage": 0, "dtype": "int32", "shape": [2, 3], "stride": [3, 1],
                               "offset": 0, "requires_grad": False, "parameter": False}]
    assert doc["object"] == {"type": "dict", "items": [["w", {"type": "tensor", "index": 0}]]}


class Custom:
    def __init__(self):
        self.v = 5


def test_weights_only_refuses_pickles():
    buf = io.BytesIO()
    ndgrad.save({"obj": Custom()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        ndgrad.load(buf)
    buf.seek(0)
    assert ndgrad.load(buf, weights_only=False)["obj"].v == 5


def _zip(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    buf.seek(0)
    return buf


def _doc(**over):
    doc = {"format": "ndgrad.checkpoint", "version": 1, "storages": [], "tensors": [], "object": 1}
    doc.update(over)
    return json.dumps(doc)


def _npy(arr):
    b = io.BytesIO()
    np.lib.format.write_array(b, arr, allow_pickle=True)
    return b.getvalue()


def test_bad_files(ref):
    ref.raises(lambda T: T.load(io.BytesIO(b"")), EOFError)
    with pytest.raises(pickle.UnpicklingError, match="not a zip archive"):
        ndgrad.load(io.BytesIO(b"garbage"))
    with pytest.raises(pickle.UnpicklingError, match="no structure.json"):
        ndgrad.load(_zip({"data.pkl": b"x"}))
    with pytest.raises(pickle.UnpicklingError, match="not valid JSON"):
        ndgrad.load(_zip({"structure.json": b"{"}))
    with pytest.raises(pickle.UnpicklingError, match="does not describe"):
        ndgrad.load(_zip({"structure.json": b"[]"}))
    with pytest.raises(pickle.UnpicklingError, match="version 9"):
        ndgrad.load(_zip({"structure.json": _doc(version=9)}))
    with pytest.raises(pickle.UnpicklingError, match="unknown record type"):
        ndgrad.load(_zip({"structure.json": _doc(object={"type": "eval"})}))
    tensor = {"storage": 0, "dtype": "float64", "shape": [4], "stride": [1], "offset": 0}
    storage = [{"file": "storages/0.npy", "dtype": "float64", "numel": 3}]
    obj = {"type": "tensor", "index": 0}
    with pytest.raises(pickle.UnpicklingError, match="outside its storage"):
        ndgrad.load(_zip({"structure.json": _doc(storages=storage, tensors=[tensor], object=obj),
                          "storages/0.npy": _npy(np.zeros(3))}))
    with pytest.raises(pickle.UnpicklingError, match="cannot be read"):
        ndgrad.load(_zip({"structure.json": _doc(storages=storage, tensors=[tensor], object=obj),
                          "storages/0.npy": _npy(np.array([Custom()], dtype=object))}))
    with pytest.raises(pickle.UnpicklingError, match="cannot be read"):
        ndgrad.load(_zip({"structure.json": _doc(storages=storage, tensors=[tensor], object=obj)}))
    if not ndgrad.cuda.is_available():
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
            ndgrad.load(io.BytesIO(b""), map_location="cuda")
