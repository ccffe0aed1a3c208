"""Backward engine: one walk counts dependencies; a ready queue runs nodes (AccumulateGrad first,
then newest sequence number). Gradients meet in per-node input buffers; each node's outputs
are checked against the metadata of the nodes they flow into (broadcast gradients reduced,
dtypes cast, incompatible shapes raise PyTorch's error).
"""

from __future__ import annotations

import threading
from heapq import heappop, heappush

import numpy as np

from .. import _backend
from .._backend.streams import in_use as _streams_in_use
from .._tensor import Tensor, gradient_edge, refresh_view
from . import anomaly_mode as _anomaly
from . import saved as _saved
from .dispatch_mode import active as _modes  # non-empty while any dispatch mode is entered
from .grad_mode import state as _gs
from .node import AccumulateGrad, GraphRoot, shared_view

__all__ = ["run_backward", "queue_callback", "will_execute_node", "current_task", "Variable"]

_make = Tensor._make
_anomaly_state = _anomaly.state

# The profiler's hook: when set, the engine runs each node as ``node_observer(node, grads)``,
# which must call and return ``node.apply(grads)``. Read once per backward, so off costs nothing
# per node.
node_observer = None


# Compiled autograd's entry (``compiler/compiled_autograd.py``, a layer up): when set, a backward
# without create_graph, not re-entrant and with no dispatch mode active is offered to it first as
# ``fn(root, task)`` (``task.needed`` / ``captures`` set for ``inputs=``); it returns False to leave
# it to this engine.
compiled_backward = [None]


# --- task state ---
class GraphTask:
    __slots__ = ("keep_graph", "create_graph", "needed", "captures", "captured", "callbacks", "journal",
                 "check_nan", "deps", "accumulate", "hook_state")

    def __init__(self, keep_graph: bool, create_graph: bool):
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.needed = None  # nodes to run when `inputs` restrict the backward
        self.captures = None  # node -> [(input_nr, capture index)] for autograd.grad
        self.captured = None
        self.callbacks = []
        self.journal = []  # (meta, grad tensor, copy of its array) to undo .grad on failure
        self.check_nan = False  # anomaly mode's NaN check (set when anomaly mode is on)
        self.deps = None  # node -> pending count: its keys are every node reachable from the roots
        self.accumulate = True  # False for autograd.grad
        self.hook_state = None  # per-backward state of multi-grad hooks (graph.register_multi_grad_hook)


_local = threading.local()


def _task_stack() -> list:
    s = getattr(_local, "tasks", None)
    if s is None:
        s = _local.tasks = []
    return s


def current_task():
    """The innermost backward running on this thread, or None (torch._C._current_graph_task_id)."""
    stack = getattr(_local, "tasks", None)
    return stack[-1] if stack else None


def will_execute_node(node) -> bool:
    """Whether the current backward runs ``node`` (torch._C._will_engine_execute_node)."""
    task = current_task()
    if task is None:
        raise RuntimeError("_get_should_execute_nodes should only be called during the backward pass")
    if not task.accumulate and type(node) is AccumulateGrad:
        raise RuntimeError(
            "A leaf node was passed to _will_engine_execute_node but we are currently running "
            "autograd.grad(). This is currently not supported."
        )
    if task.needed is None:
        return node in task.deps
    return node in task.needed or (task.captures is not None and node in task.captures)


def queue_callback(callback) -> None:
    """Run ``callback()`` once the current backward pass finishes (``Variable._execution_engine``)."""
    stack = _task_stack()
    if not stack:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    stack[-1].callbacks.append(callback)


# --- re-entrant backward ---
# A backward called from inside a backward (a custom Function, a hook, reentrant checkpoint)
# runs nested in the caller's thread. Each level costs Python stack, so every
# MAX_REENTRANT_DEPTH levels the nested call moves to a fresh thread (with its own recursion
# budget) and the caller waits: any depth works, as in PyTorch.
MAX_REENTRANT_DEPTH = 32


