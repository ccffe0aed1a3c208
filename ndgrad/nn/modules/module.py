"""Module: parameters, buffers, submodules, state dicts, hooks."""

__all__: list[str] = []
