"""Row reductions of the C tier: softmax, log_softmax, layer norm and their backwards over the last
dimension(s), each one generated C function that makes one or two passes over a row while it is
in cache (NumPy makes five to fifteen passes over the whole array); and 2-d max pooling over
disjoint windows with its backward (one pass each, where NumPy makes one per window position).
``kernel(node, ...)`` returns the C source and how to call it, or None where the node is not such
a call (another dim, an integer dtype, a dtype argument, overlapping or padded windows)."""

from __future__ import annotations

import numpy as np

__all__ = ["kernel", "OPS"]

OPS = frozenset(("softmax.int", "log_softmax.int", "_softmax_backward_data",
                 "_log_softmax_backward_data", "layer_norm", "native_layer_norm_backward",
                 "max_pool2d_with_indices", "_max_pool2d_backward"))

_T = {np.dtype(np.float32): ("float", "f"), np.dtype(np.float64): ("double", "")}

_SOFTMAX = """void KNAME(const T *restrict x, T *restrict y) {
    for (long r = 0; r < ROWS; r++) {
        const T *xr = x + r * COLS;
        T *yr = y + r * COLS;
        ROW_MAX
        T s = 0;
        #pragma omp simd reduction(+:s)
        for (long c = 0; c < COLS; c++) { const T e = expF(xr[c] - m); yr[c] = e; s += e; }
        #pragma omp simd
        for (long c = 0; c < COLS; c++) yr[c] = yr[c] / s;
    }
}
"""

_LOG_SOFTMAX = """void KNAME(const T *restrict x, T *restrict y) {
    for (long r = 0; r < ROWS; r++) {
        const T *xr = x + r * COLS;
        T *yr = y + r * COLS;
        ROW_MAX
        T s = 0;
        #pragma omp simd reduction(+:s)
        for (long c = 0; c < COLS; c++) s += expF(xr[c] - m);
        const T ls = logF(s);
        #pragma omp simd
        for (long c = 0; c < COLS; c++) yr[c] = (xr[c] - m) - ls;
    }
}
"""

_SOFTMAX_BWD = """void KNAME(const T *restrict g, const T *restrict y, T *restrict o) {
    for (long r = 0; r < ROWS; r++) {
        const T *gr = g + r * COLS, *yr = y + r * COLS;
        T *orow = o + r * COLS;
        T s = 0;
        #pragma omp simd reduction(+:s)
        for (long c = 0; c < COLS; c++) s += gr[c] * yr[c];
        #pragma omp simd
        for (long c = 0; c < COLS; c++) orow[c] = (gr[c] - s) * yr[c];
    }
}
"""

_LOG_SOFTMAX_BWD = """void KNAME(const T *restrict g, const T *restrict y, T *restrict o) {
    for (long r = 0; r < ROWS; r++) {
        const T *gr = g + r * COLS, *yr = y + r * COLS;
        T *orow = o + r * COLS;
        T s = 0;
        #pragma omp simd reduction(+:s)
        for (long c = 0; c < COLS; c++) s += gr[c];
        #pragma omp simd
        for (long c = 0; c < COLS; c++) orow[c] = gr[c] - expF(yr[c]) * s;
    }
}
"""

# (x - mean) * rstd, then * w, + b; mean and variance as NumPy's two-pass form
_LAYER_NORM = """void KNAME(const T *restrict x, const T *restrict w, const T *restrict b,
           T *restrict y) {
    for (long r = 0; r < ROWS; r++) {
        const T *xr = x + r * COLS;
        T *yr = y + r * COLS;
        MEAN_RSTD
        #pragma omp simd
        for (long c = 0; c < COLS; c++) yr[c] = (xr[c] - mean) * rstd WEIGHT BIAS;
    }
}
"""

# dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w; dw = sum_r g * xhat;
# db = sum_r g (the column sums accumulate in double: rows are many)
_LAYER_NORM_BWD = """void KNAME(const T *restrict g, const T *restrict x, const T *restrict w,
           T *restrict dx, T *restrict dw, T *restrict db, double *restrict acc) {
    for (long c = 0; c < 2 * COLS; c++) acc[c] = 0;
    for (long r = 0; r < ROWS; r++) {
        const T *xr = x + r * COLS, *gr = g + r * COLS;
        MEAN_RSTD
        T sg = 0, sgx = 0;
        #pragma omp simd reduction(+:sg, sgx)
        for (long c = 0; c < COLS; c++) {
            const T xh = (xr[c] - mean) * rstd;
            const T gw = gr[c] WEIGHT;
            sg += gw;
            sgx += gw * xh;
            acc[c] += (double)(gr[c] * xh);
            acc[COLS + c] += (double)gr[c];
        }
        if (DX) {
            const T mg = sg / (T)COLS, mgx = sgx / (T)COLS;
            T *dr = dx + r * COLS;
            #pragma omp simd
            for (long c = 0; c < COLS; c++) {
                const T xh = (xr[c] - mean) * rstd;
                dr[c] = ((gr[c] WEIGHT - mg) - xh * mgx) * rstd;
            }
        }
    }
    if (DW) for (long c = 0; c < COLS; c++) dw[c] = (T)acc[c];
    if (DB) for (long c = 0; c < COLS; c++) db[c] = (T)acc[COLS + c];
}
"""


