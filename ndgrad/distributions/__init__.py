"""``ndgrad.distributions``: torch.distributions' API (Normal, Categorical, Bernoulli, Uniform,
MultivariateNormal, ``kl_divergence``, ``constraints``) built on ndgrad ops, so ``rsample`` and
``log_prob`` are differentiable. Samples are drawn through ndgrad's random ops."""

from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform

__all__ = [
    "Bernoulli",
    "Categorical",
    "Distribution",
    "ExponentialFamily",
    "MultivariateNormal",
    "Normal",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
]
