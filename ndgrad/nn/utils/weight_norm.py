"""Weight normalisation (Salimans and Kingma), PyTorch's hook form (``nn.utils.weight_norm``,
deprecated there in favour of the parametrization): the parameter ``name`` is replaced by a
magnitude ``name_g`` and a direction ``name_v``, and a forward pre-hook recomputes
``name = name_v * name_g / ||name_v||`` before every forward."""

from __future__ import annotations

import warnings

from ..._ops.norm import _weight_norm, norm_except_dim
from ..parameter import Parameter, UninitializedParameter

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


class WeightNorm:
    """The forward pre-hook of one weight-normalised parameter."""

    def __init__(self, name: str, dim) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"),
                            self.dim)

    @staticmethod
    def apply(module, name: str, dim) -> "WeightNorm":
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if isinstance(weight, UninitializedParameter):
            raise ValueError("The module passed to `WeightNorm` can't have uninitialized parameters. Make sure "
                             "to run the dummy forward before applying weight normalization")
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name: str = "weight", dim=0):
    """Reparameterise ``module.<name>`` as magnitude ``<name>_g`` (the norm over every dim but
    ``dim``; ``dim=None``: the whole tensor) and direction ``<name>_v``; returns ``module``.

    >>> import ndgrad
    >>> m = ndgrad.nn.utils.weight_norm(ndgrad.nn.Linear(20, 40))  # doctest: +SKIP
    >>> m.weight_g.shape, m.weight_v.shape  # doctest: +SKIP
    (ndgrad.Size([40, 1]), ndgrad.Size([40, 20]))
    """
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name: str = "weight"):
    """Undo ``weight_norm``: ``module.<name>`` is a parameter again, holding the current weight."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
