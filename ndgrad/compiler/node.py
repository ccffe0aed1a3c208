"""The IR's ``Node`` (torch.fx's): one value of a ``Graph``, with its op, target, arguments,
users and metadata; ``map_arg``/``map_aggregate`` walk argument structures; ``TensorMeta`` is the
``meta["val"]`` a capture records (shape, dtype, device, requires_grad, stride of the value).

The graph that owns nodes, the code generator and the passes live in ``graph.py``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Node", "map_arg", "map_aggregate", "TensorMeta", "TensorMetadata", "OPCODES"]

OPCODES = ("placeholder", "call_method", "call_module", "call_function", "get_attr", "output",
           "root")


class TensorMetadata(NamedTuple):
    """FX's ``meta["tensor_meta"]`` (what ``ShapeProp`` writes)."""

    shape: tuple
    dtype: Any
    requires_grad: bool
    stride: tuple
    memory_format: Any
    is_quantized: bool
    qparams: dict


class TensorMeta:
    """``meta["val"]`` of a tensor value: what PyTorch keeps as a fake tensor, reduced to the
    facts a capture saw (no data)."""

    __slots__ = ("shape", "dtype", "device", "requires_grad", "_stride")

    def __init__(self, shape, dtype, device, requires_grad: bool, stride: tuple):
        self.shape, self.dtype, self.device = shape, dtype, device
        self.requires_grad, self._stride = requires_grad, stride

    @classmethod
    def of(cls, t) -> "TensorMeta":
        return cls(t.shape, t.dtype, t.device, t.requires_grad, t.stride())

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def stride(self, dim=None):
        return self._stride if dim is None else self._stride[dim]

    def dim(self) -> int:
        return len(self.shape)

    ndim = property(dim)

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def tensor_meta(self) -> TensorMetadata:
        return TensorMetadata(tuple(self.shape), self.dtype, self.requires_grad, self._stride,
                              None, False, {})

    def __repr__(self) -> str:
        return f"TensorMeta({short_type(self)})"


_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8",
          "complex64": "c64", "complex128": "c128"}


def short_type(val, include_stride: bool = False, include_device: bool = False) -> str:
    """``f32[128, 1024]`` (PyTorch's print_readable spelling) for a TensorMeta, a tuple of them
    in parentheses, or "" for anything else."""
    if isinstance(val, TensorMeta):
        name = str(val.dtype).rpartition(".")[2]
        s = f"{_SHORT.get(name, name)}[{', '.join(str(d) for d in val.shape)}]"
        if include_stride:
            s += f"[{', '.join(str(d) for d in val._stride)}]"
        if include_device:
            s += str(val.device)
        return s
    if isinstance(val, (tuple, list)):
        parts = [short_type(v, include_stride, include_device) for v in val]
        return "(" + ", ".join(p or "_" for p in parts) + ")" if any(parts) else ""
    return ""


def map_aggregate(a, fn):
    """Apply ``fn`` to every leaf of ``a`` (tuples, named tuples, lists, dicts, slices walked)."""
    t = type(a)
    if t is tuple or (isinstance(a, tuple) and not hasattr(a, "_fields")):
        return tuple(map_aggregate(x, fn) for x in a)
    if isinstance(a, tuple):  # a named tuple keeps its type
        return t(*(map_aggregate(x, fn) for x in a))
    if t is list:
        return [map_aggregate(x, fn) for x in a]
    if t is dict:
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if t is slice:
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn),
                     map_aggregate(a.step, fn))
    return fn(a)


def user_to_last_uses(nodes) -> dict:
    """Node -> the values read for the last time by it (after it runs they can be dropped)."""
    last: dict = {}
    for n in nodes:
        for arg in n._input_nodes:
            last[arg] = n
    dying: dict = {}
    for value, user in last.items():
        dying.setdefault(user, []).append(value)
    return dying


# Leaf types no argument walk maps (they are returned as they are).
_ATOMS = frozenset((int, float, bool, str, type(None)))


