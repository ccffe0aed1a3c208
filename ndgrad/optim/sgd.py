"""SGD with momentum, dampening, Nesterov, weight decay and maximize (torch's per-tensor math)."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ..autograd.dispatch_mode import active as _modes  # non-empty while any dispatch mode is entered
from ..autograd.grad_mode import no_grad
from .optimizer import Optimizer, _new_state, _to_scalar

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent (optionally with momentum).

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> w.grad = ndgrad.tensor([1.0]); opt.step(); opt.step(); w
    tensor([0.7100], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, val in (("nesterov", False), ("maximize", False), ("foreach", None),
                             ("differentiable", False), ("fused", False)):
                group.setdefault(key, val)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            momentum, dampening = group["momentum"], group["dampening"]
            wd, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
            for p in group["params"]:
                m = p._meta
                grad = None if m is None else m.grad
                if grad is None:
                    continue
                if _modes:
                    _step_ops(p, grad, self.state[p], lr, momentum, dampening, wd, nesterov, maximize)
                    continue
                pa, g = p._data, grad._data
                g = self._update_grad(pa, g, maximize, wd)
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        state["momentum_buffer"] = _new_state(g.copy())
                        b = state["momentum_buffer"]._data
                    else:
                        b = buf._data
                        b *= momentum
                        if dampening == 0:
                            b += g
                        else:
                            t1 = self._buf(pa, 1)
                            np.multiply(g, 1 - dampening, out=t1)
                            b += t1
                    if nesterov:
                        t1 = self._buf(pa, 1)
                        np.multiply(b, momentum, out=t1)
                        np.add(g, t1, out=t1)
                        g = t1
                    else:
                        g = b
                t1 = self._buf(pa, 1)
                np.multiply(g, lr, out=t1)
                np.subtract(pa, t1, out=pa)
                p._bump()
        return loss


def _step_ops(p, grad, state, lr, momentum, dampening, wd, nesterov, maximize) -> None:
    """The same update as ``step``'s array code, in Tensor ops: under a dispatch mode (a capture)
    every computation of the step is a call the mode sees."""
    with no_grad():
        g = grad.neg() if maximize else grad
        if wd != 0:
            g = p.mul(wd).add(g)
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.clone()
            else:
                buf.mul_(momentum)
                buf.add_(g if dampening == 0 else g.mul(1 - dampening))
            g = g.add(buf.mul(momentum)) if nesterov else buf
        p.sub_(g.mul(lr))
