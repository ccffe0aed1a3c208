"""cuBLAS through its C API (ctypes), for the matrix products of a CUDA-graph capture.

CuPy refuses every cuBLAS call while a stream captures (a hard check in its ``setStream``). While
``capture(...)`` is entered on a thread, linalg's matmul forwards on CuPy arrays call ``matmul``
here instead: a handle of our own per thread and device, its stream and workspace set before the
capture begins, host pointer mode (alpha and beta are baked into the graph), and each row-major
array passed to column-major cuBLAS as its transpose (``operand``). Importing this module costs
nothing; the library is found and loaded on the first capture (``library_path`` says where).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading

import numpy as np

__all__ = ["capturing", "capture", "matmul", "operand", "gemm_args", "library_path",
           "workspace_bytes", "OP_N", "OP_T"]

# Captures in progress in this process. linalg reads it on CuPy arrays only (one list read):
# while it is 0 every product takes CuPy's own path.
capturing = [0]

OP_N, OP_T = 0, 1  # cublasOperation_t
_POINTER_MODE_HOST = 0
_GEMM_DEFAULT = -1  # cublasGemmAlgo_t
_COMPUTE_32F, _COMPUTE_64F = 68, 70  # cublasComputeType_t (32F: no TF32, as CuPy's default)
# dtype char -> (cudaDataType, compute type, ctypes type of alpha and beta)
_TYPES = {"e": (2, _COMPUTE_32F, ctypes.c_float), "f": (0, _COMPUTE_32F, ctypes.c_float),
          "d": (1, _COMPUTE_64F, ctypes.c_double), "F": (4, _COMPUTE_32F, ctypes.c_float * 2),
          "D": (5, _COMPUTE_64F, ctypes.c_double * 2)}
_STATUS = {1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
           7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH",
           11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
           14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED"}
_INT_MAX = 2**31 - 1

_lib = [None, None]  # the CDLL, its path
_load_lock = threading.Lock()
_local = threading.local()  # .handles: device -> handle; .stream: the stream being captured


# --- the library ---
def _candidates():
    """Where libcublas may be: the copy CuPy already loaded (read from /proc/self/maps), the
    names the dynamic linker resolves, the nvidia-cublas wheels, the CUDA toolkit."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1]
                if "/libcublas.so" in path:
                    yield path
    except OSError:
        pass
    yield from ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so")
    for root in sys.path:
        for pattern in ("nvidia/cublas/lib/libcublas.so*", "nvidia/cu*/lib/libcublas.so*"):
            yield from sorted(glob.glob(os.path.join(root, pattern)), reverse=True)
    homes = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    try:
        import cupy

        homes.insert(0, cupy.cuda.get_cuda_path())
    except Exception:  # noqa: BLE001 - no CuPy, or no toolkit it knows of
        pass
    for home in filter(None, homes):
        for sub in ("lib64", "lib", "targets/*/lib"):
            yield from sorted(glob.glob(os.path.join(home, sub, "libcublas.so*")), reverse=True)


def _load():
    if _lib[0] is not None:
        return _lib[0]
    with _load_lock:
        if _lib[0] is not None:
            return _lib[0]
        try:  # CuPy's cuBLAS binding links the library CuPy uses: share that copy
            import cupy_backends.cuda.libs.cublas  # noqa: F401
        except ImportError:
            pass
        tried = []
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                tried.append(path)
                continue
            if hasattr(lib, "cublasGemmStridedBatchedEx"):
                _declare(lib)
                _lib[:] = [lib, path]
                return lib
        raise RuntimeError("CUDA graphs need cuBLAS's C library (libcublas.so), which was not "
                           f"found; tried: {', '.join(tried[:8])}. Install the nvidia-cublas "
                           "wheel or the CUDA toolkit.")


def _declare(lib) -> None:
    h, p, i, ll = ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    sigs = {
        "cublasCreate_v2": [ctypes.POINTER(ctypes.c_void_p)],
        "cublasSetStream_v2": [h, p],
        "cublasSetWorkspace_v2": [h, p, ctypes.c_size_t],
        "cublasSetPointerMode_v2": [h, i],
        "cublasSgemm_v2": [h, i, i, i, i, i, p, p, i, p, i, p, p, i],
        "cublasDgemm_v2": [h, i, i, i, i, i, p, p, i, p, i, p, p, i],
        "cublasGemmEx": [h, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i],
        "cublasGemmStridedBatchedEx": [h, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll, p, p, i, i,
                                       ll, i, i, i],
    }
    for name, args in sigs.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = ctypes.c_int


