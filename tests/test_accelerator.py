"""ndgrad.accelerator against torch.accelerator (torch 2.13) on this machine."""

import inspect
import warnings

import pytest

import ndgrad
from ndgrad import accelerator as acc

torch = pytest.importorskip("torch")

NAMES = [
    "is_available",
    "current_accelerator",
    "device_count",
    "current_device_index",
    "current_device_idx",
    "set_device_index",
    "set_device_idx",
    "synchronize",
    "current_stream",
    "set_stream",
    "device_index",
    "empty_cache",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "reset_peak_memory_stats",
]


def _outcome(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001
            result = (type(e).__name__, str(e))
    return result, [(x.category.__name__, str(x.message)) for x in w]


CALLS = [
    lambda m: m.is_available(),
    lambda m: m.device_count(),
    lambda m: m.current_device_index(),
    lambda m: m.current_device_idx(),
    lambda m: m.set_device_index(0),
    lambda m: m.set_device_idx(0),
    lambda m: m.synchronize(),
    lambda m: m.current_stream(),
    lambda m: m.device_index(None).__enter__(),
    lambda m: m.device_index(0).__enter__(),
    lambda m: m.empty_cache(),
    lambda m: m.memory_allocated(),
]


def test_names_and_signatures():
    for name in NAMES:
        assert hasattr(acc, name), name
        ours, theirs = getattr(acc, name), getattr(torch.accelerator, name)
        p_ours = [(p.name, p.kind, p.default) for p in inspect.signature(ours).parameters.values()]
        p_theirs = [
            (p.name, p.kind, p.default) for p in inspect.signature(theirs).parameters.values()
        ]
        assert p_ours == p_theirs, name
    assert ndgrad.accelerator is acc


@pytest.mark.skipif(
    ndgrad.cuda.is_available() or torch.cuda.is_available(), reason="compares CPU-only behaviour"
)
@pytest.mark.parametrize("i", range(len(CALLS)))
def test_cpu_only_behaviour_matches_torch(i):
    assert _outcome(lambda: CALLS[i](acc)) == _outcome(lambda: CALLS[i](torch.accelerator))


@pytest.mark.skipif(ndgrad.cuda.is_available(), reason="CPU-only machine")
def test_no_accelerator():
    assert acc.current_accelerator() is None
    assert acc.current_accelerator(check_available=True) is None
    assert not acc.is_available() and acc.device_count() == 0


@pytest.mark.skipif(not ndgrad.cuda.is_available(), reason="needs a GPU (CuPy)")
def test_with_gpu():
    assert acc.is_available()
    assert acc.current_accelerator() == ndgrad.device("cuda")
    assert acc.device_count() == ndgrad.cuda.device_count() >= 1
    assert acc.current_device_index() == ndgrad.cuda.current_device()
    acc.set_device_index(0)
    acc.synchronize()
    acc.synchronize("cuda:0")
    assert acc.current_stream() == ndgrad.cuda.current_stream()
    with acc.device_index(0):
        assert acc.current_device_index() == 0
    assert acc.memory_allocated() >= 0
    with pytest.raises(ValueError, match="doesn't match the current accelerator"):
        acc.current_stream("cpu")
