"""``torch.backends.cpu``: the CPU's SIMD capability as PyTorch reports it."""

from __future__ import annotations


def get_cpu_capability() -> str:
    """NumPy picks its own SIMD kernels at run time; ``"DEFAULT"`` says ndgrad picks none."""
    return "DEFAULT"