def map_arg(a, fn):
    """Apply ``fn`` to every Node in ``a``, keeping the structure."""
    # Flat tuples and dicts of Nodes and scalars (nearly every node's) skip map_aggregate's
    # closure per leaf: node copies and captures are ~1/3 faster (benchmarks/compile.py, first
    # call of the 2000-op chain). Anything else takes the general walk, with the same result.
    t = type(a)
    if t is Node:
        return fn(a)
    if t is tuple:
        return tuple([fn(x) if type(x) is Node else x if type(x) in _ATOMS else map_arg(x, fn)
                      for x in a])
    if t is dict:
        return {k: fn(v) if type(v) is Node else v if type(v) in _ATOMS else map_arg(v, fn)
                for k, v in a.items()}
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def _flat_inputs(args: tuple, kwargs, graph) -> dict | None:
    """The Nodes of flat ``args``/``kwargs`` (each of ``graph``), in order, as dict keys; None
    when anything is nested or foreign (the general walk then handles it, or raises). Most nodes
    are flat: node creation is ~1/3 faster (the 2000-op chain's capture and partition)."""
    found: dict = {}
    for a in (args + tuple(kwargs.values())) if kwargs else args:
        t = type(a)
        if t is Node:
            if a.graph is not graph:
                return None
            found[a] = None
        elif t not in _ATOMS:
            return None
    return found


