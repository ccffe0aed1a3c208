"""Legacy tensor types and ``Tensor.new`` against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd

torch = pytest.importorskip("torch")
NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
         "CharTensor", "ByteTensor", "BoolTensor"]


@pytest.mark.parametrize("name", NAMES)
def test_constructors(name):
    ours, theirs = getattr(nd, name), getattr(torch, name)
    for args in [(), (2, 3), (nd.Size([4]),), ([1, 0, 1],)]:
        targs = tuple(torch.Size(a) if isinstance(a, nd.Size) else a for a in args)
        got, want = ours(*args), theirs(*targs)
        assert tuple(got.shape) == tuple(want.shape)
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
        if args and isinstance(args[0], list):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert ours.dtype == getattr(nd, str(theirs.dtype).split(".")[1])
    x = nd.zeros(2, dtype=ours.dtype)
    assert isinstance(x, ours) and not isinstance(x.float() if ours is not nd.FloatTensor
                                                  else x.double(), ours)


def test_type_and_new():
    x = nd.ones(2)
    assert x.type() == "ndgrad.FloatTensor"
    assert x.type(nd.LongTensor).dtype == nd.int64
    assert x.type("torch.DoubleTensor").dtype == nd.float64
    assert tuple(x.new(2, 3).shape) == (2, 3) and tuple(x.new().shape) == (0,)
    assert x.new([1, 2]).dtype == nd.float32
    with pytest.raises(TypeError, match="new\\(\\): invalid data type 'str'"):
        nd.FloatTensor("a")
