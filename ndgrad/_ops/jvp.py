"""Forward-mode rules on the op record: the ``jvp=`` field of ``defop``, prepared once at import.

``prepare(rec, jvp)`` turns the field into ``rec.jvp``, a function ``rule(args, tans, outs)``:
``args`` are the op's arguments in schema order, ``tans`` the tangents at the same positions
(None where an argument has none; a list for a ``Tensor[]``), ``outs`` the outputs. It returns the
output's tangent (a tuple, one per output, for a multi-output op; None: no tangent). The forms:

* ``"elementwise"``: each input's term is its VJP formula called with that input's tangent as
  ``grad`` (valid where the VJP is ``grad`` times a diagonal Jacobian; ndgrad's VJPs are plain
  transposes, no conjugation, so this holds for complex holomorphic ops too); terms are summed;
* ``"linear"``: the op itself applied to the tangents (zeros where an input has none);
* a callable over ``<input>_t`` (tangent, None where the input has none), ``<input>_p`` or the
  plain parameter name (argument), and the output names (``result``).

Rules use ndgrad ops, so tangents stay differentiable. Ops without a rule are differentiated by
transposing their VJP (``autograd/forward_ad.py``, which calls the rules).
"""

from __future__ import annotations

import inspect

from .._tensor import Tensor

__all__ = ["prepare", "plus", "product"]


def plus(a, b):
    """``a + b`` where either may be None (an input without tangent adds no term)."""
    if a is None:
        return b
    return a if b is None else a + b


def product(op, a, a_t, b, b_t):
    """The JVP of ``op`` bilinear in ``(a, b)``: ``op(a_t, b) + op(a, b_t)``, each term only where
    the input has a tangent (matmul, convolution)."""
    r = None if a_t is None else op(a_t, b)
    return r if b_t is None else plus(r, op(a, b_t))


def prepare(rec, jvp):
    """Validate ``jvp`` against ``rec``'s schema and formulas; return the prepared rule (or None).
    ``rec.extra["jvp"]`` keeps the form ("elementwise", "linear" or "rule") for the tests."""
    if jvp is None:
        return None
    if not rec.vjp_plan:
        raise ValueError(f"op {rec.name}: jvp rule on an op without vjp formulas")
    if isinstance(jvp, str):
        if jvp == "elementwise":
            rule = _elementwise(rec)
        elif jvp == "linear":
            rule = _linear(rec)
        else:
            raise ValueError(f"op {rec.name}: unknown jvp shortcut {jvp!r}")
        rec.extra["jvp"] = jvp
        return rule
    if not callable(jvp):
        raise ValueError(f"op {rec.name}: jvp must be 'elementwise', 'linear' or a callable")
    rec.extra["jvp"] = "rule"
    srcs = [_source(rec, name, "jvp") for name in inspect.signature(jvp).parameters]
    return _compile(["    return f(" + ", ".join(srcs) + ")"], {"f": jvp})


def _source(rec, name: str, what: str) -> str:
    """Where a rule's parameter comes from: ``A[i]`` (argument), ``T[i]`` (its tangent), ``O[i]``
    (output), ``_arg(kind, A[i])`` for ``<input>_shape`` and the like (as the VJP formulas get)."""
    pnames = [p.name for p in rec.params]
    if name in pnames:
        return f"A[{pnames.index(name)}]"
    if name in rec.out_names:
        return f"O[{rec.out_names.index(name)}]"
    stem, _, suffix = name.rpartition("_")
    if stem in pnames:
        pos = pnames.index(stem)
        if suffix == "p":
            return f"A[{pos}]"
        if suffix == "t" and rec.params[pos].code:
            return f"T[{pos}]"
        if suffix in ("shape", "dtype", "device", "strides"):
            return f"_arg({suffix!r}, A[{pos}])"
    raise ValueError(f"op {rec.name}: {what} names unknown parameter {name!r}")


def _compile(body: list, env: dict):
    """``def rule(A, T, O)`` with ``body``: one straight-line function per op, called by the mode
    and calling the formulas (forward AD's hot path). ``rule.reads_out``: whether it reads an
    output (an in-place op's rule then needs the out-of-place result)."""
    from .registry import _arg_value

    env = dict(env, _arg=_arg_value, _plus=plus)
    src = "def rule(A, T, O):\n" + "\n".join(body) + "\n"
    exec(src, env)  # noqa: S102 - built from parameter names
    rule = env["rule"]
    rule.reads_out = "O[" in src
    return rule


def _elementwise(rec):
    """Per-input terms from the VJP formulas, with the tangent in place of ``grad``, summed."""
    if rec.multi_out:
        raise ValueError(f"op {rec.name}: jvp 'elementwise' needs a single output")
    body, env = ["    r = None"], {}
    for k, (slot, f, *_) in enumerate(rec.vjp_plan):
        if type(slot) is not int:
            raise ValueError(f"op {rec.name}: jvp 'elementwise' needs one vjp formula per input")
        srcs = []
        for name in inspect.signature(f).parameters:
            if name in ("grads", "needs"):
                raise ValueError(f"op {rec.name}: jvp 'elementwise' from a vjp reading {name!r}")
            srcs.append("t" if name == "grad" else _source(rec, name, "vjp"))
        env[f"f{k}"] = f
        term = f"f{k}({', '.join(srcs)})"
        body += [f"    t = T[{rec.diff_pos[slot]}]", "    if t is not None:",
                 f"        r = {term}" if k == 0 else f"        r = _plus(r, {term})"]
    return _compile(body + ["    return r"], env)


def _linear(rec):
    """The op applied to the tangents; an input without one contributes zeros."""
    from .registry import T_TENSOR_LIST, dispatch

    pos = sorted({rec.diff_pos[s] for slot, *_ in rec.vjp_plan
                  for s in (slot if type(slot) is tuple else (slot,))})
    args = []
    for i, p in enumerate(rec.params):
        if i not in pos:
            args.append(f"A[{i}]")
        elif p.code == T_TENSOR_LIST:
            args.append(f"_zeros_for(A[{i}], T[{i}])")
        elif len(pos) == 1:
            args.append(f"T[{i}]")  # the one input: it has the tangent
        else:
            args.append(f"_zero(A[{i}]) if T[{i}] is None else T[{i}]")
    return _compile([f"    return _dispatch(_rec, ({''.join(x + ', ' for x in args)}))"],
                    {"_dispatch": dispatch, "_rec": rec, "_zero": _zero, "_zeros_for": _zeros_for})


def _zero(a):
    if isinstance(a, Tensor):
        from .factory import zeros_like  # the factory module imports the registry, which imports this

        return zeros_like(a)
    return None if a is None else type(a)(0)


def _zeros_for(a, ts):
    """A ``Tensor[]`` argument's tangents, zeros where an element has none."""
    return [_zero(x) if g is None else g for x, g in zip(a, ts or (None,) * len(a))]