# Each window's first maximum and its flat index in the H x W plane, as the op's tile path; a NaN
# is the maximum, the first one (as NumPy's argmax, the op's general path). One output row at a
# time, window offset by offset in row-major order, without branches (random data mispredicts
# half of them): the comparisons vectorise along the row.
_MAX_POOL = """void KNAME(const T *restrict x, T *restrict y, long long *restrict idx) {
    for (long p = 0; p < PLANES; p++) {
        const T *xp = x + p * (IMG_H * IMG_W);
        for (long oh = 0; oh < OUT_H; oh++) {
            T *yr = y + (p * OUT_H + oh) * OUT_W;
            long long *ir = idx + (p * OUT_H + oh) * OUT_W;
            const long base = oh * WIN_H * IMG_W;
            #pragma omp simd
            for (long ow = 0; ow < OUT_W; ow++) { yr[ow] = xp[base + ow * WIN_W]; ir[ow] = base + ow * WIN_W; }
            for (long k = 1; k < WIN_H * WIN_W; k++) {
                const long off = base + (k / WIN_W) * IMG_W + k % WIN_W;
                #pragma omp simd
                for (long ow = 0; ow < OUT_W; ow++) {
                    const T v = xp[off + ow * WIN_W], m = yr[ow];
                    const int take = (v > m) | ((v != v) & (m == m));
                    yr[ow] = take ? v : m;
                    ir[ow] = take ? off + ow * WIN_W : ir[ow];
                }
            }
        }
    }
}
"""

# Disjoint windows: each index appears once per plane, so a store (no sum) as the op's own.
_MAX_POOL_BWD = """void KNAME(const T *restrict g, const long long *restrict idx, T *restrict o) {
    for (long q = 0; q < PLANES * PLANE_IN; q++) o[q] = 0;
    for (long p = 0; p < PLANES; p++) {
        const T *gp = g + p * PLANE_OUT;
        const long long *ip = idx + p * PLANE_OUT;
        T *op = o + p * PLANE_IN;
        for (long i = 0; i < PLANE_OUT; i++) op[ip[i]] = gp[i];
    }
}
"""

# Pieces two kernels share: the row's max (softmaxes), its mean and 1/std (layer norms).
_PIECES = {
    "        ROW_MAX\n": """        T m = xr[0];
        for (long c = 1; c < COLS; c++) m = xr[c] > m ? xr[c] : m;
""",
    "        MEAN_RSTD\n": """        T s = 0;
        #pragma omp simd reduction(+:s)
        for (long c = 0; c < COLS; c++) s += xr[c];
        const T mean = s / (T)COLS;
        T v = 0;
        #pragma omp simd reduction(+:v)
        for (long c = 0; c < COLS; c++) { const T d = xr[c] - mean; v += d * d; }
        const T rstd = (T)1 / sqrtF(v / (T)COLS + (T)EPS);
""",
}


for _token, _piece in _PIECES.items():  # once, at import
    _SOFTMAX, _LOG_SOFTMAX, _LAYER_NORM, _LAYER_NORM_BWD = (
        t.replace(_token, _piece) for t in (_SOFTMAX, _LOG_SOFTMAX, _LAYER_NORM, _LAYER_NORM_BWD))


def _fill(src: str, kname: str, dt, rows: int, cols: int, **more) -> str:
    t, f = _T[dt]
    out = (src.replace("KNAME", kname).replace("ROWS", f"{rows}L").replace("COLS", f"{cols}L")
           .replace("expF", f"exp{f}").replace("logF", f"log{f}").replace("sqrtF", f"sqrt{f}"))
    for k, v in more.items():
        out = out.replace(k, v)
    return out.replace("const T", f"const {t}").replace("T ", f"{t} ").replace("(T)", f"({t})") \
        .replace("T *", f"{t} *")


def _last_dim(dim, ndim) -> bool:
    return type(dim) is int and ndim > 0 and dim in (-1, ndim - 1)


