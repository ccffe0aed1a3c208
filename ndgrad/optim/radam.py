"""RAdam: Adam whose adaptive step is rectified while the second moment's variance estimate is
unreliable (Liu et al.), with decoupled weight decay and maximize; PyTorch's single-tensor update
in Tensor ops under ``no_grad`` (a dispatch mode sees every computation)."""

from __future__ import annotations

from .._ops.factory import zeros_like
from ..autograd.grad_mode import no_grad
from .optimizer import _AdamVariant, _check_adam_args, _to_scalar, _with_grads, _zero_step

__all__ = ["RAdam"]


class RAdam(_AdamVariant):
    """RAdam: while ``rho_t`` (the approximated length of the moving average) is at most 5 the
    step is plain bias-corrected momentum; after, the Adam step times the rectification term.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.RAdam([w], lr=0.1)
    >>> w.grad = ndgrad.tensor([3.0]); opt.step(); w
    tensor([0.7000], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False) -> None:
        _check_adam_args(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            beta1, beta2 = (_to_scalar(b) for b in group["betas"])
            eps, wd, decoupled = group["eps"], group["weight_decay"], group["decoupled_weight_decay"]
            rho_inf = 2 / (1 - beta2) - 1
            for p, grad in _with_grads(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _zero_step()
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                with no_grad():
                    state["step"].add_(1)
                    step = float(state["step"].item())
                    pr, _, exp_avg, exp_avg_sq = self._moments(p, grad, state, lr, beta1, beta2, wd,
                                                               group["maximize"], decoupled)
                    bc2 = 1 - beta2**step
                    update = exp_avg.div(1 - beta1**step).mul(lr)
                    rho_t = rho_inf - 2 * step * (beta2**step) / bc2
                    if rho_t > 5.0:
                        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                                / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                        adaptive = exp_avg_sq.sqrt().add_(eps).reciprocal().mul(bc2**0.5)
                        update = update.mul(adaptive).mul(rect)
                    pr.sub_(update)
        return loss
