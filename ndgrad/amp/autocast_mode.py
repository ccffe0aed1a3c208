"""``autocast``: mixed precision by op lists, as PyTorch's ``torch.amp.autocast``.

Inside ``autocast(device_type)`` the ops PyTorch lists run in lower precision (matmuls and
convolutions: their float32 tensor arguments are cast to ``bfloat16`` on the CPU, ``float16`` on
CUDA by default), the ones it lists as needing range run in float32 (losses, reductions,
decompositions: lower-precision arguments are cast up), a few promote mixed arguments to the
widest, and every other op runs in the dtypes it is given. float64 tensors are never cast.

It is a dispatch mode on this thread's stack (``_AutocastMode``), pushed while any autocast
region is enabled; the state (enabled and dtype per device type, the cast cache) is per thread,
as PyTorch's. The lists are of op records (``ndgrad._ops.registry.OPS`` names), checked against
PyTorch 2.13 on the CPU (``tests/test_autocast.py``); the CUDA lists follow PyTorch's
documentation. Casts are ops (``to``), so gradients flow back through them in the input's dtype.
Casts of leaf tensors that require grad (weights) are cached until the outermost region exits.
"""

from __future__ import annotations

import functools
import threading
import warnings

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._tensor import Tensor
from ..autograd import dispatch_mode as _dm
from ..autograd.grad_mode import _DecoratorContextManager

__all__ = ["autocast", "is_autocast_available", "custom_fwd", "custom_bwd", "is_autocast_enabled",
           "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype", "clear_autocast_cache",
           "is_autocast_cache_enabled", "set_autocast_cache_enabled"]

_LOWER, _FP32, _PROMOTE = 1, 2, 3
_CONV = ("conv1d", "conv2d", "conv3d", "convolution", "conv_transpose1d", "conv_transpose2d",
         "conv_transpose3d")
# Most listed functions are composites here, which no mode sees: where one is made of a primitive
# that does the listed work, that primitive is listed (cross_entropy, nll_loss, binary
# cross-entropy, svd; conv*d through ``convolution``). The composites made of pointwise ops
# (mse_loss, l1_loss, huber_loss, ...) compute in their inputs' dtypes.
_FP32_PARTS = ("_cross_entropy", "_nll_loss", "_binary_cross_entropy", "_linalg_svd")
_POLICY = {
    "cpu": {
        **dict.fromkeys(("mm", "bmm", "matmul", "addmm", "baddbmm", "prelu", "einsum", "tensordot",
                         "scaled_dot_product_attention") + _CONV, _LOWER),
        **dict.fromkeys((
            "mse_loss", "cross_entropy", "nll_loss", "l1_loss", "binary_cross_entropy",
            "binary_cross_entropy_with_logits", "kl_div", "huber_loss", "smooth_l1_loss", "prod",
            "prod.dim_int", "cdist", "trace", "avg_pool3d", "max_pool3d", "adaptive_avg_pool3d",
            "adaptive_max_pool3d", "quantile", "nanquantile", "inverse", "linalg_inv", "svd",
            "linalg_svd", "linalg_svdvals", "linalg_qr", "linalg_cholesky", "linalg_solve",
            "triplet_margin_loss", "polar", "view_as_complex") + _FP32_PARTS, _FP32),
        **dict.fromkeys(("cat", "stack"), _PROMOTE),
    },
    "cuda": {
        **dict.fromkeys(("mm", "bmm", "matmul", "addmm", "baddbmm", "mv", "prelu", "einsum",
                         "scaled_dot_product_attention", "_lstm_cell", "_gru_cell", "_lstm_layer")
                        + _CONV, _LOWER),
        **dict.fromkeys((
            "pow", "pow.Scalar", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "acos", "asin", "cosh",
            "sinh", "tan", "erfinv", "exp", "expm1", "log", "log10", "log1p", "log2", "reciprocal",
            "rsqrt", "softplus", "layer_norm", "group_norm", "norm", "vector_norm", "cosine_similarity",
            "cdist", "cumprod", "cumsum", "sum", "sum.dim_IntList", "prod", "prod.dim_int",
            "softmax.int", "log_softmax.int", "cross_entropy", "nll_loss", "kl_div", "l1_loss",
            "smooth_l1_loss", "mse_loss", "triplet_margin_loss", "binary_cross_entropy_with_logits")
            + _FP32_PARTS, _FP32),
        **dict.fromkeys(("addcdiv", "addcmul", "atan2", "cross", "linalg_cross", "dot", "index_put",
                         "scatter_add", "tensordot", "cat", "stack"), _PROMOTE),
    },
}
_LISTED = frozenset(_POLICY["cpu"]) | frozenset(_POLICY["cuda"])
_SUPPORTED = {"cpu": ("bfloat16", "float16"), "cuda": ("float16", "bfloat16")}
_DEFAULT_DTYPE = {"cpu": "bfloat16", "cuda": "float16"}
_UNSAFE_CUDA = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast.")


