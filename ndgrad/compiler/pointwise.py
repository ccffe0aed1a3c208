"""Pointwise ops as small expression trees, for the ``inductor`` code generator: one definition per
op gives both its NumPy form (ufunc calls writing into reused buffers) and its C form (an
expression inside a fused loop).

A tree is a tuple ``(op, *operands)``; an operand is a tree, a ``Leaf`` (a tensor argument of the
graph node) or a Python number. ``lower(rec, args)`` returns the tree of one graph node, or None
when the op (or this use of it, e.g. ``div`` with a rounding mode) has no pointwise form.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["Leaf", "lower", "leaves", "c_expr", "numpy_lines", "BOOL_OPS"]


class Leaf:
    """A tensor argument of the node being lowered: ``index`` is its position in ``node.args``'s
    flattened tensor arguments (the code generator maps it to a variable)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value  # the graph Node

    def __repr__(self):
        return f"Leaf({self.value})"


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _scaled(b, alpha):
    return b if alpha == 1 else ("mul", b, alpha)


def _gelu(x, approximate):
    if approximate == "tanh":
        u = ("mul", _SQRT_2_OVER_PI, ("add", x, ("mul", _GELU_A, ("mul", x, ("mul", x, x)))))
        return ("mul", ("mul", 0.5, x), ("add", 1.0, ("tanh", u)))
    return ("mul", ("mul", 0.5, x), ("add", 1.0, ("erf", ("mul", x, _INV_SQRT2))))


def _gelu_grad(g, x, approximate):
    """``g * gelu'(x)``."""
    if approximate == "tanh":
        x2 = ("mul", x, x)
        t = ("tanh", ("mul", _SQRT_2_OVER_PI, ("add", x, ("mul", _GELU_A, ("mul", x, x2)))))
        du = ("mul", _SQRT_2_OVER_PI, ("add", 1.0, ("mul", 3 * _GELU_A, x2)))
        d = ("add", ("mul", 0.5, ("add", 1.0, t)),
             ("mul", ("mul", ("mul", 0.5, x), ("sub", 1.0, ("mul", t, t))), du))
        return ("mul", g, d)
    cdf = ("mul", 0.5, ("add", 1.0, ("erf", ("mul", x, _INV_SQRT2))))
    pdf = ("mul", _INV_SQRT_2PI, ("exp", ("mul", -0.5, ("mul", x, x))))
    return ("mul", g, ("add", cdf, ("mul", x, pdf)))


def _pow(x, e):
    if type(e) not in (int, float):
        return None
    if e == 1:
        return ("mul", x, 1.0) if type(e) is float else ("pos", x)
    if e == 2:
        return ("mul", x, x)
    if e == 3:
        return ("mul", x, ("mul", x, x))
    if e == 0.5:
        return ("sqrt", x)
    if e == -1:
        return ("div", 1.0, x)
    return ("pow", x, e)


def _where(c, a, b):
    return ("where", c, a, b)


# name -> fn(*args in schema order, defaults filled) -> tree | None
_LOWER = {
    "add.Tensor": lambda a, b, alpha: ("add", a, _scaled(b, alpha)),
    "sub.Tensor": lambda a, b, alpha: ("sub", a, _scaled(b, alpha)),
    "rsub.Tensor": lambda a, b, alpha: ("sub", b, _scaled(a, alpha)),
    "rsub.Scalar": lambda a, b, alpha: ("sub", b, _scaled(a, alpha)),
    "mul.Tensor": lambda a, b: ("mul", a, b),
    "div.Tensor_mode": lambda a, b, mode: ("div", a, b) if mode is None else None,
    "rsqrt": lambda a: ("div", 1.0, ("sqrt", a)),
    "reciprocal": lambda a: ("div", 1.0, a),
    "silu": lambda a: ("mul", a, ("sigmoid", a)),
    "leaky_relu": lambda a, s: _where(("gt", a, 0), a, ("mul", a, s)),
    "gelu": _gelu,
    "gelu_backward": _gelu_grad,
    "_gelu_tanh_backward": lambda g, x, y: _gelu_grad(g, x, "tanh"),
    "tanh_backward": lambda g, y: ("mul", g, ("sub", 1.0, ("mul", y, y))),
    "sigmoid_backward": lambda g, y: ("mul", g, ("mul", y, ("sub", 1.0, y))),
    "pow.Tensor_Scalar": _pow,
    "gt.Tensor": lambda a, b: ("gt", a, b),
    "ge.Tensor": lambda a, b: ("ge", a, b),
    "lt.Tensor": lambda a, b: ("lt", a, b),
    "le.Tensor": lambda a, b: ("le", a, b),
    "eq.Tensor": lambda a, b: ("eq", a, b),
    "ne.Tensor": lambda a, b: ("ne", a, b),
    "where.self": _where,
    "masked_fill.Scalar": lambda a, m, v: _where(m, v, a),
    "native_dropout_backward": lambda g, m, s: ("mul", g, ("mul", m, s)),
    "lerp.Tensor": lambda a, b, w: ("add", a, ("mul", w, ("sub", b, a))),
    "clone": lambda a, memory_format: ("pos", a),
}

