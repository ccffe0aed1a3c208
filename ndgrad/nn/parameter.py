"""Parameter and Buffer."""

__all__: list[str] = []