class _State(threading.local):
    def __init__(self):
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = {}  # device type -> ndgrad dtype, once set (else the default, by name)
        self.cache_enabled = True
        self.cache = {}  # id(weight) -> (weight, its cast): kept alive until the region ends
        self.nesting = 0
        self.pushed = False


_state = _State()


def _check_device_type(device_type: str) -> str:
    if device_type not in _SUPPORTED:
        _backend.as_device(device_type)  # PyTorch's error for an unknown device string
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
    return device_type


def is_autocast_available(device_type: str) -> bool:
    if device_type in _SUPPORTED:
        return True
    _backend.as_device(device_type)
    return False


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    return _state.enabled[_check_device_type(device_type)]


def set_autocast_enabled(device_type, enabled=None) -> None:
    """``set_autocast_enabled(device_type, enabled)``, or the old ``set_autocast_enabled(enabled)``
    (CUDA). Pushes or removes the mode so that it is on the stack exactly while enabled."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    _state.enabled[_check_device_type(device_type)] = bool(enabled)
    _sync_mode()


def get_autocast_dtype(device_type: str):
    dt = _state.dtype.get(_check_device_type(device_type))
    return dt if dt is not None else D.to_dtype(_DEFAULT_DTYPE[device_type])


def set_autocast_dtype(device_type: str, dtype) -> None:
    _state.dtype[_check_device_type(device_type)] = D.to_dtype(dtype)


def is_autocast_cache_enabled() -> bool:
    return _state.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    _state.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    _state.cache.clear()


def _sync_mode() -> None:
    on = _state.enabled["cpu"] or _state.enabled["cuda"]
    if on and not _state.pushed:
        _dm.push(_MODE)
        _state.pushed = True
    elif not on and _state.pushed:
        _dm.remove(_MODE)
        _state.pushed = False


def _eligible(t) -> bool:
    """A tensor autocast may cast: floating, and not float64 (PyTorch leaves doubles alone)."""
    k = t._data.dtype
    return k in D.FLOATING and k != np.float64


def _cast(t, dtype, cache: bool):
    """``t`` in ``dtype``; a weight's cast (a leaf requiring grad) is made once per region."""
    if t._data.dtype == dtype.np or not _eligible(t):
        return t
    if cache and _state.cache_enabled and t._rg and t._grad_fn is None and t._view is None:
        hit = _state.cache.get(id(t))
        if hit is not None and hit[0] is t and hit[1].dtype is dtype:
            return hit[1]
        out = t.to(dtype)
        _state.cache[id(t)] = (t, out)
        return out
    return t.to(dtype)


class _AutocastMode:
    """Casts the tensor arguments of the listed ops (see the module docstring)."""

    __slots__ = ()

    def dispatch(self, rec, args, run):
        if rec.name not in _LISTED:  # most ops: as outside autocast, on their fast path if alone
            direct = rec.extra.get("direct") if len(_dm.active) == 1 else None
            return direct(*args) if direct is not None else run(rec, args)
        st = _state
        dev = _device_type_of(args)
        if dev is None or not st.enabled[dev]:
            return run(rec, args)
        policy = _POLICY[dev].get(rec.name)
        if policy is None:
            return run(rec, args)
        if policy == _LOWER:
            dt = get_autocast_dtype(dev)
            return run(rec, _map_tensors(args, lambda t: _cast(t, dt, True)))
        if policy == _FP32:
            if dev == "cuda" and rec.name == "binary_cross_entropy":
                raise RuntimeError(_UNSAFE_CUDA)
            return run(rec, _map_tensors(args, lambda t: _cast(t, D.float32, False)))
        widest = None  # _PROMOTE: every floating argument in the widest floating dtype among them
        for t in _tensors(args):
            if t._data.dtype in D.FLOATING:
                d = D._FROM_NP[t._data.dtype]
                widest = d if widest is None else D.promote_types(widest, d)
        if widest is None:
            return run(rec, args)
        return run(rec, _map_tensors(args, lambda t: _cast(t, widest, False)))


_MODE = _AutocastMode()


def _tensors(args):
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif type(a) in (list, tuple):
            yield from (t for t in a if isinstance(t, Tensor))


def _map_tensors(args, fn) -> tuple:
    out = []
    for a in args:
        if isinstance(a, Tensor):
            a = fn(a)
        elif type(a) in (list, tuple) and any(isinstance(t, Tensor) for t in a):
            a = type(a)(fn(t) if isinstance(t, Tensor) else t for t in a)
        out.append(a)
    return tuple(out)


def _device_type_of(args):
    """The device type the op runs on: its first tensor argument's ('cpu', 'cuda'), else None."""
    for t in _tensors(args):
        if type(t._data) is np.ndarray:
            return "cpu"
        return _backend.device_of(t._data).type
    return None


class autocast(_DecoratorContextManager):
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a context
    manager and decorator; regions nest, and ``enabled=False`` turns autocast off within one."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = _check_device_type(device_type)
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else D.to_dtype(dtype)
        self._cache_enabled = _state.cache_enabled if cache_enabled is None else bool(cache_enabled)
        self._enabled = bool(enabled)
        self._args = (device_type, dtype, enabled, cache_enabled)
        if self.device == "cpu" and self.fast_dtype.name not in _SUPPORTED["cpu"] and enabled:
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                          stacklevel=2)
            self._enabled = False
        if self.device == "cuda" and enabled:
            from .. import cuda

            if not cuda.is_available():
                warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.",
                              stacklevel=2)
                self._enabled = False
            elif self.fast_dtype.name not in _SUPPORTED["cuda"]:
                warnings.warn("In CUDA autocast, but the target dtype is not supported. Disabling "
                              "autocast.\nCUDA Autocast only supports dtypes of torch.float16 and "
                              "torch.bfloat16 currently.", stacklevel=2)
                self._enabled = False
        self._prev = None

    def __enter__(self):
        st = _state
        dev = self.device
        self._prev = (st.enabled[dev], st.dtype.get(dev), st.cache_enabled)
        st.enabled[dev] = self._enabled
        st.dtype[dev] = self.fast_dtype
        st.cache_enabled = self._cache_enabled
        st.nesting += 1
        _sync_mode()

    def __exit__(self, *exc):
        st = _state
        st.nesting -= 1
        if st.nesting == 0:
            st.cache.clear()  # casts of weights do not outlive the region (their versions move on)
        dev = self.device
        st.enabled[dev], dt, st.cache_enabled = self._prev
        if dt is None:
            st.dtype.pop(dev, None)
        else:
            st.dtype[dev] = dt
        _sync_mode()
        return False

    def clone(self):
        return autocast(*self._args)


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorate a custom ``Function``'s ``forward``: it records the autocast state for
    ``custom_bwd``; with ``cast_inputs``, inside an enabled region its floating tensor arguments
    are cast to that dtype and it runs with autocast off."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def forward(*args, **kwargs):
        ctx = args[0]
        on = is_autocast_enabled(device_type)
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None or not on:
            ctx._fwd_used_autocast = on
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        dt = D.to_dtype(cast_inputs)
        cast = _map_tensors(args[1:], lambda t: _cast(t, dt, False))
        kw = dict(zip(kwargs, _map_tensors(tuple(kwargs.values()), lambda t: _cast(t, dt, False))))
        with autocast(device_type=device_type, enabled=False):
            return fwd(ctx, *cast, **kw)

    return forward


