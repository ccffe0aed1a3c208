"""``torch.backends``: the switches scripts set for cuDNN, CUDA matmul, MPS, MKL-DNN and OpenMP.

ndgrad runs on NumPy (and CuPy), so each flag is recorded and read back as PyTorch's is and
changes nothing; ``is_available()`` says whether ndgrad could use that backend (never, except
``cudnn``/``cuda`` through CuPy's CUDA device). Settings of the whole process: see ``ndgrad._config``.
"""

from __future__ import annotations

from . import cpu, cuda, cudnn, mkldnn, mps, openmp

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps", "openmp"]
