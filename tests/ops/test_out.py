"""``out=``: one generic wrapper (``registry.write_out``) gives every op that takes it PyTorch's
semantics: values, resizing (with its warning), dtype rules, no autograd, version bump, the
returned object. Torch is the oracle for values and error messages."""

import warnings

import numpy as np
import pytest

import ndgrad as nd

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
Y = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
SQ = np.random.default_rng(2).standard_normal((4, 4)).astype(np.float32)

# (name, call(m, x, y, out)), x and y float32 (3, 4) tensors, out a tensor (or a tuple)
CALLS = [
    ("add", lambda m, x, y, o: m.add(x, y, alpha=2, out=o)),
    ("sub", lambda m, x, y, o: m.sub(x, y, out=o)),
    ("mul", lambda m, x, y, o: m.mul(x, 3, out=o)),
    ("div", lambda m, x, y, o: m.div(x, y, out=o)),
    ("sin", lambda m, x, y, o: m.sin(x, out=o)),
    ("exp", lambda m, x, y, o: m.exp(x, out=o)),
    ("abs", lambda m, x, y, o: m.abs(x, out=o)),
    ("clamp", lambda m, x, y, o: m.clamp(x, -0.5, 0.5, out=o)),
    ("maximum", lambda m, x, y, o: m.maximum(x, y, out=o)),
    ("where", lambda m, x, y, o: m.where(x > 0, x, y, out=o)),
    ("lgamma", lambda m, x, y, o: m.lgamma(x.abs() + 0.5, out=o)),
    ("sum_dim", lambda m, x, y, o: m.sum(x, 1, out=o)),
    ("sum_keep", lambda m, x, y, o: m.sum(x, (0, 1), True, out=o)),
    ("mean", lambda m, x, y, o: m.mean(x, 0, out=o)),
    ("prod", lambda m, x, y, o: m.prod(x, 1, out=o)),
    ("amax", lambda m, x, y, o: m.amax(x, 1, out=o)),
    ("amin", lambda m, x, y, o: m.amin(x, 0, out=o)),
    ("cumsum", lambda m, x, y, o: m.cumsum(x, 1, out=o)),
    ("logsumexp", lambda m, x, y, o: m.logsumexp(x, 1, out=o)),
    ("std", lambda m, x, y, o: m.std(x, 1, out=o)),
    ("matmul", lambda m, x, y, o: m.matmul(x, y.T, out=o)),
    ("mm", lambda m, x, y, o: m.mm(x, y.T, out=o)),
    ("bmm", lambda m, x, y, o: m.bmm(x[None], y.T[None], out=o)),
    ("addmm", lambda m, x, y, o: m.addmm(x[:, :3], x, y.T, beta=0.5, out=o)),
    ("cat", lambda m, x, y, o: m.cat([x, y], 1, out=o)),
    ("stack", lambda m, x, y, o: m.stack([x, y], out=o)),
    ("cross", lambda m, x, y, o: m.cross(x[:, :3], y[:, :3], dim=1, out=o)),
    ("kron", lambda m, x, y, o: m.kron(x[:2, :2], y[:2], out=o)),
    ("quantile", lambda m, x, y, o: m.quantile(x, 0.3, 1, out=o)),
]


def _t(m, a, **kw):
    return m.tensor(a, **kw)


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
@pytest.mark.parametrize("start", ["empty", "right", "wrong"])
def test_out_matches_torch(name, call, start):
    results = []
    for m in (nd, torch):
        x, y = _t(m, X), _t(m, Y)
        ref = call(m, x, y, None) if name != "kron" else m.kron(x[:2, :2], y[:2])
        shape = {"empty": (0,), "right": tuple(ref.shape), "wrong": (5,)}[start]
        out = m.zeros(shape, dtype=ref.dtype)
        v = out._version
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = call(m, x, y, out)
        assert r is out
        assert out._version > v or (m is torch and name == "kron")  # torch's kron writes a view
        resized = [str(x.message) for x in w if "resized" in str(x.message)]
        assert bool(resized) == (start == "wrong")
        results.append((out.numpy().copy(), tuple(out.shape), str(out.dtype).split(".")[-1], resized))
    (a, sa, da, wa), (b, sb, db, wb) = results
    assert sa == sb and da == db
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    if wa:
        assert wa[0].split(" (Triggered")[0] == wb[0].split(" (Triggered")[0].rstrip()