# ops whose tree is their own name on one operand
_LOWER.update({name: (lambda a, op=name: (op, a)) for name in (
    "neg", "abs", "exp", "exp2", "expm1", "log", "log1p", "sqrt", "sin", "cos", "tanh", "erf",
    "sigmoid", "relu")})

BOOL_OPS = frozenset(("gt", "ge", "lt", "le", "eq", "ne"))


def lower(rec, args: list):
    """The tree of a call of ``rec`` with ``args`` (schema order; tensor arguments as Leafs), or
    None where the op has no pointwise form."""
    fn = _LOWER.get(rec.name)
    if fn is None:
        return None
    for a in args:
        if not (isinstance(a, (Leaf, bool, int, float, str)) or a is None):
            return None  # a list, a dtype, ...: not a plain pointwise call
    try:
        return fn(*args)
    except TypeError:
        return None


def leaves(tree) -> list:
    """The distinct Leafs of ``tree``, first use first."""
    out: list = []

    def go(t):
        if isinstance(t, Leaf):
            if t not in out:
                out.append(t)
        elif type(t) is tuple:
            for x in t[1:]:
                go(x)

    go(tree)
    return out


# --- C ---
_C_UNARY = {"exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log1p": "log1p",
            "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tanh": "tanh", "erf": "erf",
            "abs": "fabs"}
_C_BIN = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_C_CMP = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}


def _c_num(v, ctype: str) -> str:
    if type(v) is bool:
        return "1" if v else "0"
    if type(v) is int:
        return f"(({ctype}){v})"
    if v != v:
        return f"(({ctype})NAN)"
    if v in (float("inf"), float("-inf")):
        return f"(({ctype}){'-' if v < 0 else ''}INFINITY)"
    return f"(({ctype}){v!r})"


def c_expr(tree, ctype: str, leaf) -> str:
    """C source of ``tree`` computed in ``ctype`` ("float" or "double"); ``leaf(Leaf)`` gives a
    leaf's C expression (already of ``ctype``, or bool for bool tensors)."""
    f = "f" if ctype == "float" else ""

    def go(t) -> str:
        if isinstance(t, Leaf):
            return leaf(t)
        if type(t) is not tuple:
            return _c_num(t, ctype)
        op = t[0]
        a = list(map(go, t[1:]))  # no comprehension frame per tree node (generate, 2000-op chain)
        if op in _C_BIN:
            return f"({a[0]} {_C_BIN[op]} {a[1]})"
        if op in _C_CMP:
            return f"({a[0]} {_C_CMP[op]} {a[1]})"
        if op in _C_UNARY:
            return f"{_C_UNARY[op]}{f}({a[0]})"
        if op == "neg":
            return f"(-{a[0]})"
        if op == "pos":
            return a[0]
        if op == "sigmoid":
            return f"(({ctype})1 / (({ctype})1 + exp{f}(-{a[0]})))"
        if op == "relu":  # NaN stays NaN, as max(x, 0) in PyTorch
            return f"({a[0]} < 0 ? ({ctype})0 : {a[0]})"
        if op == "where":
            return f"({a[0]} ? ({ctype})({a[1]}) : ({ctype})({a[2]}))"
        if op == "pow":
            return f"pow{f}({a[0]}, {a[1]})"
        raise AssertionError(f"no C form for {op}")

    return go(tree)


# --- NumPy ---
_NP = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide", "neg": "negative",
       "abs": "absolute", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
       "log1p": "log1p", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tanh": "tanh",
       "gt": "greater", "ge": "greater_equal", "lt": "less", "le": "less_equal", "eq": "equal",
       "ne": "not_equal", "pow": "power", "pos": "positive", "relu": "maximum"}


