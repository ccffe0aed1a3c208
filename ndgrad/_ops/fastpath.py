"""Per-op straight-line code for the common case of dispatch and of a node's ``apply``.

For an op whose tensor arguments are plain tensors (or weak Python scalars) of one dtype, the
generated public function unwraps, runs the forward, wraps the output and records the node in
one frame, with no loops, lists or per-call dicts. Anything unusual (a mode on the dispatch
stack, a subclass, mixed dtypes, None, lists) falls back to ``registry.dispatch``, which is the
reference behaviour; the fast path must give identical results. The chain benchmark in
``benchmarks/`` is what justifies this file (generic dispatch measured about 2x slower per op).
``print(rec.extra["fast_src"])`` shows the generated source of an op.
"""

from __future__ import annotations

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._tensor import Tensor, ViewInfo, grad_accumulator, refresh_view
from ..autograd.node import SECOND_BACKWARD_MSG, _seq
from ..autograd.saved import hooks_in_use, save_input, save_output
from ..autograd import dispatch_mode as _dm
from ..autograd.grad_mode import state as _gs

T_TENSOR = 1
_seq_next = _seq.__next__  # a C-level call; next_sequence_nr() adds a Python frame
# Floating and complex dtypes the fast paths compute in: bfloat16 is left to dispatch, which
# runs it in float32 (registry._via_float32). _INEXACT (with bfloat16): does an output get a node.
_FLOATY = frozenset(np.dtype(c) for c in "efdFD")
_INEXACT = D.INEXACT
_BF16 = D.BF16
_BOOL = np.dtype(bool)


# The generated functions' globals, so that a Tensor subclass defined in a higher layer
# (nn.Parameter) can be let onto the fast path after the ops are generated.
_ENVS: list = []
_fast_subclass = Tensor  # ``_P`` in the generated code


def allow_subclass(cls) -> None:
    """Let ``cls`` (a Tensor subclass adding no state the ops must see) take the fast paths."""
    global _fast_subclass
    _fast_subclass = cls
    for env in _ENVS:
        env["_P"] = cls


def _env(rec):
    env = {
        "_rec": rec, "_T": Tensor, "_P": _fast_subclass, "_new": object.__new__, "_nd": np.ndarray, "_asarray": _backend.adopt,
        "_refresh": refresh_view, "_acc": grad_accumulator, "_seq": _seq_next, "_gs": _gs,
        "_si": save_input, "_so": save_output, "_cpu": _backend.cpu, "_meta": _backend.meta_of, "_FLOATY": _FLOATY,
        "_INEXACT": _INEXACT, "_BF": _BF16, "_BFD": D.bfloat16,
        "_BOOL": _BOOL, "_HU": hooks_in_use, "_fwd": rec.fwd, "_Node": rec.node_cls, "_MSG": SECOND_BACKWARD_MSG,
        "_strides": elem_strides,
    }
    _ENVS.append(env)
    return env


def _eligible(rec) -> bool:
    return (rec.kind == "plain" and not rec.has_list and not rec.multi_out
            and all(rec.params[i].code == T_TENSOR for i in rec.tensor_pos) and rec.tensor_pos)


def signature(rec, env: dict):
    """The schema's Python signature (defaults bound as ``_d<i>`` in ``env``) and its names."""
    sig, names, kw = [], [], False
    for i, p in enumerate(rec.params):
        if p.kwarg_only and not kw:
            sig.append("*")
            kw = True
        if p.has_default:
            env[f"_d{i}"] = p.default
            sig.append(f"{p.name}=_d{i}")
        else:
            sig.append(p.name)
        names.append(p.name)
    if rec.extra.get("out"):  # PyTorch's ``.out`` overload: ``out`` of the public function
        # The last positional-or-keyword parameter, not keyword-only: CPython fills a missing
        # keyword-only default by a dict lookup (+20 ns per call, `a + b` microbenchmark), a
        # positional one from a tuple (+5 ns). A valid PyTorch call never reaches it by position.
        sig.insert(sig.index("*") if kw else len(sig), "out=None")
    return sig, names


