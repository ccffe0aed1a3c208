"""The compile stack's errors, with PyTorch's names (``torch._dynamo.exc``): every one is a
``RuntimeError``, as PyTorch's are."""

from __future__ import annotations

__all__ = ["TorchDynamoException", "Unsupported", "UserError", "InvalidBackend",
           "BackendCompilerFailed", "RecompileLimitExceeded"]


class TorchDynamoException(RuntimeError):
    pass


class Unsupported(TorchDynamoException):
    """Capture met Python it cannot put in a graph (a graph break) under ``fullgraph=True``."""

    def __init__(self, msg: str, *, real_stack=None):
        super().__init__(msg)
        self.msg = msg
        self.real_stack = real_stack or []


class UserError(TorchDynamoException):
    pass


class InvalidBackend(TorchDynamoException):
    def __init__(self, name):
        from .backends import list_backends

        super().__init__(f"Invalid backend: {name!r}, see `ndgrad._dynamo.list_backends()` for "
                         f"available backends: {list_backends(exclude_tags=())}.")


class BackendCompilerFailed(TorchDynamoException):
    def __init__(self, backend_fn, inner_exception):
        self.backend_name = getattr(backend_fn, "__name__", "?")
        self.inner_exception = inner_exception
        super().__init__(f"backend={self.backend_name!r} raised:\n"
                         f"{type(inner_exception).__name__}: {inner_exception}")


class RecompileLimitExceeded(TorchDynamoException):
    pass
