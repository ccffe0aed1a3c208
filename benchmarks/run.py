"""Benchmark runner: ndgrad vs PyTorch eager (CPU) vs a hand-written NumPy floor, in one run.

Repetitions are interleaved round-robin across contenders and the median of each is reported, so
machine noise hits all alike. Each workload is checked first: every contender must compute the
same loss and gradients as the floor. Usage: python benchmarks/run.py [--repeat N] [--quick].
Prints a markdown table and writes it to benchmarks/results.md (see benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import operator
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the repo's ndgrad, whether or not a copy is installed

import ndgrad  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import steps  # noqa: E402  (training-step workloads, beside this file)

DTYPE = np.float32  # both frameworks' default dtype
RTOL, ATOL = 5e-3, 1e-5  # float32 through ~2000 ops (tanh differs by ulps between libraries;
# PyTorch builds with vectorised tanh drift up to ~1e-3 from NumPy on the 16-element chain)


# --- contenders ---


@dataclass
class Contender:
    key: str  # "ndgrad", "torch", "floor"
    label: str  # column header
    lib: Any  # the framework module (None for the floor)


def contenders(use_torch: bool = True) -> list[Contender]:
    found = [Contender("ndgrad", "ndgrad", ndgrad)]
    if use_torch:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            found.append(Contender("torch", "PyTorch", torch))
    found.append(Contender("floor", "NumPy floor", None))
    return found


# --- cases: one contender's instance of one workload ---


class Case:
    """reset() before each run (untimed); forward() -> out and backward(out) are timed."""

    def reset(self) -> None: ...

    def forward(self) -> Any: ...

    def backward(self, out: Any) -> None: ...

    def result(self, out: Any) -> tuple[float, list[np.ndarray]]:
        """Loss value and leaf gradients as arrays after forward and backward (for the check)."""
        ...


def _convert(lib: Any, data: Any) -> Any:
    """Arrays (in lists/tuples) to constant tensors of `lib`, structure kept."""
    if isinstance(data, np.ndarray):
        return lib.tensor(data)
    if isinstance(data, (list, tuple)):
        return type(data)(_convert(lib, d) for d in data)
    return data


class FrameworkCase(Case):
    """ndgrad and PyTorch run the very same model code (ndgrad speaks PyTorch)."""

    def __init__(self, lib: Any, model: Callable, leaves: list[np.ndarray], consts: Any):
        self.model = model
        self.leaves = [lib.tensor(a, requires_grad=True) for a in leaves]
        self.consts = _convert(lib, consts)

    def reset(self) -> None:
        for t in self.leaves:
            t.grad = None

    def forward(self) -> Any:
        return self.model(self.leaves, self.consts)

    def backward(self, out: Any) -> None:
        out.backward()

    def result(self, out: Any) -> tuple[float, list[np.ndarray]]:
        return float(out.item()), [np.array(t.grad.detach().numpy()) for t in self.leaves]


class FloorCase(Case):
    """Plain NumPy forward that keeps what its hand-written backward needs; no framework."""

    def __init__(self, fwd: Callable, bwd: Callable, leaves: list[np.ndarray], consts: Any):
        self.fwd, self.bwd, self.leaves, self.consts = fwd, bwd, leaves, consts
        self.grads: list[np.ndarray] = []

    def reset(self) -> None:
        self.grads = []

    def forward(self) -> Any:
        return self.fwd(self.leaves, self.consts)

    def backward(self, out: Any) -> None:
        self.grads = self.bwd(out)

    def result(self, out: Any) -> tuple[float, list[np.ndarray]]:
        return float(out[0]), self.grads


# --- workloads ---


@dataclass
class Workload:
    """One benchmark. `ops`: ops recorded by forward, i.e. backward nodes (AccumulateGrad not
    counted); per-op/per-node figures divide by it. `data(rng)` gives (leaves, consts) as arrays;
    `model(leaves, consts)` is the framework code returning a scalar; `floor_fwd(leaves, consts)`
    returns a state whose first item is the scalar loss and `floor_bwd(state)` the leaf grads.
    A later workload (MLP, CNN, ...) that needs more may override `case`."""

    name: str
    ops: int
    data: Callable[[np.random.Generator], tuple[list[np.ndarray], Any]]
    model: Callable
    floor_fwd: Callable
    floor_bwd: Callable
    target: tuple[str, float] = ("torch", 0.8)  # ndgrad fwd+bwd <= this times that contender
    step: bool = False  # a training step: `model(lib)` gives (module, loss_fn); reported per step

    def case(self, who: Contender, seed: int = 0) -> Case:
        leaves, consts = self.data(np.random.default_rng(seed))
        if who.lib is None:
            return FloorCase(self.floor_fwd, self.floor_bwd, leaves, consts)
        if self.step:
            return StepCase(who.lib, self.model, leaves, consts)
        return FrameworkCase(who.lib, self.model, leaves, consts)


class StepCase(Case):
    """One SGD step of an nn model: zero_grad + forward + loss timed as forward; backward +
    optimizer step timed as backward."""

    def __init__(self, lib: Any, build: Callable, params: list[np.ndarray], batch: tuple):
        self.module, self.loss_fn = build(lib)
        steps._load(lib, self.module, params)
        self.batch = tuple(lib.from_numpy(np.ascontiguousarray(a)) for a in batch)
        self.opt = lib.optim.SGD(self.module.parameters(), lr=steps.LR)

    def forward(self) -> Any:
        self.opt.zero_grad(set_to_none=True)
        return self.loss_fn(self.module, self.batch)

    def backward(self, out: Any) -> None:
        out.backward()
        self.opt.step()

    def result(self, out: Any) -> tuple[float, list[np.ndarray]]:
        return float(out.item()), [np.array(p.grad.detach().numpy()) for p in self.module.parameters()]


def train_steps() -> list[Workload]:
    """MLP (target: 1.1x the floor), small CNN and transformer block (1.3x PyTorch)."""
    return [
        Workload("MLP step 128x784-1024-1024-10", 1, steps.mlp_data, steps.mlp_model,
                 steps.mlp_floor_fwd, steps.mlp_floor_bwd, ("floor", 1.1), True),
        Workload("CNN step 32x1x28x28 conv16-pool-conv32-pool-fc", 1, steps.cnn_data,
                 steps.cnn_model, steps.cnn_floor_fwd, steps.cnn_floor_bwd, ("torch", 1.3), True),
        Workload("transformer block step 8x64, d128, 4 heads", 1, steps.tf_data, steps.tf_model,
                 steps.tf_floor_fwd, steps.tf_floor_bwd, ("torch", 1.3), True),
    ]


# (a) chain: x -> x*c -> +d -> tanh -> +e -> ... -> sum. Constants make x* = 0.5 a stable fixed
# point where each cycle's derivative is s in [0.98, 0.99]: the gradient (~1e-3) neither underflows
# to denormals (which would time the FPU's slow path, not autograd) nor amplifies rounding.


def _chain_data(size: int) -> Callable:
    def data(rng: np.random.Generator) -> tuple[list[np.ndarray], Any]:
        c = rng.uniform(1.2, 1.3, size)
        s = rng.uniform(0.98, 0.99, size)
        t = np.sqrt(1.0 - s / c)  # c * (1 - t**2) == s at the fixed point
        d = np.arctanh(t) - 0.5 * c
        e = 0.5 - t
        x = 0.5 + rng.uniform(0.0, 0.2, size)  # above x*: inside its basin
        return [x.astype(DTYPE)], tuple(a.astype(DTYPE) for a in (c, d, e))

    return data


def _chain_model(cycles: int) -> Callable:
    def model(leaves: list, consts: tuple) -> Any:
        (y,), (c, d, e) = leaves, consts
        for _ in range(cycles):
            y = (y * c + d).tanh() + e
        return y.sum()

    return model


def _chain_floor(cycles: int) -> tuple[Callable, Callable]:
    def fwd(leaves: list[np.ndarray], consts: tuple) -> tuple:
        (y,), (c, d, e) = leaves, consts
        ts = []
        for _ in range(cycles):
            t = np.tanh(y * c + d)
            ts.append(t)
            y = t + e
        return y.sum(), y.shape, c, ts

    def bwd(state: tuple) -> list[np.ndarray]:
        _, shape, c, ts = state
        g = np.ones(shape, DTYPE)  # sum; the adds pass the gradient through unchanged
        for t in reversed(ts):
            g = g * (1.0 - t * t) * c  # tanh, then mul by c
        return [g]

    return fwd, bwd


def chain(n_ops: int, size: int) -> Workload:
    cycles = max(1, n_ops // 4)
    fwd, bwd = _chain_floor(cycles)
    return Workload(
        f"chain {4 * cycles} ops (mul,add,tanh,add), {size} elem",
        4 * cycles + 1,
        _chain_data(size),
        _chain_model(cycles),
        fwd,
        bwd,
    )


# (b) fan-out: one 16-element leaf into `branches` branches of (mul, tanh, add), summed by a
# chain of adds, then .sum(): the leaf's input buffer accumulates one gradient per branch.


def _fanout_data(branches: int, size: int) -> Callable:
    def data(rng: np.random.Generator) -> tuple[list[np.ndarray], Any]:
        x = rng.uniform(-1.0, 1.0, size).astype(DTYPE)
        cs = [rng.uniform(0.5, 1.5, size).astype(DTYPE) for _ in range(branches)]
        ds = [rng.uniform(-0.1, 0.1, size).astype(DTYPE) for _ in range(branches)]
        return [x], (cs, ds)

    return data


def _fanout_model(leaves: list, consts: tuple) -> Any:
    (x,), (cs, ds) = leaves, consts
    return reduce(operator.add, [(x * c).tanh() + d for c, d in zip(cs, ds, strict=True)]).sum()


def _fanout_floor_fwd(leaves: list[np.ndarray], consts: tuple) -> tuple:
    (x,), (cs, ds) = leaves, consts
    ts = [np.tanh(x * c) for c in cs]
    total = reduce(operator.add, [t + d for t, d in zip(ts, ds, strict=True)])
    return total.sum(), x.shape, cs, ts


def _fanout_floor_bwd(state: tuple) -> list[np.ndarray]:
    _, shape, cs, ts = state
    g = np.ones(shape, DTYPE)  # sum and every add pass it through unchanged
    gx = np.zeros(shape, DTYPE)
    for t, c in zip(ts, cs, strict=True):
        gx += g * (1.0 - t * t) * c
    return [gx]


def fanout(branches: int, size: int) -> Workload:
    return Workload(
        f"fan-out {branches} x (mul,tanh,add) + sum, {size} elem",
        3 * branches + (branches - 1) + 1,
        _fanout_data(branches, size),
        _fanout_model,
        _fanout_floor_fwd,
        _fanout_floor_bwd,
    )


def workloads(scale: float = 1.0) -> list[Workload]:
    n = max(4, round(2000 * scale))
    return [chain(n, 1), chain(n, 16), fanout(max(2, round(500 * scale)), 16)] + train_steps()


# --- measuring ---


def check(w: Workload, cases: dict[str, Case]) -> None:
    """Every contender computes the floor's loss and gradients, or the run stops here."""
    results = {}
    for key, case in cases.items():
        case.reset()
        out = case.forward()
        case.backward(out)
        results[key] = case.result(out)
    loss, grads = results["floor"]
    if not w.step and not all(np.isfinite(g).all() and np.abs(g).min() > 1e-30 for g in grads):
        raise SystemExit(f"{w.name}: degenerate reference gradient, fix the workload's data")
    for key, (got_loss, got_grads) in results.items():
        ok = np.allclose(got_loss, loss, rtol=RTOL, atol=ATOL) and all(
            g.shape == r.shape and np.allclose(g, r, rtol=RTOL, atol=ATOL * np.abs(r).max())
            for g, r in zip(got_grads, grads, strict=True)
        )
        if not ok:
            raise SystemExit(f"{w.name}: {key} disagrees with the NumPy floor (loss or gradient)")


