#!/usr/bin/env bash
# The GPU verification of issues 6 and 7 in one command, on a machine with CuPy and a GPU (the
# lent device: run `bash scripts/gpu_check.sh` there; it needs no network: numpy, cupy, torch,
# pytest and scipy come with that image). Logs go to $OUT (or ./gpu_check):
#   env.txt        what the machine has
#   tests.txt      the device tests (op table on cuda, streams, cross-stream trials, save_on_cpu
#                  peak memory, profiler device time)
#   cudagraphs.txt the cudagraphs backend's GPU tests (issue 16: MLP steps replayed to eager's
#                  losses, mutated inputs, distinct outputs, ctypes cuBLAS under capture)
#   distributed.txt collectives and DDP on CUDA tensors (issue 18: NCCL group, gloo group through
#                  the host), where mpi4py and an mpiexec are installed
#   gpu_bench.md   benchmarks/gpu.py: chain and MLP steps vs PyTorch CUDA eager and a CuPy floor,
#                  and the MLP step under CUDA graphs vs PyTorch's reduce-overhead and whole-step graph
#   profile.txt    the profiler's table of an MLP training step on cuda, CPU and CUDA columns
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}

$py - <<'PY' 2>&1 | tee "$out/env.txt"
import numpy, ndgrad
print("numpy", numpy.__version__)
try:
    import cupy
    print("cupy", cupy.__version__)
except ImportError as e:
    print("no cupy:", e)
print("ndgrad.cuda.is_available():", ndgrad.cuda.is_available())
if ndgrad.cuda.is_available():
    print("device:", ndgrad.cuda.get_device_name())
PY

$py -m pytest -q -p no:cacheprovider tests/ops/test_devices.py tests/backend tests/profiler 2>&1 | tee "$out/tests.txt"
tests=${PIPESTATUS[0]}

$py -m pytest -q -p no:cacheprovider -rs tests/compiler/test_cudagraphs.py 2>&1 | tee "$out/cudagraphs.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || tests=1

$py -m pytest -q -p no:cacheprovider -rs tests/distributed/test_jobs.py -k cuda 2>&1 | tee "$out/distributed.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || tests=1

$py benchmarks/gpu.py --repeat 21 2>&1 | tee "$out/gpu_bench.md"

$py - <<'PY' 2>&1 | tee "$out/profile.txt"
import sys
import numpy as np
sys.path.insert(0, "benchmarks")
import ndgrad
import steps
from ndgrad.profiler import ProfilerActivity, profile

if not ndgrad.cuda.is_available():
    sys.exit("no GPU: profile skipped")
params, batch = steps.mlp_data(np.random.default_rng(0))
model, loss_fn = steps.mlp_model(ndgrad)
steps._load(ndgrad, model, params)
model.to("cuda")
opt = ndgrad.optim.SGD(model.parameters(), lr=steps.LR)
b = (ndgrad.tensor(batch[0], device="cuda"), ndgrad.tensor(batch[1], device="cuda"))

def step():
    opt.zero_grad(set_to_none=True)
    loss_fn(model, b).backward()
    opt.step()

for _ in range(3):
    step()
ndgrad.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(5):
        step()
    ndgrad.cuda.synchronize()
print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=25))
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=15))
PY
exit $tests
