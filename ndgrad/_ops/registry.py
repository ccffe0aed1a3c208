"""Op records and the one dispatch point every op call passes through.

``defop(schema, fwd=..., vjp=..., samples=...)`` parses a PyTorch-style schema once into an
``OpRecord``: which parameters are tensors, which are differentiable, what the backward formulas
need saved (read from the formulas' parameter names), and the alias info (``Tensor(a)`` marks a
view of ``self``, ``Tensor(a!)`` an in-place op). It generates the op's ``Node`` subclass
(``MulBackward0``) and a public function with the schema's signature. ``dispatch`` runs the
forward on arrays, wraps the outputs and records the node; views and in-place ops (with
PyTorch's CopySlices rewrite for in-place ops on views) branch off it.
"""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._tensor import (Tensor, ViewInfo, check_inplace, gradient_edge, move_retains_grad,
                       refresh_view)
from ..autograd.node import SECOND_BACKWARD_MSG, Node, next_sequence_nr
from ..autograd.saved import RawSaved, save_input, save_output
from ..autograd import dispatch_mode as _dm
from ..autograd import grad_mode as _gm
from ..autograd.grad_mode import INFERENCE_VC, state as _gs
from . import fastpath
from . import jvp as _jvp
from . import overload as _overload

__all__ = ["defop", "defcomposite", "dispatch", "OPS", "OpRecord", "push_mode", "pop_mode"]

OPS: dict[str, "OpRecord"] = {}  # the op-info table: every primitive and composite, by name
NAMESPACES: dict[str, dict] = {"": {}, "linalg": {}, "special": {}, "nn.functional": {}, "fft": {}}

_new = object.__new__
_make = Tensor._make
_cpu = _backend.cpu
_ndarray = np.ndarray
_device_arrays = _backend._BY_ARRAY  # array type -> device type, for every array but ndarray
_asarray = _backend.adopt

# Dispatch modes (profiler, graph capture, forward AD, anomaly mode, user TorchDispatchModes)
# live on the per-thread stacks of ``autograd.dispatch_mode``; the hot path pays one truthiness
# check of ``_modes`` (every mode entered on any thread) when none is active.
_modes = _dm.active
_handler = _dm.handler
_mode_local = _dm._local


def push_mode(mode) -> None:
    """Enter ``mode``: every op call becomes ``mode.dispatch(rec, args, run)``."""
    _dm.push(mode)


def pop_mode(mode=None):
    """Take ``mode`` off its stack wherever it sits (by default this thread's innermost);
    returns the mode taken off, or None."""
    if mode is None:
        stack = _mode_local.stack
        if not stack:
            return None
        mode = stack[-1]
    return mode if _dm.remove(mode) else None


# --- schema parsing ---
T_PLAIN, T_TENSOR, T_OPT_TENSOR, T_TENSOR_LIST = 0, 1, 2, 3
_PARAM = re.compile(r"^(?P<type>[A-Za-z]+(?:\([a-z]!?\))?\??(?:\[\d*\])?\??)\s+(?P<name>\w+)(?:=(?P<default>.+))?$")


class Param:
    __slots__ = ("name", "type", "code", "default", "has_default", "kwarg_only", "alias")

    def __init__(self, text: str, kwarg_only: bool):
        m = _PARAM.match(text.strip())
        if m is None:
            raise ValueError(f"bad schema parameter {text!r}")
        ty = m["type"]
        self.name = m["name"]
        self.kwarg_only = kwarg_only
        alias = re.search(r"\(([a-z]!?)\)", ty)
        self.alias = alias.group(1) if alias else None
        base = re.sub(r"\([a-z]!?\)", "", ty)
        self.type = base
        self.code = {"Tensor": T_TENSOR, "Tensor?": T_OPT_TENSOR, "Tensor[]": T_TENSOR_LIST,
                     "Tensor?[]": T_TENSOR_LIST}.get(base, T_PLAIN)
        self.has_default = m["default"] is not None
        self.default = _parse_default(m["default"]) if self.has_default else None


def _parse_default(s: str):
    s = s.strip()
    if s in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[s]
    if s.startswith("[") and s.endswith("]"):
        inner = s[1:-1].strip()
        return tuple(_parse_default(x) for x in inner.split(",")) if inner else ()
    if s.startswith(("'", '"')):
        return s[1:-1]
    try:
        return int(s)
    except ValueError:
        return float(s)


def _split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def parse_schema(schema: str):
    m = re.match(r"^([\w.]+)\((.*)\)\s*->\s*(.+)$", schema.strip())
    if m is None:
        raise ValueError(f"bad schema {schema!r}")
    full, args, ret = m.groups()
    params, kw = [], False
    for part in _split_top(args):
        part = part.strip()
        if part == "*":
            kw = True
            continue
        params.append(Param(part, kw))
    ret = ret.strip()
    if ret.startswith("("):
        rets = [r.strip() for r in _split_top(ret[1:-1])]
    else:
        rets = [ret]
    returns = []
    for r in rets:
        ty, _, name = r.partition(" ")
        alias = re.search(r"\(([a-z]!?)\)", ty)
        returns.append((name or None, alias.group(1) if alias else None, ty.endswith("[]")))
    name, _, overload = full.partition(".")
    return name, overload, params, returns


def camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.strip("_").split("_"))


