"""``ndgrad.save`` / ``ndgrad.load`` in PyTorch's checkpoint format (a zip of ``data.pkl``, pickled
with persistent storage ids, plus one raw entry per storage), read without PyTorch installed;
``.safetensors`` files through the ``safetensors`` package. Format and safety rules:
docs/SERIALIZATION.md. ndgrad's earlier own format is read (and only read) by
``_serialization_legacy.py``.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import os
import pickle
import struct
import sys
import warnings
import zipfile

import numpy as np

from . import _backend
from . import _dtype as D
from . import _serialization_legacy as legacy
from ._tensor import Size, Tensor

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "load",
           "load_safetensors", "safe_globals", "save", "save_safetensors"]

# PyTorch's typed-storage class names (``torch.FloatStorage``), by ndgrad dtype name
_STORAGE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
                  "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "int16": "Short",
                  "int8": "Char", "uint8": "Byte", "bool": "Bool", "complex64": "ComplexFloat",
                  "complex128": "ComplexDouble"}
_STORAGE_DTYPES = {v + "Storage": k for k, v in _STORAGE_NAMES.items()}
_ALIGN = 64  # NOTE(pytorch): torch.save starts every record at a multiple of 64 bytes (mmap)
# dtypes PyTorch has and ndgrad may not: loading them names the dtype (bfloat16 is looked up
# by name when a file is read, so it loads once ndgrad has it)
_TORCH_ONLY_DTYPES = {"bfloat16", "complex32", "uint16", "uint32", "uint64", "float8_e4m3fn",
                      "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
                      "qint8", "quint8", "qint32", "quint4x2", "quint2x4"}
_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."  # pickled 0x1950a86a20f9469cfc6c


def _parameter_cls():
    from .nn import parameter  # nn sits in this layer; imported late (it may be mid-import)

    return parameter.Parameter


def _is_path(f) -> bool:
    return isinstance(f, (str, os.PathLike))


def _dtype_named(name: str, where: str):
    """ndgrad's dtype called ``name`` (looked up at call time: bfloat16 may come later)."""
    d = D._NAMES.get(name)
    if d is None and name == "bfloat16":
        raise RuntimeError(f"Cannot load {where}: it holds data of dtype torch.bfloat16, which "
                           "ndgrad does not support without ml_dtypes: pip install ml_dtypes")
    if d is None:
        raise RuntimeError(
            f"Cannot load {where}: it holds data of dtype torch.{name}, which ndgrad does not "
            f"support (ndgrad has {', '.join(x.name for x in D.ALL)}). Convert it in PyTorch "
            f"first, e.g. {{k: v.float() for k, v in state_dict.items()}}.")
    return d