def library_path() -> str:
    """The path of the libcublas loaded (loading it first)."""
    _load()
    return _lib[1]


def _check(status: int, call: str) -> None:
    if status:
        raise RuntimeError(f"CUDA error: {_STATUS.get(status, status)} when calling `{call}`")


def workspace_bytes(device_index: int) -> int:
    """cuBLAS's own default workspace size: 32 MiB on Hopper and later, 4 MiB before."""
    import cupy

    major = cupy.cuda.Device(device_index).compute_capability[:-1]
    return (32 if int(major or 0) >= 9 else 4) << 20


def _handle(device_index: int):
    handles = getattr(_local, "handles", None)
    if handles is None:
        handles = _local.handles = {}
    h = handles.get(device_index)
    if h is None:
        import cupy

        lib = _load()
        h = ctypes.c_void_p()
        with cupy.cuda.Device(device_index):
            _check(lib.cublasCreate_v2(ctypes.byref(h)), "cublasCreate_v2")
        _check(lib.cublasSetPointerMode_v2(h, _POINTER_MODE_HOST), "cublasSetPointerMode_v2")
        handles[device_index] = h
    return h


class capture:  # noqa: N801 - a context manager
    """Within, products on this thread's current stream (``stream_ptr``, about to capture) run
    through our handle. Enter it before ``begin_capture``: the handle is made, and its stream
    and workspace set, here (cuBLAS must not allocate while the stream captures).
    ``cublasSetStream`` resets the workspace, so the stream is set first."""

    __slots__ = ("stream_ptr", "workspace", "device_index", "prev")

    def __init__(self, stream_ptr: int, workspace, device_index: int):
        self.stream_ptr, self.workspace, self.device_index = stream_ptr, workspace, device_index

    def __enter__(self):
        lib = _load()
        h = _handle(self.device_index)
        _check(lib.cublasSetStream_v2(h, self.stream_ptr), "cublasSetStream_v2")
        ws = self.workspace
        _check(lib.cublasSetWorkspace_v2(h, ws.data.ptr, ws.nbytes), "cublasSetWorkspace_v2")
        self.prev = getattr(_local, "stream", None)
        _local.stream = self.stream_ptr
        capturing[0] += 1
        return self

    def __exit__(self, *exc):
        capturing[0] -= 1
        _local.stream = self.prev


# --- row-major products as column-major calls ---
def operand(shape, strides, itemsize: int):
    """How cuBLAS reads a row-major matrix (or a batch of them, ``shape`` ``(b, r, c)``) in
    place: ``(op, ld, batch_stride)`` such that ``op`` of the column-major matrix stored at its
    address with leading dimension ``ld`` is its transpose; None when the layout has no such
    reading (the caller copies it contiguous). Row-major storage read column-major is already the
    transpose (``OP_N``); column-major storage (a ``.mT`` view) is the matrix itself (``OP_T``)."""
    if any(s % itemsize for s in strides):
        return None
    r, c = shape[-2:]
    s0, s1 = strides[-2] // itemsize, strides[-1] // itemsize
    sb = strides[0] // itemsize if len(shape) == 3 else 0
    if sb < 0:
        return None
    if (c == 1 or s1 == 1) and (r == 1 or s0 >= c):
        return OP_N, max(s0 if r > 1 else c, 1), sb
    if (r == 1 or s0 == 1) and (c == 1 or s1 >= r):
        return OP_T, max(s1 if c > 1 else r, 1), sb
    return None


def gemm_args(a_op, b_op, m: int, n: int, k: int) -> tuple:
    """The column-major call for row-major ``C (m, n) = A (m, k) @ B (k, n)``: cuBLAS computes
    ``C^T = B^T A^T``, so its first operand is B. Returns ``(transa, transb, m', n', k, lda,
    stride_a, ldb, stride_b, ldc, stride_c)`` with its A = our B and its B = our A."""
    return (b_op[0], a_op[0], n, m, k, b_op[1], b_op[2], a_op[1], a_op[2], n, m * n)


def _ready(cupy, x):
    """``x`` and its ``operand`` reading, copying it contiguous when it has none."""
    op = operand(x.shape, x.strides, x.itemsize)
    if op is None:
        x = cupy.ascontiguousarray(x)
        op = operand(x.shape, x.strides, x.itemsize)
    return x, op


