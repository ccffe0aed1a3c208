"""``ndgrad.distributed`` in one process: the API's names and errors, the launcher's command line,
bucket assignment against PyTorch's, and DDP in a job of one (no mpiexec needed)."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest

import ndgrad as nd
import ndgrad.distributed as dist
from ndgrad.distributed import run as launcher


def test_reduce_op_and_backend_names():
    assert int(dist.ReduceOp.SUM) == 0 and int(dist.ReduceOp.AVG) == 1
    assert repr(dist.ReduceOp.SUM) == "<RedOpType.SUM: 0>"
    assert list(dist.ReduceOp.RedOpType.__members__)[:9] == [
        "SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"]
    assert dist.Backend("GLOO") == "gloo" and dist.Backend.NCCL == "nccl"
    assert issubclass(dist.DistBackendError, RuntimeError)
    assert dist.default_pg_timeout == timedelta(minutes=30)


def test_calls_before_init_raise_as_pytorch():
    assert not dist.is_initialized()
    for call in (dist.get_rank, dist.get_world_size, dist.barrier,
                 lambda: dist.all_reduce(nd.ones(2))):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            call()


def test_launcher_accepts_torchrun_flags_in_both_spellings():
    a = launcher.parse_args(["--nproc-per-node", "4", "--master-port", "1234", "--node_rank",
                             "0", "--nnodes", "1", "--rdzv_backend", "c10d", "--max_restarts",
                             "3", "train.py", "--lr", "0.1"])
    b = launcher.parse_args(["--nproc_per_node=4", "--master_port=1234", "train.py", "--lr",
                             "0.1"])
    for ns in (a, b):
        assert ns.nproc_per_node == "4" and ns.master_port == 1234
        assert ns.training_script == "train.py" and ns.training_script_args == ["--lr", "0.1"]
    m = launcher.parse_args(["--standalone", "-m", "pkg.mod", "x"])
    assert m.module and m.standalone and m.training_script == "pkg.mod"
    cmd = launcher.mpiexec_command(3, ["python", "t.py"])
    assert cmd[1:3] == ["-n", "3"] and cmd[-2:] == ["python", "t.py"]
    with pytest.raises(ValueError, match="Unsupported nproc_per_node"):
        launcher._nproc("many")


def _random_tensors(rng, lib):
    dtypes = [lib.float32, lib.float64, lib.float16]
    out = []
    for _ in range(rng.randint(1, 12)):
        shape = [rng.randint(1, 40) for _ in range(rng.randint(1, 3))]
        out.append(lib.zeros(*shape, dtype=rng.choice(dtypes)))
    return out


def test_bucket_assignment_matches_pytorch():
    torch = pytest.importorskip("torch")
    import torch.distributed as tdist
    rng = random.Random(0)
    for _ in range(200):
        seed = rng.random()
        ours = _random_tensors(random.Random(seed), nd)
        theirs = _random_tensors(random.Random(seed), torch)
        limits = sorted(rng.randint(8, 3000) for _ in range(rng.randint(1, 3)))
        order = list(range(len(ours)))
        rng.shuffle(order)
        for indices in (None, order):
            if indices is None:
                got = dist._compute_bucket_assignment_by_size(ours, limits)
                want = tdist._compute_bucket_assignment_by_size(theirs, limits,
                                                                 [False] * len(ours))
            else:
                got = dist._compute_bucket_assignment_by_size(
                    [ours[i] for i in indices], limits, None, indices)
                want = tdist._compute_bucket_assignment_by_size(
                    [theirs[i] for i in indices], limits, [False] * len(ours), indices)
            if len({(t.dtype) for t in ours}) == 1:
                assert got == tuple(want) or list(got) == list(want), (limits, got, want)
            else:  # PyTorch's leftover buckets come from a hash map: same set, any order
                assert sorted(map(tuple, got[0])) == sorted(map(tuple, want[0]))


@pytest.fixture
def world_of_one():
    pytest.importorskip("mpi4py")
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_job_of_one(world_of_one):
    assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_backend() == "gloo"
    t = nd.arange(4.0)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    np.testing.assert_array_equal(t.numpy(), np.arange(4.0))
    with pytest.raises(ValueError, match="twice"):
        dist.init_process_group("gloo")
    fut = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    np.testing.assert_array_equal(fut.wait().numpy(), np.arange(4.0) * 2)


def test_init_outside_a_launcher_asks_for_one():
    pytest.importorskip("mpi4py")
    with pytest.raises(RuntimeError, match="not started by an MPI launcher"):
        dist.init_process_group("gloo", rank=0, world_size=2)
    assert not dist.is_initialized()
    with pytest.raises(AssertionError, match="Unknown backend type foo"):
        dist.init_process_group("foo")


def test_ddp_in_a_job_of_one_trains_like_the_module(world_of_one):
    nd.manual_seed(0)
    ref = nd.nn.Sequential(nd.nn.Linear(4, 8), nd.nn.Tanh(), nd.nn.Linear(8, 2)).double()
    nd.manual_seed(0)
    model = nd.nn.Sequential(nd.nn.Linear(4, 8), nd.nn.Tanh(), nd.nn.Linear(8, 2)).double()
    ddp = nd.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0001,
                                                 gradient_as_bucket_view=True)
    assert list(ddp.state_dict()) == ["module." + k for k in model.state_dict()]
    x = nd.randn(5, 4, dtype=nd.float64)
    for _ in range(3):
        for m in (ref, ddp):
            m.zero_grad()
            m(x).pow(2).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    assert ddp.reducer.has_rebuilt and len(ddp.reducer.buckets) > 1
    # with gradient_as_bucket_view, every .grad is a view of its bucket
    flats = [b.flat for b in ddp.reducer.buckets]
    for p in model.parameters():
        assert any(np.shares_memory(p.grad.numpy(), f) for f in flats)
    data = ddp._get_ddp_logging_data()
    for key in ("avg_backward_compute_time", "avg_backward_comm_time",
                "avg_backward_compute_comm_overlap_time"):
        assert data[key] >= 0
    assert data["has_rebuilt_buckets"] == 1 and data["world_size"] == 1


def test_backward_outside_ddp_forward_and_no_sync_do_not_reduce(world_of_one):
    model = nd.nn.Linear(3, 1)
    ddp = nd.nn.parallel.DistributedDataParallel(model)
    model(nd.ones(2, 3)).sum().backward()  # not through DDP: its hooks do nothing
    assert not ddp.reducer.require_finalize
    with ddp.no_sync():
        ddp(nd.ones(2, 3)).sum().backward()
    assert not ddp.reducer.require_finalize
    np.testing.assert_allclose(model.weight.grad.numpy(), np.full((1, 3), 4.0))
    ddp(nd.ones(2, 3)).sum().backward()
    np.testing.assert_allclose(model.weight.grad.numpy(), np.full((1, 3), 6.0))


def test_a_parameter_ready_twice_raises_as_pytorch(world_of_one):
    # A parameter used outside forward: the graph walk finds it unused and marks it ready at the
    # first hook, then its own gradient arrives.
    class Two(nd.nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nd.nn.Linear(3, 3)
            self.outside = nd.nn.Linear(3, 3)

        def forward(self, x):
            return self.used(x)

    model = Two()
    ddp = nd.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    loss = ddp(nd.randn(2, 3)).sum() + model.outside(nd.randn(2, 3)).sum()
    with pytest.raises(RuntimeError, match="Expected to mark a variable ready only once") as e:
        loss.backward()
    assert "with name outside." in str(e.value) and "has been marked as ready twice" in str(e.value)
