"""Tensors from data (``tensor``, ``as_tensor``, ``from_numpy``, ``Tensor.new_tensor``), the
random generators and the argument helpers of factories.

These wrap or copy given data and record nothing. The factories that compute (``zeros``,
``randn``, ``*_like``, ``new_*``) are ops of the table, in ``_ops/factory.py``.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _backend, _random
from . import _dtype as D
from ._tensor import Tensor
from .autograd.grad_mode import INFERENCE_VC, state as _grad_state

__all__ = [
    "tensor", "as_tensor", "from_numpy", "manual_seed", "seed", "initial_seed", "Generator",
    "default_generator", "get_rng_state", "set_rng_state",
]


# --- random numbers ---
class Generator:
    """``torch.Generator``: a seedable source of random numbers. On the CPU it is PyTorch's own
    MT19937 stream and state (``_random``), so a seed gives torch's numbers bit for bit."""

    def __init__(self, device="cpu"):
        self.device = _backend.as_device(device)
        self._bg = _random.new_stream(_random.DEFAULT_SEED)
        self._np = np.random.Generator(self._bg)  # NumPy's samplers over the same stream
        self._seed = _random.DEFAULT_SEED
        self._fresh = True  # no draw since seeding: get_state's ``next`` is 0, not 624
        self._normal = self._normal_f = None  # torch's cached second Box-Muller normal

    @property
    def rng(self) -> np.random.Generator:
        """NumPy's ``Generator`` over this stream, for samplers torch does not define."""
        return self._np

    def manual_seed(self, seed: int) -> Generator:
        seed = _random.check_seed(seed) & 0xFFFFFFFFFFFFFFFF  # NOTE(pytorch): kept as uint64
        self._bg.state = {"bit_generator": "MT19937",
                          "state": {"key": _random.mt_key(seed), "pos": 624}}
        self._seed, self._fresh, self._normal, self._normal_f = seed, True, None, None
        return self

    def seed(self) -> int:
        s = int.from_bytes(np.random.SeedSequence().generate_state(2, np.uint32).tobytes(), "little")
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        """torch's 5056-byte CPU generator state (uint8 tensor): a state saved by torch
        restores here and the other way round."""
        raw = _random.get_state(self)
        return Tensor._make(np.frombuffer(raw, dtype=np.uint8).copy(), None, 0, None)

    def set_state(self, state: Tensor) -> Generator:
        if not isinstance(state, Tensor) or state._data.dtype != np.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        data = state._data
        _random.set_state(self, (data if type(data) is np.ndarray
                                 else _backend.to_device(data, _backend.cpu)).tobytes())
        return self


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    return default_generator.manual_seed(int(seed))


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(state: Tensor) -> None:
    default_generator.set_state(state)


_device_generators: dict = {}  # Device -> Generator: each device has its own stream of numbers


def device_generator(device) -> Generator:
    """The default generator of a non-CPU device (``torch.cuda.default_generators[i]``). Numbers
    are drawn on the host and moved, so a seed gives the same values on every device type."""
    dev = _backend.as_device(device)
    if dev.type != "cpu":
        dev = _backend.device_type(dev).normalize(dev)
    g = _device_generators.get(dev)
    if g is None:
        g = _device_generators[dev] = Generator(dev)
    return g


def _gen(generator, device=None) -> Generator:
    """The generator to draw from: ``generator``, else the default one of ``device``."""
    if generator is None and device is not None and device is not _backend.cpu:
        dev = _backend.as_device(device)
        if dev.type != "cpu":
            return device_generator(dev)
    return generator or default_generator


def _rng(generator, device=None):
    return _gen(generator, device).rng


# --- helpers ---
def _leaf(arr, requires_grad: bool, device=None) -> Tensor:
    """A new leaf holding ``arr`` (made on the host), moved to ``device`` when one is given."""
    if device is not None and device is not _backend.cpu:
        dev = _backend.as_device(device)
        if dev.type != "cpu":
            arr = _backend.to_device(arr, dev)
    t = Tensor._make(arr, None, 0, INFERENCE_VC if _grad_state.inference else None)
    if requires_grad:
        if arr.dtype not in D.INEXACT:
            # NOTE(pytorch): factories word this differently from Tensor.requires_grad_()
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients"
            )
        t._rg = True
    return t


