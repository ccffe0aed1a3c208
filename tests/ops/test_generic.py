"""Generic op tests, driven by the op-info table (every record x every sample).

For each sample: float64 gradcheck and gradgradcheck; where PyTorch is installed, forward values,
result dtype (float64 and float32 inputs) and gradients against torch; alias info (a view shares
memory iff declared; an in-place variant bumps the version and matches the out-of-place op).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import ndgrad as nd
from ndgrad._ops.registry import OPS, T_PLAIN
from ndgrad.autograd import gradcheck, gradgradcheck

try:
    import torch
except ImportError:  # the oracle is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) is not installed")


def _cases():
    out = []
    for name, rec in OPS.items():
        if rec.samples is None:
            continue
        rng = np.random.default_rng(zlib.crc32(name.encode()))  # the same samples every run
        for s in rec.samples(rng):
            out.append(pytest.param(rec, s, id=f"{name}-{s.name}"))
    return out


CASES = _cases()


def _tensor_params(rec, nargs):
    """Which positional args are Tensor-typed (all of them for a composite)."""
    if rec.kind == "composite":
        return set(range(nargs))
    return {i for i, p in enumerate(rec.params) if p.code != T_PLAIN}


def _convert(rec, sample, make, float_dtype=np.float64, complex_leaves=False):
    """Build call args; ``make(array, requires_grad)`` turns an array into a framework tensor.
    ``complex_leaves``: complex arrays are leaves too (complex64 where floats are float32)."""
    tensor_pos = _tensor_params(rec, len(sample.args))
    leaves = []

    def conv(a, i, top=True):
        if isinstance(a, np.ndarray):
            if a.dtype.kind == "f" or (complex_leaves and a.dtype.kind == "c"):
                rg = i not in sample.no_grad and float_dtype == np.float64
                cast = float_dtype if a.dtype.kind == "f" else np.result_type(float_dtype, np.complex64)
                t = make(a.astype(cast) if float_dtype != np.float64 else a, rg)
                if rg:
                    leaves.append(t)
                return t
            return make(a, False)
        if isinstance(a, (list, tuple)) and top and any(isinstance(x, np.ndarray) for x in a):
            return type(a)(conv(x, i, False) for x in a)
        return a

    args = [conv(a, i) if i in tensor_pos else a for i, a in enumerate(sample.args)]
    kwargs = {k: _kw(v, make) for k, v in sample.kwargs.items()}
    return args, kwargs, leaves


def _kw(v, make):
    if isinstance(v, np.ndarray):
        return make(v, False)
    return v


def _op(rec):
    """``rec.call``; for a random op, reseeded before each call (so one mask serves finite
    differences, and every device draws the CPU's numbers)."""
    if not rec.extra.get("nondeterministic"):
        return rec.call

    def call(*args, **kwargs):
        nd.manual_seed(0)
        for a in args:
            if isinstance(a, nd.Tensor) and a.device.type != "cpu":
                nd._factories.device_generator(a.device).manual_seed(0)
        return rec.call(*args, **kwargs)

    return call


def _nd_make(a, rg):
    t = nd.Tensor._make(a.copy(order="K") if a.flags.c_contiguous else a, None, 0, None)
    if a.base is not None and not a.flags.c_contiguous:
        t = nd.Tensor._make(a, None, 0, None)  # keep strided samples strided
    return t.requires_grad_(rg) if rg else t


def _outputs(res):
    return tuple(res) if isinstance(res, (tuple, list)) else (res,)


def _diff(outs):
    return [o for o in outs if isinstance(o, nd.Tensor) and o.requires_grad]


def _real_io(fn, leaves):
    """gradcheck works on float64: ``fn`` with each complex leaf taken as a (..., 2) real one
    (``view_as_complex`` inside) and each complex output given as ``view_as_real``; the real
    leaves. In PyTorch's convention the gradient of the real form is the real form of the
    complex gradient, so this checks complex gradients too."""
    cplx = [x.is_complex() for x in leaves]
    reals = tuple(nd.view_as_real(x.detach()).clone().requires_grad_() if c else x
                  for x, c in zip(leaves, cplx, strict=True))

    def real_fn(*xs):
        ins = [nd.view_as_complex(x) if c else x for x, c in zip(xs, cplx, strict=False)]
        outs = fn(*ins, *xs[len(cplx):])
        return tuple(nd.view_as_real(o) if isinstance(o, nd.Tensor) and o.is_complex() else o
                     for o in _outputs(outs))

    return real_fn, reals


@pytest.mark.parametrize("rec,sample", CASES)
def test_gradcheck(rec, sample):
    if not rec.gradcheck or not rec.differentiable:
        pytest.skip("op is not differentiable")
    args, kwargs, leaves = _convert(rec, sample, _nd_make, complex_leaves=True)
    if not leaves:
        pytest.skip("sample has no differentiable input")
    idx = [i for i, a in enumerate(args) if any(a is leaf for leaf in leaves)]
    op = _op(rec)

    def fn(*xs):
        call = list(args)
        for i, x in zip(idx, xs[: len(idx)], strict=False):
            call[i] = x
        return op(*call, **kwargs)

    if len(idx) != len(leaves):  # leaves inside a list argument (cat, stack)
        def fn(*xs):  # noqa: F811
            return op(*args, **kwargs)
        assert gradcheck(fn, tuple(leaves))
        return
    fn, leaves = _real_io(fn, leaves)
    outs = _diff(_outputs(fn(*leaves)))
    if not outs or any(o.dtype != nd.float64 for o in outs):
        pytest.skip("no float64 differentiable output (finite differences need float64)")
    assert gradcheck(fn, tuple(leaves))


@pytest.mark.parametrize("rec,sample", CASES)
def test_gradgradcheck(rec, sample):
    if not rec.gradcheck or not rec.differentiable or rec.extra.get("gradgrad") is False:
        pytest.skip("op has no second derivative to check")
    args, kwargs, leaves = _convert(rec, sample, _nd_make, complex_leaves=True)
    if not leaves:
        pytest.skip("sample has no differentiable input")
    idx = [i for i, a in enumerate(args) if any(a is leaf for leaf in leaves)]
    op = _op(rec)
    if len(idx) != len(leaves):
        def fn(*xs):
            return op(*args, **kwargs)
    else:
        def fn(*xs):
            call = list(args)
            for i, x in zip(idx, xs, strict=True):
                call[i] = x
            return op(*call, **kwargs)
        fn, leaves = _real_io(fn, leaves)
    outs = _diff(_outputs(fn(*leaves)))
    if not outs or any(o.dtype != nd.float64 for o in outs):
        pytest.skip("no float64 differentiable output (finite differences need float64)")
    assert gradgradcheck(fn, tuple(leaves))


# --- PyTorch as the oracle ---
def _torch_fn(rec):
    if callable(rec.torch):
        return rec.torch
    path = rec.torch
    if path is None:
        if rec.api:
            path = "torch." + rec.api
        elif rec.method:
            path = "Tensor." + rec.method
        else:
            return None
    obj = torch
    parts = path.split(".")
    if parts[0] == "torch":
        parts = parts[1:]
    elif parts[0] == "Tensor":
        name = parts[1]
        return lambda self, *a, **k: getattr(self, name)(*a, **k)
    for p in parts:
        obj = getattr(obj, p)
    return obj


def _torch_make(a, rg):
    t = torch.tensor(a)
    return t.requires_grad_(rg) if rg else t


def _to_torch_kwargs(kwargs):
    out = {}
    for k, v in kwargs.items():
        if isinstance(v, nd.dtype):
            v = getattr(torch, v.name)
        out[k] = v
    return out


def _np(t):
    if torch is not None and isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().resolve_neg().numpy()  # torch's conj() is a lazy view
    return t._data


@needs_torch
@pytest.mark.parametrize("rec,sample", CASES)
@pytest.mark.parametrize("float_dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_torch_oracle(rec, sample, float_dtype):
    tfn = _torch_fn(rec)
    if tfn is None:
        pytest.skip("no torch counterpart")
    args, kwargs, leaves = _convert(rec, sample, _nd_make, float_dtype, complex_leaves=True)
    targs, tkwargs, tleaves = _convert(rec, sample, _torch_make, float_dtype, complex_leaves=True)
    tkwargs = _to_torch_kwargs(tkwargs)
    targs = [getattr(torch, a.name) if isinstance(a, nd.dtype) else a for a in targs]
    try:
        expected = _outputs(tfn(*targs, **tkwargs))
    except Exception as e:  # torch rejects the input: so must we, with the same type
        with pytest.raises(type(e)):
            rec.call(*args, **kwargs)
        return
    got = _outputs(rec.call(*args, **kwargs))
    assert len(got) == len(expected)
    drawn = rec.extra.get("nondeterministic")  # torch draws other numbers: shapes and dtypes only
    tol = dict(rtol=1e-5, atol=1e-6) if float_dtype == np.float32 else dict(rtol=1e-7, atol=1e-9)
    for g, e in zip(got, expected, strict=True):
        if not isinstance(e, torch.Tensor):  # a Python value (allclose's bool)
            assert type(g) is type(e) and g == e
            continue
        assert str(g.dtype).split(".")[-1] == str(e.dtype).split(".")[-1], "result dtype"
        assert tuple(g.shape) == tuple(e.shape)
        if not drawn:
            np.testing.assert_allclose(g._data, _np(e), **tol, equal_nan=True)
    if float_dtype != np.float64 or drawn:
        return
    outs = [(g, e) for g, e in zip(got, expected, strict=True)
            if isinstance(e, torch.Tensor) and e.requires_grad]
    if not outs or not rec.differentiable:
        return
    rng = np.random.default_rng(1)
    gos = [rng.standard_normal(e.shape) + (1j * rng.standard_normal(e.shape) if e.is_complex() else 0)
           for _, e in outs]
    torch.autograd.backward([e for _, e in outs], [torch.tensor(v) for v in gos])
    nd.autograd.backward([g for g, _ in outs],
                         [nd.tensor(v, dtype=nd.complex128 if np.iscomplexobj(v) else nd.float64) for v in gos])
    for a, b in zip(leaves, tleaves, strict=True):
        if b.grad is None:
            assert a.grad is None or not np.any(a.grad._data), "gradient where torch has none"
        else:
            np.testing.assert_allclose(a.grad._data, _np(b.grad), rtol=1e-6, atol=1e-8)


# --- alias info ---
def _arrays(args):
    for a in args:
        if isinstance(a, nd.Tensor):
            yield a._data
        elif isinstance(a, (list, tuple)):
            yield from _arrays(a)


@pytest.mark.parametrize("rec,sample", [c for c in CASES if c.values[0].kind != "composite"])
def test_alias_info(rec, sample):
    args, kwargs, _ = _convert(rec, sample, _nd_make)
    with nd.no_grad():
        outs = _outputs(rec.call(*args, **kwargs))
    shares = any(np.shares_memory(o._data, a) for o in outs if isinstance(o, nd.Tensor) for a in _arrays(args))
    if rec.kind == "view":
        assert shares and all(o._view is not None for o in outs), "view op must return a view of self"
    else:
        assert not shares, "op not declared a view returned memory shared with an input"


INPLACE = [(name, rec) for name, rec in OPS.items() if rec.kind == "inplace" and rec.outplace.samples]


@pytest.mark.parametrize("name,ip", INPLACE, ids=[n for n, _ in INPLACE])
def test_inplace_variant(name, ip):
    rec = ip.outplace
    rng = np.random.default_rng(0)
    for s in rec.samples(rng):
        args, kwargs, _ = _convert(rec, s, _nd_make)
        if not isinstance(args[0], nd.Tensor):
            continue
        with nd.no_grad():
            expected = rec.call(*args, **kwargs)
            if expected.shape != args[0].shape or expected.dtype != args[0].dtype:
                continue
            self = args[0].clone()
            v = self._version
            res = ip.call(self, *args[1:], **kwargs)
        assert res is self
        assert self._version == v + 1
        np.testing.assert_allclose(self._data, expected._data, equal_nan=True)
