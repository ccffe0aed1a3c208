"""Every collective x dtype against NumPy, in each rank of a job (tests/distributed).

Rank r's input is a small function of r, so every rank can compute what each collective must give
from all ranks' inputs without communicating. Prints "collectives ok <count>" on rank 0.
"""

import functools
import sys

import numpy as np

import ndgrad as torch
import ndgrad.distributed as dist

dist.init_process_group(backend=sys.argv[1] if len(sys.argv) > 1 else "gloo")
rank, world = dist.get_rank(), dist.get_world_size()
DTYPES = [torch.float16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16,
          torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128]
checks = 0


def data(r: int, dtype, shape=(2, 3)) -> np.ndarray:
    n = int(np.prod(shape))
    a = (np.arange(n) * (r + 2) + 3 * r + 1) % 5 + 1
    if dtype == torch.bool:
        return (a % 2 == 0).reshape(shape)
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    if dtype.is_complex:
        return (a + 1j * (a % 3)).astype(np_dtype).reshape(shape)
    return a.astype(np_dtype).reshape(shape)


def tensor(r: int, dtype, shape=(2, 3)):
    return torch.from_numpy(data(r, dtype, shape).copy())


def check(got, want, what: str) -> None:
    global checks
    got = got.numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    want = np.asarray(want)
    if got.dtype.kind in "fc":
        tol = 1e-2 if got.dtype == np.float16 else 1e-6
        ok = got.shape == want.shape and np.allclose(got, want, rtol=tol, atol=tol)
    else:
        ok = got.shape == want.shape and np.array_equal(got, want)
    if not ok:
        raise AssertionError(f"rank {rank}: {what}: got {got!r}, want {want!r}")
    checks += 1


def expected(op, dtype, shape=(2, 3)):
    arrays = [data(r, dtype, shape) for r in range(world)]
    if dtype == torch.bool:
        fn = {"SUM": np.logical_or, "MAX": np.logical_or, "BOR": np.logical_or,
              "PRODUCT": np.logical_and, "MIN": np.logical_and, "BAND": np.logical_and,
              "BXOR": np.logical_xor, "AVG": np.logical_or}[op]
        return functools.reduce(fn, arrays)
    fn = {"SUM": np.add, "AVG": np.add, "PRODUCT": np.multiply, "MIN": np.minimum,
          "MAX": np.maximum, "BAND": np.bitwise_and, "BOR": np.bitwise_or,
          "BXOR": np.bitwise_xor}[op]
    out = functools.reduce(fn, arrays)
    if op == "AVG":
        out = out / world if out.dtype.kind in "fc" else np.trunc(out / world).astype(out.dtype)
    return out


def ops_for(dtype):
    ops = ["SUM", "PRODUCT", "AVG"]
    if not dtype.is_complex:
        ops += ["MIN", "MAX"]
    if dtype == torch.bool or not (dtype.is_floating_point or dtype.is_complex):
        ops += ["BAND", "BOR", "BXOR"]
    return ops


for dtype in DTYPES:
    for op in ops_for(dtype):
        t = tensor(rank, dtype)
        version = t._version
        assert dist.all_reduce(t, op=getattr(dist.ReduceOp, op)) is None
        check(t, expected(op, dtype), f"all_reduce {op} {dtype}")
        assert t._version > version
        # async, through the work object and its future
        t = tensor(rank, dtype)
        work = dist.all_reduce(t, op=getattr(dist.ReduceOp, op), async_op=True)
        fut = work.get_future()
        assert work.wait() is True and work.is_completed() and work.is_success()
        check(fut.wait()[0], expected(op, dtype), f"all_reduce async {op} {dtype}")
        assert work.result()[0] is t
    for src in range(world):
        t = tensor(rank, dtype)
        dist.broadcast(t, src=src)
        check(t, data(src, dtype), f"broadcast from {src} {dtype}")
    for dst in range(world):
        t = tensor(rank, dtype)
        dist.reduce(t, dst=dst, op=dist.ReduceOp.SUM)
        if rank == dst:
            check(t, expected("SUM", dtype), f"reduce to {dst} {dtype}")
    outs = [torch.zeros(2, 3, dtype=dtype) for _ in range(world)]
    dist.all_gather(outs, tensor(rank, dtype))
    for r in range(world):
        check(outs[r], data(r, dtype), f"all_gather {dtype}")
    for shape in ((world * 2, 3), (world, 2, 3)):
        out = torch.zeros(*shape, dtype=dtype)
        dist.all_gather_into_tensor(out, tensor(rank, dtype))
        check(out, np.concatenate([data(r, dtype)[None] for r in range(world)]).reshape(shape),
              f"all_gather_into_tensor {shape} {dtype}")
    # reduce_scatter: rank r receives the sum over ranks of their r-th input
    inputs = [tensor(rank + 10 * i, dtype) for i in range(world)]
    out = torch.zeros(2, 3, dtype=dtype)
    dist.reduce_scatter(out, inputs)
    want = functools.reduce(np.add if dtype != torch.bool else np.logical_or,
                            [data(r + 10 * rank, dtype) for r in range(world)])
    check(out, want, f"reduce_scatter {dtype}")
    out = torch.zeros(2, 3, dtype=dtype)
    dist.reduce_scatter_tensor(out, torch.cat(inputs))
    check(out, want, f"reduce_scatter_tensor {dtype}")
    for dst in range(world):
        got = [torch.zeros(2, 3, dtype=dtype) for _ in range(world)] if rank == dst else None
        dist.gather(tensor(rank, dtype), got, dst=dst)
        if rank == dst:
            for r in range(world):
                check(got[r], data(r, dtype), f"gather to {dst} {dtype}")
    for src in range(world):
        t = torch.zeros(2, 3, dtype=dtype)
        parts = [tensor(100 * src + r, dtype) for r in range(world)] if rank == src else None
        dist.scatter(t, parts, src=src)
        check(t, data(100 * src + rank, dtype), f"scatter from {src} {dtype}")