def _same_error(fn):
    with pytest.raises(Exception) as expected:
        fn(torch)
    with pytest.raises(type(expected.value)) as got:
        fn(nd)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("fn", [
    lambda m: m.add(_t(m, X, requires_grad=True), 1, out=m.empty(3, 4)),
    lambda m: m.add(_t(m, X), 1, out=m.empty(3, 4, requires_grad=True)),
    lambda m: m.sum(_t(m, X, requires_grad=True), 0, out=m.empty(4)),
    lambda m: m.cat([_t(m, X, requires_grad=True)], out=m.empty(3, 4)),
    lambda m: m.max(_t(m, X, requires_grad=True), 0, out=(m.empty(4), m.empty(4, dtype=m.int64))),
    lambda m: m.add(_t(m, X), 1, out=m.empty(3, 4, dtype=m.int64)),
    lambda m: m.add(_t(m, X), 1, out=m.empty(3, 4, dtype=m.bool)),
    lambda m: m.sin(_t(m, X).long(), out=m.empty(3, 4, dtype=m.int64)),
    lambda m: m.mean(_t(m, X), 0, out=m.empty(4, dtype=m.int64)),
    lambda m: m.mm(_t(m, X), _t(m, Y).T, out=m.empty(3, 3, dtype=m.float64)),
    lambda m: m.matmul(_t(m, X), _t(m, Y).T, out=m.empty(3, 3, dtype=m.int32)),
    lambda m: m.amax(_t(m, X), 0, out=m.empty(4, dtype=m.float64)),
    lambda m: m.max(_t(m, X), 0, out=(m.empty(4), m.empty(4))),
    lambda m: m.cat([_t(m, X)], out=m.empty(3, 4, dtype=m.int64)),
], ids=["grad_input", "grad_out", "sum_grad", "cat_grad", "max_grad", "float_to_long",
        "float_to_bool", "sin_int", "mean_int", "mm_exact", "matmul_exact", "amax_dtype",
        "max_indices_dtype", "cat_dtype"])
def test_out_errors(fn):
    _same_error(fn)


def test_out_allowed_casts_and_modes():
    for m in (nd, torch):
        x = _t(m, X)
        o = m.empty(0, dtype=m.float64)
        m.add(x, x, out=o)
        assert o.dtype == m.float64
        o = m.empty(0, dtype=m.complex64)
        m.add(x, x, out=o)
        assert o.dtype == m.complex64
        o = m.empty(0, dtype=m.int64)
        m.sum(_t(m, np.array([0.6, 0.6])), 0, out=o)  # computes in out's dtype: casts first
        assert o.item() == 0
        leaf = _t(m, X, requires_grad=True)
        with m.no_grad():
            o = m.empty(3, 4, requires_grad=True)
            m.add(leaf, 1, out=o)  # no graph is recorded: allowed, as in torch
        np.testing.assert_allclose(o.detach().numpy(), X + 1)


def test_out_multi_output_returns_namedtuple():
    x = _t(nd, X)
    vals, idx = nd.empty(0), nd.empty(0, dtype=nd.int64)
    r = nd.max(x, 1, out=(vals, idx))
    assert r.values is vals and r.indices is idx and r[0] is vals
    e = torch.max(_t(torch, X), 1)
    np.testing.assert_allclose(vals.numpy(), e.values.numpy())
    np.testing.assert_array_equal(idx.numpy(), e.indices.numpy())
    c = nd.cummax(x, 1, out=(nd.empty(0), nd.empty(0, dtype=nd.int64)))
    np.testing.assert_array_equal(c.indices.numpy(), torch.cummax(_t(torch, X), 1).indices.numpy())


def test_out_into_a_view_writes_the_base():
    base = nd.zeros(2, 3)
    nd.add(nd.ones(3), 1, out=base[1])
    assert base.tolist() == [[0.0, 0.0, 0.0], [2.0, 2.0, 2.0]]


def test_out_under_dispatch_mode_sees_the_write():
    from ndgrad.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    o = nd.empty(3)
    with Log():
        nd.mul(nd.ones(3), 2, out=o)
    assert any("mul" in s for s in seen) and any("copy" in s for s in seen)
    assert o.tolist() == [2.0, 2.0, 2.0]


def test_plain_call_unchanged():
    """Without out=, the public functions are the generated fast paths, unchanged."""
    from ndgrad._ops.registry import OPS

    src = OPS["add.Tensor"].extra["fast_src"]
    assert "out=None" in src.splitlines()[0]
    assert src.splitlines()[1].strip() == "if out is not None:"
    import inspect

    assert "out" not in inspect.signature(OPS["add.Tensor"].extra["direct"]).parameters
    assert list(inspect.signature(nd.add).parameters) == ["self", "other", "out", "alpha"]
