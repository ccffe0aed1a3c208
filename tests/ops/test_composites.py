"""Functions PyTorch spells out that ndgrad composes from primitives (square, addcmul, diag,
repeat_interleave, diff, ...): the forms and errors the op-table samples do not cover, against
torch."""

from __future__ import annotations

import numpy as np
import pytest

RNG = np.random.default_rng(5)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((3, 4))
C = RNG.uniform(1, 2, (3, 4))


def test_repeat_interleave_of_counts_only(ref):
    ref.same(lambda T: T.repeat_interleave(T.tensor([2, 0, 3])))


def test_inplace_addcmul_addcdiv_like_optimizers_use_them(ref):
    def f(T):
        p = T.tensor(A)
        p.addcmul_(T.tensor(B), T.tensor(C), value=-0.5)
        p.addcdiv_(T.tensor(B), T.tensor(C).sqrt().add_(1e-8), value=0.1)
        return p, p._version if hasattr(p, "_version") else None

    ref.same(f)


def test_methods_and_grads(ref):
    def f(T):
        x = T.tensor(A, requires_grad=True)
        y = (x.square().sum() + x.diag().sum() + x[:, :3].trace() + x.swapaxes(0, 1).diff().sum()
             + x.logaddexp(T.tensor(B)).sum() + x.repeat_interleave(2, dim=1).sum()
             + x.take_along_dim(T.tensor([[1], [0], [3]]), 1).sum())
        y.backward()
        return y, x.grad

    ref.same(f)


@pytest.mark.parametrize("fn,exc", [
    (lambda T: T.diag(T.ones(2, 2, 2)), RuntimeError),
    (lambda T: T.trace(T.ones(3)), RuntimeError),
    (lambda T: T.addcdiv(T.tensor([1]), T.tensor([1]), T.tensor([1])), RuntimeError),
    (lambda T: T.repeat_interleave(T.ones(2, 2), T.tensor([1, 2, 3]), dim=0), RuntimeError),
])
def test_errors(ref, fn, exc):
    ref.raises(fn, exc)


def test_meshgrid_warns_without_indexing_and_takes_a_list(ref):
    def f(T):
        with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
            a = T.meshgrid(T.arange(3), T.arange(2))
        return a, T.meshgrid([T.arange(2), T.arange(3)], indexing="xy")

    ref.same(f)


def test_cdist_gradient_at_zero_distance_and_errors(ref):
    def f(T):
        x = T.tensor(A[:2], requires_grad=True)
        T.cdist(x, x.detach().clone()).sum().backward()
        return x.grad

    ref.same(f)
    ref.raises(lambda T: T.cdist(T.ones(3), T.ones(3)), RuntimeError,
               "cdist only supports at least 2D tensors, X1 got: 1D")
