"""The ``inductor`` backend: AOT autograd with the min-cut partitioner, each half compiled to one
straight-line generated Python function over arrays (issues 15 and 16).

- A node whose op the example shows needs no promotion calls the op's array forward (``rec.fwd``)
  directly: no dispatch, no Tensor or autograd node inside; any other node calls the op through
  dispatch on wrapped arrays.
- Pointwise ops (``pointwise.py``) become NumPy ufunc calls that write into buffers: a dead buffer
  of the same shape and dtype (taken from a small pool), or the dying operand itself, so chains
  of elementwise ops run in place on one buffer. Only buffers the generated code made itself and
  never handed to another op (which might keep a view of them) are reused.
- With the C tier (``cpp.py``: a C compiler and cffi), runs of adjacent pointwise ops of one
  shape become one generated C loop each: values used only inside the run stay in registers.
  All of a graph's loops are one C source, compiled once and cached on disk by its hash.
- Each array is dropped after its last use. The code is cached by its source (the graph's
  structure) and kept on the compiled function as ``.source`` (and ``.c_source``);
  ``ndgrad._logging.set_logs(output_code=True)`` prints both.

Options (``ndgrad.compile(..., options={...})``): ``cpp_fusion`` (default: on where the C tier is
available), ``max_autotune`` (time the C and NumPy versions of each graph on its example inputs
and keep the faster), ``triton.cudagraphs`` (CUDA inputs: replay each half as a CUDA graph,
``cudagraphs.py``).
"""

from __future__ import annotations

import functools
import logging
import operator
import time

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._ops.registry import _KIND, PROMOTE_FLOAT, _scalar_kind
from .._tensor import Tensor, refresh_view
from . import codecache, cpp
from .aot import aot_module_simplified
from .capture import _set_grad_enabled
from .logs import artifact
from .node import Node, TensorMeta
from .partitioners import default_partition, min_cut_rematerialization_partition
from . import rowkernels
from .pointwise import (BOOL_OPS, UFUNCS, Leaf, c_expr, check_numpy, const_dtype, leaves,
                        lower, numpy_lines)

__all__ = ["inductor_backend", "compile_fx_inner", "generate", "list_options"]

log = logging.getLogger("ndgrad.compiler.inductor")
_CODE_CACHE: dict = {}  # source -> code object
counters = {"compiled": 0, "cache_hits": 0, "direct": 0, "dispatched": 0, "pointwise": 0,
            "fused_kernels": 0, "fused_ops": 0, "reused_buffers": 0, "row_kernels": 0}
_POOL_PER_KEY = 2  # dead buffers kept per (shape, dtype) for reuse; older ones are dropped
_C_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
            np.dtype(np.bool_): "unsigned char"}
_DEFAULTS = {"cpp_fusion": None, "max_autotune": False, "triton.cudagraphs": False,
             "fx_graph_cache": None}


def list_options() -> list:
    """The option names ``inductor`` reads (PyTorch's ``torch._inductor.list_options``)."""
    return sorted(_DEFAULTS)


def _meta(a):
    v = a.meta.get("val") if isinstance(a, Node) else None
    return v if isinstance(v, TensorMeta) else None


def _np_dtype(a):
    v = _meta(a)
    return v.dtype.np if v is not None else None


def _contiguous(m: TensorMeta) -> bool:
    expect = 1
    for size, stride in zip(reversed(m.shape), reversed(m.stride())):
        if size != 1 and stride != expect:
            return False
        expect *= size
    return True


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
            if kind == "plain" and isinstance(x, Node) and _np_dtype(x) is D.BF16:
                return False  # dispatch computes it in float32 (registry._via_float32)
    if (kind == "plain" and rec.dtype_pos is not None and D.bfloat16 is not None
            and args[rec.dtype_pos] is D.bfloat16):
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
    return not (rec.promote == PROMOTE_FLOAT and first not in D.INEXACT)


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


# --- which nodes are pointwise, and in which tier ---
class _PW:
    """A pointwise node's lowering: its tree, and whether NumPy's ufuncs and/or C can run it."""

    __slots__ = ("tree", "meta", "numpy", "c", "leaves")

    def __init__(self, tree, meta, numpy_ok: bool, c_ok: bool, lvs: list):
        self.tree, self.meta, self.numpy, self.c = tree, meta, numpy_ok, c_ok
        self.leaves = lvs  # leaves(tree), read by grouping and emission


