"""``Categorical(probs | logits)``: a distribution over ``{0, ..., K-1}``."""

from __future__ import annotations

import math
from typing import ClassVar

from .._ops.factory import arange, full
from .._tensor import Size, Tensor
from ..autograd.grad_mode import no_grad
from ..nn import functional as F
from . import constraints
from .distribution import Distribution
from .utils import _EMPTY, _finfo_min, lazy_property, probs_to_logits

__all__ = ["Categorical"]


class Categorical(Distribution):
    """A categorical distribution over the last dimension of ``probs`` (or ``logits``).

    >>> import ndgrad
    >>> ndgrad.distributions.Categorical(probs=ndgrad.tensor([0.25, 0.75])).entropy()
    tensor(0.5623)
    """

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }
    has_enumerate_support = True

    def __init__(
        self, probs: Tensor | None = None, logits: Tensor | None = None, validate_args=None
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = Size(batch_shape)
        param_shape = tuple(batch_shape) + (self._num_events,)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(param_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(param_shape)
            new._param = new.logits
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return F.softmax(self.logits, dim=-1)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @property
    def mean(self):
        return full(
            tuple(self._extended_shape()),
            math.nan,
            dtype=self.probs.dtype,
            device=self.probs.device,
        )

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return full(
            tuple(self._extended_shape()),
            math.nan,
            dtype=self.probs.dtype,
            device=self.probs.device,
        )

    def sample(self, sample_shape=_EMPTY):
        if not isinstance(sample_shape, Size):
            sample_shape = Size(sample_shape)
        with no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            samples_2d = probs_2d.multinomial(sample_shape.numel(), True).T
            return samples_2d.reshape(tuple(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        shape = tuple(
            max(a, b)
            for a, b in zip(
                (1,) * (self.logits.dim() - value.dim()) + tuple(value.shape),
                (1,) * (value.dim() - self.logits.dim()) + tuple(self.logits.shape),
            )
        )
        value = value.expand(shape[:-1] + (value.shape[-1],))
        log_pmf = self.logits.expand(shape)
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=_finfo_min(self.logits.dtype))
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand=True):
        num_events = self._num_events
        values = arange(num_events, dtype=self._param.dtype, device=self._param.device).long()
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
