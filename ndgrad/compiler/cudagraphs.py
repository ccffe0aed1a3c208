"""The ``cudagraphs`` backend (issue 16, item 3; DESIGN §8, COMPILE.md §5): AOT autograd whose
forward and backward compilers replay each half as one CUDA graph. ``cudagraphify`` wraps a
compiled half in a ``CUDAGraphRunner``:

- call 1 warms the function up on a side stream that waits on the current one;
- call 2 copies the inputs into static buffers, records the graph on that (non-default) stream
  into a private CuPy memory pool kept alive with it, then replays it once (recording does not
  run anything);
- later calls copy the inputs in, replay, copy back every input the graph writes (an op argument
  marked ``Tensor(a!)`` in its schema: ``mutated_input_idxs``) and return copies of the static
  outputs, so two calls never hand out the same memory.

Static inputs (parameters, buffers) are read in place; their addresses are checked on every call
and a change re-records. The CUDA work lives in ``CudaGraphCapture``; the runner's logic only asks
a capture object to warm up, clone, record and replay, so tests drive it on the CPU with a fake
one. Inputs on the CPU or on several devices, and ops a graph cannot hold (random ops,
data-dependent shapes) log "skipping cudagraphs due to <reason>" and run the half uncompiled.
"""

from __future__ import annotations

import contextlib
import logging
import operator

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._backend import streams
from .._tensor import Tensor
from .aot import aot_module_simplified, boxed_nop
from .dynamo import counters
from .node import Node, TensorMeta
from .partitioners import min_cut_rematerialization_partition

__all__ = ["cudagraphs_backend", "cudagraphify", "CUDAGraphRunner", "CudaGraphCapture",
           "skip_reason", "mutated_input_idxs", "log_skip", "rerecord_limit"]

log = logging.getLogger("ndgrad.compiler.cudagraphs")

# Re-records of one runner (a static input's address changed, or a non-tensor input's value)
# before it runs uncompiled (PyTorch's triton.cudagraph_unexpected_rerecord_limit).
rerecord_limit = 128

# Ops whose output shape depends on their data: the host must read the data, which a capture
# cannot do (boolean-mask indexing is recognised from its index dtype).
_DATA_DEPENDENT = frozenset({"nonzero", "masked_select", "_unique2", "_unique_dim",
                             "_unique_consecutive", "repeat_interleave"})


def log_skip(reason: str) -> None:
    """Log "skipping cudagraphs due to <reason>" and count it (PyTorch's
    ``counters["inductor"]["cudagraph_skips"]``)."""
    log.info("skipping cudagraphs due to %s", reason)
    counters["inductor"]["cudagraph_skips"] += 1


# --- what a graph may hold ---
def _metas(val):
    if isinstance(val, TensorMeta):
        yield val
    elif isinstance(val, (tuple, list)):
        for v in val:
            yield from _metas(v)


def _found_from(node: Node) -> str:
    """PyTorch's suffix naming the user line that reads ``node``."""
    for n in (node, *node.users):
        trace = n.meta.get("stack_trace")
        if trace:
            return f". Found from : \n {trace}"
    return ""


def _op_name(n: Node) -> str:
    return str(getattr(n.target, "name", "")).partition(".")[0]


def _incompatible(n: Node) -> bool:
    """A random op (a replay would repeat the captured draw) or a data-dependent shape."""
    if n.op != "call_function" or getattr(n.target, "kind", None) in (None, "composite"):
        return False
    if n.target.extra.get("nondeterministic") or _op_name(n) in _DATA_DEPENDENT:
        return True
    if _op_name(n) in ("index", "index_put", "index_put_"):  # a boolean mask among the indices
        idx = n.args[1] if len(n.args) > 1 else n.kwargs.get("indices", ())
        for x in idx if isinstance(idx, (list, tuple)) else ():
            v = x.meta.get("val") if isinstance(x, Node) else None
            if isinstance(v, TensorMeta) and v.dtype in (D.bool_, D.uint8):
                return True
    return False


