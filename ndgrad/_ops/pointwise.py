"""Pointwise ops: arithmetic, transcendental functions, activations, comparisons.

Each op is one ``defop``: forward on arrays, backward formulas in Tensor ops (so they are
differentiable again), samples. Broadcast reduction and dtype casts of gradients happen in the
engine, never here. Comparisons and logical ops have no formulas (their outputs are bool).
"""

from __future__ import annotations

import cmath
import math

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._tensor import Tensor
from .registry import NAMESPACES, OPS, defcomposite, definplace, defop
from .registry import PROMOTE_COMMON as COMMON
from .registry import PROMOTE_FLOAT as FLOAT
from .samples import binary, nc, sample, unary

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


_erf = _backend.erf  # NumPy has none: the array's library supplies it


# --- arithmetic ---
def _add(x, y, alpha):
    return np.add(x, y) if alpha == 1 else np.add(x, np.multiply(y, alpha))


defop("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", _add,
      {"self": lambda grad: grad,
       "other": lambda grad, alpha: grad if alpha == 1 else grad * alpha}, jvp="elementwise",
      promote=COMMON, promote_args=("self", "other"), inplace="add_",
      samples=binary())


def _sub(x, y, alpha):
    if getattr(x, "dtype", None) == np.bool_ and getattr(y, "dtype", None) == np.bool_:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
            "`logical_xor()` operator instead."
        )
    return np.subtract(x, y) if alpha == 1 else np.subtract(x, np.multiply(y, alpha))


defop("sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", _sub,
      {"self": lambda grad: grad,
       "other": lambda grad, alpha: -grad if alpha == 1 else grad * (-alpha)}, jvp="elementwise",
      promote=COMMON, promote_args=("self", "other"), inplace="sub_",
      samples=binary())

# NOTE(pytorch): ``1 - x`` records rsub.Scalar (RsubBackward1, one edge), not sub.Tensor.
defop("rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
      lambda x, y, alpha: _sub(y, x, alpha),
      {"self": lambda grad, alpha: -grad if alpha == 1 else grad * (-alpha),
       "other": lambda grad: grad}, jvp="elementwise",
      promote=COMMON, promote_args=("self", "other"), api=False, method=False, torch="torch.rsub",
      samples=binary())


def _rsub_scalar(x, other, alpha):
    if x.dtype.kind not in "fc" or (type(other) is not float and type(other) is not int):
        other = _py(other)
        if x.dtype == np.bool_:
            if type(other) is bool:
                _sub(x, x, 1)  # raises PyTorch's message for two bools
            raise RuntimeError(
                "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
        dt = D.result_type((x, other)).np
        if dt.kind not in "fc" and isinstance(alpha, float):
            raise RuntimeError(
                "For integral input tensors, argument alpha must not be a floating point number.")
        if dt != x.dtype:
            x = x.astype(dt)
    return np.subtract(other, x) if alpha == 1 else np.subtract(other, np.multiply(x, alpha))


defop("rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", _rsub_scalar,
      {"self": lambda grad, alpha: -grad if alpha == 1 else grad * (-alpha)}, jvp="elementwise",
      api=False, method=False, node_name="RsubBackward1", torch="torch.rsub",
      samples=lambda rng: [sample("one", rng.uniform(-2, 2, (3, 4)), 1),
                           sample("alpha_nc", nc(rng.uniform(-2, 2, (3, 4))), 2.5, 3),
                           sample("0d", rng.uniform(-2, 2, ()), -0.5),
                           sample("int_float", np.array([1, 2, 3]), 1.5),
                           sample("int", np.array([1, 2, 3], dtype=np.int32), 4, 2)])


def rsub(input, other, alpha=1):
    """``torch.rsub``: ``other - alpha * input``."""
    if not isinstance(input, Tensor):
        raise TypeError(
            f"rsub() received an invalid combination of arguments - got ({type(input).__name__}, "
            f"{type(other).__name__}), but expected one of:\n"
            " * (Tensor input, Tensor other, *, Number alpha = 1)\n"
            " * (Tensor input, Number other, Number alpha = 1)\n")
    if isinstance(other, Tensor):
        return OPS["rsub.Tensor"].call(input, other, alpha=alpha)
    return _rsub_scalar_call(input, _py(other), alpha)


_rsub_scalar_call = OPS["rsub.Scalar"].call
defcomposite(rsub, method=False, samples=lambda rng: [
    sample("tensor", rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (4,))),
    sample("scalar_alpha", rng.uniform(-2, 2, (3, 4)), 2, 3)])

defop("mul.Tensor(Tensor self, Tensor other) -> Tensor", "multiply",
      {"self": lambda grad, other: grad * other,
       "other": lambda grad, self: grad * self}, jvp="elementwise",
      promote=COMMON, inplace="mul_", samples=binary())


def _div(x, y, rounding_mode):
    if rounding_mode is None:
        if np.result_type(x, y).kind not in "fc":  # true division of integers: default float
            dt = D._default[0].np
            if dt is D.BF16:  # NumPy has no integer-to-bfloat16 division loop
                return np.true_divide(x, y, dtype=np.float32).astype(dt)
            return np.true_divide(x, y, dtype=dt)
        return np.true_divide(x, y)
    if rounding_mode == "trunc":
        q = np.true_divide(x, y) if np.result_type(x, y).kind in "fc" else None
        return np.trunc(q).astype(q.dtype) if q is not None else _int_trunc_div(x, y)
    if rounding_mode == "floor":
        return np.floor_divide(x, y)
    raise RuntimeError(
        f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
    )


def _int_trunc_div(x, y):
    q = np.floor_divide(x, y)
    fix = (np.remainder(x, y) != 0) & (np.less(x, 0) != np.less(y, 0))
    return q + fix.astype(q.dtype)


defop("div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode=None) -> Tensor", _div,
      {"self": lambda grad, other, rounding_mode: grad / other if rounding_mode is None else grad * 0,
       "other": lambda grad, self, other, rounding_mode:
           -grad * self / (other * other) if rounding_mode is None else grad * 0},
      jvp="elementwise", promote=COMMON, promote_args=("self", "other"), inplace="div_",
      samples=lambda rng: binary(rhs_domain=(0.5, 2.0))(rng)
      + [sample("floor", rng.uniform(-3, 3, (3, 4)), rng.uniform(0.5, 2, (4,)), rounding_mode="floor"),
         sample("trunc", rng.uniform(-3, 3, (3, 4)), rng.uniform(0.5, 2, (4,)), rounding_mode="trunc"),
         sample("int_true", np.array([5, -7, 9]), np.array([2, 2, -4]))])

