"""Distributed benchmarks, in one run: all-reduce bandwidth by size (ndgrad's ``all_reduce``
against the raw MPI call and PyTorch's gloo), and a DDP training step of an MLP at 1, 2 and 4
ranks (step time, samples/s, scaling efficiency, the share of all-reduce time hidden behind
backward), with PyTorch's DDP (gloo) on the same model in the same ranks.

    .venv/bin/python benchmarks/distributed.py [--ranks 1 2 4] [--steps 30]

Each world size is one job started through ``python -m ndgrad.distributed.run``; rank 0 hands its
figures back as one JSON line. Targets (issue 18): the 2-rank DDP step <= 1.0x PyTorch DDP-gloo's,
and a 25 MB all-reduce within 1.5x the raw MPI call's time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = [4, 1024, 64 * 1024, 1024 * 1024, 4 * 1024 * 1024, 25 * 1024 * 1024]
MLP = [784, 1024, 1024, 1024, 10]  # 2.9 M parameters, 11.5 MB of float32 gradients
BATCH = 32  # per rank (weak scaling)


def _median_time(fn, reps: int, barrier) -> float:
    times = []
    for _ in range(reps):
        barrier()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def worker(steps: int, quick: bool) -> None:
    import numpy as np
    from mpi4py import MPI

    import ndgrad
    import ndgrad.distributed as dist
    try:
        import torch
        import torch.distributed as tdist
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    dist.init_process_group("gloo")
    if torch is not None:
        tdist.init_process_group("gloo")
    comm = MPI.COMM_WORLD
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {"world": world, "allreduce": [], "ddp": {}}

    if world > 1:
        for size in SIZES[::3] if quick else SIZES:
            n = max(size // 4, 1)
            raw = np.ones(n, np.float32)
            ours = ndgrad.ones(n)
            reps = 3 if quick else 200 if size <= 65536 else 20
            row = {"bytes": size}
            # interleaved: each kind once per round, medians over rounds
            kinds = {"raw": lambda a=raw: comm.Allreduce(MPI.IN_PLACE, a),
                     "ndgrad": lambda t=ours: dist.all_reduce(t)}
            if torch is not None:
                theirs = torch.ones(n)
                kinds["gloo"] = lambda t=theirs: tdist.all_reduce(t)
            samples = {k: [] for k in kinds}
            for _ in range(reps):
                for k, fn in kinds.items():
                    samples[k].append(_median_time(fn, 1, comm.Barrier))
            for k, v in samples.items():
                row[k] = statistics.median(v)
            out["allreduce"].append(row)

    rng = np.random.default_rng(rank)
    x = rng.standard_normal((BATCH, MLP[0])).astype(np.float32)
    y = rng.integers(0, MLP[-1], BATCH)

    def make(lib):
        lib.manual_seed(0)
        layers = []
        for i in range(len(MLP) - 1):
            layers += [lib.nn.Linear(MLP[i], MLP[i + 1]), lib.nn.ReLU()]
        model = lib.nn.parallel.DistributedDataParallel(lib.nn.Sequential(*layers[:-1]))
        opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        xb, yb = lib.from_numpy(x), lib.from_numpy(y)

        def step():
            opt.zero_grad()
            lib.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        return model, step

    libs = {"ndgrad": ndgrad} if torch is None else {"ndgrad": ndgrad, "torch": torch}
    runs = {name: make(lib) for name, lib in libs.items()}
    for _, step in runs.values():
        for _ in range(3):  # warm up, and let the buckets rebuild
            step()
    samples = {name: [] for name in runs}
    for _ in range(steps):
        for name, (_, step) in runs.items():
            samples[name].append(_median_time(step, 1, comm.Barrier))
    for name, (model, _) in runs.items():
        data = model._get_ddp_logging_data()
        comm_ns = data.get("avg_backward_comm_time", 0)
        out["ddp"][name] = {
            "step": statistics.median(samples[name]),
            "comm_ms": comm_ns / 1e6,
            "hidden": (data.get("avg_backward_compute_comm_overlap_time", 0) / comm_ns
                       if comm_ns else 0.0),
        }
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()


def run_job(ranks: int, steps: int, quick: bool) -> dict:
    cmd = [sys.executable, "-m", "ndgrad.distributed.run", f"--nproc-per-node={ranks}",
           "--master-port", str(29400 + ranks), __file__, "--worker", "--steps", str(steps)]
    if quick:
        cmd.append("--quick")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"the {ranks}-rank job failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")


def _size(n: int) -> str:
    return f"{n // 1048576} MiB" if n >= 1048576 else f"{n // 1024} KiB" if n >= 1024 else f"{n} B"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="few sizes and repetitions (tests)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.steps, args.quick)
        return
    print(f"{os.cpu_count()} cores; MLP {MLP}, batch {BATCH} per rank, 1 thread per rank")
    results = {r: run_job(r, args.steps, args.quick) for r in args.ranks}
    for r, res in results.items():
        if not res["allreduce"]:
            continue
        print(f"\nall-reduce, {r} ranks (float32, in place; median)")
        print(f"{'size':>8} {'raw MPI':>10} {'ndgrad':>10} {'gloo':>10} {'ndgrad/MPI':>11} "
              f"{'ndgrad/gloo':>12} {'GB/s':>6}")
        for row in res["allreduce"]:
            gloo = row.get("gloo")
            print(f"{_size(row['bytes']):>8} {row['raw'] * 1e6:>8.1f}us {row['ndgrad'] * 1e6:>8.1f}us "
                  f"{gloo * 1e6 if gloo else float('nan'):>8.1f}us "
                  f"{row['ndgrad'] / row['raw']:>10.2f}x "
                  f"{row['ndgrad'] / gloo if gloo else float('nan'):>11.2f}x "
                  f"{row['bytes'] / row['ndgrad'] / 1e9:>6.2f}")
    print("\nDDP training step (forward, backward with bucketed all-reduce, SGD-momentum)")
    print(f"{'ranks':>5} {'lib':>7} {'step':>9} {'samples/s':>10} {'scaling':>8} "
          f"{'comm':>8} {'hidden':>7}")
    base = {}
    for r, res in results.items():
        for name, d in res["ddp"].items():
            rate = BATCH * r / d["step"]
            base.setdefault(name, rate / r if r == 1 else None)
            eff = rate / (r * base[name]) if base.get(name) else float("nan")
            print(f"{r:>5} {name:>7} {d['step'] * 1e3:>7.2f}ms {rate:>10.0f} {eff:>7.0%} "
                  f"{d['comm_ms']:>6.2f}ms {d['hidden']:>6.0%}")
    for r, res in results.items():
        d = res["ddp"]
        if "torch" in d:
            print(f"{r}-rank DDP step, ndgrad / PyTorch DDP-gloo: "
                  f"{d['ndgrad']['step'] / d['torch']['step']:.2f}x"
                  + ("  (target <= 1.0x)" if r == 2 else ""))
    for r, res in results.items():
        big = [row for row in res["allreduce"] if row["bytes"] == 25 * 1024 * 1024]
        if big:
            print(f"{r} ranks, 25 MiB all-reduce, ndgrad / raw MPI: "
                  f"{big[0]['ndgrad'] / big[0]['raw']:.2f}x  (target <= 1.5x)")


if __name__ == "__main__":
    main()
