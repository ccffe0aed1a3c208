"""``ndgrad.func``: PyTorch's function transforms (``torch.func``) over ndgrad's autograd.

``grad`` / ``vjp`` differentiate with the engine (``create_graph`` when the result may be
differentiated again: inside another transform, or when an input already requires grad, so that
``grad(grad(f))`` and ``backward`` through a ``grad`` work), ``jvp`` with forward-mode AD,
``jacrev`` / ``jacfwd`` / ``hessian`` from those, and ``functional_call`` runs a module with other
parameters and buffers. ``vmap`` maps a function over a batch dimension by running it once per
slice and stacking the results: PyTorch's semantics (``in_dims``, ``out_dims``, pytrees,
``randomness``), not its speed (it has no per-op batching rules).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from .. import _factories
from .._ops.factory import eye, zeros
from .._ops.registry import OPS
from .._tensor import Tensor
from ..autograd import forward_ad
from ..autograd.grad_mode import enable_grad

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "vjp", "vmap"]

_stack = OPS["stack"].call
_zeros_like = OPS["zeros_like"].call
_state = threading.local()  # depth of nested transforms on this thread


# ---------------------------------------------------------------- pytrees

def _flatten(tree):
    """Leaves of a nest of tuples, lists and dicts, and a function that rebuilds it."""
    if isinstance(tree, (tuple, list)):
        parts = [_flatten(t) for t in tree]
        leaves = [x for p in parts for x in p[0]]
        sizes = [len(p[0]) for p in parts]
        kind = type(tree)

        def build(xs):
            out, i = [], 0
            for (_, b), n in zip(parts, sizes):
                out.append(b(xs[i:i + n]))
                i += n
            return kind(*out) if hasattr(kind, "_fields") else kind(out)
        return leaves, build
    if isinstance(tree, dict):
        keys = list(tree)
        leaves, build_values = _flatten([tree[k] for k in keys])
        return leaves, lambda xs: dict(zip(keys, build_values(xs)))
    return [tree], lambda xs: xs[0]


@contextmanager
def _level():
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def _nested() -> bool:
    return getattr(_state, "depth", 0) > 0


def _as_input(x):
    """A fresh differentiable stand-in for an input: its own leaf, or (when it already has a
    graph) a view that keeps it, so an outer transform still sees through."""
    if not isinstance(x, Tensor):
        return x
    return x.view_as(x) if x.requires_grad else x.detach().requires_grad_(True)


def _zeros_for(grads, inputs):
    return [g if g is not None else _zeros_like(x) for g, x in zip(grads, inputs)]


# ---------------------------------------------------------------- reverse mode

def _vjp_core(func, primals, has_aux):
    leaves, build = _flatten(list(primals))
    keep = _nested() or any(isinstance(x, Tensor) and x.requires_grad for x in leaves)
    inputs = [_as_input(x) for x in leaves]
    with enable_grad(), _level():
        out = func(*build(inputs))
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise RuntimeError("vjp(f, *primals): output of function f should be a tuple: "
                               "(output, aux) if has_aux is True")
        out, aux = out
    return out, aux, inputs, build, keep


def vjp(func, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)``; ``vjp_fn(cotangents)`` gives the gradients of the primals."""
    from ..autograd import grad as autograd_grad
    out, aux, inputs, build, keep = _vjp_core(func, primals, has_aux)
    out_leaves, out_build = _flatten(out)

    def vjp_fn(cotangents):
        ct_leaves, _ = _flatten(cotangents)
        if len(ct_leaves) != len(out_leaves):
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree "
                               "structure of outputs to the function")
        pairs = [(o, c) for o, c in zip(out_leaves, ct_leaves)
                 if isinstance(o, Tensor) and o.requires_grad]
        diff = [x for x in inputs if isinstance(x, Tensor)]
        if pairs:
            got = autograd_grad([o for o, _ in pairs], diff, [c for _, c in pairs],
                                retain_graph=True, create_graph=keep, allow_unused=True)
        else:
            got = [None] * len(diff)
        got = iter(_zeros_for(got, diff))
        grads = [next(got) if isinstance(x, Tensor) else None for x in inputs]
        if not keep:
            grads = [g.detach() if g is not None else None for g in grads]
        return tuple(build(grads))

    result = out if keep else out_build([o.detach() if isinstance(o, Tensor) else o
                                         for o in out_leaves])
    return (result, vjp_fn, aux) if has_aux else (result, vjp_fn)


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """A function giving ``(gradient of func's scalar output w.r.t. args[argnums], output)``."""
    def wrapper(*args, **kwargs):
        from ..autograd import grad as autograd_grad
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        for n in nums:
            if not -len(args) <= n < len(args):
                raise RuntimeError(f"Got argnums={argnums}, but only {len(args)} positional "
                                   "inputs")
        chosen = [args[n] for n in nums]
        leaves, build = _flatten(chosen)
        keep = _nested() or any(isinstance(x, Tensor) and x.requires_grad for x in leaves)
        inputs = [_as_input(x) for x in leaves]
        rebuilt = build(inputs)
        full = list(args)
        for n, v in zip(nums, rebuilt):
            full[n] = v
        with enable_grad(), _level():
            out = func(*full, **kwargs)
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise RuntimeError("grad_and_value(f)(*args): output of function f should be a "
                                   "tuple: (output, aux) if has_aux is True")
            out, aux = out
        if not isinstance(out, Tensor):
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, "
                               f"got {type(out)}")
        if out.dim() != 0:
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar "
                               f"Tensor, got tensor with {out.dim()} dims. Maybe you wanted to use "
                               "the vjp or jacrev APIs instead?")
        diff = [x for x in inputs if isinstance(x, Tensor)]
        got = autograd_grad([out], diff, create_graph=keep, allow_unused=True) \
            if out.requires_grad else [None] * len(diff)
        got = iter(_zeros_for(got, diff))
        grads = [next(got) if isinstance(x, Tensor) else None for x in inputs]
        if not keep:
            grads = [g.detach() if g is not None else None for g in grads]
            out = out.detach()
        g = build(grads)
        g = g[0] if isinstance(argnums, int) else tuple(g)
        return (g, (out, aux)) if has_aux else (g, out)
    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """A function giving the gradient of ``func``'s scalar output w.r.t. ``args[argnums]``."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


# ---------------------------------------------------------------- forward mode

def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), its directional derivative along tangents)`` by forward-mode AD."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be "
                           "tuples")
    p_leaves, build = _flatten(list(primals))
    t_leaves, _ = _flatten(list(tangents))
    if len(p_leaves) != len(t_leaves):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the "
                           "same python structure")
    with forward_ad.dual_level(), _level():
        duals = [forward_ad.make_dual(p, t) if isinstance(p, Tensor) else p
                 for p, t in zip(p_leaves, t_leaves)]
        out = func(*build(duals))
        aux = None
        if has_aux:
            out, aux = out
        o_leaves, o_build = _flatten(out)
        prim, tang = [], []
        for o in o_leaves:
            u = forward_ad.unpack_dual(o)
            prim.append(u.primal)
            tang.append(u.tangent if u.tangent is not None else _zeros_like(u.primal))
    result = (o_build(prim), o_build(tang))
    return result + (aux,) if has_aux else result


# ---------------------------------------------------------------- vmap

def _check_dim(x, dim, name):
    n = x.dim()
    if not -n <= dim < n:
        raise ValueError(f"vmap({name}, in_dims={dim}, ...)(<inputs>): Got in_dim={dim} for some "
                         f"input, but that input is a Tensor of dimensionality {n} so expected "
                         f"in_dim to satisfy -{n} <= in_dim < {n}.")
    return dim % n


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """``func`` mapped over a dimension of its inputs (``in_dims``), results stacked along
    ``out_dims``."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    name = getattr(func, "__name__", repr(func))

    def wrapper(*args, **kwargs):
        leaves, build = _flatten(list(args))
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                             f"compatible with the structure of `inputs`. in_dims has structure "
                             f"{len(dims)} but inputs has structure {len(args)}.")
        leaf_dims = []
        for a, d in zip(args, dims):
            n = len(_flatten(a)[0])
            sub = _flatten(d)[0] if isinstance(d, (tuple, list, dict)) else [d] * n
            leaf_dims += sub
        sizes, mapped = [], []
        for x, d in zip(leaves, leaf_dims):
            if d is not None and isinstance(x, Tensor):
                d = _check_dim(x, d, name)
                sizes.append(x.shape[d])
            mapped.append(d if isinstance(x, Tensor) else None)
        if not sizes:
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): at least one "
                             "input must be a Tensor mapped over a dimension")
        if len(set(sizes)) != 1:
            raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                             f"dimension, got sizes {sizes} for the mapped dimension")
        state = _factories.get_rng_state() if randomness == "same" else None
        results = []
        with _level():
            for i in range(sizes[0]):
                if state is not None:
                    _factories.set_rng_state(state)
                sliced = [x.select(d, i) if d is not None else x for x, d in zip(leaves, mapped)]
                results.append(_flatten(func(*build(sliced), **kwargs)))
        build_out = results[0][1]
        columns = list(zip(*[r[0] for r in results]))
        odims = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * len(columns)
        out = []
        for col, od in zip(columns, odims):
            if not isinstance(col[0], Tensor):
                raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                                 f"{type(col[0])}. Did you mean to set out_dims= to None for "
                                 "output?")
            out.append(_stack(list(col), od if od >= 0 else od + col[0].dim() + 1))
        return build_out(out)
    return wrapper