defop("neg(Tensor self) -> Tensor", "negative", {"self": lambda grad: -grad}, jvp="elementwise",
      inplace="neg_", samples=unary())


# pow has PyTorch's three overloads (PowBackward0/1/2); ``pow`` below picks one by argument type.
# A Python-number operand is a weak scalar: the forwards apply PyTorch's promotion themselves, as
# the generated fast path promotes over Tensor parameters only.
def _pow(x, e):
    try:
        return np.power(x, e)
    except ValueError as err:  # integer base, negative integer exponent
        raise RuntimeError("Integers to negative integer powers are not allowed.") from err


def _py(v):
    return v.item() if isinstance(v, np.generic) else v


def _pow_tensor_scalar(x, e):
    if x.dtype.kind not in "fc" or (type(e) is not float and type(e) is not int):
        e = _py(e)
        dt = D.result_type((x, e)).np
        if dt != x.dtype:
            x = x.astype(dt)
    return _pow(x, e)


def _pow_grad(grad, self, exponent):
    if exponent == 0:  # NOTE(pytorch): zeros even where self ** -1 is inf (pow_backward)
        return self * 0
    return grad * (exponent * self.pow(exponent - 1))


_pow_ts_rec = defop("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", _pow_tensor_scalar,
      {"self": _pow_grad}, jvp="elementwise",
      api=False, method=False, inplace="pow_", torch="torch.pow",
      samples=lambda rng: [
          sample("square", rng.uniform(-2, 2, (3, 4)), 2),
          sample("half_nc", nc(rng.uniform(0.5, 2, (3, 4))), 0.5),
          sample("neg_0d", rng.uniform(0.5, 2, ()), -1.5),
          sample("zero", rng.uniform(-2, 2, (5,)), 0),
          sample("int_half", np.array([1, 4, 9]), 0.5),
          sample("int_square", np.array([-3, 2, 5]), 2),
          sample("bool_int", np.array([True, False]), 3)])
pow_tensor_scalar = _pow_ts_rec.call
pow_tensor_scalar_ = OPS["pow_"].call


def _pow_self_grad(grad, self, exponent):
    if not isinstance(exponent, Tensor):  # a Python exponent passed to the Tensor overload
        return _pow_grad(grad, self, exponent)
    return where(exponent == 0, 0.0, grad * (exponent * self.pow(exponent - 1)))


def _pow_exponent_grad(grad, self, exponent, result):
    # NOTE(pytorch): d/de self**e is 0 where self == 0 and e >= 0 (pow_backward_exponent)
    mask = (self == 0) & (exponent >= 0)
    safe = where(mask, 1.0, self)  # log(1) = 0 there, so double backward stays finite
    return grad * where(mask, 0.0, result * safe.log())


pow_tensor_tensor = defop("pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", _pow,
      {"self": _pow_self_grad, "exponent": _pow_exponent_grad}, jvp="elementwise",
      promote=COMMON, api=False, method=False, node_name="PowBackward1", torch="torch.pow",
      samples=lambda rng: [
          sample("tensor_exp", rng.uniform(0.5, 2, (3, 4)), rng.uniform(-2, 2, (3, 4))),
          sample("bcast", rng.uniform(0.5, 2, (3, 4)), rng.uniform(-2, 2, (4,))),
          sample("0d_exp", rng.uniform(0.5, 2, (3, 4)), np.array(2.0)),
          sample("int_exp_nc", nc(rng.uniform(-2, 2, (3, 4))), np.array([0, 1, 2, 3])),
          sample("zero_base", np.array([0.0, 0.0, 1.5]), np.array([1.0, 2.0, 1.0]), no_grad=(0,))]).call
pow_tensor_tensor_ = definplace(OPS["pow.Tensor_Tensor"], "pow_.Tensor").call
delattr(Tensor, "pow_.Tensor")  # published under its record name; ``Tensor.pow_`` picks below


def _int_pow_scalar_base(s, e):
    # NOTE(pytorch): an integer scalar base to a negative power gives 0 (or +-1 for a +-1 base)
    neg = e < 0
    out = np.power(s, np.where(neg, -e, e))
    return out if s == 1 or s == -1 else np.where(neg, 0, out).astype(out.dtype, copy=False)


def _pow_scalar(s, e):
    if e.dtype.kind not in "fc" or (type(s) is not float and type(s) is not int):
        s = _py(s)
        dt = D.result_type((s, e)).np
        if dt != e.dtype:
            e = e.astype(dt)
        if dt.kind in "iu":
            return _int_pow_scalar_base(s, e)
    return np.power(s, e)


def _pow_scalar_grad(grad, self, exponent, result):
    if self == 0:  # log(0) = -inf; NOTE(pytorch): 0 where exponent >= 0 (pow_backward_exponent)
        return grad * (result * where(exponent >= 0, 0.0, -math.inf))
    log = cmath.log(self) if isinstance(self, complex) else math.log(self) if self > 0 else math.nan
    return grad * (result * log)


pow_scalar = defop("pow.Scalar(Scalar self, Tensor exponent) -> Tensor", _pow_scalar,
      {"exponent": _pow_scalar_grad}, jvp="elementwise",
      api=False, method=False, node_name="PowBackward2", torch="torch.pow",
      samples=lambda rng: [
          sample("two", 2, rng.uniform(-2, 2, (3, 4))),
          sample("float_nc", 2.5, nc(rng.uniform(-2, 2, (3, 4)))),
          sample("0d", 0.5, rng.uniform(-2, 2, ())),
          sample("zero_base", 0.0, np.array([0.5, 1.0, 2.0])),
          sample("int_exp", 2, np.array([-1, 0, 3])),
          sample("float_int_exp", 2.5, np.array([-1, 0, 3]))]).call


def pow(input, exponent):
    """``torch.pow``: ``input ** exponent``; either may be a Python number, not both."""
    te = type(exponent)
    if (te is int or te is float) and type(input) is Tensor:  # x ** 2: the common case first
        return pow_tensor_scalar(input, exponent)
    if isinstance(exponent, Tensor):
        if isinstance(input, Tensor):
            return pow_tensor_tensor(input, exponent)
        if isinstance(input, (int, float, complex, np.number, np.bool_)):
            return pow_scalar(_py(input), exponent)
    elif isinstance(input, Tensor):
        return pow_tensor_scalar(input, _py(exponent))
    raise TypeError(
        f"pow() received an invalid combination of arguments - got ({type(input).__name__}, "
        f"{type(exponent).__name__}), but expected one of:\n"
        " * (Tensor input, Tensor exponent, *, Tensor out = None)\n"
        " * (Number self, Tensor exponent, *, Tensor out = None)\n"
        " * (Tensor input, Number exponent, *, Tensor out = None)\n")