def out_line(rec, names) -> list:
    """The public function's first lines when it takes ``out=``: one test of a local that is
    None on a plain call (the chain benchmark saw no change); ``registry.call_out`` does the rest."""
    if not rec.extra.get("out"):
        return []
    return ["    if out is not None:", f"        return _out(_rec, ({''.join(n + ', ' for n in names)}), out)"]


def public(rec, dispatch, scalar_saved):
    """The op's public function with an inlined fast path, or None when not eligible."""
    if _eligible(rec):
        body = _plain_body
    elif _view_eligible(rec):
        body = _view_body
    else:
        return None
    from .registry import _modes, _run, _unify_devices, call_out  # _modes: what dispatch consults

    params = rec.params
    env = _env(rec)
    env.update(_dispatch=dispatch, _modes=_modes, _Sc=scalar_saved, _unify=_unify_devices, _out=call_out,
               _handler=_dm.handler, _run=_run)
    sig, names = signature(rec, env)
    slow = f"return _dispatch(_rec, ({', '.join(names)},))"
    L = [f"def {rec.name.replace('.', '_')}({', '.join(sig)}):"] + body(rec, env, slow)
    L.append("    return t")
    src = "\n".join(L) + "\n"
    body_src = src
    src = src.replace("\n", "\n" + "".join(h + "\n" for h in out_line(rec, names)), 1)
    exec(src, env)  # noqa: S102 - generated from the op's schema
    fn = env[rec.name.replace(".", "_")]
    fn.__name__ = fn.__qualname__ = rec.name.split(".")[0]
    fn.__doc__ = rec.schema
    rec.extra["fast_src"] = src
    # The same code as seen from below every mode (no mode check; its fallbacks run the general
    # path below the modes), taking every argument positionally as a mode's ``run`` gets them:
    # a mode that only observes (the profiler) calls this to time what runs unobserved.
    direct = dict(env, _modes=(), _dispatch=_run)
    _ENVS.append(direct)
    pos = [p.name + (f"=_d{i}" if p.has_default else "") for i, p in enumerate(params)]
    direct_src = f"def {rec.name.replace('.', '_')}({', '.join(pos)}):" + body_src[body_src.index("\n"):]
    exec(direct_src, direct)  # noqa: S102
    rec.extra["direct"] = direct[rec.name.replace(".", "_")]
    rec.extra["direct_src"] = direct_src
    return fn


def inference_copy(rec, run_marked, view_creation, inference_vc):
    """The op's ``direct`` code as run inside ``inference_mode`` (made on first use there), or
    None: new outputs get ``inference_vc``, a view of a tensor requiring grad ``view_creation``,
    and the fallbacks go to ``run_marked`` (the general path, then the same marking)."""
    src = rec.extra.get("direct_src")
    if src is None:
        return None
    env = dict(_env(rec), _modes=(), _dispatch=run_marked, _NO_GRAD=view_creation, _INF=inference_vc)
    for k, v in rec.extra["direct"].__globals__.items():  # the defaults and helpers bound there
        env.setdefault(k, v)
    exec(src.replace("\n    t._vc = None\n", "\n    t._vc = _INF\n"), env)  # noqa: S102
    return env[rec.name.replace(".", "_")]


def _moded(slow: str) -> str:
    """The fallback ``slow`` (``return _dispatch(_rec, args)``) as dispatch's moded branch: the
    mode ``_h`` that handles this thread's calls now. A mode that skips itself for its own
    computations (forward AD alone) leaves none: those calls take the fast path."""
    return slow.replace("return _dispatch(_rec, ", "return _h.dispatch(_rec, ")[:-1] + ", _run)"


