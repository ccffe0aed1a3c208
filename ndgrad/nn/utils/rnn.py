"""``nn.utils.rnn``: ``PackedSequence`` and packing, padding and their inverses.

Every data movement is one ``index_select`` (after a ``cat`` with a padding row where padding is
written), so all of them are differentiable through ops that already exist. The index arrays
are computed on the host from the lengths, which are host data in PyTorch too.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ... import _factories
from ..._ops.factory import full
from ..._ops.shape import cat
from ..._tensor import Tensor

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


def _long(a) -> Tensor:
    return _factories.tensor(np.asarray(a, dtype=np.int64))


def _host(t) -> np.ndarray:
    return np.asarray(t._data if isinstance(t, Tensor) else t, dtype=np.int64)


def invert_permutation(permutation):
    if permutation is None:
        return None
    p = _host(permutation)
    out = np.empty_like(p)
    out[p] = np.arange(p.size)
    return _long(out)


class PackedSequence(namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices",
                                                    "unsorted_indices"])):
    """Holds the data and list of ``batch_sizes`` of a packed sequence (as PyTorch's)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # NOTE(pytorch): PackedSequence(*data_and_batch_sizes) form
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        dev = data.device
        idx = [None if t is None else t.to(device=dev) for t in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, *idx)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, *args, **kwargs):
        return self.to("cuda", *args, **kwargs)

    def double(self):
        return type(self)(self.data.double(), self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def float(self):
        return type(self)(self.data.float(), self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


def pack_padded_sequence(input, lengths, batch_first: bool = False, enforce_sorted: bool = True) -> PackedSequence:
    """Packs a Tensor containing padded sequences of variable length."""
    lens = _host(lengths).reshape(-1)
    if enforce_sorted:
        if lens.size > 1 and np.any(lens[:-1] < lens[1:]):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can "
                "pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this "
                "requirement if you do not need ONNX exportability.")
        sorted_idx = None
        order = np.arange(lens.size)
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_idx = _long(order)
        lens = lens[order]
    if lens.size and lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if batch_first:
        input = input.transpose(0, 1)
    t_in, b = input.shape[0], input.shape[1]
    if lens.size != b:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {lens.size} "
                           f"(batch_size={b})")
    if lens[0] > t_in:
        raise RuntimeError(f"Expected sequence length to be larger than or equal to {lens[0]}, "
                           f"but got {t_in}")
    steps = np.arange(lens[0])
    batch_sizes = (lens[None, :] > steps[:, None]).sum(1)
    rows = np.concatenate([t * b + order[:n] for t, n in zip(steps, batch_sizes, strict=True)])
    flat = input.reshape((t_in * b,) + tuple(input.shape[2:]))
    data = flat.index_select(0, _long(rows))
    return PackedSequence(data, _long(batch_sizes), sorted_idx, invert_permutation(sorted_idx))


def _gather_padded(data, rows, pad_value, shape):
    """``data`` rows at ``rows`` (row ``len(data)`` being the padding value), reshaped."""
    pad = full((1,) + tuple(data.shape[1:]), pad_value, dtype=data.dtype, device=data.device)
    src = cat([data, pad], 0)
    return src.index_select(0, _long(rows.reshape(-1))).reshape(shape + tuple(data.shape[1:]))


def pad_packed_sequence(sequence, batch_first: bool = False, padding_value: float = 0.0, total_length=None):
    """Pads a packed batch of variable length sequences; returns ``(padded, lengths)``."""
    data, batch_sizes = sequence.data, _host(sequence.batch_sizes)
    max_len = batch_sizes.size
    if total_length is not None:
        if total_length < max_len:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {max_len}")
    else:
        total_length = max_len
    b = int(batch_sizes[0]) if max_len else 0
    n = data.shape[0]
    rows = np.full((total_length, b), n, dtype=np.int64)
    start = 0
    for t, k in enumerate(batch_sizes):
        rows[t, :k] = np.arange(start, start + k)
        start += k
    lengths = (batch_sizes[None, :] > np.arange(b)[:, None]).sum(1)
    if sequence.unsorted_indices is not None:
        un = _host(sequence.unsorted_indices)
        rows, lengths = rows[:, un], lengths[un]
    if batch_first:
        rows = rows.T
    out = _gather_padded(data, np.ascontiguousarray(rows), padding_value, rows.shape)
    return out, _long(lengths)


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"):
    """Pads a list of variable length Tensors with ``padding_value``."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    lens = np.array([s.shape[0] for s in sequences], dtype=np.int64)
    t, b = int(lens.max()), len(sequences)
    n = int(lens.sum())
    rows = np.full((t, b), n, dtype=np.int64)
    start = 0
    for j, k in enumerate(lens):
        off = 0 if padding_side == "right" else t - k
        rows[off:off + k, j] = np.arange(start, start + k)
        start += k
    if batch_first:
        rows = rows.T
    return _gather_padded(cat(sequences, 0), np.ascontiguousarray(rows), padding_value, rows.shape)


def unpad_sequence(padded_sequences, lengths, batch_first: bool = False):
    """Unpads a padded Tensor into a list of variable length Tensors."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:int(n)] for seq, n in zip(padded_sequences.unbind(0), _host(lengths), strict=True)]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Packs a list of variable length Tensors."""
    lengths = [v.size(0) for v in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """Unpacks a PackedSequence into a list of variable length Tensors."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