def pow_(self, exponent):
    """``Tensor.pow_``: ``self ** exponent`` written into ``self``."""
    if isinstance(exponent, Tensor):
        return pow_tensor_tensor_(self, exponent)
    return pow_tensor_scalar_(self, _py(exponent))


defcomposite(pow, samples=lambda rng: [
    sample("tensor_scalar", rng.uniform(0.5, 2, (3, 4)), 2.5),
    sample("tensor_tensor", rng.uniform(0.5, 2, (3, 4)), rng.uniform(-2, 2, (4,))),
    sample("scalar_tensor", 2, rng.uniform(-2, 2, (3, 4))),
    sample("int_scalar", np.array([1, 2, 3]), 2)])
Tensor.pow_ = Tensor.__ipow__ = pow_

# --- exponentials and logarithms ---
defop("exp(Tensor self) -> Tensor", "exp", {"self": lambda grad, result: grad * result},
      jvp="elementwise", promote=FLOAT, inplace="exp_", samples=unary())
defop("exp2(Tensor self) -> Tensor", "exp2", {"self": lambda grad, result: grad * result * _LN2},
      jvp="elementwise", promote=FLOAT, inplace="exp2_", samples=unary())
defop("expm1(Tensor self) -> Tensor", "expm1", {"self": lambda grad, result: grad * (result + 1)},
      jvp="elementwise", promote=FLOAT, inplace="expm1_", samples=unary())
defop("log(Tensor self) -> Tensor", "log", {"self": lambda grad, self: grad / self},
      jvp="elementwise", promote=FLOAT, inplace="log_", samples=unary(domain=(0.2, 3.0)))
defop("log2(Tensor self) -> Tensor", "log2", {"self": lambda grad, self: grad / (self * _LN2)},
      jvp="elementwise", promote=FLOAT, inplace="log2_", samples=unary(domain=(0.2, 3.0)))
defop("log10(Tensor self) -> Tensor", "log10", {"self": lambda grad, self: grad / (self * _LN10)},
      jvp="elementwise", promote=FLOAT, inplace="log10_", samples=unary(domain=(0.2, 3.0)))
defop("log1p(Tensor self) -> Tensor", "log1p", {"self": lambda grad, self: grad / (self + 1)},
      jvp="elementwise", promote=FLOAT, inplace="log1p_", samples=unary(domain=(-0.8, 3.0)))
defop("sqrt(Tensor self) -> Tensor", "sqrt", {"self": lambda grad, result: grad / (2 * result)},
      jvp="elementwise", promote=FLOAT, inplace="sqrt_", samples=unary(domain=(0.2, 3.0)))


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


defop("rsqrt(Tensor self) -> Tensor", _rsqrt,
      {"self": lambda grad, result: -0.5 * grad * result * result * result}, jvp="elementwise",
      promote=FLOAT, inplace="rsqrt_", samples=unary(domain=(0.2, 3.0)))
defop("reciprocal(Tensor self) -> Tensor", "reciprocal",
      {"self": lambda grad, result: -grad * result * result}, jvp="elementwise",
      promote=FLOAT, inplace="reciprocal_", samples=unary(domain=(0.3, 2.0)))

# --- sign-like ---
def _abs_jvp(self_p, self_t):
    # Not its VJP transposed: abs is not holomorphic; d|z| = Re(conj(sgn z) dz)
    if self_p.is_complex():
        return (self_t * conj(self_p.sgn())).real
    return self_t * self_p.sign()


defop("abs(Tensor self) -> Tensor", "absolute", {"self": lambda grad, self: grad * self.sign()},
      jvp=_abs_jvp, inplace="abs_", samples=unary(avoid=0.0))


def _sign(x):
    return np.sign(x) if x.dtype != np.bool_ else x.copy()


defop("sign(Tensor self) -> Tensor", _sign, {"self": lambda grad: grad * 0}, jvp="elementwise",
      inplace="sign_", samples=unary(avoid=0.0))


# --- complex conjugation: computed at once (no lazy conjugate bit: is_conj() is always False) ---
conj_physical = defop("conj_physical(Tensor self) -> Tensor", "conjugate",
                      {"self": lambda grad: conj_physical(grad)}, jvp="linear",
                      extra={"complex_grad": "torch"},  # anti-holomorphic: already PyTorch's form
                      samples=lambda rng: [sample("c", rng.standard_normal(3) + 1j * rng.standard_normal(3)),
                                           sample("real", rng.standard_normal(3))]).call


def conj(input):
    """``input`` with its imaginary part negated; a real tensor is returned as it is."""
    return conj_physical(input) if input.is_complex() else input


defcomposite(conj, torch="torch.conj_physical",  # torch's conj is a lazy view .numpy() refuses
             samples=lambda rng: [sample("c", rng.standard_normal(3) - 2j), sample("real", rng.standard_normal(3))])
Tensor.resolve_conj = Tensor.resolve_neg = lambda self: self
Tensor.is_conj = Tensor.is_neg = lambda self: False
NAMESPACES[""]["resolve_conj"] = NAMESPACES[""]["resolve_neg"] = lambda input: input
NAMESPACES[""]["is_conj"] = NAMESPACES[""]["is_neg"] = lambda input: False


# --- angle: real output; its gradient and tangent are written in PyTorch's form (not holomorphic) ---
def _angle(x):
    return np.angle(x).astype(x.real.dtype, copy=False)  # NumPy gives float64 for real input


def _angle_grad(grad, self):
    # d angle = Im(dz / z): PyTorch's gradient is grad * i z / |z|^2, and 0 at z == 0
    if not self.is_complex():
        return grad * 0
    zero = self == 0
    return where(zero, 0.0, grad * (self * 1j) / where(zero, 1.0, self.abs().square()))


def _angle_jvp(self_p, self_t):
    if not self_p.is_complex():
        return self_t * 0
    zero = self_p == 0
    return where(zero, 0.0, (self_t * conj(self_p)).imag / where(zero, 1.0, self_p.abs().square()))


