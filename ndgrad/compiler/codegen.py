"""Python source for a ``Graph``: ``def forward(self, ...)`` calling ndgrad ops as
``aten.mm.default(x, w)``, freeing each value after its last use (``x = None``, as FX does), with
type comments (``# f32[128, 1024]  view of w``); ``verbose`` adds the user's source line.

Objects with no Python literal (a generator, a named-tuple type, a NumPy scalar) become globals
of the generated code, as FX's ``add_global`` makes them.
"""

from __future__ import annotations

import math
import operator
import re
import sys
from typing import NamedTuple

from .._backend import Device
from .._dtype import dtype as _dtype
from .._ops.overload import aten
from .node import Node, short_type, user_to_last_uses

__all__ = ["PythonCode", "python_code"]

_COMMENT_COL = 60  # type comments start here (or after the code, when longer)


class PythonCode(NamedTuple):
    src: str
    globals: dict


class _Globals:
    def __init__(self, taken: set):
        # ``ndgrad`` (for dtypes and devices) is in sys.modules before any of its submodules
        self.env = {"aten": aten, "operator": operator, "ndgrad": sys.modules["ndgrad"]}
        self.taken = set(taken) | set(self.env)
        self.by_id: dict = {}

    def add(self, hint: str, obj) -> str:
        key = id(obj)
        if key in self.by_id:
            return self.by_id[key]
        base = re.sub(r"[^0-9a-zA-Z_]+", "_", hint) or "_global"
        if base[0].isdigit():
            base = "_" + base
        name, i = base, 0
        while name in self.taken:
            i += 1
            name = f"{base}_{i}"
        self.taken.add(name)
        self.env[name] = obj
        self.by_id[key] = name
        return name


def _is_op(target) -> bool:
    return getattr(target, "namespace", None) == "aten" and hasattr(target, "_schema")


def _target(g: _Globals, target) -> str:
    if _is_op(target):
        return str(target)  # aten.<name>.<overload>, read from the ``aten`` global
    if (getattr(target, "__module__", None) in ("_operator", "operator")
            and hasattr(operator, target.__name__)):
        return "operator." + target.__name__
    return g.add(getattr(target, "__name__", type(target).__name__), target)


