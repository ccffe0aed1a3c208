"""``ndgrad._dynamo.config`` (PyTorch's ``torch._dynamo.config``): the compile stack's settings.
``cache_size_limit`` is the old name of ``recompile_limit``, as in PyTorch."""

from __future__ import annotations

import contextlib
import sys
import types

recompile_limit = 8  # cache entries (compiles) per compiled function before it runs eager
accumulated_recompile_limit = 256  # compiles over all functions since the last reset()
compiled_autograd = False
capture_scalar_outputs = False  # ndgrad has no symbolic scalars: .item() always breaks
suppress_errors = False  # a backend that raises: run eager instead of raising
verbose = False
automatic_dynamic_shapes = True  # accepted; ndgrad recompiles per shape (docs: "Compile stack")
assume_static_by_default = True

_ALIASES = {"cache_size_limit": "recompile_limit",
            "accumulated_cache_size_limit": "accumulated_recompile_limit"}


@contextlib.contextmanager
def _patch(changes):
    mod = sys.modules[__name__]
    old = {k: getattr(mod, k) for k in changes}
    for k, v in changes.items():
        setattr(mod, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(mod, k, v)


def patch(arg1=None, arg2=None, **kwargs):
    """``config.patch(name, value)`` or ``config.patch(name=value, ...)``: a context manager
    and decorator that sets these for its duration."""
    changes = dict(kwargs)
    if isinstance(arg1, dict):
        changes.update(arg1)
    elif arg1 is not None:
        changes[arg1] = arg2
    return _Patch(changes)


class _Patch(contextlib.ContextDecorator):
    def __init__(self, changes):
        self.changes = changes

    def __enter__(self):
        self.cm = _patch(self.changes)
        self.cm.__enter__()

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc)


class _ConfigModule(types.ModuleType):
    def __getattr__(self, name):
        if name in _ALIASES:
            return getattr(self, _ALIASES[name])
        raise AttributeError(f"ndgrad._dynamo.config has no attribute {name!r}")

    def __setattr__(self, name, value):
        super().__setattr__(_ALIASES.get(name, name), value)


sys.modules[__name__].__class__ = _ConfigModule
