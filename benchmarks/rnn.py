"""LSTM language-model training step: ndgrad vs PyTorch eager vs a NumPy floor, interleaved, 1 thread.

PTB-like config: vocab 10000, embedding 200, 2-layer LSTM of 200, seq 35, batch 20, decoder
tied to the embedding; one step is forward, cross-entropy, backward, SGD. Prints the median of
each and the ratio against the 1.5x target.

    .venv/bin/python benchmarks/rnn.py [--reps 15] [--vocab 10000]
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # one BLAS thread, as torch.set_num_threads(1)

import argparse
import statistics
import time

import numpy as np

import ndgrad

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

TARGET = 1.5


def build(tm, vocab, emb, hidden, layers):
    """The model as a PyTorch program: works with ``torch`` and with ``ndgrad``."""
    nn = tm.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, emb)
            self.rnn = nn.LSTM(emb, hidden, layers)
            self.decoder = nn.Linear(hidden, vocab)
            self.decoder.weight = self.encoder.weight

        def forward(self, x, hx=None):
            out, hx = self.rnn(self.encoder(x), hx)
            return self.decoder(out).view(-1, vocab), hx

    return LM()


def make_step(tm, model, lr=1.0):
    opt = tm.optim.SGD(model.parameters(), lr=lr)
    F = tm.nn.functional

    def step(x, y):
        opt.zero_grad()
        logits, _ = model(x)
        loss = F.cross_entropy(logits, y.view(-1))
        loss.backward()
        opt.step()
        return loss

    return step


def _sig(x):
    return np.tanh(x * 0.5) * 0.5 + 0.5


def numpy_step(params, x, y, lr=1.0):
    """The same step by hand on arrays (the floor): ``params`` maps PyTorch's names to arrays."""
    emb = params["encoder.weight"]
    t_len, b = x.shape
    inp = emb[x]  # (T, B, E)
    caches = []
    for layer in range(2):
        w_ih, w_hh = params[f"rnn.weight_ih_l{layer}"], params[f"rnn.weight_hh_l{layer}"]
        bias = params[f"rnn.bias_ih_l{layer}"] + params[f"rnn.bias_hh_l{layer}"]
        hid = w_hh.shape[1]
        gi = (inp.reshape(t_len * b, -1) @ w_ih.T + bias).reshape(t_len, b, -1)
        h, c = np.zeros((b, hid), inp.dtype), np.zeros((b, hid), inp.dtype)
        hs, cs, acts = [h], [c], []
        for t in range(t_len):
            a = gi[t] + h @ w_hh.T
            i, f, o = _sig(a[:, :hid]), _sig(a[:, hid:2 * hid]), _sig(a[:, 3 * hid:])
            g = np.tanh(a[:, 2 * hid:3 * hid])
            c = f * c + i * g
            h = o * np.tanh(c)
            hs.append(h)
            cs.append(c)
            acts.append((i, f, g, o))
        caches.append((inp, hs, cs, acts))
        inp = np.stack(hs[1:])
    out = inp.reshape(t_len * b, -1)
    logits = out @ emb.T + params["decoder.bias"]
    logits -= logits.max(1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(1, keepdims=True)
    yy = y.reshape(-1)
    loss = -np.log(p[np.arange(yy.size), yy]).mean()
    p[np.arange(yy.size), yy] -= 1
    p /= yy.size
    grads = {"decoder.bias": p.sum(0), "encoder.weight": p.T @ out}
    dinp = (p @ emb).reshape(t_len, b, -1)
    for layer in (1, 0):
        inp_l, hs, cs, acts = caches[layer]
        w_ih, w_hh = params[f"rnn.weight_ih_l{layer}"], params[f"rnn.weight_hh_l{layer}"]
        dh, dc = np.zeros_like(hs[0]), np.zeros_like(cs[0])
        dgates = np.empty((t_len, b, w_hh.shape[0]), dinp.dtype)
        for t in range(t_len - 1, -1, -1):
            i, f, g, o = acts[t]
            dh = dh + dinp[t]
            tc = np.tanh(cs[t + 1])
            dc = dc + dh * o * (1 - tc * tc)
            dgates[t] = np.concatenate([dc * g * i * (1 - i), dc * cs[t] * f * (1 - f), dc * i * (1 - g * g),
                                        dh * tc * o * (1 - o)], 1)
            dc = dc * f
            dh = dgates[t] @ w_hh
        dg2 = dgates.reshape(t_len * b, -1)
        grads[f"rnn.weight_hh_l{layer}"] = dg2.T @ np.stack(hs[:-1]).reshape(t_len * b, -1)
        grads[f"rnn.weight_ih_l{layer}"] = dg2.T @ inp_l.reshape(t_len * b, -1)
        grads[f"rnn.bias_ih_l{layer}"] = grads[f"rnn.bias_hh_l{layer}"] = dg2.sum(0)
        dinp = (dg2 @ w_ih).reshape(t_len, b, -1)
    np.add.at(grads["encoder.weight"], x.reshape(-1), dinp.reshape(t_len * b, -1))
    for k, gr in grads.items():
        params[k] -= lr * gr
    return loss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--seq", type=int, default=35)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--hidden", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.integers(0, args.vocab, (args.seq, args.batch))
    y = rng.integers(0, args.vocab, (args.seq, args.batch))
    steps = {}
    nd_model = build(ndgrad, args.vocab, args.hidden, args.hidden, 2)
    steps["ndgrad"] = (make_step(ndgrad, nd_model), ndgrad.tensor(x), ndgrad.tensor(y))
    if torch is not None:
        torch.set_num_threads(1)
        t_model = build(torch, args.vocab, args.hidden, args.hidden, 2)
        steps["torch"] = (make_step(torch, t_model), torch.tensor(x), torch.tensor(y))
    state = {k: v.detach().numpy().copy() for k, v in nd_model.state_dict().items()}
    del state["decoder.weight"]  # tied: the floor reads encoder.weight
    steps["numpy"] = (lambda xs, ys: numpy_step(state, xs, ys), x, y)
    times = {k: [] for k in steps}
    for rep in range(args.reps + 2):
        for name, (fn, xs, ys) in steps.items():
            t0 = time.perf_counter()
            fn(xs, ys)
            dt = time.perf_counter() - t0
            if rep >= 2:  # warm-up
                times[name].append(dt)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"LSTM LM step (vocab {args.vocab}, emb/hidden {args.hidden}, 2 layers, seq {args.seq}, "
          f"batch {args.batch}, tied), median of {args.reps}, 1 thread")
    for k, v in med.items():
        print(f"  {k:8s} {v:8.2f} ms")
    print(f"  ndgrad/numpy floor = {med['ndgrad'] / med['numpy']:.2f}x")
    if "torch" in med:
        ratio = med["ndgrad"] / med["torch"]
        verdict = "within" if ratio <= TARGET else "OVER"
        print(f"  ratio ndgrad/torch = {ratio:.2f}x ({verdict} the {TARGET}x target)")


if __name__ == "__main__":
    main()
