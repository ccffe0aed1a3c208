"""``torch.backends.cuda``: the CUDA matmul flags (recorded; CuPy's cuBLAS ignores them)."""

from __future__ import annotations


class _MatmulFlags:
    """``backends.cuda.matmul``: attributes with PyTorch's defaults, any of which may be set."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __repr__(self) -> str:
        return f"<ndgrad.backends.cuda.matmul allow_tf32={self.allow_tf32}>"


matmul = _MatmulFlags()


def is_built() -> bool:
    """Whether ndgrad can run on CUDA at all: it does so through CuPy when that is installed."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


_flash, _mem_efficient, _math = [True], [True], [True]


def flash_sdp_enabled() -> bool:
    return _flash[0]


def enable_flash_sdp(enabled: bool) -> None:
    _flash[0] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _mem_efficient[0]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _mem_efficient[0] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _math[0]


def enable_math_sdp(enabled: bool) -> None:
    _math[0] = bool(enabled)
