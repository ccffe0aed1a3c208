"""Module semantics vs PyTorch: registration, iteration, state dicts, modes, dtype moves, hooks."""

from __future__ import annotations

import copy
from collections import OrderedDict

import numpy as np
import pytest

import ndgrad


def _net(T):
    nn = T.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 4)
            self.register_buffer("running", T.zeros(4))
            self.register_buffer("scratch", T.ones(1), persistent=False)

        def forward(self, x):
            return self.fc(x).relu() + self.running

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.seq = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2, bias=False))
            self.scale = nn.Parameter(T.ones(()))

        def forward(self, x):
            return self.seq(self.block(x)) * self.scale

    return Net()


def _load_from_torch(nd_mod, t_mod):
    sd = OrderedDict((k, ndgrad.tensor(v.detach().numpy().copy())) for k, v in t_mod.state_dict().items())
    nd_mod.load_state_dict(sd)


def test_names_and_state_dict_keys(ref):
    def f(T):
        m = _net(T)
        sd = m.state_dict()
        return (list(sd), [tuple(v.shape) for v in sd.values()],
                [n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()],
                [n for n, _ in m.named_modules()], [n for n, _ in m.named_children()],
                [n for n, _ in m.named_parameters(prefix="p", recurse=False)],
                type(sd).__name__, dict(sd._metadata), all(v.requires_grad is False for v in sd.values()))
    ref.same(f)


def test_keep_vars_and_detached(ref):
    def f(T):
        m = T.nn.Linear(2, 2)
        sd, sdk = m.state_dict(), m.state_dict(keep_vars=True)
        return (sdk["weight"] is m.weight, sd["weight"] is m.weight, sd["weight"].requires_grad,
                type(sdk["weight"]).__name__, sd["weight"].data_ptr() == m.weight.data_ptr())
    ref.same(f)


