"""nn.RNN/LSTM/GRU, their cells and nn.utils.rnn against PyTorch (float64): outputs, final states
and every parameter gradient, over the configuration grid; errors, reprs and dropout behaviour."""

import itertools
import warnings

import numpy as np
import pytest

import ndgrad as nd
from ndgrad.nn.utils import rnn as nd_rnn

torch = pytest.importorskip("torch")
from torch.nn.utils import rnn as t_rnn


def _nd(t, rg=False):
    x = nd.tensor(t.detach().numpy().copy())
    return x.requires_grad_() if rg else x


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(a.detach().numpy() if isinstance(a, torch.Tensor) else a._data,
                               b.detach().numpy() if isinstance(b, torch.Tensor) else b._data,
                               rtol=tol, atol=tol)


def _pair(cls, *args, **kwargs):
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(*args, **kwargs).double()
    nm = getattr(nd.nn, cls)(*args, **kwargs).double()
    assert [n for n, _ in tm.named_parameters()] == [n for n, _ in nm.named_parameters()]
    with nd.no_grad():
        for (_, tp), (_, np_) in zip(tm.named_parameters(), nm.named_parameters(), strict=True):
            assert tuple(tp.shape) == tuple(np_.shape)
            np_.copy_(_nd(tp))
    return tm, nm


def _flat(out):
    if isinstance(out, (t_rnn.PackedSequence, nd_rnn.PackedSequence)):
        return [out.data]
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat(o)]
    return [out]


def _compare_module(tm, nm, t_in, n_in, t_hx=None, n_hx=None):
    t_out = tm(t_in, t_hx) if t_hx is not None else tm(t_in)
    n_out = nm(n_in, n_hx) if n_hx is not None else nm(n_in)
    tf, nf = _flat(t_out), _flat(n_out)
    assert len(tf) == len(nf)
    for a, b in zip(tf, nf, strict=True):
        assert tuple(a.shape) == tuple(b.shape)
        _close(a, b)
    rng = np.random.default_rng(1)
    ws = [rng.standard_normal(tuple(a.shape)) for a in tf]
    sum(((a * torch.tensor(w)).sum() for a, w in zip(tf, ws, strict=True))).backward()
    sum(((b * nd.tensor(w)).sum() for b, w in zip(nf, ws, strict=True))).backward()
    for (name, tp), (_, np_) in zip(tm.named_parameters(), nm.named_parameters(), strict=True):
        assert np_.grad is not None, name
        _close(tp.grad, np_.grad)
    return t_out, n_out


GRID = [g for g in itertools.product(["RNN", "LSTM", "GRU"], [1, 2], [False, True], [False, True], [0, 2])
        if g[0] == "LSTM" or not g[4]]


@pytest.mark.parametrize("cls,layers,bidir,batch_first,proj", GRID)
def test_module_matches_torch(cls, layers, bidir, batch_first, proj):
    if proj and cls != "LSTM":
        pytest.skip("proj_size is LSTM-only")
    kw = {"num_layers": layers, "bidirectional": bidir, "batch_first": batch_first}
    if proj:
        kw["proj_size"] = proj
    tm, nm = _pair(cls, 3, 4, **kw)
    x = torch.randn(2, 5, 3, dtype=torch.float64) if batch_first else torch.randn(5, 2, 3, dtype=torch.float64)
    xt, xn = x.clone().requires_grad_(), _nd(x, True)
    _compare_module(tm, nm, xt, xn)
    _close(xt.grad, xn.grad)
    # initial states, with gradients into them
    d = 2 if bidir else 1
    h = torch.randn(layers * d, 2, proj or 4, dtype=torch.float64)
    ht, hn = h.clone().requires_grad_(), _nd(h, True)
    if cls == "LSTM":
        c = torch.randn(layers * d, 2, 4, dtype=torch.float64)
        ct, cn = c.clone().requires_grad_(), _nd(c, True)
        tm.zero_grad()
        nm.zero_grad()
        _compare_module(tm, nm, x, _nd(x), (ht, ct), (hn, cn))
        _close(ct.grad, cn.grad)
    else:
        tm.zero_grad()
        nm.zero_grad()
        _compare_module(tm, nm, x, _nd(x), ht, hn)
    _close(ht.grad, hn.grad)


