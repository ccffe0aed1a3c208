"""Autograd core: ``Node`` (a backward function), edges, hooks and saved tensors.

An edge is a plain tuple ``(node, input_nr)`` or ``None``. Nodes know nothing about particular
ops: the ops layer generates one ``Node`` subclass per op, and the engine only calls
``apply(grads)``. ``Tensor`` lives one layer up; it registers itself here as ``_tensor_cls`` so
that a saved output can be rebuilt as a tensor on unpack.
"""

from __future__ import annotations

import itertools
import re
import sys
import threading
import weakref

import numpy as np

from .. import _backend
from . import dispatch_mode
from .grad_mode import state as _grad_state

__all__ = ["Node", "AccumulateGrad", "GraphRoot", "SavedTensor", "RemovableHandle",
           "register_multi_grad_hook", "allow_mutation_on_saved_tensors", "saved_tensors_hooks",
           "disable_saved_tensors_hooks", "save_on_cpu"]

_tensor_cls = None  # set by ndgrad._tensor at import (Tensor is one layer up)
_seq = itertools.count()
_acc_seq = itertools.count(sys.maxsize // 2)  # AccumulateGrad sorts before every op node

SECOND_BACKWARD_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)


def next_sequence_nr() -> int:
    return next(_seq)


class RemovableHandle:
    """Returned by every hook registration; ``remove()`` unregisters the hook."""

    _ids = itertools.count()
    __slots__ = ("id", "_dicts", "__weakref__")

    def __init__(self, *hooks_dicts):
        self.id = next(RemovableHandle._ids)
        self._dicts = tuple(weakref.ref(d) if _weakable(d) else (lambda d=d: d) for d in hooks_dicts)

    def remove(self) -> None:
        for ref in self._dicts:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _HookDict(dict):
    """A dict of hooks that a handle can hold weakly."""

    __slots__ = ("__weakref__",)


def _weakable(d) -> bool:
    return type(d) is _HookDict


class NodeExtra:
    """What few nodes have: hooks and user metadata (kept off ``Node`` to keep creation cheap)."""

    __slots__ = ("pre_hooks", "post_hooks", "tensor_pre_hooks", "retains_grad_hooks", "metadata")

    def __init__(self):
        self.pre_hooks = _HookDict()
        self.post_hooks = _HookDict()
        self.tensor_pre_hooks = {}  # input_nr -> _HookDict
        self.retains_grad_hooks = {}  # input_nr -> fn(grad)
        self.metadata = {}


