"""``Tensor``: an array plus autograd state. Ops are attached as methods by ``ndgrad._ops``.

Slots: ``_data`` (the ndarray), ``_rg`` (requires grad), ``_grad_fn`` / ``_output_nr`` (where the
tensor sits in the graph), ``_vc`` (version counter, a one-element list shared by a base, its
views and ``detach()``ed aliases; ``None`` until first needed), ``_view`` (``ViewInfo`` when the
tensor is a view), ``_meta`` (``AutogradMeta``: leaf ``.grad``, hooks; ``None`` until needed).
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from . import _backend
from . import _dtype as D
from .autograd.node import AccumulateGrad, RemovableHandle, _HookDict
from .autograd.saved import modified_msg
from .autograd.grad_mode import INFERENCE_VC, INPLACE_MSG, state as _grad_state

__all__ = ["Tensor"]


class AutogradMeta:
    __slots__ = ("grad", "acc", "hooks", "post_acc_hooks", "retains_grad", "name", "fw_grad", "fw_level")

    def __init__(self):
        self.grad = None
        self.fw_grad = None  # forward-mode tangent (autograd.forward_ad), valid at the dual level
        self.fw_level = None  # whose token this is

        self.acc = None  # weakref to the AccumulateGrad node
        self.hooks = None  # leaf tensor hooks, shared with the AccumulateGrad node
        self.post_acc_hooks = None
        self.retains_grad = False
        self.name = None


class ViewInfo:
    """How a view was made from its base: ``chain`` is a tuple of ``(rec, params, out_index)``
    steps that replay it (on the base, or on the base's gradient in CopySlices).
    ``version`` is the version counter value when the view's ``grad_fn`` was last set."""

    __slots__ = ("base", "chain", "version", "creation")

    # How the view was made (PyTorch's CreationMeta): all but DEFAULT forbid in-place changes
    # with grad. IN_CUSTOM_FUNCTION: returned by a custom Function (or an input returned as-is).
    # INFERENCE_MODE: a view of a normal tensor made in inference mode (no_grad's rules, its own
    # message).
    DEFAULT, MULTI_OUTPUT, NO_GRAD, IN_CUSTOM_FUNCTION, INFERENCE_MODE = 0, 1, 2, 3, 4

    def __init__(self, base, chain, version, creation):
        self.base = base
        self.chain = chain
        self.version = version
        self.creation = creation

    def replay(self, t):
        for rec, params, idx in self.chain:
            t = rec.call(t, *params)
            if idx is not None:
                t = t[idx]
        return t


class Tensor:
    __slots__ = ("_data", "_rg", "_grad_fn", "_output_nr", "_vc", "_view", "_meta", "__weakref__")
    __array_ufunc__ = None  # NumPy scalars defer to our reflected operators
    __hash__ = object.__hash__

    @staticmethod
    def _make(data, grad_fn, output_nr, vc):
        t = _new(Tensor)
        t._data = data
        t._rg = grad_fn is not None
        t._grad_fn = grad_fn
        t._output_nr = output_nr
        t._vc = vc
        t._view = None
        t._meta = None
        return t

    @staticmethod
    def _dtype_of(array) -> D.dtype:
        return D._FROM_NP[array.dtype]

    # --- metadata ---
    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def dtype(self) -> D.dtype:
        return D._FROM_NP[self._data.dtype]

    @property
    def device(self):
        return _backend.device_of(self._data)

    def record_stream(self, stream) -> None:
        """Keep this tensor's memory from reuse until the work queued on ``stream`` is done."""
        if self.device.type == "cpu":
            raise RuntimeError("record_stream: expected a device tensor")  # NOTE(pytorch): CPU tensors have no streams
        _backend.device_type(self.device).keep_alive(self._data, stream)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def ndimension(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    def element_size(self) -> int:
        return self._data.itemsize

    def stride(self, dim=None):
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[_wrap_dim(dim, self._data.ndim)]

    def is_contiguous(self, memory_format=None) -> bool:
        return self._data.flags.c_contiguous

    def data_ptr(self) -> int:
        return self._data.__array_interface__["data"][0]

    def is_floating_point(self) -> bool:
        return self._data.dtype in D.FLOATING

    def is_complex(self) -> bool:
        return self._data.dtype.kind == "c"

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    # --- conversion to Python / NumPy ---
    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        return self._data.reshape(()).item()

    def tolist(self):
        return self._data.tolist()

    def numpy(self, *, force: bool = False):
        if self._rg and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        a = self._data
        if a.dtype is D.BF16:  # NOTE(pytorch): NumPy itself has no bfloat16
            raise TypeError("Got unsupported ScalarType BFloat16")
        if type(a) is not np.ndarray:
            dev = _backend.device_of(a)
            if dev.type != "cpu":
                if not force:
                    raise TypeError(f"can't convert {dev} device type tensor to numpy. Use Tensor.cpu() "
                                    "to copy the tensor to host memory first.")
                return _backend.device_type(dev).to_host(a)  # force: a copy, as PyTorch's
        return a

    def __array__(self, dtype=None, copy=None):
        a = self.numpy(force=True)
        return a if dtype is None else a.astype(dtype)

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with more than one value is ambiguous"
            )
        return bool(self._data.reshape(()))

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __repr__(self) -> str:
        from ._tensor_str import tensor_repr

        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec) -> str:
        if self._data.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, proto):
        return (_rebuild, (self._data, self._rg and self._grad_fn is None))

    # --- autograd attributes ---
    def _get_meta(self) -> AutogradMeta:
        m = self._meta
        if m is None:
            m = self._meta = AutogradMeta()
        return m

    def _unpack_saved(self, node):
        """A saved input stored as itself (it was at version 0 when saved; see SavedTensor)."""
        vc = self._vc
        if vc is not None and vc[0]:
            raise RuntimeError(modified_msg(self, vc[0], 0))
        return self

    def _bump(self) -> None:
        vc = self._vc
        if vc is None:
            self._vc = [1]
        else:
            vc[0] += 1

    @property
    def _version(self) -> int:
        vc = self._vc
        if vc is INFERENCE_VC:
            raise RuntimeError("Inference tensors do not track version counter.")
        return 0 if vc is None else vc[0]

    @property
    def grad_fn(self):
        if self._view is not None:
            refresh_view(self)
        return self._grad_fn

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def is_leaf(self) -> bool:
        if self._view is not None:
            refresh_view(self)
        return self._grad_fn is None

    @property
    def requires_grad(self) -> bool:
        if self._view is not None:
            refresh_view(self)
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value) -> None:
        if value and self._grad_fn is None and self._data.dtype not in D.INEXACT:
            # NOTE(pytorch): the attribute setter words it differently from requires_grad_()
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients"
            )
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if self._grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use "
                    "a computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach()."
                )
            return self
        if requires_grad and self._data.dtype not in D.INEXACT:
            # NOTE(pytorch): the method's wording omits "and complex" (complex is still allowed)
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if requires_grad:
            check_may_require_grad(self)
        self._rg = bool(requires_grad)
        return self

    @property
    def grad(self):
        m = self._meta
        if m is not None and m.grad is not None:
            return m.grad
        if self._view is not None:
            refresh_view(self)
        if self._grad_fn is not None and (m is None or not m.retains_grad):
            warnings.warn(_NON_LEAF_GRAD_MSG, UserWarning, stacklevel=2)
        return None

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value._data.shape)}' to a "
                    f"tensor of size '{list(self._data.shape)}'. Please ensure that the gradient "
                    "and the tensor are the same size"
                )
            if value._data.dtype != self._data.dtype:
                raise RuntimeError("assigned grad has data of a different type")
        self._get_meta().grad = value

    @grad.deleter
    def grad(self) -> None:
        self.grad = None

    @property
    def data(self) -> "Tensor":
        # NOTE(pytorch): .data is a detached alias whose in-place changes autograd does not see
        return Tensor._make(self._data, None, 0, INFERENCE_VC if self._vc is INFERENCE_VC else None)

    @data.setter
    def data(self, value) -> None:
        self._data = value._data

    def detach(self) -> "Tensor":
        vc = self._vc
        if vc is None:
            vc = self._vc = [0]
        return Tensor._make(self._data, None, 0, vc)

    def detach_(self) -> "Tensor":
        if self._view is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
                "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of DDP "
                "buckets, and hence detach_() cannot be called on these gradients. To fix this error, please "
                "refer to the Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution."
            )
        self._grad_fn = None
        self._output_nr = 0
        self._rg = False
        return self

    @property
    def retains_grad(self) -> bool:
        m = self._meta
        return m is not None and m.retains_grad

    def retain_grad(self) -> None:
        if self._view is not None:
            refresh_view(self)
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is None:
            return  # leaves keep .grad anyway
        m = self._get_meta()
        if m.retains_grad:
            return
        m.retains_grad = True
        ref = weakref.ref(self)

        def retain(grad):
            t = ref()
            if t is None:
                return
            tm = t._get_meta()
            if tm.grad is None:
                # NOTE(pytorch): a clone (differentiable under create_graph), never the engine's tensor
                tm.grad = grad.clone() if _grad_state.grad_enabled else Tensor._make(grad._data.copy(), None, 0, None)
            else:
                tm.grad = tm.grad + grad

        self._grad_fn._get_extra().retains_grad_hooks[self._output_nr] = retain

    def register_hook(self, hook):
        """``hook(grad)`` runs when the gradient for this tensor is computed; may return a new one.

        NOTE(pytorch): the hook belongs to the tensor's current ``grad_fn``: after an in-place op
        it still sees the gradient of the old value; a hook registered later sees the new one."""
        if self._view is not None:
            refresh_view(self)
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            return self._grad_fn._register_tensor_pre_hook(self._output_nr, hook)
        m = self._get_meta()
        if m.hooks is None:  # shared with the AccumulateGrad node, whenever that is created
            m.hooks = _HookDict()
            acc = m.acc() if m.acc is not None else None
            if acc is not None:
                acc._get_extra().tensor_pre_hooks[0] = m.hooks
        h = RemovableHandle(m.hooks)
        m.hooks[h.id] = hook
        return h

    def register_post_accumulate_grad_hook(self, hook):
        """``hook(tensor)`` runs after the gradient has been accumulated into this leaf's ``.grad``."""
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        m = self._get_meta()
        if m.post_acc_hooks is None:
            m.post_acc_hooks = _HookDict()
        h = RemovableHandle(m.post_acc_hooks)
        m.post_acc_hooks[h.id] = hook
        return h

    @property
    def name(self):
        m = self._meta
        return None if m is None else m.name

    def is_inference(self) -> bool:
        """Whether this tensor was made in ``inference_mode`` (or is a view or alias of one)."""
        return self._vc is INFERENCE_VC

    # --- views ---
    @property
    def _base(self):
        """The tensor this one is a view of (the root base for views of views), else None."""
        info = self._view
        return None if info is None else info.base

    def _is_view(self) -> bool:
        return self._view is not None

    def equal(self, other) -> bool:
        """True when both tensors have the same shape and equal elements (NaN never equals)."""
        if not isinstance(other, Tensor):
            raise TypeError(
                f"equal(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}"
            )
        a, b = self._data, other._data
        return a.shape == b.shape and bool(np.array_equal(a, b))

    # --- legacy type names ---
    def type(self, dtype=None, non_blocking=False, **kwargs):
        """No argument: the legacy type name (``ndgrad.FloatTensor``); else a cast to ``dtype``."""
        if dtype is None:
            return "ndgrad." + D._FROM_NP[self._data.dtype].legacy
        if isinstance(dtype, str):
            d = _LEGACY.get(dtype)
            if d is None:
                raise ValueError(f"invalid type: '{dtype}'")
        elif isinstance(dtype, D.dtype):
            d = dtype
        elif isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), D.dtype):
            d = dtype.dtype  # a legacy type: ndgrad.LongTensor
        else:
            raise TypeError("dtype must be a type, str, or dtype object")
        return self.to(d)