def _dummy_shape(m: TensorMeta) -> tuple:
    d = _DUMMY_SHAPES.get(m.shape)
    if d is None:  # few distinct shapes per graph: one tuple each (generate, 2000-op chain)
        if len(_DUMMY_SHAPES) > 4096:
            _DUMMY_SHAPES.clear()
        d = _DUMMY_SHAPES[m.shape] = tuple(min(s, 2) for s in m.shape)
    return d


_DUMMY_SHAPES: dict = {}


def _dummy(m: TensorMeta):
    """A small array that broadcasts as ``m`` does (dims > 1 become 2)."""
    return np.zeros(_dummy_shape(m), m.dtype.np)


_NUMPY_OK: dict = {}  # (op, dtypes, broadcast pattern, scalars) -> NumPy's ufuncs get it right


def _pointwise(n: Node, cpu: bool):
    if n.op != "call_function" or getattr(n.target, "kind", None) != "plain":
        return None
    out = _meta(n)
    if out is None or out.dtype is D.bfloat16:  # computed in float32 by the op, as eager does
        return None
    args = _full_args(n)
    if args is None:
        return None
    conv = []
    for a in args:
        if isinstance(a, Node):
            if _meta(a) is None:
                return None
            conv.append(Leaf(a))
        else:
            conv.append(a)
    tree = lower(n.target, conv)
    if tree is None:
        return None
    lvs = leaves(tree)
    out_shape = tuple(out.shape)
    # operands of the output's own shape (most) need no broadcast_shapes (generate's hot loop)
    if not lvs or not all(tuple(lf.value.meta["val"].shape) == out_shape for lf in lvs):
        try:
            shape = np.broadcast_shapes(*(lf.value.meta["val"].shape for lf in lvs))
        except ValueError:
            return None
        if tuple(shape) != out_shape:
            return None
    sig = (n.target.name, out.dtype.np, *(
        (a.value.meta["val"].dtype.np, _dummy_shape(a.value.meta["val"])) if isinstance(a, Leaf)
        else (type(a), repr(a)) for a in conv))
    numpy_ok = _NUMPY_OK.get(sig)
    if numpy_ok is None:
        numpy_ok = _NUMPY_OK[sig] = check_numpy(
            tree, {lf: _dummy(lf.value.meta["val"]) for lf in lvs}, out.dtype.np)
    c_ok = (cpu and out.dtype.np in _C_TYPES and _numel(out.shape) > 0
            and (out.dtype.np != np.bool_ or tree[0] in BOOL_OPS)
            and all(lf.value.meta["val"].dtype.np in _C_TYPES for lf in lvs))
    if not (numpy_ok or c_ok):
        return None
    return _PW(tree, out, numpy_ok, c_ok, lvs)


def _n_ops(tree) -> int:
    return 1 + sum(_n_ops(x) for x in tree[1:] if type(x) is tuple) if type(tree) is tuple else 0


def _numel(shape) -> int:
    k = 1
    for s in shape:
        k *= s
    return k


def _source(a: Node) -> Node:
    """Where a fused loop reads ``a`` from: through an ``expand`` of a contiguous value (the loop
    broadcasts by indexing, so the expanded view is never materialised)."""
    if a.op == "call_function" and getattr(a.target, "name", None) == "expand":
        src = a.args[0]
        m = _meta(src) if isinstance(src, Node) else None
        if m is not None and _contiguous(m):
            return src
    return a


def _splits(shape: tuple, pshape: tuple) -> dict:
    """Split points ``s`` (rows = shape[:s], cols = shape[s:]) at which an input of ``pshape`` is
    read by a 2-d loop, and how: ``"full"``, ``"scalar"``, ``"row"`` or ``"col"``."""
    d = len(shape)
    if len(pshape) > d:
        return {}
    p = (1,) * (d - len(pshape)) + tuple(pshape)
    if p == tuple(shape):
        return {s: "full" for s in range(d + 1)}
    if _numel(p) == 1:
        return {s: "scalar" for s in range(d + 1)}
    out = {}
    for s in range(d + 1):
        if all(x == 1 for x in p[:s]) and p[s:] == tuple(shape[s:]):
            out[s] = "col"
        elif p[:s] == tuple(shape[:s]) and all(x == 1 for x in p[s:]):
            out[s] = "row"
    return out