COLLECT = True  # --no-gc: time with the cyclic garbage collector off (it is on in a user's loop)


def run_once(case: Case) -> tuple[float, float]:
    """Seconds for forward and for backward (freeing the graph included: a training loop pays it).

    The collector runs as in a user's program; each contender starts from an empty young
    generation, so none pays for another's garbage."""
    case.reset()
    gc.collect()
    if not COLLECT:
        gc.disable()
    try:
        t0 = time.perf_counter()
        out = case.forward()
        t1 = time.perf_counter()
        case.backward(out)
        del out
        t2 = time.perf_counter()
    finally:
        gc.enable()
    return t1 - t0, t2 - t1


@dataclass
class Stat:
    fwd: float  # median seconds
    bwd: float
    total: float  # median of per-repetition fwd + bwd


def measure(w: Workload, who: list[Contender], repeat: int) -> dict[str, Stat]:
    cases = {c.key: w.case(c) for c in who}
    check(w, cases)
    gc.collect()
    gc.freeze()  # what exists now is never garbage: keeps each later collect short (torch: 80 ms)
    for case in cases.values():  # warm-up
        run_once(case)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    keys = list(cases)
    for rep in range(repeat):
        for i in range(len(keys)):  # round-robin, rotating who goes first
            key = keys[(rep + i) % len(keys)]
            times[key].append(run_once(cases[key]))
    return {
        k: Stat(
            statistics.median(f for f, _ in ts),
            statistics.median(b for _, b in ts),
            statistics.median(f + b for f, b in ts),
        )
        for k, ts in times.items()
    }


