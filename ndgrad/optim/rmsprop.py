"""RMSprop with momentum, centering, weight decay and maximize."""

from __future__ import annotations

import numpy as np

from .._dtype import float32
from .._ops.factory import zeros, zeros_like
from ..autograd.dispatch_mode import active as _modes  # non-empty while any dispatch mode is entered
from ..autograd.grad_mode import no_grad
from .adam import _lerp_
from .optimizer import Optimizer, _check_lr_eps, _grad_ops, _lerp_ops_, _new_state, _real, _to_scalar, _zero_step

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop: divide the gradient by a running root-mean-square of recent gradients.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.RMSprop([w], lr=0.01, alpha=0.75)
    >>> w.grad = ndgrad.tensor([2.0]); opt.step(); w
    tensor([0.9800], requires_grad=True)
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False) -> None:
        _check_lr_eps(lr, eps)
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, val in (("momentum", 0), ("centered", False), ("foreach", None),
                             ("maximize", False), ("differentiable", False),
                             ("capturable", False)):
                group.setdefault(key, val)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            alpha, eps, wd = group["alpha"], group["eps"], group["weight_decay"]
            momentum, centered, maximize = group["momentum"], group["centered"], group["maximize"]
            for p in group["params"]:
                m = p._meta
                grad = None if m is None else m.grad
                if grad is None:
                    continue
                state = self.state[p]
                if _modes and p._data.dtype.kind != "c":
                    _step_ops(p, grad, state, lr, alpha, eps, wd, momentum, centered, maximize)
                    continue
                pa, g = p._data, grad._data
                if len(state) == 0:
                    state["step"] = _zero_step()
                    state["square_avg"] = _new_state(np.zeros_like(pa))
                    if momentum > 0:
                        state["momentum_buffer"] = _new_state(np.zeros_like(pa))
                    if centered:
                        state["grad_avg"] = _new_state(np.zeros_like(pa))
                t1 = self._buf(pa, 1)
                state["step"]._data += 1
                g = self._update_grad(pa, g, maximize, wd)
                pr, g, t1 = _real(pa), _real(g), _real(t1)
                sq = _real(state["square_avg"]._data)
                sq *= alpha
                np.multiply(g, 1 - alpha, out=t1)
                t1 *= g
                sq += t1
                if centered:
                    ga = _real(state["grad_avg"]._data)
                    _lerp_(ga, g, 1 - alpha, t1)
                    np.multiply(ga, ga, out=t1)
                    np.subtract(sq, t1, out=t1)
                    np.sqrt(t1, out=t1)
                else:
                    np.sqrt(sq, out=t1)
                t1 += eps
                np.divide(g, t1, out=t1)
                if momentum > 0:
                    buf = _real(state["momentum_buffer"]._data)
                    buf *= momentum
                    buf += t1
                    np.multiply(buf, lr, out=t1)
                    pr -= t1
                else:
                    t1 *= -lr
                    pr += t1
                p._bump()
        return loss


def _step_ops(p, grad, state, lr, alpha, eps, wd, momentum, centered, maximize) -> None:
    """``RMSprop.step``'s array code in Tensor ops, bit for bit (see ``adam._step_ops``)."""
    with no_grad():
        if len(state) == 0:
            state["step"] = zeros((), dtype=float32)
            state["square_avg"] = zeros_like(p)
            if momentum > 0:
                state["momentum_buffer"] = zeros_like(p)
            if centered:
                state["grad_avg"] = zeros_like(p)
        state["step"].add_(1)
        g = _grad_ops(p, grad, maximize, wd)
        sq = state["square_avg"]
        sq.mul_(alpha)
        sq.add_(g.mul(1 - alpha).mul(g))
        if centered:
            ga = state["grad_avg"]
            _lerp_ops_(ga, g, 1 - alpha)
            denom = sq.sub(ga.mul(ga)).sqrt()
        else:
            denom = sq.sqrt()
        t = g.div(denom.add(eps))
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf.mul_(momentum)
            buf.add_(t)
            p.sub_(buf.mul(lr))
        else:
            p.add_(t.mul(-lr))
