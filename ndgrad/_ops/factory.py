"""Tensor factories as ops of the table: ``zeros``, ``ones``, ``empty``, ``full``, ``arange``,
``linspace``, ``eye``, ``rand``, ``randn``, ``randint``, their ``*_like`` forms and the
``Tensor.new_*`` methods.

Each is a record (no gradient, as in PyTorch), so a dispatch mode sees every factory call and a
captured graph keeps it as a call; the random ones are marked ``nondeterministic`` so a replay
draws fresh numbers. The public functions keep PyTorch's Python signatures (sizes as varargs,
``requires_grad``) and dispatch the record; ``tensor``/``as_tensor``/``from_numpy`` copy or wrap
data and stay in ``_factories``, as the generator does.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _backend, _random
from .. import _dtype as D
from .._factories import _check, _device, _dt, _dtype_of, _gen, _infer_dtype, _size
from .._tensor import Tensor
from .registry import NAMESPACES, defop, dispatch
from .samples import sample

_FACTORY_ARGS = "ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None"
_RANDOM = {"nondeterministic": True}


def _sizes(rng):
    return [sample("2x3", (2, 3)), sample("0d", ())]


def _like_samples(rng):
    return [sample("2x3", rng.standard_normal((2, 3))), sample("int", np.arange(4))]


def _drawn(rng):
    return []  # random or uninitialised values: tests/test_random.py and tests/test_tensor.py


def _place(arr, device):
    """``arr`` (made on the host) on ``device``."""
    if device is not None and device is not _backend.cpu:
        dev = _backend.as_device(device)
        if dev.type != "cpu":
            return _backend.to_device(arr, dev)
    return arr


def _grad_leaf(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        if t._data.dtype not in D.INEXACT:
            # NOTE(pytorch): factories word this differently from Tensor.requires_grad_()
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t._rg = True
    return t


def _like_device(x):
    return _backend.cpu if type(x) is np.ndarray else _backend.device_of(x)


# --- the records: forwards on arrays ---
def _factory(schema, fwd, *, samples, extra=None):
    """A factory record; published through the front ends below, compared with torch's own."""
    name = schema[: schema.index("(")].split(".")[0]
    oracle = ("Tensor." if name.startswith("new_") else "torch.") + name
    return defop(schema, fwd, samples=samples, api=False, method=False, torch=oracle, extra=extra)


def _drawn_values(draw, size, dt):
    """``draw(n, dtype)`` in ``size``; complex draws its real and imaginary parts as one real
    tensor twice as long (PyTorch's view_as_real)."""
    n = math.prod(size)
    if dt.kind == "c":
        rd = np.dtype(dt.char.lower())
        return draw(2 * n, rd).astype(rd, copy=False).view(dt).reshape(size)
    return draw(n, dt).astype(dt, copy=False).reshape(size)


def _rand_array(size, generator, dtype, device):
    dt = _dt(dtype)
    if dt not in D.INEXACT:
        raise RuntimeError(f'"check_uniform_bounds" not implemented for \'{D.SHORT_NAMES[dt]}\'')
    g = _gen(generator, device)
    return _place(_drawn_values(lambda n, d: _random.uniform(g, n, d), size, dt), device)


def _randn_array(size, generator, dtype, device):
    dt = _dt(dtype)
    if dt not in D.INEXACT:
        raise RuntimeError(f'"normal_kernel_cpu" not implemented for \'{D.SHORT_NAMES[dt]}\'')
    g = _gen(generator, device)
    std = 0.5**0.5 if dt.kind == "c" else 1.0  # complex: the variance split between the parts
    return _place(_drawn_values(lambda n, d: _random.normal(g, n, d, 0.0, std), size, dt), device)


def _randint_array(low, high, size, generator, dtype, device):
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    draw = _random.randint(_gen(generator, device), math.prod(size), low, high)
    return _place(draw.astype(_dt(dtype, D.int64)).reshape(size), device)


def _filled(make):
    """A forward ``(size, *, dtype, layout, device, pin_memory)`` making ``make(size, dtype)``."""
    return lambda size, dtype, layout, device, pin, *mf: _place(make(size, _dt(dtype)), device)


def _full_fwd(size, value, dtype, layout, device, pin):
    dt = _infer_dtype(value).np if dtype is None else _dt(dtype)  # aten::full infers it too
    return _place(np.full(size, value, dt), device)


def _arange_fwd(start, end, step, dtype, layout, device, pin):
    dt = _infer_dtype([start, end, step]).np if dtype is None else _dt(dtype)
    return _place(np.arange(start, end, step).astype(dt), device)


def _linspace_fwd(start, end, steps, dtype, layout, device, pin):
    return _place(np.linspace(start, end, steps).astype(_dt(dtype)), device)


def _eye_fwd(n, m, dtype, layout, device, pin):
    return _place(np.eye(n, m, dtype=_dt(dtype)), device)


_OPT = f"*, {_FACTORY_ARGS}"
_GEN = f"*, Generator? generator=None, {_FACTORY_ARGS}"
_MF = "MemoryFormat? memory_format=None"
_zeros = _factory(f"zeros(SymInt[] size, {_OPT}) -> Tensor", _filled(np.zeros), samples=_sizes)
_ones = _factory(f"ones(SymInt[] size, {_OPT}) -> Tensor", _filled(np.ones), samples=_sizes)
_empty = _factory(f"empty.memory_format(SymInt[] size, {_OPT}, {_MF}) -> Tensor", _filled(np.empty),
                  samples=_drawn)
_full = _factory(f"full(SymInt[] size, Scalar fill_value, {_OPT}) -> Tensor", _full_fwd,
                 samples=lambda rng: [sample("2x3", (2, 3), 1.5), sample("int", (4,), 7)])
_arange = _factory(f"arange.start_step(Scalar start, Scalar end, Scalar step=1, {_OPT}) -> Tensor",
                   _arange_fwd,
                   samples=lambda rng: [sample("ints", 1, 7, 2), sample("floats", 0.5, 2.0, 0.25)])
_linspace = _factory(f"linspace(Scalar start, Scalar end, int steps, {_OPT}) -> Tensor", _linspace_fwd,
                     samples=lambda rng: [sample("5", -1.0, 1.0, 5)])
_eye = _factory(f"eye.m(SymInt n, SymInt m, {_OPT}) -> Tensor", _eye_fwd,
                samples=lambda rng: [sample("3x2", 3, 2)])
_rand = _factory(f"rand(SymInt[] size, {_GEN}) -> Tensor",
                 lambda size, g, dtype, layout, device, pin: _rand_array(size, g, dtype, device),
                 samples=_drawn, extra=_RANDOM)
_randn = _factory(f"randn(SymInt[] size, {_GEN}) -> Tensor",
                  lambda size, g, dtype, layout, device, pin: _randn_array(size, g, dtype, device),
                  samples=_drawn, extra=_RANDOM)
_randint = _factory(f"randint.low(SymInt low, SymInt high, SymInt[] size, {_GEN}) -> Tensor",
                    lambda lo, hi, size, g, dtype, layout, device, pin:
                    _randint_array(lo, hi, size, g, dtype, device),
                    samples=_drawn, extra=_RANDOM)


# The *_like and new_* forms read shape, dtype and device from their tensor argument's array.
def _like_fwd(make):
    def fwd(x, dtype, layout, device, pin, mf):
        dt = x.dtype if dtype is None else _dt(dtype)
        return _place(make(x.shape, dt), _like_device(x) if device is None else device)
    return fwd


def _full_like_fwd(x, value, dtype, layout, device, pin, mf):
    dt = x.dtype if dtype is None else _dt(dtype)
    return _place(np.full(x.shape, value, dt), _like_device(x) if device is None else device)


def _drawn_like(draw):
    """A random ``*_like`` forward: ``draw(shape, generator, dtype, device)``."""
    def fwd(x, g, dtype, layout, device, pin, mf):
        return draw(x.shape, g, D._FROM_NP[x.dtype] if dtype is None else dtype,
                    _like_device(x) if device is None else device)
    return fwd


def _randint_like_fwd(x, lo, hi, dtype, layout, device, pin, mf):
    return _randint_array(lo, hi, x.shape, None, D._FROM_NP[x.dtype] if dtype is None else dtype,
                          _like_device(x) if device is None else device)


def _new_fwd(make):
    def fwd(x, size, dtype, layout, device, pin):
        dt = x.dtype if dtype is None else _dt(dtype)
        return _place(make(size, dt), _like_device(x) if device is None else device)
    return fwd


def _new_full_fwd(x, size, value, dtype, layout, device, pin):
    dt = x.dtype if dtype is None else _dt(dtype)
    return _place(np.full(size, value, dt), _like_device(x) if device is None else device)


def _one_row(extra=()):
    return lambda rng: [sample("2x3", rng.standard_normal((1,)), (2, 3), *extra)]


_LIKE = f"{_OPT}, {_MF}"
_zeros_like = _factory(f"zeros_like(Tensor self, {_LIKE}) -> Tensor", _like_fwd(np.zeros),
                       samples=_like_samples)
_ones_like = _factory(f"ones_like(Tensor self, {_LIKE}) -> Tensor", _like_fwd(np.ones),
                      samples=_like_samples)
_empty_like = _factory(f"empty_like(Tensor self, {_LIKE}) -> Tensor", _like_fwd(np.empty),
                       samples=_drawn)
_full_like = _factory(f"full_like(Tensor self, Scalar fill_value, {_LIKE}) -> Tensor", _full_like_fwd,
                      samples=lambda rng: [sample("2x3", rng.standard_normal((2, 3)), 2.5)])
_rand_like = _factory(f"rand_like(Tensor self, {_GEN}, {_MF}) -> Tensor", _drawn_like(_rand_array),
                      samples=_drawn, extra=_RANDOM)
_randn_like = _factory(f"randn_like(Tensor self, {_GEN}, {_MF}) -> Tensor", _drawn_like(_randn_array),
                       samples=_drawn, extra=_RANDOM)
_randint_like = _factory(f"randint_like.low_dtype(Tensor self, SymInt low, SymInt high, {_LIKE}) -> Tensor",
                         _randint_like_fwd, samples=_drawn, extra=_RANDOM)
_new_zeros = _factory(f"new_zeros(Tensor self, SymInt[] size, {_OPT}) -> Tensor", _new_fwd(np.zeros),
                      samples=_one_row())
_new_ones = _factory(f"new_ones(Tensor self, SymInt[] size, {_OPT}) -> Tensor", _new_fwd(np.ones),
                     samples=_one_row())
_new_empty = _factory(f"new_empty(Tensor self, SymInt[] size, {_OPT}) -> Tensor", _new_fwd(np.empty),
                      samples=_drawn)
_new_full = _factory(f"new_full(Tensor self, SymInt[] size, Scalar fill_value, {_OPT}) -> Tensor",
                     _new_full_fwd, samples=_one_row((4.0,)))


# --- the public functions: PyTorch's Python signatures over the records ---
def _dtype_arg(dtype, fn: str = "factory"):
    return None if dtype is None else _dtype_of(dtype, fn)


def zeros(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False) -> Tensor:
    device = _device(device)
    return _grad_leaf(dispatch(_zeros, (_size(size, "zeros"), _dtype_arg(dtype, "zeros"), layout, device, None)), requires_grad)


def ones(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False) -> Tensor:
    device = _device(device)
    return _grad_leaf(dispatch(_ones, (_size(size, "ones"), _dtype_arg(dtype, "ones"), layout, device, None)), requires_grad)