# --- the record ---
class OpRecord:
    __slots__ = (
        "name", "overload", "schema", "params", "returns", "fwd", "promote", "views_of",
        "mutates", "multi_out", "tensor_pos", "diff_pos", "has_list", "node_cls", "save_plan",
        "arg_plan", "vjp_plan", "uses_needs", "n_saved", "jvp", "samples", "call", "composite",
        "outplace", "api", "method", "kind", "out_names", "torch", "tolerance", "differentiable",
        "gradcheck", "extra", "promote_pos", "save_need", "dtype_pos",
        "fw",  # forward AD's per-op plan, made on first use (autograd/forward_ad.py)
    )

    # --- PyTorch's OpOverload: a dispatch mode's ``func`` is the record itself ---
    def __call__(self, *args, **kwargs):
        return self.call(*args, **kwargs)

    @property
    def overloadpacket(self):
        try:
            return self.extra["packet"]
        except KeyError:  # a composite: it never reaches dispatch, so it has no overload
            raise AttributeError(f"composite {self.name} is not an aten overload") from None

    @property
    def __name__(self) -> str:
        return self.overloadpacket.__name__ + "." + self._overloadname

    @property
    def _overloadname(self) -> str:
        return next(k for k, v in self.overloadpacket._overloads.items() if v is self)

    namespace = "aten"

    @property
    def _schema(self):
        s = self.extra.get("schema")
        if s is None:
            s = self.extra["schema"] = _overload.FunctionSchema(self)
        return s

    def _dispatch_args(self, args):
        """(types, args, kwargs) as ``__torch_dispatch__`` receives them: keyword-only arguments
        as kwargs, and arguments left at their defaults omitted."""
        params = self.params
        types = {}
        for i in self.tensor_pos:
            a = args[i]
            for t in (a if type(a) in (list, tuple) else (a,)):
                if isinstance(t, Tensor):
                    types[type(t)] = None
        npos = sum(not p.kwarg_only for p in params)
        end = npos
        while end and params[end - 1].has_default and _is_default(args[end - 1], params[end - 1].default):
            end -= 1
        kwargs = {p.name: a for p, a in zip(params[npos:], args[npos:])
                  if not (p.has_default and _is_default(a, p.default))}
        return tuple(types), tuple(args[:end]), kwargs

    def __str__(self) -> str:
        return self.name if self.kind == "composite" else f"aten.{self.__name__}"

    def __repr__(self) -> str:
        if self.kind == "composite":
            return f"<composite {self.name}>"
        return f"<OpOverload(op='aten.{self.overloadpacket.__name__}', overload='{self._overloadname}')>"


def _is_default(a, default) -> bool:
    return a is default or (type(a) is type(default) and a == default)


PROMOTE_NONE, PROMOTE_COMMON, PROMOTE_FLOAT = 0, 1, 2


def defop(
    schema: str,
    fwd,
    vjp: dict | None = None,
    *,
    jvp=None,
    samples=None,
    promote: int = PROMOTE_NONE,
    promote_args: tuple | None = None,
    api: str | None = None,
    method: bool | str = True,
    inplace: str | None = None,
    node_name: str | None = None,
    torch: str | None = None,
    gradcheck: bool = True,
    extra: dict | None = None,
) -> OpRecord:
    """Register one primitive op. See ``docs/ARCHITECTURE.md`` ("add an op in 5 steps")."""
    name, overload, params, returns = parse_schema(schema)
    key = name + ("." + overload if overload else "")
    if key in OPS:
        raise ValueError(f"op {key} registered twice")
    if samples is None and not name.startswith("_"):
        raise ValueError(f"op {key}: missing samples")
    rec = _new(OpRecord)
    rec.name, rec.overload, rec.schema, rec.params = key, overload, schema, params
    rec.returns = returns
    rec.out_names = tuple(r[0] or ("result" if len(returns) == 1 else f"result{i}") for i, r in enumerate(returns))
    rec.fwd = getattr(np, fwd) if isinstance(fwd, str) else fwd
    rec.promote = promote
    rec.views_of = any(a == "a" for _, a, _ in returns) and params[0].alias == "a"
    rec.mutates = params[0].alias == "a!" if params else False
    rec.multi_out = len(returns) > 1 or returns[0][2]
    rec.tensor_pos = tuple(i for i, p in enumerate(params) if p.code)
    rec.has_list = any(p.code == T_TENSOR_LIST for p in params)
    pnames = [p.name for p in params]
    rec.promote_pos = (
        tuple(pnames.index(a) for a in promote_args) if promote_args is not None else rec.tensor_pos
    )
    # a ``dtype=`` argument: bfloat16 there computes in float32 too (_via_float32)
    rec.dtype_pos = pnames.index("dtype") if "dtype" in pnames else None
    rec.jvp, rec.samples, rec.composite, rec.outplace, rec.fw = jvp, samples, None, None, None
    rec.api = api if api is not None else name
    rec.method = name if method is True else (method or None)
    rec.kind = "view" if rec.views_of else ("inplace" if rec.mutates else "plain")
    rec.torch = torch
    rec.gradcheck = gradcheck
    rec.extra = dict(extra or ())  # its own: generated code and the overload packet go here
    rec.tolerance = None
    _build_backward(rec, vjp, node_name or camel(name) + "Backward0")
    variants = rec.extra.get("node_variants")
    if variants:  # same node, PyTorch's name for the op it decomposes into at these ranks
        rec.node_cls._variants = {dims: type(n, (rec.node_cls,), {"__slots__": ()})
                                  for dims, n in variants.items()}
    rec.jvp = _jvp.prepare(rec, jvp)  # forward AD reads it (autograd/forward_ad.py)
    if rec.extra.get("out") is None:
        rec.extra["out"] = _takes_out(rec)
    rec.call = fastpath.public(rec, dispatch, _ScalarSaved) or _make_public(rec)
    if rec.node_cls is not None:
        apply = fastpath.node_apply(rec)
        if apply is not None:
            rec.node_cls.apply = apply
    OPS[key] = rec
    _overload.register(rec)
    _publish(rec)
    if inplace:
        definplace(rec, inplace)
    return rec


def definplace(rec: OpRecord, name: str) -> OpRecord:
    """The in-place variant of ``rec``: same forward and formulas, result written into self."""
    ip = _new(OpRecord)
    for s in OpRecord.__slots__:
        setattr(ip, s, getattr(rec, s))
    ip.name = name
    ip.kind = "inplace"
    ip.mutates = True
    ip.outplace = rec
    ip.fw = None
    ip.samples = None
    ip.api = None
    ip.method = name
    # Its own extras: the outplace op's generated fast paths and overload packet are not its own;
    # what the op is (a device copy, a random draw) is.
    ip.extra = {k: v for k, v in rec.extra.items()
                if k in ("cross_device", "nondeterministic", "bfloat16_native")}
    ip.call = _make_public(ip)
    OPS[name] = ip
    _overload.register(ip)
    _publish(ip)
    return ip


def defcomposite(fn, *, samples, name: str | None = None, api: str | None = None,
                 method: bool | str = True, torch: str | None = None, gradcheck: bool = True,
                 extra: dict | None = None) -> OpRecord:
    """Register a composite (a plain function of other ops) in the op-info table."""
    rec = _new(OpRecord)
    for s in OpRecord.__slots__:
        setattr(rec, s, None)
    rec.name = name or fn.__name__
    rec.kind = "composite"
    rec.composite = fn
    rec.call = fn
    rec.samples = samples
    rec.api = api if api is not None else rec.name
    rec.method = rec.name if method is True else (method or None)
    rec.torch = torch
    rec.gradcheck = gradcheck
    rec.extra = dict(extra or ())  # its own: generated code and the overload packet go here
    rec.differentiable = True
    if rec.name in OPS:
        raise ValueError(f"op {rec.name} registered twice")
    OPS[rec.name] = rec
    _publish(rec)
    return rec


