"""``torch._dynamo.utils.counters``: what compiles did ("stats": captures, cache_hits,
recompiles, graph_breaks, eager_runs, unique_graphs; "graph_break": reason -> count)."""

from __future__ import annotations

from ..compiler.dynamo import counters

__all__ = ["counters"]
