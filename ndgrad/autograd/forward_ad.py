"""Forward-mode AD (``torch.autograd.forward_ad``): dual tensors and their tangents.

``enter_dual_level`` pushes ``_MODE`` on the op registry's mode stack (``exit_dual_level`` pops it,
so ops pay nothing outside a level). While its rules compute tangents the mode skips itself (alone
on the stack, by the dispatch depth: the rules' ops then run on the ops' fast paths). A tensor's
tangent lives in ``AutogradMeta.fw_grad``, valid while its ``fw_level`` is the level's token; a
view without one of its own reads the same view of its base's tangent. After each op, when an
argument has a tangent, the mode computes the outputs' tangents from the op record alone:

* with the op's JVP rule (``rec.jvp``, from ``defop(..., jvp=...)``, see ``_ops/jvp.py``):
  elementwise ops call their VJP formulas with the tangent as ``grad``, linear ones (every view
  op among them: its tangent is the same view of the tangent) run on the tangents, the rest
  have formulas of their own; an output's tangent is always memory of its own;
* an op without a rule by the transpose of its VJP: ``jvp = d/du <vjp(u), t>``, two reverse
  passes (`sin`: about 25x the cost of its rule).

Either way the formulas are ndgrad ops, so the tangent stays differentiable (reverse-over-forward
and forward-over-reverse work). In-place ops compute the new tangent from the values before the
write and copy it into the existing tangent (so views of the tangent see it), creating a zero
tangent for the base first when a view without one is written.

A first-order tangent (forward AD alone, nothing requiring grad) of a plain single-output op is
computed on arrays, by a program traced once from the op and its rule (see "first-order
tangents on arrays" below): the same arithmetic without tensors, nodes or dispatch.
"""

from __future__ import annotations

import functools
import threading
from collections import namedtuple

import numpy as np

from .. import _backend
from .._dtype import INEXACT
from .._tensor import AutogradMeta as _Meta
from .._tensor import Tensor
from . import dispatch_mode
from .grad_mode import state as _gs

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])


class _State:
    """The level is global, like PyTorch's. ``token``: a new object for each level entered; a
    tangent belongs to the level whose token its meta holds (``AutogradMeta.fw_level``), so
    leaving a level drops every tangent at once, without visiting the tensors."""

    __slots__ = ("level", "token")

    def __init__(self):
        self.level = None
        self.token = None


class _Local(threading.local):
    """``disabled``: the mode's own computations, a custom Function's forward/jvp (per thread)."""

    disabled = False


_state = _State()
_local = _Local()
_NO_FW = object()  # fw_grad marker: no tangent, and do not look through the base (unpack_dual's primal)
_make = Tensor._make
_nd = np.ndarray


# --- levels ---
def enter_dual_level() -> int:
    """Enter a new forward-AD level (only one may exist at a time); returns its index."""
    if _state.level is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _state.level = 0
    _state.token = object()
    dispatch_mode.push(_MODE)
    return 0


def exit_dual_level(*, level=None) -> None:
    """Exit the current level; every tangent set within it is dropped."""
    cur = -1 if _state.level is None else _state.level
    if level is None:
        level = cur
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    if level != cur:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that was created. This is "
            "not supported."
        )
    dispatch_mode.remove(_MODE)  # wherever it sits: a mode pushed after ours may still be active
    # The level's tangents are dropped by their token; a tensor that outlives the level keeps
    # its (now unreadable) tangent's memory until it is freed or given a new one.
    _state.token = None
    _state.level = None


