"""Random sampling: in-place fills (``uniform_``, ``normal_``, ``bernoulli_``, ``exponential_``,
``random_``, ``geometric_``, ``log_normal_``, ``cauchy_``) and the sampling functions ``normal``,
``bernoulli``, ``poisson``, ``randperm``, ``multinomial``.

Numbers are drawn on the host by PyTorch's CPU algorithms over the generator's MT19937 stream
(``_random``), so a seed gives torch's values, and moved to the tensor's device. The fills are
in-place ops of the table (an out-of-place record each, without samples), so autograd treats
them as PyTorch does: refused on a leaf that requires grad, a node with a zero gradient on a
non-leaf, version counters bumped.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import _backend, _random
from .. import _dtype as D
from .._factories import Generator, _check, _device, _dt, _gen, _size
from .._tensor import Tensor
from .factory import _drawn, _grad_leaf, empty_like
from .factory import _place as _on_device
from .registry import NAMESPACES, OPS, PROMOTE_COMMON, defop, dispatch
from .samples import nc, sample

# Values are drawn on the host from the generator's stream and moved to the tensor's device, so a
# seed gives the same numbers on every device. The in-place fills are in-place ops of
# the registry (leaf check, version bump, views); their nodes give zero gradients, as PyTorch's.
_CTYPE = {np.dtype(k): v for k, v in (  # C++ type names PyTorch's messages use
    ("bool", "bool"), ("uint8", "unsigned char"), ("int8", "signed char"), ("int16", "short int"),
    ("int32", "int"), ("int64", "long int"), ("float16", "c10::Half"), ("float32", "float"),
    ("float64", "double"), ("complex64", "c10::complex<float>"),
    ("complex128", "c10::complex<double>"))}
_DIGITS = {np.dtype("float16"): 11, np.dtype("float32"): 24, np.dtype("float64"): 53}
if D.BF16 is not None:  # these ops draw in bfloat16 itself (registry._via_float32 leaves them)
    _CTYPE[D.BF16], _DIGITS[D.BF16] = "c10::BFloat16", 8


def _g(v) -> str:
    """A number as PyTorch's C++ messages print it (six significant digits)."""
    return str(v) if isinstance(v, numbers.Integral) else f"{v:g}"


def _not_impl(kernel: str, dt) -> NotImplementedError:
    return NotImplementedError(f'"{kernel}" not implemented for \'{D.SHORT_NAMES[dt]}\'')


def _continuous(name: str, dt, key=D.SHORT_NAMES) -> None:
    if dt not in D.FLOATING:
        raise RuntimeError(f"{name} distribution is a continuous probability distribution. dtype "
                           f"must be a floating point but you specified {key[dt]}")


def _gen_of(generator, like, op: str) -> Generator:
    """The generator to draw from for an array ``like`` (its device's default if none)."""
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"{op}(): argument 'generator' must be torch.Generator, not "
                        f"{type(generator).__name__}")
    return _gen(generator, _backend.device_of(like))


def _host(a) -> np.ndarray:
    return a if type(a) is np.ndarray else _backend.to_device(a, _backend.cpu)


def _place(arr, like):
    """``arr`` (drawn on the host) on the device of ``like``."""
    return arr if type(like) is np.ndarray else _backend.to_device(arr, _backend.device_of(like))


def _in_order(x, flat):
    """``flat`` (values in torch's order of iteration over ``x``) in ``x``'s shape: C order, or
    memory order for a permuted view (NOTE(pytorch): TensorIterator sorts dimensions by stride)."""
    if x.ndim < 2 or x.flags.c_contiguous:
        return flat.reshape(x.shape)
    axes = sorted(range(x.ndim), key=lambda a: -abs(x.strides[a]))
    return flat.reshape([x.shape[a] for a in axes]).transpose(np.argsort(axes))


def _shaped(draw, x):
    """``draw(n, dtype)`` for the values of ``x``, in its shape and dtype; a complex ``x`` draws
    its real and imaginary parts as one real tensor twice as long, as PyTorch's view_as_real."""
    dt = x.dtype
    if dt.kind == "c":
        rd = np.dtype(dt.char.lower())
        return draw(2 * x.size, rd).astype(rd, copy=False).view(dt).reshape(x.shape)
    return _in_order(x, draw(x.size, dt).astype(dt, copy=False))