def test_load_values_outputs_and_grads(torch_or_skip):
    torch = torch_or_skip
    torch.manual_seed(0)
    tm, nm = _net(torch).double(), _net(ndgrad).double()
    _load_from_torch(nm, tm)
    xn = np.random.default_rng(0).standard_normal((5, 3))
    xt, xd = torch.tensor(xn, requires_grad=True), ndgrad.tensor(xn, requires_grad=True)
    yt, yd = tm(xt), nm(xd)
    np.testing.assert_allclose(yd.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    yt.sum().backward()
    yd.sum().backward()
    np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    for (kn, pn), (kt, pt) in zip(nm.named_parameters(), tm.named_parameters(), strict=True):
        assert kn == kt
        np.testing.assert_allclose(pn.grad.numpy(), pt.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_load_state_dict_strict_errors(ref):
    def missing(T):
        m = T.nn.Sequential(T.nn.Linear(2, 2))
        sd = m.state_dict()
        del sd["0.bias"]
        sd["0.extra"] = T.zeros(1)
        sd["1.weight"] = T.zeros(1)
        m.load_state_dict(sd)

    ref.raises(missing, RuntimeError)

    def size(T):
        m = T.nn.Linear(2, 3)
        m.load_state_dict({"weight": T.zeros(2, 2), "bias": T.zeros(3)})

    ref.raises(size, RuntimeError)
    ref.raises(lambda T: T.nn.Linear(2, 2).load_state_dict([1]), TypeError)
    ref.raises(lambda T: T.nn.Linear(1, 1).load_state_dict({"weight": 1, "bias": T.zeros(1)}), RuntimeError)


def test_load_state_dict_non_strict_and_assign(ref):
    def f(T):
        m = T.nn.Sequential(T.nn.Linear(2, 2))
        r = m.load_state_dict({"0.weight": T.ones(2, 2), "junk": T.ones(1)}, strict=False)
        w = m[0].weight
        new = T.full((2, 2), 3.0)
        r2 = m.load_state_dict({"0.weight": new, "0.bias": T.zeros(2)}, assign=True)
        return (r.missing_keys, r.unexpected_keys, repr(r), repr(r2), w.tolist(),
                type(m[0].weight).__name__, m[0].weight.requires_grad, m[0].weight is w,
                m[0].weight.tolist())
    ref.same(f)


def test_setattr_routing_and_errors(ref):
    def f(T):
        m = T.nn.Module()
        m.p = T.nn.Parameter(T.ones(1))
        m.sub = T.nn.Identity()
        m.register_buffer("b", T.zeros(1))
        m.b = T.ones(2)  # stays a buffer
        m.c = T.nn.Buffer(T.ones(1), persistent=False)
        m.plain = T.ones(1)
        m.p = None
        out = (list(m._parameters), list(m._buffers), list(m._modules), list(m.state_dict()),
               m.b.tolist(), "plain" in m.__dict__)
        del m.sub
        del m.b
        return out + (list(m._modules), list(m._buffers), hasattr(m, "b"))
    ref.same(f)

    def bad_param(T):
        m = T.nn.Module()
        m.p = T.nn.Parameter(T.ones(1))
        m.p = T.ones(1)

    ref.raises(bad_param, TypeError)

    def bad_module(T):
        m = T.nn.Module()
        m.s = T.nn.Identity()
        m.s = 3

    ref.raises(bad_module, TypeError)

    def bad_buffer(T):
        m = T.nn.Module()
        m.register_buffer("b", T.ones(1))
        m.b = 3

    ref.raises(bad_buffer, TypeError)
    ref.raises(lambda T: T.nn.Module().register_buffer("a.b", T.ones(1)), KeyError)
    ref.raises(lambda T: T.nn.Module().register_buffer("", T.ones(1)), KeyError)
    ref.raises(lambda T: T.nn.Module().register_buffer("x", 3), TypeError)
    ref.raises(lambda T: T.nn.Module().register_parameter("x", T.ones(1)), TypeError)
    ref.raises(lambda T: T.nn.Module().register_parameter("a.b", None), KeyError)
    ref.raises(lambda T: T.nn.Module().register_parameter(
        "x", T.nn.Parameter(T.ones(1)) * 2 if False else _nonleaf(T)), TypeError)
    ref.raises(lambda T: T.nn.Module().add_module("x", 3), TypeError)
    ref.raises(lambda T: T.nn.Module().add_module("a.b", T.nn.Identity()), KeyError)
    ref.raises(lambda T: T.nn.Module().add_module("training", T.nn.Identity()), KeyError)
    ref.raises(lambda T: T.nn.Module().nothing, AttributeError)
    ref.raises(lambda T: T.nn.Module()(1), NotImplementedError)
    ref.raises(lambda T: T.nn.Linear(1, 1, foo=2), TypeError)

    class Early:
        pass

    def early(T):
        class M(T.nn.Module):
            def __init__(self):
                self.p = T.nn.Parameter(T.ones(1))

        M()

    ref.raises(early, AttributeError)


def _nonleaf(T):
    return T.ones(1, requires_grad=True) * 2


def test_get_submodule_parameter(ref):
    def f(T):
        m = _net(T)
        return (type(m.get_submodule("seq.0")).__name__, tuple(m.get_parameter("block.fc.weight").shape),
                m.get_submodule("") is m, tuple(m.get_buffer("block.running").shape))
    ref.same(f)
    ref.raises(lambda T: _net(T).get_submodule("seq.9"), AttributeError)
    ref.raises(lambda T: _net(T).get_submodule("scale"), AttributeError)
    ref.raises(lambda T: _net(T).get_parameter("block.running"), AttributeError)
    ref.raises(lambda T: _net(T).get_parameter("block.nope"), AttributeError)


def test_shared_and_duplicates(ref):
    def f(T):
        lin = T.nn.Linear(2, 2)
        s = T.nn.Sequential(lin, lin)
        s.extra = lin.weight
        return (len(list(s.parameters())), len(list(s.named_parameters(remove_duplicate=False))),
                [n for n, _ in s.named_modules()], [n for n, _ in s.named_modules(remove_duplicate=False)],
                list(s.state_dict()), len(list(s.children())))
    ref.same(f)


def test_train_eval_apply_requires_grad(ref):
    def f(T):
        m = _net(T)
        m.eval()
        ev = [x.training for x in m.modules()]
        m.train()
        seen = []
        m.apply(lambda mod: seen.append(type(mod).__name__))
        m.requires_grad_(False)
        return ev, [x.training for x in m.modules()], seen, [p.requires_grad for p in m.parameters()]
    ref.same(f)
    ref.raises(lambda T: T.nn.Linear(1, 1).train("yes"), ValueError)


def test_zero_grad(ref):
    def f(T):
        m = T.nn.Linear(2, 2)
        m(T.ones(1, 2)).sum().backward()
        g = m.weight.grad
        m.zero_grad(set_to_none=False)
        kept = (m.weight.grad is g, g.tolist())
        m.zero_grad()
        return kept, m.weight.grad is None, m.bias.grad is None
    ref.same(f)


def test_dtype_moves_keep_identity(ref):
    def f(T):
        m = _net(T)
        w = m.block.fc.weight
        m(T.ones(1, 3)).sum().backward()
        m.double()
        out = (m.block.fc.weight is w, str(w.dtype), str(w.grad.dtype), str(m.block.running.dtype),
               type(w).__name__, w.requires_grad)
        m.to(T.float32)
        m.to("cpu")
        m.to(T.zeros(1, dtype=T.float64))
        m.float()
        return out + (str(w.dtype), m.block.fc.weight is w, m.cpu() is m)
    ref.same(f)
    ref.raises(lambda T: T.nn.Linear(1, 1).to(T.int64), TypeError)


def test_repr_nested(ref):
    def f(T):
        return repr(_net(T)), repr(T.nn.Module()), repr(T.nn.Sequential())
    ref.same(f)


def test_parameter_basics(ref):
    def f(T):
        base = T.ones(2)
        p = T.nn.Parameter(base)
        q = T.nn.Parameter(T.ones(2), requires_grad=False)
        e = T.nn.Parameter()
        d = copy.deepcopy(p)
        return (repr(p), str(q), p.requires_grad, q.requires_grad, isinstance(p, T.Tensor),
                type(p * 2).__name__, type(p.detach()).__name__, p.is_leaf, tuple(e.shape),
                type(d).__name__, d is p, d.data_ptr() != p.data_ptr(), p.data_ptr() == base.data_ptr())
    ref.same(f)
    ref.raises(lambda T: T.nn.Parameter(T.ones(2, dtype=T.int64)), RuntimeError)


def test_deepcopy_module(ref):
    def f(T):
        m = _net(T)
        c = copy.deepcopy(m)
        return (c.block.fc.weight is m.block.fc.weight,
                T.equal(c.block.fc.weight, m.block.fc.weight), type(c.scale).__name__)
    ref.same(f)


# --- hooks ---
def _hook_trace(T):
    log = []
    m = T.nn.Linear(2, 2)
    m.register_forward_pre_hook(lambda mod, args: log.append(("pre", len(args))))
    m.register_forward_pre_hook(lambda mod, args, kw: log.append(("pre_kw", sorted(kw))) or None,
                                with_kwargs=True)
    m.register_forward_pre_hook(lambda mod, args: log.append(("first",)), prepend=True)
    h = m.register_forward_hook(lambda mod, args, out: log.append(("fwd", tuple(out.shape))))
    m.register_forward_hook(lambda mod, args, kw, out: out * 2, with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: log.append(("after", tuple(out.shape))))
    x = T.ones(3, 2)
    y = m(x)
    h.remove()
    y2 = m(x)
    return log, T.equal(y, y2), T.allclose(y, 2 * (x @ m.weight.t() + m.bias))


def test_forward_hooks_order_and_results(ref):
    ref.same(_hook_trace)


def test_forward_pre_hook_replaces_args(ref):
    def f(T):
        m = T.nn.Identity()
        m.register_forward_pre_hook(lambda mod, args: args[0] + 1)
        m.register_forward_pre_hook(lambda mod, args, kw: ((args[0] * 10,), kw), with_kwargs=True)
        return m(T.ones(1)).tolist()
    ref.same(f)

    def bad(T):
        m = T.nn.Identity()
        m.register_forward_pre_hook(lambda mod, args, kw: 3, with_kwargs=True)
        m(T.ones(1))

    ref.raises(bad, RuntimeError)


def test_always_call_hook(ref):
    def f(T):
        log = []

        class Boom(T.nn.Module):
            def forward(self, x):
                raise ValueError("boom")

        m = Boom()
        m.register_forward_hook(lambda mod, args, out: log.append(("always", out)), always_call=True)
        m.register_forward_hook(lambda mod, args, out: log.append("never"))
        with pytest.raises(ValueError):
            m(T.ones(1))
        return log
    ref.same(f)


def test_full_backward_hooks(ref):
    def f(T):
        log = []
        m = T.nn.Linear(3, 2).double()
        with T.no_grad():
            m.weight.copy_(T.arange(6, dtype=T.float64).reshape(2, 3) / 10)

        def pre(mod, gout):
            log.append(("pre", [tuple(g.shape) for g in gout]))
            return (gout[0] * 2,)

        def post(mod, gin, gout):
            log.append(("post", [None if g is None else tuple(g.shape) for g in gin],
                        [g.tolist() for g in gout]))
            return (gin[0] + 1,)

        m.register_full_backward_pre_hook(pre)
        m.register_full_backward_hook(post)
        x = T.ones(4, 3, dtype=T.float64, requires_grad=True)
        y = m(x)
        y.backward(T.ones(4, 2, dtype=T.float64))
        return log, x.grad, m.weight.grad, type(y.grad_fn).__name__
    ref.same(f)


def test_backward_hook_no_input_grad(ref):
    def f(T):
        log = []
        m = T.nn.Linear(2, 2)
        m.register_full_backward_hook(lambda mod, gin, gout: log.append((gin, len(gout))))
        with pytest.warns(UserWarning):
            m(T.ones(1, 2)).sum().backward()
        return log
    ref.same(f)


def test_backward_hook_two_inputs(ref):
    def f(T):
        log = []

        class Mul(T.nn.Module):
            def forward(self, a, k, b):
                return a * b * k

        m = Mul()
        m.register_full_backward_hook(lambda mod, gin, gout: log.append(
            [None if g is None else g.tolist() for g in gin]))
        a = T.tensor([1.0, 2.0], requires_grad=True)
        b = T.tensor([3.0, 4.0])
        m(a, 2.0, b).sum().backward()
        return log, a.grad
    ref.same(f)


def test_global_forward_hook():
    from ndgrad.nn.modules import module as M

    seen = []
    h = M.register_module_forward_hook(lambda mod, args, out: seen.append(type(mod).__name__))
    try:
        ndgrad.nn.Sequential(ndgrad.nn.Identity())(ndgrad.ones(1))
    finally:
        h.remove()
        M._note_global()
    assert seen == ["Identity", "Sequential"]
    ndgrad.nn.Identity()(ndgrad.ones(1))
    assert len(seen) == 2


def test_state_dict_hooks_and_extra_state(ref):
    def f(T):
        class WithExtra(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.v = 1

            def get_extra_state(self):
                return {"v": self.v}

            def set_extra_state(self, s):
                self.v = s["v"]

        m = T.nn.Sequential(WithExtra())
        sd = m.state_dict()
        sd["0._extra_state"] = {"v": 7}
        m.load_state_dict(sd)
        return list(sd), m[0].v
    ref.same(f)
