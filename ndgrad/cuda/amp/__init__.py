"""``torch.cuda.amp``: the deprecated CUDA spellings of ``ndgrad.amp``."""

from ...amp.autocast_mode import custom_bwd as _custom_bwd, custom_fwd as _custom_fwd, device_autocast, device_grad_scaler

GradScaler = device_grad_scaler("cuda")
autocast = device_autocast("cuda", "float16")


def custom_fwd(fwd=None, *, cast_inputs=None):
    return _custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    return _custom_bwd(bwd, device_type="cuda")


__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]