def _uniform(x, from_, to, generator):
    dt = x.dtype
    if dt not in D.INEXACT:
        raise _not_impl("check_uniform_bounds", dt)
    real = D._FROM_NP[dt].to_real().np
    top = float(D.np_finfo(real).max)
    for name, v in (("from", from_), ("to", to)):
        if not -top <= v <= top:
            raise RuntimeError(f"{name} is out of bounds for {_CTYPE[real]}")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={_g(from_)} > to={_g(to)}")
    if to - from_ > top:
        raise RuntimeError(
            f"uniform_ expects to-from <= std::numeric_limits<{D.SHORT_NAMES[real]}>::max(), "
            f"but found to={_g(to)} and from={_g(from_)} which result in to-from to exceed the limit")
    g = _gen_of(generator, x, "uniform_")
    return _place(_shaped(lambda n, d: _random.uniform(g, n, d, from_, to), x), x)


def _normal_values(x, mean, std, g):
    if x.dtype.kind == "c":  # PyTorch splits the variance between the real and imaginary parts
        std = std / np.sqrt(2)
    contiguous = x.flags.c_contiguous  # else torch draws one value at a time
    return _shaped(lambda n, d: _random.normal(g, n, d, mean, std, contiguous), x)


def _normal_(x, mean, std, generator):
    if x.dtype not in D.INEXACT:
        raise _not_impl("normal_kernel_cpu", x.dtype)
    if not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_g(std)}")
    return _place(_normal_values(x, mean, std, _gen_of(generator, x, "normal_")), x)


def _bernoulli_float(x, p, generator):
    if x.dtype.kind == "c":
        raise _not_impl("bernoulli_scalar_cpu_", x.dtype)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_g(p)}")
    g = _gen_of(generator, x, "bernoulli_")
    return _place(_in_order(x, _random.bernoulli_scalar(g, x.size, p)).astype(x.dtype), x)


_P_IN = ("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
         "improved?  If so, please report an enhancement request to PyTorch.)")


def _bernoulli_draw(x, p, g):
    """0/1 in ``x``'s dtype with probabilities ``p`` (an array broadcast to ``x``'s shape)."""
    p = _host(p)
    if p.dtype not in D.FLOATING:
        raise _not_impl("bernoulli_tensor_cpu_p_", p.dtype)
    if not ((p >= 0) & (p <= 1)).all():
        raise RuntimeError(_P_IN)
    p = np.broadcast_to(p, x.shape)
    if x.ndim >= 2 and not x.flags.c_contiguous:
        axes = sorted(range(x.ndim), key=lambda a: -abs(x.strides[a]))
        p = p.transpose(axes)
    return _place(_in_order(x, _random.bernoulli_tensor(g, np.ascontiguousarray(p)).reshape(-1))
                  .astype(x.dtype), x)


def _bernoulli_tensor(x, p, generator):
    if x.dtype.kind == "c":
        raise _not_impl("bernoulli_tensor_cpu_self_", x.dtype)
    if p.ndim > x.ndim:
        raise RuntimeError(
            f"expand(torch.{D.SHORT_NAMES[p.dtype]}Tensor{{{list(p.shape)}}}, size={list(x.shape)}): the number "
            f"of sizes provided ({x.ndim}) must be greater or equal to the number of dimensions in "
            f"the tensor ({p.ndim})")
    for d in range(1, p.ndim + 1):
        if p.shape[-d] not in (1, x.shape[-d]):
            raise RuntimeError(
                f"The expanded size of the tensor ({x.shape[-d]}) must match the existing size "
                f"({p.shape[-d]}) at non-singleton dimension {x.ndim - d}.  Target sizes: "
                f"{list(x.shape)}.  Tensor sizes: {list(p.shape)}")
    return _bernoulli_draw(x, p, _gen_of(generator, x, "bernoulli_"))


def _exponential(x, lambd, generator):
    _continuous("Exponential", x.dtype)
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_g(lambd)}")
    g = _gen_of(generator, x, "exponential_")
    return _place(_shaped(lambda n, d: _random.exponential(g, n, lambd), x), x)


def _geometric(x, p, generator):
    if x.dtype.kind in "bc":
        raise _not_impl("geometric_cpu", x.dtype)
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_g(p)}")
    g = _gen_of(generator, x, "geometric_")
    return _place(_shaped(lambda n, d: _random.geometric(g, n, p), x), x)


