"""``ndgrad.autograd.api``: ``backward`` and ``grad``, re-exported as ``ndgrad.autograd.*``.

This module checks the user's arguments and builds root gradients; ``engine.run_backward`` does
the work. It also attaches ``Tensor.backward`` (the tensor layer sits below the engine).
"""

from __future__ import annotations

from .._dtype import FLOATING
from .._ops.factory import ones_like
from .._tensor import Size, Tensor
from .engine import run_backward
from .node import shared_view

__all__ = ["backward", "grad"]


def _tensor_tuple(x, what: str) -> tuple:
    if isinstance(x, Tensor):
        return (x,)
    if isinstance(x, (tuple, list)):
        for t in x:
            if not isinstance(t, Tensor):
                raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type(t).__name__}")
        return tuple(x)
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type(x).__name__}")


def _make_grads(outputs, grads, is_grads_batched=False):
    """Root gradients: check given ones against their outputs, create ones for scalars."""
    out = []
    for i, (o, g) in enumerate(zip(outputs, grads, strict=True)):
        if isinstance(g, Tensor):
            if g._data.shape != o._data.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {Size(g._data.shape)!r} and "
                    f"output[{i}] has a shape of {Size(o._data.shape)!r}."
                )
            if (g._data.dtype.kind == "c") != (o._data.dtype.kind == "c"):
                raise RuntimeError(
                    "For complex Tensors, both grad_output and output are required to have the same dtype. "
                    f"Mismatch in dtype: grad_output[{i}] has a dtype of {g.dtype} and output[{i}] has a "
                    f"dtype of {o.dtype}."
                )
            if g._rg:
                out.append(g)  # keeps its graph (double backward through the root gradient)
            else:
                # The user's memory: .grad copies it rather than keeping it.
                out.append(shared_view(g))
        elif g is None:
            if o.requires_grad:
                if o._data.size != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if o._data.dtype not in FLOATING:
                    raise RuntimeError(
                        f"grad can be implicitly created only for real scalar outputs but got {o.dtype}"
                    )
                out.append(ones_like(o))  # an op: a dispatch mode sees the root gradient made
            else:
                out.append(None)
        else:
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
    return out


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None) -> None:
    """Accumulate into ``.grad`` of the leaves the gradient of ``tensors``."""
    if grad_variables is not None:
        grad_tensors = grad_variables
    if inputs is not None:
        inputs = _tensor_tuple(inputs, "inputs")
        if len(inputs) == 0:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    tensors = _tensor_tuple(tensors, "tensors")
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    else:
        grad_tensors = list(grad_tensors)
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(f"got {len(grad_tensors)} gradients for {len(tensors)} outputs")
    grads = _make_grads(tensors, grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    run_backward(tensors, grads, bool(retain_graph), bool(create_graph), inputs, True, True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Return the gradients of ``outputs`` with respect to ``inputs`` (a tuple)."""
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
            "allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _tensor_tuple(outputs, "outputs")
    inputs = _tensor_tuple(inputs, "inputs")
    if len(inputs) == 0:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    else:
        grad_outputs = list(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(
            f"grad requires one grad_output per output, but got {len(grad_outputs)} grad_outputs "
            f"for {len(outputs)} outputs"
        )
    grads = _make_grads(outputs, grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    result = run_backward(outputs, grads, bool(retain_graph), bool(create_graph), inputs,
                          allow_unused, False)
    out = []
    for i, (t, g) in enumerate(zip(inputs, result, strict=True)):
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:
                g = t.new_zeros(t.shape)
        out.append(g)
    return tuple(out)


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute the gradient of this tensor w.r.t. graph leaves (``Tensor.backward``)."""
    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


Tensor.backward = _tensor_backward
