"""Flatten parameters into one vector and copy a vector back into parameters."""

from __future__ import annotations

from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters) -> Tensor:
    """One 1-d tensor holding every parameter, flattened, in order (differentiable)."""
    from ... import cat

    return cat([p.view(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Copy slices of ``vec`` into the parameters' data, in order."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    offset = 0
    for p in parameters:
        n = p.numel()
        with no_grad():
            p.copy_(vec[offset:offset + n].view(p.shape))
        offset += n
