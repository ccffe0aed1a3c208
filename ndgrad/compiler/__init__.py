"""ndgrad's compile stack (DESIGN §8, issue 15), and PyTorch's ``torch.compiler`` namespace.

Built so far: the IR (``Graph``, ``Node``, ``GraphModule``, ``Interpreter``, passes; PyTorch's
names re-exported by ``ndgrad.fx``), concrete capture at the dispatch point (``capture``,
``capture_and_run``), guards, graph breaks and the cache (``dynamo.py``: ``ndgrad.compile``),
the backend registry (``backends.py``) and ``explain``. docs/ARCHITECTURE.md, "Compile stack",
says what exists and what is left.
"""

from __future__ import annotations

from .capture import Capture, capture, capture_and_run, counters
from .codegen import PythonCode
from .graph import Graph
from .graph_module import GraphModule
from .interpreter import Interpreter
from .node import Node, TensorMeta, TensorMetadata, map_arg
from .passes import CSEPass, PassResult, eliminate_common_subexpressions
from .tracer import Tracer, symbolic_trace
from .backends import list_backends, lookup_backend, register_backend
from .dynamo import (
    OptimizedModule, allow_in_graph, compile, disable, is_compiling, is_dynamo_compiling,
    is_exporting, reset,
)
from .dynamo import counters as compile_counters

__all__ = ["capture", "capture_and_run", "Capture", "counters", "Graph", "Node", "GraphModule",
           "Interpreter", "Tracer", "symbolic_trace", "PythonCode", "TensorMeta", "TensorMetadata",
           "map_arg", "eliminate_common_subexpressions", "CSEPass", "PassResult", "compile", "reset",
           "disable", "is_compiling", "is_dynamo_compiling", "is_exporting", "list_backends", "allow_in_graph", "register_backend",
           "lookup_backend", "OptimizedModule", "compile_counters"]