def _in_fresh_thread(fn, *args):
    """Run ``fn(*args)`` in a new thread carrying this thread's grad mode and saved-tensor
    hooks; return its result or raise its exception here."""
    grad_enabled, inference = _gs.grad_enabled, _gs.inference
    hooks, hooks_disabled = _saved._hooks.stack[:], _saved._hooks.disabled
    result = [None, None]

    def body():
        _gs.grad_enabled, _gs.inference = grad_enabled, inference
        _saved._hooks.stack[:], _saved._hooks.disabled = hooks, hooks_disabled
        try:
            result[0] = fn(*args)
        except BaseException as e:  # re-raised in the waiting thread
            result[1] = e

    t = threading.Thread(target=body, name="ndgrad-reentrant-backward")
    t.start()
    t.join()
    if result[1] is not None:
        raise result[1]
    return result[0]


class _ExecutionEngine:
    """``Variable._execution_engine``: the engine object PyTorch code queues callbacks on."""

    queue_callback = staticmethod(queue_callback)


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """The legacy ``autograd.Variable``: calling it returns the tensor; tensors are instances."""

    _execution_engine = _ExecutionEngine()

    def __new__(cls, data, requires_grad=False):
        return data.detach().requires_grad_(requires_grad) if requires_grad else data


# --- entry points ---
def run_backward(roots, grads, keep_graph, create_graph, inputs=None, allow_unused=True, accumulate=True):
    """Run backward from ``roots`` (tensors) seeded with ``grads``.

    ``accumulate=True`` is ``backward()``: leaves (and non-leaf ``inputs``) get ``.grad``.
    ``accumulate=False`` is ``grad()``: returns the gradients of ``inputs``.
    """
    if len(_task_stack()) >= MAX_REENTRANT_DEPTH:
        return _in_fresh_thread(run_backward, roots, grads, keep_graph, create_graph, inputs,
                                allow_unused, accumulate)
    edges = []
    for i, t in enumerate(roots):
        if t._view is not None:
            refresh_view(t)
        e = gradient_edge(t)
        if e is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        edges.append(e)
    root = GraphRoot(edges, grads)
    task = GraphTask(keep_graph, create_graph)
    task.accumulate = accumulate
    ca = compiled_backward[0]
    if ca is not None and create_graph:
        ca = None  # a graph of the backward itself: the eager engine records it
    if inputs is not None:
        in_edges = []
        for t in inputs:
            if t._view is not None:
                refresh_view(t)
            e = gradient_edge(t)
            if e is None and not accumulate:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            in_edges.append(e)
        targets = {e[0] for e in in_edges if e is not None}
        run = {n for n in targets if accumulate and isinstance(n, AccumulateGrad)}
        task.needed = _needed_nodes(root, targets, run)
        if not accumulate or any(e is not None and not isinstance(e[0], AccumulateGrad) for e in in_edges):
            task.captures = {}
            for k, e in enumerate(in_edges):
                if e is not None and (not accumulate or not isinstance(e[0], AccumulateGrad)):
                    task.captures.setdefault(e[0], []).append((e[1], k))
            task.captured = [None] * len(in_edges)
    stack = _task_stack()
    stack.append(task)
    prev = _gs.grad_enabled
    _gs.grad_enabled = create_graph
    try:
        try:
            anomaly = _anomaly_state.enabled
            if ca is not None and ca(root, task, len(stack) > 1, bool(_modes)):
                pass  # compiled autograd ran it (filling task.captured)
            elif anomaly or _streams_in_use[0]:  # read once per call: the general loop, or the fast one
                deps = task.deps = _count_dependencies(root)
                task.check_nan = anomaly and _anomaly_state.check_nan
                _execute_general(task, root, deps, anomaly)
            else:
                deps = task.deps = _count_dependencies(root)
                _execute(task, root, deps)
        except BaseException:
            for meta, old, saved in reversed(task.journal):
                meta.grad = old
                if saved is not None:
                    old._data[...] = saved
            raise
        # NOTE(pytorch): callbacks run inside the backward (under its grad mode, and may queue
        # more); one that raises leaves the accumulated .grad in place.
        for cb in task.callbacks:
            cb()
    finally:
        _gs.grad_enabled = prev
        stack.pop()
    if accumulate and task.captured is not None:
        for t, g in zip(inputs, task.captured, strict=True):
            if g is not None and t._grad_fn is not None:
                m = t._get_meta()
                m.grad = g if m.grad is None else m.grad + g
        return None
    return task.captured