class _Group:
    """Adjacent pointwise nodes of one shape, run by one C loop."""

    __slots__ = ("shape", "members", "index", "splits", "inputs")

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.members: list = []
        self.index: dict = {}  # member -> position
        self.splits = set(range(len(shape) + 1))
        self.inputs: dict = {}  # source node -> {split: access}

    def try_add(self, n: Node, pw: _PW) -> bool:
        if tuple(pw.meta.shape) != self.shape:
            return False
        new = {}
        splits = set(self.splits)
        for lf in pw.leaves:
            a = lf.value
            if a in self.index:
                continue
            src = _source(a)
            if src not in self.inputs and src not in new:
                m = _meta(src)
                acc = _splits(self.shape, m.shape) if m is not None else {}
                new[src] = acc
            splits &= set((self.inputs.get(src) or new[src]).keys())
        if not splits:
            return False
        self.index[n] = len(self.members)
        self.members.append(n)
        self.splits = splits
        self.inputs.update(new)
        return True


# --- code generation ---
def _base_env(xp) -> dict:
    """The globals every generated function starts from."""
    return {"_nd": np.ndarray, "_adopt": _backend.adopt, "_refresh": refresh_view,
            "_wrap": _wrap, "_unwrap": _unwrap_out, "_np": xp,
            "_empty": xp.empty, "_cont": xp.ascontiguousarray,
            **{f"_u_{u}": getattr(xp, u) for u in UFUNCS}}


_VALUE = object()  # glob's default recipe: whatever codecache.recipe makes of the object


