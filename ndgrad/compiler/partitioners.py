"""Partitioners of a joint forward+backward graph (issue 15, item 5), under PyTorch's names:
``default_partition`` (the forward computes what its outputs need and saves every forward value
the backward reads) and ``min_cut_rematerialization_partition`` (saves the cheapest set of
values, by bytes, from which the backward can recompute the rest with pointwise and view ops;
matmuls, reductions and random ops are never recomputed). The joint graph comes from ``aot.py``:
placeholders ``primals_<i>`` then ``tangents_<i>``; its output is ``(*outs, *grads)``.
"""

from __future__ import annotations

import collections
import operator

from .capture import _set_grad_enabled as _SET_GRAD
from .graph import Graph
from .graph_module import GraphModule
from .node import Node, TensorMeta, map_arg

__all__ = ["default_partition", "min_cut_rematerialization_partition"]

_INF = float("inf")


def _is_tangent(n: Node) -> bool:
    return n.op == "placeholder" and n.target.startswith("tangents")


def _is_primal(n: Node) -> bool:
    return n.op == "placeholder" and not _is_tangent(n)


def _nondeterministic(n: Node) -> bool:
    extra = getattr(n.target, "extra", None)
    return bool(extra and extra.get("nondeterministic"))


def _ancestors(roots, stop=()) -> set:
    """``roots`` and every node they read, transitively, not entering nodes in ``stop``."""
    seen: set = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n in seen or n in stop:
            continue
        seen.add(n)
        stack.extend(n._input_nodes)  # the dict itself: no list copy per node
    return seen


def _forward_side_effect(n: Node) -> bool:
    """A write the forward must make (the copy back into a written input) or a random draw."""
    return n.op == "call_function" and (
        _nondeterministic(n) or getattr(n.target, "kind", None) == "inplace")


# Pointwise ops whose JVP is not declared "elementwise" but which are elementwise all the same.
_POINTWISE = frozenset((
    "eq.Tensor", "ne.Tensor", "lt.Tensor", "le.Tensor", "gt.Tensor", "ge.Tensor", "eq.Scalar",
    "ne.Scalar", "lt.Scalar", "le.Scalar", "gt.Scalar", "ge.Scalar", "logical_and", "logical_or",
    "logical_xor", "logical_not", "isnan", "isinf", "bitwise_not", "clone", "_to_copy",
    "zeros_like", "ones_like", "full_like", "square", "native_dropout_backward"))


def _recomputable(n: Node) -> bool:
    """Cheap to recompute in the backward: a pointwise or view op, never random, writing,
    a matmul or a reduction."""
    if n.op == "call_method":
        return n.target == "detach"
    if n.op != "call_function":
        return False
    if n.target is operator.getitem:
        return True
    rec = n.target
    kind = getattr(rec, "kind", None)
    if kind is None or kind == "inplace" or _nondeterministic(n):
        return False
    if kind == "view":
        return True
    jvp = rec.extra.get("jvp")
    if jvp == "elementwise" or rec.name in _POINTWISE:
        return True
    samples = getattr(rec, "samples", None)
    return jvp == "linear" and getattr(samples, "__module__", "") == "ndgrad._ops.shape" \
        and not rec.has_list


def _nbytes(n: Node) -> float:
    v = n.meta.get("val")
    if isinstance(v, TensorMeta):
        numel = 1
        for s in v.shape:
            numel *= s
        return max(numel * v.dtype.itemsize, 1)
    return _INF  # a tuple or a Python value is saved through its elements, or not at all


