"""Adafactor: Adam's second moment kept as row and column averages for matrices (Shazeer &
Stern), with a relative step size and update clipping; PyTorch's single-tensor update in Tensor
ops under ``no_grad``."""

from __future__ import annotations

import numpy as np

from .._ops.factory import zeros_like
from ..autograd.grad_mode import no_grad
from .optimizer import _WithFlags, _lerp_ops_, _to_scalar, _with_grads, _zero_step

__all__ = ["Adafactor"]


class Adafactor(_WithFlags):
    """Adafactor (``torch.optim.Adafactor``): for a gradient of two or more dims, the variance
    estimate is ``row_var @ col_var / mean(row_var)`` (their decay ``1 - t**beta2_decay``);
    vectors keep a full one. The step is ``max(eps2, rms(p)) * min(lr, t**-0.5)``, divided by
    ``max(1, rms(update) / d)``; ``weight_decay`` is decoupled.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = ndgrad.optim.Adafactor([w], lr=0.1)
    >>> w.grad = ndgrad.tensor([3.0, -1.0]); opt.step(); w
    tensor([0.8419, 2.1581], requires_grad=True)
    """

    _FLAGS = (("foreach", None),)

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False) -> None:
        if hasattr(lr, "numel") and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform a single optimization step."""
        loss = self._closure(closure)
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            eps1, eps2 = group["eps"]
            for p, grad in _with_grads(group):
                if p.is_complex():
                    raise RuntimeError("Adafactor does not support complex parameters")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _zero_step()
                    if grad.dim() > 1:
                        state["row_var"] = grad.new_zeros(grad.shape[:-1] + (1,))
                        state["col_var"] = grad.new_zeros(grad.shape[:-2] + (1,) + grad.shape[-1:])
                    else:
                        state["variance"] = zeros_like(grad)
                with no_grad():
                    self._update(p, grad.neg() if group["maximize"] else grad, state, lr,
                                 np.finfo(p._data.dtype).eps if eps1 is None else eps1, eps2, group)
        return loss

    @staticmethod
    def _update(p, grad, state, lr, eps1, eps2, group) -> None:
        state["step"].add_(1)
        t = float(state["step"].item())
        decay = t ** group["beta2_decay"]
        alpha = max(eps2, p.norm(2).item() / (p.numel() ** 0.5)) * min(lr, 1 / t**0.5)
        if group["weight_decay"] != 0:
            p.mul_(1 - lr * group["weight_decay"])
        if grad.dim() > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            _lerp_ops_(row_var, grad.norm(dim=-1, keepdim=True).square_().div_(grad.size(-1)), decay)
            _lerp_ops_(col_var, grad.norm(dim=-2, keepdim=True).square_().div_(grad.size(-2)), decay)
            var = row_var @ col_var
            var.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
        else:
            var = state["variance"]
            _lerp_ops_(var, grad * grad, decay)
            var = var.clone()
        update = var.clamp_(min=eps1 * eps1).rsqrt_().mul_(grad)
        denom = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * group["d"]))
        p.add_(update, alpha=-alpha / denom)
