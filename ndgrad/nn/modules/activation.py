"""Activation modules."""

__all__: list[str] = []
