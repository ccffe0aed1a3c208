"""``ndgrad.fft``: PyTorch's ``torch.fft`` (discrete Fourier transforms, sample frequencies,
shifts), the composites registered under ``fft`` by ``_ops/fft.py``."""

from ._ops.registry import NAMESPACES as _NS

globals().update(_NS["fft"])