def _plain_body(rec, env, slow):
    """Checks, forward and node of an op with tensor (or weak scalar) arguments."""
    params = rec.params
    moded = _moded(slow)
    scalar_ok = {i for i in rec.promote_pos} if rec.promote else set()
    L = []
    # First the commonest case in few bytecodes: every tensor argument a plain Tensor, no view,
    # the promoted ones of one dtype. Anything else takes the general checks below.
    tpos = rec.tensor_pos
    tens = [i for i in rec.promote_pos if i in tpos] if rec.promote else []
    cond = " and ".join([f"type({params[i].name}) is _T" for i in tpos]
                        + [f"{params[i].name}._view is None" for i in tpos])
    L += [f"    if not _modes and {cond}:"]  # a moded call leaves at the first test
    L += [f"        x{i} = {params[i].name}._data" for i in tpos]
    L += [f"        tp{i} = _T" for i in tpos if i in scalar_ok]
    # bfloat16 (an input, or dtype=bfloat16) takes the general path, which computes it in float32:
    # ``is _BF`` tests, folded into the dtype tests already made (chain benchmark: no change).
    # The promoted tensors' test already excludes it (_FLOATY lacks it; or the walrus below).
    bf = D.BF16 is not None
    checked = tens if rec.promote == 2 or len(tens) > 1 else ()
    bf_tail = [f"x{i}.dtype is _BF" for i in tpos if i not in checked]
    if rec.dtype_pos is not None:
        bf_tail.append(f"{params[rec.dtype_pos].name} is _BFD")
    if len(tens) > 1:
        first = f"(d := x{tens[0]}.dtype) is _BF or " if bf and rec.promote == 1 else ""
        d0 = "d" if first else f"x{tens[0]}.dtype"
        same = " or ".join(f"x{i}.dtype is not {d0}" for i in tens[1:])
        L += [f"        if {first}{same}:", f"            {slow}"]
    if rec.promote == 2:
        L += [f"        if x{tens[0]}.dtype not in _FLOATY:", f"            {slow}"]
    if bf and bf_tail:
        L += [f"        if {' or '.join(bf_tail)}:", f"            {slow}"]
    L += ["    else:"]
    G = ["if _modes and (_h := _handler()) is not None:", f"    {moded}"]
    for i in tpos:
        p = params[i].name
        G += [f"tp{i} = type({p})", f"if tp{i} is _P:", f"    tp{i} = _T",  # from here on, a Tensor
              f"if tp{i} is _T:", f"    x{i} = {p}._data",
              f"    if {p}._view is not None:", f"        _refresh({p})"]
        if i in scalar_ok:
            G += [f"elif tp{i} is float or tp{i} is int:", f"    x{i} = {p}"]
        G += ["else:", f"    {slow}"]
    if rec.promote:
        tens = [i for i in rec.promote_pos]
        G.append("dt = None")
        for i in tens:
            G += [f"if tp{i} is _T:", "    if dt is None:", f"        dt = x{i}.dtype",
                  f"    elif x{i}.dtype is not dt:", f"        {slow}"]
        G += ["if dt is None:", f"    {slow}"]
        for i in tens:
            if i in scalar_ok:
                G += [f"if tp{i} is float and dt not in _FLOATY or tp{i} is int and dt is _BOOL:",
                      f"    {slow}"]
        if rec.promote == 2:
            G += ["if dt not in _FLOATY:", f"    {slow}"]
        elif bf:
            G += ["if dt is _BF:", f"    {slow}"]
    rest = [f"x{i}.dtype is _BF" for i in tpos if not rec.promote or i not in rec.promote_pos]
    if rec.dtype_pos is not None:
        rest.append(f"{params[rec.dtype_pos].name} is _BFD")
    if bf and rest:
        G += [f"if {' or '.join(rest)}:", f"    {slow}"]
    L += ["        " + g for g in G]
    fargs = [f"x{i}" if i in rec.tensor_pos else params[i].name for i in range(len(params))]
    # NumPy's errors (shapes that do not broadcast) are reworded by the reference path.
    L += ["    try:", f"        out = _fwd({', '.join(fargs)})", "    except (ValueError, TypeError):", f"        {slow}",
          "    if type(out) is not _nd:", "        out = _asarray(out)",
          "        if type(out) is not _nd:", f"            _unify(_rec, [{', '.join(fargs)}])",  # a device array
          "    t = _new(_T)", "    t._data = out", "    t._rg = False", "    t._grad_fn = None",
          "    t._output_nr = 0", "    t._vc = None", "    t._view = None", "    t._meta = None"]
    if rec.node_cls is not None:
        def is_t(i):
            return f"tp{i} is _T and " if i in scalar_ok else ""

        rg = " or ".join(f"({is_t(i)}{params[i].name}._rg)" for i in rec.diff_pos)
        # PROMOTE_FLOAT outputs are floating by construction; others may be integer (no grad).
        # The dtype test picks the node class too: a complex output's conjugates its gradients
        # (registry.complex_node_cls), at the cost of the membership test it replaces.
        if rec.promote == 2:
            L += [f"    if ({rg}) and _gs.grad_enabled:", "        _NC = _NODE_FOR[out.dtype]"]
        else:
            L += [f"    if ({rg}) and _gs.grad_enabled and (_NC := _NODE_FOR.get(out.dtype)) is not None:"]
        env["_NODE_FOR"] = _node_for(rec)
        L += _node_lines(rec, scalar_ok, env, "        ")
    return L