def const_dtype(tree, leaf_dtype, out_dtype):
    """The dtype in which ``tree``'s constants may be passed as 0-d arrays (a Python float costs
    a conversion on every call): the float dtype of all its leaves and its result, else None."""
    if out_dtype.kind != "f":
        return None
    for lf in leaves(tree):
        if leaf_dtype(lf) != out_dtype:
            return None
    return out_dtype


# NumPy 2.4 deprecates a positional output for these (they may become n-ary)
_OUT_KEYWORD = frozenset({"maximum", "minimum"})


def numpy_lines(tree, leaf, out: str | None, temp, order_c: bool = False, const=None) -> tuple:
    """Statements computing ``tree`` with the array module's ufuncs (``_u_<name>``, ``_np``),
    and the expression of the result. ``leaf(Leaf)`` is a leaf's source; ``out`` is a buffer the
    root may write into (or None); ``temp()`` names a fresh temporary; ``order_c``: some operand
    is strided, so allocating calls ask for C order (a ufunc copies its inputs' layout);
    ``const(number)``, if given, is a constant's source. Each op
    after the first writes in place into a temporary of this tree's own that it reads. Outputs
    are passed positionally: cheaper than ``out=`` on small arrays."""
    lines: list = []
    own: set = set()  # temporaries made by this tree (free to overwrite)
    alloc = ", order='C'" if order_c else ""

    def call(ufunc, srcs, dst):
        if dst:
            if ufunc in _OUT_KEYWORD:
                return f"_u_{ufunc}({', '.join(srcs)}, out={dst})"
            return f"_u_{ufunc}({', '.join(srcs)}, {dst})"
        if alloc:
            return f"_u_{ufunc}({', '.join(srcs)}{alloc})"
        return f"_u_{ufunc}({', '.join(srcs)})"

    def emit(op, srcs, dst):
        if op == "sigmoid":  # 1 / (1 + exp(-x)), in place on one buffer
            d = dst or temp()
            lines.append(f"{d} = {call('negative', srcs, dst)}")
            lines.append(f"_u_exp({d}, {d})")
            lines.append(f"_u_add({d}, 1, {d})")
            lines.append(f"_u_true_divide(1, {d}, {d})")
            own.add(d)
            return d
        if op == "relu":
            srcs = [srcs[0], "0"]
        if op == "where":
            d = temp()
            lines.append(f"{d} = _np.where({', '.join(srcs)})")
            if dst:
                lines.append(f"_np.copyto({dst}, {d})")
                d = dst
            own.add(d)
            return d
        d = dst or temp()
        lines.append(f"{d} = {call(_NP[op], srcs, dst)}")
        own.add(d)
        return d

    def go(t, dst):
        if isinstance(t, Leaf):
            return leaf(t)
        if type(t) is not tuple:
            if const is not None and type(t) is not bool:
                return const(t)
            return repr(t) if t == t and abs(t) != float("inf") else f"float({str(t)!r})"
        op, *xs = t
        srcs = [go(x, None) for x in xs]
        if dst is None and op != "where":
            mine = [x for x in srcs if x in own]
            if mine:  # in place on this tree's own temporary (check_numpy proves the shapes)
                dst = mine[0]
        return emit(op, srcs, dst)

    res = go(tree, out)
    return lines, res


UFUNCS = sorted(set(_NP.values()) | {"negative", "exp", "add", "true_divide"})


def check_numpy(tree, leaf_vals: dict, want_dtype) -> bool:
    """Whether NumPy's ufuncs give ``want_dtype`` for ``tree`` on leaves of these dtypes (NumPy's
    promotion differs from PyTorch's for mixed integer/float tensors)."""
    env = {"_np": np, **{f"_u_{u}": getattr(np, u) for u in UFUNCS}}
    names = {}
    for i, (lf, arr) in enumerate(leaf_vals.items()):
        names[lf] = f"x{i}"
        env[f"x{i}"] = arr
    k = [0]

    def temp():
        k[0] += 1
        return f"t{k[0]}"

    cdt = const_dtype(tree, lambda lf: leaf_vals[lf].dtype, np.dtype(want_dtype))
    const = None if cdt is None else (lambda v: f"_np.asarray({v!r}, _np.{cdt.name})")
    try:
        lines, res = numpy_lines(tree, lambda lf: names[lf], None, temp, const=const)
        with np.errstate(all="ignore"):
            exec("\n".join(lines + [f"_r = {res}"]), env)  # noqa: S102 - our own source
    except Exception:  # noqa: BLE001 - no NumPy form for these dtypes: not lowered
        return False
    r = env["_r"]
    return isinstance(r, np.ndarray) and r.dtype == want_dtype
