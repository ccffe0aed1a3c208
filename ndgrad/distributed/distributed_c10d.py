"""Process groups and collectives with ``torch.distributed``'s API, on MPI for CPU arrays and on
NCCL (through CuPy) for CUDA arrays of an ``"nccl"`` group.

Every collective is issued non-blocking and completed by a ``Work``: a blocking call is the same
call followed by ``wait()``, which polls the requests against the group's timeout, so a collective
that never completes raises ``DistBackendError`` instead of hanging (MPI's own wait cannot time
out). Reductions run in place on the tensor's own memory (``MPI_IN_PLACE``); a tensor that is
not contiguous goes through a contiguous copy written back on completion.
"""

from __future__ import annotations

import enum
import os
import time
from datetime import timedelta

import numpy as np

from .._dtype import INEXACT
from .._tensor import Tensor
from ..futures import Future
from . import _mpi

__all__ = [
    "Backend", "DistBackendError", "DistError", "GroupMember", "ProcessGroup", "ReduceOp", "Work",
    "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all",
    "all_to_all_single", "barrier", "broadcast", "broadcast_object_list", "default_pg_timeout",
    "destroy_process_group", "gather", "gather_object", "get_backend", "get_global_rank",
    "get_group_rank", "get_process_group_ranks", "get_rank", "get_world_size", "group",
    "init_process_group", "irecv", "is_available", "is_gloo_available", "is_initialized",
    "is_mpi_available", "is_nccl_available", "is_torchelastic_launched", "isend",
    "monitored_barrier", "new_group", "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor",
    "scatter", "scatter_object_list", "send",
]

default_pg_timeout = timedelta(minutes=30)
_yield = getattr(os, "sched_yield", lambda: time.sleep(0))
_NCCL_TIMEOUT = timedelta(minutes=10)
_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                    "init_process_group.")


class DistError(RuntimeError):
    """Base of the errors a collective raises (``torch.distributed.DistError``)."""


class DistBackendError(DistError):
    """The collective library failed or timed out."""