def _publish(rec: OpRecord) -> None:
    if rec.api:
        ns, _, short = rec.api.rpartition(".")
        NAMESPACES[ns][short] = rec.call
    if rec.method:
        setattr(Tensor, rec.method, rec.call)


def _make_public(rec: OpRecord):
    """A function with the schema's signature that packs its arguments for ``dispatch``."""
    env = {"_dispatch": dispatch, "_rec": rec}
    sig, names = fastpath.signature(rec, env)
    pyname = rec.name.replace(".", "_")
    env["_out"] = call_out
    head = "".join(h + "\n" for h in fastpath.out_line(rec, names))
    src = f"def {pyname}({', '.join(sig)}):\n{head}    return _dispatch(_rec, ({', '.join(names)},))\n"
    exec(src, env)
    fn = env[pyname]
    fn.__qualname__ = fn.__name__ = rec.name.split(".")[0]
    fn.__doc__ = f"{rec.schema}"
    return fn


# --- out= ---
# Published functional ops take ``out=`` as PyTorch's ``.out`` overloads do; modules' functions
# (``nn.functional``) and these do not.
_NO_OUT = frozenset({"clone", "native_dropout", "convolution", "batch_norm", "layer_norm",
                     "group_norm", "rms_norm", "index_put", "embedding", "one_hot", "pad"})


def _takes_out(rec) -> bool:
    return (rec.kind == "plain" and bool(rec.api) and not rec.api.startswith("nn.")
            and rec.name.split(".")[0] not in _NO_OUT and not any(r[2] for r in rec.returns))


# How an op's ``out`` dtype may differ from its result's (PyTorch's kernels differ): by default
# the result must cast without demotion; these compute in out's dtype, or demand the same one.
_OUT_DTYPE = {"sum": "any", "prod": "any", "cumsum": "any", "cumprod": "any",
              "mm": "exact", "bmm": "exact", "matmul": "exact", "addmm": "exact", "max": "exact",
              "min": "exact", "amax": "input", "amin": "input", "cat": "cat", "stack": "cat"}
_C10_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
              "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
              "bool": "bool", "complex64": "c10::complex<float>",
              "complex128": "c10::complex<double>", "bfloat16": "c10::BFloat16"}


def _check_out_dtype(name, rule, src, dst) -> None:
    if rule == "any":
        return
    if rule == "exact":
        raise RuntimeError(f"Expected out tensor to have dtype {_C10_NAMES.get(src.name, src.name)}, "
                           f"but got {_C10_NAMES.get(dst.name, dst.name)} instead")
    if rule == "input":
        raise RuntimeError(
            f"Expected the dtype for input and out to match, but got {D.SHORT_NAMES[src]} for "
            f"input's dtype and {D.SHORT_NAMES[dst]} for out's dtype.")
    if not D.can_cast(D._FROM_NP[src], D._FROM_NP[dst]):
        if rule == "cat":
            raise TypeError(f"torch.cat(): input types can't be cast to the desired output type "
                            f"{D.SHORT_NAMES[dst]}")
        raise RuntimeError(f"result type {D.SHORT_NAMES[src]} can't be cast to the desired output "
                           f"type {D.SHORT_NAMES[dst]}")


def call_out(rec, args, out):
    """``op(*args, out=out)`` for a record: the op's result written into ``out``."""
    name = rec.name.split(".")[0]
    if _OUT_DTYPE.get(name) == "any" and isinstance(out, Tensor):  # cumsum: computes in out's dtype
        args = tuple(out.dtype if p.name == "dtype" and a is None else a
                     for p, a in zip(rec.params, args, strict=True))
    return write_out(name, lambda: dispatch(rec, args), args, out)


def write_out(name: str, compute, args, out):
    """PyTorch's ``out=`` semantics around ``compute()`` (the functional result): no autograd,
    ``out`` resized to the result's shape (warning when it had other elements), the result cast
    to ``out``'s dtype where PyTorch allows the cast, ``out``'s version bumped; returns ``out``."""
    outs = tuple(out) if type(out) in (list, tuple) else (out,)
    for o in outs:
        if isinstance(o, Tensor):
            check_inplace(o)  # before ``out`` is resized
    if _gs.grad_enabled:
        ts = [t for a in args for t in (a if type(a) in (list, tuple) else (a,))]
        if any(isinstance(t, Tensor) and t._rg for t in ts + list(outs)):
            raise RuntimeError(
                f"{name}(): functions with out=... arguments don't support automatic "
                "differentiation, but one of the arguments requires grad.")
    res = compute()
    results = tuple(res) if type(res) is not Tensor and isinstance(res, tuple) else (res,)
    if len(outs) != len(results) or not all(isinstance(o, Tensor) for o in outs):
        raise TypeError(f"{name}(): argument 'out' must be "
                        + ("Tensor" if len(results) == 1 else f"tuple of {len(results)} Tensors"))
    rule = _OUT_DTYPE.get(name)
    for o, r in zip(outs, results, strict=True):
        src, dst = r._data, o._data
        if src.dtype != dst.dtype:
            _check_out_dtype(name, rule, src.dtype, dst.dtype)
        if dst.shape != src.shape:
            if dst.size:
                warnings.warn(
                    f"An output with one or more elements was resized since it had shape "
                    f"{list(dst.shape)}, which does not match the required output shape "
                    f"{list(src.shape)}. This behavior is deprecated, and in a future PyTorch "
                    "release outputs will not be resized unless they have zero elements. You can "
                    "explicitly reuse an out tensor t by resizing it, inplace, to zero elements "
                    "with t.resize_(0).", UserWarning, stacklevel=3)
            o._data = _backend.namespace_of(dst).empty(src.shape, dst.dtype)
        o.copy_(r)  # an op: a dispatch mode sees the write, and the version is bumped
    if len(outs) == 1 and type(out) not in (list, tuple):
        return out
    return type(res)(*outs) if hasattr(res, "_fields") else tuple(outs)