def _device_reason(gm, example_inputs) -> str | None:
    devices: dict = {}  # device -> the first node on it (PyTorch's device-node mapping)
    inputs = iter(example_inputs)
    for n in gm.graph.nodes:
        x = next(inputs, None) if n.op == "placeholder" else None
        if isinstance(x, Tensor):
            devices.setdefault(x.device, n)
        else:
            for m in _metas(n.meta.get("val")):
                devices.setdefault(m.device, n)
    cpu = devices.get(_backend.cpu)
    if cpu is not None:
        return f"cpu device ({cpu.name}){_found_from(cpu)}"
    if len(devices) != 1 or next(iter(devices)).type != "cuda":
        return f"multiple devices: {', '.join(repr(d) for d in devices)}"
    return None


def _op_reason(gm) -> str | None:
    for n in gm.graph.nodes:
        if _incompatible(n):
            return f"incompatible op ({n.name}){_found_from(n)}"
    return None


def skip_reason(gm, example_inputs, check_devices: bool = True) -> str | None:
    """Why ``gm`` cannot run as a CUDA graph on ``example_inputs`` (the text after "skipping
    cudagraphs due to"), or None. ``check_devices=False`` leaves out the device checks (for a
    capture object that is not CUDA's)."""
    return (check_devices and _device_reason(gm, example_inputs)) or _op_reason(gm)


def _root(x):
    """The node whose memory ``x`` is (through views, detach and items of a view's tuple)."""
    while isinstance(x, Node):
        if x.op == "call_method" and x.target == "detach":
            x = x.args[0]
        elif x.op == "call_function" and x.target is operator.getitem:
            parent = x.args[0]
            if not (isinstance(parent, Node) and getattr(parent.target, "kind", None) == "view"):
                return x
            x = parent
        elif x.op == "call_function" and getattr(x.target, "kind", None) == "view":
            x = x.args[0]
        else:
            return x
    return x


def mutated_input_idxs(gm) -> tuple:
    """Indices of ``gm``'s placeholders that an op writes: an argument its schema marks
    ``Tensor(a!)`` whose memory (through views) is the placeholder's."""
    phs = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    out = set()
    for n in gm.graph.nodes:
        if n.op != "call_function" or getattr(n.target, "kind", None) in (None, "composite"):
            continue
        for i, arg in enumerate(n.target._schema.arguments):
            info = arg.alias_info
            if info is None or not info.is_write:
                continue
            v = n.args[i] if i < len(n.args) else n.kwargs.get(arg.name)
            for x in v if isinstance(v, (list, tuple)) else (v,):
                r = _root(x)
                if r in phs:
                    out.add(phs[r])
    return tuple(sorted(out))


# --- the CUDA capture ---
class CudaGraphCapture:
    """One CUDA graph recorded with CuPy: the side stream it is warmed up and captured on, the
    private memory pool everything it allocates comes from, the cuBLAS workspace it uses, and the
    graph, kept alive together."""

    __slots__ = ("device", "stream", "pool", "workspace", "graph")

    def __init__(self, device):
        import cupy

        from .._backend import cuda

        self.device = device
        with cupy.cuda.Device(device.index):
            raw = cupy.cuda.Stream(non_blocking=True)  # capture needs a non-default stream
        self.stream = cuda.Stream(device, raw=raw)
        self.pool = cupy.cuda.MemoryPool()
        self.workspace = self.graph = None

    @contextlib.contextmanager
    def _on_side_stream(self):
        import cupy

        cur = _backend.current_stream(self.device)
        self.stream.wait_stream(cur)
        was = streams.in_use[0]
        try:
            with _backend.use_stream(self.stream), cupy.cuda.using_allocator(self.pool.malloc):
                yield
        finally:
            # Only this region ran off the default stream, and it left no autograd node behind
            # that names the side stream: the engine may keep its stream-free loop.
            streams.in_use[0] = was
        cur.wait_stream(self.stream)

    def warmup(self, run):
        # From the private pool too: the blocks the warm-up frees serve the capture, which
        # then rarely has to grow the pool while capturing.
        with self._on_side_stream():
            return run()

    def clone(self, array):
        import cupy

        with cupy.cuda.Device(self.device.index), cupy.cuda.using_allocator(self.pool.malloc):
            return array.copy(order="K")

    def record(self, run, static_inputs):
        import cupy

        from .._backend import cublas

        idx = self.device.index
        with cupy.cuda.Device(idx), cupy.cuda.using_allocator(self.pool.malloc):
            self.workspace = cupy.empty(cublas.workspace_bytes(idx), cupy.uint8)
        raw = self.stream.raw
        with self._on_side_stream(), cublas.capture(raw.ptr, self.workspace, idx):
            raw.begin_capture()  # relaxed mode (CuPy's default): the pool may still grow
            try:
                out = run()
            except BaseException:
                with contextlib.suppress(Exception):
                    raw.end_capture()  # leave capture mode; the invalidated graph is dropped
                raise
            self.graph = raw.end_capture()
        return out

    def replay(self) -> None:
        self.graph.launch()  # on the current stream, after the copies queued there


