"""Discrete Fourier transforms: ``torch.fft`` over the array namespace's ``fft`` module.

Three primitives, PyTorch's own: ``_fft_c2c`` (complex to complex over given dims, forward or
inverse), ``_fft_r2c`` (real to complex, one-sided or full) and ``_fft_c2r`` (one-sided complex to
real). Each one's gradient is another of them, so every order differentiates; all three are
linear, so their tangents are the op applied to the tangents. The functions of ``ndgrad.fft``
are composites: dims and sizes checked as PyTorch checks them, the input zero-padded or trimmed
to ``n``/``s`` (one ``pad``), then one primitive (and ``conj`` for inverse transforms of real
input and the Hermitian ones). ``fftfreq``/``rfftfreq`` and ``fftshift``/``ifftshift`` are
composites of ``arange``/``cat`` and ``roll``.
"""

from __future__ import annotations

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._tensor import Tensor, _wrap_dim
from .factory import arange
from .nn import pad_fn
from .pointwise import conj
from .registry import NAMESPACES, defcomposite, defop, write_out
from .samples import nc, sample
from .shape import cat, real

# PyTorch's normalization modes of the primitives: the result scaled by 1, 1/sqrt(n) or 1/n,
# whichever the direction (n: the number of points of the transformed signal).
_NONE, _BY_ROOT_N, _BY_N = 0, 1, 2
# NumPy's ``norm`` names the direction that is scaled instead: the name for each mode
_NP_NORM = {True: ("backward", "ortho", "forward"), False: ("forward", "ortho", "backward")}


# --- primitives: forwards on arrays ---
def _dims(x, dim) -> list:
    return [_wrap_dim(d, x.ndim) for d in dim]


def _tname(x) -> str:
    """PyTorch's name of the scalar type of an array or tensor (``Float``, ``ComplexDouble``)."""
    return D.SHORT_NAMES[np.dtype(x.dtype.np if isinstance(x.dtype, D.dtype) else x.dtype)]


def _check_complex(x) -> None:
    if x.dtype.kind != "c":
        raise RuntimeError(f"Only supports complex dtypes, but found: {_tname(x)}")


def _check_real(x) -> None:
    if x.dtype not in (np.float32, np.float64):
        if x.dtype.kind in "fV":  # half, bfloat16
            raise RuntimeError(f"Unsupported dtype {_tname(x)}")
        raise RuntimeError(f"Only supports floating-point dtypes, but found: {_tname(x)}")


def _complex_of(x):
    return np.complex64 if x.dtype in (np.float32, np.complex64) else np.complex128


def _c2c(x, dim, normalization, forward):
    _check_complex(x)
    dim = _dims(x, dim)
    if not dim or x.size == 0:
        return x.copy()
    fft = _backend.namespace_of(x).fft
    f = fft.fftn if forward else fft.ifftn
    return f(x, axes=dim, norm=_NP_NORM[forward][normalization]).astype(x.dtype, copy=False)


def _r2c(x, dim, normalization, onesided):
    _check_real(x)
    dim = _dims(x, dim)
    if not dim:
        raise RuntimeError("rfftn must transform at least one axis")
    if x.size == 0:
        shape = list(x.shape)
        if onesided:
            shape[dim[-1]] = shape[dim[-1]] // 2 + 1
        return _backend.namespace_of(x).zeros(shape, _complex_of(x))
    fft = _backend.namespace_of(x).fft
    f = fft.rfftn if onesided else fft.fftn  # rfftn halves the last dim of ``dim``
    return f(x, axes=dim, norm=_NP_NORM[True][normalization]).astype(_complex_of(x), copy=False)


