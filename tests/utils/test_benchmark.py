"""ndgrad.utils.benchmark: Timer's measurements, Measurement's statistics and repr vs torch's."""

import re

import pytest

import ndgrad
from ndgrad.utils import benchmark

torch = pytest.importorskip("torch")
tb = pytest.importorskip("torch.utils.benchmark")


def _repr_body(m):
    return repr(m).split("\n", 1)[1]


SPECS = [
    {
        "number": 10,
        "times": [1e-3, 1.1e-3, 5e-3, 1.2e-3],
        "stmt": "a = 1\nb = 2",
        "setup": "x = 1\ny = 2",
        "env": "myenv",
    },
    {
        "number": 10,
        "times": [1e-3, 1.01e-3, 1.02e-3, 1.03e-3],
        "stmt": "f(x)",
        "setup": "pass",
        "description": "desc",
        "label": "L",
    },
    {
        "number": 10,
        "times": [1e-3],
        "stmt": "f(x)",
        "setup": "pass",
        "sub_label": "S",
        "num_threads": 4,
    },
    {"number": 1, "times": [2.5], "stmt": "f(x)", "setup": "pass"},
    {"number": 1, "times": [2.5e-10], "stmt": "f(x)", "setup": "pass"},
    {
        "number": 100,
        "times": [3.1e-6],
        "stmt": "x + 1",
        "setup": "x = 1",
        "label": "lbl",
        "sub_label": "sub",
        "description": "desc",
    },
    {
        "number": 1,
        "times": [1e-3, 2e-3],
        "stmt": "f(x)",
        "setup": "pass",
        "label": "L",
        "sub_label": "S",
        "description": "D",
    },
    {"number": 1, "times": [1e-3, 2e-3, 3e-3], "stmt": "x\ny", "setup": "pass"},
    {"number": 7, "times": [5e-8, 5.1e-8, 5e-8, 5.05e-8, 4.9e-8], "stmt": "g()", "setup": "pass"},
]


@pytest.mark.parametrize("i", range(len(SPECS)))
def test_measurement_matches_torch(i):
    spec = dict(SPECS[i])
    number, times = spec.pop("number"), spec.pop("times")
    stmt, setup = spec.pop("stmt"), spec.pop("setup")
    ours = benchmark.Measurement(number, times, benchmark.TaskSpec(stmt, setup, **spec))
    ref = tb.Measurement(number, times, tb.utils.common.TaskSpec(stmt, setup, **spec))
    assert _repr_body(ours) == _repr_body(ref)
    assert repr(ours).startswith("<ndgrad.utils.benchmark.common.Measurement object at 0x")
    for attr in (
        "mean",
        "median",
        "iqr",
        "times",
        "number_per_run",
        "raw_times",
        "title",
        "has_warnings",
        "env",
        "num_threads",
        "label",
        "sub_label",
        "description",
        "stmt",
        "setup",
        "as_row_name",
    ):
        assert getattr(ours, attr) == pytest.approx(getattr(ref, attr)), attr
    assert ours.meets_confidence() == ref.meets_confidence()


def test_timer_timeit_and_autorange():
    t = benchmark.Timer("x + 1", setup="x = 1", label="lbl", sub_label="sub", description="desc")
    m = t.timeit(100)
    assert m.number_per_run == 100 and len(m.times) == 1 and m.mean > 0
    assert m.mean == m.median and m.iqr == 0
    assert _repr_body(m).startswith("lbl: sub\ndesc\nsetup: x = 1\n  ")
    assert re.search(r"\n  1 measurement, 100 runs , 1 thread$", repr(m))

    calls = []
    m = benchmark.Timer("sum(range(50))").blocked_autorange(
        callback=lambda n, t: calls.append((n, t)), min_run_time=0.05
    )
    assert sum(m.raw_times) >= 0.05
    assert [t for _, t in calls] == m.raw_times and all(n == m.number_per_run for n, _ in calls)
    assert m.number_per_run >= 10 and 0 < m.median < 1e-3

    m = benchmark.Timer("sum(range(50))").adaptive_autorange(min_run_time=0.01, max_run_time=2)
    assert len(m.times) >= 4 or sum(m.raw_times) > 2


def test_timer_globals_and_errors():
    m = benchmark.Timer("torch.ones(2) + y", globals={"torch": ndgrad, "y": 1.0}).timeit(5)
    assert m.number_per_run == 5
    benchmark.Timer("torch.ones(2)").timeit(2)  # torch defaults to ndgrad
    for kw in ({"global_setup": "import os"}, {"language": "rust"}):
        with pytest.raises(ValueError) as got:
            benchmark.Timer("x", **kw)
        with pytest.raises(ValueError) as want:
            tb.Timer("x", **kw)
        assert str(got.value) == str(want.value)
    with pytest.raises(NameError):
        benchmark.Timer("undefined_name").timeit(1)
    with pytest.raises(SyntaxError):
        benchmark.Timer("def")


def test_compare_table():
    def M(t, **kw):
        return benchmark.Measurement(1, [t], benchmark.TaskSpec("f(x)", "pass", **kw))

    res = [
        M(1.5e-6, label="Add", sub_label="small", description="float"),
        M(2.25e-6, label="Add", sub_label="small", description="double"),
        M(13.5e-6, label="Add", sub_label="large input", description="float"),
        M(20e-6, label="Add", sub_label="large input", description="double"),
        M(1.5e-6, label="Add", sub_label="small", description="float", num_threads=4),
    ]
    text = str(benchmark.Compare(res))
    lines = text.splitlines()
    assert lines[0].startswith("[") and " Add " in lines[0] and lines[0].endswith("]")
    assert "|  float  |  double" in lines[1]
    assert lines[2].startswith("1 threads: ---")
    assert lines[3].split("|")[0].strip() == "small" and "1.5" in lines[3] and "2.2" in lines[3]
    assert "13.5" in lines[4] and "20.0" in lines[4]
    assert lines[5].startswith("4 threads: ---")
    assert text.rstrip().endswith("Times are in microseconds (us).")
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`"):
        benchmark.Compare([1])
