"""``ndgrad.special``: special functions registered under the ``special`` namespace."""

from ._ops.registry import NAMESPACES as _NS

globals().update(_NS["special"])