def _c2r(x, dim, normalization, last_dim_size):
    _check_complex(x)
    dim = _dims(x, dim)
    if not dim:
        raise RuntimeError("irfftn must transform at least one axis")
    if x.shape[dim[-1]] != last_dim_size // 2 + 1:
        raise RuntimeError(f"_fft_c2r: the last dim transformed has {x.shape[dim[-1]]} elements, "
                           f"expected {last_dim_size // 2 + 1} for last_dim_size {last_dim_size}")
    s = [x.shape[d] for d in dim[:-1]] + [last_dim_size]
    real_dtype = np.float32 if x.dtype == np.complex64 else np.float64
    if x.size == 0:
        shape = list(x.shape)
        shape[dim[-1]] = last_dim_size
        return _backend.namespace_of(x).zeros(shape, real_dtype)
    # c2c (inverse) over the other dims, then c2r over the last: the imaginary parts of the
    # last dim's zero (and, n even, Nyquist) frequency are ignored, as PyTorch's kernels do
    fft = _backend.namespace_of(x).fft
    y = fft.irfftn(x, s=s, axes=dim, norm=_NP_NORM[False][normalization])
    return y.astype(real_dtype, copy=False)


# --- primitives: gradients, in PyTorch's form (the conjugate Wirtinger derivative) ---
# c2c is C-linear with a unitary (up to scale) matrix F: the gradient applies F^H, the same
# transform in the other direction with the same scale.
def _c2c_grad(grad, dim, normalization, forward):
    return fft_c2c(grad, dim, normalization, not forward)


# r2c: a real signal made complex, transformed, the redundant half dropped (one-sided). The
# gradient puts zeros in the dropped half, transforms back, and keeps the real part.
def _r2c_grad(grad, self_shape, dim, normalization, onesided):
    if onesided:
        last = dim[-1] % len(self_shape)
        grad = _resize(grad, [last], [self_shape[last]])
    return real(fft_c2c(grad, dim, normalization, False))


# c2r: the one-sided input stands for the full Hermitian spectrum, then a real inverse. Every
# entry but the zero frequency (and the Nyquist one, n even) appears twice in the full
# spectrum (itself and its mirror), so its gradient is doubled.
def _c2r_grad(grad, dim, normalization, last_dim_size):
    g = fft_r2c(grad, dim, normalization, True)
    last = dim[-1]
    m = g.shape[last]
    twice = last_dim_size - m  # the entries 1 .. twice have a mirror
    if twice <= 0:
        return g
    parts = [g.narrow(last, 0, 1), g.narrow(last, 1, twice) * 2]
    if m - 1 - twice:
        parts.append(g.narrow(last, 1 + twice, m - 1 - twice))
    return cat(parts, last)


def _rand(rng, *shape):
    return rng.standard_normal(shape)


