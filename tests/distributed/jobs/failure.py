"""Rank 1 raises while rank 0 waits in a collective: the whole job must end, non-zero, at once."""

import sys
import time

import ndgrad as torch
import ndgrad.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    time.sleep(0.2)
    raise ValueError("rank 1 fails on purpose")
print("rank 0 waits in all_reduce", flush=True)
dist.all_reduce(torch.ones(3))
print("unreachable: rank 0 left the collective", flush=True)
sys.exit(0)
