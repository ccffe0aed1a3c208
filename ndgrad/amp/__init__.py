"""Automatic mixed precision (``torch.amp``): ``autocast`` runs the listed ops in lower or full
precision; ``GradScaler`` scales the loss so that float16 gradients do not underflow."""

from .autocast_mode import (  # noqa: F401
    autocast, clear_autocast_cache, custom_bwd, custom_fwd, get_autocast_dtype,
    is_autocast_available, is_autocast_cache_enabled, is_autocast_enabled, set_autocast_cache_enabled,
    set_autocast_dtype, set_autocast_enabled,
)
from .grad_scaler import GradScaler, OptState  # noqa: F401

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available", "GradScaler"]
