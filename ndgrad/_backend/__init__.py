"""Backend layer: the one place that knows which array library holds a tensor's data.

A *device type* (``DeviceType``) says how arrays of one kind of device are made, moved and
ordered: the CPU (NumPy arrays, no streams), CUDA (CuPy arrays, streams and events; imported
only when asked for) and the stream-logging test device (``stream_log``: NumPy arrays whose
streams and events log what the engine does with them). Everything above this layer asks
``namespace_of(array)`` or ``device_of(array)`` instead of importing NumPy to create arrays, so
that one op definition serves every device.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import threading

import numpy as np

from . import streams
from .cpu_memory import keep_freed_memory
from .streams import Event, Stream, current_stream, use_stream

keep_freed_memory()

__all__ = ["Device", "device", "cpu", "namespace_of", "device_of", "as_device", "DeviceType",
           "device_type", "register_device_type", "to_device", "adopt", "meta_of", "zeros", "Stream", "Event",
           "current_stream", "use_stream"]


class Device:
    """A device name and index, compared by value (``ndgrad.device('cpu') == 'cpu'``)."""

    __slots__ = ("type", "index")

    def __init__(self, type: str, index: int | None = None):
        self.type = type
        self.index = index

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = as_device(other)
        return (
            isinstance(other, Device) and self.type == other.type and self.index == other.index
        )

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    # ``with torch.device('cuda'):``: the tensor constructors inside default to this device.
    def __enter__(self) -> "Device":
        _defaults.stack.append(self)
        defaults_in_use[0] = True
        return self

    def __exit__(self, *exc) -> None:
        _defaults.stack.pop()


cpu = Device("cpu")
_BUILTIN = ("cpu", "cuda", "meta")


class DeviceType:
    """How arrays of one kind of device are made, moved and ordered. The base is the CPU."""

    name = "cpu"
    array_type = np.ndarray
    xp = np
    has_streams = False

    def check(self, dev: Device) -> None:
        """Raise PyTorch's error when ``dev`` cannot hold arrays here."""

    def device_of(self, array) -> Device:
        return cpu

    def normalize(self, dev: Device) -> Device:
        """``dev`` with its index filled in (``cuda`` -> ``cuda:<current>``)."""
        return dev

    def from_host(self, array: np.ndarray, dev: Device):
        """A copy of a host array on ``dev`` (shares memory where the device is the host)."""
        return array

    def to_host(self, array, pinned: bool = False) -> np.ndarray:
        """A host copy of ``array`` (in page-locked memory when ``pinned`` and the device has
        it); the array itself on the CPU."""
        return array

    def default_stream(self, dev: Device):
        raise RuntimeError(f"device type {self.name} has no streams")

    def erf(self, array):
        """The error function of ``array`` (NumPy has none): SciPy's, else ``math.erf`` per
        element (exact but slow)."""
        try:
            from scipy.special import erf
        except ImportError:
            return namespace_of(array).asarray(_erf_py(array), dtype=array.dtype)
        return erf(array).astype(array.dtype, copy=False)

    def linalg_errors(self):
        """A context in which a failing factorization (singular, not positive-definite) raises
        ``numpy.linalg.LinAlgError``, as NumPy always does (CuPy returns NaNs unless asked)."""
        return _NO_CONTEXT

    def keep_alive(self, array, stream) -> None:
        """``Tensor.record_stream``: ``array``'s memory is not reused until the work queued on
        ``stream`` so far is done (its last reference is held until an event there completes)."""
        pending = self._pending
        pending[:] = [(a, e) for a, e in pending if not e.query()]
        pending.append((array, stream.record_event()))

    @property
    def _pending(self) -> list:
        p = self.__dict__.get("_pending_list")
        if p is None:
            p = self.__dict__["_pending_list"] = []
        return p


_NO_CONTEXT = contextlib.nullcontext()
_erf_py = np.frompyfunc(math.erf, 1, 1)
_cpu_type = DeviceType()
_TYPES: dict = {"cpu": _cpu_type}
_BY_ARRAY: dict = {}  # array type -> DeviceType, for every type but numpy.ndarray
_LAZY = {"cuda": "cuda", "streamlog": "stream_log"}  # device types loaded on first use


def register_device_type(t: DeviceType) -> None:
    _TYPES[t.name] = t
    _BY_ARRAY[t.array_type] = t


def device_type(dev) -> DeviceType:
    """The device type of a Device or device string; CUDA's is loaded on first use."""
    name = dev.type if isinstance(dev, Device) else as_device(dev).type
    t = _TYPES.get(name)
    if t is None:
        module = _LAZY.get(name)
        if module is None:
            raise RuntimeError(f"unsupported device {dev}")
        importlib.import_module(f"{__name__}.{module}")  # registers the device type
        t = _TYPES[name]
    return t