class RedOpType(enum.IntEnum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8
    UNUSED = 9

    def __repr__(self) -> str:
        return f"<RedOpType.{self.name}: {self.value}>"

    __str__ = __repr__


class ReduceOp:
    """``dist.ReduceOp.SUM`` and friends (PyTorch's names and values)."""

    RedOpType = RedOpType
    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM
    UNUSED = RedOpType.UNUSED


class Backend(str):
    """A backend name (``dist.Backend.GLOO == "gloo"``); ``Backend("GLOO")`` lowers the case."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"
    UCC = "ucc"
    backend_list = (UNDEFINED, GLOO, NCCL, UCC, MPI)

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError(  # noqa: TRY004 - PyTorch raises ValueError
                f"Backend constructor parameter must be string-ish, but got: {name}")
        value = getattr(Backend, name.upper(), Backend.UNDEFINED)
        if value == Backend.UNDEFINED:
            value = name.lower()
        return str.__new__(cls, value)


def is_available() -> bool:
    """Whether collectives can run here: mpi4py (and an MPI) is installed."""
    return _mpi.available()


def is_mpi_available() -> bool:
    return _mpi.available()


def is_gloo_available() -> bool:
    """``"gloo"`` groups run on MPI here."""
    return _mpi.available()


def is_nccl_available() -> bool:
    from . import _nccl
    return _nccl.available()


def is_torchelastic_launched() -> bool:
    """Whether the launcher (``python -m ndgrad.distributed.run``) started this process."""
    import os
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


# ---------------------------------------------------------------- work objects

class Work:
    """A collective in flight (``torch.distributed.Work``): ``wait`` completes it, raising if it
    failed or ran past the group's timeout; ``get_future`` hands a ``Future`` of its result."""

    __slots__ = (
        "_done",
        "_exc",
        "_finish",
        "_future",
        "_group",
        "_reqs",
        "_result",
        "_source",
        "_what",
    )

    def __init__(self, reqs, result, group, what: str, finish=None):
        self._reqs = reqs
        self._result = result
        self._group = group
        self._what = what
        self._finish = finish
        self._done = False
        self._exc = None
        self._future = None
        self._source = -1

    def _poll(self) -> bool:
        """One non-blocking look: did the requests complete? (Also what drives MPI's progress.)"""
        reqs = self._reqs
        if not reqs:
            return True
        if len(reqs) == 1:
            return reqs[0].Test()
        return _mpi.MPI().Request.Testall(reqs)

    def _complete(self) -> None:
        self._done = True
        finish = self._finish
        if finish is not None:
            self._finish = None
            try:
                finish()
            except BaseException as e:  # noqa: BLE001 - handed to the waiter
                self._exc = e
        fut = self._future
        if fut is not None and not fut.done():
            if self._exc is not None:
                fut.set_exception(self._exc)
            else:
                fut.set_result(self._result)

    def is_completed(self) -> bool:
        if not self._done and self._poll():
            self._complete()
        return self._done

    def wait(self, timeout: timedelta | None = None) -> bool:
        if not self._done:
            limit = timeout if timeout is not None else self._group._timeout
            deadline = time.monotonic() + limit.total_seconds()
            poll = self._poll
            n = 0
            # MPI progresses only inside MPI calls, so waiting is polling (MPI_Wait spins too).
            # After a short spin each poll yields the core: with more ranks than cores, the rank
            # we wait for may need this one to run.
            while not poll():
                n += 1
                if n > 32:
                    _yield()
                    if n & 255 == 0 and time.monotonic() > deadline:
                        self._exc = DistBackendError(
                            f"[Rank {self._group._rank}] Timed out waiting "
                            f"{int(limit.total_seconds() * 1000)}ms for {self._what} operation "
                            "to complete")
                        self._done = True
                        raise self._exc
            self._complete()
        if self._exc is not None:
            raise self._exc
        return True

    def synchronize(self) -> None:
        self.wait()

    def is_success(self) -> bool:
        return self.is_completed() and self._exc is None

    def exception(self):
        return self._exc

    def result(self) -> list:
        return self._result

    def source_rank(self) -> int:
        return self._source

    def get_future(self) -> Future:
        """A ``Future`` completed with ``result()``; waiting on it (or on a future chained to it
        with ``then``) completes the collective."""
        fut = self._future
        if fut is None:
            fut = self._future = Future()
            fut._drive = self.wait
            if self._done:
                self._complete()
        return fut


# ---------------------------------------------------------------- process groups

class ProcessGroup:
    """A set of ranks with its own communicator (MPI, plus NCCL communicators made on first use
    of a CUDA tensor in an ``"nccl"`` group)."""

    __slots__ = (
        "__weakref__",
        "_backend",
        "_comm",
        "_name",
        "_nccl",
        "_rank",
        "_ranks",
        "_size",
        "_timeout",
    )

    def __init__(self, comm, ranks, backend: str, timeout: timedelta, name: str):
        self._comm = comm
        self._ranks = ranks
        self._rank = comm.Get_rank()
        self._size = comm.Get_size()
        self._backend = backend
        self._timeout = timeout
        self._nccl = None
        self._name = name

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def name(self) -> str:
        return self._backend

    @property
    def group_name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"<ndgrad.distributed.ProcessGroup {self._name} ranks={self._ranks}>"


class GroupMember:
    NON_GROUP_MEMBER = -100
    WORLD = None  # set by init_process_group


class _GroupMeta(type):
    @property
    def WORLD(cls):
        return GroupMember.WORLD


class group(metaclass=_GroupMeta):
    pass


_groups: dict = {}  # ProcessGroup -> backend name as asked (``get_backend`` returns it)
_pg_count = 0


def is_initialized() -> bool:
    return GroupMember.WORLD is not None


def _world() -> ProcessGroup:
    pg = GroupMember.WORLD
    if pg is None:
        raise ValueError(_NOT_INITIALIZED)
    return pg


def _group(g) -> ProcessGroup | None:
    """The group to run on, or None when this rank is not a member."""
    if g is None:
        return _world()
    if g is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(g, ProcessGroup):
        raise TypeError(f"Invalid process group specified: {g!r}")
    return g


def _parse_timeout(timeout, backend: str) -> timedelta:
    if timeout is None:
        return _NCCL_TIMEOUT if backend == Backend.NCCL else default_pg_timeout
    if not isinstance(timeout, timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, "
                        f"got {timeout}")
    return timeout


def _check_backend(backend) -> str:
    if backend is None:
        from .._backend import cuda
        return "cpu:gloo,cuda:nccl" if cuda.available() else Backend.GLOO
    name = str(backend).lower()
    parts = [p.split(":")[-1] for p in name.split(",")]
    for part in parts:
        if part not in (Backend.GLOO, Backend.MPI, Backend.NCCL):
            raise AssertionError(f"Unknown backend type {backend}")
    if Backend.NCCL in parts and not is_nccl_available():
        raise RuntimeError("Distributed package doesn't have NCCL built in")
    return name


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: timedelta | None = None, world_size: int = -1, rank: int = -1,
                       store=None, group_name: str = "", pg_options=None, device_id=None) -> None:
    """Join the job's default group. The MPI launcher (``mpiexec`` or
    ``python -m ndgrad.distributed.run``) already knows every rank, so ``init_method`` and
    ``store`` need not say how to meet; a given ``rank`` / ``world_size`` must agree with it."""
    import os
    global _pg_count
    if GroupMember.WORLD is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if store is not None and init_method is not None:
        raise AssertionError("Cannot specify both init_method and store.")
    name = _check_backend(backend)
    MPI = _mpi.MPI()
    comm = MPI.COMM_WORLD
    job_rank, job_size = comm.Get_rank(), comm.Get_size()
    for what, given, env, actual in (("world_size", world_size, "WORLD_SIZE", job_size),
                                     ("rank", rank, "RANK", job_rank)):
        if given is None or given < 0:
            given = int(os.environ[env]) if env in os.environ else -1
        if given >= 0 and given != actual:
            if job_size == 1:
                raise RuntimeError(
                    f"init_process_group was asked for {what} {given}, but this process was not "
                    "started by an MPI launcher, so it is a job of one. Start the job with "
                    "`python -m ndgrad.distributed.run --nproc-per-node N script.py` (or "
                    "`mpiexec -n N python script.py`).")
            raise ValueError(f"init_process_group was given {what}={given}, but the MPI job "
                             f"that started this process has {what} {actual}")
    _mpi.abort_on_uncaught_exception()
    pg = ProcessGroup(comm.Dup(), list(range(job_size)), name, _parse_timeout(timeout, name),
                      group_name or str(_pg_count))
    _pg_count += 1
    _groups[pg] = name
    GroupMember.WORLD = pg


