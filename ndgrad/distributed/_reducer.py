"""DDP's reducer: gradients packed into flat buckets and all-reduced while backward still runs.

Each parameter's post-accumulate-grad hook marks it ready: its gradient is copied into its view of
a bucket (divided by the world size unless a comm hook takes over). A bucket whose parameters are
all ready is launched, in bucket order only, so every rank issues the same collectives in the
same order; launching the last one queues an engine callback that waits for every bucket and
writes the averages back into ``.grad`` (PyTorch's ``c10d/reducer.cpp``; DISTRIBUTED.md §3).

Buckets hold parameters in reverse order at first (the order backward usually produces their
gradients). Without ``find_unused_parameters`` (or with ``static_graph``) the first iteration
runs with one bucket and records the order in which gradients became ready; the next forward
rebuilds the buckets in that order, with rank 0's assignment broadcast so all ranks agree.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from .. import _backend
from .._tensor import Tensor
from ..autograd import engine
from . import distributed_c10d as c10d

DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024

_READY_TWICE = (
    "Expected to mark a variable ready only once. This error is caused by one of the following "
    "reasons: 1) Use of a module parameter outside the `forward` function. Please make sure "
    "model parameters are not shared across multiple concurrent forward-backward passes. or try "
    "to use _set_static_graph() as a workaround if this module graph does not change during "
    "training loop.2) Reused parameters in multiple reentrant backward passes. For example, if "
    "you use multiple `checkpoint` functions to wrap the same part of your model, it would "
    "result in the same set of parameters been used by different reentrant backward passes "
    "multiple times, and hence marking a variable ready multiple times. DDP does not support "
    "such use cases in default. You can try to use _set_static_graph() as a workaround if your "
    "module graph does not change over iterations.\nParameter at index {index} with name {name} "
    "has been marked as ready twice. This means that multiple autograd engine  hooks have fired for this "
    "particular parameter during this iteration.")

_UNFINISHED = (
    "Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing "
    "loss. You can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by \n"
    "making sure all `forward` function outputs participate in calculating loss. \n"
    "If you already have done the above, then the distributed data parallel module wasn't able "
    "to locate the output tensors in the return value of your module's `forward` function. "
    "Please include the loss function and the structure of the return value of `forward` of "
    "your module when reporting this issue (e.g. list, dict, iterable).\n"
    "Parameter indices which did not receive grad for rank {rank}: {indices}\n"
    " In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO "
    "or DETAIL to print out information about which particular parameters did not receive "
    "gradient on this rank as part of this error")


def compute_bucket_assignment_by_size(tensors, bucket_size_limits, expect_sparse_gradient=None,
                                      tensor_indices=None):
    """Group ``tensors`` into buckets of at least the current size limit, per (dtype, device).

    The limits are used in turn (the last one repeats). ``tensors`` are visited in the order
    given; ``tensor_indices`` names them (the rebuild passes parameters in ready order with
    their indices). Without indices, buckets are sorted by their smallest index. Returns
    ``(bucket_indices, per_bucket_size_limits)``, as ``dist._compute_bucket_assignment_by_size``.
    """
    open_ = {}  # (dtype, device) -> [indices, bytes, limit, limit position]; insertion-ordered
    result = []
    for i, t in enumerate(tensors):
        index = tensor_indices[i] if tensor_indices else i
        if expect_sparse_gradient and expect_sparse_gradient[index]:
            result.append(([index], bucket_size_limits[0]))
            continue
        key = (t.dtype, str(t.device))
        acc = open_.get(key)
        if acc is None:
            acc = open_[key] = [[], 0, bucket_size_limits[0], 0]
        acc[0].append(index)
        acc[1] += t.numel() * t.element_size()
        acc[2] = bucket_size_limits[acc[3]]
        if acc[1] >= acc[2]:
            result.append((acc[0], acc[2]))
            acc[0], acc[1] = [], 0
            acc[3] = min(acc[3] + 1, len(bucket_size_limits) - 1)
    for indices, _, limit, _ in open_.values():
        if indices:
            result.append((indices, limit))
    if not tensor_indices:
        result.sort(key=lambda b: min(b[0]))
    return [b[0] for b in result], [b[1] for b in result]


class GradBucket:
    """What a comm hook sees of one bucket (``dist.GradBucket``)."""

    __slots__ = ("_buffer", "_grads", "_index", "_last", "_params")

    def __init__(self, index, buffer, gradients, parameters, is_last):
        self._index = index
        self._buffer = buffer
        self._grads = gradients
        self._params = parameters
        self._last = is_last

    def index(self) -> int:
        return self._index

    def buffer(self) -> Tensor:
        return self._buffer

    def gradients(self) -> list:
        return list(self._grads)

    def parameters(self) -> list:
        return list(self._params)

    def is_last(self) -> bool:
        return self._last

    def set_buffer(self, buffer: Tensor) -> None:
        self._buffer.copy_(buffer)


class _Bucket:
    """One flat buffer and a view of it per parameter (the parameter's shape)."""

    __slots__ = (
        "buffer",
        "flat",
        "future",
        "index",
        "limit",
        "members",
        "pending",
        "view_arrays",
        "views",
        "work",
    )

    def __init__(self, index: int, members: list, params: list, limit: int):
        self.index = index
        self.members = members
        self.limit = limit
        first = params[members[0]]._data
        xp = _backend.namespace_of(first)
        total = sum(params[i]._data.size for i in members)
        self.flat = xp.zeros(total, first.dtype)
        self.buffer = Tensor._make(self.flat, None, 0, None)
        self.views, self.view_arrays = [], []
        off = 0
        for i in members:
            a = params[i]._data
            v = self.flat[off:off + a.size].reshape(a.shape)
            self.view_arrays.append(v)
            self.views.append(Tensor._make(v, None, 0, None))
            off += a.size
        self.pending = len(members)
        self.work = None
        self.future = None


def _reached_leaves(outputs) -> set:
    """ids of the leaf tensors the autograd graph of ``outputs`` reaches (one walk)."""
    roots, seen, found = [], set(), set()
    _collect(outputs, roots)
    stack = [t.grad_fn for t in roots if t.grad_fn is not None]
    for t in roots:
        if t.grad_fn is None and t.requires_grad:
            found.add(id(t))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None:
            found.add(id(var))
        for edge in node.next_edges:
            if edge is not None and edge[0] is not None:
                stack.append(edge[0])
    return found


def _collect(obj, out: list) -> None:
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _collect(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _collect(o, out)
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            _collect(getattr(obj, name), out)


class Reducer:
    """The bucketing all-reduce behind ``DistributedDataParallel`` (``dist.Reducer``)."""

    def __init__(self, params, bucket_indices, per_bucket_size_limits, process_group,
                 bucket_bytes_cap: int, find_unused_parameters: bool,
                 gradient_as_bucket_view: bool, first_bucket_bytes: int,
                 static_graph: bool = False, param_names=None):
        self.params = params
        self.names = param_names
        self.pg = process_group
        self.world = c10d.get_world_size(process_group)
        self.rank = c10d.get_rank(process_group)
        self.bucket_bytes_cap = bucket_bytes_cap
        self.first_bucket_bytes = first_bucket_bytes
        self.find_unused = find_unused_parameters
        self.as_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.comm_hook = None
        self.iteration = 0  # synced backward passes begun
        self.expect_hooks = False
        self.require_finalize = False
        self.has_rebuilt = False
        self.rebuilt_order: list = []
        self.hook_counts = None  # static graph: hooks each parameter fires per iteration
        self.unused: list = []
        self.marked_unused = False
        self.local_used = np.zeros(len(params), np.int32)
        self.track_used = False  # this iteration learns which parameters no rank used
        self.used_work = None
        self.static_unused = set()  # static graph: parameters no rank used in iteration 1
        self.remaining = self.first_counts = None
        self.stats = {"iterations": 0, "compute": 0, "comm": 0, "overlap": 0}
        self.t_forward = self.t_bwd_start = self.t_comm_start = 0
        self.last = None  # (compute start, compute end, comm start, comm end) of the last pass
        self._init_buckets(bucket_indices, per_bucket_size_limits)
        self._handles = [p.register_post_accumulate_grad_hook(partial(self._autograd_hook, i))
                         for i, p in enumerate(params)]

    # -------------------------------------------------------------- buckets

    def _init_buckets(self, bucket_indices, limits) -> None:
        self.buckets = [_Bucket(b, members, self.params, limits[b])
                        for b, members in enumerate(bucket_indices)]
        self.locate = [None] * len(self.params)  # param index -> (bucket, position)
        for bucket in self.buckets:
            for pos, i in enumerate(bucket.members):
                self.locate[i] = (bucket, pos)
        if self.as_view:
            # Gradients that exist move into their bucket views, which become the .grad.
            for bucket in self.buckets:
                for i, view in zip(bucket.members, bucket.views):
                    g = self.params[i].grad
                    if g is not None:
                        view._data[...] = g._data
                        self.params[i].grad = view
        self._reset()

    def _reset(self) -> None:
        self.ready = [False] * len(self.params)
        for bucket in self.buckets:
            bucket.pending = len(bucket.members)
            bucket.work = bucket.future = None
        self.next_bucket = 0
        self.marked_unused = False

    def bucket_indices(self) -> list:
        return [list(b.members) for b in self.buckets]

    def _should_rebuild(self) -> bool:
        return (self.static_graph or not self.find_unused) and not self.has_rebuilt

    def rebuild_buckets(self) -> bool:
        """At the forward after the first synced backward: buckets in the order gradients became
        ready, rank 0's assignment for all."""
        if not self._should_rebuild() or not self.rebuilt_order:
            return False
        order = self.rebuilt_order
        if len(order) != len(self.params):
            self.rebuilt_order = []
            return False
        indices, limits = compute_bucket_assignment_by_size(
            [self.params[i] for i in order], [self.first_bucket_bytes, self.bucket_bytes_cap],
            None, order)
        if self.world > 1:
            got = [(indices, limits)]
            c10d.broadcast_object_list(got, src=c10d.get_global_rank(self.pg, 0), group=self.pg)
            indices, limits = got[0]
        self._init_buckets(indices, limits)
        self.has_rebuilt = True
        self.rebuilt_order = []
        return True

    # -------------------------------------------------------------- one iteration

    def ensure_prior_reduction_finished(self) -> None:
        if self.require_finalize:
            missing = " ".join(str(i) for i, r in enumerate(self.ready) if not r)
            raise RuntimeError(_UNFINISHED.format(rank=self.rank, indices=missing))

    def prepare_for_backward(self, outputs) -> None:
        """After a forward that will be followed by a synced backward."""
        self.t_bwd_start = time.perf_counter_ns()
        self.expect_hooks = True
        self._reset()
        self.local_used[:] = 0
        self.iteration += 1
        first_static = self.static_graph and self.hook_counts is None
        self.track_used = self.find_unused or first_static
        if self.track_used:
            reached = _reached_leaves(outputs)
            self.unused = [i for i, p in enumerate(self.params) if id(p) not in reached]
        elif self.static_graph:
            self.unused = [i for i, n in enumerate(self.hook_counts) if n == 0]
        else:
            self.unused = []
        if self.static_graph and self.hook_counts is not None:
            self.remaining = list(self.hook_counts)

    def _autograd_hook(self, index: int, param) -> None:
        if not self.expect_hooks:
            return  # a backward outside DDP's forward, or inside no_sync()
        self.local_used[index] = 1
        if self.static_graph and self.hook_counts is None:
            self._first_static_hook(index)
            return
        if self.unused and not self.marked_unused:
            self.marked_unused = True
            for i in self.unused:
                self._mark_ready(i)
        if self.static_graph:
            self.remaining[index] -= 1
            if self.remaining[index] > 0:
                return  # a parameter used several times is ready at its last use
        if self._should_rebuild() and len(self.rebuilt_order) < len(self.params):
            self.rebuilt_order.append(index)
        self._mark_ready(index)

    def _first_static_hook(self, index: int) -> None:
        """The first iteration of a static graph only counts each parameter's hooks; every
        bucket is reduced in the final callback (PyTorch's delayed all-reduce), and the ready
        order is learnt in the second iteration."""
        if not self.require_finalize:
            self.require_finalize = True
            self.first_counts = [0] * len(self.params)
            engine.queue_callback(self._delayed_all_reduce)
        self.first_counts[index] += 1

    def _delayed_all_reduce(self) -> None:
        self.hook_counts = self.first_counts
        for i in range(len(self.params)):
            self._copy_in(i)
        for bucket in self.buckets:
            bucket.pending = 0
        self.next_bucket = 0
        self._launch_ready()
        self._reduce_used()
        self._finalize()

    def _copy_in(self, index: int) -> None:
        bucket, pos = self.locate[index]
        view = bucket.view_arrays[pos]
        grad = self.params[index].grad
        if grad is None:
            view[...] = 0
            return
        g = grad._data
        if self.comm_hook is None:
            if g is view:
                view /= self.world
            else:
                _backend.namespace_of(view).multiply(g, 1.0 / self.world, out=view,
                                                     casting="unsafe")
        elif g is not view:
            view[...] = g
        if self.as_view and g is not view:
            self.params[index].grad = bucket.views[pos]

    def _mark_ready(self, index: int) -> None:
        if self.ready[index]:
            name = self.names[index] if self.names else "(unknown)"
            raise RuntimeError(_READY_TWICE.format(index=index, name=name))
        self.ready[index] = True
        self.require_finalize = True
        self._copy_in(index)
        bucket = self.locate[index][0]
        bucket.pending -= 1
        if bucket.pending == 0:
            self._launch_ready()
        else:
            self._progress()
        if self.next_bucket == len(self.buckets):
            self._reduce_used()
            engine.queue_callback(self._finalize)

    def _reduce_used(self) -> None:
        """Start learning which parameters some rank used (the others keep ``.grad`` as is)."""
        if self.track_used and self.world > 1:
            self.used_work = c10d.all_reduce(Tensor._make(self.local_used, None, 0, None),
                                             op=c10d.ReduceOp.MAX, group=self.pg, async_op=True)

    def _launch_ready(self) -> None:
        buckets = self.buckets
        while self.next_bucket < len(buckets) and buckets[self.next_bucket].pending == 0:
            bucket = buckets[self.next_bucket]
            if not self.t_comm_start:
                self.t_comm_start = time.perf_counter_ns()
            if self.comm_hook is not None:
                state, hook = self.comm_hook
                bucket.future = hook(state, GradBucket(
                    bucket.index, bucket.buffer, bucket.views,
                    [self.params[i] for i in bucket.members],
                    bucket.index == len(buckets) - 1))
            else:
                bucket.work = c10d.all_reduce(bucket.buffer, group=self.pg, async_op=True)
            self.next_bucket += 1

    def _progress(self) -> None:
        """Let MPI move the buckets in flight along (it progresses only inside MPI calls)."""
        for bucket in self.buckets[:self.next_bucket]:
            if bucket.work is not None:
                bucket.work.is_completed()

    def _finalize(self) -> None:
        t_compute_end = time.perf_counter_ns()
        self.expect_hooks = False
        globally_unused = self.static_unused
        if self.track_used:
            if self.used_work is not None:
                self.used_work.wait()
                self.used_work = None
            globally_unused = {i for i in range(len(self.params)) if not self.local_used[i]}
            if self.static_graph:
                self.static_unused = globally_unused
        for bucket in self.buckets:
            if bucket.work is not None:
                bucket.work.wait()
            elif bucket.future is not None:
                result = bucket.future.wait()
                if isinstance(result, Tensor) and result._data is not bucket.flat:
                    bucket.flat[...] = result._data.reshape(-1)
            for i, view in zip(bucket.members, bucket.views):
                if i in globally_unused:
                    continue
                p = self.params[i]
                g = p.grad
                if self.as_view:
                    if g is None or g._data is not view._data:
                        p.grad = view
                elif g is None:
                    p.grad = Tensor._make(view._data.copy(), None, 0, None)
                else:
                    g._data[...] = view._data
                    g._bump()
        t_comm_end = time.perf_counter_ns()
        s = self.stats
        s["iterations"] += 1
        s["compute"] += t_compute_end - self.t_bwd_start
        if self.t_comm_start:
            s["comm"] += t_comm_end - self.t_comm_start
            s["overlap"] += max(0, t_compute_end - self.t_comm_start)
        self.last = (self.t_bwd_start, t_compute_end, self.t_comm_start, t_comm_end)
        self.t_comm_start = 0
        self.require_finalize = False
        self._reset()

    def remove_hooks(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