def _node_for(rec) -> dict:
    """dtype -> class of the node for an output of that dtype, for the fast path's one dtype test:
    the op's node class for the floating dtypes, its complex-gradient subclass for the complex
    ones (``registry.complex_node_cls``); integer and bool outputs get no node."""
    from .registry import complex_node_cls

    cls = rec.node_cls
    cplx = cls if rec.extra.get("complex_grad") else complex_node_cls(cls)
    return {d: cplx if d.kind == "c" else cls for d in _INEXACT}


def _view_eligible(rec) -> bool:
    return (rec.kind == "view" and not rec.has_list and not rec.multi_out and rec.tensor_pos == (0,)
            and rec.params[0].code == T_TENSOR)


def _view_body(rec, env, slow):
    """A single-output view of ``self``: the output shares ``self``'s version counter and
    records how it was made (``ViewInfo``), as ``registry._run_view`` does."""
    env.update(_VI=ViewInfo, _DEFAULT=ViewInfo.DEFAULT, _NO_GRAD=ViewInfo.NO_GRAD)
    params = rec.params
    moded = _moded(slow)
    p = params[0].name
    rest = [q.name for q in params[1:]]
    L = [f"    tp0 = type({p})",
         "    if _modes and (_h := _handler()) is not None:", f"        {moded}",
         "    if tp0 is not _T and tp0 is not _P:", f"        {slow}",
         f"    _vi = {p}._view",
         "    if _vi is not None:", f"        _refresh({p})",
         f"    x0 = {p}._data",
         f"    out = _fwd(x0{''.join(', ' + n for n in rest)})",
         f"    _vc = {p}._vc",
         "    if _vc is None:", f"        _vc = {p}._vc = [0]",
         "    t = _new(_T)", "    t._data = out", "    t._rg = False", "    t._grad_fn = None",
         "    t._output_nr = 0", "    t._vc = _vc", "    t._meta = None",
         f"    _st = (_rec, ({''.join(n + ', ' for n in rest)}), None)",
         "    if _vi is None:", f"        _b, _ch, _cr = {p}, (_st,), _DEFAULT",
         "    else:", "        _b, _ch, _cr = _vi.base, _vi.chain + (_st,), _vi.creation",
         f"    if {p}._rg:",
         "        if not _gs.grad_enabled:",  # a view of a tensor requiring grad made under no_grad
         "            _cr = _NO_GRAD",
         "            t._rg = out.dtype in _INEXACT"]
    if rec.node_cls is not None:
        L += ["        elif out.dtype in _INEXACT:"] + _node_lines(rec, set(), env, "            ")
    L.append("    t._view = _VI(_b, _ch, _vc[0], _cr)")
    return L