# --- save: PyTorch's zip format ---
class _Global:
    """A global written by name (``torch._utils._rebuild_tensor_v2``) without importing it."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle wants a callable here; it is only ever written
        raise TypeError(f"{self.module}.{self.name} is a name in a file, not a function")


_G = {n: _Global(m, n) for m, n in [
    ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_parameter"),
    ("torch._utils", "_rebuild_parameter_with_state"), ("collections", "OrderedDict"),
    ("torch", "Size"), ("torch", "device"), ("ndgrad.serialization", "_rebuild_ndarray")]}
_G.update({s: _Global("torch", s) for s in _STORAGE_DTYPES})


class _Reduce:
    """A value pickled as ``func(*args)`` (a tensor inside a Parameter's arguments)."""

    __slots__ = ("args", "func")

    def __init__(self, func: _Global, args: tuple):
        self.func, self.args = func, args


class _StorageRef:
    __slots__ = ("dtype", "flat", "key", "location")

    def __init__(self, key: str, flat: np.ndarray, dtype: str, location: str):
        self.key, self.flat, self.dtype, self.location = key, flat, dtype, location


class _TorchPickler(pickle._Pickler):
    """Python's pickler (the C one cannot write a global it cannot import) writing tensors,
    dtypes, devices and sizes under PyTorch's names, storages as persistent ids."""

    def __init__(self, file, protocol: int):
        super().__init__(file, protocol)
        self.param_cls = _parameter_cls()
        self.storages: list[_StorageRef] = []
        self.by_root: dict[int, tuple] = {}  # id(root array) -> (ref, root address)
        self.keep: list = []  # roots stay alive while their ids are keys

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            return ("storage", _G[_STORAGE_NAMES[obj.dtype] + "Storage"], obj.key, obj.location,
                    obj.flat.nbytes // obj.flat.itemsize)
        return None

    def reducer_override(self, obj):
        t = type(obj)
        if t is _Global or t is D.dtype:
            return "global"  # -> save_global below
        if t is _Reduce:
            return obj.func, obj.args
        if isinstance(obj, Tensor):
            return self.tensor(obj)
        if t is _backend.Device:
            return _G["device"], (obj.type,) if obj.index is None else (obj.type, obj.index)
        if t is Size:
            return _G["Size"], (tuple(obj),)
        if (t is np.ndarray or isinstance(obj, np.generic)) and obj.dtype in D._FROM_NP:
            # ndgrad's own safe type: NumPy data as a storage, not as NumPy's pickle
            data = self.view(np.asarray(obj), "cpu") + (False, collections.OrderedDict())
            return _G["_rebuild_ndarray"], (_Reduce(_G["_rebuild_tensor_v2"], data),
                                            t is not np.ndarray)
        return NotImplemented

    def save_global(self, obj, name=None):
        if type(obj) is _Global:
            module, name = obj.module, obj.name
        elif type(obj) is D.dtype:
            module, name = "torch", obj.name
        else:
            return super().save_global(obj, name)
        self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode("ascii"))
        self.memoize(obj)

    def tensor(self, t: Tensor):
        a = t._data
        location = str(t.device)
        if type(a) is not np.ndarray:  # a device array: written from a host copy
            a = _backend.device_type(t.device).to_host(a)
        data = self.view(a, location)
        rg = bool(t.requires_grad)
        if isinstance(t, self.param_cls):
            inner = _Reduce(_G["_rebuild_tensor_v2"], data + (False, collections.OrderedDict()))
            state = dict(vars(t))
            if state:
                return _G["_rebuild_parameter_with_state"], (inner, rg, collections.OrderedDict(),
                                                             state)
            return _G["_rebuild_parameter"], (inner, rg, collections.OrderedDict())
        return _G["_rebuild_tensor_v2"], data + (rg, collections.OrderedDict())

    def view(self, a: np.ndarray, location: str) -> tuple:
        """(storage, offset, size, stride) placing ``a`` in a storage shared with its views."""
        dtype = D._FROM_NP[a.dtype].name
        item = a.itemsize
        if a.size == 0:  # PyTorch's contiguous strides (NumPy gives 0s), on an empty storage
            ref = _StorageRef(str(len(self.storages)), np.empty(0, a.dtype), dtype, location)
            self.storages.append(ref)
            return (ref, 0, Size(a.shape), _contiguous_strides(a.shape))
        root = a
        while isinstance(root.base, np.ndarray):
            root = root.base
        if (root.flags.c_contiguous or root.flags.f_contiguous) and root.nbytes % item == 0:
            hit = self.by_root.get(id(root))
            if hit is None:
                flat = np.ravel(root, order="K").view(np.uint8).view(a.dtype)
                ref = _StorageRef(str(len(self.storages)), flat, dtype, location)
                self.storages.append(ref)
                hit = self.by_root[id(root)] = (ref, root.__array_interface__["data"][0])
                self.keep.append(root)
            ref, base = hit
            if ref.dtype != dtype:
                # NOTE(pytorch): torch.save refuses this too (test_serialization.py, "different types")
                raise RuntimeError("Cannot save multiple tensors or storages that view the same "
                                   "data as different types")
            off = a.__array_interface__["data"][0] - base
            if off % item == 0 and all(s >= 0 and s % item == 0 for s in a.strides):
                return (ref, off // item, Size(a.shape), tuple(s // item for s in a.strides))
        # negative strides (NumPy views PyTorch cannot express), misaligned reinterpretations,
        # non-contiguous roots: a storage of their own
        flat = np.ascontiguousarray(a)
        ref = _StorageRef(str(len(self.storages)), flat.reshape(-1), dtype, location)
        self.storages.append(ref)
        return (ref, 0, Size(a.shape), tuple(s // item for s in flat.strides))


def _contiguous_strides(shape) -> tuple:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def _write_record(zf: zipfile.ZipFile, name: str, data) -> None:
    """One stored entry whose data starts at a multiple of ``_ALIGN`` in the file, padded as
    PyTorch pads (an ``FB`` extra field in the local header)."""
    data = memoryview(data).cast("B")
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.file_size = len(data)
    zip64 = info.file_size * 1.05 > zipfile.ZIP64_LIMIT  # zipfile's own rule for the header
    head = zf.start_dir + 30 + len(name.encode()) + (20 if zip64 else 0) + 4
    pad = -head % _ALIGN
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    with zf.open(info, "w") as fh:
        fh.write(data)


def _archive_name(f) -> str:
    if _is_path(f):
        stem = os.path.splitext(os.path.basename(os.fspath(f)))[0]
        if stem and stem.isascii() and stem.isprintable() and "\\" not in stem:
            return stem  # NOTE(pytorch): torch.save names the folder in the zip after the file
    return "archive"


def _save(obj, fh, name: str, protocol: int) -> None:
    buf = io.BytesIO()
    p = _TorchPickler(buf, protocol)
    p.dump(obj)  # first, so an object that cannot be pickled fails before any write
    _write_archive(fh, name, buf, p.storages)


def _write_archive(fh, name: str, buf: io.BytesIO, storages: list) -> None:
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
        _write_record(zf, f"{name}/data.pkl", buf.getbuffer())
        _write_record(zf, f"{name}/.format_version", b"1")
        _write_record(zf, f"{name}/.storage_alignment", str(_ALIGN).encode())
        _write_record(zf, f"{name}/byteorder", sys.byteorder.encode())
        for ref in storages:
            _write_record(zf, f"{name}/data/{ref.key}", ref.flat.view(np.uint8))
        _write_record(zf, f"{name}/version", b"3\n")
        sid = int.from_bytes(os.urandom(17), "little") % 10**40
        _write_record(zf, f"{name}/.data/serialization_id", f"{sid:040d}".encode())


@contextlib.contextmanager
def _atomic_open(path):
    """A binary file that replaces ``path`` only once it is complete: a save that fails or is
    killed half-way leaves the previous file as it was (a ``.<name>.<random>.tmp`` file may
    stay behind after a kill)."""
    real = os.path.realpath(os.fspath(path))  # through symlinks: the link keeps pointing there
    parent = os.path.dirname(real)
    if not os.path.isdir(parent):
        raise RuntimeError(f"Parent directory {os.path.dirname(os.fspath(path)) or '.'} does "
                           "not exist.")
    if os.path.exists(real) and not os.path.isfile(real):  # /dev/null, a FIFO: write in place
        with open(real, "wb") as fh:
            yield fh
        return
    while True:
        tmp = os.path.join(parent, f".{os.path.basename(real)}.{os.urandom(4).hex()}.tmp")
        try:  # mode 0o666 less the umask, as open() gives; not mkstemp's 0o600
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        if os.path.isfile(real):
            os.chmod(tmp, os.stat(real).st_mode & 0o7777)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save(obj, f, pickle_module=pickle, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False) -> None:
    """Save ``obj`` to a path or binary file in PyTorch's format (``torch.load`` reads it).

    Tensors that share memory are written once and share it again after loading. Saving to a
    path is atomic: the file is written beside the target and renamed over it when complete.

    >>> import io, ndgrad
    >>> buf = io.BytesIO(); ndgrad.save({"w": ndgrad.ones(2)}, buf); _ = buf.seek(0)
    >>> ndgrad.load(buf)["w"]
    tensor([1., 1.])
    """
    if not _use_new_zipfile_serialization:
        raise NotImplementedError("ndgrad.save writes only the zip format "
                                  "(_use_new_zipfile_serialization=True)")
    name = _archive_name(f)
    if _is_path(f):
        with _atomic_open(f) as fh:
            _save(obj, fh, name, pickle_protocol)
    else:
        _save(obj, f, name, pickle_protocol)


# --- load: allowed globals ---
_user_safe: dict[str, object] = {}


def _qualname(obj) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def add_safe_globals(safe_globals: list) -> None:
    """Mark classes/functions (or ``(obj, "module.name")`` pairs) safe for ``weights_only``."""
    for g in safe_globals:
        obj, name = g if isinstance(g, tuple) else (g, _qualname(g))
        _user_safe[name] = obj


def get_safe_globals() -> list:
    return list(_user_safe.values())


def clear_safe_globals() -> None:
    _user_safe.clear()


class safe_globals:
    """Context manager: ``add_safe_globals`` for the duration of a ``with`` block."""

    def __init__(self, safe_globals: list):
        self.globals = safe_globals

    def __enter__(self):
        self.saved = dict(_user_safe)
        add_safe_globals(self.globals)

    def __exit__(self, *exc):
        _user_safe.clear()
        _user_safe.update(self.saved)


def _weights_only_error(detail: str) -> pickle.UnpicklingError:
    # NOTE(pytorch): the text of torch.load's message (test_serialization.py, weights_only)
    return pickle.UnpicklingError(
        "Weights only load failed. This file can still be loaded, to do so you have two options, "
        "\x1b[1mdo those steps only if you trust the source of the checkpoint\x1b[0m. \n\t(1) In "
        "PyTorch 2.6, we changed the default value of the `weights_only` argument in "
        "`torch.load` from `False` to `True`. Re-running `torch.load` with `weights_only` set "
        "to `False` will likely succeed, but it can result in arbitrary code execution. Do it "
        "only if you got the file from a trusted source.\n\t(2) Alternatively, to load with "
        "`weights_only=True` please check the recommended steps in the following error "
        f"message.\n\tWeightsUnpickler error: {detail}\n\nCheck the documentation of "
        "torch.load to learn more about types accepted by default with weights_only "
        "https://pytorch.org/docs/stable/generated/torch.load.html.")


def _latin1_encode(obj, encoding="utf-8", errors="strict"):
    # protocol 2 pickles bytes as _codecs.encode(text, "latin1"): only that codec is allowed
    if encoding not in ("latin1", "latin-1") or not isinstance(obj, str):
        raise pickle.UnpicklingError(f"_codecs.encode with encoding {encoding!r} is not allowed")
    return obj.encode("latin1", errors)


def _rebuild_ndarray(tensor, scalar: bool = False):
    """A NumPy array (or scalar) ``ndgrad.save`` wrote as a tensor."""
    a = tensor._data if isinstance(tensor, Tensor) else tensor.numpy()
    return a[()] if scalar else a


class _Storage:
    """A storage as the pickle sees it: a 1-D array and where it was saved (``cpu``, ``cuda:0``)."""

    __slots__ = ("array", "location")

    def __init__(self, array: np.ndarray, location: str):
        self.array, self.location = array, location


class _StorageType:
    __slots__ = ("dtype",)  # None: torch.UntypedStorage (bytes; the tensor gives the dtype)

    def __init__(self, dtype):
        self.dtype = dtype


# --- load: PyTorch's zip format ---
class _Unpickler(pickle.Unpickler):
    """Maps PyTorch's globals to ndgrad's; with ``weights_only`` refuses every other global."""

    def __init__(self, file, reader: _ZipReader, weights_only: bool, **kw):
        super().__init__(file, **kw)
        self.reader, self.weights_only = reader, weights_only
        self.param_cls = _parameter_cls()
        self.table = {
            "torch._utils._rebuild_tensor": self.rebuild_tensor,
            "torch._utils._rebuild_tensor_v2": self.rebuild_tensor,
            "torch._utils._rebuild_tensor_v3": self.rebuild_tensor_v3,
            "torch._utils._rebuild_parameter": self.rebuild_parameter,
            "torch._utils._rebuild_parameter_with_state": self.rebuild_parameter,
            "torch._tensor._rebuild_from_type_v2": self.rebuild_from_type,
            "torch.Tensor": Tensor, "torch.nn.parameter.Parameter": self.param_cls,
            "torch.Size": Size, "torch.device": _backend.device,
            "torch.storage.UntypedStorage": _StorageType(None),
            "collections.OrderedDict": collections.OrderedDict,
            "collections.Counter": collections.Counter,
            "builtins.set": set, "builtins.frozenset": frozenset, "builtins.complex": complex,
            "builtins.bytearray": bytearray, "_codecs.encode": _latin1_encode,
            "ndgrad.serialization._rebuild_ndarray": _rebuild_ndarray,
        }

    def find_class(self, module: str, name: str):
        module = {"__builtin__": "builtins", "copy_reg": "copyreg"}.get(module, module)
        full = f"{module}.{name}"
        hit = self.table.get(full)
        if hit is not None:
            return hit
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        if module == "torch" and (name in D._NAMES or name in _TORCH_ONLY_DTYPES):
            return _dtype_named(name, self.reader.where)
        if full in _user_safe:
            return _user_safe[full]
        if self.weights_only:
            raise _weights_only_error(
                f"Unsupported global: GLOBAL {full} was not an allowed global by default. Please "
                f"use `torch.serialization.add_safe_globals([{full}])` or the "
                f"`torch.serialization.safe_globals([{full}])` context manager to allowlist this "
                "global if you trust this class/function.")
        if module == "torch" or module.startswith("torch."):
            # a whole PyTorch object (torch.save(model)): ndgrad's class of the same name, if any
            try:
                return super().find_class("ndgrad" + module[len("torch"):], name)
            except (ImportError, AttributeError):
                raise pickle.UnpicklingError(
                    f"Cannot load {self.reader.where}: it pickles {full}, which ndgrad does not "
                    "have. Save a state_dict() in PyTorch instead and load it into the ndgrad "
                    "model with load_state_dict.") from None
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and type(pid[1]) is _StorageType):
            raise pickle.UnpicklingError(f"Cannot load {self.reader.where}: unknown persistent "
                                         f"id {pid!r}")
        _, kind, key, location, numel = pid
        return self.reader.storage(str(key), kind.dtype, int(numel), str(location))

    # PyTorch's rebuild functions, on ndgrad tensors; arguments are checked, never trusted
    def rebuild_tensor(self, storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
        return self.make(storage, storage_offset, size, stride, requires_grad, None)

    def rebuild_tensor_v3(self, storage, storage_offset, size, stride, requires_grad,
                          backward_hooks, dtype, metadata=None):
        return self.make(storage, storage_offset, size, stride, requires_grad, dtype)

    def make(self, storage, offset, size, stride, requires_grad, dtype) -> Tensor:
        if type(storage) is not _Storage:
            raise pickle.UnpicklingError(f"Cannot load {self.reader.where}: a tensor without "
                                         "a storage")
        buf = storage.array
        if dtype is not None:
            if not isinstance(dtype, D.dtype) or buf.nbytes % dtype.itemsize:
                raise pickle.UnpicklingError(f"Cannot load {self.reader.where}: bad dtype "
                                             f"{dtype!r} for its storage")
            buf = buf.view(dtype.np)
        try:
            shape = tuple(int(n) for n in size)
            strides = tuple(int(s) for s in stride)
            offset = int(offset)
        except (TypeError, ValueError):
            raise pickle.UnpicklingError(f"Cannot load {self.reader.where}: bad tensor record "
                                         f"{size!r} {stride!r} {offset!r}") from None
        # bounds checked here, so a crafted file can never read outside its storage
        numel = 1
        for n in shape:
            numel *= n
        hi = offset + sum((n - 1) * s for n, s in zip(shape, strides, strict=False))
        if (len(shape) != len(strides) or min(shape, default=1) < 0 or offset < 0
                or min(strides, default=0) < 0 or (numel and hi >= buf.size)):
            raise pickle.UnpicklingError(
                f"Cannot load {self.reader.where}: a tensor of size {list(shape)}, stride "
                f"{list(strides)} and offset {offset} lies outside its storage of {buf.size} "
                "elements")
        item = buf.itemsize
        if numel == 0:  # as ndgrad makes empty tensors (NumPy's 0 strides)
            arr = np.empty(shape, buf.dtype)
        else:
            arr = np.ndarray(shape, buf.dtype, buffer=buf, offset=offset * item,
                             strides=tuple(s * item for s in strides))
        t = self.reader.place(Tensor._make(arr, None, 0, None), storage.location)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def rebuild_parameter(self, data, requires_grad, backward_hooks, state=None):
        if not isinstance(data, Tensor):
            raise pickle.UnpicklingError(f"Cannot load {self.reader.where}: a Parameter "
                                         "without a tensor")
        p = self.param_cls(data.detach(), requires_grad=bool(requires_grad))
        return self.set_state(p, state)

    def rebuild_from_type(self, func, new_type, args, state):
        t = func(*args)
        if new_type is self.param_cls and type(t) is Tensor:
            t = self.param_cls(t.detach(), requires_grad=t.requires_grad)
        return self.set_state(t, state)

    def set_state(self, obj, state):
        if isinstance(state, tuple):  # (__dict__ items, __slots__ items)
            state = {**(state[0] or {}), **(state[1] or {})}
        if not state:
            return obj
        if not isinstance(state, dict) or any(not isinstance(k, str) or k.startswith("__")
                                              for k in state):
            raise pickle.UnpicklingError(f"Cannot load {self.reader.where}: bad tensor "
                                         "attributes")
        if hasattr(obj, "__dict__"):
            vars(obj).update(state)
        else:
            warnings.warn(f"{self.reader.where}: attributes {sorted(state)} of a saved tensor "
                          "are dropped: ndgrad tensors carry no Python attributes", stacklevel=4)
        return obj


class _ZipReader:
    """Storages of a PyTorch-format archive, read straight from the file at their offsets."""

    def __init__(self, fh, zf: zipfile.ZipFile, prefix: str, where: str, map_fn, mmap):
        self.fh, self.zf, self.prefix, self.where, self.map_fn = fh, zf, prefix, where, map_fn
        self.mmap = mmap
        self.storages: dict[str, np.ndarray] = {}
        order = zf.read(prefix + "byteorder").decode() if prefix + "byteorder" in \
            zf.NameToInfo else "little"
        if order not in ("little", "big"):
            raise RuntimeError(f"Cannot load {where}: unknown byteorder {order!r}")
        self.swap = order != sys.byteorder  # NOTE(pytorch): torch.load byte-swaps such files

    def place(self, t: Tensor, location: str) -> Tensor:
        return _place(self.map_fn, t, location)

    def storage(self, key: str, dtype, numel: int, location: str) -> _Storage:
        raw = self.storages.get(key)
        if raw is None:
            raw = self.storages[key] = self.read(self.prefix + "data/" + key)
        d = np.dtype(np.uint8) if dtype is None else _dtype_named(dtype, self.where).np
        if raw.nbytes != numel * d.itemsize:
            raise pickle.UnpicklingError(
                f"Cannot load {self.where}: storage {key} holds {raw.nbytes} bytes, expected "
                f"{numel} elements of {d}")
        arr = raw.view(d.newbyteorder(">") if self.swap and d.itemsize > 1 else d)
        if arr.dtype != d:
            arr = arr.astype(d)
            self.storages[key] = arr.view(np.uint8)  # swapped once, shared by all its views
        return _Storage(arr, location)

    def read(self, name: str) -> np.ndarray:
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            raise pickle.UnpicklingError(f"Cannot load {self.where}: the archive has no "
                                         f"record {name}") from None
        if info.compress_type != zipfile.ZIP_STORED:
            return np.frombuffer(bytearray(self.zf.read(name)), np.uint8)
        self.fh.seek(info.header_offset)
        head = self.fh.read(30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise RuntimeError(f"Cannot load {self.where}: record {name} is corrupted")
        start = info.header_offset + 30 + int.from_bytes(head[26:28], "little") + \
            int.from_bytes(head[28:30], "little")
        if self.mmap is not None:
            if start + info.file_size > self.mmap.size:
                raise RuntimeError(f"Cannot load {self.where}: record {name} is truncated")
            return self.mmap[start:start + info.file_size]
        out = np.empty(info.file_size, np.uint8)
        self.fh.seek(start)
        if self.fh.readinto(memoryview(out)) != info.file_size:
            raise RuntimeError(f"Cannot load {self.where}: record {name} is truncated")
        return out


def _place(map_fn, t: Tensor, location: str) -> Tensor:
    """``t`` (saved at ``location``) where ``map_location`` puts it."""
    mapped = None if map_fn is None else map_fn(t, location)
    if mapped is not None:
        return mapped
    if location != "cpu":
        return t.to(_restore_device(location))
    return t


def _restore_device(location: str):
    """The device a tensor saved at ``location`` is loaded onto, with PyTorch's error when this
    process has no such device."""
    try:
        return _backend.check_device(location)
    except AssertionError:  # CUDA asked for, none here
        raise RuntimeError(
            "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is "
            "False. If you are running on a CPU-only machine, please use torch.load with "
            "map_location=torch.device('cpu') to map your storages to the CPU."
        ) from None


def _map_fn(map_location):
    """``map_location`` as a function ``fn(tensor, saved_location)`` -> tensor or None (keep)."""
    if map_location is None:
        return None
    if callable(map_location) and not isinstance(map_location, (str, _backend.Device)):
        return map_location
    if isinstance(map_location, dict):
        table = {str(k): _restore_device(str(v)) for k, v in map_location.items()}
        return lambda t, loc: t.to(table[loc]) if loc in table else None
    dev = _restore_device(str(map_location))
    return lambda t, loc: t.to(dev)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Load an object saved with ``torch.save`` or ``ndgrad.save`` (or a ``.safetensors`` file)
    from a path or binary file; PyTorch need not be installed.

    ``weights_only`` (default True) admits only tensors, containers, primitive types, dtypes,
    devices and sizes (``add_safe_globals`` adds more). ``map_location``: a device, a dict of
    devices, or ``fn(tensor, saved_location)`` returning a replacement tensor (or None).
    """
    if weights_only is None:
        weights_only = pickle_module is None
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    map_fn = _map_fn(map_location)
    if mmap and not _is_path(f):
        raise ValueError("f must be a file path in order to use the mmap argument")
    if _is_path(f):
        with open(f, "rb") as fh:
            return _load(fh, repr(os.fspath(f)), weights_only, map_fn, f if mmap else None,
                         pickle_load_args)
    name = getattr(f, "name", None)
    return _load(f, repr(name) if isinstance(name, str) else "the file object", weights_only,
                 map_fn, None, pickle_load_args)


def _load(fh, where: str, weights_only: bool, map_fn, mmap_path, pickle_load_args):
    if not hasattr(fh, "seek") or not fh.seekable():
        fh = io.BytesIO(fh.read())
    start = fh.tell()
    head = fh.read(16)
    fh.seek(start)
    if not head:
        raise EOFError  # NOTE(pytorch): torch.load of an empty file raises a bare EOFError
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        try:
            zf = zipfile.ZipFile(fh)
        except zipfile.BadZipFile:
            raise RuntimeError(
                f"Cannot load {where}: failed reading zip archive: failed finding central "
                "directory. The checkpoint is truncated or corrupted: it was not saved "
                "completely, was transferred incorrectly, or was modified after saving.") from None
        with zf:
            names = zf.namelist()
            if legacy.STRUCTURE in names:
                return legacy.load_legacy(zf, weights_only, functools.partial(_place, map_fn))
            pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
            if not pkl:
                raise RuntimeError(f"Cannot load {where}: a zip archive that is not a checkpoint "
                                   "(it has no <name>/data.pkl record, as torch.save writes)")
            mm = None
            if mmap_path is not None:
                mm = np.memmap(mmap_path, np.uint8, mode="c")  # NOTE(pytorch): MAP_PRIVATE
            reader = _ZipReader(fh, zf, pkl[0][: -len("data.pkl")], where, map_fn, mm)
            data = io.BytesIO(zf.read(pkl[0]))
            return _Unpickler(data, reader, weights_only, **pickle_load_args).load()
    n = int.from_bytes(head[:8], "little")
    if len(head) > 8 and head[8:9] == b"{" and n > 1:
        return _load_safetensors_fh(fh, where, map_fn)
    if head.startswith(_LEGACY_MAGIC[:2]) and fh.read(len(_LEGACY_MAGIC)) == _LEGACY_MAGIC:
        raise RuntimeError(
            f"Cannot load {where}: it is in PyTorch's legacy (non-zip) format, which ndgrad does "
            "not read. Re-save it with a recent PyTorch: torch.save(torch.load(path, "
            "weights_only=False), path).")
    raise pickle.UnpicklingError(
        f"Cannot load {where}: it is not a checkpoint written by torch.save or ndgrad.save, nor "
        f"a .safetensors file (it starts with {head[:8]!r}).")


# --- safetensors ---
def _safetensors_numpy():
    try:
        import safetensors.numpy
    except ImportError:
        raise ImportError("Reading and writing .safetensors files needs the safetensors "
                          "package: pip install safetensors (or ndgrad[safetensors])") from None
    return safetensors.numpy


def save_safetensors(tensors: dict, filename, metadata: dict | None = None) -> None:
    """Save a flat dict of tensors as a ``.safetensors`` file (what
    ``safetensors.torch.save_file`` does for PyTorch), atomically when ``filename`` is a path.

    >>> import io, ndgrad
    >>> buf = io.BytesIO(); ndgrad.serialization.save_safetensors({"w": ndgrad.ones(2)}, buf)
    >>> ndgrad.serialization.load_safetensors(buf.getvalue())["w"]
    tensor([1., 1.])
    """
    st = _safetensors_numpy()
    arrays = {}
    for k, t in tensors.items():
        if not isinstance(t, Tensor):
            # NOTE(pytorch): safetensors.torch.save_file's error, ValueError included
            raise ValueError(f"Key `{k}` is invalid, expected torch.Tensor but "  # noqa: TRY004
                             f"received {type(t)}")
        a = t._data if type(t._data) is np.ndarray else t.cpu()._data
        arrays[k] = np.ascontiguousarray(a)
    if _is_path(filename):
        with _atomic_open(filename) as fh:
            fh.write(st.save(arrays, metadata=metadata))
    else:
        filename.write(st.save(arrays, metadata=metadata))


def load_safetensors(filename, device="cpu") -> dict:
    """The tensors of a ``.safetensors`` file (a path, bytes or a binary file), as
    ``safetensors.torch.load_file`` gives them."""
    if isinstance(filename, (bytes, bytearray, memoryview)):
        fh, where = io.BytesIO(filename), "the bytes"
    elif _is_path(filename):
        with open(filename, "rb") as fh:
            return _load_safetensors_fh(fh, repr(os.fspath(filename)), _map_fn(device))
    else:
        fh, where = filename, "the file object"
    return _load_safetensors_fh(fh, where, _map_fn(device))


# safetensors' dtype codes ndgrad reads, by their own table: safetensors.numpy lacks BF16
_SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                       "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
                       "BOOL": "bool", "C64": "complex64"}


def _load_safetensors_fh(fh, where: str, map_fn) -> dict:
    st = _safetensors_numpy()
    try:
        flat = st.deserialize(fh.read())
    except (sys.modules["safetensors"].SafetensorError, ValueError, TypeError) as e:
        raise RuntimeError(f"Cannot load {where} as a .safetensors file: {e}") from None
    out = {}
    for k, v in flat:
        name = _SAFETENSORS_DTYPES.get(v["dtype"])
        if name is None:  # U16, F8_*, ...
            raise RuntimeError(f"Cannot load {where}: it holds data of dtype {v['dtype']}, which "
                               "ndgrad does not support")
        a = np.frombuffer(v["data"], dtype=_dtype_named(name, where).np).reshape(v["shape"])
        out[k] = _place(map_fn, Tensor._make(a, None, 0, None), "cpu")
    return out
