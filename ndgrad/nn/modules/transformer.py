"""MultiheadAttention, TransformerEncoderLayer."""

__all__: list[str] = []