def _node_lines(rec, scalar_ok, env, ind):
    """Lines creating the op's node for output ``t`` (array ``out``) from the inputs ``x<i>``
    (``tp<i>`` their types where scalars are allowed), each line indented by ``ind``."""
    params = rec.params
    L = []
    for i in rec.diff_pos:
        p = params[i].name
        edge = (f"({p}._grad_fn, {p}._output_nr) if {p}._grad_fn is not None else "
                f"((_acc({p}), 0) if {p}._rg else None)")
        if i in scalar_ok:
            edge = f"({edge}) if tp{i} is _T else None"
        L.append(ind + f"e{i} = {edge}")
    nc = "_NC" if rec.kind == "plain" else "_Node"  # views: a complex view's node is rare
    if rec.node_cls._variants is not None:
        env["_variants"] = rec.node_cls._variants
        from .registry import complex_node_cls
        env["_cplx"] = complex_node_cls
        dims = "".join(f"x{i}.ndim, " for i in rec.tensor_pos)
        L.append(ind + f"node = _new(_variants.get(({dims}), _Node))")
        if nc == "_NC":
            L.append(ind + "if _NC is not _Node:")
            L.append(ind + "    node.__class__ = _cplx(node.__class__)")
    else:
        L.append(ind + f"node = _new({nc})")
    L += [ind + f"node.next_edges = ({''.join(f'e{i}, ' for i in rec.diff_pos)})",
          ind + "node.sequence_nr = _seq()", ind + "node._extra = None"]
    args = []
    for kind, pos in rec.arg_plan:
        p = params[pos].name
        if kind == "raw":
            args.append(p)
        elif kind == "shape":
            args.append(f"(x{pos}.shape if tp{pos} is _T else ())" if pos in scalar_ok else f"x{pos}.shape")
        elif kind == "device":
            args.append(f"{p}.device" if pos not in scalar_ok else f"({p}.device if tp{pos} is _T else _cpu)")
        elif kind == "strides":
            args.append(f"_strides(x{pos})" if pos not in scalar_ok else f"(_strides(x{pos}) if tp{pos} is _T else ())")
        else:
            args.append(f"{p}.dtype" if pos not in scalar_ok else f"({p}.dtype if tp{pos} is _T else None)")
    raw = [params[pos] for kind, pos in rec.arg_plan if kind == "raw"]
    if raw and len(raw) == len(args) and all(p.has_default for p in raw):
        # Arguments at their defaults (add's alpha=1) share one tuple: one allocation less.
        env["_args_d"] = tuple(p.default for p in raw)
        same = " and ".join(f"{p.name} is _d{params.index(p)}" for p in raw)
        L.append(ind + f"node._args = _args_d if {same} else ({''.join(a + ', ' for a in args)})")
    else:
        L.append(ind + f"node._args = ({''.join(a + ', ' for a in args)})")
    saved = []
    for k, (kind, pos) in enumerate(rec.save_plan):
        cond = " or ".join(f"e{rec.diff_pos[d]} is not None" for d in rec.save_need[k]) or "False"
        if kind == "out":
            val = "_so(t, 0)"
        elif pos in scalar_ok:
            val = f"(({_save_expr(params[pos].name)}) if tp{pos} is _T else _Sc({params[pos].name}))"
        else:
            val = f"({_save_expr(params[pos].name)})"
        # A node exists only when some edge does: a value every formula reads needs no test.
        every = len(rec.save_need[k]) == len(rec.diff_pos)
        saved.append(val if every else f"({val} if {cond} else None)")
    L.append(ind + f"node._saved = ({''.join(v + ', ' for v in saved)})")
    L += [ind + "node._in_meta = (out.shape, out.dtype, None, None) if type(out) is _nd else _meta(out)",
          ind + "t._grad_fn = node", ind + "t._rg = True"]
    return L


