"""DDP training in each rank of a job, against one process training on the whole batch.

For every variant, 5 SGD-momentum steps of an MLP under DDP (each rank on its shard of the batch)
must leave every rank's parameters equal to those of a model trained in this same process on the
whole batch, whose loss is the mean of the shards' losses (which is what DDP's averaged gradients
optimise, whatever parts of the model each shard uses). Prints "variant <name> ok <err>" on rank
0 for each variant, then "ddp ok".
"""

import sys

import numpy as np

import ndgrad as torch
import ndgrad.distributed as dist
from ndgrad import nn
from ndgrad.distributed.algorithms.ddp_comm_hooks import default_hooks
from ndgrad.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
SHARD = 4


class Net(nn.Module):
    """An MLP with a branch some shards skip and a layer nobody uses."""

    def __init__(self, extra: bool):
        super().__init__()
        self.l1 = nn.Linear(5, 16)
        self.l2 = nn.Linear(16, 16)
        self.l3 = nn.Linear(16, 3)
        if extra:
            self.branch = nn.Linear(16, 3)
            self.never = nn.Linear(4, 4)

    def forward(self, x, use_branch=False):
        h = torch.relu(self.l2(torch.tanh(self.l1(x))))
        out = self.l3(h)
        return out + self.branch(h) if use_branch else out


def make(dtype, extra=False):
    torch.manual_seed(0)
    return Net(extra).to(dtype)


def shard_batch(step: int, r: int, dtype):
    rng = np.random.default_rng(1000 * step + r)
    x = torch.from_numpy(rng.standard_normal((SHARD, 5))).to(dtype)
    y = torch.from_numpy(rng.standard_normal((SHARD, 3))).to(dtype)
    return x, y


def local_loss(model, step, r, dtype, branchy):
    x, y = shard_batch(step, r, dtype)
    return ((model(x, use_branch=branchy and r % 2 == 1) - y) ** 2).mean()


def train(dtype, steps=5, accumulate=1, branchy=False, hook=None, **ddp_kwargs):
    extra = bool(ddp_kwargs.get("find_unused_parameters"))
    ref = make(dtype, extra)
    model = make(dtype, extra)
    with torch.no_grad():  # rank 0's weights must win at construction
        for p in model.parameters():
            p.add_(rank)
    ddp = DDP(model, **ddp_kwargs)
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        for micro in range(accumulate):
            s = step * accumulate + micro
            full = sum(local_loss(ref, s, r, dtype, branchy) for r in range(world)) / world
            full.backward()
            if micro < accumulate - 1:
                with ddp.no_sync():
                    local_loss(ddp, s, rank, dtype, branchy).backward()
            else:
                local_loss(ddp, s, rank, dtype, branchy).backward()
        opt_ref.step()
        opt.step()
        opt_ref.zero_grad()
        opt.zero_grad()
    err = 0.0
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        scale = max(1.0, float(q.abs().max()))
        err = max(err, float((p - q).abs().max()) / scale)
    mine = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    for other in everyone:
        assert np.array_equal(other, mine), "parameters differ between ranks"
    if extra:
        assert model.never.weight.grad is None and model.never.bias.grad is None
    return err, ddp


VARIANTS = [
    ("plain", {}),
    ("small buckets", {"bucket_cap_mb": 0.0005}),
    ("no_sync", {"accumulate": 3}),
    ("gradient_as_bucket_view", {"gradient_as_bucket_view": True, "bucket_cap_mb": 0.0005}),
    ("find_unused_parameters", {"find_unused_parameters": True, "branchy": True}),
    ("find_unused + view + no_sync", {"find_unused_parameters": True, "branchy": True,
                                      "gradient_as_bucket_view": True, "accumulate": 2}),
    ("static_graph", {"static_graph": True, "find_unused_parameters": True}),
    ("allreduce_hook", {"hook": default_hooks.allreduce_hook, "bucket_cap_mb": 0.0005}),
    ("fp16_compress_hook", {"hook": default_hooks.fp16_compress_hook}),
]
for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-6)):
    for name, kw in VARIANTS:
        kw = dict(kw)
        err, _ = train(dtype, **kw)
        limit = 5e-3 if name == "fp16_compress_hook" else tol
        assert err <= limit, f"{name} {dtype}: error {err} > {limit}"
        if rank == 0:
            print(f"variant {name} {dtype} ok {err:.3g}")

# Without find_unused_parameters, a parameter that got no gradient fails the next forward.
ddp = DDP(make(torch.float64, extra=True))
local_loss(ddp, 0, rank, torch.float64, False).backward()
try:
    ddp(torch.zeros(1, 5, dtype=torch.float64))
except RuntimeError as e:
    assert "Expected to have finished reduction in the prior iteration" in str(e), e
    assert f"Parameter indices which did not receive grad for rank {rank}: 6 7 8 9" in str(e), e
else:
    raise AssertionError("no error for unused parameters")
try:
    ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    ddp.register_comm_hook(None, default_hooks.allreduce_hook)
except RuntimeError as e:
    assert "can only be called once" in str(e)
else:
    raise AssertionError("a second comm hook was accepted")
if rank == 0:
    print("ddp ok")
sys.stdout.flush()
