"""Fused recurrent-cell ops (``nn.LSTM``, ``nn.GRU`` and their cells).

A time step's gate math is one op with a hand-written backward op, instead of a dozen tiny
nodes per step (the LSTM language-model step of ``benchmarks/rnn.py``). The input and hidden
projections stay ``mm``/``addmm`` (one matmul per layer for the whole sequence, one per step);
the cell op takes both projections so the add is fused too. The backward ops run on arrays;
their own formulas are Tensor ops, so double backward works. ``nn.RNN`` needs no op of its
own: ``tanh``/``relu`` already have fused backward kernels. The layer loops live in
``nn/modules/rnn.py``.
"""

from __future__ import annotations

import numpy as np

from .. import _backend
from .factory import zeros
from .registry import defcomposite, defop
from .samples import nc, sample
from .shape import cat, stack


def _sig(x):
    # tanh form: one stable ufunc pass, no overflow for large |x|
    s = np.tanh(x * 0.5)
    s *= 0.5
    s += 0.5
    return s


# --- LSTM: gates (i, f, g, o) in PyTorch's order ---
def _lstm_acts(igates, hgates):
    a = igates + hgates
    h = a.shape[-1] // 4
    s = _sig(a)
    g = np.tanh(a[..., 2 * h:3 * h])
    return s[..., :h], s[..., h:2 * h], g, s[..., 3 * h:]


def _lstm_cell(igates, hgates, cx):
    i, f, g, o = _lstm_acts(igates, hgates)
    cy = f * cx
    cy += i * g
    hy = np.tanh(cy)
    hy *= o
    return hy, cy


def _lstm_cell_backward_arrays(grad_hy, grad_cy, igates, hgates, cx):
    i, f, g, o = _lstm_acts(igates, hgates)
    cy = f * cx
    cy += i * g
    tc = np.tanh(cy)
    gc = (1 - tc * tc) * o
    gc *= grad_hy
    gc += grad_cy
    d = _backend.namespace_of(igates).empty(igates.shape, np.result_type(grad_hy, igates))
    h = cx.shape[-1]
    d[..., :h] = gc * g * i * (1 - i)
    d[..., h:2 * h] = gc * cx * f * (1 - f)
    d[..., 2 * h:3 * h] = gc * i * (1 - g * g)
    d[..., 3 * h:] = grad_hy * tc * o * (1 - o)
    return d, gc * f


def _lstm_cell_double(grads, grad_hy, grad_cy, igates, hgates, cx, needs):
    """The vjp of ``(dgates, dcx)``. With ``gc = grad_cy + grad_hy o (1 - tanh(c)^2)``:
    ``dgates = (gc g i', gc cx f', gc i g', grad_hy tanh(c) o')``, ``dcx = gc f``."""
    Gd, Gx = grads
    Gi, Gf, Gg, Go = Gd.chunk(4, -1)
    i, f, g, o = (igates + hgates).chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    si, sf, so, tg = i * (1 - i), f * (1 - f), o * (1 - o), 1 - g * g
    c = f * cx + i * g
    tc = c.tanh()
    t2 = 1 - tc * tc
    gc = grad_cy + grad_hy * o * t2
    Ggc = Gi * g * si + Gf * cx * sf + Gg * i * tg + Gx * f  # dL/dgc
    Gc = (Ggc * grad_hy * o * (-2 * tc) + Go * grad_hy * so) * t2  # dL/dc through tanh(c)
    Li = Gi * gc * g * (1 - 2 * i) + Gg * gc * tg + Gc * g
    Lf = Gf * gc * cx * (1 - 2 * f) + Gx * gc + Gc * cx
    Lg = Gi * gc * si - 2 * Gg * gc * i * g + Gc * i
    Lo = Go * grad_hy * tc * (1 - 2 * o) + Ggc * grad_hy * t2
    da = cat([Li * si, Lf * sf, Lg * tg, Lo * so], -1) if needs[2] or needs[3] else None
    return (Ggc * o * t2 + Go * tc * so if needs[0] else None, Ggc if needs[1] else None, da, da,
            Gf * gc * sf + Gc * f if needs[4] else None)


def _lstm_samples(rng, backward=False):
    def r(*s):
        return rng.standard_normal(s)

    out = []
    for name, b, h in (("2d", 3, 2), ("1d", None, 3)):
        bs = () if b is None else (b,)
        args = (r(*bs, 4 * h), r(*bs, 4 * h), r(*bs, h))
        out.append(sample(name, *((r(*bs, h), r(*bs, h)) if backward else ()), *args))
    out.append(sample("nc", *((r(2, 3), nc(r(2, 3))) if backward else ()), nc(r(2, 12)), r(2, 12), r(2, 3)))
    return out


lstm_cell_backward = defop(
    "_lstm_cell_backward(Tensor grad_hy, Tensor grad_cy, Tensor igates, Tensor hgates, Tensor cx) "
    "-> (Tensor, Tensor)", _lstm_cell_backward_arrays,
    {("grad_hy", "grad_cy", "igates", "hgates", "cx"): _lstm_cell_double},
    method=False, api=False, samples=lambda rng: _lstm_samples(rng, True)).call