def elem_strides(a) -> tuple:
    """An array's strides in elements, as PyTorch's ``_saved_<name>_sym_strides``."""
    n = a.itemsize
    return tuple([s // n for s in a.strides])


def _save_expr(p: str) -> str:
    """``save_input(p)`` with the common case (version 0: saved as itself) inlined."""
    return f"{p} if {p}._vc is None and not _HU else _si({p})"


def _unpack_expr(k: str) -> str:
    """``saved[k]._unpack_saved(self)`` with the common case (a never-modified tensor) inlined."""
    return f"(u{k} if type(u{k} := saved[{k}]) is _T and u{k}._vc is None else u{k}._unpack_saved(self))"


_IDENTITY = (lambda grad: grad).__code__


def _is_identity(f) -> bool:
    c = getattr(f, "__code__", None)
    return c is not None and c.co_code == _IDENTITY.co_code and c.co_varnames == ("grad",)


def node_apply(rec):
    """A straight-line ``apply`` for single-output nodes without list arguments."""
    if rec.has_list or rec.multi_out:
        return None
    env = _env(rec)
    n = len(rec.diff_pos)
    L = ["def apply(self, grads):", "    g = grads[0]", "    if g is None:", f"        return {(None,) * n!r}",
         "    e = self.next_edges"]
    if rec.n_saved:
        L += ["    saved = self._saved", "    if saved is None:", "        raise RuntimeError(_MSG)"]
    if rec.arg_plan:
        L.append("    A = self._args")
    if rec.uses_needs:
        L.append("    N = tuple(x is not None for x in e)")
    # Each saved value is unpacked once per application (unpack hooks run once, as PyTorch's):
    # inline in the one formula that reads it, or up front when several do. It is stored only
    # when a formula reading it will run (``rec.save_need``), so None means "not needed".
    readers = [sum(f"S[{k}]" in srcs for _, _, _, srcs in rec.vjp_plan) for k in range(rec.n_saved)]
    for k in range(rec.n_saved):
        if readers[k] > 1:
            L.append(f"    s{k} = None if (u{k} := saved[{k}]) is None else "
                     f"u{k} if type(u{k}) is _T and u{k}._vc is None else u{k}._unpack_saved(self)")
    out = ["None"] * n
    for k, (slot, f, _, srcs) in enumerate(rec.vjp_plan):
        env[f"_f{k}"] = f
        args = ", ".join(
            "g" if s == "G[0]" else "grads" if s == "G" else "N" if s == "N"
            else (f"s{s[2:-1]}" if readers[int(s[2:-1])] > 1 else _unpack_expr(s[2:-1]))
            if s.startswith("S[") else s
            for s in srcs
        )
        if type(slot) is int and _is_identity(f):  # add's ``lambda grad: grad``: no call
            L.append(f"    r{slot} = g if e[{slot}] is not None else None")
            out[slot] = f"r{slot}"
        elif type(slot) is int:
            L.append(f"    r{slot} = _f{k}({args}) if e[{slot}] is not None else None")
            out[slot] = f"r{slot}"
        else:
            cond = " or ".join(f"e[{s}] is not None" for s in slot)
            names = ", ".join(f"r{s}" for s in slot)
            L += [f"    if {cond}:", f"        {names}, = _f{k}({args})", "    else:",
                  f"        {' = '.join(f'r{s}' for s in slot)} = None"]
            for s in slot:
                out[s] = f"r{s}"
    L.append(f"    return ({''.join(o + ', ' for o in out)})")
    src = "\n".join(L) + "\n"
    exec(src, env)  # noqa: S102 - generated from the op's formulas
    rec.extra["apply_src"] = src
    return env["apply"]