def destroy_process_group(group=None) -> None:
    global _pg_count
    if group is None or group is GroupMember.WORLD:
        if GroupMember.WORLD is None:
            raise AssertionError("Process group cannot be None")
        for pg in list(_groups):
            _free(pg)
        _groups.clear()
        GroupMember.WORLD = None
        _pg_count = 0
    elif group in _groups:
        _free(group)
        del _groups[group]


def _free(pg: ProcessGroup) -> None:
    if pg._nccl is not None:
        for comm in pg._nccl.values():
            comm.destroy()
        pg._nccl = None
    pg._comm.Free()


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization: bool = False, group_desc=None, device_id=None,
              sort_ranks: bool = True):
    """A group of some of the world's ranks; a rank outside it gets ``NON_GROUP_MEMBER``."""
    global _pg_count
    world = _world()
    if ranks is None or len(ranks) == 0:
        ranks = list(range(world._size))
    else:
        ranks = [int(r) for r in ranks]
        if sort_ranks:
            ranks = sorted(ranks)
        if len(ranks) > world._size:
            raise ValueError("the new group's world size should be less or equal to the world "
                             "size set by init_process_group")
        for r in ranks:
            if r < 0 or r >= world._size:
                raise ValueError("The new group's rank should be within the world_size set by "
                                 "init_process_group")
    name = _check_backend(backend) if backend is not None else _groups[world]
    _pg_count += 1
    if world._rank not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    mpi_group = world._comm.Get_group().Incl(ranks)
    comm = world._comm.Create_group(mpi_group, tag=_pg_count)
    mpi_group.Free()
    pg = ProcessGroup(comm, ranks, name, _parse_timeout(timeout, name) if timeout else
                      world._timeout, str(_pg_count - 1))
    _groups[pg] = name
    return pg


