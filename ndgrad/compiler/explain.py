"""``ndgrad._dynamo.explain(fn)(*args)``: capture ``fn`` once and report its graphs and breaks
as PyTorch's ``ExplainOutput``. ndgrad cannot resume Python after a break, but a capture runs
the whole function, so the recorded ops are split at each break: one graph per stretch between
breaks (empty stretches are no graph), as PyTorch counts them."""

from __future__ import annotations

import operator
import time

from .dynamo import capture_with_breaks
from ..nn.modules.module import Module
from .graph import Graph
from .graph_module import GraphModule
from .guards import GuardSet

__all__ = ["ExplainOutput", "explain"]

_CALLS = ("call_function", "call_method", "call_module")


class ExplainOutput:
    """What ``explain`` found: ``graphs`` (GraphModules), ``graph_count``,
    ``graph_break_count``, ``break_reasons`` (``GraphCompileReason``: ``reason``,
    ``user_stack``), ``op_count``, ``ops_per_graph`` (op targets), ``out_guards`` and
    ``compile_times``."""

    def __init__(self, graphs, graph_count, graph_break_count, break_reasons, op_count,
                 ops_per_graph=None, out_guards=None, compile_times=None):
        self.graphs, self.graph_count = graphs, graph_count
        self.graph_break_count, self.break_reasons = graph_break_count, break_reasons
        self.op_count, self.ops_per_graph = op_count, ops_per_graph
        self.out_guards, self.compile_times = out_guards, compile_times

    def __str__(self) -> str:
        out = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
               f"Op Count: {self.op_count}", "Break Reasons:"]
        for i, br in enumerate(self.break_reasons, 1):
            out += [f"  Break Reason {i}:", f"    Reason: {br.reason}", "    User Stack:"]
            out += [f"      {fs!r}" for fs in br.user_stack]
        if self.ops_per_graph is not None:
            out.append("Ops per Graph:")
            for i, ops in enumerate(self.ops_per_graph, 1):
                out.append(f"  Ops {i}:")
                out += [f"    {op}" for op in ops]
        if self.out_guards is not None:
            out.append("Out Guards:")
            for i, g in enumerate(self.out_guards, 1):
                out += [f"  Guard {i}:", f"    {g}"]
        if self.compile_times is not None:
            out.append(f"Compile Times: {self.compile_times}")
        return "\n".join(out) + "\n"

    __repr__ = __str__


def _is_op(n) -> bool:
    return n.op in _CALLS and n.target is not operator.getitem


def split_at_breaks(gm: GraphModule, positions: list) -> list:
    """One GraphModule per stretch of ``gm``'s calls between break positions (node counts at
    each break); each takes the values it reads from before it and returns those read after."""
    nodes = list(gm.graph.nodes)
    bounds = sorted(set(p for p in positions if 0 < p < len(nodes)))
    read = {nodes[p - 1] for p in bounds}  # the value the Python at the break reads
    pieces, start = [], 0
    for b in [*bounds, len(nodes)]:
        seg = [n for n in nodes[start:b] if n.op in _CALLS]
        start = b
        if any(_is_op(n) for n in seg):
            pieces.append(seg)
    graphs = []
    for seg in pieces:
        inside = set(seg)
        g = Graph()
        env: dict = {}
        for n in seg:
            for inp in n.all_input_nodes:
                if inp not in env and inp not in inside:
                    env[inp] = (g.get_attr(inp.target) if inp.op == "get_attr"
                                else g.placeholder(inp.name))
                    env[inp].meta.update(inp.meta)
            env[n] = g.node_copy(n, lambda x: env[x])
        outs = [env[n] for n in seg if n in read or any(u not in inside for u in n.users)]
        g.output(tuple(outs))
        graphs.append(GraphModule(gm, g))
    return graphs


def explain(f, *extra_args, **extra_kwargs):
    """``explain(fn)(*args, **kwargs) -> ExplainOutput``: run ``fn`` once under capture and say
    how it would compile.

    >>> import ndgrad
    >>> def fn(x):
    ...     y = x.sin()
    ...     if y.sum().item() > 0:
    ...         return y * 2
    ...     return y - 1
    >>> e = ndgrad._dynamo.explain(fn)(ndgrad.ones(3))
    >>> e.graph_count, e.graph_break_count
    (2, 1)
    """
    def inner(*args, **kwargs):
        guards = GuardSet(f, args, kwargs, root=f if isinstance(f, Module) else None)
        t0 = time.perf_counter()
        gm, _, reasons = capture_with_breaks(f, args, kwargs)
        dt = time.perf_counter() - t0
        graphs = split_at_breaks(gm, [r.node_index for r in reasons]) if reasons else [gm]
        if not any(_is_op(n) for n in gm.graph.nodes):
            graphs = []
        ops = [[n.target for n in g.graph.nodes if _is_op(n)] for g in graphs]
        times = f"ndgrad compile metrics:\nFunction    Runtimes (s)\ncapture     {dt:.4f}"
        return ExplainOutput(graphs, len(graphs), len(reasons), reasons,
                             sum(len(o) for o in ops), ops, guards.guards, times)

    if extra_args or extra_kwargs:
        return inner(*extra_args, **extra_kwargs)
    return inner
