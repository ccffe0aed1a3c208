"""Bad input to the indexing ops and pad raises PyTorch's error type and message (the generic
tests only run valid samples)."""

from __future__ import annotations

import numpy as np
import pytest

import ndgrad as nd

torch = pytest.importorskip("torch")

CASES = """lib.gather(x, 1, i.float())
lib.gather(x, 1, T([0, 1]))
lib.gather(x, 1, T([[0, 5]]))
lib.gather(x, 1, T([[0, -1]]))
lib.gather(x, 1, T(np.zeros((5, 1), np.int64)))
lib.gather(x, 2, i)
x.scatter(1, i, x.float())
x.scatter(1, i, T(np.ones((1, 2))))
x.scatter(1, T([[0, 5]]), x)
x.scatter(1, T([0, 1]), x)
x.scatter(1, i, x, reduce='sum')
x.scatter_add(1, i, T(np.ones((2, 1))))
x.scatter_add(1, i.short(), x)
x.index_select(1, T([0., 1.]))
x.index_select(1, T([[0, 0, 3]]))
x.index_select(1, T([0, 4]))
T(3.).index_select(0, T([0, 0]))
x.index_add(1, T([0, 0]), T(np.ones((3, 3))))
x.index_add(1, T([0, 0]), T(np.ones((3, 2))).float())
x.index_add(1, T([0, 5]), T(np.ones((3, 2))))
x.index_add(1, T([[0, 1]]), T(np.ones((3, 2))))
x.index_add(1, T([0, 1]).short(), T(np.ones((3, 2))))
lib.zeros(3).index_add(0, T(1), T(2.))
x.masked_fill((x > 0).long(), 2)
x.masked_fill(x > 0, T([2.]))
T([1., 2, 3, 4]).masked_fill_(T([[True], [False]]), 2)
x.masked_select((x > 0).int())
F.pad(x, (1,))
F.pad(x, (1, 2, 3, 4, 5, 6))
F.pad(x, (-3, -2))
F.pad(x, [1, 2], mode='reflect', value=1.)
F.pad(x, [4, 2], mode='reflect')
F.pad(x[None], [1, 1, 3, 2], mode='reflect')
F.pad(x[None], [5, 2], mode='circular')
F.pad(x, [1, 2, 1, 1], mode='reflect')
F.pad(x, [1, 2], mode='foo')
F.pad(x, [1.5, 2])""".splitlines()


def _run(lib, expr):
    x = np.random.default_rng(0).standard_normal((3, 4))
    env = dict(lib=lib, np=np, T=lib.tensor, x=lib.tensor(x), i=lib.tensor(np.array([[0, 1], [2, 0]])),
               F=lib.nn.functional)
    try:
        eval(expr, env)  # noqa: S307 - the fixed cases above
    except Exception as e:  # noqa: BLE001
        return type(e), str(e).splitlines()[0]
    return None


@pytest.mark.parametrize("expr", CASES)
def test_error_matches_torch(expr):
    expected = _run(torch, expr)
    assert expected is not None, "torch accepts this input; the case is wrong"
    assert _run(nd, expr) == expected