def _size(size, fn: str = "") -> tuple:
    if len(size) == 1 and not isinstance(size[0], numbers.Integral):
        size = size[0]
    out = tuple(int(s) for s in size)
    for s in out:
        if s < 0:  # PyTorch's words (zeros has its own)
            if fn == "zeros":
                raise RuntimeError("zeros: Dimension size must be non-negative.")
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(out)}")
    return out


def _dtype_of(dtype, fn: str):
    """A ``dtype=`` argument: an ndgrad dtype or a Python type, never a string (PyTorch's
    TypeError)."""
    if isinstance(dtype, str):
        raise TypeError(f"{fn}(): argument 'dtype' must be torch.dtype, not str")
    return D.to_dtype(dtype)


def _dt(dtype, default=None) -> np.dtype:
    if dtype is None:
        return (default or D._default[0]).np
    return D.to_dtype(dtype).np


def _check(device) -> None:
    if device is not None:
        _backend.check_device(device)


def _device(device):
    """A constructor's ``device`` checked; None becomes the thread's default device
    (``set_default_device``, ``with device(...)``) when one is set, else stays None (the host)."""
    if device is None:
        if not _backend.defaults_in_use[0]:
            return None
        device = _backend.default_device()
        if device is None:
            return None
    _backend.check_device(device)
    return device


def _infer_dtype(data):
    """The dtype PyTorch infers for nested Python data (Python floats give the default dtype)."""
    kinds = set()
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, Tensor):
            kinds.add(("t", x.dtype))
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, np.generic):
            # NumPy scalars keep their own dtype, like 0-d tensors (np.float64 is also a float)
            kinds.add(("t", D.from_np(x.dtype)))
        elif isinstance(x, bool):
            kinds.add(("k", D.BOOL))
        elif isinstance(x, numbers.Integral):
            kinds.add(("k", D.INT))
        elif isinstance(x, numbers.Real):
            kinds.add(("k", D.FLOAT))
        elif isinstance(x, numbers.Complex):
            kinds.add(("k", D.COMPLEX))
        else:
            raise TypeError(f"Could not infer dtype of {type(x).__name__}")
    best = None
    for tag, v in kinds:
        d = v if tag == "t" else {D.BOOL: D.bool_, D.INT: D.int64, D.FLOAT: D._default[0],
                                   D.COMPLEX: D.default_complex()}[v]
        best = d if best is None else D.promote_types(best, d)
    return best or D._default[0]


def _to_array(data, dtype):
    if isinstance(data, Tensor):
        arr = data._data
    elif isinstance(data, np.ndarray):
        arr = data
    elif isinstance(data, np.generic):
        arr = np.asarray(data)
    else:
        d = D.to_dtype(dtype) if dtype is not None else _infer_dtype(data)
        arr = np.array(_plain(data), dtype=d.np)
        return arr
    if dtype is not None:
        arr = arr.astype(D.to_dtype(dtype).np, copy=False)
    return arr


def _plain(data):
    if isinstance(data, Tensor):
        return data._data
    if isinstance(data, (list, tuple)):
        return [_plain(x) for x in data]
    return data


# --- constructors ---
def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    """Copy ``data`` (nested sequences, a NumPy array, a scalar or a tensor) into a new leaf."""
    device = _device(device)
    if isinstance(dtype, str):
        _dtype_of(dtype, "tensor")
    src = _to_array(data, dtype)
    if type(src) is not np.ndarray and _backend.device_of(src).type != "cpu":  # a device tensor
        device = _backend.device_of(src) if device is None else device
        src = _backend.device_type(_backend.device_of(src)).to_host(src)
    arr = np.array(src, copy=True)
    D.from_np(arr.dtype)
    return _leaf(arr, requires_grad, device)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like ``tensor`` but shares memory with a NumPy array or tensor when it can."""
    device = _device(device)
    if (isinstance(data, Tensor) and (dtype is None or D.to_dtype(dtype).np == data._data.dtype)
            and (device is None or _backend.as_device(device) == data.device)):
        return data
    arr = _to_array(data, dtype)
    if isinstance(data, Tensor) and device is None:
        return _leaf(arr, False)  # a cast keeps the tensor's device
    return _leaf(_backend.adopt(arr), False, device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    D.from_np(array.dtype)
    return _leaf(array, False)


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    return tensor(data, dtype=self.dtype if dtype is None else dtype, requires_grad=requires_grad)


Tensor.new_tensor = _new_tensor
