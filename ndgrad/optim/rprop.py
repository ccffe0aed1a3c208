"""Rprop: resilient backpropagation (Riedmiller & Braun), each element's step size grown or
shrunk by the sign of the gradient's change; PyTorch's single-tensor update in Tensor ops under
``no_grad``."""

from __future__ import annotations

from .._ops.factory import full_like, zeros_like
from ..autograd.grad_mode import no_grad
from .optimizer import _WithFlags, _as_real, _check_lr_eps, _grad_ops, _to_scalar, _with_grads, _zero_step

__all__ = ["Rprop"]


class Rprop(_WithFlags):
    """Rprop: where the gradient keeps its sign the step size grows by ``etas[1]``, where it
    flips it shrinks by ``etas[0]`` (and that element does not move this step), clamped to
    ``step_sizes``; each element moves by its step size against its gradient's sign.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.Rprop([w], lr=0.1)
    >>> w.grad = ndgrad.tensor([3.0]); opt.step(); w
    tensor([0.9000], requires_grad=True)
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False) -> None:
        _check_lr_eps(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            lo, hi = group["step_sizes"]
            for p, grad in _with_grads(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _zero_step()
                    state["prev"] = zeros_like(p)
                    lr = _to_scalar(group["lr"])
                    # a complex element is two real ones: both parts start at lr
                    state["step_size"] = full_like(grad, complex(lr, lr) if p.is_complex() else lr)
                with no_grad():
                    state["step"].add_(1)
                    g = _as_real(_grad_ops(p, grad, group["maximize"], 0))
                    pr, prev, size = _as_real(p), _as_real(state["prev"]), _as_real(state["step_size"])
                    sign = g.mul(prev).sign()
                    sign[sign.gt(0)] = etaplus
                    sign[sign.lt(0)] = etaminus
                    sign[sign.eq(0)] = 1
                    size.mul_(sign).clamp_(lo, hi)
                    g = g.clone()
                    g[sign.eq(etaminus)] = 0  # a flipped sign: no move, and no memory of it
                    pr.addcmul_(g.sign(), size, value=-1)
                    prev.copy_(g)
        return loss
