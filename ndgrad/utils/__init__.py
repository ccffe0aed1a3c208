"""``ndgrad.utils``: activation checkpointing (``utils.checkpoint``) and memory accounting."""

from . import checkpoint, memory  # noqa: F401
from . import data  # noqa: F401