# --- backward formulas -> node class ---
def _build_backward(rec: OpRecord, vjp: dict | None, node_name: str) -> None:
    params = rec.params
    pnames = [p.name for p in params]
    diff = [i for i in rec.tensor_pos if params[i].code != T_PLAIN]
    rec.diff_pos = tuple(diff)
    rec.differentiable = bool(vjp)
    if not vjp:
        rec.node_cls = None
        rec.save_plan = rec.arg_plan = rec.vjp_plan = rec.save_need = ()
        rec.n_saved = 0
        rec.uses_needs = False
        return
    saved, args = [], []  # ("in", pos) / ("out", i);  ("raw"|"shape"|"dtype"|"device", pos)

    def source(pname: str, op: str):
        if pname == "grad":
            return "G[0]"
        if pname == "grads":
            return "G"
        if pname == "needs":
            return "N"
        if pname in rec.out_names:
            key = ("out", rec.out_names.index(pname))
            return _slot(saved, key, "S")
        if pname in pnames:
            pos = pnames.index(pname)
            if params[pos].code:
                return _slot(saved, ("in", pos), "S")
            return _slot(args, ("raw", pos), "A")
        for suffix in ("_shape", "_dtype", "_device", "_strides"):
            if pname.endswith(suffix) and pname[: -len(suffix)] in pnames:
                pos = pnames.index(pname[: -len(suffix)])
                return _slot(args, (suffix[1:], pos), "A")
        raise ValueError(f"op {rec.name}: formula for {op!r} names unknown parameter {pname!r}")

    plan = []
    for key, f in vjp.items():
        targets = key if isinstance(key, tuple) else (key,)
        for t in targets:
            if t not in pnames or t not in [pnames[i] for i in diff]:
                raise ValueError(f"op {rec.name}: vjp for {t!r}, which is not a Tensor parameter")
        srcs = [source(pn, key) for pn in inspect.signature(f).parameters]
        call = eval(f"lambda f, G, S, A, N: f({', '.join(srcs)})")  # noqa: S307 - built from names
        slots = tuple(diff.index(pnames.index(t)) for t in targets)
        plan.append((slots if isinstance(key, tuple) else slots[0], f, call, tuple(srcs)))
    rec.save_plan = tuple(saved)
    rec.arg_plan = tuple(args)
    rec.vjp_plan = tuple(plan)
    # Save a value only when a formula that reads it will run (PyTorch saves conditionally too).
    rec.save_need = tuple(
        tuple(sorted({sl for slot, _, _, srcs in plan for sl in (slot if type(slot) is tuple else (slot,))
                      if f"S[{k}]" in srcs}))
        for k in range(len(saved))
    )
    rec.n_saved = len(saved)
    rec.uses_needs = any("needs" in inspect.signature(f).parameters for _, f, _, _ in plan)
    cls = type(node_name, (OpNode,), {"__slots__": (), "_rec": rec})
    for k, (kind, pos) in enumerate(saved):
        nm = pnames[pos] if kind == "in" else rec.out_names[pos]
        setattr(cls, "_saved_" + nm, property(lambda self, k=k: self._unpack_one(k)))
        setattr(cls, "_raw_saved_" + nm, property(lambda self, k=k: RawSaved(self, k)))
    for k, (kind, pos) in enumerate(args):
        nm = pnames[pos] + ("" if kind == "raw" else "_sym_" + ("sizes" if kind == "shape" else kind)
                            if kind in ("shape", "strides") else "_" + kind)
        setattr(cls, "_saved_" + nm, property(lambda self, k=k: self._args[k]))
    rec.node_cls = cls


def _slot(lst: list, key, letter: str) -> str:
    if key not in lst:
        lst.append(key)
    return f"{letter}[{lst.index(key)}]"


class OpNode(Node):
    """Base of the generated per-op nodes; ``_rec`` (class attribute) is the op record."""

    __slots__ = ("_args",)
    _rec: OpRecord
    # {input ranks: subclass} (defop's ``extra["node_variants"]``): matmul's node is named
    # MmBackward0, MvBackward0 or DotBackward0 for the 2-D and 1-D cases PyTorch sends there.
    _variants = None

    def _unpack_one(self, k):
        saved = self._saved
        if saved is None:
            raise RuntimeError(SECOND_BACKWARD_MSG)
        s = saved[k]
        if s is None:  # not saved: no formula that reads it runs (PyTorch answers None too)
            return None
        return _unpack_list(s, self) if type(s) is list else s._unpack_saved(self)

    def apply(self, grads):
        rec = self._rec
        edges = self.next_edges
        saved = self._saved
        if saved is None:
            if rec.n_saved:
                raise RuntimeError(SECOND_BACKWARD_MSG)
            S = ()
        else:
            S = [x if x is None else x._unpack_saved(self) if type(x) is not list
                 else _unpack_list(x, self)
                 for x in saved]
        if len(grads) == 1:
            if grads[0] is None:
                return (None,) * len(edges)
        elif any(g is None for g in grads):
            if all(g is None for g in grads):
                return (None,) * len(edges)
            grads = _materialize(self, grads)
        N = tuple(e is not None for e in edges) if rec.uses_needs else None
        A = self._args
        if rec.has_list:
            return _apply_with_lists(self, rec, grads, S, A, N)
        out = [None] * len(edges)
        for slot, f, call, _ in rec.vjp_plan:
            if type(slot) is int:
                if edges[slot] is not None:
                    out[slot] = call(f, grads, S, A, N)
            else:
                if any(edges[s] is not None for s in slot):
                    res = call(f, grads, S, A, N)
                    for s, g in zip(slot, res, strict=True):
                        out[s] = g
        return out


def _unpack_list(saved, node) -> list:
    return [None if x is None else x._unpack_saved(node) for x in saved]


def _materialize(node, grads):
    """A multi-output node's missing gradients as zeros: the op ``zeros``, so a mode sees it."""
    meta, zeros = node._in_meta, OPS["zeros"]
    return tuple(
        dispatch(zeros, (meta[4 * i], D._FROM_NP[meta[4 * i + 1]], None, meta[4 * i + 2], None))
        if g is None else g
        for i, g in enumerate(grads)
    )


def _live(rec, edges, lens) -> list:
    """Per differentiable parameter, whether its gradient is wanted (any of its edges exists;
    a list parameter has one edge per tensor, ``lens`` giving each parameter's count)."""
    if not rec.has_list:
        return [e is not None for e in edges]
    live, i = [], 0
    for n in lens:
        live.append(any(e is not None for e in edges[i:i + n]))
        i += n
    return live


