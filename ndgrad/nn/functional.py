"""``ndgrad.nn.functional``: activations and other functional ops registered under this name."""

from __future__ import annotations

from .._ops.registry import NAMESPACES as _NS
from .._ops.registry import OPS as _OPS

globals().update(_NS["nn.functional"])
relu = _OPS["relu"].call
sigmoid = _OPS["sigmoid"].call
tanh = _OPS["tanh"].call

# --- plain-Python functionals (compositions of ops; their gradients come from those ops) ---
from .._ops.nn import (  # noqa: E402,F401
    alpha_dropout, dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout, rrelu_)
# (the composites of the op table are published into this namespace by ``defcomposite``)

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


_hardtanh = _OPS["hardtanh"].call
_hardtanh_ = _OPS["hardtanh_"].call


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    return _hardtanh_(input, min_val, max_val) if inplace else _hardtanh(input, min_val, max_val)


def hardtanh_(input, min_val: float = -1.0, max_val: float = 1.0):
    return _hardtanh_(input, min_val, max_val)


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


_elu, _elu_ = _OPS["elu"].call, _OPS["elu_"].call
_leaky_relu, _leaky_relu_ = _OPS["leaky_relu"].call, _OPS["leaky_relu_"].call


# PyTorch's signatures (``inplace``, no ``scale``/``input_scale``) over the aten-style records
def elu(input, alpha: float = 1.0, inplace: bool = False):
    return _elu_(input, alpha) if inplace else _elu(input, alpha)


def elu_(input, alpha: float = 1.0):
    return _elu_(input, alpha)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    return _leaky_relu_(input, negative_slope) if inplace else _leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope: float = 0.01):
    return _leaky_relu_(input, negative_slope)


relu_ = _OPS["relu_"].call


def selu(input, inplace: bool = False):
    if inplace:
        return _elu_(input, 1.6732632423543772, 1.0507009873554805)
    return _elu(input, 1.6732632423543772, 1.0507009873554805)


def selu_(input):
    return selu(input, True)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    if inplace:
        return _elu_(input, alpha, 1.0, 1.0 / alpha)
    return _elu(input, alpha, 1.0, 1.0 / alpha)


def celu_(input, alpha: float = 1.0):
    return celu(input, alpha, True)


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
    if inplace:
        return input.masked_fill_(input <= threshold, value)
    return input.masked_fill(input <= threshold, value)


def threshold_(input, threshold: float, value: float):
    return input.masked_fill_(input <= threshold, value)


# --- pooling with indices, deprecated upsampling aliases ---
def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool3d(input, output_size, True)


def _deprecated(name):
    import warnings

    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=3)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