class _Gen:
    def __init__(self, gm, xp, cpp_fusion: bool):
        self.gm = gm
        self.env: dict = _base_env(xp)
        self.recipes: dict = {}  # global name -> how another process makes it (codecache)
        self.out: tuple = ()  # (source, globals, C source) once generated
        self.lines: list = []
        self.names: dict = {}  # node -> variable holding its array
        self.orig: dict = {}  # placeholder node -> variable holding its tensor
        self.globals: dict = {}  # id(object) -> global name
        self.cpp_fusion = cpp_fusion
        self.c_kernels: list = []  # (name, C source, cdef)
        self.pool: dict = {}  # (shape, dtype) -> [variable of a dead reusable buffer]
        self.owned: set = set()  # nodes whose arrays this code allocated
        self.pinned: set = set()  # owned nodes another op may hold a view of: never reused
        self.moved: set = set()  # nodes whose buffer a later node took over
        self.tmp = 0
        self.xp = xp
        self.consts: dict = {}  # (value, dtype) -> global of a 0-d array

    def glob(self, obj, hint: str, recipe=_VALUE) -> str:
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
            self.recipes[name] = codecache.recipe(obj) if recipe is _VALUE else recipe
        return name

    def temp(self) -> str:
        self.tmp += 1
        return f"_t{self.tmp}"

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
            return f"_wrap({self.names[a]})" if _meta(a) is not None else self.names[a]
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

    def const_array(self, v, dt) -> str:
        """A constant as a 0-d array of ``dt``, one global per value."""
        key = (float(v), dt)
        name = self.consts.get(key)
        if name is None:
            name = self.consts[key] = self.glob(self.xp.asarray(v, dt), "c")
        return name

    # buffers
    def take_buffer(self, m: TensorMeta) -> str | None:
        free = self.pool.get((tuple(m.shape), m.dtype.np))
        if free:
            counters["reused_buffers"] += 1
            return free.pop()
        return None

    def release(self, dead) -> None:
        """Values read for the last time: reusable buffers go to the pool, the rest are dropped."""
        drop = []
        for v in dead:
            if v in self.orig:
                drop += [self.names[v], self.orig[v]]
            elif v in self.owned and v not in self.pinned and v not in self.moved:
                m = _meta(v)
                free = self.pool.setdefault((tuple(m.shape), m.dtype.np), [])
                free.insert(0, self.names[v])
                if len(free) > _POOL_PER_KEY:
                    drop.append(free.pop())
            elif v not in self.moved:
                drop.append(self.names[v])
        if drop:
            self.lines.append(f"    {' = '.join(drop)} = None")

    # one node
    def pointwise(self, n: Node, pw: _PW, dying: set) -> None:
        """One pointwise node as NumPy ufunc calls into a reused buffer where there is one."""
        name = self.names[n]
        m = pw.meta
        out = None
        for lf in pw.leaves:  # the dying operand's own buffer, if it is reusable
            a = lf.value
            am = _meta(a)
            if (a in dying and a in self.owned and a not in self.pinned and a not in self.moved
                    and tuple(am.shape) == tuple(m.shape) and am.dtype.np == m.dtype.np):
                out = self.names[a]
                self.moved.add(a)
                counters["reused_buffers"] += 1
                break
        if out is None:
            out = self.take_buffer(m)
        # an input's layout is the caller's (its recorded strides may not be): ask for C order
        # (a fresh array of at most one dimension is contiguous whatever its operands' layout)
        strided = len(m.shape) > 1 and any(
            lf.value.op == "placeholder" or not _contiguous(_meta(lf.value))
            for lf in pw.leaves)
        temps = []

        def temp():
            temps.append(self.temp())
            return temps[-1]

        cdt = const_dtype(pw.tree, lambda lf: _np_dtype(lf.value), m.dtype.np)
        const = None if cdt is None else (lambda v: self.const_array(v, cdt))
        lines, res = numpy_lines(pw.tree, lambda lf: self.names[lf.value], out, temp,
                                 order_c=strided, const=const)
        if lines[-1].startswith(f"{res} = "):  # the root's call assigns the node's own name
            lines[-1] = name + lines[-1][len(res):]
        else:
            lines.append(f"{name} = {res}")
        body = self.lines
        body += [f"    {ln}" for ln in lines]
        if not m.shape:  # a ufunc on 0-d arrays returns a NumPy scalar
            body.append(f"    if type({name}) is not _nd: {name} = _adopt({name})")
        drop = [t for t in temps if any(ln.startswith(f"{t} = ") for ln in lines)]
        if out is not None and out != name:  # the buffer now has one name
            drop.append(out)
        if drop:
            body.append(f"    {' = '.join(drop)} = None")
        self.owned.add(n)
        counters["pointwise"] += 1

    def group(self, g: _Group, pws: dict, users: dict) -> None:
        """One fused C loop over the group's shape; members read outside it become outputs."""
        s = min(g.splits)
        rows, cols = _numel(g.shape[:s]), _numel(g.shape[s:])
        members = g.members
        inside = set(members)
        outs = [n for n in members if any(u not in inside for u in users[n])]
        params, call, body = [], [], []
        loc: dict = {}
        for k, (src, acc) in enumerate(g.inputs.items()):
            m = _meta(src)
            ct = _C_TYPES[m.dtype.np]
            params.append(f"const {ct} *restrict in{k}")
            v = self.names[src]
            call.append(f"_fb(_cont({v}))")  # a view's array may be strided: copy it then
            idx = {"full": "i", "scalar": "0", "row": "r", "col": "c"}[acc[s]]
            loc[src] = (f"in{k}[{idx}]", m.dtype.np)
        for j, n in enumerate(members):
            pw = pws[n]
            ct = _C_TYPES[pw.meta.dtype.np]
            if ct == "unsigned char":  # a comparison: computed in its operands' float type
                fl = [loc[_source(lf.value)][1] if lf.value not in inside
                      else pws[lf.value].meta.dtype.np for lf in pw.leaves]
                work = "double" if np.dtype(np.float64) in fl else "float"
            else:
                work = ct

            def leaf(lf, work=work):
                a = lf.value
                if a in inside:
                    src_expr, dt = f"m{g.index[a]}", pws[a].meta.dtype.np
                else:
                    src_expr, dt = loc[_source(a)]
                if dt == np.bool_ or _C_TYPES[dt] == work:
                    return src_expr
                return f"(({work}){src_expr})"

            body.append(f"            const {ct} m{j} = {c_expr(pw.tree, work, leaf)};")
        for k, n in enumerate(outs):
            pw = pws[n]
            params.append(f"{_C_TYPES[pw.meta.dtype.np]} *restrict out{k}")
            body.append(f"            out{k}[i] = m{g.index[n]};")
        kname = f"k{len(self.c_kernels)}"
        src = (f"void {kname}({', '.join(params)}) {{\n"
               f"    for (long r = 0; r < {rows}L; r++) {{\n"
               f"        #pragma omp simd\n"
               f"        for (long c = 0; c < {cols}L; c++) {{\n"
               f"            const long i = r * {cols}L + c;\n" + "\n".join(body) + "\n"
               "        }\n    }\n}\n")
        cdef = f"void {kname}({', '.join('void *' for _ in params)});"
        self.c_kernels.append((kname, src, cdef))
        lines = self.lines
        for n in outs:
            name = self.names[n]
            buf = self.take_buffer(pws[n].meta)
            m = pws[n].meta
            if buf is None:
                dt = self.glob(m.dtype.np, f"dt_{m.dtype.np.name}")
                lines.append(f"    {name} = _empty({tuple(m.shape)!r}, {dt})")
            else:
                lines.append(f"    {name} = {buf}")
                if buf != name:
                    lines.append(f"    {buf} = None")
            call.append(f"_fb({name})")
            self.owned.add(n)
        lines.append(f"    _lib.{kname}({', '.join(call)})")
        counters["fused_kernels"] += 1
        counters["fused_ops"] += len(members)

    def row_kernel(self, n: Node) -> bool:
        """A softmax / layer norm (or backward) as a generated C row loop, where it is one."""
        rec = n.target
        if getattr(rec, "kind", None) != "plain" or rec.name not in rowkernels.OPS:
            return False
        args = _full_args(n)
        if args is None:
            return False
        kname = f"k{len(self.c_kernels)}"
        made = rowkernels.kernel(rec.name, args, [_meta(a) for a in args], _meta(n), kname)
        if made is None:
            return False
        src, ins, outs = made
        n_args = len(ins) + len(outs)
        self.c_kernels.append((kname, src, f"void {kname}({', '.join(['void *'] * n_args)});"))
        call = [f"_fb(_cont({self.names[args[i]]}))" if isinstance(args[i], Node)
                else self.glob(cpp.null(), "NULL", ("null", None)) for i in ins]
        names = []
        for shape, dt in outs:
            o = self.temp()
            self.lines.append(f"    {o} = _empty({shape!r}, {self.glob(dt, f'dt_{dt.name}')})")
            call.append(f"_fb({o})")
            names.append(o)
        self.lines.append(f"    _lib.{kname}({', '.join(call)})")
        name = self.names[n]
        if rec.multi_out:
            self.lines.append(f"    {name} = ({', '.join(names[:3])},)")
            self.lines.append(f"    {' = '.join(names)} = None")
        else:
            self.lines.append(f"    {name} = {names[0]}")
            self.lines.append(f"    {names[0]} = None")
            self.owned.add(n)
        counters["row_kernels"] += 1
        return True

    def extern(self, n: Node) -> None:
        name = self.names[n]
        body = self.lines
        gm = self.gm
        if n.op == "get_attr":
            obj = gm
            for atom in n.target.split("."):
                obj = getattr(obj, atom)
            ref = self.glob(obj, n.target, ("attr", n.target))
            body.append(f"    {name} = {ref}._data" if isinstance(obj, Tensor)
                        else f"    {name} = {ref}")
        elif n.op == "call_method" and n.target == "detach":
            body.append(f"    {name} = {self.arr(n.args[0])}")
        elif n.op == "call_function" and n.target is operator.getitem:
            body.append(f"    {name} = {self.arr(n.args[0])}[{self.arr(n.args[1])}]")
        elif n.op == "call_function" and n.target is _set_grad_enabled:
            self.names[n] = "None"  # arrays carry no autograd state
        elif self.cpp_fusion and n.op == "call_function" and self.row_kernel(n):
            pass
        elif n.op == "call_function" and getattr(n.target, "kind", None) is not None \
                and _direct(n):
            rec = n.target
            f = self.glob(rec.fwd, f"f_{rec.name}", codecache.forward_recipe(rec))
            args = ", ".join(self.arr(a) for a in _full_args(n))
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
                fn = f"{self.ten(n.args[0])}.{n.target}"
                pos = n.args[1:]
            else:
                fn = self.glob(n.target,
                               f"d_{getattr(n.target, 'name', None) or n.target.__name__}")
                pos = n.args
            args = [self.ten(a) for a in pos] + [f"{k}={self.ten(v)}" for k, v in n.kwargs.items()]
            body.append(f"    {name} = _unwrap({fn}({', '.join(args)}))")
            counters["dispatched"] += 1
        else:
            raise NotImplementedError(f"inductor: cannot generate {n.op} {n.target}")


