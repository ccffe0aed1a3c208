"""ndgrad.save / ndgrad.load: round trips in PyTorch's format (dtypes, views, containers), files of
ndgrad's earlier format, safetensors, atomic saves and bad files. Checks against torch itself are
in test_serialization_torch.py; everything here runs without torch."""

from __future__ import annotations

import collections
import io
import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

import ndgrad
from ndgrad import _serialization_legacy as legacy


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
        assert [n for n in zf.namelist() if "/data/" in n] == ["archive/data/0"]
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


def _legacy_roundtrip(obj, **kw):
    """Write ``obj`` as ndgrad versions before the PyTorch format did, and load it today."""
    buf = io.BytesIO()
    legacy.save_legacy(obj, buf)
    buf.seek(0)
    return ndgrad.load(buf, **kw)


def test_torch_layout():
    buf = io.BytesIO()
    ndgrad.save({"w": ndgrad.ones(2, 3, dtype=ndgrad.int32)}, buf)
    raw = buf.getvalue()
    with zipfile.ZipFile(buf) as zf:
        assert zf.namelist() == ["archive/data.pkl", "archive/.format_version",
                                 "archive/.storage_alignment", "archive/byteorder",
                                 "archive/data/0", "archive/version",
                                 "archive/.data/serialization_id"]
        assert zf.read("archive/byteorder") == sys.byteorder.encode()
        assert zf.read("archive/version") == b"3\n"
        assert len(zf.read("archive/.data/serialization_id")) == 40
        pkl = zf.read("archive/data.pkl")
        for info in zf.infolist():  # every record starts on a 64-byte boundary, as torch's
            nl, el = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
            assert (info.header_offset + 30 + nl + el) % 64 == 0, info.filename
    assert b"torch._utils\n_rebuild_tensor_v2" in pkl and b"torch\nIntStorage" in pkl
    assert np.frombuffer(zipfile.ZipFile(buf).read("archive/data/0"), np.int32).tolist() == [1] * 6


