"""Device time in the profiler, on the stream-logging device (its events read the host clock
when recorded, and its work is done when queued, so the times are real) and, where CuPy sees a
GPU, on CUDA: self device time is own minus children's, totals are built from self times, and
nothing is counted twice."""

import time

import numpy as np
import pytest

import ndgrad as nd
from ndgrad._backend import current_stream
from ndgrad.profiler import ProfilerActivity, profile, record_function



def _profile(device):
    x = nd.randn(256, 256, device=device, requires_grad=True)
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("outer"):
            y = (x @ x).tanh()
            with record_function("inner"):
                z = (y @ y).sum()
        z.backward()
    if device == "cuda":
        nd.cuda.synchronize()
    wall_us = (time.perf_counter() - t0) * 1e6
    return prof, wall_us


def test_device_self_and_total_times(device):
    prof, wall_us = _profile(device)
    evs = prof.events()
    by_name = {}
    for e in evs:
        by_name.setdefault(e.name, []).append(e)
    for e in evs:
        kids = sum(c.device_time_total for c in e.cpu_children)
        assert e.device_time_total == pytest.approx(e.self_device_time_total + kids, rel=1e-9, abs=1e-6)
        assert e.self_device_time_total >= 0
    mm = by_name["aten::matmul"]
    assert all(e.self_device_time_total > 0 for e in mm)
    outer, inner = by_name["outer"][0], by_name["inner"][0]
    assert outer.self_device_time_total == 0.0  # ranges launch no work of their own
    assert inner.cpu_parent is outer and outer.device_time_total >= inner.device_time_total > 0
    total_self = sum(e.self_device_time_total for e in evs)
    assert 0 < total_self <= wall_us
    avg = prof.key_averages()
    table = avg.table(sort_by="self_cuda_time_total", row_limit=50)
    assert "Self CUDA time total:" in table and "Self CUDA %" in table
    pcts = [float(line.split()[-4].rstrip("%")) for line in table.splitlines()
            if line.strip() and line.split()[-4].endswith("%")]
    assert sum(pcts) == pytest.approx(100.0, abs=0.5)


def test_op_device_time_matches_events_around_it(device):
    x = nd.randn(400, 400, device=device)
    s = current_stream(x.device)
    # Each matmul timed twice at once: directly, with a pair of timing events around the call,
    # and by the profiler. Interleaved, and compared by their minima, so load on the machine
    # (which stretches single runs) cannot make the two disagree.
    direct = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(7):
            a, b = s.event_cls(s.device, enable_timing=True), s.event_cls(s.device, enable_timing=True)
            a.record(s)
            x @ x
            b.record(s)
            b.synchronize()
            direct.append(a.elapsed_time(b) * 1e3)
    got = [e.self_device_time_total for e in prof.events() if e.name == "aten::matmul"]
    assert len(got) == 7
    assert all(g <= d * 1.01 for g, d in zip(got, direct))  # the profiled window lies inside
    assert min(got) == pytest.approx(min(direct), rel=0.5 if device == "streamlog" else 0.1)


def test_cpu_only_profile_has_no_device_time():
    x = nd.randn(64, 64, device="streamlog")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x @ x
    assert all(e.self_device_time_total == 0 for e in prof.events())