class Node:
    """A function of the backward graph. Subclasses define ``apply(grads) -> tuple``.

    ``_in_meta`` holds ``shape, np_dtype, device`` of each gradient the node receives (one per
    forward output), flat: ``(shape0, dtype0, device0, shape1, ...)`` (one tuple per node, not one
    per output: node creation is the hot path). The engine checks and reduces gradients with it.
    ``_saved`` holds the node's ``SavedTensor`` objects (``None`` once released).
    """

    __slots__ = ("next_edges", "sequence_nr", "_in_meta", "_saved", "_extra", "__weakref__")

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    @property
    def next_functions(self):
        return tuple((None, 0) if e is None else e for e in self.next_edges)

    def _sequence_nr(self) -> int:
        return self.sequence_nr

    @property
    def metadata(self) -> dict:
        return self._get_extra().metadata

    def _get_extra(self) -> NodeExtra:
        extra = self._extra
        if extra is None:
            extra = self._extra = NodeExtra()
        return extra

    def register_hook(self, fn) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` runs after the node; may return new grad_inputs."""
        d = self._get_extra().post_hooks
        h = RemovableHandle(d)
        d[h.id] = fn
        return h

    def register_prehook(self, fn) -> RemovableHandle:
        """``fn(grad_outputs)`` runs before the node; may return new grad_outputs."""
        d = self._get_extra().pre_hooks
        h = RemovableHandle(d)
        d[h.id] = fn
        return h

    def _register_tensor_pre_hook(self, input_nr: int, fn) -> RemovableHandle:
        d = self._get_extra().tensor_pre_hooks.setdefault(input_nr, _HookDict())
        h = RemovableHandle(d)
        d[h.id] = fn
        return h

    def release_variables(self) -> None:
        self._saved = None

    def apply(self, grads):
        raise NotImplementedError

    def __call__(self, *grads):
        return self.apply(grads)


class GraphRoot(Node):
    """The root of one backward call: hands the root gradients to the roots' nodes."""

    __slots__ = ("grads",)

    def __init__(self, edges, grads):
        self.next_edges = tuple(edges)
        self.sequence_nr = sys.maxsize
        self._in_meta = ()
        self._saved = None
        self._extra = None
        self.grads = tuple(grads)

    def apply(self, grads):
        return self.grads


class AccumulateGrad(Node):
    """The node of a leaf that requires grad: adds incoming gradients into ``variable.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        self.variable = variable
        self.next_edges = ()
        self.sequence_nr = next(_acc_seq)
        a = variable._data
        self._in_meta = _backend.meta_of(a)
        self._saved = None
        self._extra = None

    def apply(self, grads):
        grad = grads[0]
        if grad is None:
            return ()
        with _accumulate_lock:  # concurrent backwards may share a leaf; lose no gradient
            self._accumulate(grad)
        hooks = self.variable._meta.post_acc_hooks
        if hooks:
            for fn in tuple(hooks.values()):
                fn(self.variable)
        return ()

    def _accumulate(self, grad) -> None:
        var = self.variable
        meta = var._get_meta()
        old = meta.grad
        if _grad_state.grad_enabled:  # create_graph: keep the gradient's own graph
            meta.grad = grad if old is None else old + grad
        elif old is None:
            d = grad._data
            root = _root(d)
            if not d.flags.writeable or _is_stolen(root):
                meta.grad = _tensor_cls._make(d.copy(), None, 0, None)
            else:
                # Steal the array (PyTorch steals a gradient nobody else holds): no other .grad
                # can be handed the same memory (see _stolen).
                meta.grad = _tensor_cls._make(d, None, 0, None) if grad._rg or d is not root else grad
                _steal(root)
        else:
            od = old._data
            if od.shape == grad._data.shape and od.dtype == grad._data.dtype and od.flags.writeable:
                od += grad._data  # NOTE(pytorch): accumulate in place into an existing .grad
                old._bump()
            else:
                meta.grad = old + grad


_accumulate_lock = threading.RLock()


# Memory that AccumulateGrad must not keep as a .grad: memory some leaf's .grad already owns (a
# formula may pass one gradient, or views of it such as a transpose, to several inputs, and
# .grad later accumulates in place), and memory a user may hold (root gradients, hook and custom
# Function results: ``shared_view``). Keyed by the id of the array that owns the memory, with a
# weak reference to check identity.
_stolen: dict = {}


def _root(a):
    """The array owning ``a``'s memory (the end of its ``base`` chain)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _is_stolen(a) -> bool:
    r = _stolen.get(id(a))
    return r is not None and r() is a


def _steal(a) -> None:
    key = id(a)
    _stolen[key] = weakref.ref(a, lambda _, key=key: _stolen.pop(key, None))


def shared_view(t):
    """A view of ``t`` (no graph) whose memory someone else may hold: AccumulateGrad copies it
    instead of keeping it. Still writeable: a custom backward may change its gradient in place,
    as in PyTorch."""
    a = t._data.view()
    root = _root(a)
    if not _is_stolen(root):
        _steal(root)
    return _tensor_cls._make(a, None, 0, None)


def _shape_str(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved.

    An input saved at version 0 (nearly all of them) is stored as the tensor itself, which
    answers ``_unpack_saved`` too (see ``Tensor._unpack_saved``): no allocation per saved input.
    Any other input is kept here as the tensor and its version; an output is kept as its array
    and version counter only (no reference to the node that produced it, so no cycle) and
    rebuilt with ``grad_fn`` set to the owning node on unpack.
    """

    __slots__ = ("tensor", "data", "vc", "version", "output_nr")

    def _unpack_saved(self, node):
        t = self.tensor
        if t is not None:
            vc = t._vc
            if (vc[0] if vc is not None else 0) != self.version:
                raise RuntimeError(modified_msg(t, vc[0], self.version))
            return t
        if self.vc[0] != self.version:
            dt = _tensor_cls._dtype_of(self.data)
            raise RuntimeError(_modified_msg(self.data.shape, dt.legacy, node, self.output_nr,
                                             self.vc[0], self.version))
        return _tensor_cls._make(self.data, node, self.output_nr, self.vc)


_new = object.__new__


def save_input(t):
    """Save an input tensor: itself at version 0, else a ``SavedTensor`` with its version."""
    if hooks_in_use and _hooks.stack:
        return _pack(t, None, 0)
    vc = t._vc
    if vc is None or not vc[0]:
        return t
    s = _new(SavedTensor)
    s.tensor = t
    s.data = None
    s.vc = None
    s.version = vc[0]
    s.output_nr = 0
    return s


def save_output(t, output_nr: int) -> SavedTensor:
    """Save an output without a reference to it (so its node is not kept in a cycle)."""
    if hooks_in_use and _hooks.stack:
        return _pack(t, True, output_nr)
    s = _new(SavedTensor)
    vc = t._vc
    if vc is None:
        vc = t._vc = [0]
    s.tensor = None
    s.data = t._data
    s.vc = vc
    s.version = vc[0]
    s.output_nr = output_nr
    return s


def modified_msg(t, now, expected) -> str:
    """The error for a saved tensor ``t`` modified in place since it was saved."""
    return _modified_msg(t._data.shape, t.dtype.legacy, t._grad_fn, t._output_nr, now, expected)


def _modified_msg(shape, legacy, grad_fn, output_nr, now, expected) -> str:
    # PyTorch names the op, not its node: "output 0 of Add" for AddBackward0.
    op = re.sub(r"Backward\d*$", "", grad_fn.name()) if grad_fn is not None else None
    where = f", which is output {output_nr} of {op}," if grad_fn is not None else ""
    return (
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [ndgrad.{legacy} {_shape_str(shape)}]{where} is at version {now}; expected "
        f"version {expected} instead. Hint: enable anomaly detection to find the operation that "
        "failed to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False)."
    )


# --- saved-tensor hooks (autograd.graph.saved_tensors_hooks) ---
class _HookState(threading.local):
    def __init__(self):
        self.stack = []  # (pack, unpack) pairs, innermost last
        self.disabled = None  # the error message while disable_saved_tensors_hooks is active


_hooks = _HookState()
# One entry per active saved_tensors_hooks context in any thread. The generated fast paths
# read this list (one truthiness check) before storing a saved input as itself.
hooks_in_use: list = []


class PackedSaved:
    """A value saved through a pack hook: what pack returned, and how to rebuild the tensor.

    It keeps no reference to the saved tensor (the point of offloading); an input keeps the node
    its gradient flows into (its grad_fn, or a leaf's AccumulateGrad) so that the unpacked tensor
    has the same gradient edge and double backward reaches the same place.
    """

    __slots__ = ("packed", "unpack_hook", "grad_fn", "output_nr", "is_output")

    def _unpack_saved(self, node):
        t = self.unpack_hook(self.packed)
        if not isinstance(t, _tensor_cls):
            raise TypeError(
                "Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                f"{type(t).__name__}"
            )
        if self.is_output:
            return _tensor_cls._make(t._data, node, self.output_nr, None)
        if self.grad_fn is not None:
            return _tensor_cls._make(t._data, self.grad_fn, self.output_nr, None)
        return t if not t._rg else t.detach()


def _pack(t, is_output, output_nr, hooks=None):
    pack, unpack = hooks or _hooks.stack[-1]
    vc = t._vc
    before = 0 if vc is None else vc[0]
    packed = pack(t)
    vc = t._vc
    if (0 if vc is None else vc[0]) != before:
        raise RuntimeError(
            "A saved tensor pack hook is modifying its input in place. Tensors provided as input to "
            "pack hook cannot be modified by in-place operations as this can lead to unexpected "
            "side-effects. Please open an issue if you need to perform in-place operations on the "
            "input to a pack hook."
        )
    s = _new(PackedSaved)
    s.packed = packed
    s.unpack_hook = unpack
    s.is_output = bool(is_output)
    s.output_nr = output_nr if is_output else t._output_nr
    s.grad_fn = None
    if not is_output:
        s.grad_fn = t._grad_fn
        if s.grad_fn is None and t._rg:  # a leaf: its accumulator exists (the node's edge made it)
            acc = t._meta.acc if t._meta is not None else None
            s.grad_fn = acc() if acc is not None else None
    return s


class saved_tensors_hooks:  # noqa: N801 - PyTorch's name
    """Context manager: every tensor saved for backward inside goes through ``pack_hook``, and
    ``unpack_hook`` rebuilds it when backward (or ``grad_fn._saved_*``) needs it. Nestable;
    the innermost pair wins. Thread-local, like grad mode."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if _hooks.disabled is not None:
            raise RuntimeError(_hooks.disabled)
        _hooks.stack.append((self.pack_hook, self.unpack_hook))
        hooks_in_use.append(self)
        return self

    def __exit__(self, *exc):
        _hooks.stack.pop()
        hooks_in_use.remove(self)
        return False


class disable_saved_tensors_hooks:  # noqa: N801 - PyTorch's name
    """Context manager: entering ``saved_tensors_hooks`` inside raises ``error_message``."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        self.prev = _hooks.disabled
        _hooks.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        _hooks.disabled = self.prev
        return False


class save_on_cpu(saved_tensors_hooks):  # noqa: N801 - PyTorch's name
    """Saved tensors are kept on the CPU and moved back to their device on unpack.

    On the CPU this is a pass-through. ``pin_memory`` puts the host copies in page-locked
    memory (where the device type has it), so the copies back run at full speed."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            dev = t.device
            if dev.type == "cpu":
                return (dev, t)
            host = _backend.device_type(dev).to_host(t._data, pinned=pin_memory)
            return (dev, _tensor_cls._make(host, None, 0, None))

        def unpack(packed):
            device, t = packed
            return t.to(device)

        super().__init__(pack, unpack)


class RawSaved:
    """``grad_fn._raw_saved_<name>``: one saved value of a node, to which hooks can be attached."""

    __slots__ = ("node", "index")

    def __init__(self, node, index):
        self.node = node
        self.index = index

    def register_hooks(self, pack_hook, unpack_hook) -> None:
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks(): incompatible function arguments: pack_hook and "
                            "unpack_hook must be callables")
        saved = self.node._saved
        if saved is None:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. Saved intermediate "
                "values of the graph are freed when you call .backward() or autograd.grad(). Specify "
                "retain_graph=True if you need to backward through the graph a second time or if you "
                "need to access saved variables after calling backward."
            )
        s = saved[self.index]
        if type(s) is PackedSaved:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor whose hooks have already been set. Hint: "
                "only one pair of hooks is allowed at a time."
            )
        if s is None:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is forbidden")
        t = s._unpack_saved(self.node)
        is_output = type(s) is SavedTensor and s.tensor is None
        packed = _pack(t, is_output, s.output_nr if is_output else 0, (pack_hook, unpack_hook))
        saved = list(saved)
        saved[self.index] = packed
        self.node._saved = tuple(saved)


# --- multi-grad hooks (autograd.graph.register_multi_grad_hook) ---
class _MultiHandle(RemovableHandle):
    """One handle for the tensor hooks of a multi-grad hook."""

    __slots__ = ("handles",)

    def __init__(self, handles):
        super().__init__()
        self.handles = tuple(handles)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _node_of(t) -> Node:
    """The node that receives ``t``'s gradient: its grad_fn, or a leaf's AccumulateGrad."""
    from .._tensor import grad_accumulator, refresh_view

    if t._view is not None:
        refresh_view(t)
    if t._grad_fn is not None:
        return t._grad_fn
    if t._rg:
        return grad_accumulator(t)
    raise AssertionError("Expected gradient function to be set")


def register_multi_grad_hook(tensors, fn, *, mode: str = "all") -> RemovableHandle:
    """Register a hook over several tensors' gradients.

    ``mode="all"``: ``fn(grads)`` runs once per backward, after the gradient of every tensor that
    this backward computes (``None`` for the others, and for tensors off the graph or not
    needed for its ``inputs``). ``mode="any"``: ``fn(grad)`` runs once per backward, with the
    first of these gradients computed. Returns a handle whose ``remove()`` removes the hook.

    >>> import ndgrad
    >>> a = ndgrad.ones(2, requires_grad=True); b = ndgrad.ones(2, requires_grad=True)
    >>> h = ndgrad.autograd.graph.register_multi_grad_hook(
    ...     (a, b), lambda grads: print([g is not None for g in grads]))
    >>> (2 * a).sum().backward()
    [True, False]
    """
    modes = ("all", "any")
    if mode not in modes:
        raise ValueError(f"Expects mode to be one of {modes} but got {mode}")
    from . import engine

    lock = threading.Lock()
    if mode == "any":
        # The per-backward state is whether fn already ran, kept on the running backward (task).
        def once(grad):
            task = engine.current_task()
            with lock:
                state = task.hook_state
                if state is None:
                    state = task.hook_state = {}
                if lock in state:
                    return
                state[lock] = True
            fn(grad)

        return _MultiHandle(t.register_hook(once) for t in tensors if t.requires_grad)

    nodes = [_node_of(t) for t in tensors]  # held: a leaf's AccumulateGrad must stay the same
    n = len(tensors)

    def collector(i):
        def hook(grad):
            task = engine.current_task()
            with lock:
                state = task.hook_state
                if state is None:
                    state = task.hook_state = {}
                entry = state.get(lock)
                if entry is None:  # first gradient of this backward: how many will come
                    expected = sum(map(engine.will_execute_node, nodes))
                    entry = state[lock] = [expected, [None] * n]
                entry[1][i] = grad
                entry[0] -= 1
                done = entry[0] == 0
                if done:
                    del state[lock]
            if done:
                fn(entry[1])

        return hook

    return _MultiHandle(t.register_hook(collector(i)) for i, t in enumerate(tensors))


# --- allow_mutation_on_saved_tensors ---
_mutation_ctx = None  # the active context (one at a time, in any thread, as in PyTorch)

_OUTSIDE_MUTATION_CTX = (
    # NOTE(pytorch): PyTorch's message, including its missing space.
    "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
    "in which the graph was originally recorded."
)


class _SavedOriginal:
    """A tensor saved under the context: the tensor itself until something writes to it, then
    a copy of its value at save time."""

    __slots__ = ("tensor", "version", "cloned", "ctx", "__weakref__")


class _AllowMutationOnSavedContext:
    """The state of one ``allow_mutation_on_saved_tensors`` context (cleared on exit)."""

    def __init__(self):
        # id(version counter) -> (the counter, {record: None}): every saved tensor sharing a
        # version counter shares memory (a base, its views, its detach()es), so a write to any
        # of them reaches the saved value.
        self.by_storage: dict = {}
        self.by_tensor = weakref.WeakValueDictionary()  # (id(tensor), version) -> record
        self.active = True

    def clear(self) -> None:
        for _, records in self.by_storage.values():
            for r in tuple(records):
                r.tensor = None
        self.by_storage.clear()
        self.by_tensor.clear()

    def pack(self, t):
        vc = t._vc
        if vc is None:
            vc = t._vc = [0]
        key = (id(t), vc[0])
        r = self.by_tensor.get(key)
        if r is not None and r.tensor is t:  # the same tensor saved twice at one version
            return r
        r = _SavedOriginal()
        r.tensor, r.version, r.cloned, r.ctx = t, vc[0], False, self
        self.by_tensor[key] = r
        entry = self.by_storage.get(id(vc))
        if entry is None:
            entry = self.by_storage[id(vc)] = (vc, weakref.WeakKeyDictionary())
        entry[1][r] = None
        return r

    def unpack(self, r):
        if not self.active or r.tensor is None:
            raise AssertionError(_OUTSIDE_MUTATION_CTX)
        return r.tensor

    def before_write(self, t) -> None:
        """``t`` is about to be written in place: copy every saved value it would change."""
        vc = t._vc
        entry = None if vc is None else self.by_storage.get(id(vc))
        if entry is None:
            return
        for r in tuple(entry[1]):
            if not r.cloned and r.tensor is not None and r.version == vc[0]:
                r.tensor = _tensor_cls._make(r.tensor._data.copy(), None, 0, None)
                r.cloned = True


class _CloneBeforeWrite(dispatch_mode.TorchDispatchMode):
    """The dispatch mode of the context (this thread's): an in-place op first saves what it
    overwrites."""

    def __init__(self, ctx):
        self.ctx = ctx

    def dispatch(self, rec, args, run):
        if rec.mutates and isinstance(args[0], _tensor_cls):
            self.ctx.before_write(args[0])
        return run(rec, args)


class allow_mutation_on_saved_tensors:  # noqa: N801 - PyTorch's name
    """Context manager under which tensors saved for backward may be modified in place: a saved
    tensor is copied before its first in-place change, and backward uses that copy. Run both
    forward and backward inside; ``__enter__`` returns the context's state object.

    >>> import ndgrad
    >>> with ndgrad.autograd.graph.allow_mutation_on_saved_tensors():
    ...     a = ndgrad.ones(2, requires_grad=True)
    ...     b = a.clone()
    ...     out = (b ** 2).sum()
    ...     _ = b.sin_()
    ...     out.backward()
    >>> a.grad
    tensor([2., 2.])
    """

    def __enter__(self) -> _AllowMutationOnSavedContext:
        global _mutation_ctx
        if _mutation_ctx is not None:
            raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
        ctx = self.ctx = _AllowMutationOnSavedContext()
        self.hooks = saved_tensors_hooks(ctx.pack, ctx.unpack)
        self.hooks.__enter__()
        self.mode = _CloneBeforeWrite(ctx)
        dispatch_mode.push(self.mode)
        _mutation_ctx = ctx
        return ctx

    def __exit__(self, *exc):
        global _mutation_ctx
        dispatch_mode.remove(self.mode)  # wherever it sits: modes pushed inside may remain
        self.hooks.__exit__(*exc)
        self.ctx.active = False
        self.ctx.clear()
        _mutation_ctx = None
        return False
