"""``ndgrad.multiprocessing``: Python's ``multiprocessing`` plus ``spawn`` (``torch.multiprocessing``).

``spawn(fn, args, nprocs)`` makes an MPI job of ``nprocs`` ranks, so that collectives run on MPI:
the first call re-runs the calling script under ``mpiexec`` with the same arguments and waits for
the job; in each rank, the script reaches the same ``spawn`` call, which runs ``fn(rank, *args)``
and ends the process. Code before ``spawn`` therefore runs in every rank too (as with the "spawn"
start method, which re-imports the main module), and code after it runs in the parent only.
"""

from __future__ import annotations

import multiprocessing as _mp
import os
import subprocess
import sys
from multiprocessing import *

__all__ = [n for n in _mp.__all__] + [
    "spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
    "ProcessExitedException", "SpawnContext", "get_all_sharing_strategies",
    "get_sharing_strategy", "set_sharing_strategy"]

_IN_JOB = "NDGRAD_SPAWN_JOB"  # set in the ranks of a job that ``spawn`` started


class ProcessException(Exception):
    def __init__(self, msg: str, error_index: int, pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid


class ProcessRaisedException(ProcessException):
    """A spawned process ended with an exception."""


class ProcessExitedException(ProcessException):
    """A spawned process exited with a non-zero status."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name


class ProcessContext:
    """The finished job, as ``spawn(..., join=False)`` hands it back."""

    def __init__(self, proc: subprocess.Popen, nprocs: int):
        self._proc = proc
        self.nprocs = nprocs

    def pids(self) -> list:
        return [self._proc.pid]

    def join(self, timeout=None) -> bool:
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        if code != 0:
            raise ProcessExitedException(
                f"process 0 terminated with exit code {code}", error_index=0,
                error_pid=self._proc.pid, exit_code=code)
        return True


SpawnContext = ProcessContext


def _job_rank():
    if os.environ.get(_IN_JOB) != "1":
        return None
    from ..distributed import _mpi
    got = _mpi.launch_env()
    return None if got is None else got[0]


def start_processes(fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False,
                    start_method: str = "spawn"):
    rank = _job_rank()
    if rank is not None:
        # Inside the job: this rank's share of the work, then the process ends (a spawned
        # child never returns to the parent's code after ``spawn``).
        from ..distributed import _mpi
        _mpi.abort_on_uncaught_exception()
        fn(rank, *args)
        sys.stdout.flush()
        sys.exit(0)
    from ..distributed.run import mpiexec_command
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if script is None:
        raise RuntimeError("ndgrad.multiprocessing.spawn re-runs the main script under MPI, so "
                           "it must be called from a script (python script.py), not from an "
                           "interactive session")
    env = dict(os.environ)
    env[_IN_JOB] = "1"
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("MASTER_PORT", "29500")
    argv = [sys.executable, "-u", "-m", "ndgrad.distributed._launch_rank", "--script",
            os.path.abspath(script)] + sys.argv[1:]
    proc = subprocess.Popen(mpiexec_command(nprocs, argv), env=env)
    context = ProcessContext(proc, nprocs)
    if not join:
        return context
    context.join()
    return None


def spawn(fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn"):
    """Run ``fn(i, *args)`` for ``i`` in ``range(nprocs)``, one MPI rank each."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)


_sharing = "file_system"


def get_all_sharing_strategies() -> set:
    return {"file_system", "file_descriptor"}


def get_sharing_strategy() -> str:
    return _sharing


def set_sharing_strategy(new_strategy: str) -> None:
    global _sharing
    if new_strategy not in get_all_sharing_strategies():
        raise AssertionError(f"invalid sharing strategy {new_strategy}")
    _sharing = new_strategy