# --- classification shared by both partitioners ---
class _Joint:
    def __init__(self, gm: GraphModule, num_fwd_outputs: int):
        g = gm.graph
        self.gm = gm
        self.nodes = list(g.nodes)
        self.output = self.nodes[-1]
        outs = self.output.args[0]
        self.fw_outs, self.grads = list(outs[:num_fwd_outputs]), list(outs[num_fwd_outputs:])
        self.primals = [n for n in self.nodes if _is_primal(n)]
        self.tangents = [n for n in self.nodes if _is_tangent(n)]
        # Tangent-dependent nodes belong to the backward.
        self.tangent_dep: set = set(self.tangents)
        for n in self.nodes:
            if n.op in ("call_function", "call_method") and \
                    any(a in self.tangent_dep for a in n._input_nodes):
                self.tangent_dep.add(n)
        # The forward: what the outputs need, random draws and writes that do not read tangents,
        # and every getitem of a forward value (a tuple is never saved whole).
        stack = [a for a in self.fw_outs if isinstance(a, Node)]
        stack += [n for n in self.nodes
                  if _forward_side_effect(n) and n not in self.tangent_dep]
        stack += [n for n in self.nodes if n.op == "get_attr"]
        fw = _ancestors(stack, stop=self.tangent_dep)
        fw.update(self.primals)
        for n in self.nodes:
            if n.target is operator.getitem and n.args[0] in fw and n not in self.tangent_dep:
                fw.add(n)
        self.fw = fw
        # What the backward needs: ancestors of the gradients.
        self.bw_need = _ancestors([a for a in self.grads if isinstance(a, Node)])

    def build(self, saved: list) -> tuple:
        """The two GraphModules for this saved set (each saved node must be a forward node)."""
        nodes, gm = self.nodes, self.gm
        # Forward: forward nodes, in order, minus the ones only the backward (recomputing)
        # reads: what the outputs, the saved values and the side effects need.
        stack = [a for a in self.fw_outs if isinstance(a, Node)] + list(saved)
        stack += [n for n in self.fw if _forward_side_effect(n)]
        keep = _ancestors(stack)
        fg = Graph()
        env: dict = {}
        for n in nodes:
            if n.op == "placeholder" and _is_primal(n) or (n in keep and n.op != "placeholder"):
                env[n] = fg.node_copy(n, env.__getitem__)
        fg.output(tuple(map_arg(tuple(self.fw_outs), env.__getitem__))
                  + tuple(env[s] for s in saved))
        # Backward: saved values become placeholders, then the tangents; it recomputes any other
        # forward value it reads from those.
        bg = Graph()
        benv: dict = {}
        for s in saved:
            p = bg.placeholder(s.name)
            p.meta = dict(s.meta)
            benv[s] = p
        for t in self.tangents:
            benv[t] = bg.node_copy(t)
        # what the gradients need, given the saved values
        need = _ancestors([a for a in self.grads if isinstance(a, Node)], stop=benv)
        for n in nodes:
            if n in need and n.target is not _SET_GRAD:
                if n.op == "placeholder":
                    raise RuntimeError(f"partition: the backward needs {n.name}, not saved")
                benv[n] = bg.node_copy(n, benv.__getitem__)
        bg.output(tuple(map_arg(tuple(self.grads), benv.__getitem__)))
        fw_gm = GraphModule(gm, fg)
        bw_gm = GraphModule(gm, bg)
        fw_gm.meta["num_saved"] = len(saved)
        fw_gm.meta["saved_names"] = [s.name for s in saved]
        return fw_gm, bw_gm


def _bw_reads(j: _Joint, n: Node) -> bool:
    """A forward node read directly by a backward (tangent-dependent) node, or a gradient."""
    return any(u in j.bw_need and u not in j.fw for u in n.users) or \
        any(n is g for g in j.grads)


def default_partition(joint_module: GraphModule, _joint_inputs=None, *, num_fwd_outputs: int,
                      **kwargs) -> tuple:
    """Forward = what the forward outputs need; it saves every forward value the backward reads.
    Returns ``(fw_module, bw_module)``: the forward returns ``(*outs, *saved)``, the backward
    takes ``(*saved, *tangents)`` and returns one gradient (or None) per primal."""
    j = _Joint(joint_module, num_fwd_outputs)
    saved = []
    for n in j.nodes:
        if n in j.fw and n in j.bw_need and n.op in ("placeholder", "call_function",
                                                     "call_method") and n not in j.tangent_dep:
            if _nbytes(n) == _INF:
                continue  # a tuple: its getitems are forward nodes too
            if _bw_reads(j, n):
                saved.append(n)
    return j.build(saved)


