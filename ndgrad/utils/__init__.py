"""``ndgrad.utils``: activation checkpointing (``utils.checkpoint``) and memory accounting."""

from . import _python_dispatch, checkpoint, memory  # noqa: F401
from . import data  # noqa: F401