# point to point: a ring, blocking and not
right, left = (rank + 1) % world, (rank - 1) % world
t = torch.zeros(4)
if rank % 2 == 0:
    dist.send(torch.full((4,), float(rank)), dst=right)
    assert dist.recv(t, src=left) == left
else:
    assert dist.recv(t) == left  # any source
    dist.send(torch.full((4,), float(rank)), dst=right)
check(t, np.full(4, float(left), np.float32), "send/recv")
r_work = dist.irecv(t, src=left, tag=7)
s_work = dist.isend(torch.full((4,), rank + 0.5), dst=right, tag=7)
s_work.wait()
r_work.wait()
check(t, np.full(4, left + 0.5, np.float32), "isend/irecv")

# a non-contiguous tensor is reduced through a copy written back into its memory
base = torch.from_numpy(np.arange(12, dtype=np.float64).reshape(3, 4) * (rank + 1))
view = base.t()
dist.all_reduce(view)
check(base, np.arange(12.0).reshape(3, 4) * sum(range(1, world + 1)), "non-contiguous")

objs = [None] * world
dist.all_gather_object(objs, {"rank": rank, "sq": rank * rank})
check(np.array([o["sq"] for o in objs]), np.arange(world) ** 2, "all_gather_object")
lst = [rank, "x", None]
dist.broadcast_object_list(lst, src=world - 1)
assert lst == [world - 1, "x", None], lst
dist.barrier()
dist.barrier(async_op=True).wait()

# groups: the first two ranks, and the world's other ranks outside it
sub = dist.new_group([0, 1])
t = torch.full((3,), float(rank + 1))
dist.all_reduce(t, group=sub)
if rank < 2:
    check(t, np.full(3, 3.0, np.float32), "group all_reduce")
    assert dist.get_world_size(sub) == 2 and dist.get_rank(sub) == rank
else:
    assert sub == dist.GroupMember.NON_GROUP_MEMBER
    check(t, np.full(3, rank + 1.0, np.float32), "non-member untouched")
if world > 2:
    top = dist.new_group([world - 1, world - 2])
    t = torch.full((2,), float(rank))
    dist.broadcast(t, src=world - 1, group=top)
    if rank >= world - 2:
        check(t, np.full(2, world - 1.0, np.float32), "group broadcast by global rank")
        assert dist.get_process_group_ranks(top) == [world - 2, world - 1]

# errors, as PyTorch words them
for call, kind, text in [
        (lambda: dist.all_reduce([1.0]), TypeError, "Expected parameter `tensor` of type"),
        (lambda: dist.broadcast(torch.ones(2), src=world + 3), RuntimeError, "invalid root rank"),
        (lambda: dist.all_gather([torch.ones(2)], torch.ones(2)), RuntimeError,
         f"expected length {world}, got 1"),
        (lambda: dist.send(torch.ones(2), dst=rank), ValueError, "should not be the same"),
        (lambda: dist.init_process_group("gloo"), ValueError, "twice"),
        (lambda: dist.new_group([0, world + 1]), ValueError, "rank should be within")]:
    try:
        call()
    except kind as e:
        assert text in str(e), (text, str(e))
        checks += 1
    else:
        raise AssertionError(f"no {kind.__name__} for {text}")

dist.barrier()
if rank == 0:
    print(f"collectives ok {checks} world {world} backend {dist.get_backend()}")
dist.destroy_process_group()
assert not dist.is_initialized()