# ---------------------------------------------------------------- Jacobians

def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None):
    """The Jacobian of ``func`` w.r.t. ``args[argnums]`` by reverse mode, one row per output
    element; shaped ``output.shape + input.shape``."""
    def wrapper(*args):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

        def partial(*chosen):
            full = list(args)
            for n, v in zip(nums, chosen):
                full[n] = v
            return func(*full)
        got = vjp(partial, *[args[n] for n in nums], has_aux=has_aux)
        out, fn = got[0], got[1]
        rows = []
        flat = out.reshape(-1)
        basis = eye(flat.shape[0], dtype=out.dtype, device=out.device)
        for k in range(flat.shape[0]):
            rows.append(fn(basis[k].reshape(out.shape)))
        jac = []
        for j, x in enumerate(args[n] for n in nums):
            stacked = _stack([r[j] for r in rows], 0) if rows else zeros(0, *x.shape)
            jac.append(stacked.reshape(tuple(out.shape) + tuple(x.shape)))
        res = jac[0] if isinstance(argnums, int) else tuple(jac)
        return (res, got[2]) if has_aux else res
    return wrapper


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """The Jacobian of ``func`` w.r.t. ``args[argnums]`` by forward mode, one column per input
    element; shaped ``output.shape + input.shape``."""
    def wrapper(*args):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        jac = []
        aux = None
        for n in nums:
            x = args[n]
            cols = []
            out = None
            basis = eye(x.numel(), dtype=x.dtype, device=x.device)
            for k in range(x.numel()):
                tangents = [_zeros_like(a) if isinstance(a, Tensor) else a for a in args]
                tangents[n] = basis[k].reshape(x.shape)
                got = jvp(func, tuple(args), tuple(tangents), has_aux=has_aux)
                out, col = got[0], got[1]
                aux = got[2] if has_aux else None
                cols.append(col)
            if out is None:
                out = func(*args)[0] if has_aux else func(*args)
            stacked = _stack(cols, -1) if cols else zeros(*out.shape, 0)
            jac.append(stacked.reshape(tuple(out.shape) + tuple(x.shape)))
        res = jac[0] if isinstance(argnums, int) else tuple(jac)
        return (res, aux) if has_aux else res
    return wrapper


