"""``torch.cpu.amp``: the deprecated CPU spellings of ``ndgrad.amp``."""

from ...amp.autocast_mode import device_autocast, device_grad_scaler

GradScaler = device_grad_scaler("cpu")
autocast = device_autocast("cpu", "bfloat16")

__all__ = ["autocast", "GradScaler"]
