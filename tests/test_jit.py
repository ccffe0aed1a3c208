"""``torch.jit`` under eager execution: the markers and queries scriptable libraries call behave
as PyTorch's do outside scripting; TorchScript itself raises a clear error."""

from __future__ import annotations

import warnings
from typing import Dict, List, Optional, Tuple, Union

import pytest

import ndgrad


def _twice(a):
    return a * 2


def test_markers_and_queries(ref):
    def f(T):
        jit = T.jit

        class M(T.nn.Module):
            x: jit.Final[int] = 3

            @jit.ignore
            def helper(self, a):
                return a * 2

            @jit.unused
            def dropped(self, a):
                return a + 1

            @jit.export
            def exported(self, a):
                return a - 1

            def forward(self, a):
                if jit.is_scripting() or jit.is_tracing():
                    return a
                return self.helper(a) + self.dropped(a) + self.exported(a)

        out = M()(T.ones(2))
        with warnings.catch_warnings(record=True) as w:  # deprecated in PyTorch 2.13
            warnings.simplefilter("always")
            fut = jit.fork(lambda a, b: a * b, T.full((2,), 3.0), b=2)
            value = jit.wait(fut)
        deprecations = [(x.category.__name__, str(x.message)) for x in w]
        return (out, jit.annotate(List[int], [1, 2]), value, fut.done(), deprecations,
                tuple(jit.Attribute(1.5, float)), jit.ignore(drop=False)(_twice)(4),
                jit.script_if_tracing(_twice)(5))

    ref.same(f)


CASES = [([1, 2], List[int]), ([1, "a"], List[int]), ({"a": 1}, Dict[str, int]),
         ({"a": 1}, Dict[str, float]), ((1, "a"), Tuple[int, str]), ((1,), Tuple[int, str]),
         (None, Optional[int]), (3, Optional[int]), ("s", Union[int, str]), ([], List[str]),
         (2.0, float), ([[1], [2, 3]], List[List[int]]), ([1], list[int]), ({1: [2]}, dict[int, list[int]])]


def test_isinstance_checks_container_elements(ref):
    def f(T):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = [T.jit.isinstance(obj, t) for obj, t in CASES]
        return got, [str(x.message) for x in w]  # an empty container: its inner type is lost

    ref.same(f)
    assert ndgrad.jit.isinstance({"w": ndgrad.ones(1)}, Dict[str, ndgrad.Tensor])


def test_ignore_argument_errors_and_deprecation(ref):
    ref.raises(lambda T: T.jit.ignore(3), RuntimeError)

    def f(T):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            T.jit.ignore(drop=True)
        return [(x.category.__name__, str(x.message)) for x in w]

    ref.same(f)


@pytest.mark.parametrize("name", ["script", "trace", "save", "load", "freeze"])
def test_torchscript_itself_raises(name):
    with pytest.raises(NotImplementedError, match="TorchScript is not part of ndgrad"):
        getattr(ndgrad.jit, name)(ndgrad.nn.Linear(1, 1), None)
    with pytest.raises(NotImplementedError):
        ndgrad.jit.ScriptModule()
    assert not isinstance(ndgrad.nn.Linear(1, 1), ndgrad.jit.ScriptModule)
