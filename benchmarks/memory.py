"""Peak memory of one training step of a residual MLP: plain, every block checkpointed, and with
saved tensors offloaded to files through saved_tensors_hooks.

Block: h + gelu(h @ w1 + b1) @ w2 + b2 (keeps two activations besides its output). Memory is
traced with tracemalloc (ndgrad.utils.memory): "activations" are the bytes the forward leaves
held for backward (measured when forward ends: the peak of activation memory), "step peak" the
most held at once during forward+backward (parameter gradients included).
All three variants must give identical gradients. Usage:
    python benchmarks/memory.py [--blocks 16] [--width 1024] [--batch 256]
Prints a markdown table and writes it to benchmarks/memory_results.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import ndgrad  # noqa: E402
from ndgrad.autograd.graph import saved_tensors_hooks  # noqa: E402
from ndgrad.nn.functional import gelu  # noqa: E402
from ndgrad.utils import memory  # noqa: E402
from ndgrad.utils.checkpoint import checkpoint  # noqa: E402

TARGET = 0.4  # checkpointed activation peak / plain activation peak


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


def step(x, params, variant: str, tmp: Path) -> tuple[int, int, list[np.ndarray]]:
    for p in params:
        p.grad = None
    files = []

    def pack(t):
        path = tmp / f"{len(files)}.npy"
        np.save(path, t.detach().numpy())
        files.append(path)
        return path

    def unpack(path):
        return ndgrad.from_numpy(np.load(path))

    with memory.track() as m:
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
        held = memory.current_bytes() - start
        loss.backward()
        del loss
    for f in files:
        f.unlink()
    return m.peak, held, [p.grad.numpy().copy() for p in params]


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--out", default=str(Path(__file__).with_name("memory_results.md")))
    args = ap.parse_args(argv)
    params = make_params(args.blocks, args.width)
    x = ndgrad.tensor(np.random.default_rng(1).standard_normal((args.batch, args.width)).astype(np.float32))
    rows, grads = [], {}
    with tempfile.TemporaryDirectory() as d:
        step(x, params, "offload", Path(d))  # warm-up: first calls import and cache, untimed
        for variant in ("plain", "checkpoint", "offload"):
            peak, held, grads[variant] = step(x, params, variant, Path(d))
            rows.append((variant, peak, held))
    same = all(all(np.array_equal(a, b) for a, b in zip(grads["plain"], grads[v], strict=True))
               for v in ("checkpoint", "offload"))
    base = rows[0][2]
    lines = [
        f"# ndgrad memory benchmark\n\nResidual MLP, {args.blocks} blocks, width {args.width}, batch "
        f"{args.batch}, float32; one forward+backward step; MB = 1e6 bytes.\n",
        "| variant | activations MB | vs plain | step peak MB | vs plain |",
        "|---|---|---|---|---|",
    ]
    for variant, peak, act in rows:
        lines.append(f"| {variant} | {act / 1e6:.1f} | {act / base:.2f}x | {peak / 1e6:.1f} | "
                     f"{peak / rows[0][1]:.2f}x |")
    ratio = rows[1][2] / base
    lines.append("")
    lines.append(f"- gradients identical in all variants: {'yes' if same else 'NO'}")
    lines.append(f"- checkpointed activations = {ratio:.2f}x plain, target <= {TARGET}x "
                 f"{'met' if ratio <= TARGET else 'NOT met'}")
    text = "\n".join(lines)
    print(text)
    Path(args.out).write_text(text + "\n")
    if not same:
        raise SystemExit("gradients differ between variants")
    return text


if __name__ == "__main__":
    main()
