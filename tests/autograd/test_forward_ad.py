"""Forward-mode AD (``autograd.forward_ad``): API and errors against PyTorch, every op of the
op table against torch's forward AD and against ndgrad's own reverse mode, in-place and views,
custom Function ``jvp``, and the mixed modes (forward-over-reverse, reverse-over-forward)."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd
import ndgrad.autograd.forward_ad as fwad
from ndgrad._ops.registry import OPS, T_PLAIN, _modes

try:
    import torch
    import torch.autograd.forward_ad as tfwad
except ImportError:  # the oracle is optional
    torch = tfwad = None


def fw(T):
    return T.autograd.forward_ad


def tangent(x):
    return fw(type(x) is nd.Tensor and nd or torch).unpack_dual(x).tangent


# --- every op of the table ---
# Ops (or op-sample ids) torch cannot run under forward AD in torch 2.13, or without a torch
# counterpart to call; ndgrad is still checked against its own reverse mode on them.
TORCH_NO_FWAD = {
    "_prod_others": "internal helper, no torch op",
    "_select_backward": "internal helper, no torch op",
    "_take_along": "internal helper, no torch op",
    "_index_backward": "internal helper, no torch op",
    "_slice_backward": "internal helper, no torch op",
    "_pad_backward": "internal helper, no torch op",
    "_copy_from": "internal helper, no torch op",
    "_fill": "internal helper, no torch op",
    "scaled_dot_product_attention": "torch: no forward AD for the CPU flash-attention kernel",
    "cdist": "torch: no forward AD for _cdist_forward",
    "mse_loss-int_target": "torch's forward AD fails casting the tangent to the int target",
    "smooth_l1_loss-int_target": "torch's forward AD fails casting the tangent to the int target",
    "native_dropout_backward": "torch: no forward AD for native_dropout_backward",
    "native_dropout": "random: torch draws other numbers",
    "embedding_bag": "torch: no forward AD for _embedding_bag",
    "grid_sample": "torch: no forward AD for grid_sampler_2d/3d",
    "multi_margin_loss": "torch: no forward AD for multi_margin_loss",
    "multilabel_margin_loss": "torch: no forward AD for multilabel_margin_loss_forward",
    "pdist": "torch: no forward AD for _pdist_forward",
    "rrelu": "random: a composite drawing its slopes, compared with torch in tests/nn",
    "gumbel_softmax": "random: a composite drawing its noise, compared with torch in tests/nn",
    "scatter_reduce.two-prod": "torch 2.13 gives no tangent for reduce='prod'",
    "scatter_reduce.two-prod_excl": "torch 2.13 gives no tangent for reduce='prod'",
    "norm_except_dim-whole": "torch 2.13's forward AD gives the whole-tensor norm a [1, 1] tangent",
    "_weight_norm": "torch: no forward AD for _weight_norm_interface",
    "ctc_loss": "torch: no forward AD for _ctc_loss (ndgrad's rule pairs the tangent with its gradient)",
    "cholesky_inverse": "torch 2.13's forward AD disagrees with its own reverse mode (and with "
                        "inv(L L^T)'s); ours is checked against reverse mode",
    "logcumsumexp-big": "torch's jvp scales by one maximum and underflows for values +-50 (ours "
                        "agrees with reverse mode, checked above)",
}


SYMMETRIC_TANGENT = {"linalg_cholesky"}


def _cases():
    out = []
    for name, rec in OPS.items():
        if rec.samples is None or not rec.differentiable:
            continue
        rng = np.random.default_rng(abs(hash(name)) % (2**32))
        for s in rec.samples(rng):
            out.append(pytest.param(name, s, id=f"{name}-{s.name}"))
    return out


def _tensor_pos(rec, n):
    if rec.kind == "composite":
        return set(range(n))
    return {i for i, p in enumerate(rec.params) if p.code != T_PLAIN}


def _build(rec, sample, make):
    """Args with float arrays as ``make(array)`` tensors; returns (args, kwargs, float leaves)."""
    leaves = []
    tpos = _tensor_pos(rec, len(sample.args))

    def conv(a, i, top=True):
        if isinstance(a, np.ndarray):
            t = make(a, a.dtype.kind == "f" and i not in sample.no_grad)
            if a.dtype.kind == "f" and i not in sample.no_grad:
                leaves.append(t)
            return t
        if isinstance(a, (list, tuple)) and top and any(isinstance(x, np.ndarray) for x in a):
            return type(a)(conv(x, i, False) for x in a)
        return a

    args = [conv(a, i) if i in tpos else a for i, a in enumerate(sample.args)]
    kwargs = {k: make(v, False) if isinstance(v, np.ndarray) else v for k, v in sample.kwargs.items()}
    return args, kwargs, leaves


def _replace(args, old, new):
    def r(a):
        for o, n in zip(old, new):
            if a is o:
                return n
        if isinstance(a, (list, tuple)):
            return type(a)(r(x) for x in a)
        return a

    return [r(a) for a in args]


def _outs(res):
    return tuple(res) if isinstance(res, (tuple, list)) else (res,)


def _nd_make(a, rg):
    t = nd.Tensor._make(a if (a.base is not None and not a.flags.c_contiguous) else a.copy(), None, 0, None)
    return t


def _nd_jvp(rec, sample, tans):
    args, kwargs, leaves = _build(rec, sample, _nd_make)
    with fwad.dual_level():
        duals = [fwad.make_dual(x, nd.tensor(v)) for x, v in zip(leaves, tans)]
        outs = _outs(rec.call(*_replace(args, leaves, duals), **kwargs))
        return [(o, fwad.unpack_dual(o).tangent) for o in outs if isinstance(o, nd.Tensor)]


def _torch_call(rec):
    if callable(rec.torch):
        return rec.torch
    path = rec.torch or ("torch." + rec.api if rec.api else "Tensor." + rec.method if rec.method else None)
    if path is None:
        return None
    parts = path.split(".")
    if parts[0] == "Tensor":
        return lambda self, *a, **k: getattr(self, parts[1])(*a, **k)
    obj = torch
    for p in parts[1:]:
        obj = getattr(obj, p)
    return obj


def _torch_jvp(rec, sample, tans, fn):
    args, kwargs, leaves = _build(rec, sample, lambda a, rg: torch.tensor(a))
    kwargs = {k: getattr(torch, v.name) if isinstance(v, nd.dtype) else v for k, v in kwargs.items()}
    args = [getattr(torch, a.name) if isinstance(a, nd.dtype) else a for a in args]
    with tfwad.dual_level():
        duals = [tfwad.make_dual(x, torch.tensor(v)) for x, v in zip(leaves, tans)]
        outs = _outs(fn(*_replace(args, leaves, duals), **kwargs))
        return [(o, tfwad.unpack_dual(o).tangent) for o in outs if isinstance(o, torch.Tensor)]


def _arr(t, like):
    if not isinstance(like, np.ndarray):
        like = like.detach().numpy(force=True)  # force: torch's conj() is a lazy view
    if t is None:
        return None if like.dtype.kind not in "fc" else np.zeros(like.shape)
    return t._data if isinstance(t, nd.Tensor) else t.detach().numpy(force=True)


@pytest.mark.parametrize("name,sample", _cases())
def test_op_jvp(name, sample):
    rec = OPS[name]
    probe = _build(rec, sample, lambda a, rg: a)[2]
    if not probe:
        pytest.skip("no float input")
    rng = np.random.default_rng(0)
    tans = [rng.standard_normal(a.shape) for a in probe]
    if name in SYMMETRIC_TANGENT:  # torch's formula assumes a symmetric perturbation
        tans = [t + np.swapaxes(t, -1, -2) for t in tans]
    random = rec.extra.get("nondeterministic")  # one draw per call: the same one each time
    if random:
        nd.manual_seed(0)
    got = _nd_jvp(rec, sample, tans)
    # Reverse mode: <w, J v> == <J^T w, v> for a random w.
    args, kwargs, leaves = _build(rec, sample, _nd_make)
    for x in leaves:
        x.requires_grad_()
    if random:
        nd.manual_seed(0)
    outs = [o for o in _outs(rec.call(*args, **kwargs)) if isinstance(o, nd.Tensor)]
    assert len(outs) == len(got)
    diff = [(o, g) for o, (_, g) in zip(outs, got) if o.requires_grad]
    for o, (p, g) in zip(outs, got):
        np.testing.assert_allclose(p._data, o._data, equal_nan=True)  # the primal is unchanged
        if not o.requires_grad:
            assert g is None, "tangent on a non-differentiable output"
    if diff:
        # a complex output: <w, J v> is Re(sum(conj(w) * J v)) in PyTorch's convention
        ws = [rng.standard_normal(o.shape) + (1j * rng.standard_normal(o.shape) if o.is_complex() else 0)
              for o, _ in diff]
        fwd = sum(float(np.real((np.conj(w) * g._data).sum())) for w, (_, g) in zip(ws, diff))
        gs = nd.autograd.grad([o for o, _ in diff], leaves, [nd.tensor(w) for w in ws], allow_unused=True)
        rev = sum(float((g._data * v).sum()) for g, v in zip(gs, tans) if g is not None)
        assert fwd == pytest.approx(rev, rel=1e-6, abs=1e-8)
    if torch is None or _torch_call(rec) is None or {name, f"{name}-{sample.name}"} & TORCH_NO_FWAD.keys():
        return
    want = _torch_jvp(rec, sample, tans, _torch_call(rec))
    assert len(want) == len(got)
    for (p, g), (tp, tg) in zip(got, want):
        a, b = _arr(g, p._data), _arr(tg, tp)
        if b is None:
            assert a is None or not np.any(a), "tangent where torch has none"
        else:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, equal_nan=True)


def test_linear_rules_read_no_primal():
    """Ops marked ``jvp="linear"`` have VJPs that read no differentiable input and no output (a
    formula reading them would mean the op is not linear); every view op is marked."""
    linear = [name for name, rec in OPS.items() if rec.extra.get("jvp") == "linear"]
    assert len(linear) > 40
    for name in linear:
        rec = OPS[name]
        diff = set(fwad._diff_positions(rec))
        for kind, pos in rec.save_plan:
            assert kind == "in" and pos not in diff, f"{name} saves {kind} {pos}"
    views = [name for name, rec in OPS.items() if rec.kind == "view"]
    assert views and all(OPS[name].extra.get("jvp") == "linear" for name in views)


class _without_rule:
    """Within, ``rec`` has no JVP rule: forward AD transposes its VJP (the fallback)."""

    def __init__(self, rec):
        self.rec = rec

    def __enter__(self):
        self.rule, self.rec.jvp = self.rec.jvp, None
        self.rec.fw = None  # the mode's cached plan holds the rule too

    def __exit__(self, *exc):
        self.rec.jvp = self.rule
        self.rec.fw = None


RULE_CASES = [c for c in _cases() if OPS[c.values[0]].jvp is not None]


@pytest.mark.parametrize("name,sample", RULE_CASES)
def test_rule_matches_transpose(name, sample):
    """Each op's JVP rule (``defop(..., jvp=...)``) gives the tangents that transposing its VJP
    gives, in float64 (torch's forward AD is the oracle in ``test_op_jvp``)."""
    rec = OPS[name]
    if rec.extra.get("nondeterministic"):
        pytest.skip("the fallback runs the op again: a new draw")
    probe = _build(rec, sample, lambda a, rg: a)[2]
    if not probe:
        pytest.skip("no float input")
    rng = np.random.default_rng(1)
    tans = [rng.standard_normal(a.shape) for a in probe]
    got = _nd_jvp(rec, sample, tans)
    with _without_rule(rec):
        want = _nd_jvp(rec, sample, tans)
    assert len(got) == len(want)
    for (p, g), (q, w) in zip(got, want):
        np.testing.assert_allclose(p._data, q._data, equal_nan=True)
        assert (g is None) == (w is None), "a tangent where the fallback has none (or none where it has one)"
        if g is not None:
            assert g._data.shape == p._data.shape and g._data.dtype == p._data.dtype
            np.testing.assert_allclose(g._data, w._data, rtol=1e-7, atol=1e-9, equal_nan=True)


PROGRAM_CASES = [c for c in _cases() if fwad._plan(OPS[c.values[0]])[3] is not None
                 and not OPS[c.values[0]].extra.get("nondeterministic")]


def _first_order(rec, sample, rng):
    """Args whose float tensors are plain (not views) with tangents, and their leaves."""
    args, kwargs, leaves = _build(rec, sample, _nd_make)
    duals = [fwad.make_dual(x, nd.tensor(rng.standard_normal(x.shape).astype(x._data.dtype))).clone()
             for x in leaves]
    return _replace(args, leaves, duals), kwargs


def _forget_programs(rec):
    rec.fw = None  # the next call plans anew: no program, none inlined


def _jvp_arrays(rec, args, kwargs):
    outs = _outs(rec.call(*args, **kwargs))
    return [(o._data.copy(), None if (t := fwad.unpack_dual(o).tangent) is None else t._data.copy())
            for o in outs]


@pytest.mark.parametrize("name,sample", PROGRAM_CASES)
def test_array_program_matches_rule(name, sample, monkeypatch):
    """A first-order tangent computed by the op's array program (traced from its rule on a
    first call, replayed on the next) is bit for bit the rule's on tensors, as is the output."""
    rec = OPS[name]
    with fwad.dual_level():
        args, kwargs = _first_order(rec, sample, np.random.default_rng(3))
        _forget_programs(rec)
        with monkeypatch.context() as m:  # no program: the rule on tensors
            m.setattr(fwad, "_compile_program", lambda *a: None)
            want = _jvp_arrays(rec, args, kwargs)
            want2 = _jvp_arrays(rec, args, kwargs)  # the cached None: the general path
        _forget_programs(rec)
        first = _jvp_arrays(rec, args, kwargs)  # traced (and inlined in the op's code)
        got = _jvp_arrays(rec, args, kwargs)  # replayed where a program was made
    _forget_programs(rec)
    for res in (want2, first, got):
        assert len(res) == len(want)
        for (p, g), (q, w) in zip(res, want):
            assert p.dtype == q.dtype and np.array_equal(p, q, equal_nan=True)
            assert (g is None) == (w is None)
            if g is not None:
                assert g.dtype == w.dtype and g.shape == w.shape
                assert np.array_equal(g, w, equal_nan=True)


@pytest.mark.parametrize("op", ["mul", "add", "sub", "div", "tanh", "exp", "sin", "sigmoid", "relu"])
def test_array_programs_made(op):
    """The chain's pointwise ops get array programs: a first-order tangent costs no dispatch."""
    x, v = nd.tensor([0.5, -1.0, 2.0]), nd.tensor([1.0, 2.0, 3.0])
    f = getattr(nd, op)
    call = (lambda d: f(d, x)) if op in ("mul", "add", "sub", "div") else f
    with fwad.dual_level():
        d = fwad.make_dual(x, v).clone()
        call(d)
    names = [n for n, r in OPS.items() if r.name.split(".")[0] == op and r.extra.get("fw_programs")]
    progs = [p for n in names for p in OPS[n].extra["fw_programs"].values()]
    assert any(p is not None for p in progs), f"{op}: no array program"


def test_array_program_keys():
    """A program is reused only under its key: a tensor passed twice does not leak into a later
    call with two tensors, a new alpha or exponent is traced anew, and a tangent read from a
    program's output is one tensor."""
    a, b = nd.tensor([1.0, 2.0, 3.0]), nd.tensor([4.0, 5.0, 6.0])
    va, vb = nd.tensor([0.1, 0.2, 0.3]), nd.tensor([1.0, -1.0, 2.0])
    with fwad.dual_level():
        da, db = fwad.make_dual(a, va).clone(), fwad.make_dual(b, vb).clone()
        for _ in range(2):
            sq = da * da
            np.testing.assert_array_equal(fwad.unpack_dual(sq).tangent._data, 2 * a._data * va._data)
            ab = da * db
            np.testing.assert_array_equal(fwad.unpack_dual(ab).tangent._data,
                                          va._data * b._data + vb._data * a._data)
        for alpha in (1, 2, 2.5, -1):
            s = nd.add(da, db, alpha=alpha)
            np.testing.assert_array_equal(fwad.unpack_dual(s).tangent._data, va._data + vb._data * alpha)
        for e in (2, 0, 3.0, 2):
            p = da ** e
            want = np.zeros(3) if e == 0 else e * a._data ** (e - 1) * va._data
            np.testing.assert_allclose(fwad.unpack_dual(p).tangent._data, want, rtol=1e-15)
        c = (da * 2.0).tanh()
        t = fwad.unpack_dual(c).tangent
        assert t is fwad.unpack_dual(c).tangent and type(t) is nd.Tensor
        # The output's tangent is memory of its own, also where the rule gives an input's back.
        s = da + b
        ts = fwad.unpack_dual(s).tangent
        ts.mul_(0)
        np.testing.assert_array_equal(fwad.unpack_dual(da).tangent._data, va._data)


def test_array_program_skipped_for_graphs():
    """Where a primal or a tangent requires grad the rule runs on tensors: the tangent stays
    differentiable (reverse-over-forward through plain duals)."""
    p = nd.tensor([0.5, 1.0, 1.5], dtype=nd.float64, requires_grad=True)
    v = nd.tensor([1.0, 2.0, 3.0], dtype=nd.float64, requires_grad=True)
    with fwad.dual_level():
        x = fwad.make_dual(p, v).clone()
        for _ in range(2):  # the second time a program for these dtypes and shapes exists
            y = (x * x).tanh() + x
            jv = fwad.unpack_dual(y).tangent
            assert jv.requires_grad
            gp, gv = nd.autograd.grad(jv.sum(), (p, v))
            q, w = p.detach()._data, v.detach()._data
            s = 1 - np.tanh(q * q) ** 2
            np.testing.assert_allclose(gv._data, s * 2 * q + 1, rtol=1e-12)
            np.testing.assert_allclose(
                gp._data, (-2 * np.tanh(q * q) * s * 2 * q * 2 * q + s * 2) * w, rtol=1e-12)


INPLACE_RULES = [(n, r) for n, r in OPS.items()
                 if r.kind == "inplace" and r.outplace.jvp is not None and r.outplace.samples
                 and not r.outplace.extra.get("nondeterministic")]


@pytest.mark.parametrize("name,ip", INPLACE_RULES, ids=[n for n, _ in INPLACE_RULES])
def test_inplace_rule(name, ip):
    """An in-place op's new tangent is its out-of-place op's, written into the old tangent."""
    rec = ip.outplace
    rng = np.random.default_rng(2)
    for s in rec.samples(rng):
        args, kwargs, leaves = _build(rec, s, _nd_make)
        if not leaves or args[0] is not leaves[0]:
            continue
        tans = [nd.tensor(rng.standard_normal(x.shape)) for x in leaves]
        with fwad.dual_level():
            duals = [fwad.make_dual(x.clone(), t) for x, t in zip(leaves, tans)]
            call = _replace(args, leaves, duals)
            want = rec.call(*call, **kwargs)
            if want.shape != duals[0].shape or want.dtype != duals[0].dtype:
                continue
            want_t = fwad.unpack_dual(want).tangent
            old = fwad.unpack_dual(duals[0]).tangent
            ip.call(*call, **kwargs)
            got_t = fwad.unpack_dual(duals[0]).tangent
            assert got_t is old  # written into the existing tangent, as views of it must see
            np.testing.assert_allclose(duals[0]._data, want._data, equal_nan=True)
            np.testing.assert_allclose(got_t._data, want_t._data, rtol=1e-7, atol=1e-9, equal_nan=True)


def test_defop_validates_jvp():
    """A bad ``jvp=`` fails at registration, naming the op."""
    from ndgrad._ops.registry import defop

    neg = {"self": lambda grad: -grad}
    with pytest.raises(ValueError, match=r"_jvp_bad1.*unknown jvp shortcut 'linearish'"):
        defop("_jvp_bad1(Tensor self) -> Tensor", "negative", neg, jvp="linearish")
    with pytest.raises(ValueError, match=r"_jvp_bad2.*unknown parameter 'other_t'"):
        defop("_jvp_bad2(Tensor self) -> Tensor", "negative", neg, jvp=lambda self_t, other_t: -self_t)
    with pytest.raises(ValueError, match=r"_jvp_bad3.*single output"):
        defop("_jvp_bad3(Tensor self) -> (Tensor, Tensor)", lambda x: (x, x), neg, jvp="elementwise")
    with pytest.raises(ValueError, match=r"_jvp_bad4.*without vjp"):
        defop("_jvp_bad4(Tensor self) -> Tensor", "negative", None, jvp="linear")
    assert not any(n.startswith("_jvp_bad") for n in OPS)


@pytest.mark.parametrize("op", ["exp", "sin", "tanh", "log", "sqrt", "mul", "div"])
def test_complex_elementwise(ref, op):
    """Rules derived from the VJP hold for complex inputs of holomorphic ops too."""
    def fn(T):
        F = fw(T)
        a = T.tensor(np.array([1 + 2j, 0.5 - 1j, -0.3 + 0.2j]))
        b = T.tensor(np.array([2 - 1j, 0.1 + 1j, 1 + 0j]))
        with F.dual_level():
            x = F.make_dual(a, T.tensor(np.array([1 + 0j, 1j, 0.5 - 0.5j])))
            y = x * b if op == "mul" else x / b if op == "div" else getattr(x, op)()
            return F.unpack_dual(y).tangent
    ref.same(fn)


# --- API and errors, against torch ---
def test_level_api(ref):
    assert not any(m is fwad._MODE for m in _modes)
    with fwad.dual_level() as lvl:
        assert lvl == 0 and fwad._MODE in _modes
    assert fwad._MODE not in _modes
    ref.raises(lambda T: fw(T).exit_dual_level(), RuntimeError, "Dual level must be a positive number.")

    def nested(T):
        with fw(T).dual_level():
            fw(T).enter_dual_level()
    ref.raises(nested, RuntimeError, "Nested forward mode AD is not supported at the moment")

    def bad_exit(T):
        with fw(T).dual_level():
            fw(T).exit_dual_level(level=3)
    ref.raises(bad_exit, RuntimeError)
    assert fwad.enter_dual_level() == 0
    fwad.exit_dual_level()


@pytest.mark.parametrize("case", [
    "outside", "shape", "int_primal", "int_tangent", "dual_of_dual", "bad_level", "float_level",
    "non_tensor", "unpack_non_tensor", "unpack_bad_level",
])
def test_make_dual_errors(ref, case):
    def fn(T):
        p = T.ones(3, 4, dtype=T.float64)
        t = T.ones(3, 4, dtype=T.float64)
        F = fw(T)
        if case == "outside":
            return F.make_dual(p, t)
        with F.dual_level():
            if case == "shape":
                F.make_dual(p, T.ones(2, 4, dtype=T.float64))
            elif case == "int_primal":
                F.make_dual(T.arange(3), T.ones(3, dtype=T.float64))
            elif case == "int_tangent":
                F.make_dual(p, T.ones(3, 4, dtype=T.int64))
            elif case == "dual_of_dual":
                F.make_dual(F.make_dual(p, t), t)
            elif case == "bad_level":
                F.make_dual(p, t, level=3)
            elif case == "float_level":
                F.make_dual(p, t, level=0.5)
            elif case == "non_tensor":
                F.make_dual(1.0, t)
            elif case == "unpack_non_tensor":
                F.unpack_dual(1.0)
            elif case == "unpack_bad_level":
                F.unpack_dual(F.make_dual(p, t), level=3)
    exc = {"int_primal": ValueError, "int_tangent": ValueError, "float_level": TypeError,
           "non_tensor": AttributeError, "unpack_non_tensor": TypeError}.get(case, RuntimeError)
    ref.raises(fn, exc)


def test_dual_semantics(ref):
    def fn(T):
        F = fw(T)
        p = T.arange(12.0, dtype=T.float64).reshape(3, 4)
        t = T.ones(3, 4, dtype=T.float64) * 0.5
        out = {}
        out["outside"] = F.unpack_dual(p).tangent is None
        with F.dual_level():
            x = F.make_dual(p, t)
            u = F.unpack_dual(x)
            out["named"] = type(u).__name__ + str(u._fields)
            out["view_of_input"] = x._base is p and x is not p
            out["tangent_as_given"] = u.tangent is t
            out["primal_view"] = u.primal._base is p and F.unpack_dual(u.primal).tangent is None
            out["input_untouched"] = F.unpack_dual(p).tangent is None
            out["detach"] = F.unpack_dual(x.detach()).tangent is None
            out["data"] = F.unpack_dual(x.data).tangent is None
            with T.no_grad():
                out["no_grad"] = F.unpack_dual(x * 2).tangent
            out["view"] = F.unpack_dual(x[1]).tangent._base is t
            out["int_out"] = F.unpack_dual(x > 3).tangent is None
            m, i = x.max(1)
            out["max"] = (F.unpack_dual(m).tangent, F.unpack_dual(i).tangent is None)
            out["argmax"] = F.unpack_dual(x.argmax()).tangent is None
            out["cast"] = F.unpack_dual(x.float()).tangent
            out["same_obj"] = F.unpack_dual(x).tangent is F.unpack_dual(x).tangent
            nc = T.ones(4, 3, dtype=T.float64).t()
            y = F.make_dual(p, nc)
            out["layout"] = (F.unpack_dual(y).tangent is nc, F.unpack_dual(y).tangent.stride())
            pr = T.ones(3, dtype=T.float64, requires_grad=True)
            out["grad_fn"] = type(F.make_dual(pr, T.ones(3, dtype=T.float64)).grad_fn).__name__
        out["cleared"] = F.unpack_dual(x).tangent is None and u.tangent is not None
        return out
    ref.same(fn)


def test_inplace_and_views(ref):
    def fn(T):
        F = fw(T)
        D = T.float64
        p = T.linspace(-1, 1, 12, dtype=D).reshape(3, 4)
        t = T.linspace(0, 2, 12, dtype=D).reshape(3, 4)
        out = {}
        with F.dual_level():
            x = F.make_dual(p, t)
            y = F.make_dual(p.clone(), t.clone())
            ty = F.unpack_dual(y).tangent
            y.mul_(2).sin_()
            out["inplace"] = F.unpack_dual(y).tangent
            out["same_tangent_obj"] = F.unpack_dual(y).tangent is ty
            z = F.make_dual(p.clone(), t.clone())
            z.mul_(p)  # other has no tangent
            out["other_plain"] = F.unpack_dual(z).tangent
            b = T.zeros(3, 4, dtype=D)
            v = b[1]
            b.add_(x)  # a plain tensor gets a tangent; its earlier view sees it
            out["base_gets"] = F.unpack_dual(b).tangent
            out["lazy_view"] = F.unpack_dual(v).tangent._base is F.unpack_dual(b).tangent
            c = T.zeros(3, 4, dtype=D)
            w = c[:, 1]
            w.copy_(x[0, :3])  # a view of a plain tensor written with a dual
            out["view_write"] = F.unpack_dual(c).tangent
            out["view_write_alias"] = F.unpack_dual(w).tangent._base is F.unpack_dual(c).tangent
            d = F.make_dual(p.clone(), t.clone())
            d[0].mul_(3)  # through a view into the dual base
            out["view_into_dual"] = F.unpack_dual(d).tangent
            e = F.make_dual(p.clone(), t.clone())
            e.copy_(p)  # overwritten by a value without tangent
            out["overwritten"] = F.unpack_dual(e).tangent
            s = T.zeros(3, dtype=D)
            s[1:] = x[0, :2] * 2
            out["setitem"] = F.unpack_dual(s).tangent
            parts = x.unbind(1)
            out["unbind"] = [F.unpack_dual(q).tangent for q in parts]
            out["chain"] = F.unpack_dual(x.t().reshape(-1)[2:5].unsqueeze(0).expand(2, 3)).tangent
        return out
    ref.same(fn)


# --- custom Function ---
def _functions(T):
    class Mul(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            ctx.save_for_forward(x, y)
            ctx.inner = F_(T).unpack_dual(x * 2).tangent is None  # the mode is off in forward
            return x * y * k

        @staticmethod
        def jvp(ctx, tx, ty, tk):
            x, y = ctx.saved_tensors
            return (tx * y + x * ty) * 3

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    class NoJvp(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Two(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def jvp(ctx, t):
            return t * 2

    class Short(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def jvp(ctx, t):
            return t[:1]

    class Setup(T.autograd.Function):
        @staticmethod
        def forward(x):
            return x.exp()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(output)

        @staticmethod
        def jvp(ctx, t):
            (y,) = ctx.saved_tensors
            return t * y

    return Mul, NoJvp, Two, Short, Setup


def F_(T):
    return fw(T)


def test_function_jvp(ref):
    def fn(T):
        Mul, NoJvp, Two, Short, Setup = _functions(T)
        F = fw(T)
        p = T.linspace(-1, 1, 3, dtype=T.float64)
        t = T.linspace(1, 2, 3, dtype=T.float64)
        with F.dual_level():
            x = F.make_dual(p, t)
            y = T.ones(3, dtype=T.float64) * 2
            out = Mul.apply(x, y, 5)
            return (F.unpack_dual(out).tangent, F.unpack_dual(Setup.apply(x)).tangent,
                    F.unpack_dual(NoJvp.apply(p)).tangent is None)
    ref.same(fn)

    def err(cls_index):
        def fn(T):
            cls = _functions(T)[cls_index]
            F = fw(T)
            with F.dual_level():
                cls.apply(F.make_dual(T.ones(3, dtype=T.float64), T.ones(3, dtype=T.float64)))
        return fn
    ref.raises(err(1), NotImplementedError)
    ref.raises(err(2), RuntimeError)
    ref.raises(err(3), RuntimeError)


# --- mixed modes ---
def _f(T, x):
    return (x.sin() * x.exp()).sum() + (x @ x.t()).tanh().sum() if x.dim() == 2 else (x.sin() * x.exp()).sum()


def test_forward_over_reverse_hvp(ref):
    def fn(T):
        F = fw(T)
        p = T.linspace(-1, 1, 6, dtype=T.float64).reshape(2, 3).requires_grad_()
        v = T.linspace(0.5, 1.5, 6, dtype=T.float64).reshape(2, 3)
        with F.dual_level():
            x = F.make_dual(p, v)
            (g,) = T.autograd.grad(_f(T, x), x, create_graph=True)
            return F.unpack_dual(g).tangent
    got = ref.same(fn)
    # Against reverse-over-reverse.
    p = nd.linspace(-1, 1, 6, dtype=nd.float64).reshape(2, 3).requires_grad_()
    v = nd.linspace(0.5, 1.5, 6, dtype=nd.float64).reshape(2, 3)
    (g,) = nd.autograd.grad(_f(nd, p), p, create_graph=True)
    (h,) = nd.autograd.grad((g * v).sum(), p)
    np.testing.assert_allclose(got._data, h._data, rtol=1e-10)


def test_reverse_over_forward(ref):
    def fn(T):
        F = fw(T)
        p = T.linspace(-1, 1, 6, dtype=T.float64).reshape(2, 3).requires_grad_()
        v = T.linspace(0.5, 1.5, 6, dtype=T.float64).reshape(2, 3).requires_grad_()
        with F.dual_level():
            x = F.make_dual(p, v)
            jv = F.unpack_dual(_f(T, x)).tangent
            gp, gv = T.autograd.grad(jv, (p, v))
        return jv, gp, gv
    ref.same(fn)


def test_functional_forward_mode(ref):
    fun = nd.autograd.functional

    def fn(T):
        x = T.linspace(-1, 1, 4, dtype=T.float64)
        J = T.autograd.functional.jacobian(lambda a: (a.sin() * a[0], a.cumsum(0)), x,
                                           strategy="forward-mode", vectorize=True)
        H = T.autograd.functional.hessian(lambda a: (a.exp() * a.sin()).sum(), x,
                                          outer_jacobian_strategy="forward-mode", vectorize=True)
        return J, H
    ref.same(fn)
    assert fun is not None