def _lstm_cell_grad(grads, igates, hgates, cx):
    dgates, dcx = lstm_cell_backward(grads[0], grads[1], igates, hgates, cx)
    return dgates, dgates, dcx


lstm_cell = defop(
    "_lstm_cell(Tensor igates, Tensor hgates, Tensor cx) -> (Tensor, Tensor)", _lstm_cell,
    {("igates", "hgates", "cx"): _lstm_cell_grad}, method=False, api=False, samples=_lstm_samples).call


# --- GRU: gates (r, z, n); hgates carries b_hh, since n = tanh(in + r (W_hn h + b_hn)) ---
def _gru_acts(ig, hg):
    h = ig.shape[-1] // 3
    rz = _sig(ig[..., :2 * h] + hg[..., :2 * h])
    r, z = rz[..., :h], rz[..., h:]
    n = np.tanh(ig[..., 2 * h:] + r * hg[..., 2 * h:])
    return r, z, n


def _gru_cell(igates, hgates, hx):
    _r, z, n = _gru_acts(igates, hgates)
    return n + z * (hx - n)


def _gru_cell_backward_arrays(grad_hy, igates, hgates, hx):
    r, z, n = _gru_acts(igates, hgates)
    h = hx.shape[-1]
    hn = hgates[..., 2 * h:]
    an = grad_hy * (1 - z) * (1 - n * n)
    di = _backend.namespace_of(igates).empty(igates.shape, np.result_type(grad_hy, igates))
    di[..., :h] = an * hn * r * (1 - r)
    di[..., h:2 * h] = grad_hy * (hx - n) * z * (1 - z)
    di[..., 2 * h:] = an
    dh = di.copy()
    dh[..., 2 * h:] *= r
    return di, dh, grad_hy * z


