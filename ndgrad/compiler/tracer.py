"""``Tracer`` and ``symbolic_trace`` (torch.fx's names). ndgrad has no symbolic tensors, so
these trace concretely: the function runs once on example inputs given through
``concrete_args`` (docs/ARCHITECTURE.md, "Compile stack", says how this differs from PyTorch).
As in FX, calls of leaf modules (ndgrad.nn's own, containers excepted) are recorded as
``call_module`` nodes and not entered; everything else is recorded op by op, as ``capture``
does."""

from __future__ import annotations

import inspect
import threading

from ..nn.modules.container import ModuleDict, ModuleList, Sequential
from ..nn.modules.module import Module
from .capture import Capture, _call_user, paused
from .graph import Graph
from .graph_module import GraphModule

__all__ = ["Tracer", "symbolic_trace"]

_empty = inspect.Parameter.empty


class Tracer:
    """Records a module's or function's ``forward`` into a ``Graph`` (``trace``)."""

    def __init__(self, autowrap_modules=(), autowrap_functions=(), param_shapes_constant=False):
        self.root = None
        self.graph = None
        self.tensor_constants: list = []
        self._paths: dict = {}
        self._cap = None
        self._thread = None

    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        """ndgrad.nn's modules are leaves (one ``call_module`` node), containers are not."""
        return (type(m).__module__.startswith("ndgrad.nn")
                and not isinstance(m, (Sequential, ModuleList, ModuleDict)))

    def path_of_module(self, mod: Module) -> str:
        path = self._paths.get(id(mod))
        if path is None:
            raise NameError("module is not installed as a submodule")
        return path

    def call_module(self, m: Module, forward, args, kwargs):
        """A module call met while tracing: a leaf runs unrecorded and becomes one node."""
        path = self._paths.get(id(m))
        if path is None or not self.is_leaf_module(m, path):
            return forward(*args, **kwargs)
        with paused(self._cap):
            out = forward(*args, **kwargs)
        self._cap.record_module(path, args, kwargs, out)
        return out

    def trace(self, root, concrete_args: dict | None = None) -> Graph:
        """Run ``root`` (a module's ``forward`` or a function) once on the examples in
        ``concrete_args`` (a dict: parameter name -> value) and return the recorded graph.
        Tensors given there are inputs of the graph (placeholders); other values are fixed in
        it; a parameter not given takes its default."""
        fn = root.forward if isinstance(root, Module) else root
        cap = self._cap = Capture()
        if isinstance(root, Module):
            cap.add_module("", root)
            self._paths = {id(m): name for name, m in root.named_modules() if name}
        else:
            cap.add_modules_reachable_from(fn)
        named, kwargs = _examples(fn, dict(concrete_args or {}))
        cap.add_inputs(named)
        orig = Module.__call__
        self._thread = threading.get_ident()
        tracer = self

        def call(mod, *args, **kw):
            if threading.get_ident() != tracer._thread:
                return orig(mod, *args, **kw)
            return tracer.call_module(mod, lambda *a, **k: orig(mod, *a, **k), args, kw)

        Module.__call__ = call  # FX patches Module.__call__ the same way while tracing
        try:
            with cap.mode:
                result = _call_user(fn, (), kwargs)
        finally:
            Module.__call__ = orig
            self._thread = None
        self.graph = cap.finish_graph(result)
        self.root = cap.holder
        self.tensor_constants = list(cap.constants)
        return self.graph


def _examples(fn, concrete: dict):
    """Placeholders ``(name, value[, default])`` and the keyword arguments of the run."""
    sig = inspect.signature(fn)
    named, kwargs = [], {}
    for name, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise NotImplementedError(
                f"symbolic_trace: ndgrad cannot trace the variadic parameter '{name}'; capture "
                "the function on its arguments with ndgrad.compiler.capture(fn, *args) instead")
        if p.kind is p.POSITIONAL_ONLY:
            raise NotImplementedError(f"symbolic_trace: positional-only parameter '{name}'")
        if name in concrete:
            value = concrete.pop(name)
            named.append((name, value))
        elif p.default is not _empty:
            value = p.default
            named.append((name, value, value))
        else:
            raise TypeError(
                f"symbolic_trace: no example value for '{name}'. ndgrad traces concretely (it has "
                "no symbolic tensors): pass example inputs as concrete_args={'" + name +
                "': ndgrad.randn(...)}; tensors given there stay inputs of the graph")
        kwargs[name] = value
    if concrete:
        raise TypeError("symbolic_trace: concrete_args names unknown parameters "
                        f"{sorted(concrete)}")
    return named, kwargs


def symbolic_trace(root, concrete_args: dict | None = None) -> GraphModule:
    """Trace ``root`` (a module or function) into a ``GraphModule``; example inputs come from
    ``concrete_args`` (ndgrad's tracing is concrete, see ``Tracer.trace``).

    >>> import ndgrad
    >>> m = ndgrad.nn.Sequential(ndgrad.nn.Linear(3, 2), ndgrad.nn.ReLU())
    >>> gm = symbolic_trace(m, concrete_args={"input": ndgrad.randn(4, 3)})
    >>> [(n.op, n.target) for n in gm.graph.nodes]
    [('placeholder', 'input'), ('call_module', '0'), ('call_module', '1'), ('output', 'output')]
    """
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else getattr(root, "__name__", "")
    if not name.isidentifier():
        name = "GraphModule"  # a lambda
    gm = GraphModule(tracer.root, graph, name)
    gm.meta["tensor_constants"] = tracer.tensor_constants
    return gm