@pytest.mark.parametrize("cls,layers,bidir,proj", [(c, n, b, p) for c, n, _, b, p in GRID if not _])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_matches_torch(cls, layers, bidir, proj, enforce_sorted):
    if proj and cls != "LSTM":
        pytest.skip("proj_size is LSTM-only")
    kw = {"num_layers": layers, "bidirectional": bidir}
    if proj:
        kw["proj_size"] = proj
    tm, nm = _pair(cls, 3, 4, **kw)
    lengths = [5, 4, 4, 2, 1] if enforce_sorted else [2, 5, 1, 4, 4]
    x = torch.randn(5, 5, 3, dtype=torch.float64)
    xt, xn = x.clone().requires_grad_(), _nd(x, True)
    pt = t_rnn.pack_padded_sequence(xt, lengths, enforce_sorted=enforce_sorted)
    pn = nd_rnn.pack_padded_sequence(xn, lengths, enforce_sorted=enforce_sorted)
    _close(pt.data, pn.data)
    assert pt.batch_sizes.tolist() == pn.batch_sizes.tolist()
    t_out, n_out = _compare_module(tm, nm, pt, pn)
    assert isinstance(n_out[0], nd_rnn.PackedSequence)
    _close(xt.grad, xn.grad)
    pad_t, len_t = t_rnn.pad_packed_sequence(t_out[0], batch_first=True, total_length=6)
    pad_n, len_n = nd_rnn.pad_packed_sequence(n_out[0], batch_first=True, total_length=6)
    _close(pad_t, pad_n)
    assert len_t.tolist() == len_n.tolist()


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_unbatched_and_no_bias(cls):
    tm, nm = _pair(cls, 3, 4, num_layers=2, bias=False, bidirectional=True)
    x = torch.randn(5, 3, dtype=torch.float64)
    _compare_module(tm, nm, x, _nd(x))
    if cls == "LSTM":
        h, c = torch.randn(4, 4, dtype=torch.float64), torch.randn(4, 4, dtype=torch.float64)
        _compare_module(tm, nm, x, _nd(x), (h, c), (_nd(h), _nd(c)))
        with pytest.raises(RuntimeError, match="For unbatched 2-D input, hx and cx should also be 2-D"):
            nm(_nd(x), (_nd(h[:, None]), _nd(c[:, None])))
    else:
        h = torch.randn(4, 4, dtype=torch.float64)
        _compare_module(tm, nm, x, _nd(x), h, _nd(h))
        with pytest.raises(RuntimeError, match="For unbatched 2-D input, hx should also be 2-D"):
            nm(_nd(x), _nd(h[:, None]))


@pytest.mark.parametrize("cls,kw", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("LSTMCell", {}),
                                    ("GRUCell", {}), ("GRUCell", {"bias": False})])
def test_cells_match_torch(cls, kw):
    tm, nm = _pair(cls, 3, 4, **kw)
    x = torch.randn(2, 3, dtype=torch.float64)
    _compare_module(tm, nm, x, _nd(x))
    h = torch.randn(2, 4, dtype=torch.float64)
    hx_t = (h, h * 0.5) if cls == "LSTMCell" else h
    hx_n = (_nd(h), _nd(h * 0.5)) if cls == "LSTMCell" else _nd(h)
    tm.zero_grad()
    nm.zero_grad()
    _compare_module(tm, nm, x, _nd(x), hx_t, hx_n)
    tm.zero_grad()
    nm.zero_grad()
    _compare_module(tm, nm, x[0], _nd(x[0]))  # unbatched
    assert repr(tm) == repr(nm)


def test_params_repr_init():
    for args, kw in [((3, 4), {}), ((3, 4, 2), {"proj_size": 2, "dropout": 0.5, "bidirectional": True,
                                                     "batch_first": True, "bias": False})]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert repr(torch.nn.LSTM(*args, **kw)) == repr(nd.nn.LSTM(*args, **kw))
    assert repr(torch.nn.RNN(3, 4, nonlinearity="relu")) == repr(nd.nn.RNN(3, 4, nonlinearity="relu"))
    m = nd.nn.LSTM(3, 8, 2, bidirectional=True, proj_size=2)
    assert [len(w) for w in m.all_weights] == [5] * 4
    assert m.all_weights[1][0] is m.weight_ih_l0_reverse
    bound = 1 / np.sqrt(8)
    assert all(float(p.abs().max()) <= bound for p in m.parameters())
    m.flatten_parameters()
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in torch.nn.LSTM(
        3, 8, 2, bidirectional=True, proj_size=2).named_parameters()]


