"""``ndgrad.nn.functional``: activations and other functional ops registered under this name."""

from __future__ import annotations

from .._ops.registry import NAMESPACES as _NS
from .._ops.registry import OPS as _OPS

globals().update(_NS["nn.functional"])
relu = _OPS["relu"].call
sigmoid = _OPS["sigmoid"].call
tanh = _OPS["tanh"].call