def get_rank(group=None) -> int:
    pg = _group(group)
    return -1 if pg is None else pg._rank if group is not None else _world()._rank


def get_world_size(group=None) -> int:
    pg = _group(group)
    return -1 if pg is None else pg._size


def get_backend(group=None) -> str:
    pg = _group(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    return _groups[pg]


def get_process_group_ranks(group) -> list:
    pg = _world() if group is None else group
    return list(pg._ranks)


def get_global_rank(group, group_rank: int) -> int:
    if group is None or group is GroupMember.WORLD:
        return group_rank
    if not 0 <= group_rank < len(group._ranks):
        raise ValueError(f"Group rank {group_rank} is not part of group {group}")
    return group._ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    if group is None or group is GroupMember.WORLD:
        return global_rank
    try:
        return group._ranks.index(global_rank)
    except ValueError:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}") from None


def _peer(pg: ProcessGroup, rank, group_rank, what: str) -> int:
    """The group rank a call names, from a global ``src``/``dst`` or a ``group_src``/``group_dst``."""
    if rank is not None and group_rank is not None:
        raise ValueError(f"Can only specify {what} or group_{what}")
    if group_rank is not None:
        return group_rank
    if rank is None:
        return 0
    return get_group_rank(pg if pg is not GroupMember.WORLD else None, rank)


# ---------------------------------------------------------------- buffers

def _check_tensor(t, name: str = "tensor") -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"torch.Tensor\n             but got {type(t)} instead.")


def _check_list(ts, name: str) -> None:
    if not isinstance(ts, list) or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        "List[torch.Tensor]\n             but got "
                        f"{type(ts)} with elements of type {[type(t) for t in ts]} instead.")


class _Host:
    """The contiguous host array an MPI call works on for ``t``: the tensor's own memory when it
    is a contiguous NumPy array, else a copy, written back by ``back()`` once the call ends."""

    __slots__ = ("a", "copied", "finish", "t")

    def __init__(self, t: Tensor, write: bool = True):
        self.t = t
        data = t._data
        if type(data) is np.ndarray:
            if data.flags.c_contiguous:
                self.a, self.copied = data, False
            else:
                self.a, self.copied = np.ascontiguousarray(data), True
        else:  # a CUDA array in a group without NCCL goes through the host
            self.a, self.copied = np.ascontiguousarray(data.get()), True
        self.finish = self.back if self.copied else None  # what completion must do, if anything
        if write:
            t._bump()

    def back(self) -> None:
        if self.copied:
            _store(self.t._data, self.a)


def _store(data, host) -> None:
    """Write the host array ``host`` into a tensor's array (NumPy, or CuPy on its device)."""
    if type(data) is np.ndarray:
        data[...] = host
    else:
        import cupy
        with cupy.cuda.Device(data.device.id):
            data[...] = cupy.asarray(host)


def _finisher(*steps):
    """One callable running the given completion steps (None where there is nothing to do)."""
    steps = [s for s in steps if s is not None]
    if len(steps) < 2:
        return steps[0] if steps else None

    def run():
        for s in steps:
            s()
    return run