# --- dependencies ---
def _count_dependencies(root) -> dict:
    """Number of edges into each node reachable from root: iterative, never recursive."""
    deps = {}
    stack = [root]
    pop, push = stack.pop, stack.append
    while stack:
        for e in pop().next_edges:
            if e is not None:
                nxt = e[0]
                if nxt in deps:
                    deps[nxt] += 1
                else:
                    deps[nxt] = 1
                    push(nxt)
    return deps


def _needed_nodes(root, targets: set, run: set) -> set:
    """Nodes on some path from root to a target (post-order walk, children first)."""
    needed = set()
    visited = {root}
    stack = [(root, 0)]
    while stack:
        node, i = stack[-1]
        edges = node.next_edges
        if i < len(edges):
            stack[-1] = (node, i + 1)
            e = edges[i]
            if e is not None and e[0] not in visited:
                visited.add(e[0])
                stack.append((e[0], 0))
            continue
        stack.pop()
        if node in run or any(e is not None and e[0] in needed or e is not None and e[0] in targets for e in edges):
            needed.add(node)
    return needed


# --- the loop ---
def _execute(task, root, deps) -> None:
    keep = task.keep_graph
    slow = task.captures is not None or task.needed is not None
    journal = task.journal
    observe = node_observer
    buffers = {}
    heap = []
    pop, push, get = heappop, heappush, buffers.get
    acc_type = AccumulateGrad
    # A node made ready with its only gradient skips the buffers and, when it outranks the
    # queue (always, along a chain), the heap too: ``ready``/``ready_grads`` hold it.
    ready, ready_grads = root, ()
    while True:
        if ready is not None:
            node, grads = ready, ready_grads
            ready = None
            if heap and heap[0][0] < -node.sequence_nr:  # something newer is waiting
                buffers[node] = grads
                push(heap, (-node.sequence_nr, node))
                node = pop(heap)[1]
                grads = buffers.pop(node)
        elif heap:
            node = pop(heap)[1]
            grads = buffers.pop(node)
        else:
            break
        extra = node._extra
        if slow or extra is not None:
            grads = _before_node(task, node, grads)
            if grads is None:
                continue
        if type(node) is acc_type:
            meta = node.variable._get_meta()
            old = meta.grad
            journal.append((meta, old, None if old is None else old._data.copy()))
        outputs = node.apply(grads) if observe is None else observe(node, grads)
        if not keep:
            node._saved = None
        edges = node.next_edges
        hooked = extra is not None and extra.post_hooks
        if hooked:
            outputs = _post_hooks(node, _validate_outputs(node, edges, outputs), grads)
        for e, g in zip(edges, outputs):
            if e is None:
                continue
            nxt, nr = e
            if g is not None and not hooked:
                meta = nxt._in_meta
                k = 4 * nr
                shape, dtype = meta[k], meta[k + 1]
                a = g._data
                if a.shape != shape or a.dtype is not dtype and a.dtype != dtype:
                    g = _conform(node, _index_of(outputs, g), g, shape, dtype)
            d = deps[nxt] - 1
            buf = get(nxt)
            if buf is None:
                if not d and len(nxt._in_meta) == 4:  # its one and only gradient
                    if ready is None:
                        ready, ready_grads = nxt, (g,)
                    else:
                        buffers[nxt] = (g,)
                        push(heap, (-nxt.sequence_nr, nxt))
                    continue
                buf = buffers[nxt] = [None] * (len(nxt._in_meta) >> 2)
            if g is not None:
                old = buf[nr]
                buf[nr] = g if old is None else _sum(old, g)
            if d:
                deps[nxt] = d
            else:
                push(heap, (-nxt.sequence_nr, nxt))