def _crand(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


# Complex outputs: the formulas above are PyTorch's gradients already (extra complex_grad).
_TORCH_FORM = {"complex_grad": "torch"}

fft_c2c = defop(
    "_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor", _c2c,
    {"self": _c2c_grad}, jvp="linear", method=False, node_name="FftC2CBackward0", extra=_TORCH_FORM,
    samples=lambda rng: [sample("1d", _crand(rng, 5), [0], _NONE, True),
                         sample("2d_inverse_ortho", _crand(rng, 3, 4), [0, 1], _BY_ROOT_N, False),
                         sample("batch_by_n", _crand(rng, 2, 3, 4), [2], _BY_N, True),
                         sample("nc_dims", nc(_crand(rng, 2, 3, 4)), [2, 0], _BY_N, False)]).call
fft_r2c = defop(
    "_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor", _r2c,
    {"self": _r2c_grad}, jvp="linear", method=False, node_name="FftR2CBackward0", extra=_TORCH_FORM,
    samples=lambda rng: [sample("even", _rand(rng, 6), [0], _NONE, True),
                         sample("odd", _rand(rng, 5), [0], _BY_N, True),
                         sample("2d_ortho", _rand(rng, 3, 4), [0, 1], _BY_ROOT_N, True),
                         sample("full", _rand(rng, 3, 5), [1], _BY_N, False),
                         sample("nc_dims", nc(_rand(rng, 2, 3, 4)), [2, 0], _NONE, True)]).call
fft_c2r = defop(
    "_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor", _c2r,
    {"self": _c2r_grad}, jvp="linear", method=False, node_name="FftC2RBackward0",
    samples=lambda rng: [sample("even", _crand(rng, 4), [0], _NONE, 6),
                         sample("odd", _crand(rng, 4), [0], _BY_N, 7),
                         sample("2d_ortho", _crand(rng, 3, 4), [0, 1], _BY_ROOT_N, 6),
                         sample("two", _crand(rng, 3, 2), [1], _BY_N, 2),
                         sample("nc_dims", nc(_crand(rng, 2, 3, 3)), [2, 0], _BY_N, 3)]).call


# --- the public functions: arguments as PyTorch checks them ---
def _norm(norm, forward: bool) -> int:
    """The primitive's normalization for ``norm`` in the given direction."""
    if norm is None or norm == "backward":
        return _NONE if forward else _BY_N
    if norm == "forward":
        return _BY_N if forward else _NONE
    if norm == "ortho":
        return _BY_ROOT_N
    raise RuntimeError(f'Invalid normalization mode: "{norm}"')


def _wrap(dim: int, ndim: int) -> int:
    if ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return _wrap_dim(dim, ndim)


def _points(n: int) -> int:
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return n


def _float(x):
    """A real input as PyTorch's FFTs take it: integers and bool to the default dtype; complex
    inputs are left to the primitive (which names them)."""
    dt = x.dtype
    if dt in (D.float32, D.float64) or dt.is_complex:
        return x
    if dt.is_floating_point:
        raise RuntimeError(f"Unsupported dtype {_tname(x)}")
    return x.to(D.get_default_dtype())


def _complex(x):
    if x.is_complex():
        return x
    x = _float(x)
    return x.to(D.complex64 if x.dtype == D.float32 else D.complex128)


def _real_only(x, name: str) -> None:
    if x.is_complex():
        raise RuntimeError(f"{name} expects a real input tensor, but got {_tname(x)}")


def _resize(x, dims, sizes):
    """``x`` zero-padded or trimmed to ``sizes`` along ``dims`` (one ``pad``; a negative one
    trims)."""
    if all(x.shape[d] == s for d, s in zip(dims, sizes, strict=True)):
        return x
    want = dict(zip(dims, sizes, strict=True))
    pad = []
    for d in range(x.dim() - 1, min(dims) - 1, -1):
        pad += [0, want[d] - x.shape[d] if d in want else 0]
    return pad_fn(x, pad)


def _dim_and_shape(x, s, dim):
    """PyTorch's reading of ``s`` and ``dim``: the dims to transform (wrapped, unique) and the
    signal size along each (``-1`` in ``s``: the input's size)."""
    ndim = x.dim()
    if dim is not None:
        dims = [_wrap(d, ndim) for d in ([dim] if isinstance(dim, int) else dim)]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is not None:
        s = [s] if isinstance(s, int) else list(s)
        if dim is not None:
            if len(s) != len(dims):
                raise RuntimeError("When given, dim and shape arguments must have the same length")
        elif len(s) > ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {ndim} "
                               "dimensions.")
        else:
            dims = list(range(ndim - len(s), ndim))
        shape = [x.shape[d] if n == -1 else n for d, n in zip(dims, s, strict=True)]
    else:
        if dim is None:
            dims = list(range(ndim))
        shape = [x.shape[d] for d in dims]
    for n in shape:
        _points(n)
    return dims, shape


def _c2c_any(x, dims, norm, forward):
    """fftn/ifftn of a resized input: c2c for complex input, full r2c for real input."""
    if x.is_complex():
        return fft_c2c(x, dims, _norm(norm, forward), forward)
    x = _float(x)
    if not dims:
        return _complex(x)
    y = fft_r2c(x, dims, _norm(norm, forward), False)
    return y if forward else conj(y)  # real input: the inverse is the conjugate forward transform


def _fft1(input, n, dim, norm, forward):
    d = _wrap(dim, input.dim())
    n = _points(input.shape[d] if n is None else n)
    return _c2c_any(_resize(input, [d], [n]), [d], norm, forward)


def _r2c1(name, input, n, dim, norm, forward):
    """rfft (forward) and ihfft (the conjugate of rfft in the other direction)."""
    _real_only(input, name)
    x = _float(input)
    d = _wrap(dim, x.dim())
    n = _points(x.shape[d] if n is None else n)
    y = fft_r2c(_resize(x, [d], [n]), [d], _norm(norm, forward), True)
    return y if forward else conj(y)