# --- min cut ---
class _Flow:
    """Dinic's maximum flow on a small graph (adjacency lists of edge indices)."""

    def __init__(self, n: int):
        self.n = n
        self.adj: list = [[] for _ in range(n)]
        self.to: list = []
        self.cap: list = []

    def edge(self, u: int, v: int, c: float) -> None:
        self.adj[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(c)
        self.adj[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(0.0)

    def _levels(self, s: int, t: int):
        level = [-1] * self.n
        level[s] = 0
        q = collections.deque([s])
        adj, to, cap = self.adj, self.to, self.cap
        while q:
            u = q.popleft()
            for e in adj[u]:
                v = to[e]
                if cap[e] > 0 and level[v] < 0:
                    level[v] = level[u] + 1
                    q.append(v)
        return level if level[t] >= 0 else None

    def max_flow(self, s: int, t: int) -> None:
        adj, to, cap = self.adj, self.to, self.cap
        while True:
            level = self._levels(s, t)
            if level is None:
                return
            it = [0] * self.n
            while True:  # blocking flow, one path per round, iterative DFS
                path, u = [], s
                while u != t:
                    advanced = False
                    while it[u] < len(adj[u]):
                        e = adj[u][it[u]]
                        v = to[e]
                        if cap[e] > 0 and level[v] == level[u] + 1:
                            path.append(e)
                            u = v
                            advanced = True
                            break
                        it[u] += 1
                    if not advanced:
                        if u == s:
                            break
                        level[u] = -1  # dead end
                        e = path.pop()
                        u = to[e ^ 1]
                        it[u] += 1
                if u != t:
                    break
                f = min(cap[e] for e in path)
                if f == _INF:
                    raise RuntimeError("min-cut partition: no finite cut (a value the backward "
                                       "needs can be neither saved nor recomputed)")
                for e in path:
                    cap[e] -= f
                    cap[e ^ 1] += f

    def source_side(self, s: int) -> set:
        seen = {s}
        stack = [s]
        while stack:
            u = stack.pop()
            for e in self.adj[u]:
                v = self.to[e]
                if self.cap[e] > 0 and v not in seen:
                    seen.add(v)
                    stack.append(v)
        return seen


def min_cut_rematerialization_partition(joint_module: GraphModule, _joint_inputs=None, *,
                                        num_fwd_outputs: int, recompute_max_bytes=None,
                                        **kwargs) -> tuple:
    """Save the set of forward values of least total size (bytes) that separates the forward's
    inputs from what the backward reads, where only pointwise and view ops may be recomputed in
    the backward; everything else the backward needs is saved. ``recompute_max_bytes``: values
    larger than this are never recomputed (recomputing a big array costs a pass over memory;
    saving a small one costs more per tensor than the bytes say). Returns ``(fw_module,
    bw_module)`` as ``default_partition``."""
    j = _Joint(joint_module, num_fwd_outputs)
    cand = [n for n in j.nodes
            if n in j.fw and n in j.bw_need and n.op not in ("output", "get_attr")]
    idx = {n: i for i, n in enumerate(cand)}
    S, T = 2 * len(cand), 2 * len(cand) + 1
    flow = _Flow(2 * len(cand) + 2)
    for n, i in idx.items():
        flow.edge(2 * i, 2 * i + 1, _nbytes(n))  # saving n costs its size
        if n.op == "placeholder" or not _recomputable(n) or (
                recompute_max_bytes is not None and _nbytes(n) > recompute_max_bytes):
            flow.edge(S, 2 * i, _INF)  # must be computed in the forward
        if _bw_reads(j, n):
            flow.edge(2 * i + 1, T, _INF)  # the backward reads it
        for a in n._input_nodes:
            if a in idx:
                flow.edge(2 * idx[a] + 1, 2 * i, _INF)
    flow.max_flow(S, T)
    side = flow.source_side(S)
    saved = [n for n, i in idx.items() if 2 * i in side and 2 * i + 1 not in side]
    return j.build(saved)

