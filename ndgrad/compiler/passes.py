"""Graph passes beyond ``Graph.eliminate_dead_code`` and ``Graph.lint``: common-subexpression
elimination (PyTorch's ``CSEPass``), which never merges random or mutating calls, nor any value
whose memory something in the graph writes."""

from __future__ import annotations

import operator
from typing import NamedTuple

from .node import Node, is_impure_target

__all__ = ["eliminate_common_subexpressions", "CSEPass", "PassResult"]


class PassResult(NamedTuple):
    graph_module: object
    modified: bool


def _is_op(target) -> bool:
    return getattr(target, "namespace", None) == "aten" and hasattr(target, "_schema")


def _alias_root(n: Node) -> Node:
    """The node whose memory ``n`` shares: through views, the self an in-place op returns,
    the outputs of a multi-output view, ``detach``."""
    while True:
        if n.op == "call_function" and _is_op(n.target) and n.target.kind in ("view", "inplace"):
            n = n.args[0]
        elif (n.op == "call_function" and n.target is operator.getitem
              and isinstance(n.args[0], Node) and n.args[0].op == "call_function"
              and _is_op(n.args[0].target) and n.args[0].target.kind == "view"):
            n = n.args[0].args[0]
        elif n.op == "call_method" and n.target in ("detach", "view", "view_as", "expand", "t",
                                                    "transpose", "permute", "squeeze", "unsqueeze"):
            n = n.args[0]
        else:
            return n
        if not isinstance(n, Node):
            return n


def _written(n: Node) -> list:
    """The Node arguments ``n`` may write to (None: it is not a write)."""
    if n.op == "call_function" and _is_op(n.target):
        schema = n.target._schema
        if not schema.is_mutable:
            return None
        out = []
        for i, a in enumerate(schema.arguments):
            if a.alias_info is not None and a.alias_info.is_write:
                v = n.args[i] if i < len(n.args) else n.kwargs.get(a.name)
                if isinstance(v, Node):
                    out.append(v)
        return out
    if n.op == "call_method" and n.target.endswith("_") and not n.target.endswith("__"):
        return [n.args[0]] if n.args and isinstance(n.args[0], Node) else []
    if n.op == "call_module" or (n.op == "call_function" and is_impure_target(n.target)):
        return n.all_input_nodes  # unknown effects: assume it writes what it reads
    return None


def _key(a):
    """A hashable form of an argument structure; leaves carry their type, so ``x * 1`` and
    ``x * True`` (or ``1.0``) stay apart."""
    t = type(a)
    if isinstance(a, Node):
        return a
    if t is tuple or t is list:
        return (t, tuple(_key(x) for x in a))
    if t is dict:
        return (t, tuple((k, _key(v)) for k, v in a.items()))
    if t is slice:
        return (t, _key(a.start), _key(a.stop), _key(a.step))
    if t is float or t is complex:
        return (t, repr(a))  # -0.0 and 0.0 differ; nan never matches itself otherwise
    hash(a)
    return (t, a)


def eliminate_common_subexpressions(gm) -> int:
    """Replace each call repeating an earlier one (same target, same arguments) by the earlier
    value; returns how many nodes were removed. Random and mutating calls never merge; after a
    write, nothing merges with a call before it (a read could see different values); a value
    whose memory the graph writes (an in-place target, or a view of one) never merges."""
    graph = gm.graph if hasattr(gm, "graph") else gm
    roots_written = set()
    for n in graph.nodes:
        for w in _written(n) or ():
            roots_written.add(_alias_root(w))
    table: dict = {}
    removed = 0
    for n in list(graph.nodes):
        if n.op in ("placeholder", "output"):
            continue
        if _written(n) is not None:
            table.clear()
            continue
        if n.is_impure() or _alias_root(n) in roots_written:
            continue
        try:
            key = (n.op, n.target, _key(n.args), _key(n.kwargs))
            prev = table.get(key)
        except TypeError:  # an unhashable argument: leave it
            continue
        if prev is None:
            table[key] = n
            continue
        n.replace_all_uses_with(prev)
        graph.erase_node(n)
        removed += 1
    if removed and hasattr(gm, "recompile"):
        gm.recompile()
    return removed


class CSEPass:
    """PyTorch's pass form: ``CSEPass()(gm)`` returns a ``PassResult``."""

    def __call__(self, graph_module) -> PassResult:
        return PassResult(graph_module, eliminate_common_subexpressions(graph_module) > 0)
