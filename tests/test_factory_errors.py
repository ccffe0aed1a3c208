"""Factory argument errors with PyTorch's types and words (issue 19 item 5)."""

from __future__ import annotations

import pytest

import ndgrad as nd

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("call", [
    lambda lib: lib.zeros(2, -1), lambda lib: lib.ones(-3), lambda lib: lib.empty(2, -1),
    lambda lib: lib.rand(2, -1), lambda lib: lib.randn(-2), lambda lib: lib.full((-1,), 1.0),
    lambda lib: lib.zeros(2, dtype="float32"), lambda lib: lib.ones(2, dtype="float32"),
    lambda lib: lib.empty(2, dtype="float32"), lambda lib: lib.tensor([1.0], dtype="float32"),
])
def test_errors_match_pytorch(call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(Exception) as got:
        call(nd)
    assert type(got.value) is type(want.value)
    assert str(got.value) == str(want.value)


def test_python_types_are_dtypes():
    assert nd.zeros(2, dtype=float).dtype == nd.float64
    assert nd.full((2,), 3).dtype == nd.int64 and nd.full((2,), 1.0).dtype == nd.float32
