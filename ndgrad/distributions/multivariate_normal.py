"""``MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril)``.

Everything is computed from the lower Cholesky factor ``L`` of the covariance: samples are
``loc + L @ eps``, densities solve ``L y = x - loc``.
"""

from __future__ import annotations

import math
from typing import ClassVar

from .. import linalg
from .._ops.factory import randn
from .._tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .utils import _EMPTY, broadcast_shapes, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(bmat: Tensor, bvec: Tensor) -> Tensor:
    """Batched matrix-vector product, broadcasting the batch dimensions."""
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _solve_lower(L: Tensor, b: Tensor) -> Tensor:
    """``L^{-1} b`` for vectors ``b`` (batch dimensions broadcast)."""
    shape = broadcast_shapes(L.shape[:-2], b.shape[:-1])
    n = L.shape[-1]
    L = L.tril()  # NOTE(pytorch): a triangular solve reads (and differentiates) the lower half only
    L = L.expand(tuple(shape) + (n, n))
    b = b.expand(tuple(shape) + (n,))
    return linalg.solve(L, b.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL: Tensor, bx: Tensor) -> Tensor:
    """The squared Mahalanobis distance ``x^T (L L^T)^{-1} x``."""
    return _solve_lower(bL, bx).pow(2).sum(-1)


class MultivariateNormal(Distribution):
    """A multivariate normal distribution, given exactly one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril``.

    >>> import ndgrad
    >>> m = ndgrad.distributions.MultivariateNormal(ndgrad.zeros(2), ndgrad.eye(2))
    >>> m.log_prob(ndgrad.zeros(2))
    tensor(-1.8379)
    """

    arg_constraints: ClassVar[dict] = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc: Tensor,
        covariance_matrix: Tensor | None = None,
        precision_matrix: Tensor | None = None,
        scale_tril: Tensor | None = None,
        validate_args=None,
    ) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (
            precision_matrix is not None
        ) != 1:
            raise ValueError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril "
                "may be specified."
            )
        n = loc.shape[-1]
        if scale_tril is not None:
            if scale_tril.dim() < 2:
                raise ValueError(
                    "scale_tril matrix must be at least two-dimensional, "
                    "with optional leading batch dimensions"
                )
            matrix = scale_tril
        elif covariance_matrix is not None:
            if covariance_matrix.dim() < 2:
                raise ValueError(
                    "covariance_matrix must be at least two-dimensional, "
                    "with optional leading batch dimensions"
                )
            matrix = covariance_matrix
        else:
            if precision_matrix.dim() < 2:
                raise ValueError(
                    "precision_matrix must be at least two-dimensional, "
                    "with optional leading batch dimensions"
                )
            matrix = precision_matrix
        batch_shape = broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
        full = tuple(batch_shape) + (n, n)
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(full)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(full)
        else:
            self.precision_matrix = precision_matrix.expand(full)
        self.loc = loc.expand(tuple(batch_shape) + (n,))
        super().__init__(batch_shape, Size((n,)), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = linalg.cholesky(linalg.inv(precision_matrix))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        return linalg.inv(L @ L.mT).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return (
            self._unbroadcasted_scale_tril.pow(2)
            .sum(-1)
            .expand(tuple(self._batch_shape) + tuple(self._event_shape))
        )

    def rsample(self, sample_shape=_EMPTY):
        shape = tuple(self._extended_shape(sample_shape))
        eps = randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + M) - self._half_log_det()

    def entropy(self):
        n = self._event_shape[0]
        H = 0.5 * n * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))
