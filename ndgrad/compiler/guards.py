"""Guards (issue 15, item 3): the facts a captured graph assumed, checked by generated code
before a cache entry is reused. ``GuardSet.check(args, kwargs)`` is straight-line Python built
from the call the capture ran on (tensor type, shape, strides, dtype, device, requires_grad and
aliasing; scalars, strings and None by value; modules by identity, ``training`` and their
parameters and buffers; grad mode, default dtype, saved-tensor hooks, dispatch modes).
``GuardSet.failure`` gives the first failed guard in PyTorch's wording; it runs only on a miss.
"""

from __future__ import annotations

import inspect
import itertools

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd import dispatch_mode as _dm
from ..autograd import saved as _saved
from ..autograd.grad_mode import state as _grad_state
from ..nn.modules.module import Module

__all__ = ["GuardSet", "argument_names"]

_SCALARS = (int, float, bool, str, type(None), complex)
_keys = itertools.count()

# PyTorch's ScalarType names, used in its dtype-mismatch messages
_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
                 "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                 "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def _scalar_name(dt) -> str:
    s = str(dt).replace("ndgrad.", "")
    return _SCALAR_NAMES.get(s, s)


def argument_names(fn, args, kwargs) -> list:
    """The names guards and messages use for ``args`` (the parameter they bind to; the items of
    ``*a`` are ``a_0``, ...) and for each keyword (its own name)."""
    target = fn.forward if isinstance(fn, Module) else fn
    names = [f"arg{i}" for i in range(len(args))]
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return names
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    for i in range(len(args)):
        if i < len(pos):
            names[i] = pos[i].name
        elif var is not None:
            names[i] = f"{var}_{i - len(pos)}"
    return names


def _storage(t):
    d = t if type(t) is not Tensor and hasattr(t, "base") else t._data
    b = d.base
    return d if b is None else b


def _tensor_failure(name: str, t, expected) -> str:
    """The first way ``t`` differs from the tensor the capture saw, as PyTorch words it."""
    typ, shape, strides, npdtype, rg, atype, dtype = expected
    if type(t) is not typ:
        return f"expected type of '{name}' to be a tensor type, ' but found {type(t)}" \
            if not isinstance(t, Tensor) else \
            f"tensor '{name}' type mismatch. expected {typ.__name__}, actual {type(t).__name__}"
    d = t._data
    if type(d) is not atype:
        return f"tensor '{name}' device mismatch. expected {atype.__module__}, actual {t.device}"
    if d.dtype != npdtype:
        return (f"tensor '{name}' dtype mismatch. expected {_scalar_name(dtype)}, "
                f"actual {_scalar_name(t.dtype)}")
    if t.requires_grad is not rg:
        return f"tensor '{name}' requires_grad mismatch. expected requires_grad={int(rg)}"
    if len(d.shape) != len(shape):
        return f"tensor '{name}' rank mismatch. expected {len(shape)}, actual {len(d.shape)}"
    for i, (e, a) in enumerate(zip(shape, d.shape)):
        if e != a:
            return f"tensor '{name}' size mismatch at index {i}. expected {e}, actual {a}"
    item = d.itemsize
    for i, (e, a) in enumerate(zip(strides, d.strides)):
        if e != a:
            return (f"tensor '{name}' stride mismatch at index {i}. expected {e // item}, "
                    f"actual {a // item}")
    return f"tensor '{name}' changed"


class _Dyn(str):
    """A failure message computed when the guard fails (an expression), not a fixed string."""


