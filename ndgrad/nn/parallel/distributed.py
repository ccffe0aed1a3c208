"""``nn.parallel.DistributedDataParallel``: one model replica per rank, gradients averaged across
ranks while backward runs (the bucketing is ``ndgrad.distributed._reducer``).

Construction checks that every rank holds the same parameter shapes and broadcasts rank 0's
parameters and buffers; each forward may broadcast rank 0's buffers again
(``broadcast_buffers``) and rebuilds the buckets after the first iteration.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from ... import _backend
from ... import distributed as dist
from ..._tensor import Tensor
from ...autograd.grad_mode import is_grad_enabled
from ...distributed import _reducer
from ..modules.module import Module

__all__ = ["DistributedDataParallel"]


def _sync_tensors(tensors, pg, src: int) -> None:
    """Broadcast ``tensors`` from group rank ``src``, one flat buffer per dtype (few large
    messages beat many small ones)."""
    by_dtype: dict = {}
    for t in tensors:
        by_dtype.setdefault((t._data.dtype, str(t.device)), []).append(t)
    for group in by_dtype.values():
        arrays = [t._data for t in group]
        xp = _backend.namespace_of(arrays[0])
        flat = xp.concatenate([a.reshape(-1) for a in arrays])
        dist.broadcast(Tensor._make(flat, None, 0, None), group=pg,
                       src=dist.get_global_rank(pg, src))
        off = 0
        for t, a in zip(group, arrays):
            a[...] = flat[off:off + a.size].reshape(a.shape)
            t._bump()
            off += a.size


def _to_device(obj, device):
    if isinstance(obj, Tensor):
        return obj.to(device)
    if isinstance(obj, tuple):
        return type(obj)(*[_to_device(o, device) for o in obj]) if hasattr(obj, "_fields") \
            else tuple(_to_device(o, device) for o in obj)
    if isinstance(obj, list):
        return [_to_device(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    return obj


class DistributedDataParallel(Module):
    """Data parallelism at the module level (PyTorch 2.13's signature)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=None, init_sync=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None, skip_all_reduce_unused_params=False,
                 bucket_cap_mb_list=None, batched_grad_copy=False, forward_sync_buffers=None):
        super().__init__()
        if process_group is not None and device_mesh is not None:
            raise RuntimeError("Cannot specify both process_group and device_mesh arguments.")
        self.module = module
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        if self.process_group is None:
            raise ValueError("Default process group has not been initialized, please make sure "
                             "to call init_process_group.")
        self.device_ids = list(device_ids) if device_ids else None
        self.output_device = output_device
        self.dim = dim
        if broadcast_buffers is None:
            broadcast_buffers = True if forward_sync_buffers is None else forward_sync_buffers
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = False
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.parameters_to_ignore = set(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        named = [(n, p) for n, p in module.named_parameters()
                 if p.requires_grad and n not in self.parameters_to_ignore]
        self._module_parameters = [p for _, p in named]
        self._parameter_names = [n for n, _ in named]
        if not self._module_parameters:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self.modules_buffers = [b for n, b in module.named_buffers()
                                if n not in self.parameters_to_ignore]
        self.bucket_bytes_cap_default = bucket_cap_mb is None
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        self._verify_param_shape_across_processes()
        if init_sync:
            _sync_tensors(self._module_parameters + self.modules_buffers, self.process_group, 0)
        self._comm_hook_set = False
        self._build_reducer(static_graph)
        if static_graph:
            self._set_static_graph()

    def _build_reducer(self, static_graph: bool) -> None:
        params = self._module_parameters
        if static_graph or not self.find_unused_parameters:
            limits = [sys.maxsize]  # one bucket until the first iteration shows the order
        elif self.bucket_bytes_cap_default:
            limits = [_reducer.DEFAULT_FIRST_BUCKET_BYTES, self.bucket_bytes_cap]
        else:
            limits = [self.bucket_bytes_cap]
        indices, sizes = _reducer.compute_bucket_assignment_by_size(params, limits)
        first = _reducer.DEFAULT_FIRST_BUCKET_BYTES if self.bucket_bytes_cap_default \
            else self.bucket_bytes_cap
        self.reducer = _reducer.Reducer(
            params, list(reversed(indices)), list(reversed(sizes)), self.process_group,
            self.bucket_bytes_cap, self.find_unused_parameters, self.gradient_as_bucket_view,
            first, param_names=self._parameter_names)

    def _verify_param_shape_across_processes(self) -> None:
        pg = self.process_group
        mine = [(tuple(p.shape), str(p.dtype)) for p in self._module_parameters]
        everyone = [None] * dist.get_world_size(pg)
        dist.all_gather_object(everyone, mine, group=pg)
        rank = dist.get_rank(pg)
        for r, theirs in enumerate(everyone):
            if len(theirs) != len(mine):
                raise RuntimeError(
                    f"DDP expects same model across all ranks, but Rank {rank} has {len(mine)} "
                    f"params, while rank {r} has inconsistent {len(theirs)} params.")
        for r, theirs in enumerate(everyone):
            for i, (a, b) in enumerate(zip(mine, theirs)):
                if a != b:
                    raise RuntimeError(
                        f"[{rank}]: params[{i}] in this process with sizes {list(a[0])} appears "
                        f"not to match sizes of the same param in process {r}.")

    def _set_static_graph(self) -> None:
        if self.static_graph:
            return
        if self.reducer.iteration:
            raise RuntimeError("_set_static_graph() must be called before the first iteration")
        self.static_graph = True
        self.reducer.static_graph = True  # it learns the unused parameters in iteration 1

    # -------------------------------------------------------------- forward

    def forward(self, *inputs, **kwargs):
        reducer = self.reducer
        sync = is_grad_enabled() and self.require_backward_grad_sync
        if sync:
            reducer.ensure_prior_reduction_finished()
            reducer.rebuild_buckets()
        if self.broadcast_buffers and self.require_forward_param_sync and self.modules_buffers \
                and reducer.world > 1:
            _sync_tensors(self.modules_buffers, self.process_group, 0)
        if self.device_ids and str(self.device_ids[0]) != "cpu":
            dev = _backend.as_device(self.device_ids[0] if not isinstance(self.device_ids[0], int)
                                     else f"cuda:{self.device_ids[0]}")
            inputs, kwargs = _to_device(inputs, dev), _to_device(kwargs, dev)
        output = self.module(*inputs, **kwargs)
        if sync:
            self.require_forward_param_sync = True
            reducer.prepare_for_backward(output)
        else:
            self.require_forward_param_sync = False
        return output

    @contextmanager
    def no_sync(self):
        """Gradients accumulate locally in this context; the first backward after it averages
        the sum."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # -------------------------------------------------------------- hooks and stats

    def register_comm_hook(self, state, hook) -> None:
        """``hook(state, bucket) -> Future`` replaces each bucket's all-reduce (gradients are not
        pre-divided by the world size)."""
        if self._comm_hook_set:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be "
                               "called once.")
        if not callable(hook):
            raise TypeError("Communication hook must be callable.")
        self._comm_hook_set = True
        self.reducer.comm_hook = (state, hook)

    def _get_ddp_logging_data(self) -> dict:
        r = self.reducer
        s = r.stats
        n = max(s["iterations"], 1)
        data = {
            "world_size": r.world, "rank": r.rank, "backend_name": dist.get_backend(r.pg),
            "module_name": type(self.module).__name__, "iteration": r.iteration,
            "bucket_cap_bytes": self.bucket_bytes_cap,
            "bucket_sizes": ", ".join(str(b.flat.nbytes) for b in r.buckets),
            "find_unused_parameters": int(self.find_unused_parameters),
            "gradient_as_bucket_view": int(self.gradient_as_bucket_view),
            "static_graph": int(self.static_graph),
            "broadcast_buffers": int(self.broadcast_buffers),
            "has_rebuilt_buckets": int(r.has_rebuilt),
            "num_parameter_tensors": len(r.params),
            "total_parameter_size_bytes": sum(p._data.nbytes for p in r.params),
            "dtypes": ", ".join(sorted({str(p.dtype).replace("ndgrad.", "") for p in r.params})),
            "avg_backward_compute_time": s["compute"] // n,
            "avg_backward_comm_time": s["comm"] // n,
            "avg_backward_compute_comm_overlap_time": s["overlap"] // n,
        }
        last = r.last
        if last is not None:
            data.update({
                "backward_compute_time_start": last[0], "backward_compute_time_end": last[1],
                "backward_comm_time_start": last[2], "backward_comm_time_end": last[3],
                "backward_compute_time": last[1] - last[0],
                "backward_comm_time": last[3] - last[2] if last[2] else 0,
                "backward_compute_comm_overlap_time": max(0, last[1] - last[2]) if last[2]
                else 0,
            })
        return data
