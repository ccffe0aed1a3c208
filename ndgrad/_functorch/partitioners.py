"""PyTorch's ``torch._functorch.partitioners``: the implementation is
``ndgrad/compiler/partitioners.py``."""

from __future__ import annotations

from ..compiler.partitioners import default_partition, min_cut_rematerialization_partition

__all__ = ["default_partition", "min_cut_rematerialization_partition"]
