"""Convolution modules: Conv1d/2d/3d, ConvTranspose1d/2d/3d, Fold and Unfold (forward through
``nn.functional``)."""

from __future__ import annotations

import math

from ... import no_grad
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import LazyModuleMixin, UninitializedParameter
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Fold", "Unfold",
           "LazyConv1d", "LazyConv2d", "LazyConv3d"]

_PAD_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _uniform_(t, bound):
    if hasattr(init, "uniform_"):
        return init.uniform_(t, -bound, bound)
    import ndgrad

    with no_grad():
        t.copy_(ndgrad.rand(*t.shape, dtype=t.dtype) * (2 * bound) - bound)
    return t


class _ConvNd(Module):
    def __init__(self, n, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                 output_padding, groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        import ndgrad

        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PAD_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PAD_MODES)}, but got padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.transposed = transposed
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        shape = ((in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups))
        kw = {} if dtype is None else {"dtype": dtype}
        self.weight = Parameter(ndgrad.empty(*shape, *self.kernel_size, **kw))
        if bias:
            self.bias = Parameter(ndgrad.empty(out_channels, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform(a=sqrt(5)) and the bias rule both come to U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        w = self.weight
        fan_in = w.shape[1] * math.prod(w.shape[2:])
        if hasattr(init, "kaiming_uniform_"):
            init.kaiming_uniform_(w, a=math.sqrt(5))
        else:
            _uniform_(w, 1 / math.sqrt(fan_in) if fan_in else 0)
        if self.bias is not None:
            _uniform_(self.bias, 1 / math.sqrt(fan_in) if fan_in else 0)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def _padded(self, input):
        """Non-zero padding modes pad explicitly, then convolve with no padding (as PyTorch)."""
        n = len(self.kernel_size)
        if isinstance(self.padding, str):
            d, k = self.dilation, self.kernel_size
            tot = [0] * n if self.padding == "valid" else [d[i] * (k[i] - 1) for i in range(n)]
            pads = []
            for i in reversed(range(n)):
                pads += [tot[i] // 2, tot[i] - tot[i] // 2]
        else:
            pads = [p for p in reversed(self.padding) for _ in range(2)]
        return F.pad(input, pads, mode=self.padding_mode)


class Conv1d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups,
                         bias, padding_mode, device, dtype)

    def forward(self, input):
        if self.padding_mode != "zeros":
            return F.conv1d(self._padded(input), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups,
                         bias, padding_mode, device, dtype)

    def forward(self, input):
        if self.padding_mode != "zeros":
            return F.conv2d(self._padded(input), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv3d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups,
                         bias, padding_mode, device, dtype)

    def forward(self, input):
        if self.padding_mode != "zeros":
            return F.conv3d(self._padded(input), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv3d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class _ConvTransposeNd(_ConvNd):
    n = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(self.n, in_channels, out_channels, kernel_size, stride, padding, dilation, True,
                         output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        n = self.n
        size = list(output_size)[-n:]
        out = []
        for i in range(n):
            base = ((input.shape[-n + i] - 1) * self.stride[i] - 2 * self.padding[i]
                    + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            if not base <= size[i] < base + max(self.stride[i], self.dilation[i]):
                raise ValueError(f"requested an output size of {size}, but valid sizes range from "
                                 f"[{base}, ...] (for an input of {list(input.shape[-n:])})")
            out.append(size[i] - base)
        return tuple(out)

    def forward(self, input, output_size=None):
        op = self._output_padding(input, output_size)
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self.n - 1]
        return fn(input, self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    n = 1


class ConvTranspose2d(_ConvTransposeNd):
    n = 2


class ConvTranspose3d(_ConvTransposeNd):
    n = 3


class Fold(Module):
    """Sums sliding local blocks ``(N, C * prod(kernel_size), L)`` into ``(N, C, *output_size)``."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    """Extracts sliding local blocks: ``(N, C, H, W)`` to ``(N, C * prod(kernel_size), L)``.

    >>> Unfold(2)(ndgrad.zeros(1, 3, 4, 4)).shape
    ndgrad.Size([1, 12, 9])
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


# --- lazy convolutions: ``in_channels`` (0 until then) from the first input's channel dim ---
class _LazyConvMixin(LazyModuleMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args) -> None:
        if not self.has_uninitialized_params():
            return
        n = len(self.kernel_size)
        in_channels = input.shape[0] if input.dim() == n + 1 else input.shape[1]
        if in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        self.in_channels = in_channels
        with no_grad():
            self.weight.materialize((self.out_channels, in_channels // self.groups) + tuple(self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


class LazyConv1d(_LazyConvMixin, Conv1d):
    cls_to_become = Conv1d


class LazyConv2d(_LazyConvMixin, Conv2d):
    """A Conv2d whose ``in_channels`` is inferred from the first input.

    >>> m = LazyConv2d(4, 3); _ = m(ndgrad.ones(1, 2, 5, 5)); type(m).__name__, tuple(m.weight.shape)
    ('Conv2d', (4, 2, 3, 3))
    """

    cls_to_become = Conv2d


class LazyConv3d(_LazyConvMixin, Conv3d):
    cls_to_become = Conv3d