def _avg(host: _Host, n: int):
    def divide():
        a = host.a
        if a.dtype in INEXACT:
            a /= n
        else:
            a[...] = np.trunc(a / n).astype(a.dtype)
    return divide


_REDUCTIONS: dict = {}  # (op, is bool) -> (op name, MPI op), filled on first use


def _reduction(op, dtype) -> tuple:
    """``ReduceOp`` ``op`` on arrays of ``dtype``: its name and the MPI operation."""
    key = (op, dtype == np.bool_)
    got = _REDUCTIONS.get(key)
    if got is None:
        try:
            red = RedOpType(int(op))
        except (TypeError, ValueError):
            raise ValueError(f"Invalid reduce op: {op!r}") from None
        if red in (RedOpType.PREMUL_SUM, RedOpType.UNUSED):
            raise ValueError(f"Cannot use ReduceOp.{red.name} with the MPI backend")
        got = _REDUCTIONS[key] = (red.name, _mpi.mpi_op(red.name, dtype))
    return got


def _nccl_for(pg: ProcessGroup, t: Tensor):
    """The group's NCCL communicator for ``t``'s device, when ``t`` is a CUDA tensor of a group
    that asked for NCCL; else None (the MPI path)."""
    if type(t._data) is np.ndarray or "nccl" not in _groups[pg]:
        return None
    from . import _nccl
    return _nccl.communicator(pg, t._data)


def _issue(pg, what, reqs, result, finish=None, async_op=False):
    work = Work(reqs, result, pg, what, finish)
    if async_op:
        return work
    work.wait()
    return None


# ---------------------------------------------------------------- collectives

def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    _check_tensor(tensor)
    pg = _group(group)
    if pg is None:
        return None
    nccl = _nccl_for(pg, tensor)
    if nccl is not None:
        tensor._bump()
        name = _reduction(op, tensor._data.dtype)[0]
        return _issue(pg, "allreduce", [nccl.all_reduce(tensor._data, name)], [tensor],
                      async_op=async_op)
    host = _Host(tensor)
    name, mop = _reduction(op, host.a.dtype)
    req = pg._comm.Iallreduce(_mpi.MPI().IN_PLACE, _mpi.buffer(host.a), mop)
    avg = _avg(host, pg._size) if name == "AVG" and host.a.dtype != np.bool_ else None
    return _issue(pg, "allreduce", [req], [tensor], _finisher(avg, host.finish), async_op)


def broadcast(tensor, src=None, group=None, async_op: bool = False, group_src=None):
    _check_tensor(tensor)
    pg = _group(group)
    if pg is None:
        return None
    root = _peer(pg, src, group_src, "src")
    if not 0 <= root < pg._size:
        raise RuntimeError(f"ProcessGroup::broadcast: invalid root rank: {root}")
    nccl = _nccl_for(pg, tensor)
    if nccl is not None:
        tensor._bump()
        return _issue(pg, "broadcast", [nccl.broadcast(tensor._data, root)], [tensor],
                      async_op=async_op)
    host = _Host(tensor)
    req = pg._comm.Ibcast(_mpi.buffer(host.a), root=root)
    return _issue(pg, "broadcast", [req], [tensor], host.finish, async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op: bool = False,
           group_dst=None):
    _check_tensor(tensor)
    pg = _group(group)
    if pg is None:
        return None
    root = _peer(pg, dst, group_dst, "dst")
    if not 0 <= root < pg._size:
        raise RuntimeError(f"ProcessGroup::reduce: invalid root rank: {root}")
    host = _Host(tensor)
    name, mop = _reduction(op, host.a.dtype)
    if pg._rank == root:
        req = pg._comm.Ireduce(_mpi.MPI().IN_PLACE, _mpi.buffer(host.a), mop, root=root)
        avg = _avg(host, pg._size) if name == "AVG" and host.a.dtype != np.bool_ else None
        return _issue(pg, "reduce", [req], [tensor], _finisher(avg, host.finish), async_op)
    req = pg._comm.Ireduce(_mpi.buffer(host.a), None, mop, root=root)
    return _issue(pg, "reduce", [req], [tensor], None, async_op)