defop("angle(Tensor self) -> Tensor", _angle, {"self": _angle_grad}, jvp=_angle_jvp, promote=FLOAT,
      samples=lambda rng: [sample("complex", rng.standard_normal(4) + 1j * rng.standard_normal(4)),
                           sample("real", rng.standard_normal(4) + 0.5)])


def _rounding(f):
    return lambda x: f(x) if x.dtype.kind in "fc" else x.copy()


defop("floor(Tensor self) -> Tensor", _rounding(np.floor), {"self": lambda grad: grad * 0},
      jvp="elementwise",
      inplace="floor_", samples=unary(domain=(-3, 3), avoid=[-2.0, -1.0, 0.0, 1.0, 2.0]))
defop("ceil(Tensor self) -> Tensor", _rounding(np.ceil), {"self": lambda grad: grad * 0},
      jvp="elementwise",
      inplace="ceil_", samples=unary(domain=(-3, 3), avoid=[-2.0, -1.0, 0.0, 1.0, 2.0]))
defop("trunc(Tensor self) -> Tensor", _rounding(np.trunc), {"self": lambda grad: grad * 0},
      jvp="elementwise",
      inplace="trunc_", samples=unary(domain=(-3, 3), avoid=[-2.0, -1.0, 0.0, 1.0, 2.0]))


def _round(x, decimals):
    if x.dtype.kind not in "fc":
        return x.copy()
    return np.round(x, decimals)  # round half to even, as PyTorch


defop("round(Tensor self, *, int decimals=0) -> Tensor", _round, {"self": lambda grad: grad * 0},
      jvp="elementwise",
      inplace="round_", samples=unary(domain=(-3, 3), avoid=[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]))


def _frac(x):
    return x - np.trunc(x)


defop("frac(Tensor self) -> Tensor", _frac, {"self": lambda grad: grad}, jvp="elementwise",
      inplace="frac_", samples=unary(domain=(-3, 3), avoid=[-2.0, -1.0, 0.0, 1.0, 2.0]))

# --- trigonometric and hyperbolic ---
defop("sin(Tensor self) -> Tensor", "sin", {"self": lambda grad, self: grad * self.cos()},
      jvp="elementwise", promote=FLOAT, inplace="sin_", samples=unary())
defop("cos(Tensor self) -> Tensor", "cos", {"self": lambda grad, self: -grad * self.sin()},
      jvp="elementwise", promote=FLOAT, inplace="cos_", samples=unary())
defop("tan(Tensor self) -> Tensor", "tan", {"self": lambda grad, result: grad * (1 + result * result)},
      jvp="elementwise", promote=FLOAT, inplace="tan_", samples=unary(domain=(-1.2, 1.2)))
defop("asin(Tensor self) -> Tensor", "arcsin",
      {"self": lambda grad, self: grad * (1 - self * self).rsqrt()}, jvp="elementwise",
      promote=FLOAT, inplace="asin_", samples=unary(domain=(-0.9, 0.9)))
defop("acos(Tensor self) -> Tensor", "arccos",
      {"self": lambda grad, self: -grad * (1 - self * self).rsqrt()}, jvp="elementwise",
      promote=FLOAT, inplace="acos_", samples=unary(domain=(-0.9, 0.9)))
defop("atan(Tensor self) -> Tensor", "arctan", {"self": lambda grad, self: grad / (1 + self * self)},
      jvp="elementwise", promote=FLOAT, inplace="atan_", samples=unary())
defop("atan2(Tensor self, Tensor other) -> Tensor", "arctan2",
      {"self": lambda grad, self, other: grad * other / (self * self + other * other),
       "other": lambda grad, self, other: -grad * self / (self * self + other * other)},
      jvp="elementwise",
      promote=FLOAT, inplace="atan2_", samples=binary(rhs_domain=(0.5, 2.0), scalar_rhs=None))
defop("sinh(Tensor self) -> Tensor", "sinh", {"self": lambda grad, self: grad * self.cosh()},
      jvp="elementwise", promote=FLOAT, inplace="sinh_", samples=unary())
defop("cosh(Tensor self) -> Tensor", "cosh", {"self": lambda grad, self: grad * self.sinh()},
      jvp="elementwise", promote=FLOAT, inplace="cosh_", samples=unary())
defop("asinh(Tensor self) -> Tensor", "arcsinh", {"self": lambda grad, self: grad * (self * self + 1).rsqrt()},
      jvp="elementwise", promote=FLOAT, inplace="asinh_", samples=unary())
defop("acosh(Tensor self) -> Tensor", "arccosh", {"self": lambda grad, self: grad * (self * self - 1).rsqrt()},
      jvp="elementwise", promote=FLOAT, inplace="acosh_", samples=unary(domain=(1.2, 3.0)))
defop("atanh(Tensor self) -> Tensor", "arctanh", {"self": lambda grad, self: grad / (1 - self * self)},
      jvp="elementwise", promote=FLOAT, inplace="atanh_", samples=unary(domain=(-0.9, 0.9)))
defop("logaddexp(Tensor self, Tensor other) -> Tensor", "logaddexp",
      {"self": lambda grad, self, result: grad * (self - result).exp(),
       "other": lambda grad, other, result: grad * (other - result).exp()}, jvp="elementwise",
      promote=FLOAT, samples=binary(scalar_rhs=None))
defop("logaddexp2(Tensor self, Tensor other) -> Tensor", "logaddexp2",
      {"self": lambda grad, self, result: grad * (self - result).exp2(),
       "other": lambda grad, other, result: grad * (other - result).exp2()}, jvp="elementwise",
      promote=FLOAT, samples=binary(scalar_rhs=None))

# Fused backward kernels: one dispatch instead of three per node (chain benchmark: tanh node
# backward 4.1 -> 1.6 us); their own formulas give the second derivative.
def _tanh_backward(g, y):
    return g * (1 - y * y)


tanh_backward = defop(
    "tanh_backward(Tensor grad_output, Tensor output) -> Tensor", _tanh_backward,
    {"grad_output": lambda grad, output: tanh_backward(grad, output),
     "output": lambda grad, grad_output, output: -2 * grad * grad_output * output},
    jvp="elementwise",
    promote=COMMON, method=False, api=False, torch="torch.ops.aten.tanh_backward",
    samples=lambda rng: [sample("2d", rng.standard_normal((3, 4)), rng.uniform(-0.9, 0.9, (3, 4)))]).call

defop("tanh(Tensor self) -> Tensor", "tanh", {"self": lambda grad, result: tanh_backward(grad, result)},
      jvp="elementwise", promote=FLOAT, inplace="tanh_", samples=unary())


