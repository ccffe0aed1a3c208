"""``ndgrad.nn.functional``: activations and other functional ops registered under this name."""

from __future__ import annotations

from .._ops.registry import NAMESPACES as _NS
from .._ops.registry import OPS as _OPS

globals().update(_NS["nn.functional"])
relu = _OPS["relu"].call
sigmoid = _OPS["sigmoid"].call
tanh = _OPS["tanh"].call

# --- plain-Python functionals (compositions of ops; their gradients come from those ops) ---
import numpy as _np  # noqa: E402

from .. import _backend  # noqa: E402
from .._factories import default_generator as _gen  # noqa: E402
from .._tensor import Tensor as _Tensor  # noqa: E402

_addmm = _OPS["addmm"].call
_matmul = _OPS["matmul"].call
_t = _OPS["t"].call
_einsum = _NS[""]["einsum"]
_clamp = _NS[""]["clamp"]


def linear(input, weight, bias=None):
    """``y = input @ weight.T + bias``. With a bias, as PyTorch decomposes it: one ``addmm``
    (the bias added in place on the product), the leading dimensions flattened into rows around
    it by views, so one GEMM serves the whole batch and the nodes are PyTorch's."""
    if bias is not None and input.ndim >= 2:
        if input.ndim == 2:
            return _addmm(bias, input, _t(weight))
        out = _addmm(bias, input.reshape(-1, input.shape[-1]), _t(weight))
        return out.view(input.shape[:-1] + (out.shape[-1],))
    out = _matmul(input, _t(weight))
    return out if bias is None else out + bias


def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]``."""
    out = _einsum("...i,oij,...j->...o", input1, weight, input2)
    return out if bias is None else out + bias


def _check_p(p) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_mask(input, p, shape):
    """A ``keep / (1 - p)`` mask in the input's dtype, from the global generator (drawn on the
    host, as the CPU's stream of numbers, and moved to the input's device)."""
    x = input._data
    if p == 1.0:
        return _Tensor._make(_backend.namespace_of(x).zeros(shape, x.dtype), None, 0, None)
    mask = ((_gen.rng.random(shape) >= p) * (1.0 / (1.0 - p))).astype(x.dtype)
    if type(x) is not _np.ndarray:
        mask = _backend.to_device(mask, _backend.device_of(x))
    return _Tensor._make(mask, None, 0, None)


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    _check_p(p)
    if not training or p == 0.0:
        return input
    mask = _dropout_mask(input, p, input._data.shape)
    return input.mul_(mask) if inplace else input * mask


def _feature_dropout(input, p, training, inplace, batched_ndim):
    _check_p(p)
    if not training or p == 0.0:
        return input
    # one draw per (batch, channel): the mask broadcasts over the spatial dims
    lead = 2 if input.ndim == batched_ndim else 1
    shape = input.shape[:lead] + (1,) * (input.ndim - lead)
    mask = _dropout_mask(input, p, shape)
    return input.mul_(mask) if inplace else input * mask


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    if input.ndim not in (2, 3):
        raise RuntimeError(
            "dropout1d: Expected 2D or 3D input, but received a "
            f"{input.ndim}D input. Note that dropout1d exists to provide channel-wise dropout "
            "on inputs with 1 spatial dimension, a channel dimension, and an optional batch "
            "dimension (i.e. 2D or 3D inputs)."
        )
    return _feature_dropout(input, p, training, inplace, 3)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    return _feature_dropout(input, p, training, inplace, 4)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    return _feature_dropout(input, p, training, inplace, 5)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    return input.clamp_(min_val, max_val) if inplace else _clamp(input, min_val, max_val)


def relu6(input, inplace: bool = False):
    return hardtanh(input, 0.0, 6.0, inplace)


def logsigmoid(input):
    return -softplus(-input)


def softsign(input):
    return input / (input.abs() + 1)


def tanhshrink(input):
    return input - input.tanh()


def mish(input, inplace: bool = False):
    out = input * softplus(input).tanh()
    return input.copy_(out) if inplace else out


def selu(input, inplace: bool = False):
    out = elu(input, 1.6732632423543772, 1.0507009873554805)
    return input.copy_(out) if inplace else out


def celu(input, alpha: float = 1.0, inplace: bool = False):
    out = elu(input, alpha, 1.0, 1.0 / alpha)
    return input.copy_(out) if inplace else out


def hardsigmoid(input, inplace: bool = False):
    out = _clamp(input / 6 + 0.5, 0.0, 1.0)
    return input.copy_(out) if inplace else out


def hardswish(input, inplace: bool = False):
    out = input * _clamp(input + 3, 0.0, 6.0) / 6
    return input.copy_(out) if inplace else out


def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):
    return softmax(-input, dim, dtype=dtype)


def glu(input, dim: int = -1):
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    a, b = input.chunk(2, dim)
    return a * sigmoid(b)


def threshold(input, threshold: float, value: float, inplace: bool = False):
    out = input.masked_fill(input <= threshold, value)
    return input.copy_(out) if inplace else out