def _check_sizes(what, ts, like) -> None:
    for i, t in enumerate(ts):
        if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
            exp = "(" + ", ".join(map(str, like.shape)) + ")"
            got = "(" + ", ".join(map(str, t.shape)) + ")"
            raise RuntimeError(f"ProcessGroup::{what}: invalid tensor size at index {i} "
                               f"(expected {exp}, got {got})")


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    _check_list(tensor_list, "tensor_list")
    _check_tensor(tensor)
    pg = _group(group)
    if pg is None:
        return None
    if len(tensor_list) != pg._size:
        raise RuntimeError(f"ProcessGroup::allgather: invalid output tensor list at index 0 "
                           f"(expected length {pg._size}, got {len(tensor_list)})")
    _check_sizes("allgather", tensor_list, tensor)
    src = _Host(tensor, write=False)
    out = np.empty((pg._size,) + src.a.shape, src.a.dtype)
    req = pg._comm.Iallgather(_mpi.buffer(src.a), _mpi.buffer(out))
    return _issue(pg, "allgather", [req], [tensor_list], _scatter_into(tensor_list, out),
                  async_op)


def _scatter_into(ts, stacked):
    def copy():
        for i, t in enumerate(ts):
            _write(t, stacked[i])
    return copy


def _write(t: Tensor, host) -> None:
    _store(t._data, host)
    t._bump()


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    pg = _group(group)
    if pg is None:
        return None
    if output_tensor.numel() != input_tensor.numel() * pg._size:
        raise ValueError("Output tensor size must be equal to world_size times input tensor "
                         "size")
    if output_tensor.dtype != input_tensor.dtype:
        raise ValueError("output tensor must have the same type as input tensor")
    nccl = _nccl_for(pg, input_tensor)
    if nccl is not None:
        output_tensor._bump()
        req = nccl.all_gather(input_tensor._data, output_tensor._data)
        return _issue(pg, "allgather", [req], [output_tensor], async_op=async_op)
    src = _Host(input_tensor, write=False)
    out = _Host(output_tensor)
    req = pg._comm.Iallgather(_mpi.buffer(src.a), _mpi.buffer(out.a))
    return _issue(pg, "allgather", [req], [output_tensor], out.finish, async_op)


