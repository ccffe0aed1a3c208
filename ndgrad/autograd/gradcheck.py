"""``gradcheck`` / ``gradgradcheck``: compare analytical gradients with central differences.

The numerical Jacobian perturbs each input element in place (so strided and non-contiguous
inputs are checked as they are); the analytical one runs one ``grad`` per output element.
A mismatch raises ``GradcheckError`` naming the input and output and showing both Jacobians.
"""

from __future__ import annotations

import numpy as np

from .._dtype import INEXACT
from .._tensor import Tensor

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    pass


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _diff_outputs(outputs):
    return [o for o in outputs if isinstance(o, Tensor) and o._data.dtype in INEXACT]


def _numerical_jacobian(fn, inputs, i, outputs, eps):
    x = inputs[i]._data
    flat_out = [np.zeros((o._data.size, x.size)) for o in outputs]
    col = 0
    for idx in np.ndindex(x.shape):  # C order, matching ravel() of the gradients
        orig = x[idx].item()
        x[idx] = orig + eps
        plus = [o._data.astype(np.float64).ravel().copy() for o in _diff_outputs(_as_tuple(fn(*inputs)))]
        x[idx] = orig - eps
        minus = [o._data.astype(np.float64).ravel().copy() for o in _diff_outputs(_as_tuple(fn(*inputs)))]
        x[idx] = orig
        for j, (p, m) in enumerate(zip(plus, minus, strict=True)):
            flat_out[j][:, col] = (p - m) / (2 * eps)
        col += 1
    return flat_out


def _analytical_jacobian(outputs, inputs, diff_idx):
    from .api import grad

    jac = {(j, i): np.zeros((o._data.size, inputs[i]._data.size)) for j, o in enumerate(outputs) for i in diff_idx}
    for j, o in enumerate(outputs):
        if not o.requires_grad:
            continue
        for k in range(o._data.size):
            v = np.zeros(o._data.size, o._data.dtype)
            v[k] = 1
            g = grad(o, [inputs[i] for i in diff_idx], Tensor._make(v.reshape(o._data.shape), None, 0, None),
                     retain_graph=True, allow_unused=True)
            for i, gi in zip(diff_idx, g, strict=True):
                if gi is not None:
                    jac[(j, i)][k, :] = gi._data.ravel()
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_backward_ad=True, fast_mode=False, masked=None) -> bool:
    """Check gradients of ``func`` at ``inputs`` against finite differences (float64 inputs)."""
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them have requires_grad=True.")
    for i in diff_idx:
        if inputs[i]._data.dtype != np.float64:
            raise ValueError(f"Input #{i} requires gradient and is not a double precision floating point. "
                             "gradcheck uses finite differences and needs float64 inputs.")
    outputs = _diff_outputs(_as_tuple(func(*inputs)))
    analytical = _analytical_jacobian(outputs, inputs, diff_idx)
    for i in diff_idx:
        numerical = _numerical_jacobian(func, inputs, i, outputs, eps)
        for j in range(len(outputs)):
            a = analytical[(j, i)]
            n = numerical[j]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                msg = (f"Jacobian mismatch for output {j} with respect to input {i},\n"
                       f"numerical:{n}\nanalytical:{a}\n")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False, masked=False) -> bool:
    """Check second derivatives: gradcheck of the function computing ``func``'s vector-Jacobian product."""
    from .api import grad

    inputs = _as_tuple(inputs)
    diff_idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    outputs = _diff_outputs(_as_tuple(func(*inputs)))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            Tensor._make(rng.standard_normal(o._data.shape), None, 0, None).requires_grad_()
            for o in outputs
        )
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)

    def vjp(*args):
        ins, gos = args[:n_in], args[n_in:]
        outs = _diff_outputs(_as_tuple(func(*ins)))
        pairs = [(o, g) for o, g in zip(outs, gos, strict=True) if o.requires_grad]
        if not pairs:
            return ()
        res = grad([o for o, _ in pairs], [ins[i] for i in diff_idx], [g for _, g in pairs],
                   create_graph=True, allow_unused=True)
        return tuple(r for r in res if r is not None)

    return gradcheck(vjp, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
