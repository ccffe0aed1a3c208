"""Adagrad with learning-rate decay, weight decay, an initial accumulator and maximize."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ..autograd.dispatch_mode import active as _modes  # non-empty while any dispatch mode is entered
from ..autograd.grad_mode import no_grad
from .optimizer import Optimizer, _grad_ops, _new_state, _real, _to_scalar, _zero_step

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad: per-coordinate steps scaled by the root of the summed squared gradients.

    State is created at construction (``step`` and ``sum`` for every parameter), as in torch.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.Adagrad([w], lr=0.5)
    >>> w.grad = ndgrad.tensor([2.0]); opt.step(); w
    tensor([0.5000], requires_grad=True)
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False,
                 fused=None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(
                f"Invalid initial_accumulator_value value: {initial_accumulator_value}"
            )
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = _zero_step()
                init = initial_accumulator_value
                if p._data.dtype.kind == "c":
                    init = complex(init, init)
                state["sum"] = _new_state(np.full_like(p._data, init))

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, val in (("foreach", None), ("maximize", False), ("differentiable", False),
                             ("fused", None)):
                group.setdefault(key, val)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            lr_decay, eps, wd = group["lr_decay"], group["eps"], group["weight_decay"]
            maximize = group["maximize"]
            for p in group["params"]:
                m = p._meta
                grad = None if m is None else m.grad
                if grad is None:
                    continue
                state = self.state[p]
                if _modes and p._data.dtype.kind != "c":
                    _step_ops(p, grad, state, lr, lr_decay, eps, wd, maximize)
                    continue
                pa, g = p._data, grad._data
                t1 = self._buf(pa, 1)
                step_arr = state["step"]._data
                step_arr += 1
                step = float(step_arr)
                g = self._update_grad(pa, g, maximize, wd)
                clr = lr / (1 + (step - 1) * lr_decay)
                pr, g, t1 = _real(pa), _real(g), _real(t1)
                acc = _real(state["sum"]._data)
                np.multiply(g, g, out=t1)
                acc += t1
                np.sqrt(acc, out=t1)
                t1 += eps
                np.divide(g, t1, out=t1)
                t1 *= -clr
                pr += t1
                p._bump()
        return loss


def _step_ops(p, grad, state, lr, lr_decay, eps, wd, maximize) -> None:
    """``Adagrad.step``'s array code in Tensor ops, bit for bit (see ``adam._step_ops``)."""
    with no_grad():
        state["step"].add_(1)
        step = float(state["step"].item())
        g = _grad_ops(p, grad, maximize, wd)
        clr = lr / (1 + (step - 1) * lr_decay)
        acc = state["sum"]
        acc.add_(g.mul(g))
        p.add_(g.div(acc.sqrt().add(eps)).mul(-clr))
