"""Weight averaging (``torch.optim.swa_utils``): ``AveragedModel`` keeps a running average of a
model's parameters (equal weights for SWA, or an exponential moving average), ``SWALR`` anneals
each group's learning rate to a constant SWA rate, and ``update_bn`` recomputes batch-norm
statistics for the averaged weights with one pass over data."""

from __future__ import annotations

import copy
import itertools
import math

from .. import _dtype as D
from .._factories import tensor
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..nn.modules.module import Module
from ..nn.modules.normalization import _BatchNorm
from .lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _floating(t) -> bool:
    return t.is_floating_point() or t.is_complex()


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place update of a list of averaged tensors towards the model's: the exponential
    moving average ``ema = decay * ema + (1 - decay) * current`` (a ``lerp`` for floats)."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if _floating(ema_param_list[0]):
            for e, c in zip(ema_param_list, current_param_list, strict=True):
                e.lerp_(c, 1 - decay)
        else:
            for e, c in zip(ema_param_list, current_param_list, strict=True):
                e.copy_(e * decay + c * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """An in-place update of a list of averaged tensors: the equal-weight running mean."""
    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        if _floating(averaged_param_list[0]):
            w = float(1 / (num_averaged + 1))
            for a, c in zip(averaged_param_list, current_param_list, strict=True):
                a.lerp_(c, w)
        else:  # integers: as PyTorch's addcdiv refuses them with a tensor count
            for a, c in zip(averaged_param_list, current_param_list, strict=True):
                if isinstance(num_averaged, Tensor):
                    a.addcdiv_(c - a, num_averaged + 1)
                else:
                    a.add_(c - a, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """The exponential moving average of one tensor, returned (``avg_fn`` form)."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """The equal-weight running mean of one tensor, returned (``avg_fn`` form)."""
    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and with ``use_buffers``, buffers) are averaged over
    the calls of ``update_parameters(model)``: equally by default (SWA), or as ``avg_fn`` /
    ``multi_avg_fn`` say (``get_ema_multi_avg_fn(decay)`` for an EMA). The first call copies.
    ``n_averaged`` (a long buffer) counts the calls.

    >>> import ndgrad
    >>> m = ndgrad.nn.Linear(2, 1)
    >>> avg = ndgrad.optim.swa_utils.AveragedModel(m)
    >>> avg.update_parameters(m); int(avg.n_averaged)
    1
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=D.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model) -> None:
        """Average ``model``'s current parameters into this copy's."""
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.parameters(), model.parameters()
        averaged, current = [], []
        first = bool(self.n_averaged == 0)
        with no_grad():
            for a, c in zip(mine, theirs, strict=False):
                c = c.detach().to(a.device)
                averaged.append(a.detach())
                current.append(c)
                if first:
                    a.detach().copy_(c)
            n = int(self.n_averaged)
            if n > 0:
                if self.multi_avg_fn is not None:
                    for group_a, group_c in _by_device_and_dtype(averaged, current):
                        self.multi_avg_fn(group_a, group_c, self.n_averaged.to(group_a[0].device))
                else:
                    avg_fn = self.avg_fn if self.avg_fn is not None else get_swa_avg_fn()
                    for a, c in zip(averaged, current, strict=True):
                        a.copy_(avg_fn(a, c, self.n_averaged.to(a.device)))
            if not self.use_buffers:  # buffers (running statistics) follow the model's
                for b, bm in zip(self.module.buffers(), model.buffers(), strict=True):
                    b.detach().copy_(bm.detach().to(b.device))
            self.n_averaged += 1


def _by_device_and_dtype(averaged, current):
    """Pairs of lists grouped as PyTorch groups them for a ``multi_avg_fn`` (first-seen order)."""
    groups: dict = {}
    for a, c in zip(averaged, current, strict=True):
        key = (str(a.device), a.dtype)
        groups.setdefault(key, ([], []))
        groups[key][0].append(a)
        groups[key][1].append(c)
    return list(groups.values())


@no_grad()
def update_bn(loader, model, device=None) -> None:
    """Recompute every batch norm's running statistics with one pass over ``loader`` (each
    batch a tensor, or a list/tuple whose first element is the input): statistics reset, a
    cumulative average (momentum None) over the batches, momenta and training mode restored."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate from its value to ``swa_lr`` over ``anneal_epochs``
    steps (cosine or linear), then keeps it at ``swa_lr``."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1) -> None:
        for lr, group in zip(_format_param("swa_lr", optimizer, swa_lr), optimizer.param_groups,
                             strict=True):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', "
                             f"instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list:
        # The group's lr is the previous step's mix: undo it to find the starting rate, then
        # mix again at this step's fraction of the annealing.
        self._warn_get_lr()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        starts = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha)
                  for g in self.optimizer.param_groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha)
                for g, lr in zip(self.optimizer.param_groups, starts, strict=True)]

    def _set_anneal_func(self, anneal_strategy) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def state_dict(self) -> dict:
        """Every attribute except the optimizer and the annealing function."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