class dual_level:  # noqa: N801 - PyTorch's name
    """Context manager (and decorator) for one forward-AD level."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)

        return wrapper


def _check_level(level, what: str) -> int:
    if level is None:
        return -1 if _state.level is None else _state.level
    if type(level) is not int:
        raise TypeError(f"{what}(): argument 'level' must be int, not {type(level).__name__}")
    return level


# --- the public API ---
def make_dual(tensor, tangent, *, level=None):
    """A view of ``tensor`` whose tangent is ``tangent`` (stored as is when its layout matches)."""
    level = _check_level(level, "_make_dual")
    if level < 0:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
            "enter_dual_level() first."
        )
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if level != _state.level:
        raise RuntimeError("Invalid level given to _make_dual")
    if tangent_of(tensor) is not None:
        raise RuntimeError(
            f"Making a dual Tensor based on a Tensor that already has a forward gradient at the same "
            f"level {level} is not supported."
        )
    _check_size(tensor, tangent)
    dual = _alias(tensor)
    _set(dual, tangent)
    return dual


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)``: the primal is a view of ``tensor`` without a tangent."""
    level = _check_level(level, "_unpack_dual")
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    if not isinstance(tensor, Tensor):
        raise TypeError(
            f"_unpack_dual(): argument 'dual' (position 1) must be Tensor, not {type(tensor).__name__}"
        )
    tangent = tangent_of(tensor) if _state.level is not None else None
    if tangent is not None and level != _state.level:
        raise RuntimeError("Invalid level given to _fw_primal")
    if level != _state.level:
        tangent = None
    primal = _alias(tensor)
    primal._get_meta().fw_grad = _NO_FW  # at every level: not reset by the token
    return UnpackedDualTensor(primal, tangent)


def _alias(t):
    """``t.view(t.shape)`` with the mode off (PyTorch's ``ViewBackward0`` alias)."""
    prev, _local.disabled = _local.disabled, True
    try:
        return t.view(tuple(t._data.shape))
    finally:
        _local.disabled = prev


def _check_size(t, tangent) -> None:
    if tangent._data.shape != t._data.shape:
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the original "
            f"Tensor, this is not supported. Tensor is of size {list(t._data.shape)} while the given "
            f"forward gradient is of size {list(tangent._data.shape)}."
        )


# --- tangent storage ---
def tangent_of(t):
    """``t``'s tangent at the current level: its own, else the same view of its base's."""
    m = t._meta
    if m is not None:
        g = m.fw_grad
        if g is _NO_FW:  # unpack_dual's primal, at any level
            return None
        if g is not None and m.fw_level is _state.token:
            if type(g) is _nd:  # an array program's tangent, wrapped on first read
                g = m.fw_grad = _make(g, None, 0, None)
            return g
    info = t._view
    if info is None or _state.level is None:
        return None
    bt = tangent_of(info.base) if info.base._meta is not None else None
    if bt is None:
        return None
    g = _quiet(info.replay, bt)
    _store(t, g)
    return g


def _store(t, g) -> None:
    m = t._get_meta()
    m.fw_grad = g
    m.fw_level = _state.token


def _set(t, g) -> None:
    """Attach ``g`` as ``t``'s tangent, copied to ``t``'s memory layout when it differs (views of
    the tangent must be valid wherever views of the primal are)."""
    if not _same_layout(t._data, g._data):
        buf = _make(np.empty_like(t._data, dtype=g._data.dtype), None, 0, None)
        g = _quiet(buf.copy_, g)
    _store(t, g)