def _sigmoid(x):
    if x.dtype.kind == "c":  # no |x| split for complex inputs: the plain formula, as PyTorch's
        return 1 / (1 + np.exp(-x))
    # exp of -|x| never overflows; both branches agree where they meet
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _sigmoid_backward(g, y):
    return g * (y * (1 - y))


sigmoid_backward = defop(
    "sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor", _sigmoid_backward,
    {"grad_output": lambda grad, output: sigmoid_backward(grad, output),
     "output": lambda grad, grad_output, output: grad * grad_output * (1 - 2 * output)},
    jvp="elementwise",
    promote=COMMON, method=False, api=False, torch="torch.ops.aten.sigmoid_backward",
    samples=lambda rng: [sample("2d", rng.standard_normal((3, 4)), rng.uniform(0.1, 0.9, (3, 4)))]).call

defop("sigmoid(Tensor self) -> Tensor", _sigmoid,
      {"self": lambda grad, result: sigmoid_backward(grad, result)}, jvp="elementwise",
      promote=FLOAT, inplace="sigmoid_", samples=unary(domain=(-4, 4)))


def _logit(x, eps):
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    return np.log(x / (1 - x))


def _logit_grad(grad, self, eps):
    g = grad / (self * (1 - self))
    if eps is None:
        return g
    return g * ((self >= eps) & (self <= 1 - eps))


defop("logit(Tensor self, float? eps=None) -> Tensor", _logit, {"self": _logit_grad},
      jvp="elementwise",
      promote=FLOAT, inplace="logit_", samples=lambda rng: unary(domain=(0.1, 0.9))(rng)
      + [sample("eps", np.array([0.01, 0.3, 0.7, 0.99]), eps=0.05)])

defop("erf(Tensor self) -> Tensor", _erf,
      {"self": lambda grad, self: grad * _TWO_OVER_SQRT_PI * (-self * self).exp()},
      jvp="elementwise", promote=FLOAT, inplace="erf_", samples=unary())
defop("erfc(Tensor self) -> Tensor", lambda x: 1 - _erf(x),
      {"self": lambda grad, self: -grad * _TWO_OVER_SQRT_PI * (-self * self).exp()},
      jvp="elementwise", promote=FLOAT, inplace="erfc_", samples=unary())

# --- activations (also reachable as nn.functional.*) ---
defop("relu(Tensor self) -> Tensor", lambda x: np.maximum(x, 0).astype(x.dtype, copy=False),
      {"self": lambda grad, result: grad * (result > 0)}, jvp="elementwise",
      inplace="relu_", samples=unary(avoid=0.0))


_GELU_A = 0.044715


def _gelu(x, approximate):
    if approximate == "tanh":
        # 0.5 x (1 + tanh u) = x / (1 + exp(-2u)), u = c (x + a x^3): exp is cheaper than tanh
        # in NumPy and this form has no cancellation. In place on one temporary.
        y = np.square(x, out=_backend.namespace_of(x).empty(np.shape(x), np.result_type(x, 0.5)))
        y *= -2 * _GELU_A * _SQRT_2_OVER_PI
        y -= 2 * _SQRT_2_OVER_PI
        y *= x
        with np.errstate(over="ignore", invalid="ignore"):  # exp -> inf: the limit, 0 (x = -inf: nan)
            np.exp(y, out=y)
            y += 1
            np.divide(x, y, out=y)
        return y
    if approximate != "none":
        raise RuntimeError("approximate argument must be either none or tanh.")
    return 0.5 * x * (1 + _erf(x * (1 / math.sqrt(2))))


def _gelu_backward(g, x, approximate):
    """``g * gelu'(x)`` in a few array passes (a composite would be ~15 tensor ops per node)."""
    if approximate == "tanh":  # in place on three temporaries
        dt = np.result_type(g, x, 0.5)
        d = np.square(x, out=_backend.namespace_of(x).empty(np.shape(x), dt))
        t = np.multiply(d, _GELU_A * _SQRT_2_OVER_PI, out=np.empty_like(d))  # an array even 0-d
        t += _SQRT_2_OVER_PI
        t *= x
        np.tanh(t, out=t)  # tanh(c (x + a x^3))
        d *= 3 * _GELU_A
        d += 1
        d *= x
        d *= 0.5 * _SQRT_2_OVER_PI  # 0.5 x c (1 + 3 a x^2)
        s = np.square(t, out=np.empty_like(t))
        np.subtract(1, s, out=s)
        d *= s
        t += 1
        t *= 0.5
        d += t
    else:
        d = 0.5 * (1 + _erf(x * (1 / math.sqrt(2))))
        d += x * np.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))
    d *= g
    return d.astype(np.result_type(g, x), copy=False)


def _gelu_second(self, approximate):
    """gelu''(x), in Tensor ops (only double backward needs it)."""
    if approximate == "tanh":
        x = self
        t = (_SQRT_2_OVER_PI * (x + _GELU_A * x * x * x)).tanh()
        du = _SQRT_2_OVER_PI * (1 + 3 * _GELU_A * x * x)
        return (1 - t * t) * (du - x * t * du * du + 3 * _SQRT_2_OVER_PI * _GELU_A * x * x)
    pdf = (-0.5 * self * self).exp() * (1 / math.sqrt(2 * math.pi))
    return pdf * (2 - self * self)


gelu_backward = defop(
    "gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor", _gelu_backward,
    {"grad_output": lambda grad, self, approximate: gelu_backward(grad, self, approximate=approximate),
     "self": lambda grad, grad_output, self, approximate: grad * grad_output * _gelu_second(self, approximate)},
    jvp="elementwise",
    promote=COMMON, method=False, api=False, torch="torch.ops.aten.gelu_backward",
    samples=lambda rng: [sample("none", rng.standard_normal((3, 4)), rng.uniform(-3, 3, (3, 4))),
                         sample("tanh", rng.standard_normal((3, 4)), rng.uniform(-3, 3, (3, 4)),
                                approximate="tanh"),
                         sample("tanh_0d", rng.standard_normal(()), rng.uniform(-3, 3, ()), approximate="tanh")]).call


