"""Shared fixtures: ``ref``, the PyTorch oracle for hand-written semantics tests.

A scenario is a function of the framework module (``ndgrad`` or ``torch``): ``ref.same(f)`` runs
``f(ndgrad)`` and, where PyTorch is installed, ``f(torch)``, and compares what they return;
``ref.raises(f, exc, msg)`` checks ndgrad raises ``exc`` with PyTorch's message (and, where torch
is installed, that torch raises exactly that too). Without torch, the ndgrad side still runs.
"""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad

try:
    import torch
except ImportError:  # the oracle is optional
    torch = None


def _norm(msg: str) -> str:
    """PyTorch's wording with ndgrad's module prefix mapped to torch's (``ndgrad.FloatTensor``)."""
    return msg.replace("ndgrad.", "torch.").replace("ndgrad::", "torch::")


def _is_tensor(x) -> bool:
    return isinstance(x, ndgrad.Tensor) or (torch is not None and isinstance(x, torch.Tensor))


def to_numpy(x) -> np.ndarray:
    if isinstance(x, ndgrad.Tensor):
        return np.array(x._data)
    return x.detach().cpu().resolve_conj().numpy().copy()


def assert_same(got, want, rtol=1e-7, atol=1e-10, path="result"):
    """Structural comparison of an ndgrad result with a torch result (tensors by value/dtype)."""
    if _is_tensor(want) or _is_tensor(got):
        assert _is_tensor(got) and _is_tensor(want), f"{path}: {type(got)} vs {type(want)}"
        assert tuple(got.shape) == tuple(want.shape), f"{path}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], f"{path}: dtype"
        np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=rtol, atol=atol, err_msg=path)
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), f"{path}: {got!r} vs {want!r}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, rtol, atol, f"{path}[{i}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), f"{path}: keys {got!r} vs {want!r}"
        for k in want:
            assert_same(got[k], want[k], rtol, atol, f"{path}[{k!r}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=rtol, abs=atol), f"{path}: {got!r} vs {want!r}"
    elif isinstance(want, str):
        assert _norm(got) == _norm(want), f"{path}: {got!r} vs {want!r}"
    else:
        assert got == want, f"{path}: {got!r} vs {want!r}"


class Oracle:
    """What a test compares against: ``torch`` (or ``None`` when not installed)."""

    torch = torch
    norm = staticmethod(_norm)
    assert_same = staticmethod(assert_same)
    to_numpy = staticmethod(to_numpy)

    def same(self, fn, rtol=1e-7, atol=1e-10):
        """Run the scenario ``fn(T)`` under ndgrad and torch; return ndgrad's result."""
        got = fn(ndgrad)
        if torch is not None:
            assert_same(got, fn(torch), rtol, atol)
        return got

    def raises(self, fn, exc: type, msg: str | None = None):
        """``fn(T)`` raises ``exc`` with PyTorch's ``msg`` under both; ``msg=None``: same text."""
        with pytest.raises(BaseException) as got:
            fn(ndgrad)
        assert type(got.value) is exc, f"ndgrad raised {type(got.value).__name__}: {got.value}"
        if msg is not None:
            assert _norm(str(got.value)) == msg
        if torch is not None:
            with pytest.raises(BaseException) as want:
                fn(torch)
            assert type(want.value) is exc, f"torch raised {type(want.value).__name__}: {want.value}"
            assert _norm(str(got.value)) == _norm(str(want.value))
        return got.value


@pytest.fixture(scope="session")
def ref() -> Oracle:
    return Oracle()


@pytest.fixture(scope="session")
def torch_or_skip():
    """PyTorch itself, for oracle-only tests (skipped cleanly when torch is not installed)."""
    return pytest.importorskip("torch")


# --- devices ---
# A test taking a ``device`` argument runs on every device with streams: the stream-logging test
# device everywhere, CUDA where CuPy sees a GPU.
DEVICES = ["streamlog"] + (["cuda"] if ndgrad.cuda.is_available() else [])


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", DEVICES)


@pytest.fixture(autouse=True)
def _restore_streams_flag():
    """A test that makes a side stream current turns the engine's stream-aware loop on for the
    process; later tests get back the loop they would have had."""
    from ndgrad._backend import streams

    was = streams.in_use[0]
    yield
    streams.in_use[0] = was

