"""``ndgrad.utils``: activation checkpointing (``utils.checkpoint``) and memory accounting."""

from . import _python_dispatch, checkpoint, memory  # noqa: F401
from . import benchmark, data  # noqa: F401
