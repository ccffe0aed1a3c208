"""What the demos share: picking the framework, the training loop with a progress bar,
checkpoints that a run can resume from, and the loss-curve plot.

Every demo is plain PyTorch code run against ``ndgrad`` (``--backend torch`` runs the same file
on PyTorch, for comparison).
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the repo's ndgrad, installed or not


def parser(description: str, epochs: int, lr: float, batch_size: int, out: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--backend", default="ndgrad", choices=["ndgrad", "torch"])
    ap.add_argument("--epochs", type=int, default=epochs, help="total epochs (resuming counts those done)")
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--batch-size", type=int, default=batch_size)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "runs" / out), help="folder for checkpoint and plot")
    ap.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    ap.add_argument("--stop-after", type=int, default=None,
                    help="stop after this many epochs, as if cut off (--resume continues)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar (logs, tests)")
    return ap


def framework(name: str):
    """``import ndgrad as torch`` (or torch itself)."""
    return importlib.import_module(name)


class Trainer:
    """Epoch loop with a tqdm bar showing the running loss; saves a checkpoint (model, optimizer,
    epoch, loss history, RNG state) and a PNG of the loss curve after every epoch."""

    def __init__(self, torch, model, optimizer, args, scheduler=None):
        self.torch, self.model, self.opt, self.sched, self.args = torch, model, optimizer, scheduler, args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.ckpt = self.out / "checkpoint.pt"
        self.epoch = 0
        self.history: list[float] = []  # training loss of every step
        self.evals: list[tuple[int, float]] = []  # (step, validation metric)
        if args.resume:
            self.load()

    # --- checkpoints ---
    def state(self) -> dict:
        state = {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                 "epoch": self.epoch, "history": list(self.history),
                 "evals": [list(e) for e in self.evals], "rng": self.torch.get_rng_state()}
        if self.sched is not None:
            state["scheduler"] = self.sched.state_dict()
        return state

    def save(self) -> None:
        tmp = self.ckpt.with_suffix(".tmp")
        self.torch.save(self.state(), tmp)
        os.replace(tmp, self.ckpt)  # a run cut off mid-save keeps the previous checkpoint

    def load(self) -> None:
        if not self.ckpt.exists():
            raise SystemExit(f"--resume: no checkpoint at {self.ckpt}")
        state = self.torch.load(self.ckpt)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        if self.sched is not None:
            self.sched.load_state_dict(state["scheduler"])
        self.epoch = int(state["epoch"])
        self.history = [float(v) for v in state["history"]]
        self.evals = [(int(s), float(v)) for s, v in state["evals"]]
        self.torch.set_rng_state(state["rng"])
        print(f"resumed from {self.ckpt} after epoch {self.epoch}")

    # --- training ---
    def fit(self, batches, loss_fn, evaluate, steps_per_epoch: int) -> None:
        """``batches(epoch)`` yields batches; ``loss_fn(batch)`` returns the loss tensor;
        ``evaluate()`` returns (name, value) for the validation line."""
        from tqdm import tqdm

        last = self.args.epochs if self.args.stop_after is None else min(self.args.epochs, self.args.stop_after)
        while self.epoch < last:
            self.model.train()
            bar = tqdm(batches(self.epoch), total=steps_per_epoch, desc=f"epoch {self.epoch + 1}/{self.args.epochs}",
                       disable=self.args.no_progress, leave=False)
            running = None
            for batch in bar:
                self.opt.zero_grad(set_to_none=True)
                loss = loss_fn(batch)
                loss.backward()
                self.opt.step()
                if self.sched is not None:
                    self.sched.step()
                value = float(loss.item())
                self.history.append(value)
                running = value if running is None else 0.9 * running + 0.1 * value
                bar.set_postfix(loss=f"{running:.4f}")
            self.epoch += 1
            self.model.eval()
            with self.torch.no_grad():
                name, metric = evaluate()
            self.evals.append((len(self.history), metric))
            print(f"epoch {self.epoch}: train loss {running:.4f}, {name} {metric:.4f}", flush=True)
            self.save()
            self.plot(name)

    def plot(self, metric_name: str) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        k = max(1, len(self.history) // 200)  # smooth: mean of k consecutive steps
        smooth = [sum(self.history[i:i + k]) / len(self.history[i:i + k]) for i in range(0, len(self.history), k)]
        ax.plot([i * k for i in range(len(smooth))], smooth, label="training loss")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        if self.evals:
            ax2 = ax.twinx()
            ax2.plot([s for s, _ in self.evals], [v for _, v in self.evals], "o-", color="C1", label=metric_name)
            ax2.set_ylabel(metric_name)
        ax.set_title(f"{self.out.name} ({self.args.backend})")
        fig.tight_layout()
        fig.savefig(self.out / "loss.png", dpi=100)
        plt.close(fig)


def unigram_entropy(ids) -> float:
    """Cross-entropy (nats) of predicting each symbol by its frequency: the baseline a language
    model must beat."""
    from collections import Counter

    counts = Counter(ids)
    n = sum(counts.values())
    return -sum(c / n * math.log(c / n) for c in counts.values())
