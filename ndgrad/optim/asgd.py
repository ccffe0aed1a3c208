"""ASGD: stochastic gradient descent with iterate averaging (Polyak & Juditsky); PyTorch's
single-tensor update in Tensor ops under ``no_grad``."""

from __future__ import annotations

import numpy as np

from .._factories import as_tensor
from .._ops.factory import zeros_like
from ..autograd.grad_mode import no_grad
from .optimizer import (_WithFlags, _as_real, _check_lr_eps, _grad_ops, _new_state, _to_scalar,
                        _with_grads, _zero_step)

__all__ = ["ASGD"]


class ASGD(_WithFlags):
    """ASGD: ``p = p * (1 - lambd * eta) - eta * g``; the average ``ax`` follows ``p`` from step
    ``t0`` on (``mu = 1 / max(1, t - t0)``); ``eta = lr / (1 + lambd * lr * t) ** alpha``.
    ``eta`` and ``mu`` are float32 0-d tensors in the state, as PyTorch's.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.ASGD([w], lr=0.1)
    >>> w.grad = ndgrad.tensor([3.0]); opt.step(); w
    tensor([0.7000], requires_grad=True)
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False) -> None:
        _check_lr_eps(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            lambd, alpha, t0 = group["lambd"], group["alpha"], group["t0"]
            for p, grad in _with_grads(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _zero_step()
                    state["eta"] = _new_state(np.array(lr, np.float32))
                    state["mu"] = _new_state(np.ones((), np.float32))
                    state["ax"] = zeros_like(p)
                with no_grad():
                    # weight decay on the complex parameter is PyTorch's on its real view, bit
                    # for bit (a real scalar times each part)
                    g = _as_real(_grad_ops(p, grad, group["maximize"], group["weight_decay"]))
                    pr, ax = _as_real(p), _as_real(state["ax"])
                    state["step"].add_(1)
                    eta = float(state["eta"].item())
                    pr.mul_(1 - lambd * eta)
                    pr.add_(g, alpha=-eta)
                    mu = state["mu"]
                    if float(mu.item()) != 1:
                        ax.add_(pr.sub(ax).mul_(mu))
                    else:
                        ax.copy_(pr)
                    # as_tensor of a Python float: the default dtype's rounding, then the
                    # state's dtype (the parameter's after a load_state_dict), as PyTorch's
                    step = float(state["step"].item())
                    state["eta"].copy_(as_tensor(lr / ((1 + lambd * lr * step) ** alpha)))
                    state["mu"].copy_(as_tensor(1 / max(1, step - t0)))
        return loss
