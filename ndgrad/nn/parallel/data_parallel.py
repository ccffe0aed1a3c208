"""``DataParallel``: ``torch.nn.DataParallel`` for a machine with one accelerator or none.

Without an accelerator it just runs the wrapped module, as PyTorch does; with one device it moves
the module there and the inputs with it (autograd records the copies). Splitting a batch over
several GPUs (replicate / parallel_apply / gather) is not here: that is what
``DistributedDataParallel`` is for.
"""

from __future__ import annotations

import types
from itertools import chain

from ..._backend import Device, device
from ..._tensor import Tensor
from ...profiler.recorder import record_function
from ..modules.module import Module

__all__ = ["DataParallel"]


def _accelerator() -> tuple[str | None, int]:
    """The device type to spread over and its device count: ``cuda`` where CuPy sees a GPU
    (PyTorch's ``_get_available_device_type``), else ``(None, 0)``."""
    from ... import cuda

    return ("cuda", cuda.device_count()) if cuda.is_available() else (None, 0)


def _device_index(d, device_type: str) -> int:
    """PyTorch's ``_get_device_index(d, optional=True)``: an int, or a device's index (the
    current device when it names none)."""
    if isinstance(d, str):
        d = device(d)
    if isinstance(d, Device):
        if d.type == "cpu":
            raise ValueError(f"Expected a non cpu device, but got: {d}")
        if d.index is not None:
            return d.index
        d = None
    if isinstance(d, int):
        return d
    if device_type == "cuda":
        from ... import cuda

        return cuda.current_device()
    return 0


def _to(obj, dev: Device):
    """``obj`` with its tensors on ``dev`` and its tuples, lists and dicts shallow-copied: what
    ``scatter_kwargs`` gives the single device."""
    if isinstance(obj, Tensor):
        return obj.to(dev)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(_to(o, dev) for o in obj))
    if isinstance(obj, tuple):
        return tuple(_to(o, dev) for o in obj)
    if isinstance(obj, list):
        return [_to(o, dev) for o in obj]
    if isinstance(obj, dict):
        return type(obj)((k, _to(v, dev)) for k, v in obj.items())
    return obj


class DataParallel(Module):
    r"""Implements data parallelism at the module level.

    PyTorch splits the input over ``device_ids`` and runs a replica of ``module`` on each; with
    no GPU it simply runs ``module``, and so does this. The wrapped module is the child
    ``module``, so state dict keys gain a ``module.`` prefix.

    Example::

        >>> import ndgrad
        >>> net = ndgrad.nn.DataParallel(ndgrad.nn.Linear(3, 2))
        >>> net(ndgrad.ones(4, 3)).shape, list(net.state_dict())
        (ndgrad.Size([4, 2]), ['module.weight', 'module.bias'])
    """

    __class_getitem__ = classmethod(types.GenericAlias)  # ``DataParallel[Net]``, as torch's

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0) -> None:
        super().__init__()
        device_type, count = _accelerator()
        # NOTE(pytorch): without an accelerator torch keeps only module and device_ids = [];
        # dim and output_device are kept here too, as given, so that reading them works
        self.dim = dim
        self.module = module
        if device_type is None:
            self.device_ids = []
            self.output_device = output_device
            return
        if device_ids is None:
            device_ids = list(range(count))
        if output_device is None:
            output_device = device_ids[0]
        self.device_ids = [_device_index(d, device_type) for d in device_ids]
        self.output_device = _device_index(output_device, device_type)
        self.src_device_obj = device(device_type, self.device_ids[0])
        if len(self.device_ids) == 1:
            self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        with record_function("DataParallel.forward"):
            if not self.device_ids:
                return self.module(*inputs, **kwargs)
            src = self.src_device_obj
            for t in chain(self.module.parameters(), self.module.buffers()):
                if t.device != src:
                    raise RuntimeError(
                        "module must have its parameters and buffers "
                        f"on device {src} (device_ids[0]) but found one of "
                        f"them on device: {t.device}")
            if len(self.device_ids) > 1:
                raise NotImplementedError(
                    f"DataParallel over several devices ({self.device_ids}) is not supported by "
                    "ndgrad; use DistributedDataParallel with one process per device")
            return self.module(*_to(inputs, src), **_to(kwargs, src))