class _Builder:
    """Collects guard steps: (setup lines, condition, failure expression, description)."""

    def __init__(self):
        self.steps: list = []
        self.consts: dict = {}
        self.tensors: list = []  # (expression of the local, name, storage at capture)
        self.n = 0

    def const(self, value) -> str:
        name = f"_c{len(self.consts)}"
        self.consts[name] = value
        return name

    def local(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def step(self, setup, cond, why, desc=None):
        self.steps.append((setup, cond, why, desc))

    # --- values ---
    def value(self, expr: str, name: str, v, depth=0) -> None:
        if isinstance(v, Tensor):
            self.tensor(expr, name, v)
        elif type(v) in _SCALARS:
            c = self.const(v)
            self.step([], f"type({expr}) is {self.const(type(v))} and {expr} == {c}",
                      f"{name} == {v!r}", f"{name} == {v!r}")
        elif isinstance(v, Module):
            c = self.const(v)
            self.step([], f"{expr} is {c}", f"{name} is the module it was (identity)",
                      f"ID_MATCH {name}")
            self.module(c, name, v)
        elif type(v) in (tuple, list) and depth < 4:
            loc = self.local()
            self.step([f"{loc} = {expr}"],
                      f"type({loc}) is {self.const(type(v))} and len({loc}) == {len(v)}",
                      f"len({name}) == {len(v)}", f"TYPE_MATCH/LEN {name}")
            for i, item in enumerate(v):
                self.value(f"{loc}[{i}]", f"{name}[{i}]", item, depth + 1)
        elif type(v) is dict and depth < 4 and all(type(k) is str for k in v):
            loc = self.local()
            self.step([f"{loc} = {expr}"],
                      f"type({loc}) is dict and {loc}.keys() == {self.const(v.keys())}",
                      f"{name}.keys() == {sorted(v)}", f"DICT_KEYS {name}")
            for k, item in v.items():
                self.value(f"{loc}[{k!r}]", f"{name}[{k!r}]", item, depth + 1)
        elif callable(v) and type(v).__name__ in ("function", "builtin_function_or_method"):
            self.step([], f"{expr} is {self.const(v)}", f"{name} is not the function it was",
                      f"ID_MATCH {name}")
        else:  # other objects: by identity, as the graph may have read any of their fields
            self.step([], f"{expr} is {self.const(v)}", f"{name} is not the object it was",
                      f"ID_MATCH {name}")

    def tensor(self, expr: str, name: str, t) -> None:
        x, d = self.local(), self.local()
        d_ = t._data
        exp = (type(t), tuple(d_.shape), tuple(d_.strides), d_.dtype, t.requires_grad,
               type(d_), t.dtype)
        e = self.const(exp)
        cond = (f"type({x}) is {self.const(exp[0])} and type({d} := {x}._data) is "
                f"{self.const(exp[5])} and {d}.shape == {self.const(exp[1])} and {d}.strides == "
                f"{self.const(exp[2])} and {d}.dtype == {self.const(exp[3])} and "
                f"({x}._rg if {x}._view is None else {x}.requires_grad) is {exp[4]}")
        self.step([f"{x} = {expr}"], cond, _Dyn(f"_tensor_failure({name!r}, {x}, {e})"),
                  f"TENSOR_MATCH {name}: {short(t)}")
        self.tensors.append((d, name, _storage(t)))

    def module(self, c: str, name: str, m: Module) -> None:
        """``training`` of ``m`` and its submodules; identity and shape of their parameters,
        buffers and tensor attributes."""
        for sub_name, sub in m.named_modules():
            full = f"{name}.{sub_name}" if sub_name else name
            sc = c if sub is m else self.const(sub)
            ms = self.local()
            self.step([f"{ms} = {sc}.__dict__"], f"{ms}['training'] is {sub.training}",
                      f"{full}.training == {sub.training}", f"{full}.training == {sub.training}")
            for kind in ("_parameters", "_buffers"):
                for pname, p in sub.__dict__[kind].items():
                    pc = self.const(p)
                    shape = tuple(p._data.shape) if p is not None else None
                    cond = f"{ms}[{kind!r}].get({pname!r}) is {pc}"
                    if p is not None:  # .to()/.requires_grad_() change these in place
                        cond += (f" and {pc}._data.shape == {self.const(shape)} and "
                                 f"{pc}._data.dtype == {self.const(p._data.dtype)} and "
                                 f"{pc}._rg is {p._rg}")
                    self.step([], cond, f"{full}.{pname} was replaced, resized, cast or (un)frozen",
                              f"ID_MATCH {full}.{pname} {shape}")
            for aname, v in vars(sub).items():
                if isinstance(v, Tensor):
                    self.step([], f"{ms}.get({aname!r}) is {self.const(v)}",
                              f"{full}.{aname} was replaced", f"ID_MATCH {full}.{aname}")

    def aliasing(self) -> None:
        """Inputs that shared memory at capture share it now, and no others."""
        if len(self.tensors) < 2:
            return
        groups: dict = {}
        for x, name, st in self.tensors:
            groups.setdefault(id(st), []).append(x)
        conds = []
        for xs in groups.values():
            conds += [f"_storage({a}) is _storage({xs[0]})" for a in xs[1:]]
        reps = ", ".join(f"id({d}) if {d}.base is None else id({d}.base)"
                         for d in (xs[0] for xs in groups.values()))
        conds.append(f"len({{{reps}}}) == {len(groups)}")
        self.step([], " and ".join(conds), "the aliasing between tensor inputs changed",
                  "NO_ALIASING/ALIASING between tensor inputs")

    def global_state(self) -> None:
        g = _grad_state
        self.step([], f"_gs.grad_enabled is {g.grad_enabled} and _gs.inference is {g.inference}",
                  _Dyn("f'GLOBAL_STATE changed: grad_mode (expected {_ge}, actual "
                       "{_gs.grad_enabled})'"), f"GLOBAL_STATE grad_mode={g.grad_enabled}")
        self.step([], f"_dd[0] is {self.const(D.get_default_dtype())}",
                  "GLOBAL_STATE changed: default_dtype", "GLOBAL_STATE default_dtype")
        hooks = list(_saved._hooks.stack)
        self.step([], f"_hk.stack == {self.const(hooks)}",
                  "GLOBAL_STATE changed: saved tensor hooks", "GLOBAL_STATE saved_tensors_hooks")
        modes = tuple(type(m) for m in _dm.current_stack())
        cond = "not _dm.active" if not modes else \
            f"tuple(map(type, _dm.current_stack())) == {self.const(modes)}"
        self.step([], cond, "GLOBAL_STATE changed: dispatch modes",
                  f"GLOBAL_STATE dispatch modes {[m.__name__ for m in modes]}")


def short(t) -> str:
    from .node import TensorMeta, short_type

    return short_type(TensorMeta.of(t))


class GuardSet:
    """The guards of one cache entry. ``check(args, kwargs) -> bool`` is generated code;
    ``failure(args, kwargs)`` names the first guard that fails; ``guards`` describes each."""

    def __init__(self, fn, args, kwargs, root: Module | None = None):
        b = _Builder()
        names = argument_names(fn, args, kwargs)
        kw_keys = tuple(kwargs)
        kw_cond = f"tuple(kw) == {b.const(kw_keys)}" if kw_keys else "not kw"
        b.step([], f"len(a) == {len(args)} and {kw_cond}",
               f"len(args) == {len(args)} and kwargs == {list(kw_keys)}",
               f"{len(args)} positional arguments, keywords {list(kw_keys)}")
        for i, (name, v) in enumerate(zip(names, args)):
            b.value(f"a[{i}]", name, v)
        for k, v in kwargs.items():
            b.value(f"kw[{k!r}]", k, v)
        if root is not None:
            b.module(b.const(root), "self", root)
        self._closure(b, fn)
        b.aliasing()
        b.global_state()
        self.guards = [s[3] for s in b.steps if s[3] is not None]
        self.check, self.failure, self.code = self._generate(b)

    @staticmethod
    def _closure(b: _Builder, fn) -> None:
        """Modules (identity and state) and scalars (value) the function reads from its
        closure cells and globals."""
        code = getattr(fn, "__code__", None)
        if code is None:
            return
        cells = getattr(fn, "__closure__", None) or ()
        for i, (name, cell) in enumerate(zip(code.co_freevars, cells)):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if isinstance(v, Module) or type(v) in _SCALARS:
                b.value(f"{b.const(cell)}.cell_contents", name, v)
        glb = getattr(fn, "__globals__", None)
        if glb is None:
            return
        gc = b.const(glb)
        for name in dict.fromkeys(code.co_names):
            if name in glb:
                v = glb[name]
                if isinstance(v, Module) or (type(v) in _SCALARS and not name.isupper()
                                             and not name.startswith("__")):
                    b.value(f"{gc}.get({name!r})", f"G[{name!r}]", v)

    @staticmethod
    def _generate(b: _Builder):
        check = ["def check(a, kw):"]
        why = ["def failure(a, kw):"]
        for setup, cond, reason, _ in b.steps:
            for line in setup:
                check.append(f"    {line}")
                why.append(f"    {line}")
            check.append(f"    if not ({cond}):\n        return False")
            r = reason if isinstance(reason, _Dyn) else b.const(reason)
            why.append(f"    if not ({cond}):\n        return {r}")
        check.append("    return True")
        why.append("    return None")
        src = "\n".join(check) + "\n\n\n" + "\n".join(why) + "\n"
        env = dict(b.consts, _Tensor=Tensor, _storage=_storage, _tensor_failure=_tensor_failure,
                   _gs=_grad_state, _dd=D._default, _hk=_saved._hooks, _dm=_dm,
                   _ge=_grad_state.grad_enabled)
        key = f"<guards>.{next(_keys)}"
        exec(compile(src, key, "exec"), env)  # noqa: S102 - generated from the capture's inputs
        return env["check"], env["failure"], src