def _apply_with_lists(node, rec, grads, S, A, N):
    per_param = [None] * len(rec.diff_pos)
    live = _live(rec, node.next_edges, A[-1])
    for slot, f, call, _ in rec.vjp_plan:
        if not any(live[s] for s in (slot if type(slot) is tuple else (slot,))):
            continue  # no gradient wanted: its saved values were not kept either
        res = call(f, grads, S, A, N)
        if type(slot) is int:
            per_param[slot] = res
        else:
            for s, g in zip(slot, res, strict=True):
                per_param[s] = g
    out = []
    for k, pos in enumerate(rec.diff_pos):
        if rec.params[pos].code == T_TENSOR_LIST:
            n = node._args[-1][k]  # the list's length, recorded by _new_node
            g = per_param[k]
            out.extend([None] * n if g is None else g)
        else:
            out.append(per_param[k])
    return out


# --- dispatch ---
_KIND = {d.np: d.kind for d in D.ALL}
_INEXACT = D.INEXACT
_BF16, _F32 = D.BF16, np.dtype(np.float32)
_BF16_DTYPE = D.bfloat16 if D.bfloat16 is not None else object()  # never a dtype= argument


def _scalar_kind(x) -> int:
    t = type(x)
    if t is float:
        return D.FLOAT
    if t is int:
        return D.INT
    if t is bool:
        return D.BOOL
    if t is complex:
        return D.COMPLEX
    return D._scalar_dtype(x).kind


def _promote(rec, args, xs) -> None:
    """Cast the arrays in ``xs`` (in place) to the op's PyTorch result dtype."""
    first = None
    same = True
    top = -1
    for i in rec.promote_pos:
        a = xs[i]
        if type(a) is _ndarray or type(a) in _device_arrays:
            if first is None:
                first = a.dtype
            elif a.dtype is not first and a.dtype != first:
                same = False
        elif a is not None and type(a) is not list:
            k = _scalar_kind(a)
            if k > top:
                top = k
    if same and first is not None and top <= _KIND[first]:
        dt = first
    else:
        dt = D.result_type([args[i] for i in rec.promote_pos]).np
    if rec.promote == PROMOTE_FLOAT and dt not in _INEXACT:
        dt = D._default[0].np
    if not same or dt is not first:
        for i in rec.promote_pos:
            a = xs[i]
            arr = type(a) is _ndarray or type(a) in _device_arrays
            if arr and a.dtype != dt:
                xs[i] = a.astype(dt)
            elif a is not None and not arr and type(a) is not list and dt not in _INEXACT:
                if dt.kind == "b":
                    xs[i] = bool(a)
    return dt


def _unwrap(rec, args):
    """Replace tensors by arrays; return (arrays, whether any tensor requires grad, whether any
    is bfloat16: asked of an op without promotion; ``_promote``'s dtype tells for the others)."""
    xs = list(args)
    rg = bf = False
    scan = not rec.promote
    params = rec.params
    for i in rec.tensor_pos:
        a = xs[i]
        if isinstance(a, Tensor):
            if a._view is not None:
                refresh_view(a)
            xs[i] = d = a._data
            if a._rg:
                rg = True
            if scan and d.dtype is _BF16:
                bf = True
        else:
            code = params[i].code
            if code == T_TENSOR_LIST:
                lst = []
                for t in a:
                    if isinstance(t, Tensor):
                        if t._view is not None:
                            refresh_view(t)
                        lst.append(t._data)
                        if t._rg:
                            rg = True
                        if scan and t._data.dtype is _BF16:
                            bf = True
                    else:
                        lst.append(t)
                xs[i] = lst
            elif a is None:
                if code != T_OPT_TENSOR:
                    raise TypeError(f"{rec.name}(): argument '{params[i].name}' (position {i + 1}) must be Tensor, not NoneType")
            elif not rec.promote:
                if isinstance(a, (int, float, bool, complex, np.number, np.bool_)) and code:
                    xs[i] = _asarray(a)
                else:
                    raise TypeError(
                        f"{rec.name}(): argument '{params[i].name}' (position {i + 1}) must be Tensor, not {type(a).__name__}"
                    )
    return xs, rg, bf


def dispatch(rec: OpRecord, args: tuple):
    """The one dispatch point: run ``rec`` on ``args`` (a tuple in schema order)."""
    if _modes:
        mode = _handler()
        if mode is not None:
            return mode.dispatch(rec, args, _run)
    if rec.kind != "plain":
        return _SPECIAL[rec.kind](rec, args)
    out, rg = _forward(rec, rec.fwd, args)
    if rec.multi_out:
        outs = tuple(_make(o if type(o) is _ndarray else _asarray(o), None, 0, None) for o in out)
        if rg and rec.node_cls is not None and _gs.grad_enabled:
            _record(rec, args, outs)
        return outs
    if type(out) is not _ndarray:
        out = _asarray(out)
    t = _make(out, None, 0, None)
    if rg and rec.node_cls is not None and _gs.grad_enabled and out.dtype in _INEXACT:
        _record(rec, args, (t,))
    return t


class _InferenceMarker:
    """The dispatch mode inside ``inference_mode``: a tensor an op makes there is an inference
    tensor (``INFERENCE_VC`` as its version counter); a view of a normal tensor stays normal
    (it shares its base's counter), and one of a tensor requiring grad is marked as made there.
    Alone on the stack it runs the op's fast path made for inference mode, which marks as it
    goes: inference mode then costs about one ``dispatch`` call more per op than ``no_grad``."""

    __slots__ = ()

    def dispatch(self, rec, args, run):
        if not _gs.inference:  # inference_mode(False) within
            return run(rec, args)
        if len(_modes) == 1:
            fast = rec.extra.get("inference", 0) if rec.extra else None
            if fast == 0:
                fast = rec.extra["inference"] = fastpath.inference_copy(
                    rec, _run_marked, _INFERENCE, INFERENCE_VC)
            if fast is not None:
                return fast(*args)
        return _mark(rec, args, run(rec, args))


def _run_marked(rec, args):
    return _mark(rec, args, _run(rec, args))


def _mark(rec, args, out):
    for o in out if type(out) is tuple or type(out) is list else (out,):
        if isinstance(o, Tensor):
            if o._vc is None:
                if not _is_arg(o, args):  # an op may hand back an input (contiguous())
                    o._vc = INFERENCE_VC
            elif rec.kind == "view" and o._view is not None and o._view.creation == _NO_GRAD:
                o._view.creation = _INFERENCE
    return out