def _execute_general(task, root, deps, anomaly: bool) -> None:
    """The loop for anomaly mode and for devices with streams: the same order and semantics as
    ``_execute`` (every node through the heap, every output validated), plus
    - anomaly mode: a failing node warns with its forward traceback (and its parents') before
      the error propagates, NaN gradients raise, and nodes created while a node runs
      (create_graph, nested backward) record it as their parent;
    - streams (DESIGN §5): each node runs with its forward stream current, after waiting on the
      events of the gradients it received; gradients cross streams in ``_add``; leaf streams
      are synchronised with the caller's at the end."""
    keep = task.keep_graph
    check_nan = task.check_nan
    journal = task.journal
    observe = node_observer
    streams = _streams_in_use[0]
    buffers = {root: ()}
    ready = {}  # node -> per-slot event the node's stream waits on before it runs (streams)
    leaf_streams = set()
    heap = [(-root.sequence_nr, root)]
    outer = _anomaly.current_node() if anomaly else None
    try:
        while heap:
            node = heappop(heap)[1]
            grads = buffers.pop(node)
            stream = _stream_of(node) if streams else None
            if stream is not None:
                for ev in ready.pop(node, ()):
                    if ev is not None and ev.stream != stream:
                        stream.wait_event(ev)
            if anomaly:
                _anomaly.set_current_node(node)
            try:
                grads = _before_node(task, node, grads)
                if grads is None:
                    continue
                if type(node) is AccumulateGrad:
                    meta = node.variable._get_meta()
                    old = meta.grad
                    journal.append((meta, old, None if old is None else old._data.copy()))
                    if stream is not None:
                        leaf_streams.add(stream)
                if stream is None or _backend.current_stream(stream.device) == stream:
                    outputs = node.apply(grads) if observe is None else observe(node, grads)
                else:
                    with _backend.use_stream(stream):
                        outputs = node.apply(grads) if observe is None else observe(node, grads)
                if not keep:
                    node._saved = None
                edges = node.next_edges
                outputs = _validate_outputs(node, edges, outputs)
                extra = node._extra
                if extra is not None and extra.post_hooks:
                    outputs = _post_hooks(node, outputs, grads)
                if check_nan:
                    for i, g in enumerate(outputs):
                        if g is not None and np.isnan(g._data).any():
                            raise _anomaly.nan_error(node, i)
            except BaseException:
                if anomaly:
                    _anomaly.report(node)
                raise
            deliver(edges, outputs, buffers, deps, heap,
                    None if not streams else
                    lambda buf, nxt, nr, g: _add(buf, ready, nxt, nr, g, stream))
    finally:
        if anomaly:
            _anomaly.set_current_node(outer)
    for s in leaf_streams:  # the caller's stream must see the leaves' gradients
        caller = _backend.current_stream(s.device)
        if caller != s:
            caller.wait_event(s.record_event())


def deliver(edges, outputs, buffers: dict, deps: dict, heap: list, put=None) -> None:
    """A node's gradients into the input buffers of the nodes they flow to (summed where they
    meet, or by ``put(buf, node, slot, grad)``: the streams' ordering); a node whose last
    gradient arrived goes on the ready heap (newest first)."""
    for e, g in zip(edges, outputs):
        if e is None:
            continue
        nxt, nr = e
        buf = buffers.get(nxt)
        if buf is None:
            buf = buffers[nxt] = [None] * (len(nxt._in_meta) >> 2)
        if g is not None:
            if put is not None:
                put(buf, nxt, nr, g)
            else:
                old = buf[nr]
                buf[nr] = g if old is None else _sum(old, g)
        d = deps[nxt] - 1
        deps[nxt] = d
        if not d:
            heappush(heap, (-nxt.sequence_nr, nxt))


def _stream_of(node):
    """The stream a node's forward ran on: that of its first gradient slot with one."""
    meta = node._in_meta
    for k in range(3, len(meta), 4):
        if meta[k] is not None:
            return meta[k]
    return None


