"""ndgrad's DDP against PyTorch's DDP (gloo) in the same ranks: bucket assignment before and after
the rebuild (read through a comm hook, which sees each bucket's parameters), and training of a
model with BatchNorm (parameters and buffers after 4 steps). Prints "torch ddp ok" on rank 0.
"""

import numpy as np
import torch as T
import torch.distributed as tdist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as tdh

import ndgrad as nd
import ndgrad.distributed as dist
from ndgrad.distributed.algorithms.ddp_comm_hooks import default_hooks as ndh

dist.init_process_group("gloo")
tdist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert (rank, world) == (tdist.get_rank(), tdist.get_world_size())


def mlp(lib, sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(lib.nn.Linear(sizes[i], sizes[i + 1]))
        layers.append(lib.nn.Tanh())
    return lib.nn.Sequential(*layers[:-1])


def buckets_seen(lib, hooks, sizes, iterations=3, **kw):
    """The parameter indices of each bucket, per iteration, as the comm hook saw them."""
    lib.manual_seed(0)
    model = mlp(lib, sizes)
    index = {id(p): i for i, p in enumerate(model.parameters())}
    ddp = lib.nn.parallel.DistributedDataParallel(model, **kw)
    seen = []

    def hook(state, bucket):
        seen[-1].append(sorted(index[id(p)] for p in bucket.parameters()))
        return hooks.allreduce_hook(state, bucket)
    ddp.register_comm_hook(None, hook)
    for _ in range(iterations):
        seen.append([])
        ddp(lib.ones(2, sizes[0])).sum().backward()
    return seen


CASES = [
    ([5, 16, 16, 3], {"bucket_cap_mb": 0.001}),
    ([5, 16, 16, 3], {"bucket_cap_mb": 0.001, "find_unused_parameters": True}),
    ([5, 16, 16, 3], {"bucket_cap_mb": 0.001, "static_graph": True}),
    ([300, 600, 600, 600, 10], {}),  # the 1 MiB first bucket, then 25 MiB
    ([300, 600, 600, 600, 10], {"find_unused_parameters": True}),
    ([64, 256, 256, 8], {"bucket_cap_mb": 0.1}),
]
for sizes, kw in CASES:
    ours = buckets_seen(nd, ndh, sizes, **kw)
    theirs = buckets_seen(T, tdh, sizes, **kw)
    assert ours == theirs, (sizes, kw, ours, theirs)
    if rank == 0:
        print("buckets", sizes, kw, ours[0], "->", ours[-1])


def bn_model(lib):
    return lib.nn.Sequential(lib.nn.Linear(6, 12), lib.nn.BatchNorm1d(12), lib.nn.ReLU(),
                             lib.nn.Linear(12, 2)).double()


T.manual_seed(0)
tmodel = bn_model(T)
nmodel = bn_model(nd)
state = {k: nd.from_numpy(v.detach().numpy().copy()) for k, v in tmodel.state_dict().items()}
nmodel.load_state_dict(state)
tddp = T.nn.parallel.DistributedDataParallel(tmodel)
nddp = nd.nn.parallel.DistributedDataParallel(nmodel)
topt = T.optim.SGD(tddp.parameters(), lr=0.05, momentum=0.9)
nopt = nd.optim.SGD(nddp.parameters(), lr=0.05, momentum=0.9)
for step in range(4):
    rng = np.random.default_rng(10 * step + rank)
    x = rng.standard_normal((5, 6))
    y = rng.standard_normal((5, 2))
    tl = ((tddp(T.from_numpy(x)) - T.from_numpy(y)) ** 2).mean()
    nl = ((nddp(nd.from_numpy(x)) - nd.from_numpy(y)) ** 2).mean()
    tl.backward()
    nl.backward()
    topt.step()
    nopt.step()
    topt.zero_grad()
    nopt.zero_grad()
tstate, nstate = tmodel.state_dict(), nmodel.state_dict()
assert list(tstate) == list(nstate)
for k in tstate:
    err = np.abs(tstate[k].numpy() - nstate[k].numpy()).max()
    assert err <= 1e-12, (k, err)
ddp_keys = set(nddp.state_dict())
assert ddp_keys == set(tddp.state_dict()), (ddp_keys ^ set(tddp.state_dict()))
if rank == 0:
    print("torch ddp ok")
