"""Autograd core (layer 2): tensors saved for backward, saved-tensor hooks and
``allow_mutation_on_saved_tensors``.

``Tensor`` lives one layer up and is never imported here: a saved value is rebuilt with the
``_make`` of the tensor it was saved from. The public ``autograd.graph`` re-exports these names.
"""

from __future__ import annotations

import re
import threading
import weakref

from .. import _backend
from .. import _dtype
from . import dispatch_mode
from .grad_mode import INFERENCE_VC

__all__ = ["SavedTensor", "saved_tensors_hooks", "disable_saved_tensors_hooks", "save_on_cpu",
           "allow_mutation_on_saved_tensors"]


def _shape_str(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved.

    An input saved at version 0 (nearly all of them) is stored as the tensor itself, which
    answers ``_unpack_saved`` too (see ``Tensor._unpack_saved``): no allocation per saved input.
    Any other input is kept here as the tensor and its version; an output is kept as its array
    and version counter only (no reference to the node that produced it, so no cycle) and
    rebuilt with ``grad_fn`` set to the owning node on unpack, by ``make``: the saved tensor's
    ``_make`` (``Tensor`` is a layer up; this layer does not import it).
    """

    __slots__ = ("tensor", "data", "vc", "version", "output_nr", "make")

    def _unpack_saved(self, node):
        t = self.tensor
        if t is not None:
            vc = t._vc
            if (vc[0] if vc is not None else 0) != self.version:
                raise RuntimeError(modified_msg(t, vc[0], self.version))
            return t
        if self.vc[0] != self.version:
            dt = _dtype._FROM_NP[self.data.dtype]
            raise RuntimeError(_modified_msg(self.data.shape, dt.legacy, node, self.output_nr,
                                             self.vc[0], self.version))
        return self.make(self.data, node, self.output_nr, self.vc)


_new = object.__new__


def save_input(t):
    """Save an input tensor: itself at version 0, else a ``SavedTensor`` with its version."""
    vc = t._vc
    if vc is INFERENCE_VC:
        raise RuntimeError(
            "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
            "inference mode in computation tracked by autograd. To work around this, you can make "
            "a clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` "
            "instead of `torch.inference_mode()`.")
    if hooks_in_use and _hooks.stack:
        return _pack(t, None, 0)
    if vc is None or not vc[0]:
        return t
    s = _new(SavedTensor)
    s.tensor = t
    s.data = None
    s.vc = None
    s.version = vc[0]
    s.output_nr = 0
    s.make = None
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
    s.make = t._make
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
    has the same gradient edge and double backward reaches the same place. ``make`` is the saved
    tensor's ``_make``: what unpack returns must be a tensor with the same one.
    """

    __slots__ = ("packed", "unpack_hook", "grad_fn", "output_nr", "is_output", "make")

    def _unpack_saved(self, node):
        t = self.unpack_hook(self.packed)
        if getattr(type(t), "_make", None) is not self.make:  # not a Tensor (of any subclass)
            raise TypeError(
                "Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                f"{type(t).__name__}"
            )
        if self.is_output:
            return t._make(t._data, node, self.output_nr, None)
        if self.grad_fn is not None:
            return t._make(t._data, self.grad_fn, self.output_nr, None)
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
    s.make = t._make
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
            return (dev, t._make(host, None, 0, None))

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
        vc = getattr(t, "_vc", None)  # None for a tensor never written, and for a non-tensor
        entry = None if vc is None else self.by_storage.get(id(vc))
        if entry is None:
            return
        for r in tuple(entry[1]):
            if not r.cloned and r.tensor is not None and r.version == vc[0]:
                r.tensor = r.tensor._make(r.tensor._data.copy(), None, 0, None)
                r.cloned = True


class _CloneBeforeWrite(dispatch_mode.TorchDispatchMode):
    """The dispatch mode of the context (this thread's): an in-place op first saves what it
    overwrites."""

    def __init__(self, ctx):
        self.ctx = ctx

    def dispatch(self, rec, args, run):
        if rec.mutates:
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
