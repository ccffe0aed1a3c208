"""``ndgrad.autograd.functional``: ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``vhp``, ``hvp``.

Everything here is built on ``autograd.grad``: Jacobians row by row, JVPs (and HVPs) by the
double-vjp trick, since ndgrad has no forward-mode AD. Argument checks, the nesting of returned
structures, strict-mode errors and zero-filling follow ``torch.autograd.functional``.
"""

from __future__ import annotations

from .._ops.shape import stack
from .._tensor import Tensor
from .api import grad as _grad
from .grad_mode import enable_grad, is_grad_enabled, set_grad_enabled

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


# --- argument handling ---


def _as_tuple(x, arg_name: str, fn_name: str):
    """``(was_tuple, tensors)``; only a real tuple counts as one (a list is a single bad value)."""
    was_tuple = isinstance(x, tuple)
    tensors = x if was_tuple else (x,)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            where = f"value at index {i}" if was_tuple else f"given {arg_name}"
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors "
                f"but the {where} has type {type(t)}."
            )
    return was_tuple, tensors


def _prepare(tensors, create_graph: bool, need_graph: bool) -> tuple:
    """Fresh graph roots: a view keeps the caller's graph when ``create_graph``, else detach."""
    out = []
    for t in tensors:
        if create_graph and t.requires_grad:
            out.append(t.view(t.shape))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _finish(tensors, create_graph: bool) -> tuple:
    """Detach results (nested tuples too) unless the caller asked for a differentiable graph."""
    if create_graph:
        return tuple(tensors)
    return tuple(t.detach() if isinstance(t, Tensor) else _finish(t, False) for t in tensors)


def _unpack(res, was_tuple):
    """Undo the tuple wrapping of single-tensor arguments (``(outer, inner)`` for Jacobians)."""
    if isinstance(was_tuple, tuple):
        outer, inner = was_tuple
        if not inner:
            res = tuple(r[0] for r in res)
        return res if outer else res[0]
    return res if was_tuple else res[0]


def _check_v(v, ref, ref_is_tuple: bool) -> None:
    if len(v) != len(ref):
        if ref_is_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(ref)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, ref, strict=True)):
        if a.shape != b.shape:
            where = f"Entry {i} in " if ref_is_tuple else ""
            raise RuntimeError(f"{where}v has invalid size: should be {b.size()} but got {a.size()}.")


def _take_v(v, ref, ref_is_tuple, create_graph, fn_name, none_msg):
    if v is None:
        if len(ref) != 1 or ref[0].numel() != 1:
            raise RuntimeError(none_msg)
        return None
    _, v = _as_tuple(v, "v", fn_name)
    v = _prepare(v, create_graph, False)
    _check_v(v, ref, ref_is_tuple)
    return v


_V_OUT = ("The vector v can only be None if the user-provided function returns a single Tensor "
          "with a single element.")
_V_IN = ("The vector v can only be None if the input to the user-provided function is a single "
         "Tensor with a single element.")


# --- strict-mode checks ---


def _check_outputs(outputs, strict: bool) -> None:
    if strict:
        for i, o in enumerate(outputs):
            if not o.requires_grad:
                raise RuntimeError(
                    f"Output {i} of the user-provided function does not require gradients. The "
                    "outputs must be computed in a differentiable manner from the input when "
                    "running in strict mode."
                )


def _check_grads(grads, kind: str, strict: bool) -> None:
    """Strict checks on intermediate gradients: ``kind`` is grad_inputs, jacobian or hessian."""
    if not strict:
        return
    for i, g in enumerate(grads):
        if g is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This is "
                "not allowed in strict mode."
            )
        if g.requires_grad:
            continue
        if kind == "grad_inputs":
            raise RuntimeError(
                f"The gradient with respect to input {i} is independent of the inputs of the "
                "user-provided function. This is not allowed in strict mode."
            )
        if kind == "jacobian":
            raise RuntimeError(
                "While computing the hessian, found that the jacobian of the user-provided "
                f"function with respect to input {i} is independent of the input. This is not "
                "allowed in strict mode. You should ensure that your function is twice "
                "differentiable and that the jacobian depends on the inputs (this would be "
                "violated by a linear function for example)."
            )
        raise RuntimeError(
            f"The hessian of the user-provided function with respect to input {i} is independent "
            "of the input. This is not allowed in strict mode. You should ensure that your "
            "function is thrice differentiable and that the hessian depends on the inputs."
        )


_NONE_MSG = {
    "back": "The output of the user-provided function is independent of input {i}. This is not "
            "allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} "
                         "in the grad_jacobian. This is not allowed in strict mode as it prevents "
                         "from using the double backward trick to replace forward mode AD.",
}


