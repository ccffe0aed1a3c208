"""``Module``: parameters, buffers, submodules, state dicts, train/eval, dtype moves and hooks.

Attribute routing follows PyTorch: a ``Parameter`` assigned to an attribute lands in
``_parameters``, a ``Module`` in ``_modules``, a registered tensor in ``_buffers``; everything else
is an ordinary attribute. ``__call__`` goes straight to ``forward`` when no hook is registered
(the MLP step benchmark calls it once per layer per step).
"""

from __future__ import annotations

import itertools
import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from ... import _dtype as D
from ..._tensor import Tensor
from ...autograd.function import Function
from ...autograd.node import RemovableHandle, _HookDict
from ...autograd.grad_mode import no_grad, state as _gs
from ..parameter import Parameter, _buffer_persistent

__all__ = ["Module"]


def _typename(obj) -> str:
    """``torch.typename``: what PyTorch's assignment errors call a value's type."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def _addindent(s: str, n: int) -> str:
    first, *rest = s.split("\n")
    return first if not rest else "\n".join([first] + [" " * n + line for line in rest])


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


# --- global hooks (for every module) ---
_global_forward_pre_hooks: dict = _HookDict()
_global_forward_hooks: dict = _HookDict()
_global_forward_hooks_always_called: dict = {}
_global_backward_hooks: dict = _HookDict()
_global_backward_pre_hooks: dict = _HookDict()
_any_global = [False]


def _note_global() -> None:
    _any_global[0] = bool(_global_forward_pre_hooks or _global_forward_hooks
                          or _global_backward_hooks or _global_backward_pre_hooks)


def _add_global(d: dict, hook) -> RemovableHandle:
    h = RemovableHandle(d)
    d[h.id] = hook
    _any_global[0] = True
    return h


def register_module_forward_pre_hook(hook) -> RemovableHandle:
    return _add_global(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook, *, always_call: bool = False) -> RemovableHandle:
    h = _add_global(_global_forward_hooks, hook)
    if always_call:
        _global_forward_hooks_always_called[h.id] = True
    return h


def register_module_full_backward_hook(hook) -> RemovableHandle:
    return _add_global(_global_backward_hooks, hook)


def register_module_full_backward_pre_hook(hook) -> RemovableHandle:
    return _add_global(_global_backward_pre_hooks, hook)


# --- full backward hooks: identity Functions around inputs and outputs ---
class BackwardHookFunction(Function):
    """Identity whose node lets module backward hooks see and replace gradients."""

    @staticmethod
    def forward(ctx, *args):
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx, *args):
        return args


class _BackwardHook:
    """One forward call's state: wraps inputs and outputs, calls the user hooks in backward."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = 0
        self.input_index = self.output_index = None

    @staticmethod
    def _pack(index, values, n):
        res = [None] * n
        for i, v in zip(index, values, strict=True):
            res[i] = v
        return tuple(res)

    @staticmethod
    def _unpack(index, values):
        return tuple(values[i] for i in index)

    def _wrap(self, fn, args):
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not (any(args[i].requires_grad for i in idx) and _gs.grad_enabled):
            return args, None
        new = BackwardHookFunction.apply(*[args[i] for i in idx])
        if not isinstance(new, tuple):
            new = (new,)
        if len(new) == 0:
            raise RuntimeError("Cannot set Module backward hook for a Module with no input Tensors.")
        nodes = [t.grad_fn for t in new
                 if t.grad_fn is not None and t.grad_fn.name() == "BackwardHookFunctionBackward"]
        fn(nodes[0])
        out = list(args)
        for i, v in zip(idx, new, strict=True):
            out[i] = v
        return tuple(out), idx

    def setup_input_hook(self, args):
        def on_input(node):
            def hook(grad_inputs, _):
                if self.grad_outputs is None:  # double backward reaching the input directly
                    return None
                res = self._pack(self.input_index, grad_inputs, self.n_inputs)
                for user_hook in self.user_hooks:
                    out = user_hook(self.module, res, self.grad_outputs)
                    if out is None:
                        continue
                    if len(out) != len(res):
                        raise RuntimeError(
                            "Backward hook returned an invalid number of grad_input, "
                            f"got {len(out)}, but expected {len(res)}"
                        )
                    res = out
                self.grad_outputs = None
                return self._unpack(self.input_index, res)

            node.register_hook(hook)

        res, self.input_index = self._wrap(on_input, args)
        self.n_inputs = len(args)
        return res

    def setup_output_hook(self, result):
        def on_output(node):
            def hook(_, grad_outputs):
                self.grad_outputs = self._pack(self.output_index, grad_outputs, self.n_outputs)
                for pre in self.user_pre_hooks:
                    new = pre(self.module, self.grad_outputs)
                    if new is None:
                        continue
                    if len(new) != len(self.grad_outputs):
                        raise RuntimeError(
                            "Backward pre hook returned an invalid number of grad_output, "
                            f"got {len(new)}, but expected {len(self.grad_outputs)}"
                        )
                    self.grad_outputs = new
                local = self.grad_outputs
                if self.input_index is None:  # no input requires grad: hooks fire here
                    warnings.warn(
                        "Full backward hook is firing when gradients are computed with respect to "
                        "module outputs since no inputs require gradients. See "
                        "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                        "#torch.nn.Module.register_full_backward_hook for more details.",
                        stacklevel=5,
                    )
                    grad_inputs = (None,) * self.n_inputs
                    for user_hook in self.user_hooks:
                        r = user_hook(self.module, grad_inputs, self.grad_outputs)
                        if r is not None and not (isinstance(r, tuple) and all(x is None for x in r)):
                            raise RuntimeError(
                                "Backward hook for Modules where no input requires gradient should "
                                "always return None or None for all gradients."
                            )
                    self.grad_outputs = None
                return self._unpack(self.output_index, local)

            node.register_hook(hook)

        is_tuple = isinstance(result, tuple)
        args = result if is_tuple else (result,)
        res, self.output_index = self._wrap(on_output, args)
        self.n_outputs = len(args)
        return res if is_tuple else res[0]