def _log_normal(x, mean, std, generator):
    if x.dtype not in D.FLOATING:
        raise _not_impl("log_normal_cpu", x.dtype)
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_g(std)}")
    g = _gen_of(generator, x, "log_normal_")
    return _place(_shaped(lambda n, d: np.exp(_random.normal_pairs(g, n, mean, std)), x), x)


def _cauchy(x, median, sigma, generator):
    _continuous("Cauchy", x.dtype, _CTYPE)
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_g(sigma)}")
    g = _gen_of(generator, x, "cauchy_")
    return _place(_shaped(lambda n, d: _random.cauchy(g, n, median, sigma), x), x)


def _random_bounds(dt):
    """The values ``random_()`` draws from by default: [0, 2**digits] for floats (every integer
    there is exact), [0, max] for integers."""
    if dt in D.FLOATING:
        return 2 ** _DIGITS[dt]
    return 1 if dt.kind == "b" else int(np.iinfo(dt).max)


def _random_ints(x, from_, to, generator):
    """``random_`` with ``to=None`` meaning the dtype's upper bound (inclusive)."""
    dt = x.dtype
    if dt.kind == "c":
        if to is None and from_ == 0:  # random_() checks no bounds, so the kernel refuses it
            raise _not_impl("random_kernel_cpu", dt)
        raise RuntimeError("check_random_bounds handles only integral, floating-point and boolean types")
    hi = _random_bounds(dt) if to is None else to - 1
    if to is not None and from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    if dt in D.FLOATING:
        lim = 2 ** _DIGITS[dt]
        for name, v in (("from", from_), ("to - 1", hi)):
            if not -lim <= v <= lim:
                warnings.warn(
                    f"{name} is out of bounds [-(2^{_DIGITS[dt]}), 2^{_DIGITS[dt]}]. Due to precision "
                    f"limitations {_CTYPE[dt]} can support discrete uniform distribution only within "
                    "this range. This warning will become an error in version 1.7 release, please fix "
                    "the code in advance", UserWarning, stacklevel=4)
    else:
        lo_b, hi_b = (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
        name = "bool" if dt.kind == "b" else _CTYPE[dt].replace("short int", "short").replace("long int", "long")
        if not lo_b <= from_ <= hi_b:
            raise RuntimeError(f"from is out of bounds for {name}")
        if not lo_b <= hi <= hi_b:
            raise RuntimeError(f"to - 1 is out of bounds for {name}")
    g = _gen_of(generator, x, "random_")
    if to is None and from_ == 0:  # random_(): [0, bound] with the dtype's own draw
        vals = _random.random_bounded(g, x.size, hi + 1, dt.itemsize == 8)
    else:
        vals = _random.randint(g, x.size, from_, hi + 1)
    return _place(_in_order(x, vals).astype(dt), x)


_ZERO = {"self": lambda grad: grad * 0}  # PyTorch's nodes for sampling ops give zero gradients
_RANDOM = {"nondeterministic": True}  # a replay must run the op again (a new draw), never reuse its value


def _fill_op(schema, fwd, inplace, node):
    rec = defop(schema, fwd, _ZERO, jvp="elementwise", method=False, api=False, inplace=inplace,
                node_name=node, extra=_RANDOM)
    return rec


_fill_op("_uniform(Tensor self, float from_=0, float to=1, *, Generator? generator=None) -> Tensor",
                        _uniform, "uniform_", "UniformBackward0")
_fill_op("_normal_fill(Tensor self, float mean=0, float std=1, *, Generator? generator=None) -> Tensor",
         _normal_, "normal_", "NormalBackward0")
_fill_op("_exponential(Tensor self, float lambd=1, *, Generator? generator=None) -> Tensor",
         _exponential, "exponential_", "ExponentialBackward0")
_fill_op("_geometric(Tensor self, float p, *, Generator? generator=None) -> Tensor",
         _geometric, "geometric_", "GeometricBackward0")
_fill_op("_log_normal(Tensor self, float mean=1, float std=2, *, Generator? generator=None) -> Tensor",
         _log_normal, "log_normal_", "LogNormalBackward0")
_fill_op("_cauchy(Tensor self, float median=0, float sigma=1, *, Generator? generator=None) -> Tensor",
         _cauchy, "cauchy_", "CauchyBackward0")
# PyTorch numbers each overload's node: (from, to) 0, (to) 1, () 2; bernoulli_: Tensor p 1, float p 2
for _k in range(3):
    _fill_op(f"_random{_k}(Tensor self, int from_, int? to, *, Generator? generator=None) -> Tensor",
             _random_ints, f"random_{_k}", f"RandomBackward{_k}")
defop("_bernoulli_p(Tensor self, Tensor p, *, Generator? generator=None) -> Tensor",
                _bernoulli_tensor, {"self": lambda grad: grad * 0, "p": lambda grad: grad * 0},
                jvp="elementwise",
                method=False, api=False, inplace="bernoulli_1", node_name="BernoulliBackward1", extra=_RANDOM)
_fill_op("_bernoulli_float(Tensor self, float p=0.5, *, Generator? generator=None) -> Tensor",
                   _bernoulli_float, "bernoulli_2", "BernoulliBackward2")
for _name in ("random_0", "random_1", "random_2", "bernoulli_1", "bernoulli_2"):
    delattr(Tensor, _name)  # reached through random_ / bernoulli_ below, which pick the overload
_RANDOM_IP = [OPS[f"random_{k}"].call for k in range(3)]
_bern_ip_t, _bern_ip_f = OPS["bernoulli_1"].call, OPS["bernoulli_2"].call


def uniform_(self, from_=0, to=1, *, generator=None, **kw):
    """Fill ``self`` with numbers drawn uniformly from ``[from, to)``."""
    if kw:  # ``from`` is a Python keyword, so it can only come as ``**{"from": ...}``
        from_ = kw.pop("from", from_)
        if kw:
            raise TypeError(f"uniform_() got an unexpected keyword argument '{next(iter(kw))}'")
    return _uniform_ip(self, from_, to, generator=generator)


_uniform_ip = Tensor.uniform_
Tensor.uniform_ = uniform_

_RANDOM_SIGS = ("(*, torch.Generator generator = None)\n * (int from, int to, *, torch.Generator "
                "generator = None)\n * (int to, *, torch.Generator generator = None)\n")


def random_(self, *args, generator=None, **kw):
    """Fill ``self`` with integers from ``[from, to - 1]``: ``random_(to)``, ``random_(from, to)``
    (``to=None``: up to the dtype's bound) or ``random_()`` (``[0, 2**mantissa]`` for floats)."""
    if "from" in kw:
        args, kw = args + (kw.pop("from"),) + ((kw.pop("to"),) if "to" in kw else ()), kw
    elif "to" in kw:
        args = args + (kw.pop("to"),)
    ok = not kw and len(args) <= 2 and all(
        isinstance(a, numbers.Integral) or (a is None and i == 1) for i, a in enumerate(args))
    if len(args) == 1 and args[0] is None:
        ok = False
    if not ok:
        got = ", ".join([type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kw.items()])
        raise TypeError(f"random_() received an invalid combination of arguments - got ({got}), but "
                        f"expected one of:\n * {_RANDOM_SIGS}")
    if len(args) == 2:
        return _RANDOM_IP[0](self, int(args[0]), None if args[1] is None else int(args[1]), generator=generator)
    if len(args) == 1:
        return _RANDOM_IP[1](self, 0, int(args[0]), generator=generator)
    return _RANDOM_IP[2](self, 0, None, generator=generator)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill ``self`` with 0/1 draws, 1 with probability ``p`` (a float or a tensor)."""
    if isinstance(p, Tensor):
        return _bern_ip_t(self, p, generator=generator)
    return _bern_ip_f(self, p, generator=generator)


Tensor.random_ = random_
Tensor.bernoulli_ = bernoulli_


# --- sampling functions ---
def _normal_tt(mean, std, generator):
    if mean.dtype not in D.INEXACT:
        raise _not_impl("normal_kernel_cpu", mean.dtype)
    if not (_host(std) >= 0).all():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    out = np.empty(np.broadcast_shapes(mean.shape, std.shape), mean.dtype)
    z = _normal_values(out, 0.0, 1.0, _gen_of(generator, mean, "normal"))
    return _place((z * _host(std) + _host(mean)).astype(mean.dtype, copy=False), mean)


def _normal_tf(mean, std, generator):
    if mean.dtype not in D.INEXACT:
        raise _not_impl("normal_kernel_cpu", mean.dtype)
    if not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_g(std)}")
    return _place(_normal_values(mean, 0.0, std, _gen_of(generator, mean, "normal")) + _host(mean), mean)


def _normal_ft(mean, std, generator):
    if std.dtype not in D.INEXACT:
        raise _not_impl("normal_kernel_cpu", std.dtype)
    if not (_host(std) >= 0).all():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    z = _normal_values(std, 0.0, 1.0, _gen_of(generator, std, "normal"))
    return _place((z * _host(std) + mean).astype(std.dtype, copy=False), std)


_NORMAL = {
    (True, True): defop("_normal_tt(Tensor mean, Tensor std, Generator? generator=None) -> Tensor", _normal_tt,
                        {"mean": lambda grad: grad * 0, "std": lambda grad: grad * 0},
                        jvp="elementwise", promote=PROMOTE_COMMON,
                        method=False, api=False, node_name="NormalBackward3", extra=_RANDOM).call,
    (True, False): defop("_normal_tf(Tensor mean, float std=1, Generator? generator=None) -> Tensor", _normal_tf,
                         {"mean": lambda grad: grad * 0}, jvp="elementwise",
                         method=False, api=False,
                         node_name="NormalBackward1", extra=_RANDOM).call,
    (False, True): defop("_normal_ft(float mean, Tensor std, Generator? generator=None) -> Tensor", _normal_ft,
                         {"std": lambda grad: grad * 0}, jvp="elementwise", method=False, api=False,
                         node_name="NormalBackward2", extra=_RANDOM).call,
}
_NORMAL_SIGS = (
    " * (Tensor mean, Tensor std, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (Tensor mean, float std = 1, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (float mean, Tensor std, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (float mean, float std, tuple of ints size, *, torch.Generator generator = None, Tensor out "
    "= None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool "
    "pin_memory = False, bool requires_grad = False)\n")


def _normal_floats(mean, std, size, generator, dtype, layout, device, pin):
    dt = _dt(dtype)
    if dt not in D.INEXACT:
        raise _not_impl("normal_kernel_cpu", dt)
    if not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_g(std)}")
    return _on_device(_normal_values(np.empty(size, dt), mean, std, _gen(generator, device)), device)


_normal_ff = defop("normal.float_float(float mean, float std, SymInt[] size, *, Generator? generator=None, "
                   "ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
                   _normal_floats, samples=_drawn, api=False, method=False, extra=_RANDOM)


def normal(mean, std=None, size=None, *, generator=None, out=None, dtype=None, layout=None,
           device=None, pin_memory=False, requires_grad=False) -> Tensor:
    """Draws from normal distributions with the given means and standard deviations: tensor and
    tensor (broadcast), tensor and float, float and tensor, or floats with a ``size``."""
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    ok = generator is None or isinstance(generator, Generator)  # else no overload matches
    if mt and std is None:
        std = 1.0
    if ok and (mt or st) and size is None:
        return _NORMAL[mt, st](mean, std, generator)
    if ok and not mt and not st and size is not None and std is not None:
        _check(device)
        args = (mean, std, _size((size,)), generator, None if dtype is None else D.to_dtype(dtype),
                layout, device, None)
        return _grad_leaf(dispatch(_normal_ff, args), requires_grad)
    got = ", ".join(["Tensor" if isinstance(a, Tensor) else type(a).__name__
                     for a in (mean, std, size) if a is not None]
                    + ([f"generator={type(generator).__name__}"] if generator is not None else []))
    raise TypeError(f"normal() received an invalid combination of arguments - got ({got}), but "
                    f"expected one of:\n{_NORMAL_SIGS}")


def _bernoulli(x, generator):
    return _bernoulli_draw(x, x, _gen_of(generator, x, "bernoulli"))


_bernoulli_op = defop("_bernoulli(Tensor self, Generator? generator=None) -> Tensor", _bernoulli, _ZERO,
                      jvp="elementwise",
                      method=False, api=False, node_name="BernoulliBackward0", extra=_RANDOM).call


def bernoulli(input, p=None, *, generator=None, out=None) -> Tensor:
    """0/1 draws: 1 with probability ``input`` (elementwise), or with probability ``p`` when given."""
    if p is None:
        return _bernoulli_op(input, generator)
    from ..autograd.grad_mode import no_grad

    with no_grad():  # PyTorch records no node for this overload either
        return empty_like(input).bernoulli_(p, generator=generator)


def _poisson(x, generator):
    if x.dtype not in D.FLOATING:
        raise _not_impl("poisson_cpu", x.dtype)
    rate = _host(x)
    if not (rate >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return _place(_gen_of(generator, x, "poisson").rng.poisson(rate).astype(x.dtype), x)


_poisson_op = defop("_poisson(Tensor self, Generator? generator=None) -> Tensor", _poisson, _ZERO,
                    jvp="elementwise",
                    method=False, api=False, node_name="PoissonBackward0", extra=_RANDOM).call


def poisson(input, generator=None) -> Tensor:
    """Draws from Poisson distributions with the rates in ``input``."""
    return _poisson_op(input, generator)


def _randperm_array(n, generator, dtype, layout, device, pin):
    dt = _dt(dtype, D.int64)
    if dt.kind in "bc":
        raise _not_impl("randperm", dt)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    if dt.kind in "iu" and n - 1 > np.iinfo(dt).max:
        raise RuntimeError(f"value cannot be converted to type {dt.name}_t without overflow")
    if dt == np.float16 and n > 2049:
        raise RuntimeError("n cannot be greater than 2049 for Half type.")
    return _on_device(_random.randperm(_gen(generator, device), n).astype(dt), device)


_randperm = defop("randperm(SymInt n, *, Generator? generator=None, ScalarType? dtype=None, "
                  "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
                  _randperm_array, samples=_drawn, api=False, method=False, extra=_RANDOM)


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
             requires_grad=False) -> Tensor:
    """A random permutation of ``0 .. n-1``."""
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"randperm(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    device = _device(device)
    args = (n, generator, None if dtype is None else D.to_dtype(dtype), layout, device, None)
    return _grad_leaf(dispatch(_randperm, args), requires_grad)


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None) -> Tensor:
    """Indices drawn from the categories of each row of ``input`` (weights, not necessarily
    normalised), with or without replacement."""
    return dispatch(_multinomial, (input, num_samples, replacement, generator))


def _multinomial_array(x, num_samples, replacement, generator):
    if x.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if x.dtype not in D.FLOATING:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {D.SHORT_NAMES[x.dtype]}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    k = x.shape[-1]
    if not replacement and num_samples > k:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    w = _host(x).reshape(-1, k)
    p = w.astype(np.float64)
    if not (np.isfinite(p).all() and (p >= 0).all()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    total = p.sum(-1, keepdims=True)
    if not (total > 0).all():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    g = _gen_of(generator, x, "multinomial")
    idx = _random.multinomial(g, w, num_samples, replacement)
    return _place(idx.astype(np.int64).reshape(x.shape[:-1] + (num_samples,)), x)


_multinomial = defop("multinomial(Tensor self, int num_samples, bool replacement=False, *, "
                     "Generator? generator=None) -> Tensor", _multinomial_array, samples=_drawn, api=False,
                     method=False, extra=_RANDOM)


Tensor.bernoulli = lambda self, p=None, *, generator=None: bernoulli(self, p, generator=generator)
Tensor.multinomial = lambda self, num_samples, replacement=False, *, generator=None: multinomial(
    self, num_samples, replacement, generator=generator)


for _name in ("normal", "bernoulli", "poisson", "randperm", "multinomial"):
    NAMESPACES[""][_name] = globals()[_name]


# --- dropout: the mask is drawn inside an op, so that a replayed graph draws a new one ---
_SELU_SAT = 1.7580993408473766  # -min of selu (scale * alpha): where alpha dropout sends a dropped unit


def _keep(x, p, shape):
    """A bool mask of ``shape``, True with probability ``1 - p``. At p = 1 no draw and no check:
    NOTE(pytorch): F.dropout then multiplies by zero, whatever the dtype."""
    if p == 1:
        return _backend.namespace_of(x).zeros(shape, bool)
    if x.dtype not in D.INEXACT:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {D.SHORT_NAMES[x.dtype]}")
    g = _gen_of(None, x, "dropout")
    # NOTE(pytorch): CPU dropout draws its mask as ``bernoulli_(1 - p)``
    return _place(_random.bernoulli_scalar(g, math.prod(shape), 1 - p).reshape(shape), x)


def _noise(keep, p, dt):
    """The mask scaled as PyTorch's: ``noise.div_(1 - p)`` in the input's dtype (zero at p = 1)."""
    return keep.astype(dt) / dt.type(1 - p) if p < 1 else keep.astype(dt) * dt.type(0)


def _dropout_scale(p, train=True) -> float:
    return 1.0 if train is False else 0.0 if p == 1 else 1.0 / (1.0 - p)


def _native_dropout(x, p, train):
    if train is False:
        return x.copy(), _backend.namespace_of(x).ones(x.shape, bool)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_g(1 - p)}")
    keep = _keep(x, p, x.shape)
    with np.errstate(invalid="ignore"):  # inf * 0 is nan, as PyTorch's (silent) product
        return x * _noise(keep, p, x.dtype), keep


def _native_dropout_backward(g, mask, scale):
    return g * (mask * scale).astype(g.dtype)


def _dropout_impl(x, p, feature, alpha):
    """Dropout with a mask per (sample, channel) (``feature``) and/or alpha dropout's affine
    map (dropped units at selu's saturation, mean and variance kept); 0 <= p <= 1."""
    if feature and x.ndim < 2 and p < 1:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    keep = _keep(x, p, x.shape[:2] + (1,) * (x.ndim - 2) if feature else x.shape)
    with np.errstate(invalid="ignore"):  # inf * 0 is nan, as PyTorch's (silent) product
        if p == 1:
            return x * x.dtype.type(0), keep
        if not alpha:
            return x * _noise(keep, p, x.dtype), keep
    a = _alpha_scale(p)
    k = keep.astype(x.dtype)
    b = (k - 1) * x.dtype.type(_SELU_SAT * a) + x.dtype.type(_SELU_SAT * a * p)
    with np.errstate(invalid="ignore"):
        out = x * (k * x.dtype.type(a))
    out += b
    return out, keep


def _alpha_scale(p) -> float:
    return 1.0 / math.sqrt((_SELU_SAT * _SELU_SAT * p + 1) * (1 - p)) if p < 1 else 0.0


def _dropout_samples(rng):
    x = rng.standard_normal
    return [sample("p03", x((3, 4)), 0.3, True), sample("eval", x((3, 4)), 0.5, False),
            sample("train_none_nc", nc(x((4, 5))), 0.5, None), sample("p1", x((3, 4)), 1.0, True),
            sample("0d", x(()), 0.4, True)]


def _dropout_impl_samples(rng):
    x = rng.standard_normal
    return [sample("feature", x((2, 3, 4)), 0.5, True, False),
            sample("alpha_nc", nc(x((3, 4))), 0.3, False, True),
            sample("feature_alpha", x((2, 3, 2, 2)), 0.4, True, True),
            sample("p1_alpha", x((3, 4)), 1.0, False, True)]


def _dropout_backward_samples(rng):
    def mask(*s):
        return rng.uniform(0, 1, s) > 0.4

    g = rng.standard_normal
    return [sample("2d", g((3, 4)), mask(3, 4), 1.5), sample("bcast_mask", g((2, 3, 4)), mask(2, 3, 1), 2.0),
            sample("0d", g(()), np.array(True), 0.5)]


# The gradient is linear in grad_output and diagonal, so it is its own vjp.
native_dropout_backward = defop(
    "native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor", _native_dropout_backward,
    {"grad_output": lambda grad, mask, scale: native_dropout_backward(grad, mask, scale)},
    jvp="linear",
    method=False, api=False, torch="torch.ops.aten.native_dropout_backward",
    samples=_dropout_backward_samples).call
native_dropout = defop(
    "native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)", _native_dropout,
    {"input": lambda grad, result1, p, train: native_dropout_backward(grad, result1, _dropout_scale(p, train))},
    jvp=lambda input_t, result1, p, train:  # the tangent through the same mask (no second draw)
        (native_dropout_backward(input_t, result1, _dropout_scale(p, train)), None),
    method=False, samples=_dropout_samples, extra=_RANDOM).call
dropout_impl = defop(
    "_dropout_impl(Tensor input, float p, bool feature, bool alpha) -> (Tensor, Tensor)", _dropout_impl,
    {"input": lambda grad, result1, p, alpha: native_dropout_backward(
        grad, result1, _alpha_scale(p) if alpha else _dropout_scale(p))},
    jvp=lambda input_t, result1, p, alpha: (native_dropout_backward(
        input_t, result1, _alpha_scale(p) if alpha else _dropout_scale(p)), None),
    method=False, api=False, samples=_dropout_impl_samples, extra=_RANDOM).call
