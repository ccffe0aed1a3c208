"""The ``inductor`` backend (issue 15, item 6): AOT autograd with the min-cut partitioner, each
half compiled to one straight-line generated Python function over arrays. A node whose op the
example shows needs no promotion calls the op's array forward (``rec.fwd``) directly: no
dispatch, no Tensor or autograd node inside; any other node calls the op through dispatch on
wrapped arrays. Each array is dropped after its last use. The code is cached by its source
(the graph's structure) and kept on the compiled function as ``.source``. Part 2 of the compile
work adds buffer reuse and fused C loops.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import _backend
from .._ops.registry import _KIND, PROMOTE_FLOAT, _scalar_kind
from .._tensor import Tensor, refresh_view
from .aot import aot_module_simplified
from .capture import _set_grad_enabled
from .node import Node, TensorMeta, user_to_last_uses
from .partitioners import min_cut_rematerialization_partition

__all__ = ["inductor_backend", "compile_fx_inner", "generate"]

_CODE_CACHE: dict = {}  # source -> code object
counters = {"compiled": 0, "cache_hits": 0, "direct": 0, "dispatched": 0}


def _np_dtype(a):
    if isinstance(a, Node):
        v = a.meta.get("val")
        return v.dtype.np if isinstance(v, TensorMeta) else None
    return None


def _direct(n: Node) -> bool:
    """Whether calling ``rec.fwd`` on the arrays is what dispatch would do for this node: a
    view, or a plain op whose arguments need no promotion (one dtype, weak scalars that fit)."""
    rec = n.target
    kind = getattr(rec, "kind", None)
    if kind not in ("plain", "view") or rec.extra.get("nondeterministic"):
        return False
    args = _full_args(n)
    if args is None:
        return False
    for i in rec.tensor_pos:  # every tensor argument must have its metadata
        a = args[i]
        for x in (a if type(a) in (list, tuple) else (a,)):
            if isinstance(x, Node) and _np_dtype(x) is None:
                return False
    if kind == "view" or not rec.promote:
        return True
    first, top = None, -1
    for i in rec.promote_pos:
        a = args[i]
        if isinstance(a, Node):
            dt = _np_dtype(a)
            if first is None:
                first = dt
            elif dt != first:
                return False
        elif a is not None and type(a) not in (list, tuple):
            top = max(top, _scalar_kind(a))
    if first is None or top > _KIND[first]:
        return False
    return not (rec.promote == PROMOTE_FLOAT and first.kind not in "fc")


def _full_args(n: Node):
    """The node's arguments in schema order, defaults filled in (as dispatch passes them)."""
    rec = n.target
    params = rec.params
    pos = list(n.args)
    if len(pos) > len(params):
        return None
    out = []
    for i, p in enumerate(params):
        if i < len(pos) and not p.kwarg_only:
            out.append(pos[i])
        elif p.name in n.kwargs:
            out.append(n.kwargs[p.name])
        elif p.has_default:
            out.append(p.default)
        else:
            return None
    return out


class _Gen:
    def __init__(self, gm):
        self.gm = gm
        self.env: dict = {"_nd": np.ndarray, "_adopt": _backend.adopt, "_refresh": refresh_view,
                          "_wrap": _wrap, "_unwrap": _unwrap_out}
        self.lines: list = []
        self.names: dict = {}  # node -> variable holding its array
        self.orig: dict = {}  # placeholder node -> variable holding its tensor
        self.globals: dict = {}  # id(object) -> global name

    def glob(self, obj, hint: str) -> str:
        k = id(obj)
        name = self.globals.get(k)
        if name is None:
            base = "".join(c if c.isalnum() else "_" for c in hint)
            name = f"_{base}"
            i = 0
            while name in self.env:
                i += 1
                name = f"_{base}_{i}"
            self.env[name] = obj
            self.globals[k] = name
        return name

    def arr(self, a) -> str:
        """Source of an argument, arrays for tensors."""
        if isinstance(a, Node):
            return self.names[a]
        if type(a) in (list, tuple):
            inner = ", ".join(self.arr(x) for x in a)
            return f"[{inner}]" if type(a) is list else f"({inner}{',' if len(a) == 1 else ''})"
        return self.const(a)

    def ten(self, a) -> str:
        """Source of an argument, Tensors for tensors (the dispatch route)."""
        if isinstance(a, Node):
            if a in self.orig:
                return self.orig[a]
            v = a.meta.get("val")
            return f"_wrap({self.names[a]})" if isinstance(v, TensorMeta) else self.names[a]
        if type(a) in (list, tuple):
            inner = ", ".join(self.ten(x) for x in a)
            return f"[{inner}]" if type(a) is list else f"({inner}{',' if len(a) == 1 else ''})"
        return self.const(a)

    def const(self, a) -> str:
        if a is None or type(a) in (bool, int, str) or (type(a) is float and a == a
                                                         and a not in (float("inf"),
                                                                       float("-inf"))):
            return repr(a)
        return self.glob(a, type(a).__name__.lower() + "_const")


def _wrap(a):
    return Tensor._make(a, None, 0, None)


def _unwrap_out(r):
    if isinstance(r, Tensor):
        return r._data
    if type(r) in (tuple, list) or isinstance(r, tuple):
        return tuple(_unwrap_out(x) for x in r)
    return r


