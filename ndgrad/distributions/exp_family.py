"""``ExponentialFamily``: the base of exponential-family distributions (``Normal``,
``Bernoulli``), which define ``_natural_params`` and ``_log_normalizer``."""

from __future__ import annotations

from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Distributions whose density is ``exp(<t(x), theta> - F(theta) + k(x))``."""

    @property
    def _natural_params(self) -> tuple:
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError
