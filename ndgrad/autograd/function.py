"""``ndgrad.autograd.Function``: user-defined operations with a hand-written backward.

Each ``Function`` subclass gets, at class creation, a node class ``<Name>Backward``. One call to
``apply`` creates one instance of it, which is both the ``ctx`` handed to ``forward`` /
``setup_context`` / ``backward`` and the ``grad_fn`` of the outputs (as in PyTorch, so
``y.grad_fn.saved_tensors`` and attributes set on ``ctx`` are reachable from the output).
Unlike the generated op nodes, a user node checks what ``backward`` returned itself (count,
types, shapes) since the engine trusts op nodes.
"""

from __future__ import annotations

import functools
import inspect
import warnings


from .. import _backend
from .._dtype import _FROM_NP, INEXACT
from .._ops.factory import zeros as _zeros
from .._tensor import Tensor, ViewInfo, gradient_edge, refresh_view
from .anomaly_mode import annotate
from .anomaly_mode import state as _anomaly
from . import forward_ad as _fwad
from .grad_mode import state as _gs
from .node import SECOND_BACKWARD_MSG, Node, next_sequence_nr, shared_view
from .saved import save_input, save_output

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable", "InplaceFunction"]

_new = object.__new__
_make = Tensor._make
_IN_CUSTOM = ViewInfo.IN_CUSTOM_FUNCTION
_NO_META = (None, None, None, None)  # input metadata of an output no gradient can flow into


class FunctionCtx:
    """What ``forward``/``setup_context`` call on ``ctx``; the choices are read once forward returns."""

    def save_for_backward(self, *tensors) -> None:
        self.to_save = tensors

    def save_for_forward(self, *tensors) -> None:
        self.saved_for_forward = tensors

    def mark_dirty(self, *args) -> None:
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args) -> None:
        self.non_differentiable = args

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The node (and ctx) of one ``Function.apply``. No ``__slots__``: ctx takes any attribute."""

    _forward_cls = None

    @property
    def saved_tensors(self):
        saved = self._saved
        if saved is None:
            raise RuntimeError(SECOND_BACKWARD_MSG)
        return tuple(None if s is None else s._unpack_saved(self) for s in saved)

    saved_variables = saved_tensors

    def apply(self, grads):
        cls = self._forward_cls
        if self.materialize_grads:
            info = self._out_info
            grads = tuple(
                _zeros(info[i][0], dtype=_FROM_NP[info[i][1]], device=info[i][2])  # an op: modes see it
                if g is None and info[i] is not None
                else g
                for i, g in enumerate(grads)
            )
        backward_fn = cls.backward
        vjp_fn = cls.vjp
        if backward_fn is not Function.backward and vjp_fn is not Function.vjp:
            raise RuntimeError(
                "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You should "
                "only implement one of them."
            )
        fn = backward_fn if backward_fn is not Function.backward else vjp_fn
        res = fn(self, *grads)
        return self._check_grads(res if type(res) is tuple else (res,))

    def _check_grads(self, res):
        """PyTorch's checks on what backward returned: one per forward argument (extra Nones
        dropped), None for non-tensor arguments, Tensors or None otherwise; shapes as the engine."""
        is_tensor = self._is_tensor_input
        n = len(is_tensor)
        if len(res) > n and all(r is None for r in res[n:]):
            res = res[:n]
        if len(res) != n:
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients (expected {n}, "
                f"got {len(res)})"
            )
        out = []
        fresh = self._forward_cls._fresh_grads
        for i, (is_t, r) in enumerate(zip(is_tensor, res)):
            if not is_t:
                if r is not None:
                    raise RuntimeError(
                        f"function {self.name()} returned a gradient different than None at position "
                        f"{i + 1}, but the corresponding forward input was not a Variable"
                    )
                continue
            if r is not None and not isinstance(r, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(r).__name__})")
            if r is not None and not r._rg and not fresh:
                r = shared_view(r)  # user code may return memory it keeps: .grad must copy it
            out.append(r)
        from .engine import _validate_outputs  # one layer up from the tensor, beside this module

        # Validated here with the right index: the engine finds a gradient's index by its edge,
        # which is ambiguous when one tensor is passed twice.
        return tuple(_validate_outputs(self, self.next_edges, out))


class FunctionMeta(type):
    """Creates ``<Name>Backward`` for every ``Function`` subclass."""

    def __init__(cls, name, bases, attrs):
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})
        super().__init__(name, bases, attrs)


class Function(FunctionCtx, metaclass=FunctionMeta):
    """Subclass with static ``forward``/``backward`` (and optionally ``setup_context``); call
    ``apply``."""

    # Internal: backward's results are memory nobody else holds (the compile stack's generated
    # backward), so .grad may keep them instead of copying, as PyTorch steals a lone gradient.
    _fresh_grads = False

    def __init__(self, *args, **kwargs):
        warnings.warn(
            f"{self.__class__} should not be instantiated. Methods on autograd functions are all "
            "static, so you should invoke them on the class itself. Instantiating an autograd "
            "function will raise an error in a future version of PyTorch.",
            DeprecationWarning,
            stacklevel=2,
        )

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom autograd.Function "
            "to use it with backward mode AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with forward "
            "mode AD."
        )

    @classmethod
    def apply(cls, *args, **kwargs):
        new_style = cls.setup_context is not Function.setup_context
        if new_style and kwargs:  # setup_context sees every argument positionally
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, {}
        return _apply(cls, new_style, args, kwargs)


class InplaceFunction(Function):
    """A ``Function`` with an ``inplace`` flag (PyTorch keeps it for old code)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


def _apply(cls, new_style, args, kwargs):
    is_tensor = tuple(isinstance(a, Tensor) for a in args)
    for a, t in zip(args, is_tensor):
        if t and a._view is not None:
            refresh_view(a)
    needs = tuple(t and a._rg for a, t in zip(args, is_tensor))
    executable = _gs.grad_enabled and any(needs)

    ctx = _new(cls._backward_cls)
    ctx.next_edges = ()
    ctx.sequence_nr = next_sequence_nr()
    ctx._in_meta = ()
    ctx._saved = ()
    ctx._extra = None
    ctx.needs_input_grad = needs
    ctx.materialize_grads = True
    ctx._is_tensor_input = is_tensor
    if executable:  # edges before forward: an in-place forward rebases its input afterwards
        ctx.next_edges = tuple(gradient_edge(a) for a, t in zip(args, is_tensor) if t)

    # Forward AD: forward runs with the mode off; ``jvp`` gives the outputs' tangents.
    tangents = None
    if _fwad.active():
        tangents = tuple(_fwad.tangent_of(a) if t else None for a, t in zip(args, is_tensor))
        if not any(g is not None for g in tangents):
            tangents = None
    prev = _gs.grad_enabled
    _gs.grad_enabled = False
    prev_fw, _fwad._local.disabled = _fwad._local.disabled, _fwad._state.level is not None
    try:
        if new_style:
            output = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args, output)
        else:
            output = cls.forward(ctx, *args, **kwargs)
    finally:
        _gs.grad_enabled = prev
        _fwad._local.disabled = prev_fw

    is_tuple = type(output) is tuple
    outputs = _wrap_outputs(ctx, args, is_tensor, output if is_tuple else (output,), executable)
    if executable:
        _save(ctx, outputs)
        if _anomaly.enabled:
            annotate((ctx,))
    else:
        ctx.__dict__.pop("to_save", None)
    if tangents is not None:
        _fwad.function_jvp(cls, ctx, args, is_tensor, tangents, outputs)
    return outputs if is_tuple else outputs[0]


def _wrap_outputs(ctx, args, is_tensor, outputs, executable):
    """Give the outputs their history: differentiable ones get ``ctx`` as grad_fn, inputs
    returned unchanged become aliases (views) of them, dirty inputs are rebased onto ``ctx``."""
    d = ctx.__dict__
    dirty = d.pop("dirty_tensors", ())
    nondiff = d.pop("non_differentiable", ())
    input_ids = {id(a) for a, t in zip(args, is_tensor) if t}
    dirty_ids = {id(t) for t in dirty}
    nondiff_ids = {id(t) for t in nondiff}
    for t in dirty:
        if id(t) not in input_ids:
            warnings.warn(
                "ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that "
                "have been mutated should be passed to ctx.mark_dirty().",
                UserWarning,
                stacklevel=4,
            )
        t._bump()  # the write happened under no_grad; mark it once more as PyTorch does
    out_ids = {id(o) for o in outputs if isinstance(o, Tensor)}
    if not dirty_ids <= out_ids:
        raise RuntimeError(
            "Some elements marked as dirty during the forward method were not returned as output. The "
            "inputs that are modified inplace must all be outputs of the Function."
        )
    n_tensor_out = len(out_ids)
    result = []
    meta = []
    info = []
    for nr, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            result.append(o)
            meta += _NO_META
            info.append(None)
            continue
        a = o._data
        info.append((a.shape, a.dtype, _backend.device_of(a)))
        oid = id(o)
        is_input = oid in input_ids
        is_dirty = oid in dirty_ids
        diff = executable and oid not in nondiff_ids and a.dtype in INEXACT
        meta += _backend.meta_of(a) if diff else _NO_META
        if not diff:
            if not o._rg:
                if is_input and not is_dirty:
                    o = _alias(o, None, 0, ViewInfo.NO_GRAD)
            elif is_input:
                o = o.detach()  # a detached alias; the input keeps requiring grad
            elif o._view is None:
                o.detach_()
        elif is_dirty:
            _rebase(ctx, o, nr, n_tensor_out)
        elif is_input:
            o = _alias(o, ctx, nr, _IN_CUSTOM)
        else:
            o._grad_fn = ctx
            o._output_nr = nr
            o._rg = True
            if o._view is not None:  # a view made in forward: in-place on it must not bypass ctx
                o._view.creation = _IN_CUSTOM
        result.append(o)
    ctx._in_meta = tuple(meta)
    ctx._out_info = tuple(info)
    return tuple(result)


def _alias(t, grad_fn, nr, creation):
    """A new tensor viewing all of ``t`` (PyTorch's ``view_as(self)``), sharing its version."""
    vc = t._vc
    if vc is None:
        vc = t._vc = [0]
    out = _make(t._data.view(), grad_fn, nr, vc)
    info = t._view
    base, chain = (t, ()) if info is None else (info.base, info.chain)
    out._view = ViewInfo(base, chain, vc[0], creation)
    if grad_fn is None and t._rg:
        out._rg = True
    return out


def _rebase(ctx, o, nr, n_tensor_out) -> None:
    """An input modified in place by forward becomes an output of ``ctx``."""
    if o._grad_fn is None and o._rg:
        raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
    info = o._view
    if info is not None and n_tensor_out > 1:
        raise RuntimeError(
            "If your Function modifies inplace an input that is a view of another Tensor, your "
            "Function cannot return more than one Tensor. This is not supported by the current "
            "autograd engine. You should either make sure the input is not a view (using .clone() "
            "for example) or make your Function only return one Tensor (potentially splitting it "
            "into two Functions: one doing the inplace that returns a single Tensor and a second one "
            "that does the other operations). You can ask on the forum https://discuss.pytorch.org/ "
            "if you need help to do this change."
        )
    m = o._meta
    if m is not None:  # the tensor is a new value: its old gradient and hooks do not carry over
        m.grad = None
        m.hooks = None
        m.acc = None
    if info is None:
        o._grad_fn = ctx
        o._output_nr = nr
        o._rg = True
        return
    # An in-place change of a view: the base gets a CopySlices around ctx (PyTorch's
    # rebase_history), which, as in PyTorch, takes the view to be ctx's first input.
    from .._ops.registry import CopySlices  # the ops layer owns CopySlices

    base = info.base
    cs = _new(CopySlices)
    cs.view = ViewInfo(None, info.chain, 0, ViewInfo.DEFAULT)
    cs.fn = ctx
    cs.next_edges = (gradient_edge(base),) + ctx.next_edges[1:]
    cs.sequence_nr = ctx.sequence_nr
    cs._extra = None
    b = base._data
    cs._in_meta = _backend.meta_of(b)
    base._grad_fn = cs
    base._output_nr = 0
    base._rg = True
    info.version = -1  # regenerate the view's grad_fn from the new base node
    refresh_view(o)


def _save(ctx, outputs) -> None:
    to_save = ctx.__dict__.pop("to_save", None)
    if not to_save:
        return
    saved = []
    for i, t in enumerate(to_save):
        if t is None:
            saved.append(None)
        elif not isinstance(t, Tensor):
            raise TypeError(
                f"save_for_backward can only save variables, but argument {i} is of type {type(t).__name__}"
            )
        elif t._grad_fn is ctx:  # an output: saved without a reference back to ctx
            saved.append(save_output(t, t._output_nr))
        else:  # an input, or (allowed) an intermediate
            saved.append(save_input(t))
    ctx._saved = tuple(saved)


# --- once_differentiable ---
_TWICE_MSG = "trying to differentiate twice a function that was marked with @once_differentiable"


class DelayedError(Node):
    """Stands for a backward that cannot be differentiated: differentiating it raises."""

    __slots__ = ("msg",)

    def apply(self, grads):
        raise RuntimeError(self.msg)


def once_differentiable(fn):
    """Run ``backward`` without recording a graph; differentiating its result raises."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        prev = _gs.grad_enabled
        _gs.grad_enabled = False
        try:
            outputs = fn(ctx, *args)
        finally:
            _gs.grad_enabled = prev
        if not prev or not any(isinstance(a, Tensor) and a._rg for a in args):
            return outputs
        is_tuple = type(outputs) is tuple
        outs = outputs if is_tuple else (outputs,)
        node = _new(DelayedError)
        node.msg = _TWICE_MSG
        node.next_edges = ()
        node.sequence_nr = next_sequence_nr()
        node._saved = None
        node._extra = None
        meta = []
        wrapped = []
        for k, o in enumerate(outs):
            if isinstance(o, Tensor):
                meta += _backend.meta_of(o._data)
                o = _make(o._data, node, k, None)
            else:
                meta += _NO_META
            wrapped.append(o)
        node._in_meta = tuple(meta)
        return tuple(wrapped) if is_tuple else wrapped[0]

    return wrapper
