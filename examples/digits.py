"""Handwritten digits (scikit-learn's 8x8 images, 1797 samples) with an MLP or a small CNN.

    python examples/digits.py --model mlp          # or --model cnn; --resume continues a run

Trains on 80% of the images, reports test accuracy after every epoch, writes
runs/digits-<model>/checkpoint.pt and loss.png. Both models reach >= 97% test accuracy.
"""

from __future__ import annotations

import numpy as np

from common import Trainer, framework, parser


def load_digits_split(seed: int = 0):
    """Pixels scaled to [0, 1]; a fixed, stratification-free 80/20 split."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    cut = int(0.8 * len(y))
    return (x[order[:cut]], y[order[:cut]]), (x[order[cut:]], y[order[cut:]])


def build(torch, kind: str):
    nn = torch.nn
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.1),
                             nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 4 x 4
        nn.Flatten(), nn.Dropout(0.1), nn.Linear(32 * 4 * 4, 10))


def main(argv=None) -> float:
    ap = parser(__doc__.splitlines()[0], epochs=30, lr=2e-3, batch_size=64, out="digits")
    ap.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    args = ap.parse_args(argv)
    if args.out.endswith("digits"):
        args.out += "-" + args.model
    torch = framework(args.backend)
    torch.manual_seed(args.seed)
    (xtr, ytr), (xte, yte) = load_digits_split(args.seed)
    shape = (-1, 64) if args.model == "mlp" else (-1, 1, 8, 8)
    train = torch.utils.data.TensorDataset(torch.from_numpy(xtr.reshape(shape)), torch.from_numpy(ytr))
    xtest, ytest = torch.from_numpy(xte.reshape(shape)), torch.from_numpy(yte)
    gen = torch.Generator().manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch_size, shuffle=True, generator=gen)

    model = build(torch, args.model)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(loader))
    trainer = Trainer(torch, model, opt, args, sched)

    def batches(epoch):
        gen.manual_seed(1000 * args.seed + epoch)  # so that a resumed run shuffles as the first
        return iter(loader)

    def loss_fn(batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(model(x), y)

    def evaluate():
        pred = model(xtest).argmax(dim=1)
        return "test accuracy", float((pred == ytest).float().mean().item())

    trainer.fit(batches, loss_fn, evaluate, len(loader))
    acc = trainer.evals[-1][1] if trainer.evals else float("nan")
    print(f"{args.model}: test accuracy {acc:.2%} ({len(yte)} test images); checkpoint and loss.png in {args.out}")
    return acc


if __name__ == "__main__":
    main()