def hessian(func, argnums=0):
    """Second derivatives of a scalar ``func``: the Jacobian of its gradient."""
    return jacrev(jacrev(func, argnums), argnums)


# ---------------------------------------------------------------- modules

def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """Run ``module(*args, **kwargs)`` with some parameters and buffers replaced by the given
    tensors (by their ``state_dict`` names), restoring the module afterwards."""
    if isinstance(parameter_and_buffer_dicts, dict):
        given = dict(parameter_and_buffer_dicts)
    else:
        given = {}
        for d in parameter_and_buffer_dicts:
            clash = sorted(set(given) & set(d))
            if clash:
                raise ValueError(f"{clash} appeared in multiple dictionaries; behavior of "
                                 "functional call is ambiguous")
            given.update(d)
    names = {n: t for n, t in module.named_parameters(remove_duplicate=False)}
    names.update({n: t for n, t in module.named_buffers(remove_duplicate=False)})
    if tie_weights:  # a tensor given for one name of a tied parameter replaces every name
        by_id = {}
        for n, t in names.items():
            by_id.setdefault(id(t), []).append(n)
        for n in list(given):
            if n in names:
                for other in by_id[id(names[n])]:
                    given.setdefault(other, given[n])
    if strict:
        missing = [n for n in names if n not in given]
        unexpected = [n for n in given if n not in names]
        if missing or unexpected:
            lines = []
            if unexpected:
                lines.append("Unexpected key(s): " + ", ".join(f"'{n}'" for n in unexpected)
                             + ".")
            if missing:
                lines.append("Missing key(s): " + ", ".join(f"'{n}'" for n in missing) + ".")
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               + "\n\t".join(lines))
    saved = []
    try:
        for n, t in given.items():
            owner_path, _, attr = n.rpartition(".")
            owner = module.get_submodule(owner_path) if owner_path else module
            for store in ("_parameters", "_buffers"):
                table = owner.__dict__.get(store)
                if table is not None and attr in table:
                    saved.append((table, attr, table[attr]))
                    table[attr] = t
                    break
            else:
                saved.append((owner.__dict__, attr, owner.__dict__.get(attr, _MISSING)))
                owner.__dict__[attr] = t
        args = () if args is None else args if isinstance(args, tuple) else (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for table, attr, old in reversed(saved):
            if old is _MISSING:
                del table[attr]
            else:
                table[attr] = old


_MISSING = object()
