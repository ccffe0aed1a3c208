"""GPU rows: ndgrad on CUDA vs PyTorch CUDA eager vs a hand-written CuPy floor, in one run.

Workloads (issue 6): the chain of 2000 tiny ops (forward + backward, per-node time) and the MLP
training step (784-1024-1024-10, ReLU, cross-entropy, SGD) at batch 128 and 4096. Repetitions
are interleaved round-robin; each is timed from a device synchronize to a device synchronize;
medians are reported with ratios to PyTorch and to the floor. A second table (issue 16) times
the batch-128 MLP step under CUDA graphs: ndgrad's ``cudagraphs`` backend (forward and backward
graphs, eager loss and SGD) and the whole step captured with ``cudagraphify``, against PyTorch's
``torch.compile(mode="reduce-overhead")`` and PyTorch's whole step in one ``torch.cuda.CUDAGraph``
(each ndgrad row says whether it replays or fell back, and why). A last table times ndgrad's
chain backward on one stream through the engine's plain loop and through its stream-aware loop,
to show what the stream machinery would cost if it ran where it is not needed.

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


def _mlp_parts(lib, data, device):
    params, x, y = data
    model, loss_fn = steps.mlp_model(lib)
    steps._load(lib, model, params)
    model.to(device)
    opt = lib.optim.SGD(model.parameters(), lr=steps.LR)
    batch = (lib.tensor(x, device=device), lib.tensor(y, device=device))
    return model, loss_fn, opt, batch


def mlp_framework(lib, data, device, compiled=None):
    model, loss_fn, opt, batch = _mlp_parts(lib, data, device)
    run = compiled(model) if compiled is not None else model

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(run, batch).backward()
        opt.step()

    return step


# --- the MLP step under CUDA graphs ---
def ndgrad_whole_step_graph(data):
    """The whole step (zero_grad, forward, loss, backward, SGD) as one graph via cudagraphify;
    returns the step and its runner (whose ``state`` says whether it replays)."""
    from ndgrad.compiler.cudagraphs import cudagraphify

    model, loss_fn, opt, batch = _mlp_parts(ndgrad, data, "cuda")

    def whole(args):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, batch)
        loss.backward()
        opt.step()
        return loss

    whole._boxed_call = True
    runner = cudagraphify(whole, [], mutated_inputs=(), static_input_idxs=())
    return (lambda: runner([])), runner


def torch_whole_step_graph(torch, data):
    """PyTorch's recipe for capturing a whole training step: warm up on a side stream, grads
    set to None so the capture allocates them in the graph's pool, replay."""
    model, loss_fn, opt, batch = _mlp_parts(torch, data, "cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model, batch).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss_fn(model, batch).backward()
        opt.step()
    return graph.replay


def graph_rows(torch, repeat: int) -> list:
    data = mlp_data(128)
    compiled = {}

    def with_backend(m):
        compiled["m"] = ndgrad.compile(m, backend="cudagraphs")
        return compiled["m"]

    fns = {"ndgrad eager": mlp_framework(ndgrad, data, "cuda"),
           "ndgrad backend=cudagraphs": mlp_framework(ndgrad, data, "cuda", with_backend)}
    fns["ndgrad whole step, cudagraphify"], runner = ndgrad_whole_step_graph(data)
    if torch is not None:
        fns["PyTorch eager"] = mlp_framework(torch, data, "cuda")
        fns['PyTorch mode="reduce-overhead"'] = mlp_framework(
            torch, data, "cuda", lambda m: torch.compile(m, mode="reduce-overhead"))
        fns["PyTorch whole step, CUDAGraph"] = torch_whole_step_graph(torch, data)
    t = interleaved(fns, repeat)
    ref = t.get("PyTorch whole step, CUDAGraph")
    rows = ["| MLP step, batch 128 | time | vs PyTorch whole-step graph |", "|---|---|---|"]
    for k, v in t.items():
        rows.append(f"| {k} | {v * 1e3:.3f} ms | {f'{v / ref:.2f}x' if ref else 'n/a'} |")
    halves = [r for e in compiled["m"]._compiled.entries
              for a in getattr(getattr(e.run, "_aot", None), "cache", {}).values()
              for r in (a.fw, a.bw)]
    halves = ", ".join(f"{k} {_state(r)}"
                       for k, r in zip(("forward", "backward"), halves, strict=False))
    rows += ["", f"ndgrad backend=cudagraphs: {halves or 'no graph (see the log)'}",
             f"ndgrad whole step, cudagraphify: {_state(runner)}", ""]
    return rows


def _state(runner) -> str:
    state = getattr(runner, "state", "not a graph (skipped at compile, see the log)")
    return f"eager ({runner.skipped})" if state == "eager" else state


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
    out += graph_rows(torch, args.repeat)
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
