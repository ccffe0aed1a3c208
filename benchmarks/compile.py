"""Compiled against eager, in one interleaved run at 1 thread (issue 15): the chain of tiny ops
(fwd+bwd per node, as run.py's) and the MLP, CNN and transformer training steps, for ndgrad
eager, ndgrad compiled (the ``inductor`` backend through AOT autograd: directly with
``aot_function``, and through ``ndgrad.compile``, guards included), PyTorch eager and
``torch.compile`` where torch is installed, and the NumPy floor; plus each compiled contender's
first call (capture and compile included). Every contender is checked against the floor first.
Usage: python benchmarks/compile.py [--quick] [--repeat N] [--no-torch-compile].
"""

from __future__ import annotations

import os

if __name__ == "__main__":
    for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_v] = "1"  # before NumPy loads its BLAS: 1 thread

import argparse  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as R  # noqa: E402  (run.py's workloads, cases and checks)
import steps  # noqa: E402

import ndgrad  # noqa: E402
from ndgrad.compiler.aot import aot_function  # noqa: E402
from ndgrad.compiler.inductor import _CODE_CACHE as _inductor_code  # noqa: E402
from ndgrad.compiler.inductor import compile_fx_inner  # noqa: E402
from ndgrad.compiler.inductor import partition_fn  # noqa: E402


def _inductor(fn, cpp_fusion=None):
    """ndgrad's ``inductor``: AOT autograd, min-cut, straight-line array code per half (with
    fused C loops where the C tier is on)."""
    def comp(gm, example_inputs):
        return compile_fx_inner(gm, example_inputs, options={"cpp_fusion": cpp_fusion})
    comp.needs_example_inputs = False  # as inductor_backend: the backward compiles at once
    return aot_function(fn, comp, partition_fn=partition_fn({"cpp_fusion": cpp_fusion}))


def _inductor_numpy(fn):
    """``inductor`` with the C tier off: NumPy ufuncs into reused buffers."""
    return _inductor(fn, cpp_fusion=False)


class CompiledFrameworkCase(R.FrameworkCase):
    def __init__(self, lib, model, leaves, consts, compile_fn):
        super().__init__(lib, model, leaves, consts)
        self.model = compile_fn(model)


class CompiledStepCase(R.StepCase):
    def __init__(self, lib, build, params, batch, compile_fn):
        super().__init__(lib, build, params, batch)
        module, loss_fn = self.module, self.loss_fn
        self.loss_fn = compile_fn(lambda batch: loss_fn(module, batch))
        self.lib, self.params = lib, params

    def restore(self) -> None:
        """Parameters back to their initial values (the first, compiling call took a step)."""
        steps._load(self.lib, self.module, self.params)

    def forward(self):
        self.opt.zero_grad(set_to_none=True)
        return self.loss_fn(self.batch)


def _case(w: R.Workload, key: str, lib, compile_fn=None, seed: int = 0):
    leaves, consts = w.data(__import__("numpy").random.default_rng(seed))
    if lib is None:
        return R.FloorCase(w.floor_fwd, w.floor_bwd, leaves, consts)
    if compile_fn is None:
        return (R.StepCase if w.step else R.FrameworkCase)(lib, w.model, leaves, consts)
    if w.step:
        return CompiledStepCase(lib, w.model, leaves, consts, compile_fn)
    return CompiledFrameworkCase(lib, w.model, leaves, consts, compile_fn)


def _ndgrad_compile(fn):
    """The whole stack: ``ndgrad.compile`` (capture, guards, cache) with the inductor backend."""
    return ndgrad.compile(fn, backend="inductor")


def contenders(use_torch: bool, torch_compile: bool) -> list[tuple[str, str, object, object]]:
    """(key, label, lib, compile_fn) per contender."""
    from ndgrad.compiler import cpp

    out = [("ndgrad", "ndgrad eager", ndgrad, None)]
    if cpp.available():
        out.append(("compiled", "ndgrad inductor (C)", ndgrad, _inductor))
    out.append(("compiled_numpy", "ndgrad inductor (NumPy)", ndgrad, _inductor_numpy))
    if hasattr(ndgrad, "compile"):
        out.append(("ndgrad_compile", "ndgrad.compile", ndgrad, _ndgrad_compile))
    if use_torch:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            torch.set_num_threads(1)
            out.append(("torch", "PyTorch eager", torch, None))
            if torch_compile:
                out.append(("torch_compile", "torch.compile", torch, torch.compile))
    out.append(("floor", "NumPy floor", None, None))
    return out