def _gru_cell_double(grads, grad_hy, igates, hgates, hx, needs):
    """The vjp of ``(dig, dhg, dhx)``: with ``An = grad (1-z) n'``, ``dig = (An hn r', grad (hx-n) z',
    An)``, ``dhg = (.., .., An r)``, ``dhx = grad z``."""
    Gi, Gh, Gx = grads
    Gir, Giz, Gin = Gi.chunk(3, -1)
    Ghr, Ghz, Ghn = Gh.chunk(3, -1)
    ir, iz, inn = igates.chunk(3, -1)
    hr, hz, hn = hgates.chunk(3, -1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (inn + r * hn).tanh()
    sr, sz, tn = r * (1 - r), z * (1 - z), 1 - n * n
    an = grad_hy * (1 - z) * tn
    Pr, Pz, Pn = Gir + Ghr, Giz + Ghz, Gin + Ghn * r
    Qan = Pn + Pr * hn * sr  # dL/dAn
    Ln = Qan * grad_hy * (1 - z) * (-2 * n) - Pz * grad_hy * sz
    Lz = -Qan * grad_hy * tn + Pz * grad_hy * (hx - n) * (1 - 2 * z) + Gx * grad_hy
    Lnp = Ln * tn
    Lr = Pr * an * hn * (1 - 2 * r) + Ghn * an + Lnp * hn
    Lrp, Lzp = Lr * sr, Lz * sz
    dgrad = Qan * (1 - z) * tn + Pz * (hx - n) * sz + Gx * z if needs[0] else None
    dig = cat([Lrp, Lzp, Lnp], -1) if needs[1] else None
    dhg = cat([Lrp, Lzp, Pr * an * sr + Lnp * r], -1) if needs[2] else None
    return dgrad, dig, dhg, Pz * grad_hy * sz if needs[3] else None


def _gru_samples(rng, backward=False):
    def r(*s):
        return rng.standard_normal(s)

    out = []
    for name, bs, h in (("2d", (3,), 2), ("1d", (), 3)):
        out.append(sample(name, *((r(*bs, h),) if backward else ()), r(*bs, 3 * h), r(*bs, 3 * h), r(*bs, h)))
    out.append(sample("nc", *((nc(r(2, 3)),) if backward else ()), nc(r(2, 9)), r(2, 9), r(2, 3)))
    return out


gru_cell_backward = defop(
    "_gru_cell_backward(Tensor grad_hy, Tensor igates, Tensor hgates, Tensor hx) -> (Tensor, Tensor, Tensor)",
    _gru_cell_backward_arrays, {("grad_hy", "igates", "hgates", "hx"): _gru_cell_double},
    method=False, api=False, samples=lambda rng: _gru_samples(rng, True)).call

gru_cell = defop(
    "_gru_cell(Tensor igates, Tensor hgates, Tensor hx) -> Tensor", _gru_cell,
    {("igates", "hgates", "hx"): lambda grad, igates, hgates, hx: gru_cell_backward(grad, igates, hgates, hx)},
    method=False, api=False, samples=_gru_samples).call


# --- LSTM layer: the whole recurrence of one direction as one op (padded input, no projection) ---
def _lstm_layer(gi, h0, c0, w_hh):
    """Loops over time on arrays. Also returns the pre-activation ``gates`` and every ``c`` (the
    backward reads them instead of recomputing the hidden projections)."""
    xp = _backend.namespace_of(gi)
    t_len = gi.shape[0]
    dt = np.result_type(gi, h0, c0, w_hh)
    out = xp.empty((t_len,) + h0.shape, dt)
    cs = xp.empty((t_len,) + c0.shape, dt)
    gates = xp.empty(gi.shape, dt)
    wt = w_hh.T
    h, c = h0, c0
    for t in range(t_len):
        a = gates[t]
        np.matmul(h, wt, out=a)
        a += gi[t]
        i, f, g, o = _lstm_acts(a, 0)
        c = f * c
        c += i * g
        cs[t] = c
        h = np.tanh(c)
        h *= o
        out[t] = h
    return out, out[-1].copy(), cs[-1].copy(), gates, cs


def _lstm_layer_grad(grads, gi, h0, c0, w_hh, output, gates, cs, needs):
    """Backward through time in Tensor ops (one fused cell-backward op and one ``mm`` a step; so it
    differentiates again), then the hidden weight's gradient as one matmul over all steps."""
    gout, ghn, gcn, ggates, gcs = grads
    t_len, hidden = gi.shape[0], h0.shape[-1]
    zero = zeros((), dtype=gates.dtype, device=gates.device)
    gh, gc = ghn, gcn
    dgs = [None] * t_len
    for t in range(t_len - 1, -1, -1):
        dg, gc = lstm_cell_backward(gh + gout[t], gc + gcs[t], gates[t], zero, c0 if t == 0 else cs[t - 1])
        dg = dg + ggates[t]
        dgs[t] = dg
        gh = dg.mm(w_hh)
    dgi = stack(dgs, 0)
    dw = None
    if needs[3]:
        hprev = cat([h0.unsqueeze(0), output[:-1]], 0).reshape(-1, hidden)
        dw = dgi.reshape(-1, 4 * hidden).mT.mm(hprev)
    return dgi, gh, gc, dw


def _lstm_layer_samples(rng):
    def r(*s):
        return rng.standard_normal(s)

    return [sample("3x2x2", r(3, 2, 8), r(2, 2), r(2, 2), r(8, 2)),
            sample("1step_nc", nc(r(1, 3, 4)), r(3, 1), r(3, 1), r(4, 1))]


lstm_layer = defop(
    "_lstm_layer(Tensor gi, Tensor h0, Tensor c0, Tensor w_hh) "
    "-> (Tensor output, Tensor h_n, Tensor c_n, Tensor gates, Tensor cs)",
    _lstm_layer, {("gi", "h0", "c0", "w_hh"): _lstm_layer_grad},
    method=False, api=False, samples=_lstm_layer_samples).call


# --- PyTorch's functional cells: torch.lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell ---
def _proj(x, w, b):
    y = x.matmul(w.mT)
    return y if b is None else y + b


def _cell_lstm(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``(h', c')`` of one LSTM step from ``hx = (h, c)``, through the fused cell op."""
    h, c = hx
    return lstm_cell(_proj(input, w_ih, b_ih), _proj(h, w_hh, b_hh), c)


def _cell_gru(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return gru_cell(_proj(input, w_ih, b_ih), _proj(hx, w_hh, b_hh), hx)


def _cell_rnn_tanh(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return (_proj(input, w_ih, b_ih) + _proj(hx, w_hh, b_hh)).tanh()


def _cell_rnn_relu(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return (_proj(input, w_ih, b_ih) + _proj(hx, w_hh, b_hh)).relu()


def _cell_samples(chunks):
    def samples(rng):
        def r(*s):
            return rng.standard_normal(s)

        return [sample("bias", r(3, 4), r(3, 2), r(chunks * 2, 4), r(chunks * 2, 2), r(chunks * 2), r(chunks * 2)),
                sample("no_bias", r(2, 4), nc(r(2, 2)), r(chunks * 2, 4), r(chunks * 2, 2))]
    return samples


for _fn, _name in ((_cell_lstm, "lstm_cell"), (_cell_gru, "gru_cell"), (_cell_rnn_tanh, "rnn_tanh_cell"),
                   (_cell_rnn_relu, "rnn_relu_cell")):
    _fn.__name__ = _fn.__qualname__ = _name
_cell_lstm = defcomposite(_cell_lstm, name="lstm_cell", method=False, samples=lambda rng: [],
                          gradcheck=False).call  # (h, c) is a tuple: tests/ops/test_rnn_cell_functions.py
_cell_gru = defcomposite(_cell_gru, name="gru_cell", method=False, samples=_cell_samples(3)).call
_cell_rnn_tanh = defcomposite(_cell_rnn_tanh, name="rnn_tanh_cell", method=False, samples=_cell_samples(1)).call
_cell_rnn_relu = defcomposite(_cell_rnn_relu, name="rnn_relu_cell", method=False, samples=_cell_samples(1)).call
