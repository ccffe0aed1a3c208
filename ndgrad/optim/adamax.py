"""Adamax: Adam with the infinity norm in place of the second moment (Kingma & Ba); PyTorch's
single-tensor update in Tensor ops under ``no_grad`` (a dispatch mode sees every computation)."""

from __future__ import annotations

from .._ops.factory import zeros_like
from ..autograd.grad_mode import no_grad
from .optimizer import (_WithFlags, _as_real, _check_adam_args, _grad_ops, _lerp_ops_, _to_scalar,
                        _with_grads, _zero_step)

__all__ = ["Adamax"]


class Adamax(_WithFlags):
    """Adamax: ``exp_inf = max(beta2 * exp_inf, |g| + eps)``, and the step
    ``lr / (1 - beta1**t) * exp_avg / exp_inf``.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.Adamax([w], lr=0.1)
    >>> w.grad = ndgrad.tensor([3.0]); opt.step(); w
    tensor([0.9000], requires_grad=True)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False) -> None:
        _check_adam_args(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            beta1, beta2 = (_to_scalar(b) for b in group["betas"])
            eps = group["eps"]
            for p, grad in _with_grads(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _zero_step()
                    state["exp_avg"] = zeros_like(p)
                    state["exp_inf"] = zeros_like(p)
                with no_grad():
                    state["step"].add_(1)
                    g = _grad_ops(p, grad, group["maximize"], group["weight_decay"])
                    pr, g = _as_real(p), _as_real(g)
                    exp_avg, exp_inf = _as_real(state["exp_avg"]), _as_real(state["exp_inf"])
                    _lerp_ops_(exp_avg, g, 1 - beta1)
                    exp_inf.copy_(exp_inf.mul_(beta2).maximum(g.abs().add_(eps)))
                    clr = lr / (1 - beta1 ** float(state["step"].item()))
                    pr.addcdiv_(exp_avg, exp_inf, value=-clr)
        return loss
