"""What ndgrad needs of MPI: the rank a launcher gave this process, the abort that ends a job
whose rank failed, and the datatype and reduction tables for NumPy buffers.

mpi4py is imported only here and only when a process group is made (or a job aborts), so that
``import ndgrad`` costs nothing on a machine without it.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

import numpy as np

INSTALL = ("ndgrad.distributed runs on MPI through mpi4py, which is not installed: "
           "pip install 'ndgrad[distributed]' (mpi4py and MPICH)")

# (rank, size, local rank, local size) variables of the launchers we know, in that order.
_LAUNCHERS = (
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),  # MPICH's hydra
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),  # Open MPI
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None),  # srun --mpi=pmix
    ("PMIX_RANK", None, None, None),
)


def launch_env():
    """``(rank, world, local_rank, local_world)`` as an MPI launcher set them, or None when this
    process was not started by one (a plain ``python`` run is a job of one)."""
    env = os.environ
    for rank, size, local, local_size in _LAUNCHERS:
        if rank in env and (size is None or size in env):
            r = int(env[rank])
            n = int(env[size]) if size else None
            lr = int(env[local]) if local and local in env else None
            ln = int(env[local_size]) if local_size and local_size in env else None
            if ln is None and "SLURM_TASKS_PER_NODE" in env:
                ln = int(env["SLURM_TASKS_PER_NODE"].split("(")[0].split(",")[0])
            return r, n, lr, ln
    return None


def export_torchrun_env() -> None:
    """Give a rank started by ``mpiexec`` the variables torchrun sets (``RANK``, ``LOCAL_RANK``,
    ``WORLD_SIZE``, ...), so that scripts which read them before ``init_process_group`` run
    unchanged; a variable already set (by our launcher or the user) is left alone."""
    got = launch_env()
    if got is None:
        return
    rank, world, local, local_world = got
    if world is None:
        return
    env = os.environ
    env.setdefault("RANK", str(rank))
    env.setdefault("WORLD_SIZE", str(world))
    env.setdefault("LOCAL_RANK", str(local if local is not None else rank))
    env.setdefault("LOCAL_WORLD_SIZE", str(local_world if local_world is not None else world))
    env.setdefault("GROUP_RANK", str(rank // int(env["LOCAL_WORLD_SIZE"])))
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("MASTER_PORT", "29500")


_module = None


def MPI():
    global _module
    if _module is None:
        try:
            from mpi4py import MPI as mod
        except ImportError as e:
            raise RuntimeError(INSTALL) from e
        _module = mod
    return _module


def available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


_previous_hook = None


def abort(code: int = 1) -> None:
    """End the whole job now, if this process is one rank of several (else do nothing)."""
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    mod = sys.modules.get("mpi4py.MPI")
    if mod is not None and mod.Is_initialized() and not mod.Is_finalized() \
            and mod.COMM_WORLD.Get_size() > 1:
        sys.stderr.flush()
        sys.stdout.flush()
        mod.COMM_WORLD.Abort(code)


def _abort_on_uncaught(kind, value, tb) -> None:
    """An uncaught exception in one rank would leave the others waiting in a collective for
    ever (MPI_Finalize at exit waits for them): print it, then abort the whole job."""
    if _previous_hook is sys.__excepthook__:
        # One write, and a moment for the launcher to relay it: the default hook writes line by
        # line, and MPICH's launcher drops what it has not read yet when the abort arrives.
        sys.stderr.write("".join(traceback.format_exception(kind, value, tb)))
        sys.stderr.flush()
        time.sleep(0.2)
    else:
        _previous_hook(kind, value, tb)
    abort(1)


def abort_on_uncaught_exception() -> None:
    global _previous_hook
    if _previous_hook is None:
        _previous_hook = sys.excepthook
        sys.excepthook = _abort_on_uncaught


# Reductions on booleans are logical in MPI (and in PyTorch: a sum of bools is their "or").
_BOOL_OPS = {"SUM": "LOR", "AVG": "LOR", "MAX": "LOR", "BOR": "LOR", "PRODUCT": "LAND",
             "MIN": "LAND", "BAND": "LAND", "BXOR": "LXOR"}
_OPS = {"SUM": "SUM", "AVG": "SUM", "PRODUCT": "PROD", "MIN": "MIN", "MAX": "MAX",
        "BAND": "BAND", "BOR": "BOR", "BXOR": "BXOR"}


def mpi_op(op_name: str, dtype):
    """The MPI reduction for PyTorch's ``ReduceOp`` of that name on ``dtype`` (AVG is a SUM
    divided afterwards)."""
    table = _BOOL_OPS if dtype == np.bool_ else _OPS
    return getattr(MPI(), table[op_name])


def buffer(array):
    """``array`` as an MPI buffer spec (mpi4py maps NumPy's dtypes, float16 included, itself)."""
    if array.dtype == np.bool_:
        return [array, MPI().C_BOOL]
    return array