def _wrap(a):
    return Tensor._make(a, None, 0, None)


def _unwrap_out(r):
    if isinstance(r, Tensor):
        return r._data
    if type(r) in (tuple, list) or isinstance(r, tuple):
        return tuple(_unwrap_out(x) for x in r)
    return r


def _device_of(gm, example_inputs):
    """(array module, whether everything is on the CPU) for a graph's inputs."""
    xp, cpu = np, True
    for x in example_inputs or ():
        if isinstance(x, Tensor):
            if x.device.type != "cpu":
                cpu = False
                xp = _backend.namespace_of(x._data)
    for n in gm.graph.nodes:
        m = _meta(n)
        if m is not None and getattr(m.device, "type", "cpu") != "cpu":
            cpu = False
    return xp, cpu


def generate(gm, example_inputs=None, cpp_fusion: bool | None = None,
             array_inputs: bool = False, bare: bool = True) -> tuple:
    """The source of ``gm`` as one function of a list of inputs, its globals, and the C source of
    its fused loops ("" when there are none). ``array_inputs``: the list holds the tensors'
    arrays, not the tensors (compiled autograd's runner). ``bare``: the placeholders and
    outputs AOT marks as private saved values (``gm.meta["array_placeholders"]``,
    ``["bare_outputs"]``) are arrays, not Tensors."""
    if cpp_fusion is None:
        cpp_fusion = cpp.available()
    return _generate(gm, *_device_of(gm, example_inputs), cpp_fusion, array_inputs, bare).out


