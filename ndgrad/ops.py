"""``torch.ops``: ``ndgrad.ops.aten.<name>.<overload>`` is the op record a dispatch mode receives
as ``func`` (``ndgrad.ops.aten.mm.default``)."""

from ._ops.overload import aten  # noqa: F401
