"""The backend registry (PyTorch's ``torch._dynamo.register_backend`` and friends) and the
built-in backends. A backend is ``fn(gm: GraphModule, example_inputs: list) -> callable``; the
callable takes the graph's placeholder values positionally and returns what ``gm`` returns.
``aot_eager``, ``inductor`` and ``cudagraphs`` live in ``aot.py`` / ``inductor.py`` /
``cudagraphs.py``, imported on first use."""

from __future__ import annotations

__all__ = ["register_backend", "lookup_backend", "list_backends"]

_BACKENDS: dict = {}  # name -> compiler_fn
_TAGS: dict = {}  # name -> tags


def register_backend(compiler_fn=None, name: str | None = None, tags=()):
    """Register ``compiler_fn`` under ``name`` (default: its ``__name__``); as a decorator with
    or without arguments.

    >>> from ndgrad.compiler.backends import register_backend, lookup_backend
    >>> @register_backend(name="doc_example", tags=("debug",))
    ... def my_backend(gm, example_inputs):
    ...     return gm.forward
    >>> lookup_backend("doc_example") is my_backend
    True
    """
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name=name, tags=tags)
    if not callable(compiler_fn):
        raise AssertionError(f"backend {compiler_fn!r} is not callable")
    name = name or compiler_fn.__name__
    if name in _BACKENDS and _BACKENDS[name] is not compiler_fn:
        raise AssertionError(f"duplicate name: {name}")
    _BACKENDS[name] = compiler_fn
    _TAGS[name] = tuple(tags)
    return compiler_fn


def lookup_backend(compiler_fn):
    """A backend by name, or ``compiler_fn`` itself when it is a callable."""
    if isinstance(compiler_fn, str):
        if compiler_fn not in _BACKENDS:
            from .exc import InvalidBackend

            raise InvalidBackend(name=compiler_fn)
        return _BACKENDS[compiler_fn]
    return compiler_fn


def list_backends(exclude_tags=("debug", "experimental")) -> list:
    """The registered backend names, sorted, less those carrying a tag in ``exclude_tags``."""
    exclude = set(exclude_tags or ())
    return sorted(n for n in _BACKENDS if not exclude & set(_TAGS[n]))


# --- built in ---
@register_backend(tags=("debug",))
def eager(gm, example_inputs):
    """Runs the captured graph's generated code: each op dispatches and records autograd."""
    return gm.forward


@register_backend(tags=("debug",))
def aot_eager(gm, example_inputs):
    """AOT autograd (min-cut partitioner) with no-op compilers (``aot.py``)."""
    from .aot import aot_eager_backend

    return aot_eager_backend(gm, example_inputs)


@register_backend
def inductor(gm, example_inputs, options=None):
    """ndgrad's code generator (``inductor.py``); ``options`` are ``ndgrad.compile``'s, or its
    ``mode``'s (``dynamo.list_mode_options``), passed only when there are some."""
    from .inductor import inductor_backend

    if options:
        return inductor_backend(gm, example_inputs, options=options)
    return inductor_backend(gm, example_inputs)


@register_backend
def cudagraphs(gm, example_inputs):
    """AOT autograd with each half replayed as a CUDA graph (``cudagraphs.py``); graphs on the
    CPU, on several devices or with random or data-dependent ops log why and run uncompiled."""
    from .cudagraphs import cudagraphs_backend

    return cudagraphs_backend(gm, example_inputs)
