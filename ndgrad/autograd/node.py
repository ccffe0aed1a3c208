"""Autograd core (layer 2): ``Node`` (a backward function), edges, node and tensor hooks, and
``AccumulateGrad``.

An edge is a plain tuple ``(node, input_nr)`` or ``None``. Nodes know nothing about particular
ops: the ops layer generates one ``Node`` subclass per op, and the engine only calls
``apply(grads)``. ``Tensor`` lives one layer up and is never imported here: a new tensor is made
with ``t._make`` of a tensor at hand. The public ``autograd.graph`` re-exports these names.
"""

from __future__ import annotations

import itertools
import sys
import threading
import weakref

import numpy as np

from .. import _backend
from .dispatch_mode import active as _modes  # non-empty while any dispatch mode is entered
from .grad_mode import state as _grad_state

__all__ = ["Node", "GraphRoot", "AccumulateGrad", "RemovableHandle"]

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

    ``_in_meta`` holds ``shape, np_dtype, device, stream`` of each gradient the node receives (one
    per forward output), flat: ``(shape0, dtype0, device0, stream0, shape1, ...)`` (one tuple per
    node, not one per output: node creation is the hot path; device None: the host). The engine checks and reduces gradients with it.
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
                # Under a dispatch mode the copy is the op it is, so a capture records it.
                meta.grad = grad.clone() if _modes else grad._make(d.copy(), None, 0, None)
            else:
                # Steal the array (PyTorch steals a gradient nobody else holds): no other .grad
                # can be handed the same memory (see _stolen).
                meta.grad = grad._make(d, None, 0, None) if grad._rg or d is not root else grad
                _steal(root)
        else:
            od = old._data
            if od.shape == grad._data.shape and od.dtype == grad._data.dtype and od.flags.writeable:
                # NOTE(pytorch): accumulate in place into an existing .grad; under a dispatch
                # mode as the op add_, so a capture records it.
                if _modes:
                    old.add_(grad)
                else:
                    od += grad._data
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
    return t._make(a, None, 0, None)
