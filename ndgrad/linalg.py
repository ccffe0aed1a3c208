"""``ndgrad.linalg``: the linear-algebra ops registered under the ``linalg`` namespace."""

from ._ops.registry import NAMESPACES as _NS

globals().update(_NS["linalg"])