def _gelu_tanh_backward_arrays(g, x, y):
    """``g * gelu'(x)`` for the tanh form from the forward's result ``y`` (no tanh again):
    ``s = 1 + t = 2 y / x`` (1 where x = 0), ``gelu' = s/2 + x c (1 + 3a x^2) (2 - s) s / 2``."""
    nz = x != 0
    with np.errstate(invalid="ignore"):  # x = +-inf: nan, as PyTorch's formula gives there
        s = np.divide(y, np.where(nz, x, 1), dtype=np.result_type(g, x, 0.5))  # CuPy has no where=
    s *= 2
    s = np.where(nz, s, 1.0).astype(s.dtype, copy=False)
    d = np.square(x, out=np.empty_like(s))
    d *= 3 * _GELU_A
    d += 1
    d *= x
    d *= 0.5 * _SQRT_2_OVER_PI
    d *= 2 - s
    d += 0.5
    d *= s
    d *= g
    return d


# ``output`` (gelu's result) only saves recomputing tanh: the full derivative in ``self`` is in
# the formula, so no gradient flows to ``output`` (internal op; gelu's gradgradcheck covers it).
gelu_tanh_backward = defop(
    "_gelu_tanh_backward(Tensor grad_output, Tensor self, Tensor output) -> Tensor",
    _gelu_tanh_backward_arrays,
    {"grad_output": lambda grad, self, output: gelu_tanh_backward(grad, self, output),
     "self": lambda grad, grad_output, self: grad * grad_output * _gelu_second(self, "tanh"),
     "output": lambda grad: None}, jvp="elementwise",
    promote=COMMON, method=False, api=False).call


def _gelu_grad(grad, self, result, approximate):
    if approximate == "tanh":
        return gelu_tanh_backward(grad, self, result)
    return gelu_backward(grad, self, approximate=approximate)


defop("gelu(Tensor self, *, str approximate='none') -> Tensor", _gelu, {"self": _gelu_grad},
      jvp="elementwise", api="nn.functional.gelu", inplace="gelu_",
      samples=lambda rng: unary()(rng) + [sample("tanh", rng.uniform(-3, 3, (3, 4)), approximate="tanh"),
                                          sample("tanh_0d", rng.uniform(-3, 3, ()), approximate="tanh")])


def _silu(x):
    return x * _sigmoid(x)


def _silu_grad(grad, self):
    s = self.sigmoid()
    return grad * s * (1 + self * (1 - s))


defop("silu(Tensor self) -> Tensor", _silu, {"self": _silu_grad}, jvp="elementwise",
      api="nn.functional.silu", inplace="silu_", samples=unary())


def _elu(x, alpha, scale, input_scale):
    return np.where(x > 0, scale * x, scale * alpha * np.expm1(np.minimum(x, 0) * input_scale)).astype(x.dtype, copy=False)


def _elu_grad(grad, self, alpha, scale, input_scale):
    neg = (self * input_scale).exp() * (scale * alpha * input_scale)
    return grad * where(self > 0, scale, neg)


defop("elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor", _elu,
      {"self": _elu_grad}, jvp="elementwise", api="nn.functional.elu", inplace="elu_",
      samples=lambda rng: unary(avoid=0.0)(rng) + [sample("alpha", rng.uniform(-2, 2, (5,)) + 0.05, 0.5)])


def _leaky_relu(x, negative_slope):
    return np.where(x > 0, x, x * negative_slope).astype(x.dtype, copy=False)


def _leaky_relu_grad(grad, self, negative_slope):
    return grad * where(self > 0, 1.0, negative_slope)


defop("leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", _leaky_relu,
      {"self": _leaky_relu_grad}, jvp="elementwise",
      api="nn.functional.leaky_relu", inplace="leaky_relu_",
      samples=lambda rng: unary(avoid=0.0)(rng) + [sample("slope", rng.uniform(-2, 2, (5,)) + 0.05, 0.2)])


def _hardtanh(x, min_val, max_val):
    return np.clip(x, min_val, max_val).astype(x.dtype, copy=False)


def _hardtanh_grad(grad, result, min_val, max_val):
    # Strictly inside: PyTorch's hardtanh passes no gradient at its boundaries (clamp passes
    # it). Read from the result, which is inside exactly where the input is, so the in-place
    # form keeps the formula.
    return grad * ((result > min_val) & (result < max_val))


defop("hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", _hardtanh,
      {"self": _hardtanh_grad}, jvp="elementwise", api="nn.functional.hardtanh", method=False,
      inplace="hardtanh_", samples=lambda rng: unary(avoid=(-1.0, 1.0))(rng) + [
          sample("bounds", rng.uniform(-3, 3, (5,)) + 0.05, -0.5, 2.0)])


def _softplus(x, beta, threshold):
    bx = x * beta
    soft = np.logaddexp(0, bx) / beta
    return np.where(bx > threshold, x, soft).astype(x.dtype, copy=False)


def _softplus_grad(grad, self, beta, threshold):
    bx = self * beta
    return grad * where(bx > threshold, 1.0, bx.sigmoid())


defop("softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor", _softplus,
      {"self": _softplus_grad}, jvp="elementwise", api="nn.functional.softplus",
      samples=lambda rng: unary(domain=(-3, 3))(rng) + [sample("beta", rng.uniform(-3, 3, (5,)), 2.0, 4.0)])

# --- clamping, min/max, selection ---
def _clamp(x, lo, hi):
    if lo is None and hi is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


def _clamp_self_grad(grad, self, min, max):
    mask = None
    if min is not None:
        mask = self >= min
    if max is not None:
        m = self <= max
        mask = m if mask is None else mask & m
    return grad * mask


defop("clamp(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", _clamp,
      {"self": _clamp_self_grad,
       "min": lambda grad, self, min: grad * (self < min),
       "max": lambda grad, self, max: grad * (self > max)}, jvp="elementwise",
      promote=COMMON, inplace="clamp_",
      samples=lambda rng: [
          sample("both", rng.uniform(-2, 2, (3, 4)), -0.5, 0.7),
          sample("min", rng.uniform(-2, 2, (5,)), -0.5),
          sample("max", rng.uniform(-2, 2, (5,)), None, 0.5),
          sample("tensor_bounds", rng.uniform(-2, 2, (3, 4)), rng.uniform(-3, -1, (4,)), rng.uniform(1, 3, (3, 1)))])


# NOTE(pytorch): torch.clip / Tensor.clip(_) are aliases of clamp (their nodes are clamp's).
NAMESPACES[""]["clip"] = OPS["clamp"].call
Tensor.clip, Tensor.clip_ = OPS["clamp"].call, OPS["clamp_"].call