def _generate(gm, xp, cpu: bool, cpp_fusion: bool, array_inputs: bool, bare: bool) -> _Gen:
    """``generate``'s work; the result's ``out`` is what ``generate`` returns."""
    cpp_fusion = bool(cpp_fusion) and cpu
    g = _Gen(gm, xp, cpp_fusion)
    nodes = list(gm.graph.nodes)
    users = {n: list(n.users) for n in nodes}
    pws = {}
    for n in nodes:
        pw = _pointwise(n, cpu)
        if pw is not None and ((pw.numpy and _n_ops(pw.tree) <= 3) or (cpp_fusion and pw.c)):
            pws[n] = pw
    body = g.lines
    phs = [n for n in nodes if n.op == "placeholder"]
    body.append(f"    {', '.join(f't_{n.name}' for n in phs)}{',' if len(phs) == 1 else ''} = "
                "args" if phs else "    pass")
    body.append("    args.clear()")
    for n in nodes:
        g.names[n] = f"v_{n.name}" if n.op != "placeholder" else f"t_{n.name}"
    # schedule: one open group; a node reading the group's values closes it first
    order: list = []  # ("node", n) | ("group", _Group)
    open_g = None

    def close():
        nonlocal open_g
        if open_g is not None:
            one = open_g.members[0]
            if len(open_g.members) == 1 and pws[one].numpy and _n_ops(pws[one].tree) == 1:
                order.append(("node", one))  # one ufunc: NumPy's own loop is as good
            else:
                order.append(("group", open_g))
            open_g = None

    for n in nodes:
        if n.op == "placeholder":
            continue
        pw = pws.get(n)
        if cpp_fusion and pw is not None and pw.c:
            if open_g is not None and open_g.try_add(n, pw):
                continue
            close()
            open_g = _Group(pw.meta.shape)
            if not open_g.try_add(n, pw):  # no 2-d loop reads its inputs
                open_g = None
                if not pw.numpy:
                    del pws[n]  # the op's own forward
                order.append(("node", n))
            continue
        if open_g is not None and (n.op == "output" or
                                   any(a in open_g.index for a in n._input_nodes)):
            close()
        order.append(("node", n))
    close()
    # an expand read only by fused loops (which index its source) is never made
    grouped = {m for kind, x in order if kind == "group" for m in x.members}
    order = [(kind, x) for kind, x in order
             if not (kind == "node" and _source(x) is not x and x.users
                     and all(u in grouped for u in x.users))]
    for n in nodes:  # an owned value read by any other op may be viewed by it: never reused
        if n not in pws:
            g.pinned.update(n._input_nodes)
    # last uses per scheduled item (a group reads through expands to their sources)
    last_item: dict = {}
    for i, (kind, x) in enumerate(order):
        for m in (x.members if kind == "group" else [x]):
            for a in m._input_nodes:
                last_item[a] = i
                if kind == "group":
                    last_item[_source(a)] = i
    dead_at: dict = {}
    for v, i in last_item.items():
        dead_at.setdefault(i, []).append(v)
    for i, (kind, x) in enumerate(order):  # a value nothing reads dies where it is made
        if kind == "node" and x.op != "output" and not x.users \
                and x.target is not _set_grad_enabled:
            dead_at.setdefault(i, []).append(x)
    arrays = gm.meta.get("array_placeholders", ()) if bare else ()
    for i, n in enumerate(phs):
        if _meta(n) is not None and not array_inputs and i not in arrays:
            g.orig[n] = g.names[n]
            body.append(f"    if {g.names[n]}._view is not None: _refresh({g.names[n]})")
            body.append(f"    a_{n.name} = {g.names[n]}._data")
            g.names[n] = f"a_{n.name}"
    unread = [n for n in phs if not n.users]
    if unread:  # inputs nothing reads: dropped at once (the caller cleared its list)
        g.release(unread)
    for i, (kind, x) in enumerate(order):
        dead = dead_at.get(i, ())
        if kind == "group":
            g.group(x, pws, users)
            inside = set(x.members)
            # members used only inside never existed as arrays
            dead = [v for v in dead if v not in inside]
        else:
            n = x
            if n.op == "output":
                pre, expr = _output(g, n.args[0], gm.meta.get("bare_outputs", ()) if bare else ())
                body += pre
                body.append(f"    return {expr}")
                break
            if n in pws:
                g.pointwise(n, pws[n], set(dead))
            else:
                g.extern(n)
        g.release([v for v in dead if v.op != "output"])
    src = "def compiled(args):\n" + "\n".join(body) + "\n"
    c_src = ""
    if g.c_kernels:
        c_src = cpp.prelude() + "\n" + "\n".join(k[1] for k in g.c_kernels)
        g.env["_cdef"] = "\n".join(k[2] for k in g.c_kernels)
    g.out = (src, g.env, c_src)
    return g


