"""Compiled autograd (issue 17): a ``backward()`` captured as one graph and run by a compiler.

While ``_enable(compiler_fn)`` is entered, the engine hands each plain ``backward()`` (no
``create_graph``, no ``inputs=``, not re-entrant, no dispatch mode active) to ``_backward``:

1. *Lookup.* One walk of the autograd graph from its root (the engine's dependency walk) builds a
   key per node (its class, edges, input metadata, non-tensor arguments and saved values' kinds
   and metadata) and gathers the graph's inputs in visit order: root gradients and saved tensors
   (their arrays; versions are checked as an unpack would), and, for values saved through
   saved-tensor hooks, the packed object with its unpack hook, which are *not* unpacked.
2. *Capture* (a miss). The engine's order is replayed under a capture (``capture.Capture``):
   formulas, gradient sums in input buffers and shape/dtype conformance are recorded as ops; an
   unpack hook is one opaque call (``_unpack``) emitted where the engine unpacks it, i.e. just
   before the node that reads it; a leaf's gradient becomes a graph output. The capture run
   itself computes the real gradients (and unpacks once each, as eager), then ``compiler_fn(gm)``
   compiles the graph, cached under the key.
3. *Run* (a hit). Without ``retain_graph`` every node's saved values are released first; the input
   list is handed over (boxed) and cleared, and packed objects are reachable only from a per-call
   slot table that ``_unpack`` empties as it goes, so the running graph is the only owner of saved
   and unpacked values. Then each leaf's gradient is accumulated by its ``AccumulateGrad`` node
   (stealing, post-accumulate hooks), in the engine's order.

Not handled yet (the backward runs on the eager engine, with the reason logged once): tensor,
node and retains-grad hooks, custom ``Function`` nodes and other node classes, ``inputs=`` and
``autograd.grad``.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from heapq import heappop

import numpy as np

from .._ops.registry import OpNode
from .._tensor import Tensor
from ..autograd import engine as _engine
from ..autograd.function import BackwardCFunction
from ..autograd.node import AccumulateGrad, shared_view
from ..autograd.saved import PackedSaved, SavedTensor, _modified_msg, modified_msg
from ..autograd import dispatch_mode as _dispatch_mode
from .capture import Capture, _CaptureMode, paused

__all__ = ["_enable", "enable", "compile_inductor", "counters", "reset"]

log = logging.getLogger("ndgrad.compiler.compiled_autograd")
counters = collections.Counter()  # captures, cache_hits, fallbacks, unpacks
_compiler_fns: list = []  # innermost last
_cache: dict = {}  # key -> compiled callable (whichever compiler_fn was current at capture)
_last: list = [None]  # (key as a list, callable) of the latest backward: compared without a hash
_warned: set = set()
_OP_NODES: set = set()  # node classes known to be generated op nodes
_tls = threading.local()  # .slots: (unpack hook, packed object) per packed value of this run


class _Unsupported(Exception):
    pass


def reset() -> None:
    """Forget every compiled backward graph."""
    _cache.clear()
    _last[0] = None
    _warned.clear()
    counters.clear()


@contextlib.contextmanager
def _enable(compiler_fn):
    """Within, ``backward()`` runs through compiled autograd with ``compiler_fn(gm) -> callable``
    (PyTorch's ``torch._dynamo.compiled_autograd._enable``)."""
    _compiler_fns.append(compiler_fn)
    _engine.compiled_backward[0] = _backward
    try:
        yield
    finally:
        _compiler_fns.pop()
        if not _compiler_fns:
            _engine.compiled_backward[0] = None


enable = _enable


def compile_inductor(gm):
    """A ``compiler_fn``: ``inductor``'s code for the captured backward, without dynamo's guards
    or AOT autograd around it. The backward graph needs neither: it runs without grad, and the
    compiled-autograd key already checks every input's shape and dtype."""
    from .inductor import compile_fx_inner

    return compile_fx_inner(gm, None, array_inputs=True)


# --- the opaque calls of a compiled backward: unpacks, user hooks, accumulation ---
def _spec(out):
    """What an opaque call returned, as a hashable description (a graph constant)."""
    if isinstance(out, Tensor):
        dev = out.device
        return ("t", tuple(out._data.shape), out._data.dtype.str,
                None if dev.type == "cpu" else str(dev))
    if type(out) in (tuple, list):
        return tuple(_spec(o) for o in out)
    return None


def _stand_in(spec):
    """Zeros shaped as ``spec`` says: an opaque call's result while a backend traces the graph."""
    if spec is None:
        return None
    if spec and spec[0] == "t":
        _, shape, dtype, device = spec
        t = Tensor._make(np.zeros(shape, np.dtype(dtype)), None, 0, None)
        return t if device is None else t.to(device)  # (called while the capture is paused)
    return tuple(_stand_in(x) for x in spec)


def _opaque(fn):
    """``fn(k, *args)`` as one graph call ``call(k, spec, *args)`` (``spec``: ``_spec`` of its
    result). Under a backend's capture it stays one call and the user code inside is never
    traced: a capture whose run is the real one (dynamo's first call) runs ``fn``; any other
    (AOT tracing on clones) gets stand-in zeros, so no hook fires and no slot is used twice."""
    def call(k, spec, *args):
        mode = _dispatch_mode.handler()
        cap = mode.cap if isinstance(mode, _CaptureMode) and not mode.cap.paused else None
        if cap is None:
            return fn(k, *args)
        from .breaks import tls as _dyn

        with paused(cap):
            out = fn(k, *args) if _dyn.capture is cap else _stand_in(spec)
        _record(cap, call, k, spec, args, out)
        return out

    call.__name__ = call.__qualname__ = fn.__name__.lstrip("_")
    return call


def _record(cap, target, k, spec, args, out) -> None:
    n = cap.graph.call_function(target, (k, spec, *cap._map(args)))
    cap._annotate(n)
    cap._outputs(n, out)


@_opaque
def _unpack(k: int):
    """The saved value of slot ``k``: its unpack hook on its packed object. The slot is emptied
    first, so the packed object lives no longer than this call needs it."""
    slots = _tls.slots
    hook, packed = slots[k]
    slots[k] = None
    counters["unpacks"] += 1
    return hook(packed)


@_opaque
def _call_hook(k: int, *args):
    """A user hook (slot ``k``) called on ``args``."""
    return _tls.slots[k](*args)


@_opaque
def _call_node(k: int, *grads):
    """A custom ``Function``'s backward node (slot ``k``) applied to ``grads``: its own code
    with its own saved values, released afterwards as the engine does."""
    node = _tls.slots[k]
    out = tuple(node.apply(grads))
    if not _tls.keep:
        node._saved = None
    return out


@_opaque
def _accumulate(k: int, grad) -> None:
    """``grad`` into the leaf of the ``AccumulateGrad`` node in slot ``k`` (stealing or adding,
    then its post-accumulate-grad hooks), where the engine would run that node."""
    if _tls.hooked and not grad._rg:  # a hook's value may be memory its caller keeps
        grad = shared_view(grad)
    _tls.slots[k].apply((grad,))


# --- lookup ---
_FREED = ("Trying to backward through the graph a second time (or directly access saved tensors "
          "after they have already been freed).")
_INPUTS = object()  # in a key: the inputs' shapes and dtypes follow


def _freeze(v):
    try:
        hash(v)  # nearly always: a tuple of shapes, numbers, dtypes
        return v
    except TypeError:
        pass
    if type(v) in (list, tuple):
        return tuple(_freeze(x) for x in v)
    if type(v) is dict:
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    raise _Unsupported(f"an unhashable argument ({type(v).__name__})")


def _walk(root, needed=None, release=False):
    """(nodes in visit order, hook layouts, the key, inputs, slots: (unpack hook, packed
    object) per packed saved value and each hook callable, in visit order). One pass: a node's
    facts, then its edges, as one flat key; each distinct saved array is one input, its shape
    and dtype appended to the key once, after the walk. ``release``: each generated op node's
    saved values are taken off it as they are read (``_restore`` puts them back), so that
    ``inputs`` is their only owner."""
    index = _tls.index = {root: 0}  # (in visit order: the order, as the dict keeps it)
    stack: list = []
    inputs: list = [g._data for g in root.grads]  # arrays: a Tensor is made only if needed
    slots: list = []
    _tls.packed_slot = {}  # id(PackedSaved) -> its slot (read by _capture)
    input_of = _tls.input_of = {}  # id(array) -> its index in inputs
    layouts: dict = {}  # node -> its hooks' layout (``_hooks_key``)
    opaque = _tls.opaque_nodes = {}  # custom Function node -> its slot
    key = [None if g is None else (g._data.shape, g._data.dtype) for g in root.grads]
    append = key.append
    get = input_of.get
    known = _OP_NODES
    taken = _tls.taken = [] if release else None  # node, its saved values, node, ...
    pop, push = stack.pop, stack.append
    plain = needed is None  # else every node takes the general path
    n = root
    while n is not None:
        t = type(n)
        if t in known and n._extra is None and plain:  # the hot case: an op node, no hooks
            saved = n._saved
            if saved is None:
                raise RuntimeError(_FREED)
            append(t)
            append(n._in_meta)
            append(n._args)  # (frozen by the caller if unhashable)
        else:
            saved = _general_node(n, t, key, layouts, slots, opaque, needed, root)
        if saved is not None:  # an op node that runs: its saved values
            for x in saved:
                if x is None:  # a formula that will not run saved nothing
                    append(None)
                    continue
                tx = type(x)
                if tx is SavedTensor and x.tensor is None and x.vc[0] == x.version:
                    a = x.data  # a saved output
                elif tx is Tensor and not (x._vc is not None and x._vc[0]):
                    a = x._data  # a saved input at version 0: the tensor itself
                else:
                    append(_saved_key(n, x, inputs, slots))
                    continue
                k = get(id(a))
                if k is None:
                    k = input_of[id(a)] = len(inputs)
                    inputs.append(a)
                append(k)
            if release:
                n._saved = None
                taken.append(n)
                taken.append(saved)
        new = None  # the last node first reached from here is visited next, without the stack
        for e in n.next_edges:
            if e is None:
                append(None)
                continue
            nxt = e[0]
            i = index.get(nxt)
            if i is None:
                i = index[nxt] = len(index)
                if new is not None:
                    push(new)
                new = nxt
            append(i)
            append(e[1])
        n = new if new is not None else pop() if stack else None
    append(_INPUTS)
    order = list(index)
    for a in inputs:
        append(a.shape)
        append(a.dtype)
    return order, layouts, key, inputs, slots


def _general_node(n, t, key, layouts, slots, opaque, needed, root):
    """The key of any node but a hook-free op node outside ``inputs=`` (the walk's hot case);
    returns the op node's saved values when its formulas will run, else None."""
    if n is root:
        return None
    append = key.append
    append(t)
    if n._extra is not None:
        layouts[n] = hooks = _hooks_key(n._extra, slots)
        append(hooks)
    append(n._in_meta)
    if t is AccumulateGrad:
        slots.append(n)
        append(len(slots) - 1)
        return None
    if needed is not None and n not in needed:
        append(False)  # off every path to the inputs: never runs, nothing unpacked
        return None
    if t not in _OP_NODES and issubclass(t, BackwardCFunction):
        slots.append(n)  # a custom Function: applied by one opaque call
        append(len(slots) - 1)
        opaque[n] = len(slots) - 1
        return None
    if t not in _OP_NODES:
        if not issubclass(t, OpNode):
            raise _Unsupported(f"node {n.name()} of class {t.__name__}")
        _OP_NODES.add(t)
    saved = n._saved
    if saved is None:
        raise RuntimeError(_FREED)
    append(n._args)
    return saved


def _hooks_key(extra, slots) -> tuple:
    """A node's hooks, in the order the engine calls them (``engine._before_node``,
    ``_post_hooks``), into ``slots``; their layout is the key (``_Hooks`` reads it back)."""
    first = len(slots)
    tensor = tuple((nr, len(h)) for nr, h in extra.tensor_pre_hooks.items())
    for h in extra.tensor_pre_hooks.values():
        slots.extend(h.values())
    retains = tuple(extra.retains_grad_hooks)
    slots.extend(extra.retains_grad_hooks.values())
    slots.extend(extra.pre_hooks.values())
    slots.extend(extra.post_hooks.values())
    return (first, tensor, retains, len(extra.pre_hooks), len(extra.post_hooks))


def _pre_hooks(layout, grads, call, node_pre: bool = True):
    """Tensor pre-hooks, retains-grad hooks, then (``node_pre``) node pre-hooks, as the engine
    runs them; ``call(slot, *args)`` calls the hook of a slot."""
    k, tensor, retains, n_pre, _ = layout
    grads = list(grads)
    for nr, count in tensor:
        for j in range(count):
            g = grads[nr]
            if g is None:
                break
            r = call(k + j, g)
            if r is not None:
                _engine._check_value(_tls.slots[k + j], g, r)
                grads[nr] = r
        k += count
    for nr in retains:
        if grads[nr] is not None:
            call(k, grads[nr])
        k += 1
    grads = tuple(grads)
    for _ in range(n_pre if node_pre else 0):
        r = call(k, grads)
        if r is not None:
            grads = _engine._hook_result(_tls.slots[k], r, grads)
        k += 1
    return grads


def _post_hooks(layout, outputs, grads, call):
    k, tensor, retains, n_pre, n_post = layout
    k += sum(c for _, c in tensor) + len(retains) + n_pre
    outputs, grads = tuple(outputs), tuple(grads)
    for j in range(n_post):
        r = call(k + j, outputs, grads)
        if r is not None:
            outputs = _engine._hook_result(_tls.slots[k + j], r, outputs)
    return outputs


def _input(inputs, t) -> tuple:
    """A saved tensor's input index (one per distinct array: a weight saved by many nodes is
    one input) and metadata."""
    a = t._data
    k = _tls.input_of.get(id(a))
    if k is None:
        k = _tls.input_of[id(a)] = len(inputs)
        inputs.append(a)
    return (k, a.shape, a.dtype)


def _saved_key(node, s, inputs, slots):
    ts = type(s)
    if s is None:
        return None
    if ts is list:
        return ("list", tuple(_saved_key(node, x, inputs, slots) for x in s))
    if isinstance(s, Tensor):  # a saved input at version 0 is the tensor itself
        vc = s._vc
        if vc is not None and vc[0]:
            raise RuntimeError(modified_msg(s, vc[0], 0))
        return ("t", _input(inputs, s))
    if ts is SavedTensor:
        if s.tensor is not None:
            t = s.tensor
            vc = t._vc
            if (vc[0] if vc is not None else 0) != s.version:
                raise RuntimeError(modified_msg(t, vc[0], s.version))
            return ("t", _input(inputs, t))
        if s.vc[0] != s.version:
            from .. import _dtype

            raise RuntimeError(_modified_msg(s.data.shape, _dtype._FROM_NP[s.data.dtype].legacy,
                                             node, s.output_nr, s.vc[0], s.version))
        k = _tls.input_of.get(id(s.data))
        if k is None:
            k = _tls.input_of[id(s.data)] = len(inputs)
            inputs.append(s.data)
        return ("t", k, s.data.shape, s.data.dtype)
    if ts is PackedSaved:
        slots.append((s.unpack_hook, s.packed))
        _tls.packed_slot[id(s)] = len(slots) - 1
        return ("packed", len(slots) - 1, s.is_output, s.output_nr)
    if hasattr(s, "value"):  # a Python number saved for a formula
        return ("value", _freeze(s.value))
    raise _Unsupported(f"a saved value of type {ts.__name__}")


# --- capture ---
def _capture(root, order, layouts, inputs, slots, task):
    """Replay the engine's order on ``root``'s graph under a capture; returns the GraphModule
    and the leaf gradients this run computed (accumulated by the caller)."""
    cap = Capture()

    def call(k, *args):  # a user hook: run it, record one opaque call
        with paused(cap):
            out = slots[k](*args)
        _record(cap, _call_hook, k, _spec(out), args, out)
        return out

    cap.add_inputs([(f"inputs_{i}", Tensor._make(a, None, 0, None))
                    for i, a in enumerate(inputs)])
    packed = [s for n in order[1:] if isinstance(n, OpNode) for s in _flat(n._saved)
              if type(s) is PackedSaved]
    real = [(s, s.unpack_hook) for s in packed]

    def recorder(k, hook):
        def record(obj):
            with paused(cap):
                out = hook(obj)
            _record(cap, _unpack, k, _spec(out), (), out)
            counters["unpacks"] += 1
            return out
        return record

    acc_slot = {id(x): k for k, x in enumerate(slots) if type(x) is AccumulateGrad}

    def call_node(k, grads):  # a custom Function's backward: run it, record one opaque call
        with paused(cap):
            out = _call_node(k, None, *grads)
        _record(cap, _call_node, k, _spec(out), grads, out)
        return out

    def accumulate(node, g):  # into .grad for real, and one opaque call in the graph
        k = acc_slot[id(node)]
        _record(cap, _accumulate, k, None, (g,), None)
        with paused(cap):
            _accumulate(k, None, g)

    for s, hook in real:
        s.unpack_hook = recorder(_tls.packed_slot[id(s)], hook)
    _tls.slots = slots
    try:
        with cap.mode:
            _replay(root, accumulate, layouts, call, call_node, task)
    finally:
        _tls.slots = None
        for s, hook in real:
            s.unpack_hook = hook
    captured = task.captured
    cap.graph.boxed = True  # gm.forward(inputs) clears the list: the graph owns the values
    return cap.finish(() if captured is None else tuple(captured))


def _flat(saved):
    for s in saved or ():
        if type(s) is list:
            yield from s
        else:
            yield s


def _replay(root, accumulate, layouts: dict, call, call_node, task) -> None:
    """The engine's loop (``_execute_general``'s order: newest sequence number first, buffers
    summed with ``_sum``, outputs conformed, hooks around each node, ``inputs=`` as
    ``_before_node``: nodes off the paths skipped, gradients captured), stopping at the leaves."""
    deps = _engine._count_dependencies(root)
    opaque = _tls.opaque_nodes
    needed, captures, captured = task.needed, task.captures, task.captured
    buffers = {root: ()}
    heap = [(-root.sequence_nr, root)]
    while heap:
        node = heappop(heap)[1]
        grads = buffers.pop(node)
        layout = layouts.get(node)
        if needed is not None or captures is not None:
            runs = needed is None or node in needed or node is root
            caps = None if captures is None else captures.get(node)
            if not runs and caps is None:
                continue
            if caps is not None and runs:  # captured before its tensor hooks when it runs
                for nr, k in caps:
                    captured[k] = grads[nr]
            if layout is not None:
                grads = _pre_hooks(layout, grads, call, node_pre=False)
            if caps is not None and not runs:
                for nr, k in caps:
                    captured[k] = grads[nr]
            if not runs:
                continue
            if layout is not None:
                k0 = layout[0] + sum(c for _, c in layout[1]) + len(layout[2])
                grads = _pre_hooks((k0, (), (), layout[3], 0), grads, call)  # node pre-hooks
        elif layout is not None:
            grads = _pre_hooks(layout, grads, call)
        if type(node) is AccumulateGrad:
            if grads[0] is not None:
                accumulate(node, grads[0])
            continue
        edges = node.next_edges
        k = opaque.get(node)
        outputs = node.apply(grads) if k is None else call_node(k, grads)
        outputs = _engine._validate_outputs(node, edges, outputs)
        if layout is not None and layout[4]:
            outputs = _engine._validate_outputs(node, edges,
                                                _post_hooks(layout, outputs, grads, call))
        _engine.deliver(edges, outputs, buffers, deps, heap)


# --- the engine's entry ---
def _fallback(why: str, level: int = logging.WARNING) -> bool:
    counters["fallbacks"] += 1
    if why not in _warned:
        _warned.add(why)
        log.log(level, "compiled autograd: running the eager engine (%s)", why)
    return False


def _backward(root, task, reentrant: bool = False, moded: bool = False) -> bool:
    """Run ``root``'s backward (the engine's ``task``: ``keep_graph``, and for ``inputs=`` the
    nodes needed and gradients to capture into ``task.captured``) compiled; False: the caller
    runs the eager engine (a re-entrant backward, as reentrant checkpointing makes; a dispatch
    mode, which must see the engine's own op calls; a graph it cannot capture)."""
    if reentrant:  # by design (reentrant checkpointing): said at INFO
        return _fallback("a backward inside a backward (re-entrant)", logging.INFO)
    try:
        return _backward_walked(root, task, moded)
    finally:  # the walk's tables: the graph's nodes must not outlive the backward through them
        _tls.index = _tls.input_of = _tls.packed_slot = _tls.opaque_nodes = None


def _backward_walked(root, task, moded: bool) -> bool:
    if moded:  # e.g. a compile capturing the code that calls backward(): INFO too
        return _fallback("a dispatch mode is active", logging.INFO)
    keep_graph = task.keep_graph
    try:
        order, layouts, key, inputs, slots = _walk(root, task.needed, not keep_graph)
    except BaseException as e:
        _restore()
        if isinstance(e, _Unsupported):
            return _fallback(str(e))
        raise
    task.deps = _tls.index  # will_execute_node: every node reachable
    if task.captures is not None:  # which gradients are the graph's outputs
        key += (task.accumulate, tuple((_tls.index[n], tuple(c))
                                       for n, c in task.captures.items()))
    if task.needed is not None:
        key.append(tuple(sorted(_tls.index[n] for n in task.needed if n in _tls.index)))
    last = _last[0]
    try:
        fn = last[1] if last is not None and last[0] == key else None
    except (TypeError, ValueError):  # an argument compared as an array
        fn = None
    if fn is None:  # not the previous backward's graph (which is compared without a hash)
        try:
            key = tuple(key)
            fn = _cache.get(key)  # as PyTorch: the graph, not the compiler (reset() to switch)
        except TypeError:  # an unhashable argument: frozen (rare)
            try:
                key = tuple(_freeze(x) for x in key)
            except _Unsupported as e:
                _restore()
                return _fallback(str(e))
            fn = _cache.get(key)
    _tls.hooked = bool(layouts)
    _tls.keep = keep_graph
    if fn is None:
        _restore()
        counters["captures"] += 1
        if _cache:
            log.info("compiled autograd: Cache miss due to %s", _miss_reason(key))
        gm = _capture(root, order, layouts, inputs, slots, task)
        fn = _cache[key] = _compiler_fns[-1](gm)
        _last[0] = (list(key), fn)
        if not keep_graph:
            for n in order:
                n._saved = None
        return True
    counters["cache_hits"] += 1
    if type(key) is tuple:
        _last[0] = (list(key), fn)
    del key
    _tls.taken = None  # the walk released the saved values: the graph will be their only owner
    _tls.input_of = _tls.packed_slot = _tls.opaque_nodes = None  # read by a capture only
    del order, root
    _tls.slots = slots
    del slots
    args = inputs
    del inputs
    try:
        if not getattr(fn, "_array_inputs", False):
            args = [Tensor._make(a, None, 0, None) for a in args]
        out = fn(args)  # the graph is boxed: one list, which the callee clears
    finally:
        _tls.slots = None
    del args
    if task.captured is not None:
        task.captured[:] = out
    return True


def _restore() -> None:
    """The saved values the walk took off the nodes, back on them (a capture, or the eager
    engine on a fallback, reads them there)."""
    taken = getattr(_tls, "taken", None)
    if taken:
        for i in range(0, len(taken), 2):
            taken[i]._saved = taken[i + 1]
    _tls.taken = None


def _miss_reason(key) -> str:
    """PyTorch's words for why a key is new: a node class never seen, or changed shapes."""
    seen = {k for old in _cache for k in old if type(k) is type}
    if any(type(k) is type and k not in seen for k in key):
        return "new autograd node"
    return "changed shapes"
