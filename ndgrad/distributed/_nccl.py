"""NCCL collectives for CUDA arrays of an ``"nccl"`` group, through CuPy's NCCL bindings.

Each group keeps one communicator per device (its unique id broadcast over the group's MPI
communicator) and one stream of its own (DESIGN §5): a collective's stream first waits on an
event recorded on the caller's current stream, so it sees every kernel that wrote its input;
``Work.wait()`` makes the caller's current stream wait on the collective's end event, which
orders later kernels after it without blocking the host (PyTorch's NCCL semantics).
"""

from __future__ import annotations

_TYPES = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
          "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
          "int64": "NCCL_INT64", "bool": "NCCL_UINT8", "bfloat16": "NCCL_BFLOAT16"}
_OPS = {"SUM": "NCCL_SUM", "PRODUCT": "NCCL_PROD", "MIN": "NCCL_MIN", "MAX": "NCCL_MAX",
        "AVG": "NCCL_AVG"}


def available() -> bool:
    try:
        from cupy.cuda import nccl
    except ImportError:
        return False
    from .._backend import cuda
    return cuda.available() and getattr(nccl, "available", True)


class _EventRequest:
    """What ``Work`` polls for an NCCL collective: the end event on the group's stream. Its
    ``Test`` also makes the caller's current stream wait on that event, once."""

    __slots__ = ("event", "ordered")

    def __init__(self, event):
        self.event = event
        self.ordered = False

    def Test(self, status=None) -> bool:
        if not self.ordered:
            import cupy
            cupy.cuda.get_current_stream().wait_event(self.event)
            self.ordered = True
        return True  # the caller's stream is ordered after it; the host need not block


class Communicator:
    """One NCCL communicator for one device of a group, with the group's stream there."""

    __slots__ = ("comm", "device", "size", "stream")

    def __init__(self, pg, device: int):
        import cupy
        from cupy.cuda import nccl
        uid = nccl.get_unique_id() if pg._rank == 0 else None
        uid = pg._comm.bcast(uid, root=0)
        with cupy.cuda.Device(device):
            self.comm = nccl.NcclCommunicator(pg._size, uid, pg._rank)
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self.device = device
        self.size = pg._size

    def destroy(self) -> None:
        self.comm.destroy()

    def _run(self, call):
        """Order the group's stream after the caller's, issue ``call(stream_ptr)`` there, and
        return the request ``Work`` polls."""
        import cupy
        ready = cupy.cuda.Event(disable_timing=True)
        ready.record(cupy.cuda.get_current_stream())
        self.stream.wait_event(ready)
        call(self.stream.ptr)
        done = cupy.cuda.Event(disable_timing=True)
        done.record(self.stream)
        return _EventRequest(done)

    @staticmethod
    def _type(a):
        from cupy.cuda import nccl
        name = _TYPES.get(a.dtype.name)
        if name is None:
            raise TypeError(f"Unsupported dtype for NCCL: {a.dtype}")
        return getattr(nccl, name)

    @staticmethod
    def _op(name: str):
        from cupy.cuda import nccl
        if name not in _OPS:
            raise ValueError(f"Cannot use ReduceOp.{name} with NCCL")
        return getattr(nccl, _OPS[name])

    def all_reduce(self, a, op: str):
        return self._run(lambda s: self.comm.allReduce(a.data.ptr, a.data.ptr, a.size,
                                                       self._type(a), self._op(op), s))

    def broadcast(self, a, root: int):
        return self._run(lambda s: self.comm.bcast(a.data.ptr, a.size, self._type(a), root, s))

    def all_gather(self, a, out):
        return self._run(lambda s: self.comm.allGather(a.data.ptr, out.data.ptr, a.size,
                                                       self._type(a), s))

    def reduce_scatter(self, a, out, op: str):
        return self._run(lambda s: self.comm.reduceScatter(
            a.data.ptr, out.data.ptr, out.size, self._type(a), self._op(op), s))


def communicator(pg, array) -> Communicator:
    """``pg``'s communicator on ``array``'s device, made on first use (collectively: every rank
    of the group must reach its first CUDA collective, as with PyTorch's lazy NCCL init)."""
    if not array.flags.c_contiguous:
        raise RuntimeError("Tensors must be contiguous")
    comms = pg._nccl
    if comms is None:
        comms = pg._nccl = {}
    dev = array.device.id
    comm = comms.get(dev)
    if comm is None:
        comm = comms[dev] = Communicator(pg, dev)
    return comm
