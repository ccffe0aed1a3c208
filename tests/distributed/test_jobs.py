"""Multi-process jobs started through the launcher (``python -m ndgrad.distributed.run``), as a user
starts them: each job in ``jobs/`` checks itself in every rank and rank 0 prints what passed.

Skips where mpi4py (with an MPI and its ``mpiexec``) is not installed; ``.ci/run`` installs them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")
from ndgrad.distributed import run as launcher

try:
    launcher.find_mpiexec()
except RuntimeError:  # pragma: no cover - mpi4py without an MPI launcher
    pytest.skip("no mpiexec", allow_module_level=True)

JOBS = Path(__file__).parent / "jobs"
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(job: str, nproc: int = 2, *args, timeout: float = 240, flags=()) -> tuple:
    """Run ``jobs/<job>`` on ``nproc`` ranks; (return code, stdout, stderr, seconds)."""
    cmd = [sys.executable, "-m", "ndgrad.distributed.run", f"--nproc-per-node={nproc}",
           "--master_port", str(_free_port()), *flags, str(JOBS / job), *map(str, args)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    start = time.monotonic()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, env=env)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start


def _ok(result) -> str:
    code, out, err, _ = result
    assert code == 0, f"job failed ({code})\nstdout:\n{out}\nstderr:\n{err[-4000:]}"
    return out


@pytest.mark.parametrize("nproc", [2, 4])
def test_collectives_every_dtype(nproc):
    out = _ok(launch("collectives.py", nproc))
    assert "collectives ok" in out and f"world {nproc} backend gloo" in out


def test_collectives_on_the_mpi_backend_name():
    out = _ok(launch("collectives.py", 2, "mpi"))
    assert "backend mpi" in out


@pytest.mark.parametrize("nproc", [2, 4])
def test_ddp_matches_one_process_on_the_full_batch(nproc):
    out = _ok(launch("ddp_train.py", nproc))
    variants = [line for line in out.splitlines() if line.startswith("variant ")]
    assert len(variants) == 18, out
    assert "ddp ok" in out


def test_ddp_against_pytorch_ddp():
    pytest.importorskip("torch")
    out = _ok(launch("torch_ddp.py", 2))
    assert out.count("buckets ") == 6 and "torch ddp ok" in out


def test_exception_in_one_rank_ends_the_job_promptly():
    code, out, err, seconds = launch("failure.py", 2, timeout=60)
    assert code != 0
    assert "rank 1 fails on purpose" in err
    assert "unreachable" not in out
    assert seconds < 10, seconds


def test_timeout_bounds_a_collective_that_never_completes():
    code, out, _, seconds = launch("timeout.py", 2, timeout=60)
    assert "timed out after 1.0" in out and "Timed out waiting 1000ms for allreduce" in out
    assert "Timed out waiting 200ms for barrier" in out
    assert code == 3  # the rank's exit status ends the job (rank 1 was still sleeping)
    assert seconds < 30, seconds


def test_models_that_differ_fail_at_construction():
    out = _ok(launch("mismatch.py", 2))
    assert ("count: DDP expects same model across all ranks, but Rank 0 has 2 params, while "
            "rank 1 has inconsistent 4 params.") in out
    assert ("shape: [0]: params[0] in this process with sizes [3, 3] appears not to match "
            "sizes of the same param in process 1.") in out
    assert ("no params: DistributedDataParallel is not needed when a module doesn't have any "
            "parameter that requires a gradient.") in out


def test_multiprocessing_spawn_runs_a_torch_script_unchanged():
    env = dict(os.environ, PYTHONPATH=str(ROOT), MASTER_PORT=str(_free_port()))
    proc = subprocess.run([sys.executable, str(JOBS / "spawn.py"), "2"], check=False, capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = proc.stdout
    assert "spawned rank 0 of 2 sum 3 indices [0, 2, 4, 6, 8, 10]\n" in out
    assert "spawned rank 1 of 2 sum 3 indices [1, 3, 5, 7, 9, 0]\n" in out
    assert out.count("after spawn: parent only") == 1


def test_launcher_sets_torchrun_variables(tmp_path):
    script = tmp_path / "env.py"
    script.write_text(
        "import os\n"
        "keys = ['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'GROUP_RANK',\n"
        "        'MASTER_ADDR', 'MASTER_PORT', 'TORCHELASTIC_RUN_ID', 'OMP_NUM_THREADS']\n"
        "line = ' '.join(f'{k}={os.environ.get(k)}' for k in keys if k != 'TORCHELASTIC_RUN_ID')\n"
        "os.write(1, (line + (' run_id' if os.environ.get('TORCHELASTIC_RUN_ID') else '')\n"
        "             + '\\n').encode())\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("OMP_NUM_THREADS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "ndgrad.distributed.run", "--nproc_per_node", "2", "--master-addr",
         "127.0.0.1", "--master_port", "29777", str(script)],
        check=False, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    for r in range(2):
        assert (f"RANK={r} LOCAL_RANK={r} WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 "
                "MASTER_ADDR=127.0.0.1 MASTER_PORT=29777 OMP_NUM_THREADS=1 run_id\n"
                ) in proc.stdout, proc.stdout


def test_plain_mpiexec_gets_the_same_variables(tmp_path):
    script = tmp_path / "env.py"
    script.write_text(
        "import os, ndgrad.distributed as dist\n"
        "dist.init_process_group()\n"
        "e = os.environ\n"
        "os.write(1, f\"{e['RANK']} {e['WORLD_SIZE']} {e['LOCAL_RANK']} {dist.get_rank()} \"\n"
        "            f\"{dist.get_backend()}\\n\".encode())\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = launcher.mpiexec_command(2, [sys.executable, str(script)])
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "0 2 0 0 gloo\n" in proc.stdout and "1 2 1 1 gloo\n" in proc.stdout


def test_ddp_digits_example_learns():
    pytest.importorskip("sklearn")
    cmd = [sys.executable, "-m", "ndgrad.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(_free_port()), str(ROOT / "examples" / "ddp_digits.py"),
           "--epochs", "4", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ddp cnn on 2 ranks"))
    acc = float(line.split("test accuracy ")[1].split("%")[0]) / 100
    assert acc > 0.9, line


def _gpu_count() -> int:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no CuPy, no driver or no device: no GPU here
        return 0


@pytest.mark.skipif(_gpu_count() == 0, reason="needs CuPy and a GPU")
def test_cuda_tensors_through_a_gloo_group():
    out = _ok(launch("on_cuda.py", 2, "gloo"))
    assert "cuda ok" in out and "backend gloo world 2" in out


@pytest.mark.skipif(_gpu_count() == 0, reason="needs CuPy and a GPU")
def test_cuda_tensors_on_nccl():
    pytest.importorskip("cupy.cuda.nccl")
    ranks = min(2, _gpu_count())  # NCCL refuses two ranks on one GPU
    out = _ok(launch("on_cuda.py", ranks, "nccl"))
    assert "cuda ok" in out and f"backend nccl world {ranks}" in out


def test_distributed_benchmark_runs_end_to_end():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "distributed.py"), "--quick", "--ranks", "1",
         "2", "--steps", "2"], check=False, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = proc.stdout
    assert "all-reduce, 2 ranks" in out and "DDP training step" in out
    assert out.count(" ndgrad ") >= 2