def _output(g: _Gen, out, bare=()) -> tuple:
    """Statements wrapping each output array once (a placeholder is its own tensor; the
    top-level positions in ``bare`` stay arrays), and the output structure's expression."""
    seen: dict = {}
    pre = []

    def go(a, keep=False):
        if isinstance(a, Node):
            if a in g.orig:
                return g.orig[a]
            if _meta(a) is None or keep:
                return g.names[a]
            if a not in seen:
                seen[a] = f"o_{a.name}"
                pre.append(f"    {seen[a]} = _wrap({g.names[a]})")
            return seen[a]
        if type(a) in (list, tuple):
            inner = ", ".join(go(x) for x in a)
            return f"[{inner}]" if type(a) is list else f"({inner}{',' if len(a) == 1 else ''})"
        return g.const(a)

    if bare and type(out) in (list, tuple):
        items = [go(x, i in bare) for i, x in enumerate(out)]
        inner = ", ".join(items)
        expr = f"[{inner}]" if type(out) is list else f"({inner}{',' if len(out) == 1 else ''})"
    else:
        expr = go(out)
    return pre, expr


def _build(gm, example_inputs, cpp_fusion, array_inputs=False, bare=True, disk_cache=False):
    xp, cpu = _device_of(gm, example_inputs)
    cpp_fusion = bool(cpp_fusion) and cpu
    key = codecache.graph_key(gm, cpp_fusion, array_inputs, bare) \
        if disk_cache and cpu else None  # (the arrays of other devices' code are not pickled)
    found = _from_disk(key, gm) if key is not None else None
    if found is not None:
        src, env, c_src = found
    else:
        g = _generate(gm, xp, cpu, cpp_fusion, array_inputs, bare)
        src, env, c_src = g.out
        if key is not None and None not in g.recipes.values():
            codecache.save(key, {"src": src, "c_src": c_src, "cdef": env.get("_cdef", ""),
                                 "recipes": g.recipes})
    if c_src:
        env["_lib"] = _LazyLib(cpp.start(c_src, env["_cdef"]), env)
    code = _CODE_CACHE.get(src)
    if code is None:
        code = _CODE_CACHE[src] = compile(src, f"<inductor {gm.__class__.__name__}>", "exec")
        counters["compiled"] += 1
    else:
        counters["cache_hits"] += 1
    exec(code, env)  # noqa: S102 - our generated code
    fn = env["compiled"]
    fn._boxed_call = True
    fn._array_inputs = array_inputs
    if bare:  # what AOT asked to pass bare, done (aot._private_saved)
        fn._bare_outputs = gm.meta.get("bare_outputs", ())
        fn._array_placeholders = gm.meta.get("array_placeholders", ())
    fn.source = src
    fn.c_source = c_src
    fn.graph_module = gm
    return fn


def _from_disk(key: str, gm):
    """``generate``'s result for ``gm`` from the graph cache, globals made again (None: a miss,
    or an entry whose globals no longer resolve)."""
    entry = codecache.load(key)
    if entry is None:
        return None
    env = _base_env(np)
    try:
        for name, r in entry["recipes"].items():
            env[name] = codecache.remake(r, gm)
    except (LookupError, AttributeError):
        return None
    if entry["c_src"]:
        env["_cdef"] = entry["cdef"]
    return entry["src"], env, entry["c_src"]


def _from_buffer(ffi):
    """``ffi.from_buffer`` without its Python wrapper (one frame less per array a kernel gets:
    ~20% of the call), where this cffi has the backend function the wrapper calls."""
    backend, char_array = getattr(ffi, "_backend", None), getattr(ffi, "BCharA", None)
    if getattr(backend, "from_buffer", None) is None or char_array is None:
        return ffi.from_buffer
    return functools.partial(backend.from_buffer, char_array)