def _reduce_scatter(pg, src, output, op, async_op):
    """Rank r's ``output`` gets the reduction over ranks of block r of ``src`` (MPI path)."""
    out = _Host(output)
    name, mop = _reduction(op, out.a.dtype)
    req = pg._comm.Ireduce_scatter_block(_mpi.buffer(src), _mpi.buffer(out.a), mop)
    avg = _avg(out, pg._size) if name == "AVG" and out.a.dtype != np.bool_ else None
    return _issue(pg, "reduce_scatter", [req], [output], _finisher(avg, out.finish), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op: bool = False):
    _check_tensor(output, "output")
    _check_list(input_list, "input_list")
    pg = _group(group)
    if pg is None:
        return None
    if len(input_list) != pg._size:
        raise ValueError(f"ProcessGroup::reduce_scatter: invalid input tensor list (expected "
                         f"length {pg._size}, got {len(input_list)})")
    _check_sizes("reduce_scatter", input_list, output)
    stacked = np.stack([_Host(t, write=False).a for t in input_list])
    return _reduce_scatter(pg, stacked, output, op, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    pg = _group(group)
    if pg is None:
        return None
    if input.numel() != output.numel() * pg._size:
        raise ValueError("Input tensor size must be equal to world_size times output tensor "
                         "size")
    nccl = _nccl_for(pg, input)
    if nccl is not None:
        output._bump()
        name = _reduction(op, output._data.dtype)[0]
        req = nccl.reduce_scatter(input._data, output._data, name)
        return _issue(pg, "reduce_scatter", [req], [output], async_op=async_op)
    return _reduce_scatter(pg, _Host(input, write=False).a, output, op, async_op)


def _check_root_list(pg, root: int, tensors, like, what: str, role: str, io: str) -> None:
    """A gather/scatter list: given on the root only, one tensor per rank shaped like ``like``."""
    name = f"{what}_list"
    if pg._rank != root:
        if tensors:
            raise ValueError(f"Argument ``{name}`` must NOT be specified on non-{role} ranks.")
        return
    if not tensors:
        raise ValueError(f"Argument ``{name}`` must be specified on {role} rank.")
    _check_list(tensors, name)
    if len(tensors) != pg._size:
        raise RuntimeError(f"ProcessGroup::{what}: Incorrect {io} list size {len(tensors)}. "
                           f"{io.capitalize()} list size should be {pg._size}, same as size of "
                           "the process group.")
    _check_sizes(what, tensors, like)


def gather(tensor, gather_list=None, dst=None, group=None, async_op: bool = False,
           group_dst=None):
    _check_tensor(tensor)
    pg = _group(group)
    if pg is None:
        return None
    root = _peer(pg, dst, group_dst, "dst")
    _check_root_list(pg, root, gather_list, tensor, "gather", "destination", "output")
    src = _Host(tensor, write=False)
    out = np.empty((pg._size,) + src.a.shape, src.a.dtype) if pg._rank == root else None
    req = pg._comm.Igather(_mpi.buffer(src.a), None if out is None else _mpi.buffer(out),
                           root=root)
    finish = _scatter_into(gather_list, out) if out is not None else None
    return _issue(pg, "gather", [req], [gather_list or []], finish, async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op: bool = False,
            group_src=None):
    _check_tensor(tensor)
    pg = _group(group)
    if pg is None:
        return None
    root = _peer(pg, src, group_src, "src")
    _check_root_list(pg, root, scatter_list, tensor, "scatter", "source", "input")
    stacked = None
    if pg._rank == root:
        stacked = np.stack([_Host(t, write=False).a for t in scatter_list])
    out = _Host(tensor)
    req = pg._comm.Iscatter(None if stacked is None else _mpi.buffer(stacked),
                            _mpi.buffer(out.a), root=root)
    return _issue(pg, "scatter", [req], [tensor], out.finish, async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op: bool = False):
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    pg = _group(group)
    if pg is None:
        return None
    src = _Host(input, write=False)
    out = _Host(output)
    n = pg._size

    def counts(splits, t, a):
        row = a.size // max(t.shape[0], 1) if t.dim() else 1
        if splits is None:
            if t.shape[0] % n:
                raise ValueError("Tensor's dim 0 does not divide equally across group size")
            splits = [t.shape[0] // n] * n
        c = [int(s) * row for s in splits]
        return c, [sum(c[:i]) for i in range(n)]

    sc, sd = counts(input_split_sizes, input, src.a)
    rc, rd = counts(output_split_sizes, output, out.a)
    req = pg._comm.Ialltoallv([src.a, (sc, sd)], [out.a, (rc, rd)])
    return _issue(pg, "alltoall", [req], [output], out.finish, async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op: bool = False):
    _check_list(output_tensor_list, "output_tensor_list")
    _check_list(input_tensor_list, "input_tensor_list")
    pg = _group(group)
    if pg is None:
        return None
    MPI = _mpi.MPI()
    reqs, outs = [], []
    for peer in range(pg._size):
        a = _Host(input_tensor_list[peer], write=False).a
        o = _Host(output_tensor_list[peer])
        outs.append(o)
        reqs.append(pg._comm.Isend(_mpi.buffer(a), dest=peer, tag=MPI.TAG_UB - 1))
        reqs.append(pg._comm.Irecv(_mpi.buffer(o.a), source=peer, tag=MPI.TAG_UB - 1))
    return _issue(pg, "alltoall", reqs, output_tensor_list,
                  _finisher(*[o.finish for o in outs]), async_op)


def barrier(group=None, async_op: bool = False, device_ids=None, timeout=None):
    pg = _group(group)
    if pg is None:
        return None
    work = Work([pg._comm.Ibarrier()], [], pg, "barrier")
    if async_op:
        return work
    work.wait(timeout)
    return None


def monitored_barrier(group=None, timeout=None, wait_all_ranks: bool = False) -> None:
    barrier(group, timeout=timeout)


def _p2p_peer(pg, rank, group_rank, what) -> int:
    peer = _peer(pg, rank, group_rank, what)
    if peer == pg._rank:
        word = "destination" if what == "dst" else "source"
        raise ValueError(f"Invalid {word} rank: {word} rank should not be the same as the rank "
                         "of the current process.")
    return peer


def isend(tensor, dst=None, group=None, tag: int = 0, group_dst=None):
    _check_tensor(tensor)
    pg = _group(group)
    if pg is None:
        return None
    peer = _p2p_peer(pg, dst, group_dst, "dst")
    a = _Host(tensor, write=False).a
    return Work([pg._comm.Isend(_mpi.buffer(a), dest=peer, tag=tag)], [tensor], pg, "send")


def irecv(tensor, src=None, group=None, tag: int = 0, group_src=None):
    _check_tensor(tensor)
    pg = _group(group)
    if pg is None:
        return None
    MPI = _mpi.MPI()
    any_source = src is None and group_src is None
    peer = MPI.ANY_SOURCE if any_source else _p2p_peer(pg, src, group_src, "src")
    host = _Host(tensor)
    return _RecvWork(pg._comm.Irecv(_mpi.buffer(host.a), source=peer, tag=tag), tensor, pg,
                     host, None if any_source else get_global_rank(pg, peer))


class _RecvWork(Work):
    """A receive: its ``source_rank`` is the sender, read from the MPI status for ANY_SOURCE."""

    __slots__ = ("_host", "_status")

    def __init__(self, req, tensor, pg, host: _Host, source):
        super().__init__([req], [tensor], pg, "recv", self._received)
        self._status = _mpi.MPI().Status()
        self._source = -1 if source is None else source
        self._host = host

    def _poll(self) -> bool:
        return self._reqs[0].Test(self._status)

    def _received(self) -> None:
        self._host.back()
        if self._source < 0:
            self._source = get_global_rank(self._group, self._status.Get_source())


def send(tensor, dst=None, group=None, tag: int = 0, group_dst=None) -> None:
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor, src=None, group=None, tag: int = 0, group_src=None) -> int:
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1
    work.wait()
    return work.source_rank()


# ---------------------------------------------------------------- objects

def all_gather_object(object_list, obj, group=None) -> None:
    pg = _group(group)
    if pg is None:
        return
    got = pg._comm.allgather(obj)
    for i, o in enumerate(got):
        object_list[i] = o


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None) -> None:
    pg = _group(group)
    if pg is None:
        return
    root = _peer(pg, dst, group_dst, "dst")
    got = pg._comm.gather(obj, root=root)
    if pg._rank == root:
        if object_gather_list is None:
            raise ValueError("Argument ``object_gather_list`` must be specified on destination "
                             "rank.")
        for i, o in enumerate(got):
            object_gather_list[i] = o


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    pg = _group(group)
    if pg is None:
        return
    root = _peer(pg, src, group_src, "src")
    got = pg._comm.bcast(list(object_list) if pg._rank == root else None, root=root)
    object_list[:] = got


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None) -> None:
    pg = _group(group)
    if pg is None:
        return
    root = _peer(pg, src, group_src, "src")
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at "
                         "least 1.")
    got = pg._comm.scatter(list(scatter_object_input_list) if pg._rank == root else None,
                           root=root)
    scatter_object_output_list[0] = got
