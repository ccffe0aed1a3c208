"""GPU rows: ndgrad on CUDA vs PyTorch CUDA eager vs a hand-written CuPy floor, in one run.

Workloads (issue 6): the chain of 2000 tiny ops (forward + backward, per-node time) and the MLP
training step (784-1024-1024-10, ReLU, cross-entropy, SGD) at batch 128 and 4096. Repetitions
are interleaved round-robin; each is timed from a device synchronize to a device synchronize;
medians are reported with ratios to PyTorch and to the floor. A last table times ndgrad's chain
backward on one stream through the engine's plain loop and through its stream-aware loop, to
show what the stream machinery would cost if it ran where it is not needed.

Without CuPy and a GPU it prints one line saying so and exits 0.
Usage: python benchmarks/gpu.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import ndgrad  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import steps  # noqa: E402

CHAIN_CYCLES = 500  # 4 ops each: 2000 ops


def _sync():
    import cupy

    cupy.cuda.Device().synchronize()


# --- the chain ---
def chain_data():
    rng = np.random.default_rng(0)
    c = rng.uniform(1.2, 1.3, 16)
    s = rng.uniform(0.98, 0.99, 16)
    t = np.sqrt(1.0 - s / c)
    d = np.arctanh(t) - 0.5 * c
    e = 0.5 - t
    x = 0.5 + rng.uniform(0.0, 0.2, 16)
    return [a.astype(np.float32) for a in (x, c, d, e)]


def chain_framework(lib, arrays, device):
    x, c, d, e = (lib.tensor(a, device=device) for a in arrays)
    x.requires_grad_(True)

    def step():
        y = x
        for _ in range(CHAIN_CYCLES):
            y = (y * c + d).tanh() + e
        y.sum().backward()
        x.grad = None

    return step


def chain_floor(arrays):
    import cupy as cp

    x, c, d, e = (cp.asarray(a) for a in arrays)

    def step():
        y, ts = x, []
        for _ in range(CHAIN_CYCLES):
            t = cp.tanh(y * c + d)
            ts.append(t)
            y = t + e
        y.sum()
        g = cp.ones_like(x)
        for t in reversed(ts):
            g = g * (1.0 - t * t) * c
        return g

    return step


# --- the MLP step ---
def mlp_data(batch):
    rng = np.random.default_rng(0)
    params, _ = steps.mlp_data(rng)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    return params, x, y


def mlp_framework(lib, data, device):
    params, x, y = data
    model, loss_fn = steps.mlp_model(lib)
    steps._load(lib, model, params)
    model.to(device)
    opt = lib.optim.SGD(model.parameters(), lr=steps.LR)
    batch = (lib.tensor(x, device=device), lib.tensor(y, device=device))

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model, batch).backward()
        opt.step()

    return step


def mlp_floor(data):
    import cupy as cp

    params, x, y = data
    ps = [cp.asarray(p) for p in params]
    x, y = cp.asarray(x), cp.asarray(y)
    rows = cp.arange(len(y))

    def step():
        w1, b1, w2, b2, w3, b3 = ps
        a1 = x @ w1.T + b1
        h1 = cp.maximum(a1, 0)
        a2 = h1 @ w2.T + b2
        h2 = cp.maximum(a2, 0)
        z = h2 @ w3.T + b3
        z = z - z.max(axis=1, keepdims=True)
        e = cp.exp(z)
        p = e / e.sum(axis=1, keepdims=True)
        dz = p.copy()
        dz[rows, y] -= 1.0
        dz /= len(y)
        da2 = (dz @ w3) * (a2 > 0)
        da1 = (da2 @ w2) * (a1 > 0)
        grads = [da1.T @ x, da1.sum(0), da2.T @ h1, da2.sum(0), dz.T @ h2, dz.sum(0)]
        for p_, g in zip(ps, grads, strict=True):
            p_ -= steps.LR * g

    return step


# --- timing ---
def interleaved(fns: dict, repeat: int) -> dict:
    for fn in fns.values():  # warm up: kernels compiled, pools filled
        for _ in range(3):
            fn()
        _sync()
    times = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            _sync()
            t0 = time.perf_counter()
            fn()
            _sync()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv=None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=21)
    args = ap.parse_args(argv)
    if not ndgrad.cuda.is_available():
        msg = "GPU rows skipped: ndgrad.cuda.is_available() is False (no CuPy or no GPU)."
        print(msg)
        return msg
    try:
        import torch

        torch = torch if torch.cuda.is_available() else None
    except ImportError:
        torch = None
    rows = []
    work = [("chain 2000 ops fwd+bwd (16 elem)", chain_data(), chain_framework, chain_floor, 2001)]
    for b in (128, 4096):
        work.append((f"MLP step, batch {b}", mlp_data(b), mlp_framework, mlp_floor, None))
    for name, data, make, floor, nodes in work:
        fns = {"ndgrad": make(ndgrad, data, "cuda"), "floor": floor(data)}
        if torch is not None:
            fns["torch"] = make(torch, data, "cuda")
        t = interleaved(fns, args.repeat)
        per = (lambda s: f"{s / nodes * 1e6:.1f} us/node") if nodes else (lambda s: f"{s * 1e3:.3f} ms")
        vs_t = f"{t['ndgrad'] / t['torch']:.2f}x" if "torch" in t else "n/a"
        rows.append(f"| {name} | {per(t['ndgrad'])} | {per(t['torch']) if 'torch' in t else 'n/a'} | "
                    f"{per(t['floor'])} | {vs_t} | {t['ndgrad'] / t['floor']:.2f}x |")
    out = ["| workload | ndgrad | PyTorch | CuPy floor | ndgrad/PyTorch | ndgrad/floor |",
           "|---|---|---|---|---|---|", *rows, ""]
    # The stream machinery on one stream: the plain loop (what runs) vs the stream-aware loop.
    from ndgrad._backend import streams

    step = chain_framework(ndgrad, chain_data(), "cuda")
    was = streams.in_use[0]

    def general():
        streams.in_use[0] = True
        try:
            step()
        finally:
            streams.in_use[0] = was

    def plain():
        streams.in_use[0] = False
        try:
            step()
        finally:
            streams.in_use[0] = was

    t = interleaved({"plain": plain, "general": general}, args.repeat)
    out += ["| chain fwd+bwd on one stream | plain loop | stream-aware loop | ratio |", "|---|---|---|---|",
            f"| 2000 ops | {t['plain'] * 1e3:.2f} ms | {t['general'] * 1e3:.2f} ms | "
            f"{t['general'] / t['plain']:.2f}x |"]
    text = "\n".join(out)
    print(text)
    return text


if __name__ == "__main__":
    main()
