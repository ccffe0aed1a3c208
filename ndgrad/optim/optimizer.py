"""Optimizer base: param groups, per-parameter state, state_dict in torch's format, step hooks.

Subclasses update parameters on their NumPy arrays in place (no graph is recorded) and bump each
parameter's version counter once per step, so autograd's saved-tensor checks see the change.
"""

from __future__ import annotations

import functools
import warnings
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain

import numpy as np

from .._tensor import Tensor
from ..autograd.grad_mode import enable_grad
from ..profiler.recorder import _current as _profiling
from ..profiler.recorder import record_function

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks a default every param group must supply (torch's ``required`` singleton)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj) -> str:
    if isinstance(obj, Tensor):
        return obj.type()
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module in ("", "builtins") else f"{module}.{cls.__qualname__}"


def _to_scalar(x):
    """A Tensor hyper-parameter (lr given as a 1-element tensor) as a Python number."""
    return x.item() if isinstance(x, Tensor) else x


def _check_lr_eps(lr, eps=None) -> None:
    """The learning-rate (and epsilon) checks the optimizers share, in PyTorch's words."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if eps is not None and not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")


def _check_adam_args(lr, eps, betas, weight_decay) -> None:
    """The checks the Adam family makes of its hyper-parameters, in PyTorch's words."""
    _check_lr_eps(lr, eps)
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _with_grads(group: dict):
    """``(parameter, gradient)`` for each parameter of ``group`` that has a gradient."""
    for p in group["params"]:
        m = p._meta
        grad = None if m is None else m.grad
        if grad is not None:
            yield p, grad


def _new_state(arr: np.ndarray) -> Tensor:
    """A plain leaf tensor over ``arr`` (optimizer state never requires grad)."""
    return Tensor._make(arr, None, 0, None)


# --- the update in Tensor ops, under a dispatch mode (a capture sees every computation) ---
def _grad_ops(p: Tensor, grad: Tensor, maximize: bool, weight_decay) -> Tensor:
    """``Optimizer._update_grad`` in ops, bit for bit."""
    if weight_decay != 0:
        t = p.mul(weight_decay)
        return t.sub(grad) if maximize else t.add(grad)
    return grad.neg() if maximize else grad


def _lerp_ops_(a: Tensor, end: Tensor, w: float) -> None:
    """``_lerp_`` (torch's two-sided lerp) in ops, bit for bit."""
    if w < 0.5:
        a.add_(end.sub(a).mul(w))
    else:
        a.copy_(end.sub(end.sub(a).mul(1 - w)))


def _zero_step() -> Tensor:
    # NOTE(pytorch): the step count is a float32 0-d CPU tensor in state, not a Python int
    return _new_state(np.zeros((), np.float32))


def _real(a: np.ndarray) -> np.ndarray:
    """Complex arrays as real pairs: squares/roots act per component (torch's view_as_real)."""
    return a.view(a.real.dtype) if a.dtype.kind == "c" else a


def _wrap_step(step):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if self._in_step:  # a subclass's step calling super().step(): hooks run once
            return step(self, *args, **kwargs)
        for hook in chain(_global_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
            res = hook(self, args, kwargs)
            if res is not None:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise RuntimeError(
                        f"{hook} must return None or a tuple of (new_args, new_kwargs), but got {res}."
                    )
                args, kwargs = res
        self._opt_called = True  # read by LRScheduler's "step order" warning
        self._in_step = True
        try:
            if _profiling[0] is None:
                out = step(self, *args, **kwargs)
            else:  # as PyTorch names the range in profiles
                with record_function(f"Optimizer.step#{type(self).__name__}.step"):
                    out = step(self, *args, **kwargs)
        finally:
            self._in_step = False
        for hook in chain(self._optimizer_step_post_hooks.values(), _global_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    wrapper._ndgrad_wrapped = True
    return wrapper


_global_pre_hooks: OrderedDict = OrderedDict()
_global_post_hooks: OrderedDict = OrderedDict()


class _RemovableHandle:
    _next_id = 0

    def __init__(self, hooks: dict):
        self.hooks = hooks
        self.id = _RemovableHandle._next_id
        _RemovableHandle._next_id += 1

    def remove(self) -> None:
        self.hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _add_hook(hooks: dict, fn) -> _RemovableHandle:
    handle = _RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


def register_optimizer_step_pre_hook(hook) -> _RemovableHandle:
    return _add_hook(_global_pre_hooks, hook)


def register_optimizer_step_post_hook(hook) -> _RemovableHandle:
    return _add_hook(_global_post_hooks, hook)


class Optimizer:
    """Base class for all optimizers.

    Args:
        params: an iterable of Tensors or of dicts (param groups with per-group options).
        defaults (dict): default values of the optimization options.

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = ndgrad.optim.SGD([w], lr=0.5)
    >>> w.grad = ndgrad.tensor([1.0, 1.0]); opt.step(); w
    tensor([0.5000, 1.5000], requires_grad=True)
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_ndgrad_wrapped", False):
            cls.step = _wrap_step(step)

    def __init__(self, params, defaults: dict) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._in_step = False
        self._scratch: dict = {}
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                "dicts, but got " + _typename(params)
            )
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)
        if defaults.get("differentiable"):
            # updates run on raw arrays; a differentiable update would need graph-recording ops
            raise RuntimeError("ndgrad optimizers do not support differentiable=True")

    # --- pickling / repr ---
    def __getstate__(self) -> dict:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                     "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                     "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())
        self.__dict__.setdefault("_in_step", False)
        self.__dict__.setdefault("_scratch", {})

    def __repr__(self) -> str:
        out = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            out += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    out += f"    {key}: {group[key]}\n"
        return out + ")"

    # --- param groups ---
    def add_param_group(self, param_group: dict) -> None:
        """Add a param group to the Optimizer's ``param_groups``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            param_group["params"] = list(params)

        tensors, names = [], []
        for p in param_group["params"]:
            if isinstance(p, tuple):  # (name, tensor) pairs from named_parameters()
                names.append(p[0])
                tensors.append(p[1])
            else:
                tensors.append(p)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError(
                    "all optimizer params should be with/without names. Some param names are missing"
                )
            param_group["param_names"] = names

        for p in tensors:
            if not isinstance(p, Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is " + _typename(p)
                )
            if not self.defaults.get("differentiable", None) and not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    f"parameter group didn't specify a value of required optimization parameter {name}"
                )
            param_group.setdefault(name, default)

        if len(tensors) != len(set(tensors)):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, this "
                "will cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                stacklevel=3,
            )
        seen: set = set()
        for group in self.param_groups:
            seen.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                txt = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {txt} to the optimizer"
                )
        if not seen.isdisjoint(tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # --- gradients ---
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors (to ``None`` by default)."""
        for group in self.param_groups:
            for p in group["params"]:
                m = p._meta
                g = None if m is None else m.grad
                if g is None:
                    continue
                if set_to_none:
                    m.grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()  # an op, as Module.zero_grad's: a dispatch mode sees it

    def step(self, closure=None):
        raise NotImplementedError

    def _closure(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def _update_grad(self, pa: np.ndarray, g: np.ndarray, maximize: bool, weight_decay) -> np.ndarray:
        """The gradient an update uses: negated for ``maximize``, plus ``weight_decay * param``
        (L2), in scratch slot 0 when it differs from ``g`` (the user's .grad is never written)."""
        if weight_decay == 0 and not maximize:
            return g
        t = self._buf(pa, 0)
        if weight_decay != 0:
            np.multiply(pa, weight_decay, out=t)
            (np.subtract if maximize else np.add)(t, g, out=t)  # wd * p -+ g, as torch's (+-g) + wd * p
        else:
            np.negative(g, out=t)
        return t

    def _buf(self, like: np.ndarray, slot: int = 0) -> np.ndarray:
        """A scratch array shaped like ``like``, reused across steps (no temporaries per update)."""
        key = (like.shape, like.dtype, slot, type(like))  # the array type keeps devices apart
        buf = self._scratch.get(key)
        if buf is None:
            buf = self._scratch[key] = np.empty_like(like)
        return buf

    # --- hooks ---
    def register_step_pre_hook(self, hook) -> _RemovableHandle:
        return _add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook) -> _RemovableHandle:
        return _add_hook(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        h = _add_hook(self._optimizer_state_dict_pre_hooks, hook)
        if prepend:
            self._optimizer_state_dict_pre_hooks.move_to_end(h.id, last=False)
        return h

    def register_state_dict_post_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        h = _add_hook(self._optimizer_state_dict_post_hooks, hook)
        if prepend:
            self._optimizer_state_dict_post_hooks.move_to_end(h.id, last=False)
        return h

    def register_load_state_dict_pre_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        h = _add_hook(self._optimizer_load_state_dict_pre_hooks, hook)
        if prepend:
            self._optimizer_load_state_dict_pre_hooks.move_to_end(h.id, last=False)
        return h

    def register_load_state_dict_post_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        h = _add_hook(self._optimizer_load_state_dict_post_hooks, hook)
        if prepend:
            self._optimizer_load_state_dict_post_hooks.move_to_end(h.id, last=False)
        return h

    # --- state dict ---
    def state_dict(self) -> dict:
        """The optimizer state as ``{"state": {index: {...}}, "param_groups": [...]}`` (torch's format).

        Parameters appear as indices in the order of ``param_groups``; state tensors are returned
        by reference, as torch does.
        """
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        index: dict[int, int] = {}
        start = 0
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {
            (index[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()
        }
        sd = {"state": state, "param_groups": groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            res = hook(self, sd)
            if res is not None:
                sd = res
        return sd

    @staticmethod
    def _cast_state(param: Tensor, value, key=None):
        if isinstance(value, Tensor):
            # NOTE(pytorch): floating state follows the param's dtype, except ``step`` (issue 74424)
            if key != "step" and param.is_floating_point() and value.is_floating_point():
                return value.to(dtype=param.dtype)
            return value
        if isinstance(value, dict):
            return {k: Optimizer._cast_state(param, v, k) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(Optimizer._cast_state(param, v) for v in value)
        return value

    def load_state_dict(self, state_dict: dict) -> None:
        """Load the optimizer state (as returned by :meth:`state_dict`)."""
        state_dict = state_dict.copy()
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            res = hook(self, state_dict)
            if res is not None:
                state_dict = res
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of "
                "optimizer's group"
            )
        id_map = dict(
            zip(
                chain.from_iterable(g["params"] for g in saved_groups),
                chain.from_iterable(g["params"] for g in groups),
                strict=True,
            )
        )
        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = self._cast_state(param, v)
            else:
                state[k] = v
        new_groups = []
        for g, ng in zip(groups, saved_groups, strict=True):
            ng["params"] = g["params"]
            if "param_names" in g and "param_names" not in ng:
                ng["param_names"] = g["param_names"]
            new_groups.append(ng)
        self.__setstate__({"state": state, "param_groups": new_groups})
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)

    # --- helpers for subclasses ---
    @staticmethod
    def _grad_array(p: Tensor):
        m = p._meta
        g = None if m is None else m.grad
        return None if g is None else g._data


class _WithFlags(Optimizer):
    """An optimizer whose groups gained flags over PyTorch's versions: a group of an older state
    dict gets each one's default (``_FLAGS``) when unpickled."""

    _FLAGS = (("maximize", False), ("foreach", None), ("capturable", False), ("differentiable", False))

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, val in self._FLAGS:
                group.setdefault(key, val)


class _AdamVariant(_WithFlags):
    """What NAdam and RAdam share: their flags, and the step's first part (weight decay, then
    the moments), in Tensor ops under ``no_grad``."""

    _FLAGS = _WithFlags._FLAGS + (("decoupled_weight_decay", False),)

    @staticmethod
    def _moments(p, grad, state, lr, beta1, beta2, weight_decay, maximize, decoupled) -> tuple:
        """Weight decay (into the gradient, or decoupled onto the parameter), then PyTorch's
        ``exp_avg.lerp_(g, 1 - beta1)`` and ``exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2)``;
        returns the parameter, gradient and moments, complex ones as real pairs."""
        g = _grad_ops(p, grad, maximize, 0 if decoupled else weight_decay)
        if decoupled and weight_decay != 0:
            p.mul_(1 - lr * weight_decay)
        pr, g = _as_real(p), _as_real(g)
        exp_avg, exp_avg_sq = _as_real(state["exp_avg"]), _as_real(state["exp_avg_sq"])
        _lerp_ops_(exp_avg, g, 1 - beta1)
        exp_avg_sq.mul_(beta2)
        exp_avg_sq.addcmul_(g, g, value=1 - beta2)
        return pr, g, exp_avg, exp_avg_sq


def _as_real(t: Tensor) -> Tensor:
    """A complex tensor as real pairs (squares and roots act per component, as PyTorch's)."""
    if t._data.dtype.kind != "c":
        return t
    from .. import view_as_real

    return view_as_real(t)
