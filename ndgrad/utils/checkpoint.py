"""Activation checkpointing: keep a segment's inputs, recompute its activations in backward.

Non-reentrant form (``use_reentrant=False``), built on saved-tensor hooks: inside the segment
every value an op saves for backward is replaced by a small handle; the first time backward
unpacks a handle, the segment runs again under hooks that capture the values as they are
saved, stopping as soon as all of them exist. Reentrant form: a custom ``Function`` whose
backward recomputes the segment with grad enabled and runs a nested backward through it.
"""

from __future__ import annotations

import warnings

from .. import _factories
from .._tensor import Tensor
from ..autograd import graph
from ..autograd.api import backward
from ..autograd.engine import _is_checkpoint_valid
from ..autograd.function import Function
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


class CheckpointFunction(Function):
    """The reentrant form: forward runs the segment without a graph (``Function.forward`` runs
    under no_grad); backward recomputes it with grad on and runs a nested backward through it.
    Its node is ``CheckpointFunctionBackward``, as in PyTorch."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.rng_state = _factories.get_rng_state() if preserve_rng_state else None
        ctx.tensor_pos = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_pos))  # in-place changes are caught
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if not _is_checkpoint_valid():
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or "
                "passing an `inputs` parameter to .backward(). To resolve this error, you can either "
                "set use_reentrant=False, or call .backward() without passing the `inputs` argument.")
        args = list(ctx.inputs)
        leaves = []
        for i, t in zip(ctx.tensor_pos, ctx.saved_tensors):
            a = t.detach()
            a.requires_grad_(t.requires_grad)
            args[i] = a
            leaves.append(a)
        rng = _factories.get_rng_state()
        if ctx.rng_state is not None:
            _factories.set_rng_state(ctx.rng_state)
        try:
            with enable_grad():
                outs = ctx.run_function(*args)
        finally:
            _factories.set_rng_state(rng)
        outs = outs if isinstance(outs, tuple) else (outs,)
        pairs = [(o, g) for o, g in zip(outs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError(
                "none of output has requires_grad=True, this checkpoint() is not necessary")
        # A nested backward: the segment's parameters accumulate their .grad here, as in PyTorch.
        backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(
            args[i].grad if isinstance(args[i], Tensor) else None for i in range(len(args)))


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, early_stop=True, preserve_rng_state=True, **kwargs):
    """Run ``function(*args, **kwargs)`` keeping only its inputs; recompute it in backward."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: " + _NO_REENTRANT_HINT, stacklevel=2)
        use_reentrant = True
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          stacklevel=2)
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
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
