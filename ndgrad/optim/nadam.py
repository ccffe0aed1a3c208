"""NAdam: Adam with Nesterov momentum (Dozat), with momentum decay, decoupled weight decay and
maximize; the update is PyTorch's single-tensor one, in Tensor ops under ``no_grad`` (a dispatch
mode sees every computation)."""

from __future__ import annotations

import numpy as np

from .._ops.factory import zeros_like
from ..autograd.grad_mode import no_grad
from .optimizer import _AdamVariant, _check_adam_args, _new_state, _to_scalar, _with_grads, _zero_step

__all__ = ["NAdam"]


class NAdam(_AdamVariant):
    """NAdam: the Adam update with the first moment's Nesterov look-ahead; the momentum factor
    ``mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))`` warms up over the steps.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.NAdam([w], lr=0.1)
    >>> w.grad = ndgrad.tensor([3.0]); opt.step(); w
    tensor([0.8944], requires_grad=True)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False) -> None:
        _check_adam_args(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            beta1, beta2 = (_to_scalar(b) for b in group["betas"])
            eps, wd, decay = group["eps"], group["weight_decay"], group["momentum_decay"]
            decoupled = group["decoupled_weight_decay"]
            for p, grad in _with_grads(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _zero_step()
                    # NOTE(pytorch): the running product of the momentum factors is float32 state
                    state["mu_product"] = _new_state(np.ones((), np.float32))
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                with no_grad():
                    step_t, mu_product = state["step"], state["mu_product"]
                    step_t.add_(1)
                    step = float(step_t.item())
                    pr, g, exp_avg, exp_avg_sq = self._moments(p, grad, state, lr, beta1, beta2, wd,
                                                               group["maximize"], decoupled)
                    mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * decay)))
                    mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * decay)))
                    mu_product.mul_(mu)
                    mu_prod = float(mu_product.item())
                    denom = exp_avg_sq.div(1 - beta2**step).sqrt().add_(eps)
                    pr.addcdiv_(g, denom, value=-lr * (1.0 - mu) / (1.0 - mu_prod))
                    pr.addcdiv_(exp_avg, denom, value=-lr * mu_next / (1.0 - mu_prod * mu_next))
        return loss
