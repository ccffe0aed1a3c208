"""A collective that never completes raises DistBackendError after the group's timeout."""

import time
from datetime import timedelta

import ndgrad as torch
import ndgrad.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=1))
if dist.get_rank() == 0:
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(3))
    except dist.DistBackendError as e:
        assert isinstance(e, RuntimeError)
        print(f"timed out after {time.monotonic() - start:.2f}s: {e}", flush=True)
    # a wait can also be bounded on its own
    work = dist.barrier(async_op=True)
    try:
        work.wait(timeout=timedelta(milliseconds=200))
    except RuntimeError as e:
        print("barrier:", e, flush=True)
    raise SystemExit(3)  # ends the job (rank 1 never joins those collectives)
time.sleep(60)
