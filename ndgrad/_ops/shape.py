"""Shape ops and views: view, expand, squeeze, permute, narrow, select, slice, alias, diagonal,
unbind/split/chunk (multi-output views), flatten/unflatten, cat/stack, repeat, flip, roll, tril/triu.

A view op's schema says ``Tensor(a) self -> Tensor(a)``: its forward must return a NumPy view
(no copy), and the dispatcher links the output to the base for version counting and CopySlices.
Ops that may copy (``reshape``, ``flatten``) are composites choosing a view when one exists.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _backend
from .. import _dtype as D
from .._tensor import _wrap_dim, check_inplace
from .registry import NAMESPACES, defcomposite, defop
from .samples import nc, sample


def size_arg(size) -> tuple:
    """``x.view(2, 3)`` and ``x.view((2, 3))`` alike: a tuple of ints."""
    if len(size) == 1 and not isinstance(size[0], (int, np.integer)):
        size = size[0]
    return tuple(map(int, size))


def infer_size(shape, numel: int) -> tuple:
    shape = tuple(shape)
    if -1 not in shape and (not shape or min(shape) >= 0):  # the common case, in C-level calls
        if math.prod(shape) != numel:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        return shape
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {s}")
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = shape[: neg[0]] + (numel // known,) + shape[neg[0] + 1:]
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def dims_arg(dim, ndim: int):
    """Normalise a dim argument (int, sequence or None) into a sorted tuple of positive dims."""
    if dim is None:
        return None
    if isinstance(dim, (int, np.integer)):
        return (_wrap_dim(int(dim), ndim),)
    out = tuple(sorted(_wrap_dim(int(d), ndim) for d in dim))
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {out[0]} appears multiple times in the list of dims")
    return out if out else None


# --- view / expand ---
def _view(x, size):
    shape = infer_size(size, x.size)
    if x.flags.c_contiguous:  # reshaping a C-contiguous array never copies: the cheap method
        return x.reshape(shape)
    try:
        return np.reshape(x, shape, copy=False)
    except ValueError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension "
            "spans across two contiguous subspaces). Use .reshape(...) instead."
        ) from None


_view_rec = defop("view(Tensor(a) self, int[] size) -> Tensor(a)", _view,
                  {"self": lambda grad, self_shape: grad.reshape(self_shape)}, jvp="linear",
                  method=False, api=False,
                  samples=lambda rng: [sample("flat", rng.standard_normal((3, 4)), (12,)),
                                       sample("infer", rng.standard_normal((2, 6)), (3, -1)),
                                       sample("0d", rng.standard_normal(()), (1, 1)),
                                       sample("T_split", rng.standard_normal((4, 3)).T, (3, 2, 2))])


def view(self, *size):
    """``Tensor.view(*shape)``: the same data with another shape, never a copy."""
    if len(size) == 1 and not isinstance(size[0], (int, np.integer, tuple, list)):
        return self.to(size[0]) if size[0] is not None else self  # view(dtype) unsupported: cast
    return _view_rec.call(self, size_arg(size))


from .._tensor import Tensor as _Tensor  # noqa: E402

_Tensor.view = view


def _expand(x, size, implicit):
    size = tuple(size)
    if len(size) < x.ndim:
        raise RuntimeError(
            f"expand(ndgrad.{_legacy(x)}{{{list(x.shape)}}}, size={list(size)}): the number of sizes provided "
            f"({len(size)}) must be greater or equal to the number of dimensions in the tensor ({x.ndim})"
        )
    lead = len(size) - x.ndim
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(size))
    for i in range(x.ndim):
        if x.shape[i] != 1 and x.shape[i] != shape[lead + i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[lead + i]}) must match the existing size "
                f"({x.shape[i]}) at non-singleton dimension {lead + i}.  Target sizes: {list(size)}.  "
                f"Tensor sizes: {list(x.shape)}"
            )
    if math.prod(shape) == x.size:  # only size-1 dims added or kept: a plain (writable) view
        return x.reshape(shape)
    return np.broadcast_to(x, shape)


def _legacy(x):
    from .. import _dtype as D

    return D._FROM_NP[x.dtype].legacy


_expand_rec = defop("expand(Tensor(a) self, int[] size, *, bool implicit=False) -> Tensor(a)", _expand,
                    {"self": lambda grad, self_shape: grad.sum_to_size(self_shape)}, jvp="linear",
                    method=False, api=False,
                    samples=lambda rng: [sample("rows", rng.standard_normal((1, 4)), (3, 4)),
                                         sample("new_dim", rng.standard_normal((3,)), (2, 3)),
                                         sample("keep", rng.standard_normal((3, 1)), (-1, 5)),
                                         sample("0d", rng.standard_normal(()), (2, 2))])


def expand(self, *size):
    return _expand_rec.call(self, size_arg(size))


def expand_as(self, other):
    return _expand_rec.call(self, tuple(other.shape))


def view_as(self, other):
    return self.view(tuple(other.shape))


_Tensor.expand = expand
_Tensor.expand_as = expand_as
_Tensor.view_as = view_as


# --- dims ---
def _squeeze(x, dim):
    if dim is None:
        return np.squeeze(x)
    dims = dims_arg(dim, x.ndim) or ()
    dims = tuple(d for d in dims if x.ndim and x.shape[d] == 1)
    return np.squeeze(x, axis=dims) if dims else x.view()


defop("squeeze(Tensor(a) self, int[]? dim=None) -> Tensor(a)", _squeeze,
      {"self": lambda grad, self_shape: grad.reshape(self_shape)}, jvp="linear",
      samples=lambda rng: [sample("all", rng.standard_normal((1, 3, 1))),
                           sample("dim", rng.standard_normal((1, 3, 1)), 2),
                           sample("dims", rng.standard_normal((1, 3, 1)), (0, 1)),
                           sample("noop", rng.standard_normal((2, 3)), 0)])


def _unsqueeze(x, dim):
    return np.expand_dims(x, _wrap_dim(dim, x.ndim + 1))


defop("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", _unsqueeze,
      {"self": lambda grad, dim: grad.squeeze(dim)}, jvp="linear",
      samples=lambda rng: [sample("front", rng.standard_normal((3, 4)), 0),
                           sample("neg", rng.standard_normal((3, 4)), -1),
                           sample("0d", rng.standard_normal(()), 0)])


def _transpose(x, dim0, dim1):
    if x.ndim == 0:
        return x.view()
    return np.swapaxes(x, _wrap_dim(dim0, x.ndim), _wrap_dim(dim1, x.ndim))


defop("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", _transpose,
      {"self": lambda grad, dim0, dim1: grad.transpose(dim0, dim1)}, jvp="linear",
      samples=lambda rng: [sample("2d", rng.standard_normal((3, 4)), 0, 1),
                           sample("3d_neg", rng.standard_normal((2, 3, 4)), -1, 0),
                           sample("nc", nc(rng.standard_normal((3, 4))), 1, 0)])


def _permute(x, dims):
    dims = tuple(_wrap_dim(d, x.ndim) for d in dims)
    if len(dims) != x.ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
            f"of the desired ordering of dimensions i.e. input.dim() = {x.ndim} is not equal to "
            f"len(dims) = {len(dims)}"
        )
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return np.transpose(x, dims)


def _inverse_perm(dims):
    n = len(dims)
    inv = [0] * n
    for i, d in enumerate(dims):
        inv[d % n] = i
    return tuple(inv)


_permute_rec = defop("permute(Tensor(a) self, int[] dims) -> Tensor(a)", _permute,
                     {"self": lambda grad, dims: grad.permute(_inverse_perm(dims))}, jvp="linear",
                     method=False,
                     samples=lambda rng: [sample("3d", rng.standard_normal((2, 3, 4)), (2, 0, 1)),
                                          sample("neg", rng.standard_normal((2, 3, 4)), (-1, -2, -3))])


def permute(self, *dims):
    return _permute_rec.call(self, size_arg(dims))


_Tensor.permute = permute


def _t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x.T


defop("t(Tensor(a) self) -> Tensor(a)", _t, {"self": lambda grad: grad.t()}, jvp="linear",
      samples=lambda rng: [sample("2d", rng.standard_normal((3, 4))), sample("1d", rng.standard_normal((3,)))])


# --- the inverse of a view's indexing (select, slice, narrow backward) ---
def _slice_backward(grad, shape, key):
    out = _backend.namespace_of(grad).zeros(shape, grad.dtype)
    out[key] = grad
    return out


slice_backward = defop("_slice_backward(Tensor grad, int[] shape, Any key) -> Tensor", _slice_backward,
                       {"grad": lambda grad, key: grad[key]}, jvp="linear",
                       method=False, api=False).call


# --- slices of one dim: narrow, select ---
def _dim_key(dim: int, item) -> tuple:
    return (slice(None),) * dim + (item, Ellipsis)  # Ellipsis: an int index gives a 0-d view, not a scalar


def _narrow_args(shape, dim, start, length):
    if not shape:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    dim = _wrap_dim(dim, len(shape))
    size = shape[dim]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return _dim_key(dim, slice(start, start + length))


defop("narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)",
      lambda x, dim, start, length: x[_narrow_args(x.shape, dim, start, length)],
      {"self": lambda grad, self_shape, dim, start, length:
          slice_backward(grad, self_shape, _narrow_args(self_shape, dim, start, length))},
      jvp="linear", node_name="SliceBackward0",
      samples=lambda rng: [sample("mid", rng.standard_normal((5, 3)), 0, 1, 3),
                           sample("neg", nc(rng.standard_normal((3, 6))), -1, -4, 2)])


def _select_key(shape, dim, index):
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim = _wrap_dim(dim, len(shape))
    if not -shape[dim] <= index < shape[dim]:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(shape)} at dimension {dim}")
    return _dim_key(dim, index)


defop("select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)",
      lambda x, dim, index: x[_select_key(x.shape, dim, index)],
      {"self": lambda grad, self_shape, dim, index:
          slice_backward(grad, self_shape, _select_key(self_shape, dim, index))}, jvp="linear",
      samples=lambda rng: [sample("row", rng.standard_normal((3, 4)), 0, 1),
                           sample("neg", nc(rng.standard_normal((3, 4))), -1, -2),
                           sample("1d", rng.standard_normal((4,)), 0, 3)])


def _slice_key(shape, dim, start, end, step):
    if not shape:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    return _dim_key(_wrap_dim(dim, len(shape)), slice(start, end, step))  # clamps as PyTorch does


# What ``x[a:b:c]`` records (one node per sliced dim); no public name in PyTorch either.
slice_rec = defop(
    "slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)",
    lambda x, dim, start, end, step: x[_slice_key(x.shape, dim, start, end, step)],
    {"self": lambda grad, self_shape, dim, start, end, step:
        slice_backward(grad, self_shape, _slice_key(self_shape, dim, start, end, step))},
    jvp="linear", api=False, method=False, torch="torch.ops.aten.slice.Tensor",
    samples=lambda rng: [sample("rows", rng.standard_normal((5, 3)), 0, 1, 4),
                         sample("step_nc", nc(rng.standard_normal((3, 6))), -1, None, None, 2),
                         sample("clamp", rng.standard_normal((4,)), 0, -10, 10),
                         sample("neg", rng.standard_normal((3, 4)), 1, -3, -1)])

# What ``x[...]`` records: a new tensor sharing all of ``self``.
alias_rec = defop("alias(Tensor(a) self) -> Tensor(a)", lambda x: x.view(), {"self": lambda grad: grad},
                  jvp="linear", api=False, method=False, torch="torch.ops.aten.alias",
                  samples=lambda rng: [sample("2d", rng.standard_normal((3, 4))),
                                       sample("0d", rng.standard_normal(()))])


# --- diagonals ---
def _diag_view(x, offset, dim1, dim2):
    """The (writeable) view of the diagonal of ``x`` over dims ``dim1``/``dim2``, put last.

    NumPy's ``diagonal`` is a read-only view (CuPy's writes through): made writeable here, where
    ``x`` is, so that in-place ops on the result reach ``x``."""
    v = x.diagonal(offset, dim1, dim2)
    if not getattr(v.flags, "writeable", True) and x.flags.writeable:
        v.flags.writeable = True
    return v


def _diag_dims(ndim, dim1, dim2):
    d1, d2 = _wrap_dim(dim1, ndim), _wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def _diagonal(x, offset, dim1, dim2):
    return _diag_view(x, offset, *_diag_dims(x.ndim, dim1, dim2))


def _diagonal_backward(grad, shape, offset, dim1, dim2):
    out = _backend.namespace_of(grad).zeros(shape, grad.dtype)
    _diag_view(out, offset, *_diag_dims(len(shape), dim1, dim2))[...] = grad
    return out


diagonal_backward = defop(
    "diagonal_backward(Tensor grad_output, SymInt[] input_sizes, int offset, int dim1, int dim2) -> Tensor",
    _diagonal_backward,
    {"grad_output": lambda grad, offset, dim1, dim2: grad.diagonal(offset, dim1, dim2)},
    jvp="linear",
    method=False, api=False, samples=lambda rng: [sample("2d", rng.standard_normal((3,)), (3, 4), 0, 0, 1),
                                                  sample("off", rng.standard_normal((2, 3)), (2, 3, 4), -1, 2, 1)],
    torch="torch.ops.aten.diagonal_backward").call

defop("diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)", _diagonal,
      {"self": lambda grad, self_shape, offset, dim1, dim2:
          diagonal_backward(grad, self_shape, offset, dim1, dim2)}, jvp="linear",
      samples=lambda rng: [sample("square", rng.standard_normal((4, 4))),
                           sample("wide_off", rng.standard_normal((3, 5)), 1),
                           sample("neg_off_3d", nc(rng.standard_normal((3, 4, 5))), -1, 2, 0)])


def _diag_embed(x, offset, dim1, dim2):
    nd = x.ndim + 1
    d1, d2 = _diag_dims(nd, dim1, dim2)
    n = (x.shape[-1] if x.ndim else 1) + abs(offset)
    rest = iter(x.shape[:-1])
    shape = tuple(n if i in (d1, d2) else next(rest) for i in range(nd))
    out = _backend.namespace_of(x).zeros(shape, x.dtype)
    _diag_view(out, offset, d1, d2)[...] = x
    return out


defop("diag_embed(Tensor self, int offset=0, int dim1=-2, int dim2=-1) -> Tensor", _diag_embed,
      {"self": lambda grad, offset, dim1, dim2: grad.diagonal(offset, dim1, dim2)}, jvp="linear",
      samples=lambda rng: [sample("1d", rng.standard_normal((3,))),
                           sample("batch_off", rng.standard_normal((2, 3)), 1),
                           sample("dims", nc(rng.standard_normal((2, 3))), -2, 0, 2)])


# --- several views at once: unbind, split, chunk ---
def _unbind(x, dim):
    if not x.ndim:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    dim = _wrap_dim(dim, x.ndim)
    return tuple(x[_dim_key(dim, i)] for i in range(x.shape[dim]))


defop("unbind.int(Tensor(a) self, int dim=0) -> Tensor(a)[]", _unbind,
      {"self": lambda grads, dim: stack(grads, dim)}, jvp="linear",
      samples=lambda rng: [sample("rows", rng.standard_normal((3, 4))),
                           sample("neg_nc", nc(rng.standard_normal((2, 3))), -1),
                           sample("1d", rng.standard_normal((3,)))])


def _split(x, split_size, dim):
    if not x.ndim:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    dim = _wrap_dim(dim, x.ndim)
    n = x.shape[dim]
    if split_size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={split_size}")
    if split_size == 0 and n:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
    if not n:
        return (x[_dim_key(dim, slice(None))],)
    return tuple(x[_dim_key(dim, slice(i, i + split_size))] for i in range(0, n, split_size))


def _split_with_sizes(x, split_sizes, dim):
    if not x.ndim:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    dim = _wrap_dim(dim, x.ndim)
    sizes = [int(s) for s in split_sizes]
    if any(s < 0 for s in sizes):
        raise RuntimeError(
            f"split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={sizes}")
    if sum(sizes) != x.shape[dim]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {x.shape[dim]} (input tensor's size at "
            f"dimension {dim}), but got split_sizes={sizes}")
    ends = np.cumsum([0] + sizes).tolist()
    return tuple(x[_dim_key(dim, slice(a, b))] for a, b in zip(ends[:-1], ends[1:], strict=True))


_split_rec = defop("split.Tensor(Tensor(a) self, SymInt split_size, int dim=0) -> Tensor(a)[]", _split,
                   {"self": lambda grads, dim: cat(grads, dim)}, jvp="linear",
                   api=False, method=False, torch="torch.split",
                   samples=lambda rng: [sample("even", rng.standard_normal((4, 3)), 2),
                                        sample("ragged_neg", nc(rng.standard_normal((3, 5))), 2, -1)])
_split_sizes_rec = defop(
    "split_with_sizes(Tensor(a) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]", _split_with_sizes,
    {"self": lambda grads, dim: cat(grads, dim)}, jvp="linear",
    samples=lambda rng: [sample("sizes", rng.standard_normal((6, 2)), (1, 0, 2, 3)),
                         sample("neg_dim", nc(rng.standard_normal((2, 5))), [3, 2], -1)])


def split(tensor, split_size_or_sections, dim=0):
    """``torch.split``: pieces of ``split_size`` along ``dim`` (the last smaller), or the given sizes."""
    if isinstance(split_size_or_sections, (int, np.integer)):
        return _split_rec.call(tensor, int(split_size_or_sections), dim)
    return _split_sizes_rec.call(tensor, tuple(split_size_or_sections), dim)


defcomposite(split, samples=lambda rng: [sample("int", rng.standard_normal((5, 2)), 2),
                                         sample("list", rng.standard_normal((2, 5)), [1, 4], 1)])


def chunk(input, chunks, dim=0):
    """``torch.chunk``: at most ``chunks`` pieces of ``ceil(size / chunks)`` along ``dim``."""
    if not input.dim():
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input.size(dim)
    size = (n + chunks - 1) // chunks
    if size == 0:  # an empty dim still gives `chunks` (empty) pieces
        return _split_sizes_rec.call(input, (0,) * chunks, dim)
    return _split_rec.call(input, size, dim)


defcomposite(chunk, samples=lambda rng: [sample("7_by_3", rng.standard_normal((7, 2)), 3),
                                         sample("6_by_4_neg", rng.standard_normal((2, 6)), 4, -1),
                                         sample("empty", np.zeros((0, 2)), 3)])


# --- dims: movedim, flatten, unflatten ---
def _dim_list(d):
    return [int(d)] if isinstance(d, (int, np.integer)) else [int(i) for i in d]


def movedim(input, source, destination):
    """``torch.movedim``: move dims ``source`` to positions ``destination`` (a permute)."""
    src, dst = _dim_list(source), _dim_list(destination)
    nd = input.dim()
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({src} dims) should contain the same "
            f"number of dims as destination ({dst} dims)")
    s = [_wrap_dim(d, nd) for d in src]
    d = [_wrap_dim(i, nd) for i in dst]
    if len(set(s)) != len(s):
        raise RuntimeError(f"movedim: repeated dim in `source` ({src})")
    if len(set(d)) != len(d):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({dst})")
    if not nd:
        return _view_rec.call(input, ())
    perm = [-1] * nd
    for a, b in zip(s, d, strict=True):
        perm[b] = a
    rest = iter(i for i in range(nd) if i not in s)
    return _permute_rec.call(input, tuple(p if p >= 0 else next(rest) for p in perm))


defcomposite(movedim, samples=lambda rng: [sample("int", rng.standard_normal((2, 3, 4)), 0, -1),
                                           sample("seq", nc(rng.standard_normal((2, 3, 4))), (0, 1), (2, 0)),
                                           sample("0d", rng.standard_normal(()), 0, 0)])
NAMESPACES[""]["moveaxis"] = _Tensor.moveaxis = movedim


def flatten(input, start_dim=0, end_dim=-1):
    """``torch.flatten``: dims ``start_dim..end_dim`` merged into one; a view when strides allow."""
    nd = input.dim()
    s, e = _wrap_dim(start_dim, nd), _wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if not nd:
        return input.reshape(1)
    if s == e:
        return input
    shape = input.shape
    return input.reshape(tuple(shape[:s]) + (-1,) + tuple(shape[e + 1:]))


defcomposite(flatten, samples=lambda rng: [sample("all", rng.standard_normal((2, 3, 4))),
                                           sample("mid_T", rng.standard_normal((4, 3, 2)).T, 0, 1),
                                           sample("neg", rng.standard_normal((2, 3, 4)), -2),
                                           sample("same", rng.standard_normal((2, 3)), 1, 1),
                                           sample("0d", rng.standard_normal(()))])


def unflatten(input, dim, sizes):
    """``torch.unflatten``: dim ``dim`` split into ``sizes`` (one may be -1); always a view."""
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    shape = input.shape
    try:
        d = _wrap_dim(dim, len(shape)) if len(shape) else _wrap_dim(dim, -1)
        inner = infer_size(sizes, shape[d])
    except (IndexError, RuntimeError) as e:
        if "invalid for input" in str(e):
            raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim "
                               f"{dim} ({shape[d]}) in the input tensor") from None
        msg = str(e) if len(shape) else "Dimension specified as 0 but tensor has no dimensions"
        raise RuntimeError(f"unflatten got an unexpected error:\n{msg}") from None
    return _view_rec.call(input, tuple(shape[:d]) + inner + tuple(shape[d + 1:]))


defcomposite(unflatten, samples=lambda rng: [sample("mid", rng.standard_normal((3, 4)), 1, (2, 2)),
                                             sample("infer_nc", nc(rng.standard_normal((3, 6))), -1, (-1, 3))])


# --- joining: cat, stack ---
def _list_dtype(name, xs):
    """PyTorch's result dtype over a list of tensors (NumPy's promotion differs: int64+float32)."""
    if not isinstance(xs, list):
        raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        f"{'Tensor' if isinstance(xs, np.ndarray) else type(xs).__name__}")
    dt = None
    for i, x in enumerate(xs):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(x).__name__}")
        d = D._FROM_NP[x.dtype]
        dt = d if dt is None else D.promote_types(dt, d)
    return dt.np if dt is not None else None


def _cat(xs, dim):
    dt = _list_dtype("cat", xs)
    if dt is None:
        raise ValueError("ndgrad.cat(): expected a non-empty list of Tensors")
    for i, x in enumerate(xs):
        if not x.ndim:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    # NOTE(pytorch): 1-d empty tensors are skipped whatever their shape (legacy behaviour).
    keep = [x for x in xs if x.shape != (0,)] or xs[:1]
    ref = keep[0]
    d = _wrap_dim(dim, ref.ndim)
    for i, x in enumerate(xs):
        if x.shape == (0,) and x is not ref:
            continue
        if x.ndim != ref.ndim:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {ref.ndim} and {x.ndim}")
        for k in range(ref.ndim):
            if k != d and x.shape[k] != ref.shape[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{ref.shape[k]} but got size {x.shape[k]} for tensor number {i} in the list.")
    return np.concatenate(keep, axis=d, dtype=dt)


def _cat_backward(grad, tensors_shape, dim):
    out, off = [], 0
    for shape in tensors_shape:
        if shape == (0,) and grad.dim() != 1:  # a skipped legacy empty input
            out.append(grad.flatten().narrow(0, 0, 0))
            continue
        n = shape[_wrap_dim(dim, len(shape))]
        out.append(grad.narrow(dim, off, n))
        off += n
    return out


cat = defop("cat(Tensor[] tensors, int dim=0) -> Tensor", _cat, {"tensors": _cat_backward},
            jvp="linear", method=False,
            samples=lambda rng: [sample("rows", [rng.standard_normal((2, 3)), rng.standard_normal((1, 3))]),
                                 sample("neg_nc", [nc(rng.standard_normal((2, 3))),
                                                   rng.standard_normal((2, 2))], -1),
                                 sample("promote", [rng.standard_normal((2, 3)), np.arange(3).reshape(1, 3)]),
                                 sample("legacy_empty", [rng.standard_normal((2, 3)), np.zeros((0,))])]).call
NAMESPACES[""]["concat"] = NAMESPACES[""]["concatenate"] = cat


def _stack(xs, dim):
    dt = _list_dtype("stack", xs)
    if dt is None:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, x in enumerate(xs):
        if x.shape != xs[0].shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(xs[0].shape)} at "
                               f"entry 0 and {list(x.shape)} at entry {i}")
    return np.stack(xs, axis=_wrap_dim(dim, xs[0].ndim + 1), dtype=dt)


stack = defop("stack(Tensor[] tensors, int dim=0) -> Tensor", _stack,
              {"tensors": lambda grad, dim: grad.unbind(dim)}, jvp="linear", method=False,
              samples=lambda rng: [sample("front", [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))]),
                                   sample("last_nc", [nc(rng.standard_normal((2, 3))),
                                                      rng.standard_normal((2, 3))], -1),
                                   sample("0d", [rng.standard_normal(()), rng.standard_normal(())]),
                                   sample("promote", [rng.standard_normal((3,)), np.arange(3)])]).call


# --- copies that rearrange: repeat, tile, flip, roll ---
def _repeat(x, repeats):
    if len(repeats) < x.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    shape = (1,) * (len(repeats) - x.ndim) + x.shape
    if any(r < 0 for r in repeats):
        sizes = [s * r for s, r in zip(shape, repeats, strict=True)]
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: {sizes}")
    return np.tile(x, repeats)


def _repeat_backward(grad, self_shape, repeats):
    shape = (1,) * (len(repeats) - len(self_shape)) + tuple(self_shape)
    split = tuple(v for r, s in zip(repeats, shape) for v in (r, s))  # each dim as (copies, size)
    return grad.reshape(split).sum(tuple(range(0, len(split), 2))).reshape(self_shape)


_repeat_rec = defop("repeat(Tensor self, SymInt[] repeats) -> Tensor", _repeat, {"self": _repeat_backward},
                    jvp="linear", method=False, api=False, torch="Tensor.repeat",
                    samples=lambda rng: [sample("2d", rng.standard_normal((2, 3)), (2, 3)),
                                         sample("lead_nc", nc(rng.standard_normal((2, 3))), (2, 1, 2)),
                                         sample("0d", rng.standard_normal(()), (3,)),
                                         sample("zero", rng.standard_normal((2,)), (0,))])


def repeat(self, *repeats):
    """``Tensor.repeat(*repeats)``: ``self`` tiled ``repeats[i]`` times along each dim."""
    return _repeat_rec.call(self, size_arg(repeats))


def tile(input, *dims):
    """``torch.tile``: ``repeat`` with ``dims`` padded with leading ones to ``input.dim()``."""
    dims = size_arg(dims)
    return _repeat_rec.call(input, (1,) * (input.dim() - len(dims)) + dims)


_Tensor.repeat = repeat
defcomposite(tile, samples=lambda rng: [sample("few", rng.standard_normal((2, 3)), (2,)),
                                        sample("more", rng.standard_normal((3,)), (2, 2))])


def _flip(x, dims):
    if not x.ndim:
        dims_arg(dims, 0)
        return x.copy()
    return np.flip(x, dims_arg(dims, x.ndim) or ()).copy()


_flip_rec = defop("flip(Tensor self, int[] dims) -> Tensor", _flip, {"self": lambda grad, dims: grad.flip(dims)},
                  jvp="linear",
                  method=False, samples=lambda rng: [sample("one", rng.standard_normal((3, 4)), (0,)),
                                                     sample("both_nc", nc(rng.standard_normal((3, 4))), (-1, 0)),
                                                     sample("0d", rng.standard_normal(()), (0,))])


def flip(self, *dims):
    """``Tensor.flip(*dims)``: ``dims`` as varargs or one sequence (``torch.flip`` takes a sequence)."""
    return _flip_rec.call(self, size_arg(dims))


_Tensor.flip = flip


def _roll(x, shifts, dims):
    shifts, dims = _dim_list(shifts), _dim_list(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if len(shifts) != len(dims) and not (len(shifts) == 1 and not dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    if not dims:
        return np.roll(x, shifts[0])  # flattened, rolled, reshaped
    if not x.ndim:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return np.roll(x, shifts, [_wrap_dim(d, x.ndim) for d in dims])


defop("roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor", _roll,
      {"self": lambda grad, shifts, dims: grad.roll([-s for s in _dim_list(shifts)], dims)},
      jvp="linear",
      samples=lambda rng: [sample("flat", rng.standard_normal((3, 4)), 5),
                           sample("dim_neg", nc(rng.standard_normal((3, 4))), -1, 1),
                           sample("dims", rng.standard_normal((3, 4)), (1, 2), (0, -1)),
                           sample("0d", rng.standard_normal(()), 2)])


# --- triangles ---
def _triangle(name, lower):
    def fwd(x, diagonal):
        if x.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        # the mask built where ``x`` is (np.tril's own mask is a host array)
        xp = _backend.namespace_of(x)
        above = xp.arange(x.shape[-1])[None, :] - xp.arange(x.shape[-2])[:, None]
        keep = above <= diagonal if lower else above >= diagonal
        return np.where(keep, x, xp.zeros((), x.dtype))

    return fwd


for _name, _lower in (("tril", True), ("triu", False)):
    defop(f"{_name}(Tensor self, int diagonal=0) -> Tensor", _triangle(_name, _lower),
          {"self": (lambda grad, diagonal: grad.tril(diagonal)) if _name == "tril"
           else (lambda grad, diagonal: grad.triu(diagonal))}, jvp="linear",
          inplace=_name + "_",
          samples=lambda rng: [sample("square", rng.standard_normal((4, 4))),
                               sample("wide_off", rng.standard_normal((3, 5)), 1),
                               sample("batch_nc_neg", nc(rng.standard_normal((2, 3, 4))), -1)])



# --- in-place views: t_, transpose_, squeeze_, unsqueeze_ (self takes the view's metadata) ---
from ..autograd.grad_mode import state as _grad_state


_RENAMED: dict = {}


def _renamed(cls, name: str):
    """``cls`` under PyTorch's name for the in-place overload (``TBackward1``): same formulas."""
    sub = _RENAMED.get((cls, name))
    if sub is None:
        sub = _RENAMED[cls, name] = type(name, (cls,), {"__slots__": ()})
    return sub


