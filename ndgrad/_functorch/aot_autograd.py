"""PyTorch's ``torch._functorch.aot_autograd``: the implementation is ``ndgrad/compiler/aot.py``."""

from __future__ import annotations

from ..compiler.aot import (aot_function, aot_module, aot_module_simplified, boxed_nop,
                            make_boxed_compiler, make_boxed_func, nop)

__all__ = ["aot_function", "aot_module", "aot_module_simplified", "make_boxed_func",
           "make_boxed_compiler", "nop", "boxed_nop"]