def _nan_to_num(x, nan, posinf, neginf):
    if x.dtype not in D.INEXACT:
        return x.copy()
    if x.dtype is D.BF16:  # NumPy's would pass it through; None: bfloat16's extremes, not float32's
        big = float(D.np_finfo(x.dtype).max)
        return _nan_to_num(x.astype(np.float32), nan, big if posinf is None else posinf,
                           -big if neginf is None else neginf).astype(x.dtype)
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)  # None: the dtype's extremes


defop("nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor",
      lambda x, nan, posinf, neginf: _nan_to_num(x, 0.0 if nan is None else nan, posinf, neginf),
      {"self": lambda grad, self: grad * self.isfinite()}, jvp="elementwise", inplace="nan_to_num_",
      extra={"bfloat16_native": True},
      samples=lambda rng: [
          sample("special", np.array([np.nan, np.inf, -np.inf, 1.5, -0.25])),
          sample("values", np.array([[np.nan, 2.0], [np.inf, -np.inf]]), 1.0, 9.0, -9.0),
          sample("plain", rng.standard_normal((3, 4))),
          sample("int", np.arange(4))])


def _max_grad(grad, self, other):
    return where(self == other, grad * 0.5, grad) * (self >= other)


defop("maximum(Tensor self, Tensor other) -> Tensor", "maximum",
      {"self": lambda grad, self, other: _max_grad(grad, self, other),
       "other": lambda grad, self, other: _max_grad(grad, other, self)}, jvp="elementwise",
      promote=COMMON, samples=binary(scalar_rhs=None, avoid_equal=True))
defop("minimum(Tensor self, Tensor other) -> Tensor", "minimum",
      {"self": lambda grad, self, other: _max_grad(grad, other, self),
       "other": lambda grad, self, other: _max_grad(grad, self, other)}, jvp="elementwise",
      promote=COMMON, samples=binary(scalar_rhs=None, avoid_equal=True))


def _where(cond, x, y):
    if cond.dtype != np.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype {D._FROM_NP[cond.dtype].name.capitalize()}")
    return np.where(cond, x, y)


def _where_self(grad, condition):
    return where(condition, grad, 0.0)


def _where_other(grad, condition):
    return where(condition, 0.0, grad)


where = defop("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", _where,
      {"self": _where_self, "other": _where_other}, jvp="elementwise",
      promote=COMMON, promote_args=("self", "other"), method=False,
      samples=lambda rng: [
          sample("same", rng.uniform(-1, 1, (3, 4)) > 0, rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (3, 4))),
          sample("bcast", rng.uniform(-1, 1, (3, 1)) > 0, rng.uniform(-2, 2, (4,)), rng.uniform(-2, 2, (3, 4))),
          sample("scalar", rng.uniform(-1, 1, (5,)) > 0, rng.uniform(-2, 2, (5,)), 0.0)]).call


def _lerp(x, end, weight):
    return x + weight * (end - x)


defop("lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor", _lerp,
      {"self": lambda grad, weight: grad * (1 - weight),
       "end": lambda grad, weight: grad * weight,
       "weight": lambda grad, self, end: grad * (end - self)}, jvp="elementwise",
      promote=COMMON, inplace="lerp_",
      samples=lambda rng: [
          sample("tensor_w", rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (3, 4)), rng.uniform(0, 1, (3, 4))),
          sample("scalar_w", rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (4,)), 0.3)])


defop("hypot(Tensor self, Tensor other) -> Tensor", "hypot",
      {"self": lambda grad, self, result: grad * self / result,
       "other": lambda grad, other, result: grad * other / result}, jvp="elementwise",
      promote=COMMON, inplace="hypot_", samples=binary(domain=(0.3, 2), scalar_rhs=None))


def _fmod(x, y):
    return np.fmod(x, y)


defop("fmod.Tensor(Tensor self, Tensor other) -> Tensor", _fmod,
      {"self": lambda grad: grad,
       "other": lambda grad, self, other: -grad * (self / other).trunc()}, jvp="elementwise",
      promote=COMMON, inplace="fmod_",
      samples=lambda rng: [
          sample("tensor", rng.uniform(-5, 5, (3, 4)), rng.uniform(1.3, 1.7, (3, 4))),
          sample("scalar", rng.uniform(-5, 5, (5,)), 1.5, no_grad=())])
defop("remainder.Tensor(Tensor self, Tensor other) -> Tensor", "remainder",
      {"self": lambda grad: grad,
       "other": lambda grad, self, other: -grad * (self / other).floor()}, jvp="elementwise",
      promote=COMMON, inplace="remainder_",
      samples=lambda rng: [
          sample("tensor", rng.uniform(-5, 5, (3, 4)), rng.uniform(1.3, 1.7, (3, 4))),
          sample("scalar", rng.uniform(-5, 5, (5,)), 1.5)])

# --- comparisons and logical ops: bool outputs, no gradient ---
_cmp_samples = binary(scalar_rhs=0.5, avoid_equal=True)
for _name, _np in (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                   ("gt", "greater"), ("ge", "greater_equal")):
    defop(f"{_name}.Tensor(Tensor self, Tensor other) -> Tensor", _np, None, promote=COMMON,
          samples=_cmp_samples)


def _logical(f):
    return lambda x, y: f(np.not_equal(x, 0), np.not_equal(y, 0))  # bool(v), on v's device


for _name in ("logical_and", "logical_or", "logical_xor"):
    defop(f"{_name}(Tensor self, Tensor other) -> Tensor", _logical(getattr(np, _name)), None,
          samples=binary(scalar_rhs=None))
defop("logical_not(Tensor self) -> Tensor", lambda x: np.logical_not(x), None, samples=unary())
defop("isnan(Tensor self) -> Tensor", "isnan", None, samples=unary())
defop("isinf(Tensor self) -> Tensor", "isinf", None, samples=unary())
defop("isfinite(Tensor self) -> Tensor", "isfinite", None, samples=unary())


def _isclose(x, y, rtol, atol, equal_nan):
    if x.dtype != y.dtype:  # PyTorch compares like with like: no promotion
        raise RuntimeError(f"{D.SHORT_NAMES[x.dtype]} did not match {D.SHORT_NAMES[y.dtype]}")
    return np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)


def _close_samples(rng):
    a = rng.uniform(-2, 2, (3, 4))
    b = a + rng.choice([0.0, 1e-9, 1e-3, np.nan], (3, 4))
    return [sample("default", a, b), sample("rtol", a, b, rtol=1e-2),
            sample("equal_nan", np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), equal_nan=True),
            sample("bcast", a, b[0], atol=1e-2), sample("int", np.array([1, 2]), np.array([1, 3]))]


