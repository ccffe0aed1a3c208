"""Parametrizations PyTorch ships (``torch.nn.utils.parametrizations``): ``weight_norm``."""

from __future__ import annotations

from ..._ops.norm import _weight_norm, norm_except_dim
from ..modules.module import Module
from . import parametrize

__all__ = ["weight_norm"]


class _WeightNorm(Module):
    """``weight = g * v / ||v||``, the norm over every dim but ``dim`` (None: the whole tensor)."""

    def __init__(self, dim=0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name: str = "weight", dim=0):
    """Weight normalisation as a parametrization: ``module.parametrizations.<name>.original0`` is
    the magnitude g, ``original1`` the direction v, and ``module.<name>`` is recomputed from them
    on each access. A state dict of the hook form (``<name>_g``, ``<name>_v``) loads into it."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def compat(mod, state_dict, prefix, *args):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module.register_load_state_dict_pre_hook(compat)
    return module
