"""The benchmark runner works end to end (no timing asserted: targets live in benchmarks/)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


def _load():
    spec = importlib.util.spec_from_file_location("ndgrad_bench_run", RUNNER)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_quick_run_checks_every_contender_and_writes_a_table(tmp_path):
    run = _load()
    out = tmp_path / "results.md"
    # Two thread counts, each in a child process; every workload (training steps included) is
    # checked against the floor's loss and gradients before it is timed.
    text = run.main(["--quick", "--scale", "0.02", "--repeat", "1", "--threads", "1,2",
                     "--out", str(out)])
    assert out.read_text().strip() == text.strip()
    assert "1 thread(s)" in text and "2 thread(s)" in text
    for w in run.workloads(0.02):
        assert text.count(w.name) >= 2
    assert "fwd+bwd us/node" in text and "step ms" in text
    try:
        import torch  # noqa: F401
    except ImportError:
        assert "PyTorch not measured" in text
    else:
        assert "ndgrad/PyTorch" in text and "target <= 0.8x" in text and "target <= 1.3x" in text


def test_check_rejects_a_wrong_gradient():
    run = _load()
    w = run.chain(8, 4)
    who = [c for c in run.contenders(use_torch=False)]
    cases = {c.key: w.case(c) for c in who}
    real = cases["ndgrad"].result
    cases["ndgrad"].result = lambda out: (real(out)[0], [2 * g for g in real(out)[1]])
    with pytest.raises(SystemExit, match="disagrees"):
        run.check(w, cases)


def test_memory_benchmark_small_run(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "ndgrad_bench_memory", RUNNER.with_name("memory.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    # main() exits when gradients or unpack hook calls differ from the eager engine's, or when a
    # compiled-autograd row's measured step was not a cache hit.
    text = mod.main(["--blocks", "3", "--width", "64", "--batch", "32", "--out", str(tmp_path / "m.md")])
    assert "gradients identical in all variants: yes" in text
    assert "| checkpoint |" in text and "| offload |" in text
    # Compiled autograd rows (python, inductor, inductor code): each measured on a cache hit,
    # calling the unpack hooks exactly as the eager engine does (count and order).
    for variant in ("checkpoint", "offload"):
        eager_calls = text.split(f"| {variant} |")[1].splitlines()[0].split("|")[-2].strip()
        assert int(eager_calls) > 0
        for compiler in ("python", "inductor", "inductor code"):
            name = f"{variant}, compiled autograd ({compiler})"
            assert f"| {name} |" in text
            verdict = next(line for line in text.splitlines() if line.startswith(f"- {name}:"))
            assert "peak during backward / eager engine's peak =" in verdict
            assert "target <= 1.0x" in verdict  # met or not: small sizes measure bookkeeping
            assert (f"unpack hooks: {eager_calls} calls vs eager's {eager_calls}, same order"
                    in verdict)
        assert f"gradients of {variant}, compiled autograd (inductor): max |diff|" in text
    assert "target <= 1e-05 NOT met" not in text


def test_forward_ad_benchmark_small_run():
    spec = importlib.util.spec_from_file_location(
        "ndgrad_bench_forward_ad", RUNNER.with_name("forward_ad.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    # Each tangent is checked against the NumPy floor's gradient before anything is timed.
    text = mod.main(["--ops", "8", "--repeat", "1", "--no-torch"])
    assert "ndgrad jvp/plain" in text and text.count("forward AD =") == 2


def test_compile_benchmark_small_run(tmp_path):
    """benchmarks/compile.py: ndgrad eager and compiled (and PyTorch where installed) checked
    against the floor, then timed; the table names every contender and the chain's verdict."""
    spec = importlib.util.spec_from_file_location(
        "ndgrad_bench_compile", RUNNER.with_name("compile.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    out = tmp_path / "c.md"
    text = mod.main(["--quick", "--no-torch-compile", "--repeat", "1", "--scale", "0.01",
                     "--out", str(out)])
    assert out.read_text().strip() == text.strip()
    assert "ndgrad eager" in text and "ndgrad inductor" in text and "NumPy floor" in text
    assert "first call s (compile)" in text and "inductor (NumPy) / NumPy floor" in text
    assert "target <= 0.95x" in text  # the MLP step's verdict
    assert "compiled autograd, inductor code" in text  # issue 17's backward rows
    assert "MLP step" in text