def _add(buf, ready, consumer, nr, g, producer) -> None:
    """One gradient into a consumer's buffer slot, ordered across streams as DESIGN §5 says.
    ``producer`` is the stream of the node that made ``g`` (None: the caller's current one)."""
    old = buf[nr]
    if type(g._data) is np.ndarray:  # a host gradient: computed in program order
        buf[nr] = g if old is None else _sum(old, g)
        return
    c = _stream_of(consumer)
    p = producer if producer is not None else _backend.current_stream(g.device)
    if c is not None and c.device == p.device:
        a = c  # accumulate where the consumer will read
    else:
        a = _backend.device_type(p.device).default_stream(p.device)
    events = ready.get(consumer)
    if events is None:
        events = ready[consumer] = [None] * len(buf)
    if old is None:
        buf[nr] = g
        if p != c or p != a:
            events[nr] = p.record_event()
        return
    waited = None
    if a != p:
        a.wait_event(p.record_event())
        waited = p
    ev = events[nr]  # the earlier gradient's readiness; a newer event on its stream covers it
    if ev is not None and ev.stream != a and ev.stream != waited:
        a.wait_event(ev)
    with _backend.use_stream(a):
        buf[nr] = _sum(old, g)
    events[nr] = a.record_event() if a != c else None


def _sum(old, g):
    """Two gradients meeting in an input buffer. Without create_graph the sum needs no graph,
    so it is computed on the arrays (a fan-in of 500 pays 500 of these); under a dispatch mode
    it is the op ``add``, so a capture records it."""
    if _gs.grad_enabled or _modes or type(old) is not Tensor or type(g) is not Tensor:
        return old + g
    a, b = old._data, g._data
    if a.shape != b.shape or a.dtype != b.dtype:
        return old + g
    return _make(a + b, None, 0, None)


# --- one node ---
def _before_node(task, node, grads):
    """NOTE(pytorch): the order of PyTorch's "Backward Hooks execution" notes: tensor pre-hooks,
    then retains-grad hooks, then the node's pre-hooks. Also captures for grad().
    Returns the (possibly replaced) grads, or None when the node must not run."""
    extra = node._extra
    needed = task.needed
    runs = needed is None or node in needed or type(node) is GraphRoot
    caps = None if task.captures is None else task.captures.get(node)
    if not runs and caps is None:
        return None  # off every path to the inputs: PyTorch never reaches it (no hooks either)
    if caps is not None and runs:
        # NOTE(pytorch): a node that also runs is captured before its tensor hooks.
        for nr, k in caps:
            task.captured[k] = grads[nr]
    if extra is not None and (extra.tensor_pre_hooks or extra.retains_grad_hooks):
        grads = _tensor_hooks(node, extra, grads, task.create_graph)
    if caps is not None and not runs:
        for nr, k in caps:
            task.captured[k] = grads[nr]
    if not runs:
        return None
    if extra is not None and extra.pre_hooks:
        grads = tuple(grads)
        for fn in tuple(extra.pre_hooks.values()):
            r = fn(grads)
            if r is not None:
                grads = _hook_result(fn, r, grads)
    return grads


def _tensor_hooks(node, extra, grads, create_graph):
    grads = list(grads)
    changed = False
    for nr, hooks in tuple(extra.tensor_pre_hooks.items()):
        for fn in tuple(hooks.values()):
            g = grads[nr]
            if g is None:
                break
            r = fn(g)
            if r is not None:
                _check_value(fn, g, r)
                grads[nr] = r
                changed = True
    for nr, fn in tuple(extra.retains_grad_hooks.items()):
        if grads[nr] is not None:
            fn(grads[nr])
    if changed and not create_graph and type(node) is AccumulateGrad:
        # A hook may hand back a tensor its caller keeps: .grad must not alias it (it is later
        # accumulated in place), so pass it on as a shared view, which AccumulateGrad copies.
        g = grads[0]
        if g is not None and not g._rg:
            grads[0] = shared_view(g)
    return grads