# --- the runner ---
def _data_ptr(a) -> int:
    return a.__array_interface__["data"][0] if type(a) is np.ndarray else a.data.ptr


def _alloc(a):
    """The allocation ``a`` lies in (views share it)."""
    if type(a) is np.ndarray:
        while isinstance(a.base, np.ndarray):
            a = a.base
        return a if a.base is None else a.base
    return a.data.mem


_WARMUP, _RECORD, _REPLAY, _EAGER = "warmup", "record", "replay", "eager"
_COPY, _INPUT, _ALIAS, _CONST = 0, 1, 2, 3  # how each output is handed out


class CUDAGraphRunner:
    """A boxed function run as a CUDA graph: warm-up, record, then replays (module docstring).
    ``state`` is ``"warmup"``, ``"record"``, ``"replay"`` or ``"eager"`` (after a skip, whose
    reason is ``skipped``)."""

    _boxed_call = True
    __slots__ = ("fn", "boxed", "mutated", "static_idxs", "names", "new_capture", "capture",
                 "state", "skipped", "rerecords", "warm", "arrays", "checks", "copy_in",
                 "consts", "keep", "copy_back", "bump", "outs", "plan", "out_type")

    def __init__(self, fn, new_capture, mutated_inputs=(), static_input_idxs=None, names=None):
        self.fn = fn
        self.boxed = getattr(fn, "_boxed_call", False)
        self.mutated = tuple(mutated_inputs)
        self.static_idxs = None if static_input_idxs is None else frozenset(static_input_idxs)
        self.names = names
        self.new_capture = new_capture
        self.capture = None
        self.state = _WARMUP
        self.skipped = None
        self.rerecords = 0
        self.warm = None

    def _call(self, args: list):
        out = self.fn(args) if self.boxed else self.fn(*args)
        args.clear()  # as a boxed function: the inputs go once it has run
        return out

    def _name(self, i: int) -> str:
        return f"input {i}" + (f" ({self.names[i]})" if self.names and i < len(self.names) else "")

    def __call__(self, args: list):
        if self.state is _REPLAY:
            return self._replay(args)
        if self.state is _EAGER:
            return self._call(args)
        if self.state is _WARMUP:
            return self._warmup(args)
        return self._record(args)

    def _skip(self, reason: str, args: list):
        log_skip(reason)
        self.state, self.skipped, self.capture = _EAGER, reason, None
        self.arrays = self.outs = self.plan = self.warm = None
        return self._call(args)

    def _warmup(self, args: list):
        try:
            self.capture = self.new_capture()
        except Exception as e:  # noqa: BLE001 - no CuPy stream or pool here: run uncompiled
            return self._skip(f"{type(e).__name__}: {e}", args)
        if self.static_idxs is None:  # inferred at the record: the arrays seen again there
            self.warm = [x._data if isinstance(x, Tensor) else None for x in args]
        self.state = _RECORD
        return self.capture.warmup(lambda: self._call(args))

    def _record(self, args: list):
        try:
            self._record_graph(args)
        except Exception as e:  # noqa: BLE001 - an op the capture refused (a host read, ...)
            return self._skip(f"{type(e).__name__} while recording: {e}", args)
        self.state = _REPLAY
        return self._finish(args)  # the recording ran nothing: replay once for this call

    def _record_graph(self, args: list) -> None:
        if self.capture is None:
            self.capture = self.new_capture()
        cap = self.capture
        statics = self.static_idxs
        if statics is None:
            warm = self.warm or ()
            statics = self.static_idxs = frozenset(
                i for i, x in enumerate(args)
                if isinstance(x, Tensor) and i < len(warm) and x._data is warm[i])
        self.warm = None
        inputs, arrays, checks, copy_in, consts = list(args), [], [], [], []
        for i, x in enumerate(args):
            if not isinstance(x, Tensor):
                consts.append((i, x))  # baked into the graph: another value re-records
                arrays.append(None)
            elif i in statics:  # read in place: its address is part of the graph
                a = x._data
                checks.append((i, a, _data_ptr(a), a.strides))
                arrays.append(a)
            else:
                s = cap.clone(x._data)
                copy_in.append((i, s))
                inputs[i] = Tensor._make(s, None, 0, None)
                arrays.append(s)
        outs = cap.record(lambda: self._call(list(inputs)), inputs)
        self.out_type = type(outs) if type(outs) in (tuple, list) else None
        flat = list(outs) if self.out_type else [outs]
        where = {id(a): i for i, a in enumerate(arrays) if a is not None}
        static_allocs = {id(_alloc(a)) for i, a in enumerate(arrays) if i in statics}
        keep = sorted({i for i in self.mutated if isinstance(args[i], Tensor)}
                      | {where[id(o._data)] for o in flat
                         if isinstance(o, Tensor) and id(o._data) in where})
        pos = {i: k for k, i in enumerate(keep)}
        plan, seen = [], {}
        for o in flat:
            if not isinstance(o, Tensor):
                plan.append((_CONST, o))
            elif id(o._data) in where:  # an input itself: the caller's tensor, as eager
                plan.append((_INPUT, pos[where[id(o._data)]]))
            elif id(_alloc(o._data)) in static_allocs:  # a view of a parameter: eager's alias
                plan.append((_ALIAS, o._data))
            else:  # graph memory, rewritten by the next replay: copied out
                plan.append((_COPY, seen.setdefault(id(o._data), o._data)))
        self.arrays, self.checks, self.copy_in, self.consts = arrays, checks, copy_in, consts
        self.keep, self.plan, self.outs = tuple(keep), plan, outs  # outs keep the memory alive
        self.copy_back = tuple((pos[i], arrays[i]) for i in self.mutated
                               if i not in statics and isinstance(args[i], Tensor))
        self.bump = tuple(pos[i] for i in self.mutated
                          if i in statics and isinstance(args[i], Tensor))

    def _rerecord(self, args: list, reason: str):
        self.rerecords += 1
        if self.rerecords > rerecord_limit:
            return self._skip(f"{reason}, and re-recording hit rerecord_limit "
                              f"({rerecord_limit})", args)
        log.info("re-recording a cudagraph: %s", reason)
        self.capture = None  # a fresh pool: the old graph's blocks stay its own
        self.state = _RECORD
        return self._record(args)

    def _replay(self, args: list):
        for i, a, ptr, strides in self.checks:
            b = args[i]._data
            if b is not a and (_data_ptr(b) != ptr or b.strides != strides):
                return self._rerecord(args, f"static input data pointer changed ({self._name(i)})")
        for i, c in self.consts:
            if args[i] is not c and args[i] != c:
                return self._rerecord(args, f"non-tensor input changed ({self._name(i)})")
        for i, s in self.copy_in:
            a = args[i]._data
            if a is not s:
                s[...] = a
        return self._finish(args)

    def _finish(self, args: list):
        live = [args[i] for i in self.keep]
        args.clear()  # the boxed convention: the inputs may go now
        self.capture.replay()
        for k, s in self.copy_back:
            t = live[k]
            t._data[...] = s
            t._bump()
        for k in self.bump:
            live[k]._bump()
        res = []
        copies: dict = {}
        for kind, v in self.plan:
            if kind == _COPY:
                t = copies.get(id(v))
                if t is None:
                    t = copies[id(v)] = Tensor._make(v.copy(order="K"), None, 0, None)
                res.append(t)
            elif kind == _INPUT:
                res.append(live[v])
            elif kind == _ALIAS:
                res.append(Tensor._make(v, None, 0, None))
            else:
                res.append(v)
        return self.out_type(res) if self.out_type else res[0]


