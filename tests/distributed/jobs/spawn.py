"""A script written for torch.multiprocessing.spawn, run unchanged with ndgrad."""

import os
import sys

import ndgrad as torch
import ndgrad.distributed as dist
import ndgrad.multiprocessing as mp
from ndgrad.utils.data import DataLoader, TensorDataset
from ndgrad.utils.data.distributed import DistributedSampler


def worker(rank, world_size, tag):
    os.environ.setdefault("MASTER_ADDR", "localhost")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    data = TensorDataset(torch.arange(11.0))
    sampler = DistributedSampler(data, shuffle=False)
    seen = [int(x) for (batch,) in DataLoader(data, batch_size=4, sampler=sampler)
            for x in batch]
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    # one write per line: the ranks share the parent's stdout
    sys.stdout.write(f"{tag} rank {rank} of {dist.get_world_size()} sum {int(t.item())} "
                     f"indices {seen}\n")
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    n = int(sys.argv[1])
    print("before spawn", flush=True)
    mp.spawn(worker, args=(n, "spawned"), nprocs=n)
    print("after spawn: parent only", flush=True)