def _post_hooks(node, outputs, grads):
    hooks = node._extra.post_hooks
    if not hooks:
        return outputs
    outputs = tuple(outputs)
    grads = tuple(grads)
    first = outputs
    for fn in tuple(hooks.values()):
        r = fn(outputs, grads)
        if r is not None:
            outputs = _hook_result(fn, r, outputs)
    if outputs is not first and not _gs.grad_enabled:  # see _tensor_hooks: never alias a hook's value
        outputs = tuple(o if o is None or o is f or o._rg else shared_view(o)
                        for o, f in zip(outputs, first, strict=True))
    return outputs


def _hook_name(fn) -> str:
    return getattr(fn, "__name__", "<unknown>")


def _hook_result(fn, r, values) -> tuple:
    """Check what a node pre-/post-hook returned against the values it replaces (PyTorch's errors)."""
    if type(r) is not tuple:
        raise TypeError(f"expected tuple, but hook returned '{type(r).__name__}'")
    if len(r) != len(values):
        raise RuntimeError(
            f"hook '{_hook_name(fn)}' has returned an incorrect number of values (got {len(r)}, but "
            f"expected {len(values)})"
        )
    for old, new in zip(values, r, strict=True):
        if new is None:
            continue
        if old is None:
            if not isinstance(new, Tensor):
                raise TypeError(f"expected Variable, but hook returned '{type(new).__name__}'")
            raise RuntimeError("can't replace a None gradient with a non-None value")
        _check_value(fn, old, new)
    return r


def _check_value(fn, old, new) -> None:
    """A hook's replacement for a gradient keeps its type, shape and device."""
    if not isinstance(new, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(new).__name__}'")
    a, b = old._data, new._data
    if a.dtype != b.dtype or old.device != new.device:
        raise RuntimeError(
            f"hook '{_hook_name(fn)}' has changed the type of value (was ndgrad.{old.dtype.legacy} got "
            f"ndgrad.{new.dtype.legacy})"
        )
    if a.shape != b.shape:
        raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the size of value")


def check_num_outputs(node, edges, outputs) -> None:
    """Generated op nodes always return one gradient per edge; user code (custom Functions,
    hooks) is checked here."""
    if len(outputs) != len(edges):
        raise RuntimeError(
            f"function {node.name()} returned an incorrect number of gradients (expected "
            f"{len(edges)}, got {len(outputs)})"
        )


def _validate_outputs(node, edges, outputs):
    """Check each gradient against the metadata of the node it flows into (reduce, cast, raise)."""
    fixed = None
    for i, e in enumerate(edges):
        g = outputs[i]
        if g is None or e is None:
            continue
        meta, k = e[0]._in_meta, 4 * e[1]
        shape, dtype = meta[k], meta[k + 1]
        d = g._data
        if d.shape != shape or d.dtype != dtype:
            if fixed is None:
                fixed = list(outputs)
            fixed[i] = _conform(node, i, g, shape, dtype)
    return outputs if fixed is None else fixed


def _conform(node, i, g, shape, dtype):
    d = g._data
    if d.shape != shape:
        if not _expandable(shape, d.shape):
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {i} - got "
                f"{list(d.shape)} but expected shape compatible with {list(shape)}"
            )
        g = g.sum_to_size(shape)
    if g._data.dtype != dtype:
        if g._data.dtype.kind == "c" and dtype.kind != "c":
            g = g.real
        g = g.to(dtype)
    return g


def _expandable(shape, desired) -> bool:
    """Whether ``shape`` broadcasts to ``desired`` (so a gradient of ``desired`` can be summed)."""
    if len(shape) > len(desired):
        return False
    for a, b in zip(reversed(shape), reversed(desired)):
        if a != b and a != 1:
            return False
    return True



def _index_of(outputs, g) -> int:
    """Position of gradient ``g`` among a node's outputs (for error messages only)."""
    return next(i for i, o in enumerate(outputs) if o is g)


def _is_checkpoint_valid() -> bool:
    """False inside a backward that ``grad()`` or ``backward(inputs=...)`` started: those do not
    accumulate into every leaf, which reentrant checkpointing's nested backward relies on."""
    stack = _task_stack()
    return not stack or (stack[-1].needed is None and stack[-1].captures is None)
