"""PyTorch's ``torch._dynamo`` names over ndgrad's compile stack (``ndgrad/compiler``): no
bytecode interpreter here; capture is concrete at the dispatch point (docs/ARCHITECTURE.md,
"Compile stack"). ``config``, ``exc`` and ``utils`` are the compiler's own modules."""

from __future__ import annotations

import sys

from ..compiler import compiled_autograd, config, exc
from ..compiler.backends import list_backends, lookup_backend, register_backend
from ..compiler.breaks import graph_break
from ..compiler.dynamo import (
    OptimizedModule, allow_in_graph, disable, is_compiling, mark_dynamic, mark_static, reset,
)
from ..compiler.dynamo import optimize
from ..compiler.explain import ExplainOutput, explain
from . import utils

sys.modules[__name__ + ".config"] = config
sys.modules[__name__ + ".exc"] = exc
sys.modules[__name__ + ".compiled_autograd"] = compiled_autograd

__all__ = ["reset", "explain", "ExplainOutput", "register_backend", "list_backends",
           "lookup_backend", "graph_break", "config", "exc", "utils", "mark_dynamic",
           "mark_static", "disable", "allow_in_graph", "is_compiling", "OptimizedModule",
           "optimize", "compiled_autograd"]