_LEGACY = {p + d.legacy: d for d in D.ALL for p in ("ndgrad.", "torch.")}
_NON_LEAF_GRAD_MSG = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf "
    "Tensor by mistake, make sure you access the leaf Tensor instead. See "
    "github.com/pytorch/pytorch/pull/30531 for more information."
)


_new = object.__new__


def _rebuild(data, requires_grad):
    t = Tensor._make(data, None, 0, None)
    t._rg = requires_grad
    return t


class Size(tuple):
    """``torch.Size``: a tuple of ints with PyTorch's repr."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"ndgrad.Size([{', '.join(str(s) for s in self)}])"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r


def _wrap_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


def grad_accumulator(t):
    """The one AccumulateGrad node of a leaf that requires grad (held weakly by the tensor)."""
    m = t._meta
    if m is None:
        m = t._meta = AutogradMeta()
    acc = m.acc() if m.acc is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        if m.hooks is not None:
            acc._get_extra().tensor_pre_hooks[0] = m.hooks
        m.acc = weakref.ref(acc)
    return acc


def gradient_edge(t):
    """The edge gradients for ``t`` flow into: its grad_fn, its accumulator, or None."""
    fn = t._grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    if t._rg:
        return (grad_accumulator(t), 0)
    return None


def check_may_require_grad(t) -> None:
    if t._vc is INFERENCE_VC and not _grad_state.inference:
        raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")


def check_inplace(t) -> None:
    """Refuse an in-place write to an inference tensor outside inference mode, before it happens."""
    if t._vc is INFERENCE_VC and not _grad_state.inference:
        raise RuntimeError(INPLACE_MSG)


def refresh_view(t) -> None:
    """Regenerate a view's grad_fn after an in-place change to its base or a sibling view."""
    info = t._view
    vc = t._vc
    if vc is None or info.version == vc[0]:
        return
    info.version = vc[0]
    base = info.base
    if base._rg and info.creation != ViewInfo.NO_GRAD and info.creation != ViewInfo.INFERENCE_MODE:
        prev = _grad_state.grad_enabled
        _grad_state.grad_enabled = True
        try:
            fresh = info.replay(base)
        finally:
            _grad_state.grad_enabled = prev
        old_fn, old_nr = t._grad_fn, t._output_nr
        t._grad_fn = fresh._grad_fn
        t._output_nr = fresh._output_nr
        t._rg = fresh._rg
        if t._meta is not None:
            move_retains_grad(t, old_fn, old_nr)


def move_retains_grad(t, old_fn, old_nr) -> None:
    """NOTE(pytorch): when an in-place op (or a view's regeneration) gives ``t`` a new grad_fn,
    its retain_grad hook moves there, so ``.grad`` is the gradient of the new value."""
    m = t._meta
    if m is None or not m.retains_grad or old_fn is None or old_fn is t._grad_fn:
        return
    extra = old_fn._extra
    fn = None if extra is None else extra.retains_grad_hooks.pop(old_nr, None)
    if fn is not None and t._grad_fn is not None:
        t._grad_fn._get_extra().retains_grad_hooks[t._output_nr] = fn