def _forward_unimplemented(self, *input):
    raise NotImplementedError(
        f'Module [{type(self).__name__}] is missing the required "forward" function'
    )


class Module:
    """Base class for all neural network modules.

    >>> class Net(Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = Parameter(ndgrad.ones(2))
    >>> [n for n, _ in Net().named_parameters()]
    ['w']
    """

    dump_patches = False
    _version = 1
    training: bool
    call_super_init = False

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            if not self.call_super_init:
                raise TypeError(
                    f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                    f"'{next(iter(kwargs))}'" if kwargs else
                    f"{type(self).__name__}.__init__() takes 1 positional argument but "
                    f"{len(args) + 1} were given"
                )
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_backward_pre_hooks"] = _HookDict()
        d["_backward_hooks"] = _HookDict()
        d["_is_full_backward_hook"] = None
        d["_forward_hooks"] = _HookDict()
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_hooks_always_called"] = {}
        d["_forward_pre_hooks"] = _HookDict()
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["_state_dict_hooks"] = _HookDict()
        d["_state_dict_pre_hooks"] = _HookDict()
        d["_load_state_dict_pre_hooks"] = _HookDict()
        d["_load_state_dict_post_hooks"] = _HookDict()
        d["_modules"] = {}

    forward = _forward_unimplemented

    # --- registration ---
    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                "(torch Tensor or None required)"
            )
        if tensor is not None:
            marked = _buffer_persistent(tensor)
            if marked is not None:
                persistent = marked
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                "(torch.nn.Parameter or None required)"
            )
        if param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                f"created explicitly. To express '{name}' as a function of another Tensor, compute "
                "the value in the forward() method."
            )
        self._parameters[name] = param

    def add_module(self, name: str, module) -> None:
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    def register_module(self, name: str, module) -> None:
        self.add_module(name, module)

    def get_submodule(self, target: str) -> "Module":
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def _get_leaf(self, target: str):
        """``(module, name, value)`` of the attribute a dotted ``target`` names."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        return mod, name, getattr(mod, name)

    def get_parameter(self, target: str) -> Parameter:
        _, name, param = self._get_leaf(target)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        mod, name, buf = self._get_leaf(target)
        if name not in mod._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return buf

    # --- attribute routing ---
    def __getattr__(self, name: str):
        d = self.__dict__
        if "_parameters" in d and name in d["_parameters"]:
            return d["_parameters"][name]
        if "_buffers" in d and name in d["_buffers"]:
            return d["_buffers"][name]
        if "_modules" in d and name in d["_modules"]:
            return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d, self._buffers, self._modules)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' "
                    "(torch.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, d, self._parameters, self._buffers)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' "
                    "(torch.nn.Module or None expected)"
                )
            modules[name] = value
            return
        buffers = d.get("_buffers")
        marked = _buffer_persistent(value) if type(value) is Tensor else None
        if marked is not None or (buffers is not None and name in buffers):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(torch.nn.Buffer, torch.Tensor or None expected)"
                )
            if marked is None:
                persistent = name not in self._non_persistent_buffers_set
            else:
                persistent = marked
                self._remove_from(name, d, self._parameters, self._modules)
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            # register_buffer's "already exists" check must not see the old plain attribute
            d.pop(name, None)
            self.register_buffer(name, value, persistent)
            return
        object.__setattr__(self, name, value)

    def _remove_from(self, name, *dicts) -> None:
        for dct in dicts:
            if name in dct:
                if dct is self.__dict__.get("_buffers"):
                    self._non_persistent_buffers_set.discard(name)
                del dct[name]

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self))
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)

    # --- iteration ---
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        memo = set()
        for mod_prefix, mod in modules:
            for k, v in get_members(mod):
                if v is None or v in memo:
                    continue
                if remove_duplicate:
                    memo.add(v)
                yield (mod_prefix + "." + k if mod_prefix else k), v

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and m not in memo:
                memo.add(m)
                yield name, m

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + "." + name if prefix else name, remove_duplicate)

    # --- modes ---
    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            g = p.grad
            if g is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                g.zero_()

    def apply(self, fn) -> "Module":
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # --- dtype / device moves ---
    def _apply(self, fn, recurse: bool = True) -> "Module":
        if recurse:
            for m in self.children():
                m._apply(fn)
        for key, param in self._parameters.items():
            if param is None:
                continue
            with no_grad():
                new = fn(param)
            # NOTE(pytorch): parameters keep their identity (optimizers hold them); the new
            # values go in as the parameter's data, as torch does by default.
            if new.shape == param.shape:
                param.data = new
            else:
                self._parameters[key] = Parameter(new, param.requires_grad)
            g = param.grad
            if g is not None:
                with no_grad():
                    new_g = fn(g)
                g.data = new_g
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    def to(self, *args, **kwargs) -> "Module":
        device, dtype = None, kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)
        for a in args:
            if isinstance(a, D.dtype):
                dtype = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, bool):
                pass
            else:
                device = a
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(
                "nn.Module.to only accepts floating point or complex dtypes, but got desired "
                f"dtype={dtype}"
            )

        def convert(t):
            dt = dtype if dtype is not None and (t.is_floating_point() or t.is_complex()) else None
            if dt is None and device is None:
                return t
            if dt is None:
                return t.to(device)
            if device is None:
                return t.to(dt)
            return t.to(device, dt)

        return self._apply(convert)

    def float(self) -> "Module":
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self) -> "Module":
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self) -> "Module":
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self) -> "Module":
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    def type(self, dst_type) -> "Module":
        return self._apply(lambda t: t.type(dst_type))

    def cpu(self) -> "Module":
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None) -> "Module":
        return self._apply(lambda t: t.cuda(device))

    # --- state dict ---
    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        extra = getattr(type(self), "get_extra_state", None)
        if extra is not None and extra is not Module.get_extra_state:
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        if args:  # the old positional form (destination, prefix, keep_vars)
            warnings.warn(
                "Positional args are being deprecated, use kwargs instead. Refer to "
                "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.state_dict"
                " for details.", FutureWarning, stacklevel=2,
            )
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        meta = getattr(destination, "_metadata", None)
        if meta is not None:
            meta[prefix[:-1]] = {"version": self._version}
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            r = hook(self, destination, prefix, {})
            if r is not None:
                destination = r
        return destination

    def get_extra_state(self):
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called. Please "
            "file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
            "to report this bug."
        )

    def set_extra_state(self, state) -> None:
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called. Please "
            "file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
            "to report this bug."
        )

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items())
                 if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected torch.Tensor or '
                    f"Tensor-like object from checkpoint but received {type(value)}"
                )
                continue
            # NOTE(pytorch): a 1-element 1-d value loads into a 0-d parameter (old checkpoints)
            if param.ndim == 0 and value.ndim == 1:
                value = value[0]
            if value.shape != param.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {value.shape} from "
                    f"checkpoint, the shape in current model is {param.shape}."
                )
                continue
            try:
                with no_grad():
                    if assign:
                        if isinstance(param, Parameter):
                            if not isinstance(value, Parameter):
                                value = Parameter(value, requires_grad=param.requires_grad)
                            else:
                                value.requires_grad_(param.requires_grad)
                        setattr(self, name, value)
                    else:
                        param.copy_(value)
            except Exception as ex:
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model are '
                    f"{param.size()} and whose dimensions in the checkpoint are {value.size()}, an "
                    f"exception occurred : {ex.args}."
                )
        extra_key = prefix + "_extra_state"
        has_extra = getattr(type(self), "set_extra_state", None) is not Module.set_extra_state
        if has_extra:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix) and key != extra_key:
                    head = key[len(prefix):].split(".", 1)
                    if len(head) > 1:
                        if head[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif head[0] not in local:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state, prefix=""):
            meta = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                meta["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state, prefix, meta, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state = {k: v for k, v in local_state.items() if k.startswith(child_prefix)}
                    load(child, child_state, child_prefix)
            incompatible = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                hook(module, incompatible)

        load(self, state_dict)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    def register_state_dict_post_hook(self, hook) -> RemovableHandle:
        return self._add_hook(self._state_dict_hooks, hook)

    register_state_dict_hook = register_state_dict_post_hook

    def register_state_dict_pre_hook(self, hook) -> RemovableHandle:
        return self._add_hook(self._state_dict_pre_hooks, hook)

    def register_load_state_dict_pre_hook(self, hook) -> RemovableHandle:
        return self._add_hook(
            self._load_state_dict_pre_hooks,
            lambda sd, prefix, *rest: hook(self, sd, prefix, *rest),
        )

    def register_load_state_dict_post_hook(self, hook) -> RemovableHandle:
        return self._add_hook(self._load_state_dict_post_hooks, hook)

    # --- hooks ---
    @staticmethod
    def _add_hook(d, hook, *extra, prepend=False) -> RemovableHandle:
        h = RemovableHandle(d, *extra)
        d[h.id] = hook
        if prepend:
            d_items = list(d.items())
            d.clear()
            d[h.id] = hook
            d.update((k, v) for k, v in d_items if k != h.id)
        return h

    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        h = self._add_hook(self._forward_pre_hooks, hook, self._forward_pre_hooks_with_kwargs,
                           prepend=prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[h.id] = True
        return h

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        h = self._add_hook(self._forward_hooks, hook, self._forward_hooks_with_kwargs,
                           self._forward_hooks_always_called, prepend=prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs[h.id] = True
        if always_call:
            self._forward_hooks_always_called[h.id] = True
        return h

    def register_full_backward_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        return self._add_hook(self._backward_pre_hooks, hook, prepend=prepend)

    def register_full_backward_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        if self._is_full_backward_hook is False:
            raise RuntimeError(
                "Cannot use both regular backward hooks and full backward hooks on a single "
                "Module. Please use only one of them."
            )
        self._is_full_backward_hook = True
        return self._add_hook(self._backward_hooks, hook, prepend=prepend)

    # --- calling ---
    def _call_impl(self, *args, **kwargs):
        d = self.__dict__
        if not (d["_forward_hooks"] or d["_forward_pre_hooks"] or d["_backward_hooks"]
                or d["_backward_pre_hooks"] or _any_global[0]):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    __call__ = _call_impl

    def _call_with_hooks(self, args, kwargs):
        result = None
        called_always = set()
        fwd_hooks = {**_global_forward_hooks, **self._forward_hooks}
        try:
            bw_hooks = [*_global_backward_hooks.values(), *self._backward_hooks.values()]
            bw_pre = [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]
            for hid, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
                if hid in self._forward_pre_hooks_with_kwargs:
                    r = hook(self, args, kwargs)
                    if r is not None:
                        if isinstance(r, tuple) and len(r) == 2:
                            args, kwargs = r
                        else:
                            raise RuntimeError(
                                "forward pre-hook must return None or a tuple of (new_args, "
                                f"new_kwargs), but got {r}."
                            )
                else:
                    r = hook(self, args)
                    if r is not None:
                        args = r if isinstance(r, tuple) else (r,)
            bw = None
            if bw_hooks or bw_pre:
                bw = _BackwardHook(self, bw_hooks, bw_pre)
                args = bw.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            for hid, hook in fwd_hooks.items():
                if hid in self._forward_hooks_always_called or hid in _global_forward_hooks_always_called:
                    called_always.add(hid)
                if hid in self._forward_hooks_with_kwargs:
                    r = hook(self, args, kwargs, result)
                else:
                    r = hook(self, args, result)
                if r is not None:
                    result = r
            if bw is not None:
                if not isinstance(result, (Tensor, tuple)):
                    warnings.warn(
                        "For backward hooks to be called, module output should be a Tensor or a "
                        f"tuple of Tensors but received {type(result)}", stacklevel=2,
                    )
                result = bw.setup_output_hook(result)
            return result
        except Exception:
            for hid, hook in fwd_hooks.items():
                always = (hid in self._forward_hooks_always_called
                          or hid in _global_forward_hooks_always_called)
                if always and hid not in called_always:
                    try:
                        if hid in self._forward_hooks_with_kwargs:
                            r = hook(self, args, kwargs, result)
                        else:
                            r = hook(self, args, result)
                        if r is not None:
                            result = r
                    except Exception as e:
                        warnings.warn(
                            "forward hook with ``always_call=True`` raised an exception that was "
                            f"silenced as another error was raised in forward: {e}", stacklevel=2,
                        )
            raise

    # --- printing ---
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return self._get_name() + "(" + body + ")"

    def __getstate__(self):
        return self.__dict__.copy()

    def share_memory(self) -> "Module":
        return self

    def compile(self, *args, **kwargs) -> None:
        """Compile this module's ``forward`` in place with ``ndgrad.compile``'s arguments (its
        hooks run around the compiled forward)."""
        from ...compiler.dynamo import compile_module_in_place

        compile_module_in_place(self, *args, **kwargs)

