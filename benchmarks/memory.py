"""Peak memory of one training step of a residual MLP: plain, every block checkpointed, and with
saved tensors offloaded to files through saved_tensors_hooks; the last two also under compiled
autograd (issue 17), with the graph run as generated Python and compiled by the inductor.

Block: h + gelu(h @ w1 + b1) @ w2 + b2 (keeps two activations besides its output). Memory is
traced with tracemalloc (ndgrad.utils.memory): "activations" are the bytes the forward leaves
held for backward (measured when forward ends: the peak of activation memory), "step peak" the
most held at once during forward+backward (parameter gradients included), "backward peak" the
most held at once during backward() above what was held when it began. A compiled-autograd row
is measured on a cache hit (its warm-up steps capture and compile the graph); its unpack hook
calls (the offload hook's file paths, checkpoint's (block, handle) pairs) must equal the eager
engine's in number and order. All variants must give identical gradients (the inductor's rows:
equal up to float32 rounding, GRAD_RTOL). Usage:
    python benchmarks/memory.py [--blocks 16] [--width 1024] [--batch 256]
Prints a markdown table and writes it to benchmarks/memory_results.md.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import ndgrad  # noqa: E402
from ndgrad.autograd.graph import saved_tensors_hooks  # noqa: E402
from ndgrad.compiler import compiled_autograd  # noqa: E402
from ndgrad.compiler.capture import counters as capture_counters  # noqa: E402
from ndgrad.nn.functional import gelu  # noqa: E402
from ndgrad.utils import checkpoint as _checkpoint  # noqa: E402
from ndgrad.utils import memory  # noqa: E402
from ndgrad.utils.checkpoint import checkpoint  # noqa: E402

TARGET = 0.4  # checkpointed activation peak / plain activation peak
TARGET_COMPILED = 1.0  # compiled autograd's backward peak / the eager engine's (issue 17)
GRAD_RTOL = 1e-5  # inductor rows: max |grad - plain's| / max |plain's| (float32 rounding)
# Compiled autograd caches graphs by structure (as PyTorch): each compiler starts from reset().
COMPILERS = {
    "python": lambda gm: gm.forward,
    "inductor": lambda gm: ndgrad.compile(gm, backend="inductor"),
    "inductor code": compiled_autograd.compile_inductor,
}


def make_params(blocks: int, width: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(width)
    params = []
    for _ in range(blocks):
        for shape in ((width, width), (width,), (width, width), (width,)):
            params.append(ndgrad.tensor(rng.uniform(-scale, scale, shape).astype(np.float32), requires_grad=True))
    return params


def block(h, w1, b1, w2, b2):
    return h + gelu(h @ w1 + b1) @ w2 + b2


@contextlib.contextmanager
def logged_checkpoint_unpacks(params, log: list):
    """Log each call of checkpoint's unpack hook as (block index, handle). Its hooks are
    internal to ``checkpoint``, so the hook method itself is wrapped while a step runs."""
    blocks = {id(params[i]): i // 4 for i in range(0, len(params), 4)}
    real = _checkpoint._Segment.unpack

    def unpack(seg, handle):
        log.append((blocks[id(seg.args[1])], handle))
        return real(seg, handle)

    _checkpoint._Segment.unpack = unpack
    try:
        yield
    finally:
        _checkpoint._Segment.unpack = real


def step(x, params, variant: str, tmp: Path) -> dict:
    for p in params:
        p.grad = None
    files, unpacks = [], []

    def pack(t):
        path = tmp / f"{len(files)}.npy"
        np.save(path, t.detach().numpy())
        files.append(path)
        return path

    def unpack(path):
        unpacks.append(path.name)
        return ndgrad.from_numpy(np.load(path))

    logged = logged_checkpoint_unpacks(params, unpacks) if variant == "checkpoint" else \
        contextlib.nullcontext()
    with logged, memory.track() as m:
        start = memory.current_bytes()
        h = x
        for i in range(0, len(params), 4):
            ps = params[i:i + 4]
            if variant == "checkpoint":
                h = checkpoint(block, h, *ps, use_reentrant=False)
            elif variant == "offload":
                with saved_tensors_hooks(pack, unpack):
                    h = block(h, *ps)
            else:
                h = block(h, *ps)
        loss = (h * h).mean()
        del h
        before, forward_peak = memory.current_bytes(), memory.peak_bytes()
        memory.reset_peak()
        # The collector off during backward: the cyclic garbage user hooks leave (np.load's
        # header parse) is then the same in every variant, not whatever was left uncollected
        # when the collector last ran, which depends on how many objects each engine allocates.
        gc.disable()
        try:
            loss.backward()
        finally:
            gc.enable()
        backward_peak = memory.peak_bytes() - before
        del loss
    for f in files:
        f.unlink()
    return {"peak": max(m.peak, forward_peak - m.base), "held": before - start,
            "backward": backward_peak, "unpacks": unpacks,
            "grads": [p.grad.numpy().copy() for p in params]}


def compiled_step(x, x_warm, params, variant: str, tmp: Path, compiler: str) -> dict:
    """``step`` under compiled autograd, measured on a cache hit that runs the compiled graph.
    Warm-up steps run on another batch (a graph that kept a warm-up's values would give wrong
    gradients) until one captures nothing: the first captures the backward, and a backend may
    capture again on its first calls (``ndgrad.compile`` traces, then AOT autograd traces)."""
    fn = COMPILERS[compiler]
    compiled_autograd.reset()
    with compiled_autograd._enable(fn):
        for _ in range(4):
            captures = capture_counters["captures"]
            step(x_warm, params, variant, tmp)
            if capture_counters["captures"] == captures:
                break
        hits, captures = compiled_autograd.counters["cache_hits"], capture_counters["captures"]
        r = step(x, params, variant, tmp)
    if compiled_autograd.counters["cache_hits"] != hits + 1 or \
            capture_counters["captures"] != captures:
        raise SystemExit(f"{variant} under compiled autograd ({compiler}) did not run a cached "
                         f"graph: {dict(compiled_autograd.counters)}")
    return r


def _max_rel_diff(grads, ref) -> float:
    """max |g - ref| over all gradients, in units of max |ref|."""
    return max(float(np.abs(a - b).max()) for a, b in zip(grads, ref, strict=True)) / \
        max(float(np.abs(b).max()) for b in ref)


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--out", default=str(Path(__file__).with_name("memory_results.md")))
    args = ap.parse_args(argv)
    params = make_params(args.blocks, args.width)
    rng = np.random.default_rng(1)
    x, x_warm = (ndgrad.tensor(rng.standard_normal((args.batch, args.width)).astype(np.float32))
                 for _ in range(2))
    rows = {}  # name -> (the eager variant it compiles, or None; step result)
    with tempfile.TemporaryDirectory() as d:
        step(x, params, "offload", Path(d))  # warm-up: first calls import and cache, untimed
        for variant in ("plain", "checkpoint", "offload"):
            rows[variant] = (None, step(x, params, variant, Path(d)))
        for variant in ("checkpoint", "offload"):
            for compiler in COMPILERS:
                rows[f"{variant}, compiled autograd ({compiler})"] = (
                    variant, compiled_step(x, x_warm, params, variant, Path(d), compiler))
    plain = rows["plain"][1]
    lines = [
        f"# ndgrad memory benchmark\n\nResidual MLP, {args.blocks} blocks, width {args.width}, batch "
        f"{args.batch}, float32; one forward+backward step; MB = 1e6 bytes. Backward peak: the "
        "most held at once during backward() above what was held when it began. Compiled rows run "
        "a cached graph (compiled autograd's cache hit, after warm-up steps on another batch).\n",
        "| variant | activations MB | vs plain | step peak MB | vs plain | backward peak MB "
        "| vs eager engine | unpack hook calls |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, (eager, r) in rows.items():
        vs = "" if eager is None else f"{r['backward'] / rows[eager][1]['backward']:.2f}x"
        lines.append(f"| {name} | {r['held'] / 1e6:.1f} | {r['held'] / plain['held']:.2f}x | "
                     f"{r['peak'] / 1e6:.1f} | {r['peak'] / plain['peak']:.2f}x | "
                     f"{r['backward'] / 1e6:.1f} | {vs} | {len(r['unpacks'])} |")
    # The inductor fuses pointwise ops into C loops (other rounding): equal within GRAD_RTOL.
    exact = [n for n in rows if "inductor" not in n]
    same = all(_max_rel_diff(rows[n][1]["grads"], plain["grads"]) == 0 for n in exact)
    fused = {n: _max_rel_diff(r["grads"], plain["grads"]) for n, (_, r) in rows.items()
             if n not in exact}
    close = all(v <= GRAD_RTOL for v in fused.values())
    ratio = rows["checkpoint"][1]["held"] / plain["held"]
    lines.append("")
    lines.append(f"- gradients identical in all variants: {'yes' if same else 'NO'} (bitwise; "
                 "inductor rows excepted)")
    for n, v in fused.items():
        lines.append(f"- gradients of {n}: max |diff| / max |grad| = {v:.1e} vs plain, target <= "
                     f"{GRAD_RTOL:.0e} {'met' if v <= GRAD_RTOL else 'NOT met'}")
    lines.append(f"- checkpointed activations = {ratio:.2f}x plain, target <= {TARGET}x "
                 f"{'met' if ratio <= TARGET else 'NOT met'}")
    hooks_match = True
    for name, (eager, r) in rows.items():
        if eager is None:
            continue
        base = rows[eager][1]
        ratio = r["backward"] / base["backward"]
        match = r["unpacks"] == base["unpacks"]
        hooks_match &= match
        lines.append(f"- {name}: compiled autograd peak during backward / eager engine's peak = "
                     f"{ratio:.3f}x ({(r['backward'] - base['backward']) / 1e6:+.2f} MB), "
                     f"target <= {TARGET_COMPILED}x "
                     f"{'met' if ratio <= TARGET_COMPILED else 'NOT met'}; unpack hooks: "
                     f"{len(r['unpacks'])} calls vs eager's {len(base['unpacks'])}, "
                     f"{'same order' if match else 'NOT the same calls'}")
    text = "\n".join(lines)
    print(text)
    Path(args.out).write_text(text + "\n")
    if not (same and close):
        raise SystemExit("gradients differ between variants")
    if not hooks_match:
        raise SystemExit("unpack hook calls differ between compiled autograd and the eager engine")
    return text


if __name__ == "__main__":
    main()