def _same_layout(a, b) -> bool:
    ia, ib = a.itemsize, b.itemsize
    if ia == ib and a.strides == b.strides:
        return True
    return all(n < 2 or sa // ia == sb // ib for n, sa, sb in zip(a.shape, a.strides, b.strides))


def _quiet(fn, *args):
    """Run ``fn`` with the mode off (tangent computations are not themselves dual)."""
    prev, _local.disabled = _local.disabled, True
    try:
        return fn(*args)
    finally:
        _local.disabled = prev


# --- the rules ---
# Each op's rule sits on its record (``rec.jvp``, prepared from ``defop(..., jvp=...)`` by
# ``_ops/jvp.py``); an op without one is differentiated by transposing its VJP. The mode's
# per-op work is inlined in ``dispatch`` below: forward AD of the chain benchmark is a few Python
# calls per op on top of the op and its tangent's op (``benchmarks/forward_ad.py``).
_active = dispatch_mode.active
_dm_local = dispatch_mode._local


def _plan(rec):
    """What ``dispatch`` reads per op, cached on the record: the positions of the arguments the
    formulas differentiate (None: the mode leaves the op alone), the op's generated fast path
    (run directly when this mode is the only one entered: nothing below it to see the call)
    and the rule."""
    base = rec.outplace if rec.kind == "inplace" else rec
    if base.kind == "composite" or not base.vjp_plan:
        pos = None  # composites dispatch their parts; no formulas: no tangent
    else:
        slots = set()
        for slot, *_ in base.vjp_plan:
            slots.update(slot if type(slot) is tuple else (slot,))
        pos = tuple(base.diff_pos[s] for s in sorted(slots))
    direct, rule = rec.extra.get("direct"), base.jvp
    rec.extra.pop("fw_inline", None)  # a new plan learns its programs anew
    plan = rec.fw = (pos, direct, rule, _generate(rec, pos, direct, rule))
    return plan


def _generate(rec, pos, direct, rule, progs=None, inline=None):
    """The mode's work for one call of a plain single-output op with a rule, whose tensor
    arguments are single tensors (the pointwise ops, the products), as straight-line code;
    None when not eligible. When nothing involved requires grad (a first-order tangent, forward
    AD alone: the common case) the output and its tangent come from the op's array program for
    calls like this one (``_learn``); anything else takes the general path (``_general``).
    ``inline``: ``(key, program)``, the first program learned, whose body is inlined behind a
    test of its key (a chain repeats one key: no call, no key tuple, no lookup).
    ``rec.extra["fw_src"]`` shows the code."""
    from .._ops.registry import T_PLAIN, T_TENSOR

    params = rec.params
    if (rec.kind != "plain" or rec.multi_out or rec.has_list or rule is None or direct is None
            or not pos or any(params[i].code != T_TENSOR for i in rec.tensor_pos)):
        return None
    general = "return _general(_rec, args, run)"
    L = ["def fw(args, run):", "    if len(_active) != 1:", f"        {general}",
         f"    {''.join(f'a{i}, ' for i in range(len(params)))}= args"]
    # The program's key: each tensor argument's dtype and shape (a weak scalar's type and
    # value), each tangent's dtype, each other argument's type and value.
    key = []
    for i, p in enumerate(params):
        a = f"a{i}"
        if p.code == T_PLAIN:
            L.append(f"    x{i} = {a}")
            key += [f"type({a})", a]
            continue
        L += [f"    if type({a}) is _T and not {a}._rg and {a}._view is None and type(x{i} := {a}._data) is _nd:"]
        if i in pos:
            L += [f"        m = {a}._meta",
                  "        if m is None or (g := m.fw_grad) is None or m.fw_level is not _state.token:",
                  f"            t{i} = k{i} = None",
                  "        elif type(g) is _nd:",  # an earlier program's, not yet read
                  f"            t{i} = g", f"            k{i} = g.dtype",
                  "        elif type(g) is _T and not g._rg and g._view is None:",
                  f"            t{i} = g._data", f"            k{i} = t{i}.dtype",
                  "        else:", f"            {general}"]
        L += [f"        d{i}, s{i} = x{i}.dtype, x{i}.shape",
              f"    elif type({a}) is float or type({a}) is int:",
              f"        x{i} = {a}", f"        d{i}, s{i} = type({a}), {a}"]
        if i in pos:
            L.append(f"        t{i} = k{i} = None")
        L += ["    else:", f"        {general}"]
        key += [f"d{i}", f"s{i}"] + ([f"k{i}"] if i in pos else [])
    xs = ", ".join(f"x{i}" for i in range(len(params)))
    ts = ", ".join(f"t{i}" for i in pos)
    L += [f"    if {' and '.join(f't{i} is None' for i in pos)}:", "        return _direct(*args)"]
    env = {}
    lookup = [f"key = ({''.join(k + ', ' for k in key)})",
              "try:", "    prog = _progs.get(key, _MISS)", "except TypeError:  # an unhashable argument",
              f"    {general}",
              "if prog is None:", f"    {general}",
              "if prog is _MISS:", "    return _learn(_rec, _progs, key, args, _rule)",
              f"o, r = prog({xs}, {ts})"]
    if inline is not None:
        values, prog = inline
        tests = []
        for k, (e, v) in enumerate(zip(key, values)):
            env[f"_G{k}"] = v
            tests.append(f"{e} is None" if v is None else f"{e} is _G{k}" if isinstance(v, (type, np.dtype))
                         else f"{e} == _G{k}")
        env.update(prog.env)
        L += [f"    if {' and '.join(tests)}:"] + [f"        {x}" for x in prog.body] + ["    else:"]
        L += [f"        {x}" for x in lookup]
    else:
        L += [f"    {x}" for x in lookup]
    L += ["    out = _new(_T)", "    out._data = o", "    out._rg = False", "    out._grad_fn = None",
          "    out._output_nr = 0", "    out._vc = None", "    out._view = None",
          "    if r.strides != o.strides:", "        out._meta = None",
          "        _set(out, _make(r, None, 0, None))  # copied to the output's layout",
          "        return out",
          # The tangent stays an array until read (``tangent_of``); the meta is made inline.
          "    out._meta = m = _new(_Meta)"]
    L += [f"    m.{k} = {'r' if k == 'fw_grad' else '_state.token' if k == 'fw_level' else f'_m_{k}'}"
          for k in _Meta.__slots__]
    L.append("    return out")
    src = "\n".join(L) + "\n"
    env.update({"_T": Tensor, "_nd": np.ndarray, "_direct": direct, "_active": _active,
                "_rec": rec, "_general": _general, "_rule": rule, "_progs": {} if progs is None else progs,
                "_MISS": _MISS, "_learn": _learn, "_set": _set, "_new": object.__new__, "_Meta": _Meta,
                "_state": _state, "_make": _make})
    fresh = _Meta()
    env.update((f"_m_{k}", getattr(fresh, k)) for k in _Meta.__slots__)
    exec(src, env)  # noqa: S102 - generated from the op's schema
    rec.extra["fw_src"] = src
    rec.extra["fw_programs"] = env["_progs"]
    return env["fw"]


# --- first-order tangents on arrays ---
# A rule computes a tangent with ndgrad ops, so that it stays differentiable. When nothing
# involved requires grad (a first-order tangent: forward AD alone, the common case) the same
# computation is done on arrays: the rule is run once under a recorder, and the op calls it
# made become a straight-line program calling the ops' array forwards, the op's own first,
# cached per key (the arguments' dtypes and shapes, the tangents present, the other
# arguments' values), so that a program never outlives the control flow it was traced under.
# A rule whose calls are not all plain ops on its inputs keeps running on tensors.
_MISS = object()
_PROGRAMS_PER_OP = 64  # keys seen beyond it take the general path


class _Recorder:
    """The mode that sees a rule's op calls while it is traced: each call with its arguments
    and output; ``ok`` turns False at a call a program cannot replay on arrays."""

    __slots__ = ("calls", "ok")
    process_wide = False

    def __init__(self):
        self.calls, self.ok = [], True

    def dispatch(self, rec, args, run):
        out = run(rec, args)
        if rec.kind != "plain" or rec.multi_out or rec.has_list or rec.mutates:
            self.ok = False
        else:
            self.calls.append((rec, args, out))
        return out


_CONSTANT = frozenset({type(None), bool, int, float, complex, str})
# What a key may hold for its program to be inlined behind a test of it (tested with ``is``
# for types and dtypes, ``==`` for the rest).
_GUARDED = _CONSTANT | {type} | {type(np.dtype(c)) for c in "?bhilqBHILQefdgFDG"}


def _guardable(v) -> bool:
    return type(v) in _GUARDED or type(v) is tuple and all(type(n) is int for n in v)


def _learn(rec, progs, key, args, rule):
    """The general path for this call, tracing ``rule`` on the way: its array program is cached
    under ``key`` (None when the rule cannot be replayed on arrays)."""
    pos = _diff_positions(rec)
    out = rec.extra["direct"](*args)
    # The rule runs on stand-ins, one tensor per position (the same arrays), so that the
    # program reads each argument from its own position even where this call passes one
    # tensor twice (``x * x``) and a later call with the same key does not.
    sargs = tuple(_make(a._data, None, 0, None) if isinstance(a, Tensor) else a for a in args)
    stans = [None if i not in pos or not isinstance(a, Tensor) or (g := tangent_of(a)) is None
             else _make(g._data, None, 0, None) for i, a in enumerate(args)]
    sout = _make(out._data, None, 0, None)
    rc = _Recorder()
    dm = _dm_local
    depth = dm.depth
    dm.depth = depth + 1  # past this mode, onto the recorder
    dispatch_mode.push(rc)
    try:
        res = rule(sargs, stans, (sout,))
    finally:
        dispatch_mode.remove(rc)
        dm.depth = depth
    if len(progs) < _PROGRAMS_PER_OP:
        prog = progs[key] = _compile_program(rec, rc, sargs, stans, sout, res) if rc.ok else None
        if prog is not None and "fw_inline" not in rec.extra and all(map(_guardable, key)):
            rec.extra["fw_inline"] = key
            pos, direct, rule, _ = rec.fw
            rec.fw = (pos, direct, rule, _generate(rec, pos, direct, rule, progs, (key, prog)))
    if out._data.dtype in INEXACT:
        _set(out, _zeros(out) if res is None else _fit(res, out, [*stans, *sargs, sout]))
    return out


def _compile_program(rec, rc, args, tans, out, res):
    """``prog(*arrays, *tangents)`` -> the output's array and its tangent's, from the op's
    forward and the recorded calls; None when a call reads a tensor that is not an input,
    tangent, output or earlier result, or takes an argument that is not a plain constant, or
    when the replay differs from what the op and the rule computed."""
    if out._data.dtype not in INEXACT or res is None:
        return None
    pos = _diff_positions(rec)
    names, env = {}, {"_qf": rec.fwd}  # names unused by ``_generate``'s code, which may inline it
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            names[id(a)] = f"x{i}"
    for i in pos:
        if tans[i] is not None:
            names[id(tans[i])] = f"t{i}"
    names[id(out)] = "o"
    xs = [f"x{i}" for i in range(len(args))]
    body = [f"o = _qf({', '.join(xs)})"]
    for k, (r, cargs, cout) in enumerate(rc.calls):
        parts = []
        for j, a in enumerate(cargs):
            if isinstance(a, Tensor):
                if id(a) not in names:
                    return None
                parts.append(names[id(a)])
            elif type(a) in _CONSTANT:
                env[f"_qc{k}_{j}"] = a
                parts.append(f"_qc{k}_{j}")
            else:
                return None  # a shape, a list: traced values a later call may not share
        env[f"_qf{k}"] = r.fwd
        body.append(f"_q{k} = _qf{k}({', '.join(parts)})")
        names[id(cout)] = f"_q{k}"
    ret = names.get(id(res))
    if ret is None:
        return None
    if not ret.startswith("_q"):
        ret += ".copy()"  # an input's tangent given back: the output's is memory of its own
    body.append(f"r = {ret}")
    src = (f"def prog({', '.join(xs + [f't{i}' for i in pos])}):\n"
           + "".join(f"    {x}\n" for x in body) + "    return o, r\n")
    run_env = dict(env)
    exec(src, run_env)  # noqa: S102 - generated from the recorded calls
    prog = run_env["prog"]
    arrays = [a._data if isinstance(a, Tensor) else a for a in args]
    try:
        o, r = prog(*arrays, *[None if tans[i] is None else tans[i]._data for i in pos])
    except Exception:  # noqa: BLE001 - a forward that needs what dispatch adds (promotion)
        return None
    for got, want in ((o, out._data), (r, res._data)):
        if (type(got) is not np.ndarray or got.dtype != want.dtype or got.shape != want.shape
                or not np.array_equal(got, want, equal_nan=True)):
            return None
    if r.shape != o.shape or r.dtype != o.dtype:
        return None
    prog.src, prog.body, prog.env = src, body, env
    return prog


def _diff_positions(rec):
    return (rec.fw or _plan(rec))[0]


def _list_tangents(a):
    g = [tangent_of(x) if isinstance(x, Tensor) else None for x in a]
    return None if all(x is None for x in g) else g


def _floating(o) -> bool:
    return isinstance(o, Tensor) and o._data.dtype in INEXACT


def _zeros(t):
    return _make(np.zeros_like(t._data), None, 0, None)


def compute(rec, args, tans, outs):
    """Tangents of ``rec``'s outputs ``outs`` (one per output; None: no tangent) from the
    arguments' tangents ``tans`` (by position; a list for a ``Tensor[]``)."""
    rule = rec.jvp
    if rule is None:
        return _transpose(rec, args, tans)
    prev, _local.disabled = _local.disabled, True
    try:
        res = rule(args, tans, outs)
    finally:
        _local.disabled = prev
    return res if rec.multi_out else (res,)


def _fit(g, o, tans):
    """``g`` as ``o``'s tangent: ``o``'s shape and dtype, in memory of its own (a rule may give
    an input's tangent back, as ``lambda grad: grad`` does, or a broadcastable one)."""
    d, od = g._data, o._data
    if d.shape == od.shape and d.dtype == od.dtype:
        for t in tans:
            if g is t:
                break
        else:
            return g
    if not g._rg:  # no graph to keep: the array copy a clone would make, without the dispatch
        if d.shape != od.shape:
            d = _backend.namespace_of(d).broadcast_to(d, od.shape)
        return _make(d.astype(od.dtype), None, 0, None)  # astype copies
    if d.shape != od.shape:
        g = _quiet(g.expand, od.shape)
    return _quiet(g.to, o.dtype) if d.dtype != od.dtype else _quiet(g.clone)  # both copy


def _transpose(rec, args, tans):
    """``d/du <vjp(u), t>``: the transpose of the op's VJP applied to the tangents, computed with
    grad mode on; the tangent is kept differentiable only where a primal or tangent it came from
    is."""
    found = {}  # id -> (tensor, tangent): a tensor passed twice (x * x) is one input
    for a, g in zip(args, tans):
        if g is None:
            continue
        if type(a) in (list, tuple):
            found.update((id(x), (x, gx)) for x, gx in zip(a, g) if gx is not None)
        else:
            found[id(a)] = (a, g)
    prev_grad = _gs.grad_enabled
    prev, _local.disabled = _local.disabled, True
    _gs.grad_enabled = True
    try:
        res = _jvp_transpose(rec, args, found)
    finally:
        _local.disabled = prev
        _gs.grad_enabled = prev_grad
    keep = prev_grad and (any(x._rg or g._rg for x, g in found.values()) or _any_rg(rec, args))
    if not keep:
        res = [r.detach() if isinstance(r, Tensor) and r._rg else r for r in res]
    return res


def _jvp_transpose(rec, args, found):
    from .._ops.registry import OPS, dispatch
    from .api import grad

    # Each input with a tangent gets its own graph root: a detached alias requiring grad, or,
    # when it requires grad already, an alias node on top of it (so the tangent stays
    # differentiable through it, and the gradient of one input does not include paths through
    # another that is a view of it, as in ``x @ x.t()``).
    subs = {}
    alias = OPS["alias"].call

    def sub(x):
        if not isinstance(x, Tensor) or id(x) not in found:
            return x
        s = subs.get(id(x))
        if s is None:
            s = subs[id(x)] = alias(x) if x._rg else x.detach().requires_grad_()
        return s

    new = list(args)
    for i in _diff_positions(rec):
        a = args[i]
        new[i] = type(a)(sub(x) for x in a) if type(a) in (list, tuple) else sub(a)
    outs = dispatch(rec, tuple(new))
    outs = tuple(outs) if rec.multi_out else (outs,)
    fl = [k for k, o in enumerate(outs) if _floating(o) and o._rg]
    zeros = [_zeros(o) if _floating(o) else None for o in outs]
    if not fl:
        return zeros
    us = [zeros[k].detach().requires_grad_() for k in fl]
    xs = [(sub(x), g) for x, g in found.values()]
    vjps = grad([outs[k] for k in fl], [x for x, _ in xs], us, create_graph=True, allow_unused=True)
    s = None
    for v, (_, g) in zip(vjps, xs):
        if v is not None:
            term = (v * g).sum()
            s = term if s is None else s + term
    if s is None or not s._rg:
        return zeros
    jv = grad(s, us, create_graph=True, allow_unused=True)
    res = list(zeros)
    for k, g in zip(fl, jv):
        if g is not None:
            res[k] = g
    return res


def _any_rg(rec, args) -> bool:
    for i in rec.tensor_pos:
        a = args[i]
        for x in (a if type(a) in (list, tuple) else (a,)):
            if isinstance(x, Tensor) and x._rg:
                return True
    return False


def _write_inplace(self, new) -> None:
    """``self`` was written in place: its tangent becomes ``new`` (copied into the old one)."""
    cur = tangent_of(self)
    if cur is None:
        m = self._meta
        info = self._view
        if info is not None and (m is None or m.fw_grad is not _NO_FW):
            base = info.base
            _store(base, _make(np.zeros_like(base._data), None, 0, None))
            cur = tangent_of(self)
        else:
            _set(self, new)
            return
    _quiet(cur.copy_, new)


def _keep_saved_outputs(rec, outs) -> None:
    """A saved output is rebuilt from its array on unpack (no reference to it, so no cycle
    through its node), which would drop its tangent and break forward-over-reverse through
    formulas reading ``result``: the saved entry is wrapped with the tangent, as PyTorch's
    saved variables keep their forward grad."""
    if rec.kind != "plain" or not rec.save_plan:
        return
    node = outs[0]._grad_fn if isinstance(outs[0], Tensor) else None
    if node is None or type(node) is not rec.node_cls or not node._saved:
        return
    saved = list(node._saved)
    for k, (kind, pos) in enumerate(rec.save_plan):
        if kind == "out" and saved[k] is not None:
            g = tangent_of(outs[pos])
            if g is not None:
                saved[k] = _SavedWithTangent(saved[k], g)
    node._saved = tuple(saved)


class _SavedWithTangent:
    """A saved output and its tangent; unpacked inside the same dual level, the rebuilt tensor
    gets the tangent back."""

    __slots__ = ("saved", "tangent", "level")

    def __init__(self, saved, tangent):
        self.saved, self.tangent, self.level = saved, tangent, _state.token

    def _unpack_saved(self, node):
        t = self.saved._unpack_saved(node)
        if self.level is not None and _state.token is self.level and tangent_of(t) is None:
            _store(t, self.tangent)
        return t

    def __getattr__(self, name):  # what else reads a saved entry (RawSaved) sees the inner one
        return getattr(self.saved, name)


class _ForwardADMode(dispatch_mode.TorchDispatchMode):
    """The dispatch mode installed while a dual level is active."""

    process_wide = True  # dual levels are global in PyTorch

    def dispatch(self, rec, args, run):
        loc = _local
        if loc.disabled:  # the mode's own computations
            if len(_active) == 1:
                direct = rec.extra.get("direct")
                if direct is not None:
                    return direct(*args)
            return run(rec, args)
        fast = (rec.fw or _plan(rec))[3]
        if fast is not None:
            return fast(args, run)
        return _general(rec, args, run)


def _general(rec, args, run):
    """The mode's work for one op call: the tangents of the arguments, the op, then its
    outputs' tangents (by the rule, or by transposing the VJP)."""
    pos, direct, rule, _ = rec.fw
    if pos is None:
        return run(rec, args)
    tans = None
    for i in pos:
        a = args[i]
        if isinstance(a, Tensor):
            m = a._meta
            if m is not None and type(g := m.fw_grad) is Tensor and m.fw_level is _state.token:
                pass  # its own tangent: the common case, without a call
            elif m is None and a._view is None:
                continue  # a constant
            else:
                g = tangent_of(a)
        elif type(a) is list or type(a) is tuple:
            g = _list_tangents(a)
        else:
            continue
        if g is not None:
            if tans is None:
                tans = [None] * len(args)
            tans[i] = g
    if rec.kind == "inplace":
        return _inplace(rec, rec.outplace, args, tans, run)
    out = direct(*args) if direct is not None and len(_active) == 1 else run(rec, args)
    if tans is None:
        return out
    if rule is not None and not rec.multi_out:
        return _finish(rec, args, tans, out, rule)
    outs = out if rec.multi_out else (out,)
    res = _transpose(rec, args, tans) if rule is None else _apply(rule, args, tans, outs)
    view = rec.kind == "view"
    for o, g in zip(outs, res):
        if isinstance(o, Tensor) and o._data.dtype in INEXACT:
            if view:
                _store(o, g)  # the same view of the tangent
            else:
                _set(o, _zeros(o) if g is None else _fit(g, o, tans))
    if outs[0]._grad_fn is not None:
        _keep_saved_outputs(rec, outs)
    return out


def _apply(rule, args, tans, outs):
    """``rule(args, tans, outs)`` with the mode out of the way of the rule's own ops: alone, it
    is skipped (by the dispatch depth; the ops then take their fast paths); else each op reaches
    it, to go on to the modes below."""
    if len(_active) == 1:
        dm = _dm_local
        depth = dm.depth
        dm.depth = depth + 1
        try:
            return rule(args, tans, outs)
        finally:
            dm.depth = depth
    loc = _local
    loc.disabled = True
    try:
        return rule(args, tans, outs)
    finally:
        loc.disabled = False


def _finish(rec, args, tans, out, rule):
    """Give ``out``, the one output of ``rec``, its tangent from ``rule``; returns ``out``. The
    common cases of ``_fit`` and ``_store`` inlined."""
    od = out._data
    if od.dtype not in INEXACT:
        return out
    res = _apply(rule, args, tans, (out,))
    if res is None:  # no term: a zero tangent, as the output is dual
        res = _zeros(out)
    d = res._data
    if d.shape == od.shape and d.dtype is od.dtype:
        for t in tans:
            if t is res:  # an input's tangent given back (``lambda grad: grad``)
                if not res._rg:  # a copy of its own; a clone's graph is not needed
                    res = _make(d.copy(), None, 0, None)
                    d = res._data
                break
        if d.strides == od.strides and res is not t:
            m = out._meta
            if m is None:
                m = out._meta = _Meta()
            m.fw_grad = res
            m.fw_level = _state.token
            if out._grad_fn is not None:
                _keep_saved_outputs(rec, (out,))
            return out
    _set(out, _fit(res, out, tans))
    if out._grad_fn is not None:
        _keep_saved_outputs(rec, (out,))
    return out


def _inplace(rec, base, args, tans, run):
    """An in-place op: the new tangent is the out-of-place op's, from the values before the
    write (a clone keeps them for the graph), copied into the existing tangent."""
    self = args[0]
    if tans is None:
        out = run(rec, args)
        if tangent_of(self) is not None:  # overwritten by values without tangent
            _write_inplace(out, _zeros(out))
        return out
    if not _floating(self):
        return run(rec, args)
    cargs = (_quiet(self.clone),) + tuple(args[1:])
    rule = base.jvp
    res = (run(base, cargs),) if rule is not None and rule.reads_out else None
    new = compute(base, cargs, tans, res)[0]
    out = run(rec, args)
    _write_inplace(out, _zeros(out) if new is None else _fit(new, out, tans))
    return out


_MODE = _ForwardADMode()


# --- custom Functions (called by autograd.function._apply) ---
def active() -> bool:
    return _state.level is not None and not _local.disabled


def function_jvp(cls, ctx, args, is_tensor, tangents, outputs) -> None:
    """Call ``cls.jvp`` with the inputs' tangents (zeros for tensors without one) and attach
    what it returns to the outputs."""
    grads = tuple(
        (g if g is not None else _make(np.zeros_like(a._data), None, 0, None)) if t else None
        for a, t, g in zip(args, is_tensor, tangents)
    )
    saved = ctx.__dict__.pop("saved_for_forward", ())
    prev_saved = ctx._saved
    ctx._saved = tuple(saved)
    prev, _local.disabled = _local.disabled, True
    try:
        res = cls.jvp(ctx, *grads)
    finally:
        _local.disabled = prev
        ctx._saved = prev_saved
    res = res if type(res) is tuple else (res,)
    if len(res) != len(outputs):
        raise RuntimeError(
            f"Function's jvp returned an invalid number of forward gradients (expected "
            f"{len(outputs)} but got {len(res)})"
        )
    for o, g in zip(outputs, res):
        if _floating(o) and isinstance(g, Tensor):
            _check_size(o, g)
            _set(o, g)