def kernel(name: str, args: list, metas: list, out_meta, kname: str):
    """``(C source, inputs, outputs)`` for a call of op ``name`` with ``args`` (schema order;
    ``metas[i]``: the TensorMeta of a tensor argument, else None): ``inputs`` are argument
    positions passed as arrays; ``outputs`` are ``(shape, dtype)`` of the arrays to allocate,
    the last one a float64 scratch when the kernel needs one."""
    m0 = metas[0]
    if m0 is None or m0.dtype.np not in _T or not m0.shape or 0 in m0.shape:
        return None
    dt = m0.dtype.np
    shape = tuple(m0.shape)
    if name in ("softmax.int", "log_softmax.int"):
        if not _last_dim(args[1], len(shape)) or args[2] is not None:
            return None
        cols = shape[-1]
        src = _fill(_SOFTMAX if name == "softmax.int" else _LOG_SOFTMAX, kname, dt,
                    _rows(shape, 1), cols)
        return src, [0], [(shape, dt)]
    if name in ("_softmax_backward_data", "_log_softmax_backward_data"):
        if metas[1] is None or metas[1].dtype.np != dt or tuple(metas[1].shape) != shape \
                or not _last_dim(args[2], len(shape)):
            return None
        src = _fill(_SOFTMAX_BWD if name == "_softmax_backward_data" else _LOG_SOFTMAX_BWD,
                    kname, dt, _rows(shape, 1), shape[-1])
        return src, [0, 1], [(shape, dt)]
    if name == "layer_norm":
        k = len(args[1])
        w, b = metas[2], metas[3]
        if not _affine_ok(shape, k, dt, w) or not _affine_ok(shape, k, dt, b) \
                or (args[2] is not None and w is None) or (args[3] is not None and b is None):
            return None
        src = _fill(_LAYER_NORM, kname, dt, _rows(shape, k), _rows(shape[len(shape) - k:], 0),
                    EPS=repr(float(args[4])), WEIGHT="* w[c]" if w is not None else "",
                    BIAS="+ b[c]" if b is not None else "")
        return src, [0, 2, 3], [(shape, dt)]
    if name == "native_layer_norm_backward":
        k = len(args[2])
        w = metas[3]
        if metas[1] is None or metas[1].dtype.np != dt or tuple(metas[1].shape) != shape \
                or not _affine_ok(shape, k, dt, w) or (args[3] is not None and w is None):
            return None
        mask = [bool(x) for x in args[5]]
        cols = _rows(shape[len(shape) - k:], 0)
        norm = tuple(shape[len(shape) - k:])
        src = _fill(_LAYER_NORM_BWD, kname, dt, _rows(shape, k), cols,
                    EPS=repr(float(args[4])), WEIGHT="* w[c]" if w is not None else "",
                    DX="1" if mask[0] else "0", DW="1" if mask[1] else "0",
                    DB="1" if mask[2] else "0")
        outs = [(shape if mask[0] else (0,), dt), (norm if mask[1] else (0,), dt),
                (norm if mask[2] else (0,), dt), ((2 * cols,), np.dtype(np.float64))]
        return src, [0, 1, 3], outs
    if name == "max_pool2d_with_indices":
        return _max_pool(args, shape, dt, kname)
    if name == "_max_pool2d_backward":
        i = metas[1]
        size = tuple(args[2])
        if not args[3] or len(shape) < 2 or i is None or i.dtype.np != np.dtype(np.int64) \
                or tuple(i.shape) != shape or len(size) != len(shape) \
                or size[:-2] != shape[:-2] or 0 in size:
            return None  # overlapping windows sum in float64 (the op's bincount)
        src = _fill(_MAX_POOL_BWD, kname, dt, 0, 0, PLANES=f"{_rows(shape, 2)}L",
                    PLANE_OUT=f"{shape[-2] * shape[-1]}L", PLANE_IN=f"{size[-2] * size[-1]}L")
        return src, [0, 1], [(size, dt)]
    return None


def _pair(v) -> tuple:
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return v * 2 if len(v) == 1 else v


def _max_pool(args, shape, dt, kname: str):
    """Disjoint windows without padding or dilation (stride = kernel), as CNNs pool."""
    if len(shape) not in (3, 4) or len(args) != 6:
        return None
    k, s = _pair(args[1]), _pair(args[2]) if args[2] not in ((), []) else _pair(args[1])
    if len(k) != 2 or s != k or _pair(args[3]) != (0, 0) or _pair(args[4]) != (1, 1) \
            or any(type(x) is not int or x < 1 for x in k):
        return None
    h, w = shape[-2:]
    if h < k[0] or w < k[1] or (args[5] and (h % k[0] or w % k[1])):
        return None  # (ceil_mode adds a partial window unless the sizes divide)
    oh, ow = h // k[0], w // k[1]
    out = tuple(shape[:-2]) + (oh, ow)
    src = _fill(_MAX_POOL, kname, dt, 0, 0, PLANES=f"{_rows(shape, 2)}L", IMG_H=f"{h}L",
                IMG_W=f"{w}L", OUT_H=f"{oh}L", OUT_W=f"{ow}L", WIN_H=f"{k[0]}L",
                WIN_W=f"{k[1]}L")
    return src, [0], [(out, dt), (out, np.dtype(np.int64))]


def _rows(shape, k: int) -> int:
    n = 1
    for s in shape[:len(shape) - k] if k else shape:
        n *= s
    return n


def _affine_ok(shape, k, dt, m) -> bool:
    return m is None or (m.dtype.np == dt and tuple(m.shape) == tuple(shape[len(shape) - k:]))