def _gemm(cupy, a, b):
    """``a @ b`` for (m, k) or (batch, m, k) ``a``, batched ``b`` to match, as cuBLAS calls on
    this thread's capturing handle."""
    batched = a.ndim == 3
    m, k = a.shape[-2:]
    n = b.shape[-1]
    out = cupy.empty((a.shape[0], m, n) if batched else (m, n), a.dtype)
    if out.size == 0:
        return out
    if k == 0:
        out.fill(0)
        return out
    if max(m, n, k, a.shape[0] if batched else 1) > _INT_MAX:
        raise RuntimeError("matmul under CUDA-graph capture: a dimension exceeds cuBLAS's int")
    a, a_op = _ready(cupy, a)
    b, b_op = _ready(cupy, b)
    ta, tb, mm, nn, kk, lda, sa, ldb, sb, ldc, sc = gemm_args(a_op, b_op, m, n, k)
    lib = _lib[0]
    h = _handle(out.device.id)
    dtype, compute, scalar = _TYPES[a.dtype.char]
    one = scalar(1) if scalar in (ctypes.c_float, ctypes.c_double) else scalar(1, 0)
    zero = scalar(0) if scalar in (ctypes.c_float, ctypes.c_double) else scalar(0, 0)
    A, B, C = b.data.ptr, a.data.ptr, out.data.ptr
    if batched:
        _check(lib.cublasGemmStridedBatchedEx(
            h, ta, tb, mm, nn, kk, ctypes.byref(one), A, dtype, lda, sa, B, dtype, ldb, sb,
            ctypes.byref(zero), C, dtype, ldc, sc, out.shape[0], compute, _GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx")
    elif dtype == 0:  # the measured route for float32 (COMPILE.md §5)
        _check(lib.cublasSgemm_v2(h, ta, tb, mm, nn, kk, ctypes.byref(one), A, lda, B, ldb,
                                  ctypes.byref(zero), C, ldc), "cublasSgemm_v2")
    elif dtype == 1:
        _check(lib.cublasDgemm_v2(h, ta, tb, mm, nn, kk, ctypes.byref(one), A, lda, B, ldb,
                                  ctypes.byref(zero), C, ldc), "cublasDgemm_v2")
    else:
        _check(lib.cublasGemmEx(h, ta, tb, mm, nn, kk, ctypes.byref(one), A, dtype, lda, B, dtype,
                                ldb, ctypes.byref(zero), C, dtype, ldc, compute, _GEMM_DEFAULT),
               "cublasGemmEx")
    return out


def matmul(a, b):
    """``numpy.matmul``'s semantics (1-D promotion, broadcast batch dimensions) for CuPy arrays,
    through cuBLAS's C API when this thread's current stream is the one being captured; CuPy's
    own ``matmul`` otherwise (integer products never call cuBLAS). A shape mismatch raises
    ``ValueError``, as NumPy's does, for the caller to reword."""
    import cupy

    if _local.__dict__.get("stream") != cupy.cuda.get_current_stream().ptr:
        return cupy.matmul(a, b)
    if a.dtype != b.dtype:
        dt = cupy.result_type(a, b)
        a, b = a.astype(dt, copy=False), b.astype(dt, copy=False)
    if a.dtype.char not in _TYPES:
        return cupy.matmul(a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    va, vb = a.ndim == 1, b.ndim == 1
    if va:
        a = a[None, :]
    if vb:
        b = b[:, None]
    m, k = a.shape[-2:]
    if b.shape[-2] != k:
        raise ValueError("matmul: Input operand 1 has a mismatch in its core dimension 0")
    n = b.shape[-1]
    if a.ndim == 2 and b.ndim == 2:
        out = _gemm(cupy, a, b)
    elif b.ndim == 2 and a.flags.c_contiguous:  # one GEMM over all rows, as linalg's _matmul
        out = _gemm(cupy, a.reshape(-1, k), b).reshape(a.shape[:-1] + (n,))
    else:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        nb = 1
        for d in batch:
            nb *= d
        a3 = cupy.broadcast_to(a, batch + (m, k)).reshape(nb, m, k)
        b3 = cupy.broadcast_to(b, batch + (k, n)).reshape(nb, k, n)
        out = _gemm(cupy, a3, b3).reshape(batch + (m, n))
    if va and vb:
        return out[..., 0, 0]
    if va:
        return out[..., 0, :]
    return out[..., 0] if vb else out