def as_device(spec) -> Device:
    """Parse ``'cpu'``, ``'cuda:1'``, a Device or an int (a CUDA ordinal) into a Device."""
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, int):
        return Device("cuda", spec)
    if not isinstance(spec, str):
        raise TypeError(f"device() received an invalid combination of arguments - got ({type(spec).__name__})")
    name, _, idx = spec.partition(":")
    if name not in _BUILTIN and name not in _TYPES and name not in _LAZY:
        raise RuntimeError(
            f"Expected one of {', '.join(_BUILTIN + tuple(t for t in _TYPES if t not in _BUILTIN))} "
            f"device type at start of device string: {spec}"
        )
    if idx:
        if not idx.isdigit():
            raise RuntimeError(f"Invalid device string: '{spec}'")
        return Device(name, int(idx))
    return cpu if name == "cpu" else Device(name)


def device(type, index=None) -> Device:
    """``ndgrad.device('cpu')`` / ``ndgrad.device('cuda', 0)``, as ``torch.device``."""
    if index is not None:
        return Device(type, index)
    return as_device(type)


def namespace_of(array):
    """The array module (``xp``) that owns ``array``."""
    if type(array) is np.ndarray:
        return np
    t = _BY_ARRAY.get(type(array))
    return np if t is None else t.xp


def _type_of(array) -> DeviceType:
    return _cpu_type if type(array) is np.ndarray else _BY_ARRAY.get(type(array), _cpu_type)


def erf(array):
    """``DeviceType.erf`` for ``array``'s device."""
    return _type_of(array).erf(array)


def linalg_errors(array):
    """``DeviceType.linalg_errors`` for ``array``'s device."""
    return _type_of(array).linalg_errors()


def device_of(array) -> Device:
    if type(array) is np.ndarray:
        return cpu
    t = _BY_ARRAY.get(type(array))
    return cpu if t is None else t.device_of(array)


# --- the default device of the tensor constructors (PyTorch's DeviceContext), per thread ---
class _Defaults(threading.local):
    device = None  # set_default_device's

    def __init__(self):
        self.stack = []  # the ``with device(...)`` blocks entered, innermost last


_defaults = _Defaults()
# Whether any thread ever set a default device: until then the constructors' one check is this.
defaults_in_use = [False]


def default_device():
    """The device a constructor called with ``device=None`` uses, or None for the host."""
    d = _defaults
    return d.stack[-1] if d.stack else d.device


def set_default_device(device) -> None:
    """``torch.set_default_device``: this thread's constructors (``zeros``, ``tensor``, ...,
    not the ``*_like`` ones) put their tensors on ``device`` unless told otherwise; None resets."""
    _defaults.device = None if device is None else as_device(device)
    defaults_in_use[0] = True


def get_default_device() -> Device:
    dev = default_device()
    if dev is None:
        return cpu
    return device_type(dev).normalize(dev) if dev.type not in ("cpu", "meta") else dev


def check_device(dev) -> Device:
    """Raise PyTorch's error for a device this process cannot place arrays on; else the Device."""
    dev = as_device(dev)
    if dev.type != "cpu":
        if dev.type == "meta":
            raise RuntimeError("unsupported device meta")
        device_type(dev).check(dev)
    return dev


def to_device(array, dev: Device):
    """``array`` on ``dev``: itself when it is there already, else a copy."""
    if dev.type != "cpu":
        dev = device_type(dev).normalize(dev)
    src = device_of(array)
    if src == dev:
        return array
    host = array if src.type == "cpu" and type(array) is np.ndarray else _TYPES[src.type].to_host(array)
    return device_type(dev).from_host(host, dev) if dev.type != "cpu" else np.array(host, copy=src.type == "cpu")


def zeros(shape, dtype, dev: Device):
    """A zero-filled array on ``dev`` (gradients materialised for unused outputs)."""
    xp = np if dev is cpu or dev.type == "cpu" else device_type(dev).xp
    return xp.zeros(shape, dtype)


def adopt(out):
    """An op's raw result as an array: NumPy scalars become 0-d arrays, device arrays stay."""
    t = type(out)
    if t is np.ndarray or t in _BY_ARRAY:
        return out
    return np.asarray(out)


def meta_of(array) -> tuple:
    """``shape, dtype, device, stream`` of a gradient a node will receive for ``array``: the
    stream is the current one of the array's device. On the CPU device and stream are None: a
    tuple of untracked objects, which the cyclic GC stops tracking (one object less per node for
    each collection to walk)."""
    if type(array) is np.ndarray:
        return (array.shape, array.dtype, None, None)
    dev = device_of(array)
    t = _TYPES[dev.type] if dev.type in _TYPES else _cpu_type
    return (array.shape, array.dtype, dev, current_stream(dev) if t.has_streams else None)
