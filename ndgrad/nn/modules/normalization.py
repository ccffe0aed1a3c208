"""Normalization modules (BatchNorm, LayerNorm, GroupNorm, RMSNorm)."""

__all__: list[str] = []