def _arg(g: _Globals, a) -> str:
    t = type(a)
    if isinstance(a, Node):
        return a.name
    if a is None or t in (bool, int, str):
        return repr(a)
    if t is float:
        if math.isfinite(a):
            return repr(a)
        return 'float("nan")' if math.isnan(a) else ('-' if a < 0 else '') + 'float("inf")'
    if t is complex and math.isfinite(a.real) and math.isfinite(a.imag):
        return repr(a)
    if isinstance(a, tuple) and not hasattr(a, "_fields"):  # tuples and Size
        inner = ", ".join(_arg(g, x) for x in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if isinstance(a, tuple):
        return f"{g.add(t.__name__, t)}({', '.join(_arg(g, x) for x in a)})"
    if t is list:
        return "[" + ", ".join(_arg(g, x) for x in a) + "]"
    if t is dict:
        return "{" + ", ".join(f"{_arg(g, k)}: {_arg(g, v)}" for k, v in a.items()) + "}"
    if t is slice:
        return f"slice({_arg(g, a.start)}, {_arg(g, a.stop)}, {_arg(g, a.step)})"
    if a is Ellipsis:
        return "..."
    if t is _dtype:
        return repr(a)  # ndgrad.float32
    if t is Device:
        return "ndgrad." + repr(a)  # ndgrad.device(type='cpu')
    return g.add("_" + t.__name__.lower(), a)


def _call(g: _Globals, target: str, args, kwargs) -> str:
    parts = [_arg(g, a) for a in args] + [f"{k}={_arg(g, v)}" for k, v in kwargs.items()]
    return f"{target}({', '.join(parts)})"


def _attr_path(base: str, target: str) -> str:
    """``self.layers.0.weight`` -> ``getattr(self.layers, "0").weight``."""
    out = base
    for part in target.split("."):
        out = f"{out}.{part}" if part.isidentifier() else f"getattr({out}, {part!r})"
    return out


def _user_frame(stack_trace):
    """(file, line, function, code) of the innermost frame of an FX-style stack trace."""
    if not stack_trace:
        return None
    lines = stack_trace.rstrip("\n").split("\n")
    for i in range(len(lines) - 1, -1, -1):
        m = re.match(r'\s*File "(.+)", line (\d+), in (.+)$', lines[i])
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return (*m.groups(), code)
    return None


def _comment(n: Node, include_stride: bool, include_device: bool) -> str:
    s = short_type(n.meta.get("val"), include_stride, include_device)
    if n.op == "call_function" and _is_op(n.target) and n.args and isinstance(n.args[0], Node):
        if n.target.kind == "view":
            s += f"  view of {n.args[0].name}"
        elif n.target.kind == "inplace":
            s += f"  mutates {n.args[0].name}"
    return s.strip()


def python_code(graph, root_module: str = "self", *, verbose: bool = False,
                include_stride: bool = False, include_device: bool = False,
                boxed: bool = False) -> PythonCode:
    nodes = list(graph.nodes)
    g = _Globals({n.name for n in nodes})
    frees = user_to_last_uses(nodes)
    params, sig_types, body = [], [], []
    frame = None
    for n in nodes:
        if n.op == "placeholder":
            params.append(n.name + (f" = {_arg(g, n.args[0])}" if n.args else ""))
            ty = short_type(n.meta.get("val"), include_stride, include_device)
            if ty:
                sig_types.append(f"{n.name}: {ty}")
            continue
        if verbose:
            f = _user_frame(n.meta.get("stack_trace"))
            if f is not None and f != frame:
                body.append((f"# File: {f[0]}:{f[1]} in {f[2]}, code: {f[3]}", ""))
                frame = f
        if n.op == "output":
            body.append((f"return {_arg(g, n.args[0])}", ""))
            continue
        if n.op == "get_attr":
            code = f"{n.name} = {_attr_path(root_module, n.target)}"
        elif n.op == "call_module":
            code = f"{n.name} = {_call(g, _attr_path(root_module, n.target), n.args, n.kwargs)}"
        elif n.op == "call_method":
            obj, *rest = n.args
            code = f"{n.name} = {_call(g, _arg(g, obj) + '.' + n.target, rest, n.kwargs)}"
        elif n.target is operator.getitem and len(n.args) == 2 and not n.kwargs:
            code = f"{n.name} = {_arg(g, n.args[0])}[{_arg(g, n.args[1])}]"
        else:
            code = f"{n.name} = {_call(g, _target(g, n.target), n.args, n.kwargs)}"
        dead = frees.get(n, [])
        if not n.users:
            dead = dead + [n]  # read by nothing (kept for its side effect): free it at once
        if dead:
            code += ";  " + " = ".join(v.name for v in dead) + " = None"
        body.append((code, _comment(n, include_stride, include_device)))
    if boxed:  # one list in, unpacked and cleared: each value then lives until its last use
        names = [p.split(" = ")[0] for p in params]
        unpack = f"{', '.join(names)}{',' if len(names) == 1 else ''} = inputs; " if names else ""
        body.insert(0, (unpack + "inputs.clear()", ""))
        params = ["inputs"]
    head = f"def forward({', '.join([root_module] + params)}):"
    lines = [_with_comment(head, "  ".join(sig_types), 0)]
    lines += [_with_comment("    " + code, c, 4) for code, c in body]
    if not body:
        lines.append("    pass")
    return PythonCode("\n".join(lines) + "\n", g.env)


def _with_comment(code: str, comment: str, indent: int) -> str:
    if not comment:
        return code
    return code.ljust(max(_COMMENT_COL, len(code) + 2)) + "# " + comment