def custom_bwd(bwd=None, *, device_type: str):
    """Decorate a custom ``Function``'s ``backward``: it runs with the autocast state its forward
    ran with."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def backward(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return backward


# --- PyTorch's deprecated spellings (CPU and CUDA variants of the functions above) ---
def _deprecated(old: str, new: str, fn):
    def wrapper(*args):
        warnings.warn(f"torch.{old}() is deprecated. Please use torch.{new} instead.",
                      DeprecationWarning, stacklevel=2)
        return fn(*args)

    wrapper.__name__ = wrapper.__qualname__ = old
    return wrapper


is_autocast_cpu_enabled = _deprecated("is_autocast_cpu_enabled", "is_autocast_enabled('cpu')",
                                      lambda: is_autocast_enabled("cpu"))
get_autocast_cpu_dtype = _deprecated("get_autocast_cpu_dtype", "get_autocast_dtype('cpu')",
                                     lambda: get_autocast_dtype("cpu"))
get_autocast_gpu_dtype = _deprecated("get_autocast_gpu_dtype", "get_autocast_dtype('cuda')",
                                     lambda: get_autocast_dtype("cuda"))
set_autocast_cpu_enabled = _deprecated("set_autocast_cpu_enabled", "set_autocast_enabled('cpu', enabled)",
                                       lambda enabled: set_autocast_enabled("cpu", enabled))
set_autocast_cpu_dtype = _deprecated("set_autocast_cpu_dtype", "set_autocast_dtype('cpu', dtype)",
                                     lambda dtype: set_autocast_dtype("cpu", dtype))
set_autocast_gpu_dtype = _deprecated("set_autocast_gpu_dtype", "set_autocast_dtype('cuda', dtype)",
                                     lambda dtype: set_autocast_dtype("cuda", dtype))


def device_autocast(device_type: str, default_dtype: str):
    """``torch.<device>.amp.autocast(enabled=True, dtype=..., cache_enabled=True)``, deprecated."""

    class _autocast(autocast):
        def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
            warnings.warn(f"`torch.{device_type}.amp.autocast(args...)` is deprecated. Please use "
                          f"`torch.amp.autocast('{device_type}', args...)` instead.", FutureWarning,
                          stacklevel=2)
            super().__init__(device_type, D.to_dtype(default_dtype) if dtype is None else dtype,
                             enabled, cache_enabled)
            self._args = (enabled, dtype, cache_enabled)

        def clone(self):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                return type(self)(*self._args)

    _autocast.__name__ = _autocast.__qualname__ = "autocast"
    return _autocast


def device_grad_scaler(device_type: str):
    """``torch.<device>.amp.GradScaler(init_scale=..., ...)``, deprecated."""
    from .grad_scaler import GradScaler

    class _GradScaler(GradScaler):
        def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                     backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
            warnings.warn(f"`torch.{device_type}.amp.GradScaler(args...)` is deprecated. Please use "
                          f"`torch.amp.GradScaler('{device_type}', args...)` instead.", FutureWarning,
                          stacklevel=2)
            super().__init__(device_type, init_scale, growth_factor, backoff_factor, growth_interval,
                             enabled)

    _GradScaler.__name__ = _GradScaler.__qualname__ = "GradScaler"
    return _GradScaler
