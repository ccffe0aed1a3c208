"""``ndgrad.autograd``: ``backward``, ``grad``, grad modes, graph nodes and ``gradcheck``.

Grad modes, ``Node`` and anomaly mode import only the autograd core (layer 2) and are imported
eagerly; what needs tensors (``backward``, ``grad``, ``gradcheck``, ``Function``, the public
``graph`` module, ...) is imported on first use (PEP 562), because ``ndgrad._tensor`` imports
``autograd.node`` and ``autograd.saved``, which runs this file first.
"""

from __future__ import annotations

import importlib

from .anomaly_mode import (
    detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly,
)
from .grad_mode import (
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from .node import Node

__all__ = [
    "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
    "is_grad_enabled", "is_inference_mode_enabled", "graph", "Node", "gradcheck", "gradgradcheck",
    "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
    "Function",
]

_LAZY = {
    "backward": ".api", "grad": ".api", "gradcheck": ".gradcheck", "gradgradcheck": ".gradcheck",
    "queue_callback": ".engine", "Variable": ".engine", "_is_checkpoint_valid": ".engine", "Function": ".function",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # shadows the submodule of the same name (as torch.autograd does)
        return value
    if name in ("functional", "function", "profiler", "graph"):  # need tensors: on first use
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'ndgrad.autograd' has no attribute '{name}'")
