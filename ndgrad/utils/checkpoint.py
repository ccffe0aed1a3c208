"""Activation checkpointing: keep a segment's inputs, recompute its activations in backward.

Non-reentrant form (``use_reentrant=False``), built on saved-tensor hooks: inside the segment
every value an op saves for backward is replaced by a small handle; the first time backward
unpacks a handle, the segment runs again under hooks that capture the values as they are
saved, stopping as soon as all of them exist. Reentrant form: the segment runs under
``no_grad``; its node recomputes it with grad enabled and runs a nested backward through it.
"""

from __future__ import annotations

import warnings

from .. import _factories
from .._tensor import Tensor
from ..autograd import graph
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.grad_mode import state as _grad_state

__all__ = ["checkpoint", "checkpoint_sequential"]

_NO_REENTRANT_HINT = (
    "the use_reentrant parameter should be passed explicitly. Starting in PyTorch 2.9, calling "
    "checkpoint without use_reentrant will raise an exception. use_reentrant=False is recommended, "
    "but if you need to preserve the current default behavior, you can pass use_reentrant=True. "
    "Refer to docs for more details on the differences between the two variants."
)


class _StopRecomputation(Exception):
    """Raised by the recomputation's pack hook once every needed value exists."""


class _Segment:
    """One checkpointed call: what recomputation needs, and the values it has produced."""

    def __init__(self, fn, args, kwargs, preserve_rng_state):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.rng_state = _factories.get_rng_state() if preserve_rng_state else None
        self.grad_enabled = _grad_state.grad_enabled
        self.count = 0  # values saved by the forward run
        self.recomputed = {}  # handle -> tensor, filled by a recomputation

    def pack(self, t):
        handle = self.count
        self.count += 1
        return handle

    def unpack(self, handle):
        t = self.recomputed.pop(handle, None)
        if t is None:
            self._recompute()
            t = self.recomputed.pop(handle)
        return t

    def _recompute(self) -> None:
        values = {}
        counter = [0]
        total = self.count

        def pack(t):
            k = counter[0]
            counter[0] += 1
            values[k] = t.detach()
            if counter[0] == total:
                raise _StopRecomputation
            return k

        rng = _factories.get_rng_state()
        if self.rng_state is not None:
            _factories.set_rng_state(self.rng_state)
        try:
            with enable_grad() if self.grad_enabled else no_grad():
                with graph.saved_tensors_hooks(pack, lambda k: values[k]):
                    self.fn(*self.args, **self.kwargs)
        except _StopRecomputation:
            pass
        finally:
            _factories.set_rng_state(rng)
        if counter[0] != total:
            raise RuntimeError(
                "torch.utils.checkpoint: A different number of tensors was saved during the original "
                f"forward and recomputation.\nNumber of tensors saved during forward: {total}\n"
                f"Number of tensors saved during recomputation: {counter[0]}."
            )
        self.recomputed = values


def _non_reentrant(fn, args, kwargs, preserve_rng_state):
    seg = _Segment(fn, args, kwargs, preserve_rng_state)
    with graph.saved_tensors_hooks(seg.pack, seg.unpack):
        return fn(*args, **kwargs)


class CheckpointFunctionBackward(graph.Node):
    """The reentrant form's node: recompute the segment with grad on, backward through it."""

    __slots__ = ("fn", "args", "kwargs", "rng_state", "tensor_pos")

    def apply(self, grads):
        if self._saved is None:  # released by an earlier backward without retain_graph
            raise RuntimeError(graph.SECOND_BACKWARD_MSG)
        args = list(self.args)
        leaves = []
        for i in self.tensor_pos:
            a = args[i].detach()
            a.requires_grad_(self.args[i].requires_grad)
            args[i] = a
            leaves.append(a)
        rng = _factories.get_rng_state()
        if self.rng_state is not None:
            _factories.set_rng_state(self.rng_state)
        try:
            with enable_grad():
                outs = self.fn(*args, **self.kwargs)
        finally:
            _factories.set_rng_state(rng)
        outs = outs if isinstance(outs, tuple) else (outs,)
        pairs = [(o, g) for o, g in zip((o for o in outs if isinstance(o, Tensor)), grads)
                 if o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError(
                "none of output has requires_grad=True, this checkpoint() is not necessary")
        # A nested backward: the segment's parameters accumulate their .grad here, as in PyTorch.
        from ..autograd.api import backward

        backward([o for o, _ in pairs], [g for _, g in pairs])
        return tuple(t.grad if t.requires_grad else None for t in leaves)


def _reentrant(fn, args, kwargs, preserve_rng_state):
    from .._tensor import gradient_edge

    tensor_pos = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
    rng_state = _factories.get_rng_state() if preserve_rng_state else None
    with no_grad():
        outs = fn(*args, **kwargs)
    single = not isinstance(outs, tuple)
    outs = (outs,) if single else outs
    if not (_grad_state.grad_enabled and any(args[i].requires_grad for i in tensor_pos)):
        return outs[0] if single else outs
    node = object.__new__(CheckpointFunctionBackward)
    node.fn, node.args, node.kwargs, node.rng_state, node.tensor_pos = fn, args, kwargs, rng_state, tensor_pos
    node.next_edges = tuple(gradient_edge(args[i]) for i in tensor_pos)
    node.sequence_nr = graph.next_sequence_nr()
    node._saved = ()
    node._extra = None
    meta = ()
    result = []
    nr = 0
    for o in outs:
        if isinstance(o, Tensor):
            if any(o is a for a in args) or o._grad_fn is not None or o._rg:
                o = o.detach()  # never re-point a caller's tensor at this node
            meta += (o._data.shape, o._data.dtype, o.device)
            if o._data.dtype.kind in "fc":
                o._grad_fn, o._output_nr, o._rg = node, nr, True
            nr += 1
        result.append(o)
    node._in_meta = meta
    return result[0] if single else tuple(result)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, early_stop=True, preserve_rng_state=True, **kwargs):
    """Run ``function(*args, **kwargs)`` keeping only its inputs; recompute it in backward."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: " + _NO_REENTRANT_HINT, stacklevel=2)
        use_reentrant = True
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        return _reentrant(function, args, kwargs, preserve_rng_state)
    return _non_reentrant(function, args, kwargs, preserve_rng_state)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Split ``functions`` (a list or ``nn.Sequential``) into ``segments`` checkpointed runs;
    the last segment runs normally, as in PyTorch."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be "
            "passed explicitly. In version 2.9 we will raise an exception if use_reentrant is not "
            "passed. use_reentrant=False is recommended, but if you need to preserve the current "
            "default behavior, you can pass use_reentrant=True. Refer to docs for more details on "
            "the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(functions) - 1)(input)