def _first_call(case) -> float:
    """Seconds of a compiled case's first call (capture, compile, run), with nothing compiled
    kept in memory from before: ``run_once``'s forward and backward, without the full collection
    it runs before them (~0.1 s on this process's heap, which a user's first call does not pay)."""
    from ndgrad.compiler import cpp

    _inductor_code.clear()
    cpp._loaded.clear()
    t = sum(R.run_once(case))
    if hasattr(case, "restore"):
        case.restore()
    return t


def measure(w: R.Workload, who, repeat: int):
    """Median fwd+bwd seconds per contender (None: n/a) and first-call seconds of compiled ones."""
    cases, first, skipped = {}, {}, {}
    for key, _, lib, compile_fn in who:
        try:
            case = _case(w, key, lib, compile_fn)
            if compile_fn is not None:
                with tempfile.TemporaryDirectory() as cache:
                    os.environ["NDGRAD_CACHE_DIR"] = cache  # a cold C cache
                    first[key] = _first_call(case)
                    if key == "compiled":  # again in a fresh "process": the disk cache is warm
                        first["compiled_warm"] = _first_call(_case(w, key, lib, compile_fn))
                    os.environ.pop("NDGRAD_CACHE_DIR")
            cases[key] = case
        except Exception as e:  # noqa: BLE001 - torch.compile may be unavailable on this CPU
            skipped[key] = f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
    R.check(w, cases)
    for case in cases.values():
        R.run_once(case)  # warm-up
    gc.collect()
    times = {k: [] for k in cases}
    keys = list(cases)
    for rep in range(repeat):
        for i in range(len(keys)):  # round-robin, rotating who goes first
            key = keys[(rep + i) % len(keys)]
            f, b = R.run_once(cases[key])
            times[key].append(f + b)
    med = {k: statistics.median(ts) for k, ts in times.items()}
    return med, first, skipped


def _verdicts(w, med, first) -> list:
    """Issue 16's targets for this workload."""
    out = []

    def say(what, r, target, unit="x"):
        out.append(f"- {w.name}: {what} = {r:.2f}{unit}, target <= {target}{unit} "
                   f"{'met' if r <= target else 'NOT met'}")

    floor = med.get("floor")
    if not w.step:
        if "compiled" in med and "torch_compile" in med:
            say("inductor (C) / torch.compile", med["compiled"] / med["torch_compile"], 1.0)
        if floor:
            say("inductor (NumPy) / NumPy floor", med["compiled_numpy"] / floor, 1.0)
    else:
        best = med.get("compiled", med["compiled_numpy"])
        if "MLP" in w.name and floor:
            say("inductor / NumPy floor", best / floor, 0.95)
        if "transformer" in w.name:
            if floor:
                say("inductor / NumPy floor", best / floor, 0.8)
            if "torch_compile" in med:
                say("inductor / torch.compile", best / med["torch_compile"], 1.0)
        if "CNN" in w.name and "torch" in med:
            say("inductor / PyTorch eager", best / med["torch"], 1.0)
    if not w.step or "transformer" in w.name:
        k = "compiled" if "compiled" in first else "compiled_numpy"
        say(f"first call ({k}, capture + compile)", first[k], 3.0, " s")
    return out


def compiled_autograd_rows(n_ops: int, repeat: int, when: str) -> str:
    """The chain's backward alone: the eager engine against compiled autograd (issue 17), with
    inductor's code (``compile_inductor``) and through ``ndgrad.compile(gm, backend="inductor")``;
    interleaved, after each compiled variant has captured and compiled (first backward) and run
    once. ``when``: where in the run it was measured (the heap's state matters, see main)."""
    from ndgrad.compiler import compiled_autograd as ca

    w = R.chain(n_ops, 16)
    leaves, consts = w.data(__import__("numpy").random.default_rng(0))
    x = ndgrad.tensor(leaves[0], requires_grad=True)
    c = tuple(ndgrad.tensor(a) for a in consts)
    variants = {"eager engine": None, "compiled autograd, inductor code": ca.compile_inductor,
                "compiled autograd, ndgrad.compile inductor":
                    lambda gm: ndgrad.compile(gm, backend="inductor")}

    def backward(compiler) -> float:
        y = w.model([x], c)
        gc.collect()
        t0 = time.perf_counter()
        if compiler is None:
            y.backward()
        else:
            with ca._enable(compiler):
                y.backward()
        return time.perf_counter() - t0

    first = {}
    for name, comp in variants.items():
        if comp is not None:
            first[name] = backward(comp)  # capture, compile
            backward(comp)
            backward(comp)
    times = {k: [] for k in variants}
    for _ in range(repeat):
        for name, comp in variants.items():
            times[name].append(backward(comp))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["eager engine"]
    rows = ["| chain backward | us/node | first backward s | / eager engine |", "|---|---|---|---|"]
    for name in variants:
        rows.append(f"| {name} | {med[name] * 1e6 / w.ops:.2f} | "
                    f"{first.get(name, 0):.2f} | {med[name] / base:.2f}x |")
    best = min(med[k] for k in variants if k != "eager engine") / base
    rows.append(f"\n- {w.name}, backward under compiled autograd (inductor), {when} = {best:.2f}x "
                f"the eager engine's, target <= 0.5x {'met' if best <= 0.5 else 'NOT met'}")
    return "\n".join(rows)


