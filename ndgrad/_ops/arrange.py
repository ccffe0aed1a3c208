"""NumPy-style arrangements as composites of views and ``cat``: broadcasting helpers, ``*stack``,
``atleast_*d``, ``tensor_split`` and ``h/v/dsplit``, ``rot90``, ``flipud``/``fliplr``,
``cartesian_prod``, ``combinations``, ``diagflat``.

Each is built from recorded ops, so gradients and views come from those; the primitives they use
live in ``shape.py``.
"""

from __future__ import annotations

import itertools

import numpy as np

from .._tensor import Size, Tensor, _wrap_dim
from .registry import NAMESPACES, defcomposite
from .samples import nc, sample

_ns = NAMESPACES[""]  # ops are looked up at call time: modules load in any order


def _r(rng, *shape):
    return rng.standard_normal(shape)


# --- broadcasting ---
def broadcast_shapes(*shapes) -> Size:
    """The shape that tensors of ``shapes`` broadcast to, without making any tensor."""
    sizes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    out = [1] * max((len(s) for s in sizes), default=0)
    for i, s in enumerate(sizes):
        for k in range(1, len(s) + 1):
            have, new = out[-k], s[-k]
            if new < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {new}: {list(s)}")
            if have == 1:
                out[-k] = new
            elif new != 1 and new != have:
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {new} at {-k}! Mismatching "
                    f"argument at index {i} had {s}; but expected shape should be broadcastable "
                    f"to {out}")
    return Size(out)