def _input_devices(example_inputs, names):
    """``(device, reason)``: the one CUDA device of the tensor inputs, or why there is none."""
    devices: dict = {}
    for i, x in enumerate(example_inputs):
        if isinstance(x, Tensor):
            devices.setdefault(x.device, names[i] if names and i < len(names) else f"input {i}")
    if _backend.cpu in devices:
        return None, f"cpu device ({devices[_backend.cpu]})"
    if len(devices) == 1 and next(iter(devices)).type == "cuda":
        return next(iter(devices)), None
    if devices:
        return None, f"multiple devices: {', '.join(repr(d) for d in devices)}"
    from .. import cuda  # no tensor inputs (a whole step): the current device

    if not cuda.is_available():
        return None, "no CUDA device"
    return _backend.Device("cuda", cuda.current_device()), None


def cudagraphify(fn, example_inputs, mutated_inputs=None, static_input_idxs=None, *,
                 capture_factory=None, names=None):
    """``fn`` (a compiled graph half, boxed or not) as a boxed callable replaying one CUDA graph
    (a ``CUDAGraphRunner``); ``fn`` itself, boxed, after logging the skip when its inputs are
    not all on one CUDA device.

    ``mutated_inputs``: indices of the inputs ``fn`` writes (copied back after each replay);
    by default those ``mutated_input_idxs`` finds in ``fn.graph_module``, else every input.
    ``static_input_idxs``: inputs read in place (parameters); by default the tensors passed
    again at the second call as the very arrays of the first. ``capture_factory(device)`` makes
    the capture object (default ``CudaGraphCapture``; tests pass a CPU one)."""
    gm = getattr(fn, "graph_module", None)
    if mutated_inputs is None:
        mutated_inputs = mutated_input_idxs(gm) if gm is not None else \
            tuple(i for i, x in enumerate(example_inputs) if isinstance(x, Tensor))
    if names is None and gm is not None:
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    if capture_factory is None:
        device, reason = _input_devices(example_inputs, names)
        if reason is not None:
            log_skip(reason)
            return fn if getattr(fn, "_boxed_call", False) else _boxed(fn)
        return CUDAGraphRunner(fn, lambda: CudaGraphCapture(device), mutated_inputs,
                               static_input_idxs, names)
    device = next((x.device for x in example_inputs if isinstance(x, Tensor)), _backend.cpu)
    return CUDAGraphRunner(fn, lambda: capture_factory(device), mutated_inputs,
                           static_input_idxs, names)


