"""ndgrad: PyTorch's autograd rebuilt in Python over NumPy arrays (``import ndgrad as torch``).

Layers, bottom up: ``_backend`` (devices, array namespaces), ``autograd.node``/``saved``/
``grad_mode``/``dispatch_mode`` (nodes, saved tensors, modes), ``_tensor`` (Tensor), ``_ops``
(every op, one dispatch point), ``autograd`` engine and friends, then libraries (``nn``). See
docs/ARCHITECTURE.md; tests/test_layers.py holds the layer map and checks every import.
"""

from __future__ import annotations

from . import _backend
from ._backend import Device, device, get_default_device, set_default_device  # noqa: F401
from ._dtype import (  # noqa: F401
    complex64, complex128, dtype, float16, float32, float64, get_default_dtype, int8, int16, int32,
    int64, promote_types, set_default_dtype, uint8,
)
from ._dtype import ALIASES as _ALIASES
from ._dtype import bfloat16  # None without ml_dtypes: deleted below, __getattr__ explains
from ._dtype import bool_ as bool  # noqa: A001
from ._tensor import Size, Tensor
from ._tensor_str import get_printoptions, set_printoptions  # noqa: F401
from . import _ops
from ._ops.registry import NAMESPACES as _NS
from ._factories import *  # noqa: F401,F403
from . import autograd
from .autograd import api as _autograd_api  # noqa: F401  (attaches Tensor.backward)
from .autograd.grad_mode import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from . import fft, linalg, special  # noqa: F401
from . import return_types  # noqa: F401
from . import nn  # noqa: F401
from . import optim  # noqa: F401
from . import utils  # noqa: F401
from . import ops  # noqa: F401
from . import cuda  # noqa: F401
from . import profiler  # noqa: F401
from . import futures  # noqa: F401
from . import distributed, multiprocessing  # noqa: F401
from . import func  # noqa: F401
from . import jit  # noqa: F401
from .func import vmap  # noqa: F401  (torch.vmap is torch.func.vmap)
from ._legacy_types import *  # noqa: F401,F403  (FloatTensor, LongTensor, ..., Tensor.new)
from . import accelerator, distributions, testing  # noqa: F401
from . import amp, cpu  # noqa: F401
from .amp.autocast_mode import (  # noqa: F401
    autocast, clear_autocast_cache, get_autocast_cpu_dtype, get_autocast_dtype, get_autocast_gpu_dtype,
    is_autocast_cache_enabled, is_autocast_cpu_enabled, is_autocast_enabled, set_autocast_cache_enabled,
    set_autocast_cpu_dtype, set_autocast_cpu_enabled, set_autocast_dtype, set_autocast_enabled,
    set_autocast_gpu_dtype,
)
from . import compiler, fx  # noqa: F401
from . import _dynamo, _logging  # noqa: F401
from .compiler.dynamo import compile  # noqa: A004  (torch.compile)
from .serialization import save, load  # noqa: F401
from . import backends  # noqa: F401
from ._config import *  # noqa: F401,F403  (finfo, iinfo, threads, determinism, typename)

globals().update(_NS[""])
globals().update(_ALIASES)  # float, double, half, long, int, short, cfloat, cdouble

__version__ = "0.1.0"

if bfloat16 is None:
    del bfloat16


def __getattr__(name: str):
    if name in ("bfloat16", "BFloat16Tensor"):
        from ._dtype import BF16_MISSING

        raise AttributeError(f"module 'ndgrad' has no attribute '{name}' ({BF16_MISSING})")
    raise AttributeError(f"module 'ndgrad' has no attribute '{name}'")


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def equal(input, other) -> bool:
    """True when both tensors have the same shape and equal elements."""
    for pos, (name, arg) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(arg, Tensor):
            raise TypeError(
                f"equal(): argument '{name}' (position {pos}) must be Tensor, "
                f"not {type(arg).__name__}"
            )
    return input.equal(other)


def is_inference(input) -> bool:
    if not isinstance(input, Tensor):
        raise TypeError(f"is_inference(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return input.is_inference()


def is_floating_point(t) -> bool:
    return t.is_floating_point()


def numel(t) -> int:
    return t.numel()


def result_type(a, b):
    from ._dtype import result_type as _rt

    return _rt([a, b])


def can_cast(from_, to) -> bool:
    from ._dtype import can_cast as _cc

    return _cc(from_, to)


from .autograd.anomaly_mode import (  # noqa: E402  (torch has these at top level too)
    is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled,
)
