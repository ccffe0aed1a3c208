"""``GraphModule`` (torch.fx's): an ``nn.Module`` holding a ``Graph`` and the Python code
generated from it as its ``forward``; the parameters, buffers and submodules the graph reads
(``get_attr`` / ``call_module`` targets) are copied from the root it was built from (the same
objects, so an optimizer's updates are seen)."""

from __future__ import annotations

import itertools
import linecache

from ..nn.modules.module import Module
from ..nn.parameter import Parameter
from .graph import Graph

__all__ = ["GraphModule"]

_keys = itertools.count()


def _exec_forward(src: str, globals_: dict):
    """Compile the generated source under a linecache key, so tracebacks show its lines."""
    key = f"<eval_with_key>.{next(_keys)}"
    linecache.cache[key] = (len(src), None, src.splitlines(True), key)
    env = dict(globals_)
    exec(compile(src, key, "exec"), env)  # noqa: S102 - source generated from the graph
    return env["forward"]


def _copy_attr(from_module, to_module, target: str) -> None:
    """Give ``to_module`` the attribute at path ``target`` of ``from_module`` (the same object),
    creating empty modules along the path; a buffer stays a buffer."""
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(from_module, item)
        t = getattr(to_module, item, None)
        if f is t:
            return  # the whole module is already there
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        from_module, to_module = f, t
    orig = getattr(from_module, field)
    bufs = from_module.__dict__.get("_buffers") if isinstance(from_module, Module) else None
    if bufs is not None and field in bufs and not isinstance(orig, Parameter):
        to_module.register_buffer(field, orig,
                                  persistent=field not in from_module._non_persistent_buffers_set)
    else:
        setattr(to_module, field, orig)


def _assign_attr(obj, to_module, target: str) -> None:
    *prefix, field = target.split(".")
    for item in prefix:
        t = getattr(to_module, item, None)
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        to_module = t
    setattr(to_module, field, obj)


class HandedOver(list):
    """A list of inputs its caller gives up: a callee may empty it once it has taken the values,
    so each value lives only as long as the code reading it needs it. ``ndgrad.compile`` of a
    boxed GraphModule (``forward(self, inputs)`` empties its list; compiled autograd's graphs)
    passes the values on in one, and AOT autograd empties it (the boxed convention carried
    through dynamo and AOT)."""

    __slots__ = ()


class _LazyForward:
    """``GraphModule.forward`` before the code is generated: reading it generates the code,
    which installs the real ``forward`` on the instance's own class (shadowing this)."""

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        obj.recompile()
        return type(obj).forward.__get__(obj, cls)


class GraphModule(Module):
    """A module whose ``forward`` is generated from ``graph``.

    ``root`` is a module (the attributes the graph names are taken from it) or a dict from
    qualified name to object. ``code`` is the generated source, made when ``code`` or ``forward``
    is first read (as PyTorch's ``_LazyGraphModule``); ``recompile()`` regenerates it after the
    graph changed.

    >>> import ndgrad
    >>> from ndgrad.compiler import capture
    >>> gm = capture(lambda x: (x * 2).relu(), ndgrad.ones(3))
    >>> print(gm.code.strip())  # doctest: +NORMALIZE_WHITESPACE
    def forward(self, x):                                      # x: f32[3]
        mul = aten.mul.Tensor(x, 2);  x = None                 # f32[3]
        relu = aten.relu.default(mul);  mul = None             # f32[3]
        return relu
    """

    def __new__(cls, *args, **kwargs):
        # Each instance gets a class of its own, so the generated forward is a real method of
        # it (FX does the same).
        base = next(c for c in cls.__mro__ if c.__dict__.get("_impl") is not True)
        impl = type("GraphModuleImpl", (base,), {"_impl": True})
        return object.__new__(impl)

    forward = _LazyForward()

    def __init__(self, root, graph: Graph, class_name: str = "GraphModule"):
        super().__init__()
        type(self).__name__ = class_name
        if isinstance(root, Module):
            self.training = root.training
            for n in graph.nodes:
                if n.op in ("get_attr", "call_module"):
                    _copy_attr(root, self, n.target)
        elif isinstance(root, dict):
            for n in graph.nodes:
                if n.op in ("get_attr", "call_module"):
                    if n.target not in root:
                        raise RuntimeError(f"Node {n} referenced target {n.target} but that target "
                                           "was not provided in ``root``!")
                    _assign_attr(root[n.target], self, n.target)
        else:
            raise RuntimeError("Unsupported type " + str(root) + " passed for root!")
        self.meta: dict = {}
        self.graph = graph

    @property
    def graph(self) -> Graph:
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, g: Graph) -> None:
        self.__dict__["_graph"] = g
        g.owning_module = self
        # The code is generated when first needed (``forward`` or ``code`` read): a backend that
        # compiles the graph itself never runs it (3 modules cost ~0.35 s on the 2000-op chain's
        # first call, benchmarks/compile.py); until then ``_LazyForward`` stands in.
        self.__dict__.pop("_code", None)
        if "forward" in type(self).__dict__:
            delattr(type(self), "forward")

    @property
    def code(self) -> str:
        if "_code" not in self.__dict__:
            self.recompile()
        return self.__dict__["_code"]

    def recompile(self):
        """Regenerate ``code`` and ``forward`` from the graph; returns the ``PythonCode``."""
        python_code = self.graph.python_code(root_module="self")
        self.__dict__["_code"] = python_code.src
        forward = _exec_forward(python_code.src, python_code.globals)
        if self.graph.boxed:
            forward._boxed_call = True
        type(self).forward = forward
        return python_code

    def print_readable(self, print_output: bool = True, include_stride: bool = False,
                       include_device: bool = False, colored: bool = False) -> str:
        """The module as a class with its generated ``forward``, each group of nodes under the
        user's source line that made it."""
        src = self.graph.python_code("self", verbose=True, include_stride=include_stride,
                                     include_device=include_device).src
        body = "\n".join("    " + line if line else line for line in src.splitlines())
        text = f"class {type(self).__name__}(ndgrad.nn.Module):\n{body}\n"
        if print_output:
            print(text)
        return text

    def __str__(self) -> str:
        return super().__repr__() + "\n\n\n" + self.code

    def __repr__(self) -> str:
        return super().__repr__()