def _is_arg(t, args) -> bool:
    for a in args:
        if a is t or (type(a) is list or type(a) is tuple) and any(x is t for x in a):
            return True
    return False


_gm.inference_marker = _InferenceMarker()


def _forward(rec, fwd, args):
    """Unwrap, promote and run the forward on arrays; returns (result, any input requires grad)."""
    xs, rg, bf = _unwrap(rec, args)
    if rec.promote and _promote(rec, args, xs) is _BF16:  # integers, a bfloat16 default dtype
        bf = True
    if bf or rec.dtype_pos is not None and args[rec.dtype_pos] is _BF16_DTYPE:
        fwd = _via_float32(rec, fwd, args, xs)
    try:
        res = fwd(*xs)
    except ValueError:
        _check_broadcast(rec, xs)
        raise
    except TypeError:  # CuPy refuses host arrays: a device mix-up, or a 0-d host operand to move
        if not _unify_devices(rec, xs):
            raise
        res = fwd(*xs)
    if type(res) is not _ndarray and type(res) in _device_arrays:
        _unify_devices(rec, xs)  # NumPy subclasses (the stream-log device) mix without complaint
    return res, rg


def _as_f32(a):
    return a.astype(_F32) if getattr(a, "dtype", None) is _BF16 else a


def _as_bf16(a):
    return a.astype(_BF16) if getattr(a, "dtype", None) is _F32 else a


# NOTE(pytorch): a number operand of a bfloat16 op is cast to bfloat16 first (TensorIterator's
# common dtype), except by mul and div, whose CPU kernels read a scalar operand (a number or a 0-d
# tensor) as float32, and by lerp, whose weight is a Scalar argument there
_SCALAR_IN_FLOAT32 = frozenset({"mul", "div", "lerp"})


def _via_float32(rec, fwd, args, xs):
    """``fwd`` as PyTorch's CPU kernels run bfloat16: on float32 copies of the bfloat16 inputs
    (``xs`` changed in place), each float32 result rounded once to bfloat16. NumPy has few
    bfloat16 loops of its own (matmul and clip answer float32, einsum refuses it, a sum would
    accumulate in bfloat16), and no forward needs to know about it. With another floating dtype
    among the inputs (which PyTorch mostly refuses) ``fwd`` gets the arrays as they are, and so
    do random ops (PyTorch draws bfloat16 as its half types, which ``_random`` replays) and
    forwards marked ``extra={"bfloat16_native": True}`` (a constant of the dtype: nan_to_num's)."""
    if rec.extra.get("nondeterministic") or rec.extra.get("bfloat16_native"):
        return fwd
    bf = other = False
    for i in rec.tensor_pos:
        a = xs[i]
        for b in a if type(a) is list else (a,):
            d = getattr(b, "dtype", None)
            if d is _BF16:
                bf = True
            elif d in _INEXACT:
                other = True
    asked = rec.dtype_pos is not None and args[rec.dtype_pos] is _BF16_DTYPE
    if bf and other or not (bf or asked):
        return fwd  # mixed, or a bfloat16 input promoted away
    for i in rec.tensor_pos:
        a = xs[i]
        xs[i] = [_as_f32(b) for b in a] if type(a) is list else _as_f32(a)
    if bf and rec.promote:
        if (rec.outplace or rec).name.split(".")[0] not in _SCALAR_IN_FLOAT32:
            for i in rec.promote_pos:
                if type(xs[i]) is float or type(xs[i]) is int:
                    xs[i] = float(_BF16.type(xs[i]))
        elif len(rec.promote_pos) == 2:  # the other operand as it was, not cast for the result
            o = args[rec.promote_pos[1]]
            if isinstance(o, Tensor) and o._data.ndim == 0 and type(o._data) is _ndarray:
                xs[rec.promote_pos[1]] = o._data.astype(_F32)
    p = rec.dtype_pos
    if p is not None and args[p] is not None:
        if args[p] is not _BF16_DTYPE:
            return fwd  # a float32 result is what was asked for
        xs[p] = D.float32

    def run(*xs):
        res = fwd(*xs)
        if type(res) is tuple or type(res) is list:
            return type(res)(_as_bf16(o) for o in res)
        return _as_bf16(res)

    return run


def _unify_devices(rec, xs) -> bool:
    """Raise PyTorch's error when tensor arguments sit on different devices; a 0-d host array
    (a CPU scalar tensor, allowed beside device tensors as in PyTorch) moves to the device.
    Returns whether any argument is on a device."""
    if rec.extra.get("cross_device"):  # copy_: moving values between devices is its job
        return False
    found, scalars = None, []
    for i in rec.tensor_pos:
        a = xs[i]
        if type(a) is _ndarray:
            if a.ndim == 0:
                scalars.append(i)
                continue
            d = _cpu
        elif type(a) in _device_arrays:
            d = _backend.device_of(a)
        else:
            continue
        if found is None:
            found = d
        elif d != found:
            first, second = (found, d) if d.type == "cpu" else (d, found)
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{first} and {second}!"
            )
    if found is None or found.type == "cpu":
        return False
    for i in scalars:
        xs[i] = _backend.to_device(xs[i], found)
    return True


def _check_broadcast(rec, xs) -> None:
    """Raise PyTorch's error when the tensor arguments' shapes do not broadcast together."""
    shape = None
    for i in rec.tensor_pos:
        a = xs[i]
        if type(a) is not _ndarray and type(a) not in _device_arrays:
            continue
        if shape is None:
            shape = a.shape
            continue
        n = max(len(shape), a.ndim)
        s1, s2 = (1,) * (n - len(shape)) + shape, (1,) * (n - a.ndim) + a.shape
        for d in range(n - 1, -1, -1):
            if s1[d] != s2[d] and s1[d] != 1 and s2[d] != 1:
                raise RuntimeError(
                    f"The size of tensor a ({s1[d]}) must match the size of tensor b ({s2[d]}) at "
                    f"non-singleton dimension {d}"
                )
        shape = tuple(max(x, y) if x != 1 else y for x, y in zip(s1, s2))


def _run(rec, args):
    """Run ``rec`` under the modes below the one calling this (a mode's ``run``)."""
    loc = _mode_local
    depth = loc.depth
    loc.depth = depth + 1
    try:
        return dispatch(rec, args)
    finally:
        loc.depth = depth


