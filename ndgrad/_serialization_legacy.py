"""ndgrad's own checkpoint format of earlier versions (a zip of ``structure.json`` plus one
``.npy`` file per storage; docs/SERIALIZATION.md, "ndgrad's earlier format"): read so old
checkpoints keep loading, and written only by ``save_legacy`` (tests make old-format files with it).
``ndgrad.save`` writes PyTorch's format (ndgrad/serialization.py).
"""

from __future__ import annotations

import base64
import collections
import json
import math
import pickle
import zipfile

import numpy as np

from . import _backend
from . import _dtype as D
from ._tensor import Size, Tensor

__all__ = ["STRUCTURE", "load_legacy", "save_legacy"]

FORMAT = "ndgrad.checkpoint"
VERSION = 1
STRUCTURE = "structure.json"
_NAMES = {d.name: d for d in D.ALL}


def _parameter_cls():
    # nn.Parameter is optional here (nn imports after this module may be mid-construction)
    from .nn import parameter

    return getattr(parameter, "Parameter", None)


# --- save ---
class _Writer:
    """Encodes an object tree into JSON-able values, collecting tensors and storages."""

    def __init__(self, zf: zipfile.ZipFile):
        self.zf = zf
        self.param_cls = _parameter_cls()
        self.tensors: list[dict] = []
        self.tensor_ids: dict[int, int] = {}  # id(tensor) -> index; keeps identity, like pickle's memo
        self.keep: list = []  # objects whose ids are memo keys stay alive until the save ends
        self.storages: list[dict] = []
        self.storage_ids: dict[int, tuple] = {}  # id(root array) -> (index, root address)
        self.pickles = 0

    def encode(self, obj):
        t = type(obj)
        if obj is None or t is bool or t is int or t is str:
            return obj
        if t is float:
            return obj if math.isfinite(obj) else {"type": "float", "value": repr(obj)}
        if t is list:
            return [self.encode(x) for x in obj]
        if isinstance(obj, Tensor):
            return {"type": "tensor", "index": self.tensor(obj)}
        if t is tuple:
            return {"type": "tuple", "items": [self.encode(x) for x in obj]}
        if t is dict or t is collections.OrderedDict:
            out = {"type": t.__name__,
                   "items": [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
            # NOTE(pytorch): Module.state_dict() hangs `_metadata` on its OrderedDict; keep it
            attrs = getattr(obj, "__dict__", None)
            if attrs:
                out["attrs"] = {k: self.encode(v) for k, v in attrs.items()}
            return out
        if t is complex:
            return {"type": "complex", "real": self.encode(obj.real), "imag": self.encode(obj.imag)}
        if t is set or t is frozenset:
            return {"type": t.__name__, "items": [self.encode(x) for x in obj]}
        if t is bytes:
            return {"type": "bytes", "base64": base64.b64encode(obj).decode("ascii")}
        if t is Size:
            return {"type": "Size", "items": list(obj)}
        if t is D.dtype:
            return {"type": "dtype", "name": obj.name}
        if t is _backend.Device:
            return {"type": "device", "name": str(obj)}
        if t is np.ndarray and obj.dtype in D._FROM_NP:
            return {"type": "ndarray", **self.array(obj)}
        if isinstance(obj, np.generic) and obj.dtype in D._FROM_NP:
            return {"type": "numpy_scalar", **self.array(np.asarray(obj))}
        return self.pickle(obj)

    def tensor(self, t: Tensor) -> int:
        idx = self.tensor_ids.get(id(t))
        if idx is None:
            a = t._data
            if type(a) is not np.ndarray:  # a device array: its storage is written from a host copy
                a = _backend.device_type(t.device).to_host(a)
            rec = self.array(a)
            if t.device.type != "cpu":
                rec["device"] = str(t.device)
            rec["requires_grad"] = bool(t.requires_grad)
            rec["parameter"] = self.param_cls is not None and isinstance(t, self.param_cls)
            idx = self.tensor_ids[id(t)] = len(self.tensors)
            self.tensors.append(rec)
            self.keep.append(t)
        return idx

    def array(self, a: np.ndarray) -> dict:
        """A view record (storage, dtype, shape, stride, offset), writing its storage if new."""
        item = a.itemsize
        root = a
        while isinstance(root.base, np.ndarray):
            root = root.base
        addr = a.__array_interface__["data"][0]
        placed = None
        if root.flags.c_contiguous or root.flags.f_contiguous:
            key = self.storage_ids.get(id(root))
            if key is None:
                key = self.storage_ids[id(root)] = (
                    self.write_storage(root.ravel(order="K")), root.__array_interface__["data"][0])
                self.keep.append(root)
            off = addr - key[1]
            if off % item == 0 and all(s % item == 0 for s in a.strides) \
                    and root.nbytes % item == 0:
                placed = key[0], off // item, [s // item for s in a.strides]
        if placed is None:
            # a reinterpreting view that element units cannot express: save it on its own
            flat = np.ascontiguousarray(a)
            placed = (self.write_storage(flat.reshape(-1)), 0,
                      [s // item for s in flat.strides])
        return {"storage": placed[0], "dtype": D._FROM_NP[a.dtype].name, "shape": list(a.shape),
                "stride": placed[2], "offset": placed[1]}

    def write_storage(self, flat: np.ndarray) -> int:
        idx = len(self.storages)
        name = f"storages/{idx}.npy"
        with self.zf.open(name, "w", force_zip64=True) as fh:
            np.lib.format.write_array(fh, flat, allow_pickle=False)
        self.storages.append({"file": name, "dtype": D._FROM_NP[flat.dtype].name,
                              "numel": int(flat.size)})
        return idx

    def pickle(self, obj) -> dict:
        name = f"pickles/{self.pickles}.pkl"
        self.pickles += 1
        self.zf.writestr(name, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        return {"type": "pickle", "file": name, "class": f"{type(obj).__module__}.{type(obj).__qualname__}"}


def save_legacy(obj, fh) -> None:
    """Write ``obj`` to the binary file ``fh`` in the earlier ndgrad format."""
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
        w = _Writer(zf)
        tree = w.encode(obj)
        doc = {"format": FORMAT, "version": VERSION, "byteorder": "little",
               "storages": w.storages, "tensors": w.tensors, "object": tree}
        zf.writestr(STRUCTURE, json.dumps(doc, allow_nan=False))


# --- load ---
_WEIGHTS_ONLY_MSG = (
    "Weights only load failed. The checkpoint holds an object of type {cls} that only a full "
    "unpickle can rebuild. Re-running `ndgrad.load` with `weights_only` set to `False` will "
    "succeed, but it can result in arbitrary code execution. Do it only if you got the file "
    "from a trusted source."
)


def _bad(msg: str):
    return pickle.UnpicklingError(f"Invalid ndgrad checkpoint: {msg}")


class _Reader:
    def __init__(self, zf: zipfile.ZipFile, doc: dict, weights_only: bool, place):
        self.zf, self.doc, self.weights_only, self.place = zf, doc, weights_only, place
        self.storages: dict[int, np.ndarray] = {}
        self.tensors: dict[int, Tensor] = {}
        self.param_cls = _parameter_cls()

    def storage(self, idx) -> np.ndarray:
        arr = self.storages.get(idx)
        if arr is None:
            try:
                rec = self.doc["storages"][idx]
                with self.zf.open(rec["file"]) as fh:
                    arr = np.lib.format.read_array(fh, allow_pickle=False)
            except (KeyError, IndexError, TypeError, ValueError) as e:
                raise _bad(f"storage {idx!r} cannot be read ({e})") from None
            if arr.dtype not in D._FROM_NP or arr.ndim != 1:
                raise _bad(f"storage {idx} must be a 1-D numeric array, got {arr.dtype} {arr.shape}")
            self.storages[idx] = arr
        return arr

    def array(self, rec: dict) -> np.ndarray:
        try:
            dt = _NAMES[rec["dtype"]].np
            shape = tuple(int(s) for s in rec["shape"])
            stride = tuple(int(s) for s in rec["stride"])
            offset = int(rec["offset"])
            buf = self.storage(rec["storage"])
        except (KeyError, TypeError, ValueError) as e:
            raise _bad(f"bad tensor record {rec!r} ({e})") from None
        # bounds checked here, so a crafted record can never read outside its storage
        size = buf.nbytes // dt.itemsize
        numel = math.prod(shape)
        lo = offset + sum((n - 1) * s for n, s in zip(shape, stride, strict=True) if s < 0)
        hi = offset + sum((n - 1) * s for n, s in zip(shape, stride, strict=True) if s > 0)
        if len(shape) != len(stride) or min(shape, default=1) < 0 or (
                numel and (lo < 0 or hi >= size)) or offset < 0:
            raise _bad(f"tensor of shape {list(shape)}, stride {list(stride)} and offset {offset} "
                       f"lies outside its storage of {size} elements")
        if numel == 0:
            return np.empty(shape, dt)
        return np.ndarray(shape, dt, buffer=buf.view(np.uint8), offset=offset * dt.itemsize,
                          strides=tuple(s * dt.itemsize for s in stride))

    def tensor(self, idx) -> Tensor:
        t = self.tensors.get(idx)
        if t is None:
            try:
                rec = self.doc["tensors"][idx]
            except (IndexError, TypeError):
                raise _bad(f"no tensor {idx!r}") from None
            t = Tensor._make(self.array(rec), None, 0, None)
            t = self.place(t, rec.get("device", "cpu"))
            rg = bool(rec.get("requires_grad", False))
            if rec.get("parameter") and self.param_cls is not None:
                t = self.param_cls(t, requires_grad=rg)
            elif rg:
                t.requires_grad_(True)
            self.tensors[idx] = t
        return t

    def decode(self, v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.decode(x) for x in v]
        if not isinstance(v, dict):
            raise _bad(f"unexpected value {v!r}")
        kind = v.get("type")
        try:
            if kind == "tensor":
                return self.tensor(v["index"])
            if kind == "tuple":
                return tuple(self.decode(x) for x in v["items"])
            if kind in ("dict", "OrderedDict"):
                out = (dict if kind == "dict" else collections.OrderedDict)(
                    (self.decode(k), self.decode(x)) for k, x in v["items"])
                for name, x in v.get("attrs", {}).items():
                    setattr(out, name, self.decode(x))
                return out
            if kind == "float":
                return float(v["value"])
            if kind == "complex":
                return complex(self.decode(v["real"]), self.decode(v["imag"]))
            if kind in ("set", "frozenset"):
                return (set if kind == "set" else frozenset)(self.decode(x) for x in v["items"])
            if kind == "bytes":
                return base64.b64decode(v["base64"])
            if kind == "Size":
                return Size(int(x) for x in v["items"])
            if kind == "dtype":
                return _NAMES[v["name"]]
            if kind == "device":
                return _backend.device(v["name"])
            if kind == "ndarray":
                return self.array(v)
            if kind == "numpy_scalar":
                return self.array(v)[()]
            if kind == "pickle":
                if self.weights_only:
                    raise pickle.UnpicklingError(_WEIGHTS_ONLY_MSG.format(cls=v.get("class")))
                return pickle.loads(self.zf.read(v["file"]))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise _bad(f"bad {kind} record ({type(e).__name__}: {e})") from None
        raise _bad(f"unknown record type {kind!r}")




def load_legacy(zf: zipfile.ZipFile, weights_only: bool, place):
    """The object in an earlier-format archive; ``place(tensor, location)`` puts each tensor
    where ``map_location`` says (or returns it)."""
    try:
        doc = json.loads(zf.read(STRUCTURE))
    except ValueError as e:
        raise _bad(f"{STRUCTURE} is not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _bad(f"{STRUCTURE} does not describe an {FORMAT} file")
    if doc.get("version") != VERSION:
        raise _bad(f"format version {doc.get('version')!r} is not supported (this "
                   f"ndgrad reads version {VERSION})")
    return _Reader(zf, doc, weights_only, place).decode(doc.get("object"))
