"""Profiler overhead on the chain of tiny ops (mul, add, tanh, add; 16 elements), forward and
backward: without the profiler ever used and after a profile (hooks off again; both in fresh
processes), with a do-nothing dispatch mode (the cost of leaving the fast path), and profiling.

    python benchmarks/profiler.py [--ops 2000] [--repeat 15]

Prints a markdown table: best-of-N µs per fwd+bwd step, µs per op, µs/op added over the baseline,
and the inactive/baseline ratio (target <= 1.02; active target <= 3 µs added per op).
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ndgrad  # noqa: E402
from ndgrad._ops import registry  # noqa: E402


def make_step(n_ops: int):
    rng = np.random.default_rng(0)
    cycles = n_ops // 4
    cs = [ndgrad.tensor(rng.uniform(0.5, 1.0, 16).astype(np.float32)) for _ in range(cycles)]
    ds = [ndgrad.tensor(rng.uniform(-0.1, 0.1, 16).astype(np.float32)) for _ in range(cycles)]
    es = [ndgrad.tensor(rng.uniform(-0.1, 0.1, 16).astype(np.float32)) for _ in range(cycles)]
    x = ndgrad.tensor(rng.uniform(-1, 1, 16).astype(np.float32), requires_grad=True)

    def step():
        h = x
        for c, d, e in zip(cs, ds, es):
            h = ((h * c + d).tanh()) + e
        h.sum().backward()
        x.grad = None

    return step, 4 * cycles + 1  # + the final sum


class _NullMode:
    """Hands every op straight on: what any mode costs before it records anything."""

    def dispatch(self, rec, args, run):
        return run(rec, args)


def timed(step, repeat: int, around) -> list[float]:
    out = []
    for _ in range(repeat):
        gc.collect()  # garbage of an earlier case must not be collected inside this one's timing
        with around():
            t0 = time.perf_counter()
            step()
            out.append(time.perf_counter() - t0)
    return out


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


class _Null:
    def __enter__(self):
        registry.push_mode(_NullMode())

    def __exit__(self, *exc):
        registry.pop_mode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--child", choices=["baseline", "inactive"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    step, n = make_step(args.ops)
    for _ in range(3):
        step()  # warm up caches and lazily built paths
    if args.child:
        if args.child == "inactive":
            with ndgrad.profiler.profile():  # hooks on, then off again
                step()
        print(" ".join(str(v) for v in timed(step, args.repeat, _Nothing)))
        return
    names = ["baseline, fresh process", "inactive (after a profile), fresh process",
             "baseline, in process", "null dispatch mode", "active profile()"]
    cases = {k: [] for k in names}
    # Never-used vs used-then-off needs fresh processes; they alternate, so that drift on a
    # shared machine hits both alike. The in-process cases are interleaved for the same reason.
    for _ in range(5):
        for k, child in ((names[0], "baseline"), (names[1], "inactive")):
            cases[k] += _in_child(child, args.ops, max(1, args.repeat // 3))
    for _ in range(args.repeat):
        cases[names[2]] += timed(step, 1, _Nothing)
        cases[names[3]] += timed(step, 1, _Null)
        cases[names[4]] += timed(step, 1, ndgrad.profiler.profile)
    best = {k: min(v) * 1e6 for k, v in cases.items()}  # min: the least disturbed run
    print(f"chain of {n} ops (mul, add, tanh, add; 16 elem), fwd+bwd, best of {args.repeat}\n")
    print("| case | µs / step | µs / op | added µs / op | ratio |")
    print("|---|---:|---:|---:|---:|")
    for i, k in enumerate(names):
        b = best[names[0] if i < 2 else names[2]]  # each against the baseline beside it
        t = best[k]
        print(f"| {k} | {t:.0f} | {t / n:.2f} | {(t - b) / n:+.2f} | {t / b:.3f} |")
    b = best[names[2]]
    print(f"\ninactive / baseline: {best[names[1]] / best[names[0]]:.3f} (target <= 1.02); "
          f"active adds {(best[names[4]] - b) / n:.2f} µs/op (target <= 3); a mode that does "
          f"nothing but take ops off their fast path adds {(best[names[3]] - b) / n:.2f}")


def _in_child(which: str, n_ops: int, repeat: int) -> list[float]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", which, "--ops", str(n_ops),
           "--repeat", str(repeat)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [float(v) for v in out.split()]


if __name__ == "__main__":
    main()
