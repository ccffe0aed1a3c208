"""Adam (and, with ``decoupled_weight_decay=True``, AdamW), with amsgrad and maximize."""

from __future__ import annotations

import numpy as np

from .._dtype import float32
from .._ops.factory import zeros, zeros_like
from ..autograd.dispatch_mode import active as _modes  # non-empty while any dispatch mode is entered
from ..autograd.grad_mode import no_grad
from .optimizer import (Optimizer, _check_adam_args, _grad_ops, _lerp_ops_, _new_state, _real,
                        _to_scalar, _zero_step)

__all__ = ["Adam"]


def _lerp_(a: np.ndarray, end: np.ndarray, w: float, tmp: np.ndarray) -> None:
    """``a.lerp_(end, w)`` with torch's two-sided formula (exact at both ends)."""
    np.subtract(end, a, out=tmp)
    if w < 0.5:
        tmp *= w
        a += tmp
    else:
        tmp *= 1 - w
        np.subtract(end, tmp, out=a)


def _step_ops(p, grad, state, lr, beta1, beta2, eps, wd, amsgrad, maximize, decoupled) -> None:
    """``Adam.step``'s array code in Tensor ops, bit for bit: under a dispatch mode (a capture)
    every computation of the step is a call the mode sees. (Complex parameters, updated as
    real pairs, keep the array code.)"""
    with no_grad():
        if len(state) == 0:
            state["step"] = zeros((), dtype=float32)
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_like(p)
        state["step"].add_(1)
        step = float(state["step"].item())
        g = _grad_ops(p, grad, maximize, 0 if decoupled else wd)
        if decoupled and wd != 0:
            p.mul_(1 - lr * wd)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        _lerp_ops_(exp_avg, g, 1 - beta1)
        exp_avg_sq.mul_(beta2)
        exp_avg_sq.add_(g.mul(1 - beta2).mul(g))
        step_size = lr / (1 - beta1**step)
        bc2_sqrt = (1 - beta2**step) ** 0.5
        if amsgrad:
            mx = state["max_exp_avg_sq"]
            mx.copy_(mx.maximum(exp_avg_sq))
            denom = mx.sqrt()
        else:
            denom = exp_avg_sq.sqrt()
        denom = denom.div(bc2_sqrt).add(eps)
        p.add_(exp_avg.div(denom).mul(-step_size))


class Adam(Optimizer):
    """Adam: adaptive moment estimation.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.Adam([w], lr=0.1)
    >>> w.grad = ndgrad.tensor([3.0]); opt.step(); w
    tensor([0.9000], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False) -> None:
        _check_adam_args(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, val in (("amsgrad", False), ("maximize", False), ("foreach", None),
                             ("capturable", False), ("differentiable", False),
                             ("decoupled_weight_decay", False), ("fused", None)):
                group.setdefault(key, val)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            beta1, beta2 = (_to_scalar(b) for b in group["betas"])
            eps, wd, amsgrad = group["eps"], group["weight_decay"], group["amsgrad"]
            maximize, decoupled = group["maximize"], group["decoupled_weight_decay"]
            for p in group["params"]:
                m = p._meta
                grad = None if m is None else m.grad
                if grad is None:
                    continue
                state = self.state[p]
                if _modes and p._data.dtype.kind != "c":
                    _step_ops(p, grad, state, lr, beta1, beta2, eps, wd, amsgrad, maximize, decoupled)
                    continue
                if len(state) == 0:
                    state["step"] = _zero_step()
                    state["exp_avg"] = _new_state(np.zeros_like(p._data))
                    state["exp_avg_sq"] = _new_state(np.zeros_like(p._data))
                    if amsgrad:
                        state["max_exp_avg_sq"] = _new_state(np.zeros_like(p._data))
                pa, g = p._data, grad._data
                t1 = self._buf(pa, 1)
                step_arr = state["step"]._data
                step_arr += 1
                step = float(step_arr)
                g = self._update_grad(pa, g, maximize, 0 if decoupled else wd)
                if decoupled and wd != 0:
                    pa *= 1 - lr * wd
                pr, g, t1 = _real(pa), _real(g), _real(t1)
                exp_avg = _real(state["exp_avg"]._data)
                exp_avg_sq = _real(state["exp_avg_sq"]._data)
                _lerp_(exp_avg, g, 1 - beta1, t1)
                exp_avg_sq *= beta2
                np.multiply(g, 1 - beta2, out=t1)
                t1 *= g
                exp_avg_sq += t1
                step_size = lr / (1 - beta1**step)
                bc2_sqrt = (1 - beta2**step) ** 0.5
                if amsgrad:
                    mx = _real(state["max_exp_avg_sq"]._data)
                    np.maximum(mx, exp_avg_sq, out=mx)
                    np.sqrt(mx, out=t1)
                else:
                    np.sqrt(exp_avg_sq, out=t1)
                t1 /= bc2_sqrt
                t1 += eps
                np.divide(exp_avg, t1, out=t1)
                t1 *= -step_size
                pr += t1
                p._bump()
        return loss