class Node:
    """One value of a graph: ``op`` (an opcode of ``OPCODES``), ``target`` (the op record, the
    method or attribute name, the module path), ``args``/``kwargs`` (Nodes inside), ``users``
    (the nodes reading it, in insertion order), ``name`` (unique in the graph) and ``meta``."""

    __slots__ = ("graph", "name", "op", "target", "_args", "_kwargs", "_input_nodes", "users",
                 "meta", "type", "_prev", "_next", "_erased", "__weakref__")

    def __init__(self, graph, name: str, op: str, target, args: tuple, kwargs: dict,
                 return_type=None):
        if op not in OPCODES:
            raise ValueError(f"Unknown opcode {op!r}")
        self.graph, self.name, self.op, self.target = graph, name, op, target
        self._args, self._kwargs = (), {}
        self._input_nodes: dict = {}
        self.users: dict = {}
        self.meta: dict = {}
        self.type = return_type
        self._prev = self._next = self
        self._erased = False
        self._update(args, kwargs)

    # --- arguments and users ---
    @property
    def args(self) -> tuple:
        return self._args

    @args.setter
    def args(self, value) -> None:
        self._update(value, self._kwargs)

    @property
    def kwargs(self) -> dict:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value) -> None:
        self._update(self._args, value)

    @property
    def all_input_nodes(self) -> list:
        return list(self._input_nodes)

    def _update(self, args, kwargs) -> None:
        for old in self._input_nodes:
            old.users.pop(self, None)
        args = args if type(args) is tuple else tuple(args)
        kwargs = kwargs if type(kwargs) is dict else dict(kwargs)
        found = _flat_inputs(args, kwargs, self.graph)
        if found is not None:  # Nodes of this graph and scalars only: nothing to rebuild
            self._args, self._kwargs = args, dict(kwargs)
        else:
            found = {}

            def note(n):
                if n.graph is not self.graph:
                    raise RuntimeError(f"Node '{n}' of another graph used as an argument of "
                                       f"'{self}'")
                found.setdefault(n)
                return n

            self._args = map_arg(args, note)
            self._kwargs = map_arg(kwargs, note)
        self._input_nodes = found
        for n in found:
            n.users.setdefault(self)

    def update_arg(self, idx: int, arg) -> None:
        args = list(self._args)
        args[idx] = arg
        self.args = tuple(args)

    def update_kwarg(self, key: str, arg) -> None:
        self.kwargs = {**self._kwargs, key: arg}

    def replace_all_uses_with(self, replace_with: "Node", delete_user_cb=lambda user: True) -> list:
        """Make every user read ``replace_with`` instead; returns the users changed."""
        changed = []
        for user in list(self.users):
            if not delete_user_cb(user):
                continue
            user.replace_input_with(self, replace_with)
            changed.append(user)
        return changed

    def replace_input_with(self, old: "Node", new: "Node") -> None:
        swap = lambda n: new if n is old else n  # noqa: E731
        self._update(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    # --- position in the graph ---
    @property
    def next(self) -> "Node":
        return self._next

    @property
    def prev(self) -> "Node":
        return self._prev

    def prepend(self, x: "Node") -> None:
        """Put ``x`` just before this node."""
        if x is self:
            return
        x._remove_from_list()
        p = self._prev
        p._next, x._prev, x._next, self._prev = x, p, self, x

    def append(self, x: "Node") -> None:
        """Put ``x`` just after this node."""
        self._next.prepend(x)

    def _remove_from_list(self) -> None:
        p, n = self._prev, self._next
        p._next, n._prev = n, p
        self._prev = self._next = self

    # --- what it is ---
    @property
    def stack_trace(self):
        return self.meta.get("stack_trace")

    def is_impure(self) -> bool:
        """Whether dead-code elimination must keep the node: placeholders, the output, mutating
        and random op calls, in-place method calls, module calls (a module may draw random
        numbers or update buffers), and functions marked side-effectful."""
        op = self.op
        if op in ("placeholder", "output"):
            return True
        if op == "call_function":
            return is_impure_target(self.target)
        if op == "call_method":
            return self.target.endswith("_") and not self.target.endswith("__")
        if op == "call_module":
            mod = self.graph.owning_module
            sub = _fetch(mod, self.target) if mod is not None else None
            return getattr(sub, "_is_impure", True)
        return False

    def format_node(self) -> str:
        """FX's one-line form:
        ``%mm : [num_users=1] = call_function[target=aten.mm.default](...)``."""
        if self.op == "placeholder":
            default = f" default={self.args[0]!r}" if self.args else ""
            return (f"%{self.name} : [num_users={len(self.users)}] = "
                    f"placeholder[target={self.target}]{default}")
        if self.op == "output":
            return f"return {map_arg(self.args[0], lambda n: _Name(n.name))}"
        if self.op == "get_attr":
            return f"%{self.name} : [num_users={len(self.users)}] = get_attr[target={self.target}]"
        return (f"%{self.name} : [num_users={len(self.users)}] = "
                f"{self.op}[target={target_str(self.target)}]"
                f"(args = {_fmt(self.args)}, kwargs = {_fmt(self.kwargs)})")

    def __repr__(self) -> str:
        return self.name


class _Name(str):
    __slots__ = ()
    __repr__ = str.__str__


def _fmt(a) -> str:
    if isinstance(a, Node):
        return "%" + a.name
    if type(a) is tuple:
        inner = ", ".join(_fmt(x) for x in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if type(a) is list:
        return "[" + ", ".join(_fmt(x) for x in a) + "]"
    if type(a) is dict:
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in a.items()) + "}"
    return repr(a)


def target_str(target) -> str:
    """How a target prints: ``aten.mm.default``, ``operator.getitem``, a method or path name."""
    if isinstance(target, str):
        return target
    if getattr(target, "namespace", None) == "aten" and hasattr(target, "overloadpacket"):
        return str(target)
    mod = getattr(target, "__module__", None)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    if mod in ("_operator", "operator"):
        mod = "operator"
    return f"{mod}.{name}" if mod and mod != "builtins" else name


# Functions whose call nodes dead-code elimination keeps (FX's ``_side_effectful_functions``);
# add to it for functions of your own.
_side_effectful_functions: set = set()


def is_impure_target(target) -> bool:
    if target in _side_effectful_functions:
        return True
    extra = getattr(target, "extra", None)
    if extra is not None and hasattr(target, "_schema"):  # an op record
        return target.kind == "inplace" or bool(extra.get("nondeterministic")) or \
            target._schema.is_mutable
    return False


def _fetch(mod, target: str):
    obj = mod
    for part in target.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj
