"""``python -m ndgrad.distributed.run`` (console script ``ndgrad-run``): torchrun's command line,
starting the job through the MPI's own ``mpiexec``.

    python -m ndgrad.distributed.run --nproc-per-node 2 train.py --epochs 3

Every flag of ``torchrun`` is accepted in both spellings (``--nproc-per-node`` and
``--nproc_per_node``). Each rank runs ``ndgrad.distributed._launch_rank``, which sets torchrun's
variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``, ...) from MPI's and then runs the script as ``__main__``; an
uncaught exception in any rank aborts the whole job, and the launcher exits with its status.

Several nodes: MPI starts every rank from one place, so the launcher on ``--node-rank 0`` starts
the whole job over the hosts named by ``--hosts`` (or the MPI's own host file / scheduler), and
a launcher given another node rank has nothing to start and says so. Elastic restarts
(``--max-restarts``) and rendezvous backends are accepted and not used: the MPI job is static.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import uuid

__all__ = ["get_args_parser", "main", "mpiexec_command", "parse_args", "run"]


def _both(parser, name: str, **kw) -> None:
    """Add ``--a-b`` with its underscore spelling ``--a_b``, as torchrun does."""
    parser.add_argument(f"--{name}", f"--{name.replace('-', '_')}", **kw)


def get_args_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ndgrad.distributed.run",
        description="Start a data-parallel ndgrad job on MPI (torchrun's flags).")
    p.add_argument("--nnodes", default="1:1", help="Number of nodes, or MIN:MAX")
    _both(p, "nproc-per-node", default="1",
          help="Processes per node: an integer, 'cpu', 'auto' or 'gpu'")
    _both(p, "rdzv-backend", default="static")
    _both(p, "rdzv-endpoint", default="")
    _both(p, "rdzv-id", default="none")
    _both(p, "rdzv-conf", default="")
    p.add_argument("--standalone", action="store_true")
    _both(p, "max-restarts", type=int, default=0)
    _both(p, "monitor-interval", type=float, default=0.1)
    _both(p, "start-method", default="spawn", choices=["spawn", "fork", "forkserver"])
    _both(p, "event-log-handler", default="null")
    p.add_argument("--role", default="default")
    p.add_argument("-m", "--module", action="store_true",
                   help="Run the script as a module (python -m)")
    _both(p, "no-python", action="store_true",
          help="Run the script as an executable, not through Python")
    _both(p, "run-path", action="store_true")
    _both(p, "log-dir", default=None)
    p.add_argument("-r", "--redirects", default="0")
    p.add_argument("-t", "--tee", default="0")
    _both(p, "local-ranks-filter", default="")
    _both(p, "duplicate-stdout-filters", default=[], nargs="*")
    _both(p, "duplicate-stderr-filters", default=[], nargs="*")
    _both(p, "node-rank", type=int, default=0)
    _both(p, "master-addr", default="127.0.0.1")
    _both(p, "master-port", type=int, default=None)
    _both(p, "local-addr", default=None)
    _both(p, "logs-specs", default=None)
    _both(p, "numa-binding", default=None)
    _both(p, "signals-to-handle", default="SIGTERM,SIGINT,SIGHUP,SIGQUIT")
    _both(p, "shutdown-timeout", type=int, default=None)
    _both(p, "virtual-local-rank", action="store_true")
    p.add_argument("--hosts", default=None,
                   help="(ndgrad) Comma-separated hosts for a job over several nodes")
    p.add_argument("training_script", help="The script (or module, with -m) each rank runs")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def parse_args(args=None) -> argparse.Namespace:
    return get_args_parser().parse_args(args)


def _nproc(spec: str) -> int:
    if spec in ("cpu", "auto"):
        if spec == "auto":
            from .._backend import cuda
            if cuda.available():
                return cuda.device_count()
        return os.cpu_count() or 1
    if spec == "gpu":
        from .._backend import cuda
        if not cuda.available():
            raise ValueError("Cuda is not available.")
        return cuda.device_count()
    try:
        return int(spec)
    except ValueError:
        raise ValueError(f"Unsupported nproc_per_node value: {spec}") from None


def _nnodes(spec: str) -> int:
    low, _, high = spec.partition(":")
    if high and int(high) != int(low):
        raise ValueError("An MPI job has a fixed size: give --nnodes N (not MIN:MAX with "
                         f"MIN != MAX), got {spec}")
    return int(low)


def find_mpiexec() -> str:
    """The ``mpiexec`` of the MPI that mpi4py loads: the virtual environment's first."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = here if os.access(here, os.X_OK) else shutil.which("mpiexec")
    if found is None:
        from ._mpi import INSTALL
        raise RuntimeError("no mpiexec found. " + INSTALL)
    return found


def _is_open_mpi(mpiexec: str) -> bool:
    try:
        out = subprocess.run([mpiexec, "--version"], check=False, capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in out or "OpenRTE" in out


def mpiexec_command(nprocs: int, argv: list, nnodes: int = 1, hosts=None) -> list:
    """The ``mpiexec`` line that starts ``argv`` as ``nprocs`` ranks per node."""
    mpiexec = find_mpiexec()
    cmd = [mpiexec, "-n", str(nprocs * nnodes)]
    if _is_open_mpi(mpiexec):
        # Open MPI refuses more ranks than cores (and root) unless told; MPICH needs neither.
        cmd += ["--oversubscribe"]
        if os.geteuid() == 0:
            cmd += ["--allow-run-as-root"]
        if nnodes > 1:
            cmd += ["--npernode", str(nprocs)]
        if hosts:
            cmd += ["--host", ",".join(f"{h}:{nprocs}" for h in hosts.split(","))]
    else:
        if nnodes > 1:
            cmd += ["-ppn", str(nprocs)]
        if hosts:
            cmd += ["-hosts", hosts]
    return cmd + argv


def run(args: argparse.Namespace) -> int:
    nproc = _nproc(args.nproc_per_node)
    nnodes = 1 if args.standalone else _nnodes(args.nnodes)
    if nnodes > 1 and args.node_rank != 0:
        print(f"[ndgrad.distributed.run] node rank {args.node_rank}: an MPI job is started "
              "from node rank 0 over every node (--hosts), so there is nothing to start here.",
              file=sys.stderr)
        return 0
    env = dict(os.environ)
    env.update({
        "MASTER_ADDR": args.master_addr,
        "MASTER_PORT": str(args.master_port if args.master_port is not None else 29500),
        "WORLD_SIZE": str(nproc * nnodes),
        "LOCAL_WORLD_SIZE": str(nproc),
        "ROLE_NAME": args.role,
        "ROLE_WORLD_SIZE": str(nproc * nnodes),
        "TORCHELASTIC_RUN_ID": args.rdzv_id if args.rdzv_id != "none" else uuid.uuid4().hex,
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": str(args.max_restarts),
    })
    if nproc > 1 and "OMP_NUM_THREADS" not in os.environ:
        # As torchrun: one thread per rank unless the user says otherwise.
        env["OMP_NUM_THREADS"] = "1"
    mode = "--no-python" if args.no_python else "--module" if args.module else "--script"
    argv = [sys.executable, "-u", "-m", "ndgrad.distributed._launch_rank", mode,
            args.training_script] + list(args.training_script_args)
    cmd = mpiexec_command(nproc, argv, nnodes, args.hosts)
    return subprocess.run(cmd, env=env, check=False).returncode


def main(args=None) -> None:
    sys.exit(run(parse_args(args)))


if __name__ == "__main__":
    main()