def _boxed(fn):
    def g(args):
        return fn(*args)

    g._boxed_call = True
    return g


# --- the backend ---
def cudagraphs_backend(gm, example_inputs, inner_compiler=None, *, capture_factory=None):
    """The ``cudagraphs`` backend: AOT autograd (min-cut partitioner), each half compiled by
    ``inner_compiler`` (default: the graph run as it is, ``boxed_nop``) and replayed as a CUDA
    graph, parameters and buffers as static inputs. A half that cannot be a graph logs why and
    runs uncompiled: for a device reason the backward then skips silently, as PyTorch's does;
    an op the forward holds (dropout's draw) leaves the backward to be a graph."""
    inner = inner_compiler or boxed_nop
    state = {"aot": None, "device_skip": False}

    def compiler(half, inputs):
        compiled = inner(half, inputs)
        if state["device_skip"]:  # logged for the forward already
            return compiled
        reason = _device_reason(half, inputs) if capture_factory is None else None
        state["device_skip"] = reason is not None
        reason = reason or _op_reason(half)  # a random op: this half only
        if reason is not None:
            log_skip(reason)
            return compiled
        params = {id(t._data) for t in state["aot"].lifted}
        static = tuple(i for i, x in enumerate(inputs)
                       if isinstance(x, Tensor) and id(x._data) in params)
        return cudagraphify(compiled, inputs, mutated_input_idxs(half), static,
                            capture_factory=capture_factory,
                            names=[n.name for n in half.graph.nodes if n.op == "placeholder"])

    fwd = aot_module_simplified(gm, example_inputs, fw_compiler=compiler, bw_compiler=compiler,
                                partition_fn=min_cut_rematerialization_partition)
    state["aot"] = fwd._aot
    return fwd
