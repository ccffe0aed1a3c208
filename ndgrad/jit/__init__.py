"""``torch.jit`` as eager code sees it: ndgrad runs every function and module as Python, so the
markers and queries a scriptable library uses (``is_scripting``, ``ignore``, ``unused``,
``export``, ``annotate``, ``Final``, ``fork``/``wait``, ``isinstance``) behave as in PyTorch's
eager mode. TorchScript itself (``script``, ``trace``, ``save``, ``load``, ``freeze``) is not part
of ndgrad: those raise, pointing to ``ndgrad.compile``."""

from __future__ import annotations

import typing
import warnings
from typing import Final, NamedTuple  # noqa: F401  (torch.jit.Final)

__all__ = ["Attribute", "Error", "Final", "ScriptFunction", "ScriptModule", "annotate", "export",
           "fork", "freeze", "ignore", "interface", "is_scripting", "is_tracing", "isinstance",
           "load", "optimize_for_inference", "save", "script", "script_if_tracing", "trace",
           "trace_module", "unused", "wait"]

_builtin_isinstance = isinstance


class Error(Exception):
    """What a TorchScript program raises (``torch.jit.Error``)."""


class Attribute(NamedTuple):
    """A module attribute's value and its TorchScript type (eagerly: just the pair)."""

    value: typing.Any
    type: typing.Any


def is_scripting() -> bool:
    """False: ndgrad never compiles code to TorchScript."""
    return False


def is_tracing() -> bool:
    """False: ndgrad has no TorchScript tracer."""
    return False


def ignore(drop=False, **kwargs):
    """Leave a function to Python (eagerly: the function itself); as ``@ignore`` or
    ``@ignore(drop=...)``."""
    if callable(drop):
        return drop
    if not _builtin_isinstance(drop, bool):
        raise RuntimeError(f"Argument to @torch.jit.ignore must be a bool or a function but got {drop}")
    if kwargs.pop("drop_on_export", False) or drop:
        warnings.warn("ignore(True) has been deprecated. TorchScript will now drop the function call on "
                      "compilation. Use torch.jit.unused now. {}", category=FutureWarning, stacklevel=2)
    return lambda fn: fn


def unused(fn):
    """Mark a function or property that scripting would drop (eagerly: unchanged)."""
    return fn


def export(fn):
    """Mark a method as a TorchScript entry point (eagerly: unchanged)."""
    return fn


def interface(obj):
    """Declare a TorchScript interface (eagerly: the class itself)."""
    return obj


def script_if_tracing(fn):
    """Script ``fn`` only under tracing, which ndgrad never does: ``fn`` itself."""
    return fn


def annotate(the_type, the_value):
    """Give TorchScript ``the_value``'s type (eagerly: the value)."""
    return the_value


def fork(func, *args, **kwargs):
    """Run ``func`` as a task; eager code runs it now. Returns a completed ``Future``."""
    from ..futures import Future

    warnings.warn("`torch.jit.fork` is deprecated. Please use `torch.compile` instead.",
                  DeprecationWarning, stacklevel=2)
    fut = Future()
    fut.set_result(func(*args, **kwargs))
    return fut


def wait(future):
    """The value of a ``fork``'s ``Future``."""
    warnings.warn("`torch.jit.wait` is deprecated. Please use `torch.compile` instead.",
                  DeprecationWarning, stacklevel=2)
    return future.wait()


def isinstance(obj, target_type) -> bool:  # noqa: A001  (torch.jit.isinstance)
    """``isinstance`` that also checks the elements of containers against parameterised types
    (``List[int]``, ``Dict[str, Tensor]``, ``Tuple[int, str]``, ``Optional[T]``), as PyTorch's."""
    origin = typing.get_origin(target_type)
    if origin is None:
        return target_type is typing.Any or _builtin_isinstance(obj, target_type)
    args = typing.get_args(target_type)
    if origin in (list, dict, tuple) and _builtin_isinstance(obj, (list, dict, tuple)) and not obj:
        warnings.warn("The inner type of a container is lost when calling torch.jit.isinstance in eager "
                      "mode. For example, List[int] would become list and therefore falsely return True "
                      "for List[float] or List[str].", stacklevel=2)
    if origin is typing.Union:
        return any(isinstance(obj, t) for t in args)
    if origin is list:
        return _builtin_isinstance(obj, list) and all(isinstance(x, args[0]) for x in obj)
    if origin is dict:
        return _builtin_isinstance(obj, dict) and all(
            isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items())
    if origin is tuple:
        return (_builtin_isinstance(obj, tuple) and len(obj) == len(args)
                and all(isinstance(x, t) for x, t in zip(obj, args, strict=True)))
    return _builtin_isinstance(obj, origin)


class ScriptModule:
    """TorchScript's compiled module type: ndgrad makes none (``isinstance`` checks are False)."""

    def __init__(self, *args, **kwargs):
        raise _unavailable("ScriptModule")


class ScriptFunction:
    """TorchScript's compiled function type: ndgrad makes none."""

    def __init__(self, *args, **kwargs):
        raise _unavailable("ScriptFunction")


def _unavailable(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"torch.jit.{what}: TorchScript is not part of ndgrad, which runs functions and modules as "
        "Python; call them directly, or use ndgrad.compile for compiled code")


def script(obj, *args, **kwargs):
    raise _unavailable("script")


def trace(func, *args, **kwargs):
    raise _unavailable("trace")


def trace_module(mod, *args, **kwargs):
    raise _unavailable("trace_module")


def save(m, f, *args, **kwargs):
    raise _unavailable("save")


def load(f, *args, **kwargs):
    raise _unavailable("load")


def freeze(mod, *args, **kwargs):
    raise _unavailable("freeze")


def optimize_for_inference(mod, *args, **kwargs):
    raise _unavailable("optimize_for_inference")