def _new_node(rec, args, old_self=None):
    """Create the node: edges to the differentiable inputs, saved inputs and arguments.
    ``old_self(self)``: what to save for ``self`` (an in-place op's copy of it, made only if saved)."""
    cls = rec.node_cls
    if cls._variants is not None:
        cls = cls._variants.get(tuple(args[i]._data.ndim for i in rec.tensor_pos), cls)
    node = _new(cls)
    edges = []
    for i in rec.diff_pos:
        a = args[i]
        if type(a) is Tensor or isinstance(a, Tensor):
            edges.append(gradient_edge(a))
        elif type(a) in (list, tuple):
            edges.extend(gradient_edge(t) if isinstance(t, Tensor) else None for t in a)
        else:
            edges.append(None)
    node.next_edges = tuple(edges)
    node.sequence_nr = next_sequence_nr()
    node._extra = None
    saved = []
    need = rec.save_need
    lens = (tuple(len(args[i]) if rec.params[i].code == T_TENSOR_LIST else 1 for i in rec.diff_pos)
            if rec.has_list else None)
    live = _live(rec, edges, lens)
    for k, (kind, pos) in enumerate(rec.save_plan):
        if not any(live[d] for d in need[k]):  # no formula that reads it will run
            saved.append(None)
        elif kind == "in":
            a = args[pos]
            if pos == 0 and old_self is not None:
                a = old_self(a)
            if type(a) in (list, tuple):
                saved.append([None if t is None else save_input(t) for t in a])  # Tensor?[]
            elif isinstance(a, Tensor):
                saved.append(save_input(a))
            else:
                saved.append(_ScalarSaved(a))
        else:
            saved.append(None)  # outputs are saved once they exist (_attach)
    node._saved = saved
    if rec.arg_plan or rec.has_list:
        node._args = tuple(_arg_value(kind, args[pos]) for kind, pos in rec.arg_plan) + (
            (lens,) if rec.has_list else ())
    else:
        node._args = ()
    return node


_strides = fastpath.elem_strides


def _arg_value(kind, a):
    if kind == "raw":
        return a
    if kind == "shape":
        if type(a) in (list, tuple):
            return [t._data.shape if isinstance(t, Tensor) else () for t in a]
        return a._data.shape if isinstance(a, Tensor) else ()
    if kind == "device":
        return a.device if isinstance(a, Tensor) else _cpu  # a Python value is a host scalar
    if kind == "strides":
        return _strides(a._data) if isinstance(a, Tensor) else ()
    if type(a) in (list, tuple):
        return [t.dtype for t in a]
    return a.dtype if isinstance(a, Tensor) else D.result_type([a])


class _ScalarSaved:
    """A Python number passed where a formula names a Tensor parameter (weak scalar operand)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def _unpack_saved(self, node):
        return self.value


def _attach(rec, node, outs) -> None:
    """Save outputs the formulas need, set each output's grad_fn, record input metadata."""
    saved = node._saved
    live = None
    for k, (kind, pos) in enumerate(rec.save_plan):
        if kind == "out":
            if live is None:
                live = _live(rec, node.next_edges, node._args[-1] if rec.has_list else None)
            if any(live[d] for d in rec.save_need[k]):
                saved[k] = save_output(outs[pos], pos)
    node._saved = tuple(saved) if saved else ()
    meta = []
    for nr, o in enumerate(outs):
        d = o._data
        meta += (d.shape, d.dtype, None, None) if type(d) is _ndarray else _backend.meta_of(d)
        if d.dtype in _INEXACT:
            o._grad_fn = node
            o._output_nr = nr
            o._rg = True
    node._in_meta = tuple(meta)


def _record(rec, args, outs) -> None:
    node = _new_node(rec, args)
    if outs[0]._data.dtype in _COMPLEX:
        _complex_grads(rec, node)
    _attach(rec, node, outs)


# --- complex gradients: PyTorch's convention ---
# A formula is written as the plain transpose of the op's derivative (``mul``: ``grad * other``).
# For a holomorphic op PyTorch's gradient is that of the conjugate: ``conj(vjp(conj(grad)))``.
# So a node whose output is complex takes a subclass applying the formulas between two
# conjugations; ops whose formulas are PyTorch's already (anti- or non-holomorphic: conj,
# view_as_complex, polar) say so with ``extra={"complex_grad": "torch"}``.
_COMPLEX = frozenset(np.dtype(c) for c in "FD")
_COMPLEX_CLS: dict = {}


def complex_node_cls(cls):
    sub = _COMPLEX_CLS.get(cls)
    if sub is None:
        def apply(self, grads):
            conj = OPS["conj_physical"].call
            res = cls.apply(self, tuple(None if g is None else conj(g) for g in grads))
            return tuple(None if r is None else conj(r) for r in res)

        sub = _COMPLEX_CLS[cls] = type(cls.__name__, (cls,), {"__slots__": (), "apply": apply})
    return sub


def _complex_grads(rec, node) -> None:
    if not rec.extra.get("complex_grad"):
        node.__class__ = complex_node_cls(type(node))


# --- views ---
_DEFAULT, _MULTI, _NO_GRAD, _IN_CUSTOM, _INFERENCE = (
    ViewInfo.DEFAULT, ViewInfo.MULTI_OUTPUT, ViewInfo.NO_GRAD, ViewInfo.IN_CUSTOM_FUNCTION,
    ViewInfo.INFERENCE_MODE)


def _run_view(rec, args):
    xs, rg, _ = _unwrap(rec, args)
    out = rec.fwd(*xs)
    self = args[0]
    vc = self._vc
    if vc is None:
        vc = self._vc = [0]
    info = self._view
    base, chain, creation = (self, (), _DEFAULT) if info is None else (info.base, info.chain, info.creation)
    params = args[1:]
    recording = rg and _gs.grad_enabled
    if rg and not recording:
        creation = _NO_GRAD  # a view of a tensor requiring grad stays one (a leaf, no grad_fn)
    if rec.multi_out:
        outs = tuple(_make(o, None, 0, vc) for o in out)
        for i, o in enumerate(outs):
            o._view = ViewInfo(base, chain + ((rec, params, i),), vc[0],
                               _MULTI if creation == _DEFAULT else creation)
    else:
        t = _make(out, None, 0, vc)
        t._view = ViewInfo(base, chain + ((rec, params, None),), vc[0], creation)
        outs = (t,)
    if recording:
        _record(rec, args, outs)
    elif rg:
        for o in outs:
            if o._data.dtype in _INEXACT:
                o._rg = True
    return outs if rec.multi_out else outs[0]


