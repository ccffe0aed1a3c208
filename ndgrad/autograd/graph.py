"""``torch.autograd.graph``: the public module, assembled at layer 5 (engine and friends).

Its names come from the autograd core, re-exported: ``node.py`` (``Node``, ``GraphRoot``,
``AccumulateGrad``, hooks) and ``saved.py`` (saved tensors, saved-tensor hooks,
``allow_mutation_on_saved_tensors``), both layer 2. ``register_multi_grad_hook`` needs tensors
and the engine, so it is defined here. Code below layer 5 imports the core modules, never this.
"""

from __future__ import annotations

import threading

from .._tensor import grad_accumulator, refresh_view
from . import engine
from .node import AccumulateGrad, GraphRoot, Node, RemovableHandle
from .saved import (
    SavedTensor, allow_mutation_on_saved_tensors, disable_saved_tensors_hooks, save_on_cpu,
    saved_tensors_hooks,
)

__all__ = ["Node", "AccumulateGrad", "GraphRoot", "SavedTensor", "RemovableHandle",
           "register_multi_grad_hook", "allow_mutation_on_saved_tensors", "saved_tensors_hooks",
           "disable_saved_tensors_hooks", "save_on_cpu"]


# --- multi-grad hooks ---
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