def _c2r1(input, n, dim, norm, forward):
    """irfft (inverse) and hfft (forward: irfft of the conjugate, scaled the other way)."""
    x = _complex(input)
    d = _wrap(dim, x.dim())
    n = _points(2 * (x.shape[d] - 1) if n is None else n)
    x = _resize(x, [d], [n // 2 + 1])
    return fft_c2r(conj(x) if forward else x, [d], _norm(norm, forward), n)


def _fftn(input, s, dim, norm, forward):
    dims, shape = _dim_and_shape(input, s, dim)
    return _c2c_any(_resize(input, dims, shape) if dims else input, dims, norm, forward)


def _r2cn(name, input, s, dim, norm, forward):
    if name == "rfftn" and input.is_complex():
        raise RuntimeError(f"rfftn expects a real-valued input tensor, but got {_tname(input)}")
    x = _float(input)
    dims, shape = _dim_and_shape(x, s, dim)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    y = fft_r2c(_resize(x, dims, shape), dims, _norm(norm, forward), True)
    return y if forward else conj(y)


def _c2rn(name, input, s, dim, norm, forward):
    x = _complex(input)
    dims, shape = _dim_and_shape(x, s, dim)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    last = s is not None and ([s] if isinstance(s, int) else list(s))[-1] != -1
    n = _points(shape[-1] if last else 2 * (x.shape[dims[-1]] - 1))
    x = _resize(x, dims, shape[:-1] + [n // 2 + 1])
    return fft_c2r(conj(x) if forward else x, dims, _norm(norm, forward), n)


def _out(name, fn, args, out):
    """``out=``: a complex transform writes any complex ``out``, a real one any floating ``out``
    (cast, as PyTorch's kernels do); the messages name the n-d kernel PyTorch runs."""
    if isinstance(out, Tensor):
        label = _KERNEL.get(name, name[4:])
        real = name in _REAL_OUT
        if not (out.dtype.is_floating_point if real else out.dtype.is_complex):
            kind = "floating point" if real else "complex"
            raise RuntimeError(f"{label} expects a {kind} output tensor, but got {_tname(out)}")
        return write_out(name, lambda: fn(*args).to(out.dtype), args[:1], out)
    return write_out(name, lambda: fn(*args), args[:1], out)


_REAL_OUT = {"fft_irfft", "fft_hfft", "fft_irfft2", "fft_hfft2", "fft_irfftn", "fft_hfftn"}
_KERNEL = {"fft_fft2": "fftn", "fft_ifft2": "fftn", "fft_ifftn": "fftn", "fft_rfft2": "rfftn",
           "fft_ihfft2": "ihfftn", "fft_irfft2": "irfftn", "fft_hfft2": "hfftn"}


# --- torch.fft's functions (docstrings: PyTorch's first line) ---
def fft(input, n=None, dim=-1, norm=None, *, out=None):
    """Computes the one dimensional discrete Fourier transform of :attr:`input`.

    >>> import ndgrad
    >>> ndgrad.fft.fft(ndgrad.arange(4)).tolist()
    [(6+0j), (-2+2j), (-2+0j), (-2-2j)]
    """
    if out is not None:
        return _out("fft_fft", fft, (input, n, dim, norm), out)
    return _fft1(input, n, dim, norm, True)


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    """Computes the one dimensional inverse discrete Fourier transform of :attr:`input`."""
    if out is not None:
        return _out("fft_ifft", ifft, (input, n, dim, norm), out)
    return _fft1(input, n, dim, norm, False)


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    """Computes the one dimensional Fourier transform of real-valued :attr:`input`.

    >>> import ndgrad
    >>> x = ndgrad.tensor([1., 2., 3., 4.], requires_grad=True)
    >>> ndgrad.fft.rfft(x).tolist()
    [(10+0j), (-2+2j), (-2+0j)]
    >>> ndgrad.fft.rfft(x).abs().sum().backward()
    >>> [round(g, 4) for g in x.grad.tolist()]
    [-0.7071, 1.2929, 0.7071, 2.7071]
    """
    if out is not None:
        return _out("fft_rfft", rfft, (input, n, dim, norm), out)
    return _r2c1("rfft", input, n, dim, norm, True)


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    """Computes the inverse of :func:`~torch.fft.rfft`.

    >>> import ndgrad
    >>> ndgrad.fft.irfft(ndgrad.fft.rfft(ndgrad.tensor([1., 2., 3., 4.]))).tolist()
    [1.0, 2.0, 3.0, 4.0]
    """
    if out is not None:
        return _out("fft_irfft", irfft, (input, n, dim, norm), out)
    return _c2r1(input, n, dim, norm, False)


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """Computes the one dimensional discrete Fourier transform of a Hermitian symmetric
    :attr:`input` signal."""
    if out is not None:
        return _out("fft_hfft", hfft, (input, n, dim, norm), out)
    return _c2r1(input, n, dim, norm, True)


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """Computes the inverse of :func:`~torch.fft.hfft`."""
    if out is not None:
        return _out("fft_ihfft", ihfft, (input, n, dim, norm), out)
    return _r2c1("ihfft", input, n, dim, norm, False)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Computes the 2 dimensional discrete Fourier transform of :attr:`input`."""
    if out is not None:
        return _out("fft_fft2", fft2, (input, s, dim, norm), out)
    return _fftn(input, s, dim, norm, True)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Computes the 2 dimensional inverse discrete Fourier transform of :attr:`input`."""
    if out is not None:
        return _out("fft_ifft2", ifft2, (input, s, dim, norm), out)
    return _fftn(input, s, dim, norm, False)


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Computes the 2-dimensional discrete Fourier transform of real :attr:`input`."""
    if out is not None:
        return _out("fft_rfft2", rfft2, (input, s, dim, norm), out)
    return _r2cn("rfftn", input, s, dim, norm, True)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Computes the inverse of :func:`~torch.fft.rfft2`."""
    if out is not None:
        return _out("fft_irfft2", irfft2, (input, s, dim, norm), out)
    return _c2rn("irfftn", input, s, dim, norm, False)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Computes the 2-dimensional discrete Fourier transform of a Hermitian symmetric
    :attr:`input` signal."""
    if out is not None:
        return _out("fft_hfft2", hfft2, (input, s, dim, norm), out)
    return _c2rn("hfftn", input, s, dim, norm, True)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Computes the 2-dimensional inverse discrete Fourier transform of real :attr:`input`."""
    if out is not None:
        return _out("fft_ihfft2", ihfft2, (input, s, dim, norm), out)
    return _r2cn("ihfftn", input, s, dim, norm, False)


def fftn(input, s=None, dim=None, norm=None, *, out=None):
    """Computes the N dimensional discrete Fourier transform of :attr:`input`."""
    if out is not None:
        return _out("fft_fftn", fftn, (input, s, dim, norm), out)
    return _fftn(input, s, dim, norm, True)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    """Computes the N dimensional inverse discrete Fourier transform of :attr:`input`."""
    if out is not None:
        return _out("fft_ifftn", ifftn, (input, s, dim, norm), out)
    return _fftn(input, s, dim, norm, False)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    """Computes the N-dimensional discrete Fourier transform of real :attr:`input`."""
    if out is not None:
        return _out("fft_rfftn", rfftn, (input, s, dim, norm), out)
    return _r2cn("rfftn", input, s, dim, norm, True)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    """Computes the inverse of :func:`~torch.fft.rfftn`."""
    if out is not None:
        return _out("fft_irfftn", irfftn, (input, s, dim, norm), out)
    return _c2rn("irfftn", input, s, dim, norm, False)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    """Computes the n-dimensional discrete Fourier transform of a Hermitian symmetric
    :attr:`input` signal."""
    if out is not None:
        return _out("fft_hfftn", hfftn, (input, s, dim, norm), out)
    return _c2rn("hfftn", input, s, dim, norm, True)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    """Computes the N-dimensional inverse discrete Fourier transform of real :attr:`input`."""
    if out is not None:
        return _out("fft_ihfftn", ihfftn, (input, s, dim, norm), out)
    return _r2cn("ihfftn", input, s, dim, norm, False)


# --- sample frequencies and shifts ---
def _freq(name, ks, n, d, out, dtype, device, requires_grad):
    """``k / (n * d)`` for the integers ``k`` of the ``arange`` pieces ``ks(n)``, as PyTorch
    computes it: ``k`` in ``dtype``, times the reciprocal in that dtype."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"{name}(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if out is not None:
        return write_out(name, lambda: _freq(name, ks, n, d, None, dtype, device, requires_grad),
                         (), out)
    dtype = D.get_default_dtype() if dtype is None else D.to_dtype(dtype)
    if dtype.is_complex:  # NOTE(pytorch): arange refuses complex dtypes, so fftfreq does too
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{D.SHORT_NAMES[dtype.np]}'")
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name[4:]} requires a floating point or complex dtype")
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    parts = [arange(lo, hi, dtype=dtype, device=device) for lo, hi in ks(n)]
    k = parts[0] if len(parts) == 1 else cat(parts)
    with np.errstate(divide="ignore", invalid="ignore"):  # d == 0 or n == 0: inf and nan, quietly
        scale = float(np.float64(1.0) / (np.float64(n) * np.float64(float(d))))
        k = k * scale
    return k.requires_grad_(requires_grad)


def _fftfreq_ks(n):
    return [(0, (n + 1) // 2), (-(n // 2), 0)]  # 0, 1, ..., then the negative frequencies


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """Computes the discrete Fourier Transform sample frequencies for a signal of size :attr:`n`.

    >>> import ndgrad
    >>> ndgrad.fft.fftfreq(4).tolist()
    [0.0, 0.25, -0.5, -0.25]
    """
    return _freq("fft_fftfreq", _fftfreq_ks, n, d, out, dtype, device, requires_grad)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """Computes the sample frequencies for :func:`~torch.fft.rfft` with a signal of size
    :attr:`n`."""
    return _freq("fft_rfftfreq", lambda n: [(0, n // 2 + 1)], n, d, out, dtype, device,
                 requires_grad)


def _shift(input, dim, half):
    dims = list(range(input.dim())) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    return input.roll([half(input.size(d)) for d in dims], dims)


def fftshift(input, dim=None):
    """Reorders n-dimensional FFT data, as provided by :func:`~torch.fft.fftn`, to have negative
    frequency terms first.

    >>> import ndgrad
    >>> ndgrad.fft.fftshift(ndgrad.fft.fftfreq(5)).tolist()
    [-0.4000000059604645, -0.20000000298023224, 0.0, 0.20000000298023224, 0.4000000059604645]
    """
    return _shift(input, dim, lambda n: n // 2)


def ifftshift(input, dim=None):
    """Inverse of :func:`~torch.fft.fftshift`."""
    return _shift(input, dim, lambda n: (n + 1) // 2)


# --- registration: the op-info table and ``ndgrad.fft`` ---
def _i(rng, *shape):
    return rng.integers(-3, 4, shape)


_SAMPLES = {
    fft: lambda rng: [
        sample("real", _rand(rng, 5)),
        sample("real_trim_dim0_ortho", _rand(rng, 6, 3), 4, 0, "ortho"),
        sample("complex_nc_forward", nc(_crand(rng, 3, 4)), None, -1, "forward"),
        sample("complex_pad", _crand(rng, 2, 3), 5),
        sample("int", _i(rng, 4))],
    ifft: lambda rng: [
        sample("real", _rand(rng, 5)),
        sample("real_pad_dim0_forward", nc(_rand(rng, 3, 4)), 5, 0, "forward"),
        sample("complex_ortho", _crand(rng, 3, 4), None, 1, "ortho"),
        sample("complex_trim", _crand(rng, 6), 4)],
    rfft: lambda rng: [
        sample("even", _rand(rng, 6)),
        sample("odd_pad_dim0", _rand(rng, 3, 5), 7, 0),
        sample("nc_ortho", nc(_rand(rng, 2, 6)), None, -1, "ortho"),
        sample("trim_forward", _rand(rng, 8), 5, -1, "forward"),
        sample("int", _i(rng, 5))],
    irfft: lambda rng: [
        sample("default", _crand(rng, 4)),
        sample("odd_n", _crand(rng, 3, 4), 7),
        sample("trim", _crand(rng, 5), 4, -1, "ortho"),
        sample("dim0_forward", nc(_crand(rng, 4, 3)), None, 0, "forward"),
        sample("real_input", _rand(rng, 4))],
    hfft: lambda rng: [
        sample("default", _crand(rng, 4)),
        sample("odd_n_ortho", _crand(rng, 3, 4), 5, -1, "ortho"),
        sample("dim0_forward", _crand(rng, 3, 2), 4, 0, "forward"),
        sample("real_input", _rand(rng, 4))],
    ihfft: lambda rng: [
        sample("even", _rand(rng, 6)),
        sample("pad_dim0", _rand(rng, 3, 5), 4, 0),
        sample("nc_ortho", nc(_rand(rng, 2, 5)), None, -1, "ortho")],
    fft2: lambda rng: [
        sample("real", _rand(rng, 3, 4)),
        sample("complex_s", _crand(rng, 2, 3, 4), (4, 3)),
        sample("nc_dims_ortho", nc(_crand(rng, 3, 4)), None, (1, 0), "ortho")],
    ifft2: lambda rng: [
        sample("complex", _crand(rng, 3, 4)),
        sample("real_s_forward", _rand(rng, 2, 3), (3, 3), (-2, -1), "forward")],
    rfft2: lambda rng: [
        sample("real", _rand(rng, 3, 4)),
        sample("s_forward", _rand(rng, 2, 3, 5), (4, 4), (-2, -1), "forward")],
    irfft2: lambda rng: [
        sample("default", _crand(rng, 3, 3)),
        sample("s_ortho", _crand(rng, 2, 3, 4), (4, 5), (-2, -1), "ortho")],
    hfft2: lambda rng: [
        sample("default", _crand(rng, 3, 3)),
        sample("s_ortho", _crand(rng, 3, 4), (2, 5), (0, 1), "ortho")],
    ihfft2: lambda rng: [
        sample("default", _rand(rng, 3, 4)),
        sample("s", _rand(rng, 2, 3, 4), (3, 3))],
    fftn: lambda rng: [
        sample("real_3d", _rand(rng, 2, 3, 4)),
        sample("complex_s", _crand(rng, 3, 4), (5,)),
        sample("complex_dims_ortho", _crand(rng, 2, 3, 4), (3, -1), (0, 2), "ortho"),
        sample("no_dims", _rand(rng, 3, 4), None, ()),
        sample("0d", _rand(rng))],
    ifftn: lambda rng: [
        sample("complex", _crand(rng, 2, 3, 4)),
        sample("real_s", nc(_rand(rng, 3, 4)), (2, 6))],
    rfftn: lambda rng: [
        sample("3d", _rand(rng, 2, 3, 4)),
        sample("dims_reversed", _rand(rng, 3, 4), (4, -1), (1, 0))],
    irfftn: lambda rng: [
        sample("3d", _crand(rng, 2, 3, 4)),
        sample("dims_reversed", _crand(rng, 3, 4), (4, 6), (1, 0), "forward")],
    hfftn: lambda rng: [
        sample("3d", _crand(rng, 2, 3, 3)),
        sample("s_forward", _crand(rng, 3, 4), (3, 6), None, "forward")],
    ihfftn: lambda rng: [
        sample("3d", _rand(rng, 2, 3, 4)),
        sample("s_ortho", _rand(rng, 3, 5), (3, 4), (0, 1), "ortho")],
    fftfreq: lambda rng: [sample("odd", 5), sample("even_d", 4, 0.5), sample("one", 1),
                          sample("empty", 0), sample("float64", 6, 0.3, dtype=D.float64)],
    rfftfreq: lambda rng: [sample("odd", 5), sample("even_d", 4, 0.5), sample("one", 1),
                           sample("float64", 7, 2.0, dtype=D.float64)],
    fftshift: lambda rng: [sample("1d_odd", _rand(rng, 5)), sample("dim", _rand(rng, 3, 4), 1),
                           sample("dims_nc", nc(_rand(rng, 3, 5)), (0, 1)),
                           sample("all", _rand(rng, 2, 3, 4))],
    ifftshift: lambda rng: [sample("1d_odd", _rand(rng, 5)), sample("dim", _rand(rng, 3, 4), -1),
                            sample("all_nc", nc(_rand(rng, 3, 5)))],
}

for _fn, _samples in _SAMPLES.items():
    defcomposite(_fn, name="fft_" + _fn.__name__, api="fft." + _fn.__name__, method=False,
                 samples=_samples)
del _fn, _samples
assert set(NAMESPACES["fft"]) == {f.__name__ for f in _SAMPLES}