def _zeros_for_none(grads, refs, strict: bool, create_graph: bool, stage: str) -> tuple:
    """Replace missing gradients by zeros shaped like ``refs`` (strict mode: raise instead)."""
    out = []
    for i, (g, r) in enumerate(zip(grads, refs, strict=True)):
        if g is None:
            if strict:
                raise RuntimeError(_NONE_MSG[stage].format(i=i))
            g = r.new_zeros(r.shape)
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if stage.startswith("double") else "jacobian"
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of input {i}. This is "
                "not allowed in strict mode when create_graph=True."
            )
        out.append(g)
    return tuple(out)


def _grads(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None) -> tuple:
    """``autograd.grad`` that skips outputs outside the graph and answers None for unused inputs."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs, strict=True)
             if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return _grad([o for o, _ in pairs], inputs, [g for _, g in pairs], retain_graph=retain_graph,
                 create_graph=create_graph, allow_unused=True)


# --- vector products ---


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """Return ``(func(*inputs), v^T J)``: the vector-Jacobian product at ``inputs``.

    >>> import ndgrad
    >>> ndgrad.autograd.functional.vjp(lambda x: (x * x).sum(), ndgrad.tensor([1.0, 2.0]))[1]
    tensor([2., 4.])
    """
    with enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph, True)
        out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "vjp")
        _check_outputs(outputs, strict)
        v = _take_v(v, outputs, out_tuple, create_graph, "vjp", _V_OUT)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _grads(outputs, inputs, v, create_graph=create_graph)
        res = _zeros_for_none(res, inputs, strict, create_graph, "back")
    return (_unpack(_finish(outputs, create_graph), out_tuple),
            _unpack(_finish(res, create_graph), in_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """Return ``(func(*inputs), J v)``, by the double-vjp trick (the vjp is linear in its vector).

    >>> import ndgrad
    >>> ndgrad.autograd.functional.jvp(lambda x: x * x, ndgrad.tensor([1.0, 2.0]), ndgrad.ones(2))[1]
    tensor([2., 4.])
    """
    with enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepare(inputs, create_graph, True)
        v = _take_v(v, inputs, in_tuple, create_graph, "jvp", _V_IN)
        out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jvp")
        _check_outputs(outputs, strict)
        # u -> u^T J is linear in u; differentiating it w.r.t. u along v gives J v.
        us = tuple(o.new_zeros(o.shape).requires_grad_(True) for o in outputs)
        grad_inputs = _grads(outputs, inputs, us, create_graph=True)
        _check_grads(grad_inputs, "grad_inputs", strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _grads(grad_inputs, us, v, create_graph=create_graph)
        res = _zeros_for_none(res, outputs, strict, create_graph, "back_trick")
    return (_unpack(_finish(outputs, create_graph), out_tuple),
            _unpack(_finish(res, create_graph), out_tuple))


def _scalar_func_outputs(func, inputs, fn_name: str, strict: bool) -> tuple:
    """Run ``func`` for vhp/hvp and check it returns one single-element tensor."""
    out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", fn_name)
    _check_outputs(outputs, strict)
    if out_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {fn_name} should contain a single element"
        )
    return outputs


def _first_grads(func, inputs, v, create_graph, strict, name):
    """What vhp and hvp share (under enable_grad): checked inputs and ``v``, the scalar output
    and its gradient with a graph. Returns ``(in_tuple, inputs, v, outputs, jac)``."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", name)
    inputs = _prepare(inputs, create_graph, True)
    v = _take_v(v, inputs, in_tuple, create_graph, name, _V_IN)
    outputs = _scalar_func_outputs(func, inputs, name, strict)
    jac = _grads(outputs, inputs, create_graph=True)
    _check_grads(jac, "jacobian", strict)
    return in_tuple, inputs, v, outputs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """Return ``(func(*inputs), v^T H)`` for a scalar function ``func``."""
    with enable_grad():
        in_tuple, inputs, v, outputs, jac = _first_grads(func, inputs, v, create_graph, strict, "vhp")
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _grads(jac, inputs, v, create_graph=create_graph)
        res = _zeros_for_none(res, inputs, strict, create_graph, "double_back")
    return _finish(outputs, create_graph)[0], _unpack(_finish(res, create_graph), in_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """Return ``(func(*inputs), H v)`` for a scalar ``func``, by the double-vjp trick on the gradient."""
    with enable_grad():
        in_tuple, inputs, v, outputs, jac = _first_grads(func, inputs, v, create_graph, strict, "hvp")
        us = tuple(t.new_zeros(t.shape).requires_grad_(True) for t in inputs)
        double_back = _grads(jac, inputs, us, create_graph=True)
        # NOTE(pytorch): the "hessian" check looks at the gradient again, not at double_back.
        _check_grads(jac, "hessian", strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _grads(double_back, us, v, create_graph=create_graph)
        res = _zeros_for_none(res, inputs, strict, create_graph, "double_back_trick")
    return _finish(outputs, create_graph)[0], _unpack(_finish(res, create_graph), in_tuple)


# --- Jacobian and Hessian ---


def _jacobian_rows(outputs, inputs, create_graph: bool, strict: bool) -> tuple:
    """``J[i][j]`` of shape ``outputs[i].shape + inputs[j].shape``, one backward per output element."""
    jac = []
    for i, out in enumerate(outputs):
        rows = [[] for _ in inputs]
        flat = out.reshape(-1)
        for k in range(out.numel()):
            row = _grads((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
            for j, (g, inp) in enumerate(zip(row, inputs, strict=True)):
                if g is None:
                    if strict:
                        raise RuntimeError(
                            f"Output {i} of the user-provided function is independent of input "
                            f"{j}. This is not allowed in strict mode."
                        )
                    g = inp.new_zeros(inp.shape)
                elif strict and create_graph and not g.requires_grad:
                    # NOTE(pytorch): the message names the output index as "input".
                    raise RuntimeError(
                        f"The jacobian of the user-provided function is independent of input {i}. "
                        "This is not allowed in strict mode when create_graph=True."
                    )
                rows[j].append(g)
        jac.append(tuple(stack(r, dim=0).view(out.shape + inp.shape)
                         for r, inp in zip(rows, inputs, strict=True)))
    return tuple(jac)


def _jacobian_fwd(func, inputs, strict: bool, vectorize: bool):
    """``strategy="forward-mode"``: column ``J e_k`` is the tangent of ``func`` at duals whose
    tangent is ``e_k`` (one forward pass per input element, ``autograd.forward_ad``)."""
    if strict:
        raise RuntimeError(
            'torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are '
            'not supported together (yet). Please either set `strict=False` or '
            '`strategy="reverse-mode"`.'
        )
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    if not vectorize:
        # NOTE(pytorch): "is" "only" run together in PyTorch's message; kept verbatim.
        raise NotImplementedError(
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
            "only implemented for `vectorize=True`."
        )
    from . import forward_ad as fwad

    # Inputs require grad so that a reverse-mode ``func`` (hessian's gradient) keeps the duals
    # as views rather than detaching them.
    inputs = tuple(t.detach().requires_grad_(t.dtype.is_floating_point) for t in inputs)
    cols = None
    out_tuple = False
    outputs = ()
    for j, inp in enumerate(inputs):
        for k in range(inp.numel()):
            e = inp.detach().new_zeros(inp.numel())
            e[k] = 1
            with fwad.dual_level(), enable_grad():
                duals = tuple(fwad.make_dual(x, e.view(x.shape)) if i == j else x
                              for i, x in enumerate(inputs))
                out_tuple, outputs = _as_tuple(func(*duals), "outputs of the user-provided function",
                                               "jacobian")
                if cols is None:
                    cols = [[[] for _ in inputs] for _ in outputs]
                for i, out in enumerate(outputs):
                    g = fwad.unpack_dual(out).tangent
                    cols[i][j].append(out.new_zeros(out.shape) if g is None else g.detach())
    if cols is None:  # no input elements: one call for the output structure
        out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jacobian")
        cols = [[[] for _ in inputs] for _ in outputs]
    jac = tuple(
        tuple(stack(c, dim=-1).view(out.shape + inp.shape) if c else out.new_zeros(out.shape + inp.shape)
              for c, inp in zip(row, inputs, strict=True))
        for row, out in zip(cols, outputs, strict=True)
    )
    return _unpack(_finish(jac, False), (out_tuple, in_tuple))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """Return the Jacobian of ``func`` at ``inputs``: ``J[i][j]`` has shape ``out_i + in_j``.

    Single-tensor inputs/outputs drop their level of nesting. ``vectorize`` computes the same
    values with the same backward loop (ndgrad has no batched gradients).

    >>> import ndgrad
    >>> ndgrad.autograd.functional.jacobian(lambda x: 2 * x, ndgrad.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 2.]])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".'
        )
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either set '
                '`create_graph=False` or `strategy="reverse-mode"`.'
            )
        return _jacobian_fwd(func, inputs, strict, vectorize)
    with enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph, True)
        out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function",
                                       "jacobian")
        _check_outputs(outputs, strict)
        if vectorize and strict:
            raise RuntimeError(
                "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                "supported together. Please either set `strict=False` or `vectorize=False`."
            )
        jac = _jacobian_rows(outputs, inputs, create_graph, strict)
    return _unpack(_finish(jac, create_graph), (out_tuple, in_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """Return the Hessian of the scalar function ``func``: ``H[i][j]`` has shape ``in_i + in_j``.

    >>> import ndgrad
    >>> ndgrad.autograd.functional.hessian(lambda x: (x ** 3).sum(), ndgrad.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    in_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar_func(*args):
        out = func(*args)
        out_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_outputs(outs, strict)
        if out_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should contain a single element"
            )
        return out.squeeze()  # so the inner Jacobian has the input's shape

    def gradient(*args):
        jac = jacobian(scalar_func, args, create_graph=True)
        _check_grads(jac, "jacobian", strict)
        return jac

    res = jacobian(gradient, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _unpack(res, (in_tuple, in_tuple))
