"""Forward-mode AD on the chain benchmark (``run.py``'s chain of mul, add, tanh, add, then sum):
the tangent of the output along a random direction, against the plain forward.

    python benchmarks/forward_ad.py [--ops 2000] [--repeat 21] [--no-torch]

For each chain size (1 and 16 elements, as ``run.py``): µs per op of the plain forward without a
graph (no input requires grad), of the forward that records the graph (``run.py``'s forward),
and of the forward under a dual level (``make_dual``, the chain, ``unpack_dual``); PyTorch's
forward AD beside it when installed. Each tangent is first checked against the NumPy floor's
gradient (``<grad, v>``). Repetitions are interleaved and the median reported; the target,
forward AD <= 3x the plain forward, is checked against both forwards.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402  (the chain workload and the repo's ndgrad on sys.path)

import ndgrad  # noqa: E402

TARGET = 3.0


def cases(lib, size: int, cycles: int) -> tuple[dict, float]:
    """Timed callables for one library, and the expected tangent of the chain's sum."""
    (x,), consts = run._chain_data(size)(np.random.default_rng(0))
    v = np.random.default_rng(1).uniform(-1.0, 1.0, size).astype(run.DTYPE)
    model = run._chain_model(cycles)
    floor_fwd, floor_bwd = run._chain_floor(cycles)
    want = float((floor_bwd(floor_fwd([x], consts))[0].astype(np.float64) * v).sum())
    cs = run._convert(lib, consts)
    xt, vt = lib.tensor(x), lib.tensor(v)
    xg = lib.tensor(x, requires_grad=True)
    fwad = lib.autograd.forward_ad

    def jvp():
        with fwad.dual_level():
            out = model([fwad.make_dual(xt, vt)], cs)
            return fwad.unpack_dual(out).tangent

    return {"plain": lambda: model([xt], cs), "graph": lambda: model([xg], cs), "jvp": jvp}, want


def timed(fn) -> float:
    gc.collect()  # each case starts from an empty young generation; the collector stays on
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(size: int, n_ops: int, repeat: int, libs: dict) -> dict:
    cycles = max(1, n_ops // 4)
    fns = {}
    for name, lib in libs.items():
        cs, want = cases(lib, size, cycles)
        got = float(cs["jvp"]())
        if not np.isclose(got, want, rtol=run.RTOL, atol=run.ATOL):
            raise SystemExit(f"{name}: forward-AD tangent {got} != floor {want}")
        for k, fn in cs.items():
            fn()  # warm up
            fns[(name, k)] = fn
    times = {k: [] for k in fns}
    keys = list(fns)
    for rep in range(repeat):
        for i in range(len(keys)):  # round-robin, rotating who goes first
            k = keys[(rep + i) % len(keys)]
            times[k].append(timed(fns[k]))
    ops = 4 * cycles + 1
    return {k: statistics.median(ts) * 1e6 / ops for k, ts in times.items()}


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    args = ap.parse_args(argv)
    libs = {"ndgrad": ndgrad}
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            torch.set_num_threads(1)
            libs["PyTorch"] = torch
    cols = [(n, k) for n in libs for k in ("plain", "graph", "jvp")]
    head = [f"{n} {k}" for n, k in cols] + ["ndgrad jvp/plain", "ndgrad jvp/graph"]
    lines = [f"chain of {4 * max(1, args.ops // 4)} ops (mul, add, tanh, add) + sum, float32, "
             f"µs per op, median of {args.repeat} interleaved repetitions\n",
             "| elem | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    verdicts = []
    for size in (1, 16):
        us = measure(size, args.ops, args.repeat, libs)
        r, rg = us[("ndgrad", "jvp")] / us[("ndgrad", "plain")], us[("ndgrad", "jvp")] / us[("ndgrad", "graph")]
        lines.append(f"| {size} | " + " | ".join(f"{us[c]:.2f}" for c in cols) + f" | {r:.2f}x | {rg:.2f}x |")
        verdicts.append(
            f"- {size} elem: forward AD = {r:.2f}x the forward without a graph "
            f"({'met' if r <= TARGET else 'NOT met'}), {rg:.2f}x the forward that records it, as "
            f"run.py times the chain ({'met' if rg <= TARGET else 'NOT met'}); target <= {TARGET}x")
    text = "\n".join(lines + [""] + verdicts)
    print(text)
    return text


if __name__ == "__main__":
    main()