def test_errors():
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nd.nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nd.nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nd.nn.LSTM(3, 4, dropout=1.5)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nd.nn.LSTM(3, 4, dropout=0.5)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nd.nn.RNN(3, 4, nonlinearity="gelu")
    m = nd.nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 3, got 2"):
        m(nd.zeros(5, 2, 2))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \[1, 2, 4\], got \[1, 3, 4\]"):
        m(nd.zeros(5, 2, 3), (nd.zeros(1, 3, 4), nd.zeros(1, 2, 4)))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \[1, 2, 4\], got \[1, 2, 5\]"):
        nd.nn.GRU(3, 4)(nd.zeros(5, 2, 3), nd.zeros(1, 2, 5))
    with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D instead"):
        m(nd.zeros(1, 5, 2, 3))
    with pytest.raises(RuntimeError, match="`lengths` array must be sorted in decreasing order when "
                                           "`enforce_sorted` is True"):
        nd_rnn.pack_padded_sequence(nd.zeros(5, 2, 3), [2, 5])
    with pytest.raises(ValueError, match="Expected total_length to be at least"):
        nd_rnn.pad_packed_sequence(nd_rnn.pack_padded_sequence(nd.zeros(5, 2, 3), [5, 2]), total_length=3)


def test_dropout_train_eval():
    nd.manual_seed(0)
    m = nd.nn.LSTM(3, 16, 3, dropout=0.5).double()
    x = nd.randn(4, 2, 3, dtype=nd.float64)
    m.eval()
    a, b = m(x)[0], m(x)[0]
    _close(a, b, 0)
    m.train()
    c, d = m(x)[0], m(x)[0]
    assert c.shape == a.shape
    assert not np.allclose(c._data, d._data)
    m.dropout = 0.0
    _close(m(x)[0], a, 0)


def test_pad_utils_match_torch():
    seqs = [torch.randn(n, 2, dtype=torch.float64) for n in (3, 5, 1)]
    ns = [_nd(s, True) for s in seqs]
    for bf, side in itertools.product([False, True], ["right", "left"]):
        pt = t_rnn.pad_sequence(seqs, batch_first=bf, padding_value=-1.0, padding_side=side)
        pn = nd_rnn.pad_sequence(ns, batch_first=bf, padding_value=-1.0, padding_side=side)
        _close(pt, pn)
    pn = nd_rnn.pad_sequence(ns, batch_first=True)
    (pn * nd.arange(10, dtype=nd.float64).reshape(1, 5, 2)).sum().backward()
    assert ns[1].grad.tolist() == np.arange(10.0).reshape(5, 2).tolist()
    packed_t = t_rnn.pack_sequence(seqs, enforce_sorted=False)
    packed_n = nd_rnn.pack_sequence(ns, enforce_sorted=False)
    _close(packed_t.data, packed_n.data)
    assert packed_t.sorted_indices.tolist() == packed_n.sorted_indices.tolist()
    assert packed_t.unsorted_indices.tolist() == packed_n.unsorted_indices.tolist()
    for a, b in zip(t_rnn.unpack_sequence(packed_t), nd_rnn.unpack_sequence(packed_n), strict=True):
        _close(a, b)
    padded, lengths = nd_rnn.pad_packed_sequence(packed_n)
    for a, b in zip(seqs, nd_rnn.unpad_sequence(padded, lengths), strict=True):
        _close(a, b)
    assert packed_n.to(nd.float64) is packed_n
    assert packed_n.float().data.dtype == nd.float32


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_packed_unsorted_with_initial_state(cls):
    tm, nm = _pair(cls, 3, 4, num_layers=2, bidirectional=True)
    x = torch.randn(4, 3, 3, dtype=torch.float64)
    lengths = [2, 4, 3]
    pt = t_rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
    pn = nd_rnn.pack_padded_sequence(_nd(x), lengths, enforce_sorted=False)
    h = torch.randn(4, 3, 4, dtype=torch.float64)
    ht, hn = h.clone().requires_grad_(), _nd(h, True)
    if cls == "LSTM":
        c = torch.randn(4, 3, 4, dtype=torch.float64)
        _compare_module(tm, nm, pt, pn, (ht, c), (hn, _nd(c)))
    else:
        _compare_module(tm, nm, pt, pn, ht, hn)
    _close(ht.grad, hn.grad)


@pytest.mark.parametrize("cls,kw", [("RNN", {}), ("LSTM", {}), ("LSTM", {"proj_size": 2}), ("GRU", {})])
def test_module_gradgradcheck(cls, kw):
    nd.manual_seed(0)
    m = getattr(nd.nn, cls)(2, 3, bidirectional=True, **kw).double()
    x = nd.randn(3, 2, 2, dtype=nd.float64, requires_grad=True)
    w = m.weight_hh_l0

    def f(x, w):
        return nd.func.functional_call(m, {"weight_hh_l0": w}, (x,))[0]

    assert nd.autograd.gradcheck(f, (x, w))
    assert nd.autograd.gradgradcheck(f, (x, w))
