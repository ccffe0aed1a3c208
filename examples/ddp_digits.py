"""The digits CNN of digits.py trained data-parallel: one process per rank, DDP over MPI.

    python -m ndgrad.distributed.run --nproc-per-node 2 examples/ddp_digits.py

A torchrun script as PyTorch users write it (``torchrun --nproc-per-node 2 examples/ddp_digits.py
--backend torch`` runs the same file on PyTorch): each rank trains on its share of every batch
(``DistributedSampler``), DDP averages the gradients, and rank 0 reports the test accuracy, which
matches the single-process run of ``digits.py --model cnn`` (same global batch, same schedule).
"""

from __future__ import annotations

import time

from common import framework, parser
from digits import build, load_digits_split


def main(argv=None) -> float:
    ap = parser(__doc__.splitlines()[0], epochs=30, lr=2e-3, batch_size=64, out="ddp-digits")
    args = ap.parse_args(argv)
    torch = framework(args.backend)
    dist = torch.distributed
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} must split evenly over {world} ranks")
    torch.manual_seed(args.seed)
    (xtr, ytr), (xte, yte) = load_digits_split(args.seed)
    train = torch.utils.data.TensorDataset(torch.from_numpy(xtr.reshape(-1, 1, 8, 8)),
                                           torch.from_numpy(ytr))
    xtest, ytest = torch.from_numpy(xte.reshape(-1, 1, 8, 8)), torch.from_numpy(yte)
    sampler = torch.utils.data.distributed.DistributedSampler(train, seed=args.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch_size // world,
                                         sampler=sampler)

    model = torch.nn.parallel.DistributedDataParallel(build(torch, "cnn"))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(loader))
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        model.train()
        total = 0.0
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
        if rank == 0 and not args.no_progress:
            print(f"epoch {epoch + 1}: rank-0 mean loss {total / len(loader):.4f}", flush=True)
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        acc = float((model.module(xtest).argmax(dim=1) == ytest).float().mean().item())
    if rank == 0:
        print(f"ddp cnn on {world} ranks: test accuracy {acc:.2%} ({len(yte)} test images), "
              f"{args.epochs} epochs in {seconds:.1f} s", flush=True)
    dist.destroy_process_group()
    return acc


if __name__ == "__main__":
    main()