def test_legacy_format_loads():
    """Checkpoints written by earlier ndgrad versions (their own zip of JSON + .npy) still load."""
    buf = io.BytesIO()
    legacy.save_legacy({"w": ndgrad.ones(2, 3, dtype=ndgrad.int32)}, buf)
    with zipfile.ZipFile(buf) as zf:
        doc = json.loads(zf.read("structure.json"))
    assert doc["format"] == "ndgrad.checkpoint" and doc["version"] == 1
    assert doc["tensors"] == [{"storage": 0, "dtype": "int32", "shape": [2, 3], "stride": [3, 1],
                               "offset": 0, "requires_grad": False, "parameter": False}]
    assert doc["object"] == {"type": "dict", "items": [["w", {"type": "tensor", "index": 0}]]}
    buf.seek(0)
    assert ndgrad.load(buf)["w"].tolist() == [[1, 1, 1]] * 2
    x = ndgrad.arange(12.0)
    p = ndgrad.nn.Parameter(ndgrad.zeros(3))
    sd = collections.OrderedDict(w=x, t=x.reshape(3, 4).t(), p=p)
    sd._metadata = {"": {"version": 1}}
    got = _legacy_roundtrip({"sd": sd, "opt": {"state": {0: {"step": 3}}}, "np": np.arange(2),
                             "dt": ndgrad.float16, "s": {1}})
    assert type(got["sd"]["p"]) is ndgrad.nn.Parameter and got["sd"]._metadata == sd._metadata
    _same(got["sd"]["t"], sd["t"])
    got["sd"]["w"]._data[1] = -1.0
    assert got["sd"]["t"][1, 0].item() == -1.0
    assert got["opt"] == {"state": {0: {"step": 3}}} and got["dt"] is ndgrad.float16
    assert got["s"] == {1} and got["np"].tolist() == [0, 1]
    assert _legacy_roundtrip([1.0], map_location=lambda t, loc: t) == [1.0]
    buf = io.BytesIO()
    legacy.save_legacy({"obj": Custom()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        ndgrad.load(buf)
    buf.seek(0)
    assert ndgrad.load(buf, weights_only=False)["obj"].v == 5


class Custom:
    def __init__(self):
        self.v = 5


def test_weights_only_refuses_other_globals():
    buf = io.BytesIO()
    ndgrad.save({"obj": Custom()}, buf)
    buf.seek(0)
    msg = (r"(?s)Weights only load failed.*`weights_only` set to `False` will likely succeed.*"
           r"Unsupported global: GLOBAL test_serialization.Custom was not an allowed global")
    with pytest.raises(pickle.UnpicklingError, match=msg):
        ndgrad.load(buf)
    buf.seek(0)
    assert ndgrad.load(buf, weights_only=False)["obj"].v == 5
    with ndgrad.serialization.safe_globals([Custom]):
        buf.seek(0)
        assert ndgrad.load(buf)["obj"].v == 5
        assert Custom in ndgrad.serialization.get_safe_globals()
    assert Custom not in ndgrad.serialization.get_safe_globals()
    buf.seek(0)
    with pytest.raises(RuntimeError, match="Can not safely load weights when explicit "
                                           "pickle_module is specified"):
        ndgrad.load(buf, pickle_module=pickle, weights_only=True)
    buf.seek(0)
    assert ndgrad.load(buf, pickle_module=pickle)["obj"].v == 5  # weights_only then defaults False


def _pickled(payload: bytes) -> io.BytesIO:
    """A PyTorch-layout archive around a hand-written data.pkl."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", payload)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", np.arange(4, dtype=np.float32).tobytes())
    buf.seek(0)
    return buf


def test_weights_only_blocks_code():
    # os.system("echo pwned") as a pickle: refused before anything runs
    evil = b"\x80\x02cposix\nsystem\nX\n\x00\x00\x00echo pwned\x85R."
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL posix.system was not an allowed"):
        ndgrad.load(_pickled(evil))
    # _codecs.encode is allowed for protocol 2's bytes only (latin1)
    enc = b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x04\x00\x00\x00zlib\x86R."
    with pytest.raises(pickle.UnpicklingError, match="not allowed"):
        ndgrad.load(_pickled(enc))
    # a tensor reaching past its storage (4 floats) is refused
    pid = b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04tQ"
    bad = (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + pid + b"K\x02K\x05\x85K\x01\x85"
           b"\x89ccollections\nOrderedDict\n)RtR.")
    with pytest.raises(pickle.UnpicklingError, match="lies outside its storage of 4 elements"):
        ndgrad.load(_pickled(bad))
    good = bad.replace(b"K\x02K\x05", b"K\x01K\x03")
    assert ndgrad.load(_pickled(good)).tolist() == [1.0, 2.0, 3.0]


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
    with pytest.raises(pickle.UnpicklingError, match="not a checkpoint written by torch.save"):
        ndgrad.load(io.BytesIO(b"garbage"))
    with pytest.raises(RuntimeError, match="a zip archive that is not a checkpoint"):
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


def test_bad_files_name_the_file(tmp_path):
    good = tmp_path / "good.pt"
    ndgrad.save({"w": ndgrad.randn(1000)}, good)
    raw = good.read_bytes()
    for cut in (len(raw) // 2, len(raw) - 10):
        bad = tmp_path / f"cut{cut}.pt"
        bad.write_bytes(raw[:cut])
        # NOTE(pytorch): torch.load raises RuntimeError ("failed finding central directory") too
        with pytest.raises(RuntimeError, match=f"Cannot load '{bad}': failed reading zip archive: "
                                               "failed finding central directory"):
            ndgrad.load(bad)
    text = tmp_path / "notes.txt"
    text.write_text("hello, not a checkpoint")
    with pytest.raises(pickle.UnpicklingError, match=f"Cannot load '{text}': it is not a checkpoint"):
        ndgrad.load(text)
    with pytest.raises(pickle.UnpicklingError, match="Cannot load 'x.bin'"):
        f = io.BytesIO(b"\x00" * 20)
        f.name = "x.bin"
        ndgrad.load(f)
    # PyTorch's legacy (pre-1.6, non-zip) format: the start of such a file
    legacy_file = tmp_path / "legacy.pt"
    legacy_file.write_bytes(b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.")
    with pytest.raises(RuntimeError, match=f"Cannot load '{legacy_file}': it is in PyTorch's "
                                           "legacy \\(non-zip\\) format"):
        ndgrad.load(legacy_file)
    with pytest.raises(IsADirectoryError):
        ndgrad.load(tmp_path)
    with pytest.raises(ValueError, match="f must be a file path in order to use the mmap argument"):
        ndgrad.load(io.BytesIO(raw), mmap=True)


def _rewrite(buf: io.BytesIO, change) -> io.BytesIO:
    """A copy of an archive with ``change(name, data) -> data`` applied to every record."""
    out = io.BytesIO()
    with zipfile.ZipFile(buf) as zi, zipfile.ZipFile(out, "w") as zo:
        for name in zi.namelist():
            zo.writestr(name, change(name, zi.read(name)))
    out.seek(0)
    return out


def test_big_endian_files_and_unknown_dtypes():
    buf = io.BytesIO()
    ndgrad.save({"f": ndgrad.arange(6.0).reshape(2, 3), "i": ndgrad.arange(3, dtype=ndgrad.int16),
                 "b": ndgrad.tensor([True, False])}, buf)
    swap = {"0": np.float32, "1": np.int16, "2": np.bool_}

    def to_big(name, data):
        if name.endswith("byteorder"):
            return b"big"
        if "/data/" in name:
            return np.frombuffer(data, swap[name[-1]]).byteswap().tobytes()
        return data

    got = ndgrad.load(_rewrite(buf, to_big))  # NOTE(pytorch): torch.load byte-swaps them too
    assert got["f"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and got["f"].dtype == ndgrad.float32
    assert got["i"].tolist() == [0, 1, 2] and got["b"].tolist() == [True, False]
    with pytest.raises(RuntimeError, match="unknown byteorder 'middle'"):
        ndgrad.load(_rewrite(buf, lambda n, d: b"middle" if n.endswith("byteorder") else d))
    if "bfloat16" not in ndgrad._dtype._NAMES:
        bf = _rewrite(buf, lambda n, d: d.replace(b"torch\nInt16Storage", b"torch\nBFloat16Storage")
                      .replace(b"torch\nShortStorage", b"torch\nBFloat16Storage"))
        with pytest.raises(RuntimeError, match="it holds data of dtype torch.bfloat16, which ndgrad "
                                               "does not support"):
            ndgrad.load(bf)


def test_mmap(tmp_path):
    p = tmp_path / "m.pt"
    x = ndgrad.arange(10.0)
    ndgrad.save({"x": x, "tail": x[3:]}, p)
    got = ndgrad.load(p, mmap=True)
    assert isinstance(got["x"]._data.base, np.ndarray) and got["tail"].tolist() == x[3:].tolist()
    got["x"]._data[3] = -1.0  # copy-on-write: the view sees it, the file does not
    assert got["tail"][0].item() == -1.0 and ndgrad.load(p)["x"][3].item() == 3.0


# --- atomic saves ---
def test_failed_save_keeps_previous_file(tmp_path, monkeypatch):
    p = tmp_path / "ckpt.pt"
    ndgrad.save({"epoch": 1, "w": ndgrad.ones(3)}, p)
    os.chmod(p, 0o640)

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("boom while pickling")

    with pytest.raises(RuntimeError, match="boom while pickling"):
        ndgrad.save({"epoch": 2, "w": ndgrad.zeros(3), "bad": Unpicklable()}, p)
    assert ndgrad.load(p)["epoch"] == 1
    # a failure while the storages are being written, after data.pkl
    calls = []
    real = ndgrad.serialization._write_record

    def failing(zf, name, data):
        calls.append(name)
        if "/data/" in name:
            raise OSError(28, "No space left on device")
        real(zf, name, data)

    monkeypatch.setattr(ndgrad.serialization, "_write_record", failing)
    with pytest.raises(OSError, match="No space left"):
        ndgrad.save({"epoch": 3, "w": ndgrad.zeros(3)}, p)
    monkeypatch.undo()
    assert "archive/data.pkl" not in calls and any("/data/" in c for c in calls)
    assert ndgrad.load(p)["epoch"] == 1 and ndgrad.load(p)["w"].tolist() == [1.0] * 3
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # the temporary file is gone
    ndgrad.save({"epoch": 4}, p)
    assert ndgrad.load(p)["epoch"] == 4 and os.stat(p).st_mode & 0o777 == 0o640
    # through a symlink: the file it points at is replaced, the link stays
    link = tmp_path / "link.pt"
    link.symlink_to(p)
    ndgrad.save({"epoch": 5}, link)
    assert link.is_symlink() and ndgrad.load(p)["epoch"] == 5
    ndgrad.save({"epoch": 6}, os.devnull)  # not a regular file: written in place


_KILLED_SAVE = """
import sys, ndgrad
big = ndgrad.zeros(30_000_000)  # 120 MB: each save takes a while
print("saving", flush=True)
for epoch in range(2, 10**6):  # save after save, until killed
    big[0] = epoch
    ndgrad.save({"w": big, "epoch": epoch}, sys.argv[1])
"""


def test_killed_save_keeps_previous_file(tmp_path):
    p = tmp_path / "ckpt.pt"
    ndgrad.save({"epoch": 1}, p)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_SAVE, str(p)], stdout=subprocess.PIPE,
                            env=env)
    try:
        assert proc.stdout.readline() == b"saving\n"
        deadline = time.monotonic() + 60
        while True:  # kill it while a temporary file is half written
            assert time.monotonic() < deadline and proc.poll() is None
            sizes = [os.stat(tmp_path / n).st_size for n in os.listdir(tmp_path)
                     if n.endswith(".tmp")]
            if any(10 << 20 < s < 100 << 20 for s in sizes):
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    got = ndgrad.load(p)  # the previous save, complete: the first file or a later whole one
    assert got["epoch"] == 1 or (got["w"].shape == (30_000_000,)
                                 and got["w"][0].item() == got["epoch"])
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]  # the torn one, never renamed


# --- safetensors ---
def test_safetensors(tmp_path):
    pytest.importorskip("safetensors")
    from safetensors.numpy import load_file, save_file

    sd = {"w": ndgrad.randn(3, 4), "t": ndgrad.randn(4, 3).t(), "i": ndgrad.arange(5),
          "b": ndgrad.tensor([True, False]), "h": ndgrad.ones(2, dtype=ndgrad.float16)}
    p = tmp_path / "model.safetensors"
    ndgrad.serialization.save_safetensors(sd, p, metadata={"format": "pt"})
    np.testing.assert_array_equal(load_file(str(p))["t"], sd["t"]._data)  # the package reads it
    for got in (ndgrad.serialization.load_safetensors(p), ndgrad.load(p)):
        assert sorted(got) == sorted(sd)
        for k, v in sd.items():
            assert got[k].dtype == v.dtype and got[k].tolist() == v.tolist()
    save_file({"x": np.arange(3, dtype=np.int32)}, str(tmp_path / "np.safetensors"))
    assert ndgrad.load(tmp_path / "np.safetensors")["x"].tolist() == [0, 1, 2]
    assert ndgrad.load(p, map_location=lambda t, loc: t * 0)["w"].sum().item() == 0
    with pytest.raises(ValueError, match="Key `x` is invalid, expected torch.Tensor"):
        ndgrad.serialization.save_safetensors({"x": 1}, p)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(p.read_bytes()[:40])
    with pytest.raises(RuntimeError, match=f"Cannot load '{bad}' as a .safetensors file"):
        ndgrad.load(bad)


def test_unseekable_streams():
    class Sink:  # a pipe-like writer: no seek, no tell
        def __init__(self):
            self.buf = io.BytesIO()

        def write(self, data):
            return self.buf.write(data)

        def flush(self):
            pass

    class Source:
        def __init__(self, raw):
            self.buf = io.BytesIO(raw)

        def read(self, n=-1):
            return self.buf.read(n)

    sink = Sink()
    x = ndgrad.arange(6.0)
    ndgrad.save({"x": x, "v": x[2:]}, sink)
    got = ndgrad.load(Source(sink.buf.getvalue()))
    assert got["v"].tolist() == [2.0, 3.0, 4.0, 5.0]
    got["x"]._data[2] = -1.0
    assert got["v"][0].item() == -1.0
