"""Training-step workloads for benchmarks/run.py: MLP, small CNN, pre-LayerNorm transformer block.

Each is one SGD step (forward, cross-entropy, backward, update) written once as PyTorch code that
ndgrad runs unchanged, and once by hand in NumPy (forward, backward and update: the floor).
Parameters are drawn once as arrays and loaded into every contender, so all compute the same
loss and gradients (checked before timing).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

DTYPE = np.float32
LR = 0.01


# --- shared NumPy pieces of the floors ---


def _ce_fwd(z: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of logits z (N, C) at class indices y; returns (loss, softmax)."""
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = float(np.mean(np.log(s[:, 0]) + m[:, 0] - z[rows, y]))
    return loss, e / s


def _ce_bwd(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    dz = p.copy()
    dz[np.arange(len(y)), y] -= 1.0
    dz /= len(y)
    return dz


def _sgd(params: list[np.ndarray], grads: list[np.ndarray]) -> None:
    for p, g in zip(params, grads, strict=True):
        p -= LR * g


def _linear_init(rng: np.random.Generator, fan_out: int, fan_in: int) -> list[np.ndarray]:
    bound = 1.0 / math.sqrt(fan_in)
    return [rng.uniform(-bound, bound, (fan_out, fan_in)).astype(DTYPE),
            rng.uniform(-bound, bound, fan_out).astype(DTYPE)]


def _load(lib: Any, module: Any, arrays: list[np.ndarray]) -> None:
    params = list(module.parameters())
    assert [tuple(p.shape) for p in params] == [a.shape for a in arrays], "parameter layout"
    with lib.no_grad():
        for p, a in zip(params, arrays, strict=True):
            p.copy_(lib.from_numpy(a.copy()))


# --- MLP: batch 128, 784-1024-1024-10, ReLU ---


def mlp_data(rng: np.random.Generator) -> tuple[list[np.ndarray], tuple]:
    params = _linear_init(rng, 1024, 784) + _linear_init(rng, 1024, 1024) + _linear_init(rng, 10, 1024)
    x = rng.standard_normal((128, 784)).astype(DTYPE)
    y = rng.integers(0, 10, 128)
    return params, (x, y)


def mlp_model(lib: Any) -> tuple[Any, Callable]:
    nn = lib.nn
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    return model, lambda m, batch: nn.functional.cross_entropy(m(batch[0]), batch[1])


def mlp_floor_fwd(params: list[np.ndarray], batch: tuple) -> tuple:
    w1, b1, w2, b2, w3, b3 = params
    x, y = batch
    a1 = x @ w1.T + b1
    h1 = np.maximum(a1, 0)
    a2 = h1 @ w2.T + b2
    h2 = np.maximum(a2, 0)
    z = h2 @ w3.T + b3
    loss, p = _ce_fwd(z, y)
    return loss, params, x, y, a1, h1, a2, h2, p


def mlp_floor_bwd(state: tuple) -> list[np.ndarray]:
    _, params, x, y, a1, h1, a2, h2, p = state
    w1, b1, w2, b2, w3, b3 = params
    dz = _ce_bwd(p, y)
    gw3, gb3 = dz.T @ h2, dz.sum(0)
    da2 = (dz @ w3) * (a2 > 0)
    gw2, gb2 = da2.T @ h1, da2.sum(0)
    da1 = (da2 @ w2) * (a1 > 0)
    gw1, gb1 = da1.T @ x, da1.sum(0)
    grads = [gw1, gb1, gw2, gb2, gw3, gb3]
    _sgd(params, grads)
    return grads


# --- CNN: batch 32, 1x28x28; conv 1->16 3x3 pad 1, relu, maxpool 2, conv 16->32 3x3 pad 1,
# relu, maxpool 2, linear 1568->10 ---


def cnn_data(rng: np.random.Generator) -> tuple[list[np.ndarray], tuple]:
    def conv_init(o, c):
        bound = 1.0 / math.sqrt(c * 9)
        return [rng.uniform(-bound, bound, (o, c, 3, 3)).astype(DTYPE),
                rng.uniform(-bound, bound, o).astype(DTYPE)]

    params = conv_init(16, 1) + conv_init(32, 16) + _linear_init(rng, 10, 32 * 7 * 7)
    x = rng.standard_normal((32, 1, 28, 28)).astype(DTYPE)
    y = rng.integers(0, 10, 32)
    return params, (x, y)


def cnn_model(lib: Any) -> tuple[Any, Callable]:
    nn = lib.nn
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    return model, lambda m, batch: nn.functional.cross_entropy(m(batch[0]), batch[1])


def _conv_fwd(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """3x3, stride 1, padding 1, as one matmul over im2col columns; returns (out, cols)."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = sliding_window_view(xp, (3, 3), axis=(2, 3)).transpose(0, 2, 3, 1, 4, 5)
    cols = cols.reshape(n * h * wd, c * 9)
    out = cols @ w.reshape(len(w), -1).T + b
    return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2), cols


def _conv_bwd(dout: np.ndarray, cols: np.ndarray, w: np.ndarray, x_shape: tuple, need_dx: bool):
    n, c, h, wd = x_shape
    o = len(w)
    d = dout.transpose(0, 2, 3, 1).reshape(-1, o)
    gw = (d.T @ cols).reshape(w.shape)
    gb = d.sum(0)
    if not need_dx:
        return None, gw, gb
    dcols = (d @ w.reshape(o, -1)).reshape(n, h, wd, c, 3, 3)
    dxp = np.zeros((n, c, h + 2, wd + 2), DTYPE)
    for i in range(3):  # scatter the 9 kernel offsets back (col2im)
        for j in range(3):
            dxp[:, :, i:i + h, j:j + wd] += dcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dxp[:, :, 1:-1, 1:-1], gw, gb


def _pool_fwd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2x2 max pool, stride 2; returns (out, argmax within each window: first maximum, as torch)."""
    n, c, h, w = a.shape
    win = a.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    idx = win.argmax(axis=-1)
    return np.take_along_axis(win, idx[..., None], -1)[..., 0], idx


def _pool_bwd(g: np.ndarray, idx: np.ndarray) -> np.ndarray:
    n, c, h2, w2 = g.shape
    win = (idx[..., None] == np.arange(4)) * g[..., None]
    return win.reshape(n, c, h2, w2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, 2 * h2, 2 * w2)


def cnn_floor_fwd(params: list[np.ndarray], batch: tuple) -> tuple:
    cw1, cb1, cw2, cb2, lw, lb = params
    x, y = batch
    a1, cols1 = _conv_fwd(x, cw1, cb1)
    r1 = np.maximum(a1, 0)
    p1, i1 = _pool_fwd(r1)
    a2, cols2 = _conv_fwd(p1, cw2, cb2)
    r2 = np.maximum(a2, 0)
    p2, i2 = _pool_fwd(r2)
    f = p2.reshape(len(x), -1)
    z = f @ lw.T + lb
    loss, p = _ce_fwd(z, y)
    return loss, params, x.shape, y, cols1, a1, i1, p1.shape, cols2, a2, i2, f, p


def cnn_floor_bwd(state: tuple) -> list[np.ndarray]:
    _, params, x_shape, y, cols1, a1, i1, p1_shape, cols2, a2, i2, f, p = state
    cw1, cb1, cw2, cb2, lw, lb = params
    dz = _ce_bwd(p, y)
    glw, glb = dz.T @ f, dz.sum(0)
    dp2 = (dz @ lw).reshape(i2.shape)
    da2 = _pool_bwd(dp2, i2) * (a2 > 0)
    dp1, gcw2, gcb2 = _conv_bwd(da2, cols2, cw2, p1_shape, True)
    da1 = _pool_bwd(dp1, i1) * (a1 > 0)
    _, gcw1, gcb1 = _conv_bwd(da1, cols1, cw1, x_shape, False)
    grads = [gcw1, gcb1, gcw2, gcb2, glw, glb]
    _sgd(params, grads)
    return grads


# --- transformer block: batch 8, sequence 64, width 128, 4 heads, MLP 512 with tanh-GELU,
# vocabulary 256; token + position embeddings, one pre-LayerNorm block, linear head ---
B, S, D, H, F, V = 8, 64, 128, 4, 512, 256
EPS = 1e-5


def tf_data(rng: np.random.Generator) -> tuple[list[np.ndarray], tuple]:
    params = [rng.standard_normal((V, D)).astype(DTYPE) * np.float32(0.1),  # token embedding
              rng.standard_normal((S, D)).astype(DTYPE) * np.float32(0.1),  # position embedding
              np.ones(D, DTYPE), np.zeros(D, DTYPE)]  # ln1
    params += _linear_init(rng, 3 * D, D) + _linear_init(rng, D, D)  # qkv, attention out
    params += [np.ones(D, DTYPE), np.zeros(D, DTYPE)]  # ln2
    params += _linear_init(rng, F, D) + _linear_init(rng, D, F) + _linear_init(rng, V, D)
    tokens = rng.integers(0, V, (B, S + 1))
    return params, (tokens[:, :-1], tokens[:, 1:].reshape(-1))


def tf_model(lib: Any) -> tuple[Any, Callable]:
    nn, F_ = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D)
            self.pos = nn.Embedding(S, D)
            self.ln1 = nn.LayerNorm(D)
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)
            self.ln2 = nn.LayerNorm(D)
            self.fc1 = nn.Linear(D, F)
            self.fc2 = nn.Linear(F, D)
            self.head = nn.Linear(D, V)

        def forward(self, idx):
            x = self.tok(idx) + self.pos.weight
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
            q, k, v = (t.view(B, S, H, D // H).transpose(1, 2) for t in (q, k, v))
            a = F_.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(B, S, D))
            x = x + self.fc2(F_.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
            return self.head(x)

    return Block(), lambda m, batch: F_.cross_entropy(m(batch[0]).view(-1, V), batch[1])


def _ln_fwd(x, w, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + EPS)
    xh = xc * rstd
    return xh * w + b, (xh, rstd)


def _ln_bwd(g, cache, w):
    xh, rstd = cache
    gxh = g * w
    dx = rstd * (gxh - gxh.mean(-1, keepdims=True) - xh * (gxh * xh).mean(-1, keepdims=True))
    red = tuple(range(g.ndim - 1))
    return dx, (g * xh).sum(red), g.sum(red)


_C = np.float32(math.sqrt(2.0 / math.pi))


def tf_floor_fwd(params: list[np.ndarray], batch: tuple) -> tuple:
    te, pe, l1w, l1b, wqkv, bqkv, wo, bo, l2w, l2b, w1, b1, w2, b2, wh, bh = params
    idx, y = batch
    x = te[idx] + pe
    h1, c1 = _ln_fwd(x, l1w, l1b)
    qkv = h1 @ wqkv.T + bqkv
    q, k, v = (t.reshape(B, S, H, D // H).transpose(0, 2, 1, 3) for t in np.split(qkv, 3, -1))
    s = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / math.sqrt(D // H))
    s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    s = np.exp(s - s.max(-1, keepdims=True))
    att = s / s.sum(-1, keepdims=True)
    o = (att @ v).transpose(0, 2, 1, 3).reshape(B, S, D)
    x2 = x + o @ wo.T + bo
    h2, c2 = _ln_fwd(x2, l2w, l2b)
    u = h2 @ w1.T + b1
    t = np.tanh(_C * (u + 0.044715 * u ** 3))
    gl = 0.5 * u * (1 + t)
    x3 = x2 + gl @ w2.T + b2
    z = x3.reshape(-1, D) @ wh.T + bh
    loss, p = _ce_fwd(z, y)
    return loss, params, idx, y, c1, h1, q, k, v, att, o, c2, h2, u, t, gl, x3, p


def tf_floor_bwd(state: tuple) -> list[np.ndarray]:
    _, params, idx, y, c1, h1, q, k, v, att, o, c2, h2, u, t, gl, x3, p = state
    te, pe, l1w, l1b, wqkv, bqkv, wo, bo, l2w, l2b, w1, b1, w2, b2, wh, bh = params
    dz = _ce_bwd(p, y)
    gwh, gbh = dz.T @ x3.reshape(-1, D), dz.sum(0)
    dx3 = (dz @ wh).reshape(B, S, D)
    g2 = dx3.reshape(-1, D)
    gw2, gb2 = g2.T @ gl.reshape(-1, F), g2.sum(0)
    dgl = dx3 @ w2
    du = dgl * (0.5 * (1 + t) + 0.5 * u * (1 - t * t) * _C * (1 + 3 * 0.044715 * u * u))
    gw1, gb1 = du.reshape(-1, F).T @ h2.reshape(-1, D), du.reshape(-1, F).sum(0)
    dh2 = du @ w1
    dx2, gl2w, gl2b = _ln_bwd(dh2, c2, l2w)
    dx2 += dx3
    gwo, gbo = dx2.reshape(-1, D).T @ o.reshape(-1, D), dx2.reshape(-1, D).sum(0)
    do = (dx2 @ wo).reshape(B, S, H, D // H).transpose(0, 2, 1, 3)
    datt = do @ v.transpose(0, 1, 3, 2)
    dv = att.transpose(0, 1, 3, 2) @ do
    ds = att * (datt - (datt * att).sum(-1, keepdims=True)) * np.float32(1.0 / math.sqrt(D // H))
    dq = ds @ k
    dk = ds.transpose(0, 1, 3, 2) @ q
    dqkv = np.concatenate([t_.transpose(0, 2, 1, 3).reshape(B, S, D) for t_ in (dq, dk, dv)], -1)
    gwqkv, gbqkv = dqkv.reshape(-1, 3 * D).T @ h1.reshape(-1, D), dqkv.reshape(-1, 3 * D).sum(0)
    dh1 = dqkv @ wqkv
    dx, gl1w, gl1b = _ln_bwd(dh1, c1, l1w)
    dx += dx2
    gte = np.zeros_like(te)
    np.add.at(gte, idx.reshape(-1), dx.reshape(-1, D))
    gpe = dx.sum(0)
    grads = [gte, gpe, gl1w, gl1b, gwqkv, gbqkv, gwo, gbo, gl2w, gl2b, gw1, gb1, gw2, gb2, gwh, gbh]
    _sgd(params, grads)
    return grads