def broadcast_tensors(*tensors):
    """Views of ``tensors`` expanded to their common shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = tuple(_broadcast_shape([t.shape for t in tensors]))
    return tuple(t if tuple(t.shape) == shape else t.expand(shape) for t in tensors)


def _broadcast_shape(shapes):
    out = [1] * max((len(s) for s in shapes), default=0)
    for s in shapes:
        for k in range(1, len(s) + 1):
            if out[-k] == 1:
                out[-k] = s[-k]
            elif s[-k] not in (1, out[-k]):
                # NOTE(pytorch): broadcast_tensors reports the pair as binary ops do
                raise RuntimeError(f"The size of tensor a ({out[-k]}) must match the size of tensor "
                                   f"b ({s[-k]}) at non-singleton dimension {len(out) - k}")
    return out


_ns["broadcast_shapes"] = broadcast_shapes


# --- atleast_*d and the stacks ---
def _tensors_arg(fn: str, args):
    """``f(t)``, ``f(t1, t2)`` or ``f([t1, t2])``: (tensors, whether one tensor came alone)."""
    if len(args) == 1 and isinstance(args[0], Tensor):
        return [args[0]], True
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    for a in args:
        if not isinstance(a, Tensor):
            raise TypeError(f"{fn}() received an invalid combination of arguments - got "
                            f"({type(a).__name__}), but expected one of:\n * (Tensor input)\n"
                            " * (tuple of Tensors tensors)\n")
    return list(args), False


def _at_least(fn, make):
    def at_least(*tensors):
        ts, alone = _tensors_arg(fn, tensors)
        out = tuple(make(t) for t in ts)
        return out[0] if alone else out

    at_least.__name__ = at_least.__qualname__ = fn
    return at_least


def _as_2d(t):
    return t.reshape(1, 1) if t.dim() == 0 else (t.unsqueeze(0) if t.dim() == 1 else t)


def _as_3d(t):
    if t.dim() == 0:
        return t.reshape(1, 1, 1)
    if t.dim() == 1:
        return t.unsqueeze(0).unsqueeze(-1)
    return t.unsqueeze(-1) if t.dim() == 2 else t


atleast_1d = _at_least("atleast_1d", lambda t: t.reshape(1) if t.dim() == 0 else t)
atleast_2d = _at_least("atleast_2d", _as_2d)
atleast_3d = _at_least("atleast_3d", _as_3d)


def _nonempty(fn, tensors):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{fn} expects a non-empty TensorList")
    return tensors


def hstack(tensors, *, out=None):
    ts = [atleast_1d(t) for t in _nonempty("hstack", tensors)]
    return _ns["cat"](ts, 0 if ts[0].dim() == 1 else 1, out=out)


def vstack(tensors, *, out=None):
    return _ns["cat"]([atleast_2d(t) for t in _nonempty("vstack", tensors)], 0, out=out)


def row_stack(tensors, *, out=None):
    return vstack(tensors, out=out)


def dstack(tensors, *, out=None):
    return _ns["cat"]([atleast_3d(t) for t in _nonempty("dstack", tensors)], 2, out=out)


def column_stack(tensors, *, out=None):
    ts = [t.reshape(t.numel(), 1) if t.dim() <= 1 else t
          for t in _nonempty("column_stack", tensors)]
    return _ns["cat"](ts, 1, out=out)


# --- splits ---
def tensor_split(input, indices_or_sections, dim=0):
    """Views of ``input`` split into ``sections`` near-equal parts, or at ``indices``."""
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dim() > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional "
                               f"or one-dimensional tensor, but got a tensor with {spec.dim()} dims")
        spec = spec.item() if spec.dim() == 0 else spec.tolist()
    elif not isinstance(spec, (int, list, tuple)) or isinstance(spec, bool):
        raise TypeError(f"tensor_split() received an invalid combination of arguments - got (Tensor, "
                        f"{type(spec).__name__}), but expected one of:\n"
                        " * (Tensor input, tuple of ints indices, int dim = 0)\n"
                        " * (Tensor input, Tensor tensor_indices_or_sections, int dim = 0)\n"
                        " * (Tensor input, int sections, int dim = 0)\n")
    dim = _wrap_dim(dim, input.dim())
    n = input.shape[dim]
    if isinstance(spec, int):
        if spec <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {spec}")
        size, extra = divmod(n, spec)
        bounds = [0]
        for i in range(spec):
            bounds.append(bounds[-1] + size + (i < extra))
    else:
        bounds = [0] + [min(max(int(i), 0), n) for i in spec] + [n]
    return tuple(input.narrow(dim, lo, max(hi - lo, 0))
                 for lo, hi in itertools.pairwise(bounds))


def _numpy_split(fn, min_dims, split_dim):
    def numpy_split(input, indices_or_sections):
        if input.dim() < min_dims:
            raise RuntimeError(f"torch.{fn} requires a tensor with at least {min_dims} dimension, but "
                               f"got a tensor with {input.dim()} dimensions!")
        dim = split_dim if split_dim is not None else (1 if input.dim() > 1 else 0)
        if isinstance(indices_or_sections, int):
            n = input.shape[dim]
            if indices_or_sections == 0 or n % indices_or_sections:
                raise RuntimeError(f"torch.{fn} attempted to split along dimension {dim}, but the size "
                                   f"of the dimension {n} is not divisible by the split_size "
                                   f"{indices_or_sections}!")
        return tensor_split(input, indices_or_sections, dim)

    numpy_split.__name__ = numpy_split.__qualname__ = fn
    return numpy_split


hsplit = _numpy_split("hsplit", 1, None)
vsplit = _numpy_split("vsplit", 2, 0)
dsplit = _numpy_split("dsplit", 3, 2)


# --- rotations and flips ---
def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane ``dims``, from the first axis to the second."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    d0, d1 = _wrap_dim(dims[0], input.dim()), _wrap_dim(dims[1], input.dim())
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0, d1)
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


def flipud(input):
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip(0)


def fliplr(input):
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip(1)


# --- products of index sets ---
def _vector(t):
    if t.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")


def cartesian_prod(*tensors):
    """Rows of every combination of one element from each 1-D tensor."""
    for t in tensors:
        _vector(t)
    if len(tensors) == 1:
        return tensors[0]
    grids = _ns["meshgrid"](*tensors, indexing="ij")
    return _ns["stack"]([g.flatten() for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """Rows of the length-``r`` combinations of the elements of a 1-D tensor."""
    _vector(input)
    if r == 0:
        return input.new_empty(0)
    # every r-tuple of positions in lexicographic order (itertools' order), kept when increasing
    pos = _ns["arange"](input.shape[0], device=input.device)
    grids = _ns["meshgrid"](*([pos] * r), indexing="ij")
    idx = _ns["stack"]([g.reshape(-1) for g in grids], 1)
    step = idx[:, 1:] - idx[:, :-1]
    keep = (step >= 0 if with_replacement else step > 0).all(1)
    return input[idx[keep]]


def diagflat(input, offset=0):
    return input.flatten().diag(offset)


_METHODS = {"tensor_split", "hsplit", "vsplit", "dsplit", "rot90", "flipud", "fliplr", "diagflat"}
for _fn, _samples in (
    (broadcast_tensors, lambda rng: [sample("3", _r(rng, 3, 1), _r(rng, 4), _r(rng, 2, 1, 1)),
                                     sample("same", _r(rng, 2, 3), _r(rng, 2, 3))]),
    (atleast_1d, lambda rng: [sample("0d", _r(rng)), sample("2d", _r(rng, 2, 3))]),
    (atleast_2d, lambda rng: [sample("1d", _r(rng, 3)), sample("many", _r(rng), _r(rng, 2))]),
    (atleast_3d, lambda rng: [sample("1d", _r(rng, 3)), sample("2d_nc", nc(_r(rng, 2, 3))),
                              sample("list", [_r(rng), _r(rng, 2, 2, 2)])]),
    (hstack, lambda rng: [sample("1d", [_r(rng, 2), _r(rng, 3)]), sample("2d", [_r(rng, 2, 1), _r(rng, 2, 3)])]),
    (vstack, lambda rng: [sample("1d", [_r(rng, 3), _r(rng, 3)]), sample("2d", [_r(rng, 1, 3), _r(rng, 2, 3)])]),
    (row_stack, lambda rng: [sample("mix", [_r(rng, 3), _r(rng, 2, 3)])]),
    (dstack, lambda rng: [sample("1d", [_r(rng, 3), _r(rng, 3)]), sample("2d", [_r(rng, 2, 3), _r(rng, 2, 3)])]),
    (column_stack, lambda rng: [sample("mix", [_r(rng, 3), _r(rng, 3, 2), _r(rng, 3)])]),
    (tensor_split, lambda rng: [sample("sections", _r(rng, 7, 2), 3), sample("indices", _r(rng, 2, 6), [1, 4], 1),
                                sample("past_end", _r(rng, 5), (2, 9)),
                                sample("tensor", _r(rng, 6), np.array(4))]),
    (hsplit, lambda rng: [sample("2d", _r(rng, 2, 6), 3), sample("1d", _r(rng, 4), [1])]),
    (vsplit, lambda rng: [sample("2d", _r(rng, 4, 2), 2), sample("idx", _r(rng, 5, 2), [2, 3])]),
    (dsplit, lambda rng: [sample("3d", _r(rng, 2, 2, 4), 2)]),
    (rot90, lambda rng: [sample("1", _r(rng, 2, 3)), sample("2", _r(rng, 2, 3), 2),
                         sample("neg", nc(_r(rng, 2, 3, 2)), -1, [2, 0]), sample("0", _r(rng, 2, 3), 4)]),
    (flipud, lambda rng: [sample("2d", _r(rng, 3, 2))]),
    (fliplr, lambda rng: [sample("2d", nc(_r(rng, 3, 2)))]),
    (cartesian_prod, lambda rng: [sample("2", _r(rng, 2), _r(rng, 3)), sample("3", _r(rng, 2), _r(rng, 1), _r(rng, 2))]),
    (combinations, lambda rng: [sample("2", _r(rng, 4)), sample("3_rep", _r(rng, 3), 3, True),
                                sample("too_many", _r(rng, 2), 3)]),
    (diagflat, lambda rng: [sample("2d", _r(rng, 2, 2)), sample("offset", _r(rng, 3), -1)]),
):
    defcomposite(_fn, samples=_samples, method=_fn.__name__ in _METHODS)
