"""Ranks whose models differ fail at DDP construction with PyTorch's messages."""

import sys

import ndgrad as torch
import ndgrad.distributed as dist
from ndgrad.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
errors = []
cases = {
    "count": torch.nn.Sequential(*[torch.nn.Linear(3, 3) for _ in range(1 + rank)]),
    "shape": torch.nn.Linear(3, 3 + rank),
    "no params": torch.nn.ReLU(),
}
for name, model in cases.items():
    try:
        DDP(model)
    except RuntimeError as e:
        errors.append(f"{name}: {e}")
    else:
        errors.append(f"{name}: no error")
if rank == 0:
    print("\n".join(errors))
sys.stdout.flush()
