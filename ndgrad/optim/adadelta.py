"""Adadelta: per-element step sizes from running averages of squared gradients and updates."""

from __future__ import annotations

from .._ops.factory import zeros_like
from .._ops.shape import view_as_real
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from .optimizer import Optimizer, _to_scalar, _zero_step

__all__ = ["Adadelta"]


def _update(p, grad, state, lr, rho, eps, wd, maximize) -> None:
    """One Adadelta update of ``p`` in place (complex values update as real pairs, as torch's
    ``view_as_real``)."""
    square_avg, acc_delta = state["square_avg"], state["acc_delta"]
    if p.is_complex():
        p, grad = view_as_real(p), view_as_real(grad)
        square_avg, acc_delta = view_as_real(square_avg), view_as_real(acc_delta)
    if maximize:
        grad = grad.neg()
    if wd != 0:
        grad = grad.add(p, alpha=wd)
    square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
    std = square_avg.add(eps).sqrt_()
    delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
    acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
    p.add_(delta, alpha=-lr)


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012).

    The update runs in Tensor ops under ``no_grad`` (one path, seen by dispatch modes too); its
    cost is a handful of pointwise ops per parameter, as torch's single-tensor path.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.Adadelta([w], lr=1.0)
    >>> w.grad = ndgrad.tensor([3.0]); opt.step(); w
    tensor([0.9968], requires_grad=True)
    """

    def __init__(
        self,
        params,
        lr=1.0,
        rho=0.9,
        eps=1e-6,
        weight_decay=0,
        foreach=None,
        *,
        capturable=False,
        maximize=False,
        differentiable=False,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "capturable": capturable,
            "foreach": foreach,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, val in (
                ("foreach", None),
                ("maximize", False),
                ("differentiable", False),
                ("capturable", False),
            ):
                group.setdefault(key, val)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            rho, eps, wd, maximize = (
                group["rho"],
                group["eps"],
                group["weight_decay"],
                group["maximize"],
            )
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                with no_grad():
                    if len(state) == 0:
                        state["step"] = _zero_step()
                        state["square_avg"] = zeros_like(p)
                        state["acc_delta"] = zeros_like(p)
                    state["step"].add_(1)
                    _update(p, p.grad, state, lr, rho, eps, wd, maximize)
        return loss