def _inplace_view(view_name: str, name: str, node_name):
    """``Tensor.<name>``: self becomes its own view ``self.<view_name>(...)``, as in PyTorch:
    same memory, new shape and strides, the view op's node as grad_fn (named ``node_name(args)``),
    version bumped."""
    def inplace(self, *args, **kwargs):
        if _grad_state.grad_enabled and self._rg and self._grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        check_inplace(self)
        v = getattr(self, view_name)(*args, **kwargs)
        self._data = v._data
        if v._grad_fn is not None:
            node = v._grad_fn  # made by this call: renaming it touches no other graph
            node.__class__ = _renamed(type(node), node_name(*args, **kwargs))
            self._grad_fn, self._output_nr = node, v._output_nr
        if self._view is not None:  # a view stays a view of its base, one step further
            self._view = v._view
        self._bump()
        if self._view is not None:
            self._view.version = self._vc[0]
        return self

    inplace.__name__ = inplace.__qualname__ = name
    return inplace


def _squeeze_name(dim=None):
    return "SqueezeBackward" + ("3" if dim is None else "4" if isinstance(dim, int) else "5")


for _name, _view, _node in (
        ("t_", "t", lambda: "TBackward1"), ("transpose_", "transpose", lambda *a, **k: "TransposeBackward1"),
        ("squeeze_", "squeeze", _squeeze_name), ("unsqueeze_", "unsqueeze", lambda *a, **k: "UnsqueezeBackward1"),
        ("swapdims_", "transpose", lambda *a, **k: "TransposeBackward1"),
        ("swapaxes_", "transpose", lambda *a, **k: "TransposeBackward1")):
    setattr(_Tensor, _name, _inplace_view(_view, _name, _node))