# --- reporting ---


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a"


def table(results: list[tuple[Workload, dict[str, Stat]]], who: list[Contender]) -> str:
    has_torch = any(c.key == "torch" for c in who)
    head = ["workload", "ops", "metric"] + [c.label for c in who]
    head += ["ndgrad/PyTorch"] if has_torch else []
    head += ["ndgrad/floor"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w, stats in results:
        rows = [("fwd us/op", "fwd"), ("bwd us/node", "bwd"), ("fwd+bwd us/node", "total")]
        scale = 1e6 / w.ops
        if w.step:
            rows = [("fwd+loss ms", "fwd"), ("bwd+update ms", "bwd"), ("step ms", "total")]
            scale = 1e3
        for i, (metric, field) in enumerate(rows):
            us = {c.key: getattr(stats[c.key], field) * scale for c in who}
            cells = [w.name if i == 0 else "", str(w.ops) if i == 0 else "", metric]
            cells += [f"{us[c.key]:.2f}" for c in who]
            if has_torch:
                cells.append(_ratio(us["ndgrad"], us["torch"]))
            cells.append(_ratio(us["ndgrad"], us["floor"]))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdicts(results: list[tuple[Workload, dict[str, Stat]]]) -> list[str]:
    out = []
    for w, stats in results:
        against, limit = w.target
        label = {"torch": "PyTorch", "floor": "the NumPy floor"}[against]
        if against not in stats:
            out.append(f"- {w.name}: {label} not measured, target not checked")
            continue
        r = stats["ndgrad"].total / stats[against].total
        verdict = "met" if r <= limit else "NOT met"
        out.append(f"- {w.name}: ndgrad = {r:.2f}x {label}, target <= {limit}x {verdict}")
    return out


def header(who: list[Contender], repeat: int, scale: float) -> str:
    libs = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    libs += [f"PyTorch {c.lib.__version__}" for c in who if c.key == "torch"]
    when = datetime.datetime.now().isoformat(timespec="seconds")
    return (
        f"# ndgrad benchmarks\n\n{when}; {platform.machine()} {platform.system()}; "
        f"{', '.join(libs)}; dtype {np.dtype(DTYPE).name}; garbage collector "
        f"{'on' if COLLECT else 'off'}; median of {repeat} interleaved "
        f"repetitions; size scale {scale:g}. Times in microseconds; backward includes freeing "
        "the graph."
    )


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=None, help="repetitions per contender (21)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 3 repetitions, sizes / 10")
    ap.add_argument("--scale", type=float, default=None, help="size scale (1.0; 0.1 if --quick)")
    ap.add_argument("--only", default="", help="run workloads whose name contains this")
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    ap.add_argument("--no-gc", action="store_true", help="time with the garbage collector off")
    ap.add_argument("--out", default=str(Path(__file__).with_name("results.md")))
    ap.add_argument("--threads", default="1,2",
                    help="thread counts for BLAS and PyTorch, one child process each (1,2)")
    args = ap.parse_args(argv)
    counts = [int(n) for n in args.threads.split(",")]
    if len(counts) > 1 or os.environ.get("NDGRAD_BENCH_THREADS") != str(counts[0]):
        return _per_thread_count(counts, argv if argv is not None else sys.argv[1:], args.out)
    global COLLECT
    COLLECT = not args.no_gc
    repeat = args.repeat or (3 if args.quick else 21)
    scale = args.scale or (0.1 if args.quick else 1.0)

    who = contenders(not args.no_torch)
    for c in who:
        if c.key == "torch":
            c.lib.set_num_threads(counts[0])
    chosen = [w for w in workloads(scale) if args.only in w.name]
    results = []
    for w in chosen:
        print(f"running {w.name} ...", file=sys.stderr, flush=True)
        results.append((w, measure(w, who, repeat)))
    text = "\n\n".join([header(who, repeat, scale) + f" {counts[0]} thread(s).",
                         table(results, who), "\n".join(verdicts(results))])
    gc.unfreeze()
    print(text)
    Path(args.out).write_text(text + "\n")
    return text


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _per_thread_count(counts: list[int], argv: list[str], out: str) -> str:
    """Rerun this script once per thread count (BLAS reads its thread count at import, so each
    count needs a fresh process), then join the reports into one file."""
    rest = [a for i, a in enumerate(argv) if a != "--threads" and (i == 0 or argv[i - 1] != "--threads")
            and not a.startswith("--threads=")]
    parts = []
    for n in counts:
        env = dict(os.environ, NDGRAD_BENCH_THREADS=str(n), **{v: str(n) for v in _THREAD_VARS})
        part = Path(out).with_suffix(f".{n}threads.md")
        subprocess.run([sys.executable, __file__, *rest, "--threads", str(n), "--out", str(part)],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        parts.append(part.read_text())
        part.unlink()
    text = "\n\n".join(parts)
    Path(out).write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