def generate(gm) -> tuple:
    """The source of ``gm`` as one function of a list of inputs, and its globals."""
    g = _Gen(gm)
    nodes = list(gm.graph.nodes)
    dying = user_to_last_uses(nodes)
    body = g.lines
    phs = [n for n in nodes if n.op == "placeholder"]
    body.append(f"    {', '.join(f't_{n.name}' for n in phs)}{',' if len(phs) == 1 else ''} = "
                "args" if phs else "    pass")
    body.append("    args.clear()")
    for i, n in enumerate(nodes):
        name = f"v_{n.name}" if n.op != "placeholder" else f"t_{n.name}"
        if n.op == "placeholder":
            if isinstance(n.meta.get("val"), TensorMeta):
                g.orig[n] = name
                body.append(f"    if {name}._view is not None: _refresh({name})")
                body.append(f"    a_{n.name} = {name}._data")
                g.names[n] = f"a_{n.name}"
            else:
                g.names[n] = name
            continue
        if n.op == "output":
            pre, expr = _output(g, n.args[0])
            body += pre
            body.append(f"    return {expr}")
            break
        g.names[n] = name
        if n.op == "get_attr":
            obj = gm
            for atom in n.target.split("."):
                obj = getattr(obj, atom)
            ref = g.glob(obj, n.target)
            body.append(f"    {name} = {ref}._data" if isinstance(obj, Tensor)
                        else f"    {name} = {ref}")
        elif n.op == "call_method" and n.target == "detach":
            body.append(f"    {name} = {g.arr(n.args[0])}")
        elif n.op == "call_function" and n.target is operator.getitem:
            body.append(f"    {name} = {g.arr(n.args[0])}[{g.arr(n.args[1])}]")
        elif n.op == "call_function" and n.target is _set_grad_enabled:
            g.names[n] = "None"  # arrays carry no autograd state
        elif n.op == "call_function" and getattr(n.target, "kind", None) is not None \
                and _direct(n):
            rec = n.target
            f = g.glob(rec.fwd, f"f_{rec.name}")
            args = ", ".join(g.arr(a) for a in _full_args(n))
            body.append(f"    {name} = {f}({args})")
            if rec.kind != "view":
                if rec.multi_out:
                    body.append(f"    {name} = tuple(x if type(x) is _nd else _adopt(x) "
                                f"for x in {name})")
                else:
                    body.append(f"    if type({name}) is not _nd: {name} = _adopt({name})")
            counters["direct"] += 1
        elif n.op in ("call_function", "call_method"):
            if n.op == "call_method":
                fn = f"{g.ten(n.args[0])}.{n.target}"
                pos = n.args[1:]
            else:
                fn = g.glob(n.target, f"d_{getattr(n.target, 'name', None) or n.target.__name__}")
                pos = n.args
            args = [g.ten(a) for a in pos] + [f"{k}={g.ten(v)}" for k, v in n.kwargs.items()]
            body.append(f"    {name} = _unwrap({fn}({', '.join(args)}))")
            counters["dispatched"] += 1
        else:
            raise NotImplementedError(f"inductor: cannot generate {n.op} {n.target}")
        dead = [x for v in dying.get(n, ())
                for x in ((g.names[v], g.orig[v]) if v in g.orig else (g.names[v],))]
        if dead:
            body.append(f"    {' = '.join(dead)} = None")
    src = "def compiled(args):\n" + "\n".join(body) + "\n"
    return src, g.env


def _output(g: _Gen, out) -> tuple:
    """Statements wrapping each output array once (a placeholder is its own tensor), and the
    output structure's expression."""
    seen: dict = {}
    pre = []

    def go(a):
        if isinstance(a, Node):
            if a in g.orig:
                return g.orig[a]
            if not isinstance(a.meta.get("val"), TensorMeta):
                return g.names[a]
            if a not in seen:
                seen[a] = f"o_{a.name}"
                pre.append(f"    {seen[a]} = _wrap({g.names[a]})")
            return seen[a]
        if type(a) in (list, tuple):
            inner = ", ".join(go(x) for x in a)
            return f"[{inner}]" if type(a) is list else f"({inner}{',' if len(a) == 1 else ''})"
        return g.const(a)

    expr = go(out)
    return pre, expr


def compile_fx_inner(gm, example_inputs):
    """Compile one graph (a forward or backward half) to a boxed straight-line function."""
    src, env = generate(gm)
    code = _CODE_CACHE.get(src)
    if code is None:
        code = _CODE_CACHE[src] = compile(src, f"<inductor {gm.__class__.__name__}>", "exec")
        counters["compiled"] += 1
    else:
        counters["cache_hits"] += 1
    exec(code, env)  # noqa: S102 - our generated code
    fn = env["compiled"]
    fn._boxed_call = True
    fn.source = src
    fn.graph_module = gm
    return fn


def inductor_backend(gm, example_inputs):
    """The ``inductor`` backend: ``(gm, example_inputs) -> callable(*placeholder_values)``."""
    return aot_module_simplified(gm, example_inputs, fw_compiler=compile_fx_inner,
                                 bw_compiler=compile_fx_inner,
                                 partition_fn=min_cut_rematerialization_partition)