def empty(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, memory_format=None) -> Tensor:
    device = _device(device)
    return _grad_leaf(dispatch(_empty, (_size(size, "empty"), _dtype_arg(dtype, "empty"), layout, device, None, None)),
                      requires_grad)


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False) -> Tensor:
    device = _device(device)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if dtype is None:
        dtype = _infer_dtype(fill_value)
    return _grad_leaf(dispatch(_full, (_size((size,), "full"), fill_value, _dtype_arg(dtype, "full"), layout,
                                       device, None)),
                      requires_grad)


def _bounds(start, end, step, other: str) -> tuple:
    """``arange``/``range`` bounds as numbers, checked (PyTorch names the other bound
    ``larger`` in arange's message, ``lower`` in range's)."""
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) / step < 0:
        raise RuntimeError(f"upper bound and {other} bound inconsistent with step sign")
    return start, end, step


def arange(start, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False) -> Tensor:
    device = _device(device)
    start, end, step = _bounds(start, end, step, "larger")
    if dtype is None:
        dtype = _infer_dtype([start, end, step])
    return _grad_leaf(dispatch(_arange, (start, end, step, D.to_dtype(dtype), layout, device, None)),
                      requires_grad)


def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False) -> Tensor:
    device = _device(device)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _grad_leaf(dispatch(_linspace, (start, end, steps, _dtype_arg(dtype), layout, device, None)),
                      requires_grad)


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
        pin_memory=False) -> Tensor:
    device = _device(device)
    return _grad_leaf(dispatch(_eye, (n, n if m is None else m, _dtype_arg(dtype), layout, device, None)),
                      requires_grad)


def rand(*size, generator=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False) -> Tensor:
    device = _device(device)
    return _grad_leaf(dispatch(_rand, (_size(size, "rand"), generator, _dtype_arg(dtype, "rand"), layout, device, None)),
                      requires_grad)


def randn(*size, generator=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False) -> Tensor:
    device = _device(device)
    return _grad_leaf(dispatch(_randn, (_size(size, "randn"), generator, _dtype_arg(dtype, "randn"), layout, device, None)),
                      requires_grad)


def randint(low=None, high=None, size=None, *, generator=None, out=None, dtype=None, layout=None,
            device=None, requires_grad=False, pin_memory=False) -> Tensor:
    device = _device(device)
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high  # the randint(high, size) overload
    elif high is None:
        low, high = 0, low
    elif low is None:
        low = 0  # randint(high=..., size=...), as PyTorch's samplers call it
    if size is None:
        raise TypeError("randint() missing 1 required positional arguments: \"size\"")
    return _grad_leaf(dispatch(_randint, (low, high, tuple(size), generator, _dtype_arg(dtype), layout,
                                          device, None)), requires_grad)


def _like(rec, random=False):
    def like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None,
             generator=None, pin_memory=False):
        _check(device)
        rest = (_dtype_arg(dtype), layout, device, None, memory_format)
        args = (input, generator) + rest if random else (input,) + rest
        return _grad_leaf(dispatch(rec, args), requires_grad)

    like.__name__ = like.__qualname__ = rec.name
    return like


zeros_like = _like(_zeros_like)
ones_like = _like(_ones_like)
empty_like = _like(_empty_like)
rand_like = _like(_rand_like, random=True)
randn_like = _like(_randn_like, random=True)


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, pin_memory=False) -> Tensor:
    _check(device)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _grad_leaf(dispatch(_full_like, (input, fill_value, _dtype_arg(dtype), layout, device, None,
                                            memory_format)), requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None, pin_memory=False) -> Tensor:
    _check(device)
    if high is None:
        low, high = 0, low
    return _grad_leaf(dispatch(_randint_like, (input, low, high, _dtype_arg(dtype), layout, device, None,
                                               memory_format)), requires_grad)


def _new(rec):
    def new(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
        _check(device)
        return _grad_leaf(dispatch(rec, (self, _size(size), _dtype_arg(dtype), layout, device, None)),
                          requires_grad)

    new.__name__ = new.__qualname__ = rec.name
    return new


def _new_full_method(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
                     layout=None, pin_memory=False):
    _check(device)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _grad_leaf(dispatch(_new_full, (self, _size((size,)), fill_value, _dtype_arg(dtype), layout,
                                           device, None)), requires_grad)


Tensor.new_zeros = _new(_new_zeros)
Tensor.new_ones = _new(_new_ones)
Tensor.new_empty = _new(_new_empty)
Tensor.new_full = _new_full_method

for _name in ("zeros", "ones", "empty", "full", "arange", "linspace", "eye", "rand", "randn", "randint",
              "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like"):
    NAMESPACES[""][_name] = globals()[_name]


# --- more constructors: logspace, scalar_tensor, empty_strided, tril/triu_indices, range, windows ---
def _logspace_fwd(start, end, steps, base, dtype, layout, device, pin):
    return _place(np.power(float(base), np.linspace(start, end, steps)).astype(_dt(dtype)), device)


def _empty_strided_fwd(size, stride, dtype, layout, device, pin):
    dt = _dt(dtype)
    if any(s < 0 for s in stride):
        raise RuntimeError("as_strided: Negative strides are not supported at the moment, got strides: "
                           f"{list(stride)}")
    n = 0 if 0 in size else 1 + sum((d - 1) * s for d, s in zip(size, stride, strict=True))
    buf = np.empty(n, dt)
    arr = np.lib.stride_tricks.as_strided(buf, size, tuple(s * dt.itemsize for s in stride))
    return _place(arr, device)


def _tri_indices_fwd(lower):
    def fwd(row, col, offset, dtype, layout, device, pin):
        dt = _dt(dtype, D.int64)
        if dt.kind not in "iu":
            name = "tril_indices" if lower else "triu_indices"
            raise NotImplementedError(f"\"{name}\" not implemented for '{D.SHORT_NAMES[dt]}'")
        mask = (np.tri(row, col, offset, dtype=bool) if lower
                else ~np.tri(row, col, offset - 1, dtype=bool))
        return _place(np.stack(np.nonzero(mask)).astype(dt).reshape(2, -1), device)
    return fwd


def _range_fwd(start, end, step, dtype, layout, device, pin):
    n = math.floor((end - start) / step) + 1
    return _place((start + np.arange(n) * step).astype(_dt(dtype)), device)


# Window coefficients: sums of cosines over n / (M - 1), M the length (one longer when periodic).
_COSINE_WINDOWS = {"hann_window": (0.5, 0.5, 0.0), "blackman_window": (0.42, 0.5, 0.08)}


def _window(name, n, periodic, dtype, values):
    dt = _dt(dtype)
    if dt.kind != "f":
        raise RuntimeError(f"{name} expects floating point dtypes, got: TensorOptions(dtype="
                           f"{ {'int64': 'long int', 'int32': 'int'}.get(dt.name, dt.name)}, device=cpu, "
                           "layout=Strided (default), requires_grad=false (default), "
                           "pinned_memory=false, memory_format=(nullopt))")
    if n < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={n}")
    if n <= 1:
        return np.ones(n, dt)
    m = n + 1 if periodic else n
    # in the window's own dtype, so float32 rounds as PyTorch's float32 kernel does
    return values(np.arange(m, dtype=dt), m)[:n].astype(dt)


def _cosine_fwd(name):
    def fwd(n, periodic, dtype, layout, device, pin):
        a, b, c = _COSINE_WINDOWS[name]
        def values(k, m):
            phase = k * k.dtype.type(np.pi / (m - 1))
            return c * np.cos(4 * phase) - b * np.cos(2 * phase) + a

        return _place(_window(name, n, periodic, dtype, values), device)
    return fwd


def _hamming_fwd(n, periodic, alpha, beta, dtype, layout, device, pin):
    return _place(_window("hamming_window", n, periodic, dtype,
                          lambda k, m: alpha - beta * np.cos(k * k.dtype.type(2 * np.pi / (m - 1)))),
                  device)


def _bartlett_fwd(n, periodic, dtype, layout, device, pin):
    return _place(_window("bartlett_window", n, periodic, dtype,
                          lambda k, m: 1 - np.abs(2 * k / (m - 1) - 1)), device)


def _kaiser_fwd(n, periodic, beta, dtype, layout, device, pin):
    return _place(_window("kaiser_window", n, periodic, dtype, lambda k, m: np.kaiser(m, beta)), device)


_logspace = _factory(f"logspace(Scalar start, Scalar end, int steps, float base=10.0, {_OPT}) -> Tensor",
                     _logspace_fwd, samples=lambda rng: [sample("10", 0.0, 2.0, 5), sample("2", -1, 3, 4, 2.0),
                                                         sample("int", 0, 3, 4, 2.0, dtype=D.int64)])
_empty_strided = _factory(f"empty_strided(SymInt[] size, SymInt[] stride, {_OPT}) -> Tensor",
                          _empty_strided_fwd, samples=_drawn)
_tril_indices = _factory(f"tril_indices(int row, int col, int offset=0, {_OPT}) -> Tensor",
                         _tri_indices_fwd(True),
                         samples=lambda rng: [sample("3x3", 3, 3), sample("4x3_up", 4, 3, 1),
                                              sample("down", 3, 5, -1, dtype=D.int32)])
_triu_indices = _factory(f"triu_indices(int row, int col, int offset=0, {_OPT}) -> Tensor",
                         _tri_indices_fwd(False),
                         samples=lambda rng: [sample("3x3", 3, 3), sample("3x4_up", 3, 4, 1),
                                              sample("down", 5, 3, -2)])
_range = _factory(f"range.step(Scalar start, Scalar end, Scalar step=1, {_OPT}) -> Tensor", _range_fwd,
                  samples=_drawn)  # deprecated with a warning: tests/test_namespace_extra.py
_PERIODIC = "int window_length, bool periodic=True"
_hann_window = _factory(f"hann_window({_PERIODIC}, {_OPT}) -> Tensor", _cosine_fwd("hann_window"),
                        samples=lambda rng: [sample("4", 4), sample("sym", 5, False), sample("1", 1)])
_blackman_window = _factory(f"blackman_window({_PERIODIC}, {_OPT}) -> Tensor", _cosine_fwd("blackman_window"),
                            samples=lambda rng: [sample("5", 5), sample("sym", 6, False, dtype=D.float64)])
_hamming_window = _factory(f"hamming_window({_PERIODIC}, float alpha=0.54, float beta=0.46, {_OPT}) -> Tensor",
                           _hamming_fwd, samples=lambda rng: [sample("4", 4), sample("ab", 5, True, 0.5, 0.5),
                                                              sample("0", 0)])
_bartlett_window = _factory(f"bartlett_window({_PERIODIC}, {_OPT}) -> Tensor", _bartlett_fwd,
                            samples=lambda rng: [sample("5", 5), sample("sym", 6, False)])
_kaiser_window = _factory(f"kaiser_window({_PERIODIC}, float beta=12.0, {_OPT}) -> Tensor", _kaiser_fwd,
                          samples=lambda rng: [sample("5", 5, dtype=D.float64),  # float32: i0 rounds differently
                                                   sample("beta", 6, False, 5.0, dtype=D.float64)])


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False) -> Tensor:
    device = _device(device)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    return _grad_leaf(dispatch(_logspace, (start, end, steps, base, _dtype_arg(dtype), layout, device, None)),
                      requires_grad)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False) -> Tensor:
    """A 0-d tensor of ``s``, of the default dtype unless told (bool and int values too)."""
    device = _device(device)
    if isinstance(s, Tensor):
        s = s.item()
    return _grad_leaf(dispatch(_full, ((), s, _dtype_arg(dtype) or D.get_default_dtype(), layout, device,
                                       None)), requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False) -> Tensor:
    device = _device(device)
    size, stride = _size((size,), "empty_strided"), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    return _grad_leaf(dispatch(_empty_strided, (size, stride, _dtype_arg(dtype), layout, device, None)),
                      requires_grad)


def _tri_indices(rec):
    def tri_indices(row, col, offset=0, *, dtype=None, device=None, layout=None) -> Tensor:
        return dispatch(rec, (row, col, offset, _dtype_arg(dtype) or D.int64, layout, _device(device), None))

    tri_indices.__name__ = tri_indices.__qualname__ = rec.name
    return tri_indices


tril_indices = _tri_indices(_tril_indices)
triu_indices = _tri_indices(_triu_indices)


def _range_public(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
                  requires_grad=False, pin_memory=False) -> Tensor:
    """Deprecated: ``end`` included; the default dtype even for integer bounds."""
    import warnings

    warnings.warn("torch.range is deprecated and will be removed in a future release because its "
                  "behavior is inconsistent with Python's range builtin. Instead, use torch.arange, "
                  "which produces values in [start, end).", UserWarning, stacklevel=2)
    _check(device)  # NOTE(pytorch): torch.range ignores set_default_device (torch 2.13)
    start, end, step = _bounds(start, end, step, "lower")
    return _grad_leaf(dispatch(_range, (start, end, step, _dtype_arg(dtype), layout, device, None)),
                      requires_grad)


def _window_fn(rec, *extra_names):
    defaults = {"alpha": 0.54, "beta": 12.0 if rec.name == "kaiser_window" else 0.46}

    # NOTE(pytorch): alpha and beta are positional only (torch's overloads refuse them as keywords)
    def window(window_length, periodic=True, *args, dtype=None, layout=None, device=None,
               requires_grad=False, pin_memory=False):
        device = _device(device)
        if len(args) > len(extra_names):
            raise TypeError(f"{rec.name}() takes at most {2 + len(extra_names)} positional arguments")
        extra = list(args) + [defaults[n] for n in extra_names[len(args):]]
        return _grad_leaf(dispatch(rec, (window_length, periodic, *extra, _dtype_arg(dtype), layout, device,
                                         None)), requires_grad)

    window.__name__ = window.__qualname__ = rec.name
    return window