defop("isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> Tensor",
      _isclose, None, samples=_close_samples)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """True when every element of ``input`` is close to ``other`` (see ``isclose``)."""
    return bool(OPS["isclose"].call(input, other, rtol, atol, equal_nan)._data.all())


defcomposite(allclose, gradcheck=False, samples=_close_samples)


def _bitwise(f, name):
    def fwd(x, y):
        if np.result_type(x, y).kind not in "biu":
            raise RuntimeError(f'"{name}_cpu" not implemented for \'Float\'')
        return f(x, y)

    return fwd


for _name, _np in (("bitwise_and", "bitwise_and"), ("bitwise_or", "bitwise_or"), ("bitwise_xor", "bitwise_xor")):
    defop(f"{_name}.Tensor(Tensor self, Tensor other) -> Tensor", _bitwise(getattr(np, _np), _name), None,
          promote=COMMON, samples=lambda rng: [sample("int", np.array([1, 2, 3]), np.array([3, 1, 2]))])
defop("bitwise_not(Tensor self) -> Tensor", "invert", None,
      samples=lambda rng: [sample("bool", np.array([True, False]))])


# --- special functions: SciPy's ufuncs (NumPy has none), imported on first use ---
def _scipy(name: str):
    """``scipy.special.<name>``; SciPy is optional (the ``scipy`` extra), NumPy is not."""
    try:
        from scipy import special
    except ImportError:  # pragma: no cover - scipy is in the test environment
        raise RuntimeError(
            f"ndgrad needs SciPy for {name}: install it with `pip install scipy`") from None
    return getattr(special, name)


def _like(x, y):
    """``y`` in an array like ``x`` (its dtype, and its array type: a host-memory device's)."""
    out = np.empty_like(x)
    out[...] = y
    return out


def _special(name: str):
    def fwd(x):
        return _like(x, _scipy(name)(x))

    return fwd


def _polygamma(n, x):
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return _like(x, _scipy("psi")(x) if n == 0 else _scipy("polygamma")(n, x))


defop("lgamma(Tensor self) -> Tensor", _special("gammaln"),
      {"self": lambda grad, self: grad * self.digamma()}, jvp="elementwise",
      promote=FLOAT, inplace="lgamma_", samples=unary(domain=(0.2, 4.0)))
defop("digamma(Tensor self) -> Tensor", _special("psi"),
      {"self": lambda grad, self: grad * polygamma(1, self)}, jvp="elementwise",
      promote=FLOAT, inplace="digamma_", samples=unary(domain=(0.2, 4.0)))
# NOTE(pytorch): the order n comes first (torch.polygamma(n, input)); Tensor.polygamma(n) below.
defop("polygamma(int n, Tensor self) -> Tensor", _polygamma,
      {"self": lambda grad, n, self: grad * polygamma(n + 1, self)}, jvp="elementwise",
      promote=FLOAT, method=False,
      samples=lambda rng: [sample("n1", 1, rng.uniform(0.3, 3, (3, 4))),
                           sample("n2_nc", 2, nc(rng.uniform(0.3, 3, (3, 4)))),
                           sample("n0_0d", 0, rng.uniform(0.3, 3, ()))])
polygamma = OPS["polygamma"].call
Tensor.polygamma = lambda self, n: polygamma(n, self)
defop("erfinv(Tensor self) -> Tensor", _special("erfinv"),
      {"self": lambda grad, result: grad * (math.sqrt(math.pi) / 2) * (result * result).exp()},
      jvp="elementwise", promote=FLOAT, inplace="erfinv_", samples=unary(domain=(-0.9, 0.9)))


def polygamma_(self, n):
    """``Tensor.polygamma_``: ``polygamma(n, self)`` written into ``self``."""
    return self.copy_(polygamma(n, self.clone() if self.requires_grad else self))


Tensor.polygamma_ = polygamma_


# --- aliases (PyTorch's; their nodes are the aliased op's) ---
for _alias, _op in (("absolute", "abs"), ("negative", "neg"), ("fix", "trunc"), ("arcsin", "asin"),
                    ("arccos", "acos"), ("arctan", "atan"), ("arcsinh", "asinh"),
                    ("arccosh", "acosh"), ("arctanh", "atanh"), ("arctan2", "atan2"),
                    ("multiply", "mul.Tensor"), ("subtract", "sub.Tensor")):
    NAMESPACES[""][_alias] = OPS[_op].call
    setattr(Tensor, _alias, OPS[_op].call)
    _ip = OPS[_op].name.split(".")[0] + "_"
    if _ip in OPS:
        setattr(Tensor, _alias + "_", OPS[_ip].call)


# --- polar: a complex tensor from absolute values and angles ---
def _polar(r, theta):
    if r.dtype.kind != "f" or theta.dtype.kind != "f":
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{D.SHORT_NAMES[r.dtype]} and {D.SHORT_NAMES[theta.dtype]}")
    if r.dtype != theta.dtype:
        raise RuntimeError(f"Expected object of scalar type {D.SHORT_NAMES[r.dtype]} but got scalar "
                           f"type {D.SHORT_NAMES[theta.dtype]} for second argument")
    ct = np.complex64 if r.dtype == np.float32 else np.complex128
    return (r * np.cos(theta) + (r * np.sin(theta)) * 1j).astype(ct, copy=False)


def _polar_parts(grad):
    """The real and imaginary parts of a complex gradient, as real tensors."""
    g = NAMESPACES[""]["view_as_real"](grad)
    return g.select(-1, 0), g.select(-1, 1)


# For z = abs e^{i angle}, PyTorch's convention gives grad_x = Re(conj(dz/dx) grad).
def _polar_abs_grad(grad, angle):
    re, im = _polar_parts(grad)
    return re * angle.cos() + im * angle.sin()


def _polar_angle_grad(grad, abs, angle):  # abs: the schema's name (PyTorch's)
    re, im = _polar_parts(grad)
    return abs * (im * angle.cos() - re * angle.sin())


defop("polar(Tensor abs, Tensor angle) -> Tensor", _polar,
      {"abs": _polar_abs_grad, "angle": _polar_angle_grad},
      method=False, extra={"complex_grad": "torch"},
      samples=lambda rng: [sample("same", rng.uniform(0.5, 2, (3, 4)), rng.uniform(-3, 3, (3, 4)),
                                  no_grad=(0, 1)),
                           sample("bcast_nc", nc(rng.uniform(0.5, 2, (3, 4))), rng.uniform(-3, 3, (4,)),
                                  no_grad=(0, 1))])