# --- complex views: view_as_real, view_as_complex ---
def _view_as_real(x):
    if x.dtype.kind != "c":
        raise RuntimeError("view_as_real is only supported for complex tensors")
    re = x.real  # a view with x's strides, in the matching real dtype
    return np.lib.stride_tricks.as_strided(re, x.shape + (2,), x.strides + (re.itemsize,), subok=True)


def _view_as_complex(x):
    if x.dtype not in (np.float16, np.float32, np.float64):
        raise RuntimeError("view_as_complex is only supported for half, float and double tensors, "
                           f"but got a tensor of scalar type: {D.SHORT_NAMES[x.dtype]}")
    if x.ndim == 0 or x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if x.strides[-1] != x.itemsize:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * x.itemsize) for s in x.strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if x.dtype == np.float16:
        raise RuntimeError("view_as_complex: ComplexHalf is not supported by NumPy")
    return x.view(np.complex64 if x.dtype == np.float32 else np.complex128)[..., 0]


defop("view_as_real(Tensor(a) self) -> Tensor(a)", _view_as_real,
      {"self": lambda grad: view_as_complex(grad.contiguous())}, jvp="linear", method=False,
      samples=lambda rng: [sample("2d", rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))),
                           sample("nc", nc(rng.standard_normal((2, 3)) - 2j)),
                           sample("0d", np.array(1.5 - 0.5j))])