hann_window = _window_fn(_hann_window)
blackman_window = _window_fn(_blackman_window)
bartlett_window = _window_fn(_bartlett_window)
hamming_window = _window_fn(_hamming_window, "alpha", "beta")
kaiser_window = _window_fn(_kaiser_window, "beta")

def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False) -> Tensor:
    """``obj`` as a tensor, sharing memory with a tensor or NumPy array unless a copy is asked
    for or a dtype or device change needs one."""
    from .._factories import as_tensor, tensor

    if copy:
        t = tensor(obj.detach() if isinstance(obj, Tensor) else obj, dtype=dtype, device=_device(device))
    else:
        t = as_tensor(obj, dtype=dtype, device=device)
        if copy is False and isinstance(obj, (Tensor, np.ndarray)) and \
                t.data_ptr() != (obj.data_ptr() if isinstance(obj, Tensor) else obj.__array_interface__["data"][0]):
            raise ValueError("can't alias tensor from the given object: a copy would be needed")
    if requires_grad and not t.requires_grad:
        t = (t.detach() if t is obj else t).requires_grad_()
    return t


_range_public.__name__ = _range_public.__qualname__ = "range"
NAMESPACES[""]["range"] = _range_public  # not a module global: factory.py calls the builtin
for _name in ("logspace", "scalar_tensor", "asarray", "empty_strided", "tril_indices", "triu_indices",
              "hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
    NAMESPACES[""][_name] = globals()[_name]
