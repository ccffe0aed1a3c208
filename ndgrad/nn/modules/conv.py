"""Convolution modules."""

__all__: list[str] = []
