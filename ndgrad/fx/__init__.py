"""``torch.fx``'s names over ndgrad's IR (implemented in ``ndgrad.compiler``). Tracing is
concrete: ``symbolic_trace`` takes example inputs through ``concrete_args``
(docs/ARCHITECTURE.md, "Compile stack")."""

from __future__ import annotations

from ..compiler.graph import Graph
from ..compiler.graph_module import GraphModule
from ..compiler.interpreter import Interpreter
from ..compiler.node import Node, map_arg
from ..compiler.tracer import Tracer, symbolic_trace

__all__ = ["Graph", "GraphModule", "Interpreter", "Node", "Tracer", "map_arg", "symbolic_trace"]
