"""Collectives and DDP on CUDA tensors (run where CuPy sees a GPU): an ``"nccl"`` group runs on
NCCL on its own stream, ordered after the caller's stream with events; a ``"gloo"`` group moves
CUDA tensors through the host. NCCL refuses two ranks on one GPU, so with fewer GPUs than ranks
only the gloo half runs. Prints "cuda ok <checks>" on rank 0.
"""

import sys

import numpy as np

import ndgrad as torch
import ndgrad.distributed as dist

backend = sys.argv[1]
dist.init_process_group(backend)
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", rank % torch.cuda.device_count())
torch.cuda.set_device(dev)
checks = 0


def check(t, want, what):
    global checks
    got = t.cpu().numpy()
    if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
        raise AssertionError(f"rank {rank}: {what}: got {got}, want {want}")
    checks += 1


for dtype in (torch.float32, torch.float64, torch.float16, torch.int64):
    t = (torch.arange(6, device=dev) * (rank + 1)).to(dtype)
    dist.all_reduce(t)
    check(t, np.arange(6) * sum(range(1, world + 1)), f"all_reduce {dtype}")
    t = torch.full((4,), float(rank), device=dev).to(dtype)
    dist.broadcast(t, src=world - 1)
    check(t, np.full(4, world - 1), f"broadcast {dtype}")
    out = torch.zeros(world * 3, device=dev).to(dtype)
    dist.all_gather_into_tensor(out, torch.full((3,), float(rank), device=dev).to(dtype))
    check(out, np.repeat(np.arange(world), 3), f"all_gather_into_tensor {dtype}")
    out = torch.zeros(2, device=dev).to(dtype)
    dist.reduce_scatter_tensor(out, torch.arange(2 * world, device=dev).to(dtype))
    check(out, np.arange(2 * rank, 2 * rank + 2) * world, f"reduce_scatter_tensor {dtype}")

# the collective is ordered after work queued on a side stream that the caller waits on
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    t = torch.ones(1 << 20, device=dev) * (rank + 1)
torch.cuda.current_stream().wait_stream(side)
work = dist.all_reduce(t, async_op=True)
work.wait()
check(t[:3], np.full(3, sum(range(1, world + 1))), "all_reduce after a side stream")

# DDP on CUDA parameters matches one process on the whole batch
torch.manual_seed(0)
ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).to(dev)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).to(dev)
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index],
                                                bucket_cap_mb=0.0005)
opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
for step in range(4):
    xs = [torch.from_numpy(np.random.default_rng(10 * step + r).standard_normal((4, 8))
                           .astype(np.float32)).to(dev) for r in range(world)]
    (sum(ref(x).pow(2).mean() for x in xs) / world).backward()
    ddp(xs[rank]).pow(2).mean().backward()
    for o in (opt_ref, opt):
        o.step()
        o.zero_grad()
for p, q in zip(model.parameters(), ref.parameters()):
    check(p, q.detach().cpu().numpy(), "ddp on cuda")
if rank == 0:
    print(f"cuda ok {checks} backend {backend} world {world}", flush=True)
dist.destroy_process_group()