def guard_times(number: int = 2000) -> str:
    """The cost of one cache lookup's guard check: 10 tensor inputs, and a transformer block
    (its module, submodules and parameters guarded)."""
    import timeit

    import ndgrad
    from ndgrad.compiler.guards import GuardSet

    xs = tuple(ndgrad.randn(4, 4) for _ in range(10))
    block = ndgrad.nn.TransformerEncoderLayer(d_model=128, nhead=4, batch_first=True)
    x = ndgrad.randn(8, 64, 128)
    rows = []
    for name, fn, args, root in (("10 tensor inputs", lambda *a: None, xs, None),
                                 ("transformer block", block.forward, (x,), block)):
        g = GuardSet(fn, args, {}, root)
        assert g.check(args, {})
        best = min(timeit.repeat(lambda: g.check(args, {}), number=number, repeat=5)) / number
        rows.append(f"- guard check, {name}: {best * 1e6:.2f} us ({len(g.guards)} guards), target <= 5 us "
                    f"for <= 10 inputs")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=None, help="repetitions per contender (15)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 repetitions, small sizes")
    ap.add_argument("--scale", type=float, default=None, help="chain length scale (1.0)")
    ap.add_argument("--only", default="", help="run workloads whose name contains this")
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    ap.add_argument("--no-torch-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)
    repeat = args.repeat or (2 if args.quick else 15)
    scale = args.scale or (0.02 if args.quick else 1.0)
    who = contenders(not args.no_torch, not args.no_torch_compile)
    n = max(4, round(2000 * scale))
    work = [R.chain(n, 16)] + ([] if args.quick else R.train_steps())
    if args.quick:
        work += [w for w in R.train_steps() if "MLP" in w.name]
    work = [w for w in work if args.only in w.name]
    labels = [label for _, label, _, _ in who]
    head = ["workload", "metric", *labels, "compiled/eager"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    verdicts = []
    # Compiled autograd's lookup walks the graph reading ~7 objects per node: on a heap that the
    # workloads below have fragmented it is ~15% slower (the eager engine less so), so it is
    # measured both before them (as a fresh process) and after them.
    has_chain = any("chain" in w.name for w in work)
    ca_rows = [compiled_autograd_rows(n, repeat, "first in the run")] if has_chain else []
    for w in work:
        print(f"running {w.name} ...", file=sys.stderr, flush=True)
        med, first, skipped = measure(w, who, repeat)
        scale_t, unit = (1e3, "step ms") if w.step else (1e6 / w.ops, "fwd+bwd us/node")
        cells = [f"{med[k] * scale_t:.2f}" if k in med else "n/a" for k, *_ in who]
        best = "compiled" if "compiled" in med else "compiled_numpy"
        ratio = med[best] / med["ndgrad"]
        lines.append(f"| {w.name} | {unit} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
        cells = [f"{first[k]:.2f}" if k in first else "" for k, *_ in who]
        lines.append("| | first call s (compile) | " + " | ".join(cells) + " | |")
        if "compiled_warm" in first:
            cells = [f"{first['compiled_warm']:.2f}" if k == "compiled" else "" for k, *_ in who]
            lines.append("| | first call s, warm C cache | " + " | ".join(cells) + " | |")
        for k, why in skipped.items():
            verdicts.append(f"- {w.name}: {k} n/a ({why})")
        verdicts += _verdicts(w, med, first)
    text = "\n\n".join([
        f"# ndgrad compiled vs eager\n\n1 thread; median of {repeat} interleaved repetitions; "
        f"NumPy {__import__('numpy').__version__}; steps from benchmarks/steps.py "
        f"(lr {steps.LR}).", "\n".join(lines), "\n".join(verdicts), guard_times()]
        + ca_rows + ([compiled_autograd_rows(n, repeat, "after the workloads")]
                     if has_chain else []))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return text


if __name__ == "__main__":
    main()