class _LazyLib:
    """The generated code's ``_lib`` until the compiler is done: the first kernel call waits for
    the build, then puts the loaded library (and cffi's ``from_buffer``) in the code's globals."""

    def __init__(self, build, env):
        self._build, self._env = build, env
        env["_fb"] = self._from_buffer

    def _load(self):
        ffi, lib = self._build.get()
        self._env["_lib"], self._env["_fb"] = lib, _from_buffer(ffi)
        return ffi, lib

    def _from_buffer(self, a):
        return self._load()[0].from_buffer(a)

    def __getattr__(self, name):
        return getattr(self._load()[1], name)


def _time(fn, example_inputs, reps: int = 3) -> float:
    arrays = getattr(fn, "_array_placeholders", ())
    example_inputs = [x._data if i in arrays and isinstance(x, Tensor) else x
                      for i, x in enumerate(example_inputs)]
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(list(example_inputs))
        best = min(best, time.perf_counter() - t0)
    return best


def _pure(gm) -> bool:
    """No node writes or draws random numbers: safe to run again while autotuning."""
    for n in gm.graph.nodes:
        rec = n.target
        if n.op == "call_function" and hasattr(rec, "kind"):
            if rec.kind == "inplace" or rec.extra.get("nondeterministic") or \
                    getattr(getattr(rec, "_schema", None), "is_mutable", False):
                return False
    return True


def compile_fx_inner(gm, example_inputs, options: dict | None = None, *,
                     array_inputs: bool = False):
    """Compile one graph (a forward or backward half) to a boxed straight-line function (of the
    inputs' arrays with ``array_inputs``)."""
    opts = dict(_DEFAULTS, **(options or {}))
    want_c = opts["cpp_fusion"]
    if want_c is None:
        want_c = cpp.available()
    bare = not opts["triton.cudagraphs"]  # the CUDA-graph wrapper copies Tensors out
    disk = codecache.enabled(opts["fx_graph_cache"])
    fn = _build(gm, example_inputs, want_c, array_inputs, bare, disk)
    if opts["max_autotune"] and want_c and fn.c_source and example_inputs is not None \
            and _pure(gm) and all(isinstance(x, Tensor) or not hasattr(x, "shape")
                                  for x in example_inputs):
        alt = _build(gm, example_inputs, False, array_inputs, bare, disk)
        if _time(alt, example_inputs) < _time(fn, example_inputs):
            log.info("max_autotune: NumPy code beats fused C for %s", gm.__class__.__name__)
            fn = alt
    out_log = artifact("output_code")
    if out_log.isEnabledFor(logging.DEBUG):
        out_log.debug("Output code:\n%s%s", fn.source,
                      f"\n/* fused C */\n{fn.c_source}" if fn.c_source else "")
    if opts["triton.cudagraphs"]:
        fn = _cudagraphs(fn, gm, example_inputs)
    return fn


def _cudagraphs(fn, gm, example_inputs):
    from . import cudagraphs

    why = cudagraphs.skip_reason(gm, example_inputs)
    if why is not None:
        cudagraphs.log_skip(why)
        return fn
    return cudagraphs.cudagraphify(fn, example_inputs)


def inductor_backend(gm, example_inputs, options: dict | None = None):
    """The ``inductor`` backend: ``(gm, example_inputs) -> callable(*placeholder_values)``."""
    if options:
        unknown = set(options) - set(_DEFAULTS)
        if unknown:
            raise RuntimeError(f"Unexpected optimization option {sorted(unknown)[0]}, known "
                               f"options are {list_options()}")
    inner = functools.partial(compile_fx_inner, options=options) if options else compile_fx_inner
    if not (options or {}).get("triton.cudagraphs") and not (options or {}).get("max_autotune"):
        inner = functools.partial(inner)
        inner.needs_example_inputs = False  # the backward compiles with the forward (see aot)
    return aot_module_simplified(gm, example_inputs, fw_compiler=inner, bw_compiler=inner,
                                 partition_fn=partition_fn(options))


RECOMPUTE_MAX_BYTES = 64 * 1024


def partition_fn(options: dict | None = None):
    """How the joint graph is split. With fused C loops, a small pointwise value is recomputed
    in the backward's loops rather than saved (min-cut; a saved tensor costs more per tensor than
    its bytes), but one over ``RECOMPUTE_MAX_BYTES`` is saved (recomputing it is one more pass
    over memory, measured slower on the MLP, CNN and transformer steps). Without the C tier each
    recomputed op is one more pass: save what the backward reads, as eager autograd does."""
    c = (options or {}).get("cpp_fusion")
    if cpp.available() if c is None else c:
        return functools.partial(min_cut_rematerialization_partition,
                                 recompute_max_bytes=RECOMPUTE_MAX_BYTES)
    return default_partition
