"""PyTorch's ``torch._dynamo.backends.common``: ``aot_autograd(**kwargs)`` makes a backend
``fn(gm, example_inputs)`` that runs the graph through AOT autograd (``ndgrad/compiler/aot.py``)
with the given ``fw_compiler``, ``bw_compiler`` and ``partition_fn``."""

from __future__ import annotations

from ...compiler.aot import aot_module_simplified

__all__ = ["aot_autograd"]


def aot_autograd(**kwargs):
    """A backend compiling the forward and the backward of its graph ahead of time.

    >>> from ndgrad.compiler.aot import boxed_nop
    >>> backend = aot_autograd(fw_compiler=boxed_nop)
    >>> callable(backend)
    True
    """

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, **kwargs)

    backend.kwargs = kwargs
    return backend
