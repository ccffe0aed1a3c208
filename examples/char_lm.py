"""A character-level transformer language model trained on the Python standard library's source.

    python examples/char_lm.py                 # --resume continues; --epochs N sets the length

The text is real and on every machine: the .py files of the running Python's standard library
(a fixed, sorted selection). 90% trains, the last 10% validates. After every epoch the run
prints the validation loss next to the unigram baseline (predicting each character by its
frequency), writes runs/char-lm/checkpoint.pt and loss.png, and a short sample of generated text.
"""

from __future__ import annotations

import math
import sysconfig
from pathlib import Path

import numpy as np

from common import Trainer, framework, parser, unigram_entropy


def load_text(max_chars: int) -> str:
    """Sorted stdlib modules, concatenated until ``max_chars`` (ASCII only, tabs as spaces)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    parts, total = [], 0
    for path in sorted(root.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="ignore").encode("ascii", "ignore").decode()
        text = text.replace("\t", "    ")
        parts.append(text)
        total += len(text)
        if total >= max_chars:
            break
    return "".join(parts)[:max_chars]


def build(torch, vocab: int, width: int, heads: int, layers: int, context: int):
    nn = torch.nn

    class CharLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, width)
            self.pos = nn.Embedding(context, width)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
                for _ in range(layers))
            self.norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab)
            mask = torch.full((context, context), float("-inf")).triu(1)  # causal: no peeking ahead
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos.weight[:t]
            for block in self.blocks:
                x = block(x, src_mask=self.mask[:t, :t], is_causal=True)
            return self.head(self.norm(x))

    return CharLM()


def main(argv=None) -> tuple[float, float]:
    ap = parser(__doc__.splitlines()[0], epochs=4, lr=3e-3, batch_size=16, out="char-lm")
    ap.add_argument("--chars", type=int, default=400_000, help="characters of text to use")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps-per-epoch", type=int, default=150)
    args = ap.parse_args(argv)
    torch = framework(args.backend)
    torch.manual_seed(args.seed)

    text = load_text(args.chars)
    chars = sorted(set(text))
    lookup = np.zeros(128, np.int64)
    lookup[[ord(ch) for ch in chars]] = np.arange(len(chars))
    ids = lookup[np.frombuffer(text.encode("ascii"), np.uint8)]
    cut = int(0.9 * len(ids))
    train, val = ids[:cut], ids[cut:]
    baseline = unigram_entropy(train.tolist())
    print(f"{len(text)} characters, vocabulary {len(chars)}; unigram baseline {baseline:.3f} nats/char")

    model = build(torch, len(chars), args.width, args.heads, args.layers, args.context)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    total = args.epochs * args.steps_per_epoch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=total, pct_start=0.1)
    trainer = Trainer(torch, model, opt, args, sched)
    c = args.context

    def batches(epoch):
        rng = np.random.default_rng(1000 * args.seed + epoch)  # resumed runs draw the same batches
        for _ in range(args.steps_per_epoch):
            start = rng.integers(0, len(train) - c - 1, args.batch_size)
            window = train[start[:, None] + np.arange(c + 1)]
            yield torch.from_numpy(window[:, :-1].copy()), torch.from_numpy(window[:, 1:].copy())

    def loss_fn(batch):
        x, y = batch
        logits = model(x)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def evaluate():
        n = (len(val) - 1) // c
        x = torch.from_numpy(val[: n * c].reshape(n, c).copy())
        y = torch.from_numpy(val[1: n * c + 1].reshape(n, c).copy())
        losses = [float(loss_fn((x[i:i + 64], y[i:i + 64])).item()) * len(x[i:i + 64]) for i in range(0, n, 64)]
        print("sample:", repr(sample(torch, model, train[:c], chars, 80)))
        return "val loss", sum(losses) / n

    trainer.fit(batches, loss_fn, evaluate, args.steps_per_epoch)
    val_loss = trainer.evals[-1][1] if trainer.evals else math.nan
    print(f"validation loss {val_loss:.3f} nats/char vs unigram baseline {baseline:.3f} "
          f"({val_loss / baseline:.0%} of it)")
    return val_loss, baseline


def sample(torch, model, prompt, chars, n: int) -> str:
    """Greedy continuation of ``prompt`` (ids) by ``n`` characters."""
    ctx = list(prompt)
    c = len(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ctx[-c:]]))
            ctx.append(int(logits[0, -1].argmax().item()))
    return "".join(chars[i] for i in ctx[c:])


if __name__ == "__main__":
    main()