defop("view_as_complex(Tensor(a) self) -> Tensor(a)", _view_as_complex,
      {"self": lambda grad: view_as_real(grad)}, jvp="linear", method=False,
      extra={"complex_grad": "torch"},  # real to complex: PyTorch's form as it stands
      samples=lambda rng: [sample("2d", rng.standard_normal((3, 2)), no_grad=(0,)),
                           sample("1d", rng.standard_normal(2), no_grad=(0,))])
view_as_real = NAMESPACES[""]["view_as_real"]
view_as_complex = NAMESPACES[""]["view_as_complex"]


# ``x.real`` / ``x.imag``: views of a complex tensor's parts (a select of view_as_real, as in
# PyTorch); a real tensor is its own real part.
def real(input):
    return view_as_real(input).select(-1, 0) if input.is_complex() else input


def imag(input):
    if not input.is_complex():
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return view_as_real(input).select(-1, 1)


def _complex_parts(rng):
    z = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    return [sample("2d", z), sample("nc", nc(z))]


defcomposite(real, method=False, samples=lambda rng: _complex_parts(rng) + [sample("real", rng.standard_normal(3))])
defcomposite(imag, method=False, samples=_complex_parts)


def _set_part(part):
    def setter(self, value):
        part(self).copy_(value)
    return setter


_Tensor.real = property(real, _set_part(real))
_Tensor.imag = property(imag, _set_part(imag))
