"""Complex gradients in PyTorch's convention (the conjugate Wirtinger derivative): holomorphic
ops (their formulas are plain transposes, applied between two conjugations by the complex node
classes), anti- and non-holomorphic ones (conj, abs, real/imag, view_as_real/complex, polar),
real leaves feeding complex ops, in-place ops, and forward AD's tangents, all against torch."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad

Y = [2 - 1j, 0.5 + 1j]

CASES = {
    "mul_real": lambda T, x: (x * T.tensor(Y)).real.sum(),
    "mul_abs": lambda T, x: (x * T.tensor(Y)).abs().sum(),
    "square_abs": lambda T, x: (x * x).abs().sum(),
    "exp_real": lambda T, x: x.exp().real.sum(),
    "div": lambda T, x: (1 / x).abs().sum() + (x / (x + 1)).imag.sum(),
    "sin_pow_sqrt": lambda T, x: (x.sin() ** 2).abs().sum() + x.sqrt().real.sum(),
    "log_tanh_sigmoid": lambda T, x: (x.log() + x.tanh() + x.sigmoid()).abs().sum(),
    "matmul": lambda T, x: (x[:, None] @ x[None, :]).abs().sum(),
    "dot": lambda T, x: T.dot(x, x * 1j).real,
    "sum_mean_prod": lambda T, x: (x.sum() * x.mean() + x.prod()).abs(),
    "cumsum_cat": lambda T, x: T.cat([x.cumsum(0), x * 2]).abs().sum(),
    "conj": lambda T, x: (x.conj() * x).real.sum() + x.conj().imag.sum(),
    "abs": lambda T, x: x.abs().sum(),
    "angle": lambda T, x: (x * T.tensor(Y)).angle().sum() + x.angle().square().sum(),
    "real_imag": lambda T, x: (x.real * 2 + x.imag * 3).sum(),
    "view_as_real": lambda T, x: T.view_as_real(x * 2)[..., 1].sum(),
    "view_as_complex": lambda T, x: (T.view_as_complex(T.view_as_real(x) * 2) * T.tensor(Y)).abs().sum(),
    "inplace": lambda T, x: x.clone().mul_(x).exp_().abs().sum(),
    "inplace_view": lambda T, x: (lambda y: (y[0:1].mul_(2j), y)[1])(x * 1).abs().sum(),
}


@pytest.mark.parametrize("name", list(CASES))
def test_complex_gradient_matches_torch(name, torch_or_skip):
    torch = torch_or_skip

    def run(T):
        x = T.tensor([1 + 2j, 3 - 1j], dtype=T.complex128, requires_grad=True)
        CASES[name](T, x).backward()
        return x.grad.numpy()

    np.testing.assert_allclose(run(ndgrad), run(torch), rtol=1e-10, atol=1e-12)


def test_real_leaf_and_polar_and_double_backward(torch_or_skip):
    torch = torch_or_skip

    def run(T):
        r = T.tensor([1.0, 2.0], dtype=T.float64, requires_grad=True)
        th = T.tensor([0.3, -1.2], dtype=T.float64, requires_grad=True)
        z = T.tensor([1 + 2j, 3 - 1j], dtype=T.complex128)
        ((r * z).abs().sum() + (T.polar(r, th) * z).real.sum()).backward()
        x = T.tensor([1 + 2j, 3 - 1j], dtype=T.complex128, requires_grad=True)
        (g,) = T.autograd.grad((x * x * x).abs().sum(), x, create_graph=True)
        (gg,) = T.autograd.grad(g.abs().sum(), x)
        return r.grad.numpy(), th.grad.numpy(), g.detach().numpy(), gg.numpy()

    for a, b in zip(run(ndgrad), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["mul", "exp", "abs", "angle", "matmul"])
def test_complex_forward_ad_matches_torch(name, torch_or_skip):
    torch = torch_or_skip
    fns = {"mul": lambda T, x: x * T.tensor(Y), "exp": lambda T, x: x.exp(), "abs": lambda T, x: x.abs(),
           "angle": lambda T, x: x.angle(), "matmul": lambda T, x: x[:, None] @ x[None, :]}

    def run(T):
        fwad = T.autograd.forward_ad
        with fwad.dual_level():
            x = fwad.make_dual(T.tensor([1 + 2j, 3 - 1j]), T.tensor([0.5 - 1j, 2 + 0j]))
            return fwad.unpack_dual(fns[name](T, x)).tangent.numpy()

    np.testing.assert_allclose(run(ndgrad), run(torch), rtol=1e-6)
