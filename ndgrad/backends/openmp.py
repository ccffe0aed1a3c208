"""``torch.backends.openmp``: ndgrad runs no OpenMP loops of its own."""

from __future__ import annotations


def is_available() -> bool:
    return False
