"""PyTorch's ``torch._logging``: ``set_logs`` turns the compile stack's log artifacts on
(``ndgrad/compiler/logs.py`` holds them)."""

from __future__ import annotations

from ..compiler.logs import set_logs

__all__ = ["set_logs"]
