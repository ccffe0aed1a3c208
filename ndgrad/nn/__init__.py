"""``ndgrad.nn``: for now only ``nn.functional`` (modules arrive with the nn issue)."""

from . import functional  # noqa: F401