# --- in-place ---


def _run_inplace(rec, args):
    self = args[0]
    if not isinstance(self, Tensor):
        raise TypeError(f"{rec.name}(): argument 'self' must be Tensor, not {type(self).__name__}")
    info = self._view
    if info is not None:
        refresh_view(self)
    grad_on = _gs.grad_enabled
    if grad_on:
        if info is not None and info.creation == _INFERENCE and self._rg and not _gs.inference:
            raise RuntimeError(
                "A view was created in inference mode and is being modified inplace in normal mode. "
                "Given that this use case is ambiguous and error-prone, it is forbidden. You can "
                "clarify your code by moving both the view and the inplace either both inside the "
                "inference_mode block (if you don't want the inplace to be tracked) or both outside "
                "(if you want the inplace to be tracked).")
        if info is not None and info.creation == _NO_GRAD and self._rg:
            raise RuntimeError(
                "A view was created in no_grad mode and is being modified inplace with grad mode "
                "enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You "
                "can clarify your code by moving both the view and the inplace either both inside the "
                "no_grad block (if you don't want the inplace to be tracked) or both outside (if you "
                "want the inplace to be tracked)."
            )
        if info is not None and info.creation == _MULTI and self._rg:
            fn = self._grad_fn
            raise RuntimeError(
                f"Output {info.chain[-1][2] or 0} of {_op_title(fn) if fn else 'a view op'} is a view "
                "and is being modified inplace. This view is the output of a function that returns "
                "multiple views. Such functions do not allow the output views to be modified inplace. "
                "You should replace the inplace operation by an out-of-place one."
            )
        if info is not None and info.creation == _IN_CUSTOM and self._rg:
            _custom_view_error(self)
        if self._rg and self._grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        if info is not None and info.base._rg and info.base._grad_fn is None:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    check_inplace(self)
    base_rec = rec.outplace
    res, rg = _forward(rec, base_rec.fwd, args)
    if type(res) is not _ndarray:
        res = _asarray(res)
    dst = self._data
    if res.dtype != dst.dtype and not D.can_cast(D._FROM_NP[res.dtype], D._FROM_NP[dst.dtype]):
        raise RuntimeError(
            f"result type {D.SHORT_NAMES[res.dtype]} can't be cast to the desired output type {D.SHORT_NAMES[dst.dtype]}"
        )
    if res.shape != dst.shape:
        raise RuntimeError(
            f"output with shape {list(dst.shape)} doesn't match the broadcast shape {list(res.shape)}"
        )
    if not dst.flags.writeable and any(s == 0 and n > 1 for s, n in zip(dst.strides, dst.shape)):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a single "
            "memory location. Please clone() the tensor before performing the operation.")
    recording = rg and grad_on and base_rec.node_cls is not None and dst.dtype in _INEXACT
    if recording:
        # A formula reading self needs it as it was before the write.
        node = _new_node(base_rec, args, _copy_of_self if ("in", 0) in base_rec.save_plan else None)
        if dst.dtype in _COMPLEX:
            _complex_grads(base_rec, node)
    np.copyto(dst, res, casting="unsafe")
    self._bump()
    if recording:
        old = [(t, t._grad_fn, t._output_nr) for t in ((self,) if info is None else (self, info.base))]
        if info is None:
            _attach(base_rec, node, (self,))
        else:
            _copy_slices(self, info, base_rec, node)
        for t, fn, nr in old:
            if t._meta is not None:
                move_retains_grad(t, fn, nr)  # a retain_grad follows the tensor's new grad_fn
    return self


def _copy_of_self(self):
    orig = _make(self._data.copy(), self._grad_fn, self._output_nr, None)
    orig._rg = self._rg
    return orig


def _op_title(node) -> str:
    """``UnbindBackward0`` -> ``Unbind``: how PyTorch names the op behind a node in messages."""
    return re.sub(r"Backward\d*$", "", node.name())


def _custom_view_error(t):
    """In-place on a view returned by a custom Function: its backward would be bypassed."""
    fn = t._grad_fn
    n_out = sum(1 for k in range(0, len(fn._in_meta), 4) if fn._in_meta[k] is not None)
    if n_out > 1:
        raise RuntimeError(
            f"Output {t._output_nr} of {_op_title(fn)} is a view and is being modified inplace. This "
            "view is the output of a function that returns multiple views. Such functions do not "
            "allow the output views to be modified inplace. You should replace the inplace operation "
            "by an out-of-place one."
        )
    raise RuntimeError(
        f"Output {t._output_nr} of {_op_title(fn)} is a view and is being modified inplace. This "
        "view was created inside a custom Function (or because an input was returned as-is) and the "
        "autograd logic to handle view+inplace would override the custom backward associated with "
        "the custom Function, leading to incorrect gradients. This behavior is forbidden. You can "
        "fix this by cloning the output of the custom Function."
    )


class CopySlices(Node):
    """The base's node after an in-place op on one of its views (PyTorch's CopySlices).

    Its gradient is the incoming one with the view's region replaced by what the in-place op's
    node ``fn`` gives for the view's old value; ``fn``'s other inputs pass through.
    """

    __slots__ = ("view", "fn")

    # The engine releases a node by setting ``_saved = None``; here that releases ``fn``'s values.
    _saved = property(lambda self: self.fn._saved,
                      lambda self, value: setattr(self.fn, "_saved", value))

    def apply(self, grads):
        grad = grads[0]
        result = grad.clone()
        region = self.view.replay(result)
        res = self.fn.apply((region.clone(),))
        if res[0] is None:
            region.zero_()
        else:
            region.copy_(res[0])
        return (result, *res[1:])


def _copy_slices(view, info, base_rec, fn) -> None:
    base = info.base
    cs = _new(CopySlices)
    cs.view = ViewInfo(None, info.chain, 0, _DEFAULT)
    cs.fn = fn
    cs.next_edges = (gradient_edge(base),) + fn.next_edges[1:]
    cs.sequence_nr = fn.sequence_nr
    cs._extra = None
    d = base._data
    cs._in_meta = _backend.meta_of(d)
    _attach(base_rec, fn, (view,))  # fn saves the view's new value as its result, if needed
    base._grad_fn = cs
    base._output_nr = 0
    base._rg = True
    info.version = -1  # force the view's grad_fn to be regenerated from the new base node
    refresh_view(view)


_SPECIAL = {"view": _run_view, "inplace": _run_inplace, "composite": None}
