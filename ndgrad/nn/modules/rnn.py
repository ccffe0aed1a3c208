"""RNN, LSTM, GRU and their single-step cells, with PyTorch's parameter names, order and init.

A layer projects the inputs of all time steps in one ``linear`` call, then loops over time with
one ``mm`` per step and one fused gate op (``_ops/rnn.py``: ``_lstm_cell``, ``_gru_cell``; RNN uses
``tanh``/``relu``). Padded and packed input share one loop: a padded batch is packed data whose
batch sizes are all equal; a shrinking batch slices the hidden state, as PyTorch's packed kernels do.
"""

from __future__ import annotations

import math
import numbers
import warnings

from ..._ops.factory import empty, zeros
from ..._ops.nn import dropout as _dropout
from ..._ops.rnn import gru_cell, lstm_cell, lstm_layer
from ..._ops.shape import cat, stack
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNBase", "RNNCell", "RNNCellBase"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _step_rnn(act):
    def step(gi, h, c, w_hh_t, b_hh, w_hr_t):
        pre = gi + h.mm(w_hh_t)
        return (pre.tanh() if act == "tanh" else pre.relu()), None
    return step


def _step_lstm(gi, h, c, w_hh_t, b_hh, w_hr_t):
    hy, cy = lstm_cell(gi, h.mm(w_hh_t), c)
    return (hy if w_hr_t is None else hy.mm(w_hr_t)), cy


def _step_gru(gi, h, c, w_hh_t, b_hh, w_hr_t):
    hg = h.mm(w_hh_t) if b_hh is None else b_hh.addmm(h, w_hh_t)
    return gru_cell(gi, hg, h), None


def _direction(step, gis, batch_sizes, h0, c0, w_hh_t, b_hh, w_hr_t, reverse):
    """One direction of one layer over packed steps: per-step outputs (time order) and final
    ``(h, c)`` in batch order."""
    outs = [None] * len(gis)
    h, c = h0, c0
    if not reverse:
        done_h, done_c = [], []
        for t, gi in enumerate(gis):
            b = batch_sizes[t]
            if b < h.shape[0]:  # sequences ending here keep their last state
                done_h.append(h[b:])
                h = h[:b]
                if c is not None:
                    done_c.append(c[b:])
                    c = c[:b]
            h, c = step(gi, h, c, w_hh_t, b_hh, w_hr_t)
            outs[t] = h
        if done_h:
            h = cat([h] + done_h[::-1], 0)
            if c is not None:
                c = cat([c] + done_c[::-1], 0)
        return outs, h, c
    n = h0.shape[0]
    first = batch_sizes[-1]
    if first < n:
        h = h0[:first]
        c = None if c0 is None else c0[:first]
    for t in range(len(gis) - 1, -1, -1):
        b = batch_sizes[t]
        if b > h.shape[0]:  # sequences starting here (in reverse) begin from their h0
            h = cat([h, h0[h.shape[0]:b]], 0)
            if c is not None:
                c = cat([c, c0[c.shape[0]:b]], 0)
        h, c = step(gis[t], h, c, w_hh_t, b_hh, w_hr_t)
        outs[t] = h
    return outs, h, c


class RNNBase(Module):
    """Base class for RNN, LSTM and GRU (PyTorch's parameter layout)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if (not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1
                or isinstance(dropout, bool)):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if mode != "LSTM" and proj_size:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                in_size = input_size if layer == 0 else real_hidden * num_directions
                sfx = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih_l{}{}", (gate_size, in_size)), ("weight_hh_l{}{}", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih_l{}{}", (gate_size,)), ("bias_hh_l{}{}", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr_l{}{}", (proj_size, hidden_size)))
                names = []
                for fmt, shape in shapes:
                    name = fmt.format(layer, sfx)
                    setattr(self, name, Parameter(empty(shape, device=device, dtype=dtype)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def flatten_parameters(self) -> None:
        """A no-op: there is no fused weight buffer to compact."""

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, w) for w in ws] for ws in self._all_weights]

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # --- forward ---
    def _check_input(self, input, batch_sizes) -> None:
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def _hidden_shape(self, input, batch_sizes, real=True):
        mini_batch = int(batch_sizes[0]) if batch_sizes is not None else (
            input.size(0) if self.batch_first else input.size(1))
        h = self.proj_size if (real and self.proj_size > 0) else self.hidden_size
        return (self.num_layers * (2 if self.bidirectional else 1), mini_batch, h)

    @staticmethod
    def _check_hidden(hx, expected, msg="Expected hidden size {}, got {}") -> None:
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(msg.format(list(expected), list(hx.shape)))

    def _prepare(self, input, hx):
        """-> (x data (N, F), batch_sizes list, T, B, sorted/unsorted indices, batched, packed, hx)."""
        name = type(self).__name__
        if isinstance(input, PackedSequence):
            data, bs_t, sorted_idx, unsorted_idx = input
            batch_sizes = [int(b) for b in bs_t.tolist()]
            if hx is not None and sorted_idx is not None:
                hx = tuple(h.index_select(1, sorted_idx) for h in hx) if isinstance(hx, tuple) else \
                    hx.index_select(1, sorted_idx)
            return data, batch_sizes, bs_t, sorted_idx, unsorted_idx, True, True, hx
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(1)
            if hx is not None:
                if isinstance(hx, tuple):
                    if hx[0].dim() != 2 or hx[1].dim() != 2:
                        raise RuntimeError("For unbatched 2-D input, hx and cx should also be 2-D but got "
                                           f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                    hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
                else:
                    if hx.dim() != 2:
                        raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                           f"{hx.dim()}-D tensor")
                    hx = hx.unsqueeze(1)
        elif hx is not None:
            if isinstance(hx, tuple):
                if hx[0].dim() != 3 or hx[1].dim() != 3:
                    raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D but got "
                                       f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
            elif hx.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
        self._check_input(input, None)
        if self.batch_first:
            input = input.transpose(0, 1)
        t, b = input.shape[0], input.shape[1]
        data = input.reshape(t * b, input.shape[2])
        return data, [b] * t, None, None, None, batched, False, hx

    def _run(self, data, batch_sizes, h0, c0):
        """All layers over packed data; returns (output data, h_n, c_n)."""
        mode = self.mode
        step = (_step_lstm if mode == "LSTM" else _step_gru if mode == "GRU"
                else _step_rnn("tanh" if mode == "RNN_TANH" else "relu"))
        dirs = 2 if self.bidirectional else 1
        uniform = batch_sizes.count(batch_sizes[0]) == len(batch_sizes)
        t = len(batch_sizes)
        hs, cs = [], []
        x = data
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:
                x = _dropout(x, self.dropout, True)
            outs = []
            for d in range(dirs):
                ws = [getattr(self, n) for n in self._all_weights[layer * dirs + d]]
                w_ih, w_hh = ws[0], ws[1]
                b_ih, b_hh = (ws[2], ws[3]) if self.bias else (None, None)
                w_hr_t = ws[-1].t() if self.proj_size > 0 else None
                if mode != "GRU" and b_ih is not None:
                    b_ih, b_hh = b_ih + b_hh, None  # one bias add for the whole sequence
                gi = F.linear(x, w_ih, b_ih)
                i = layer * dirs + d
                if mode == "LSTM" and uniform and w_hr_t is None:  # the whole recurrence is one op
                    gi = gi.view(t, batch_sizes[0], gi.shape[-1])
                    out, h, c, _, _ = lstm_layer(gi.flip(0) if d else gi, h0[i], c0[i], w_hh)
                    outs.append((out.flip(0) if d else out).reshape(-1, out.shape[-1]))
                    hs.append(h)
                    cs.append(c)
                    continue
                gis = gi.view(t, batch_sizes[0], gi.shape[-1]).unbind(0) if uniform else gi.split(batch_sizes)
                out, h, c = _direction(step, gis, batch_sizes, h0[i], None if c0 is None else c0[i],
                                       w_hh.t(), b_hh, w_hr_t, d == 1)
                outs.append(cat(out, 0))
                hs.append(h)
                cs.append(c)
            x = outs[0] if dirs == 1 else cat(outs, 1)
        return x, stack(hs, 0), (stack(cs, 0) if c0 is not None else None)

    def _forward(self, input, hx, lstm):
        data, batch_sizes, bs_t, sorted_idx, unsorted_idx, batched, packed, hx = self._prepare(input, hx)
        if packed:
            self._check_input(data, batch_sizes)
        shape = self._hidden_shape(data, batch_sizes)
        cshape = self._hidden_shape(data, batch_sizes, real=False)
        if hx is None:
            h0 = zeros(shape, dtype=data.dtype, device=data.device)
            c0 = zeros(cshape, dtype=data.dtype, device=data.device) if lstm else None
        elif lstm:
            h0, c0 = hx
            self._check_hidden(h0, shape, "Expected hidden[0] size {}, got {}")
            self._check_hidden(c0, cshape, "Expected hidden[1] size {}, got {}")
        else:
            h0, c0 = hx, None
            self._check_hidden(h0, shape)
        out, hn, cn = self._run(data, batch_sizes, h0, c0)
        if packed:
            output = PackedSequence(out, bs_t, sorted_idx, unsorted_idx)
            if unsorted_idx is not None:
                hn = hn.index_select(1, unsorted_idx)
                cn = None if cn is None else cn.index_select(1, unsorted_idx)
        else:
            output = out.view(len(batch_sizes), batch_sizes[0], out.shape[-1])
            if self.batch_first:
                output = output.transpose(0, 1)
            if not batched:
                output = output.squeeze(1)
                hn = hn.squeeze(1)
                cn = None if cn is None else cn.squeeze(1)
        return output, ((hn, cn) if lstm else hn)


class RNN(RNNBase):
    """Elman RNN with ``tanh`` or ``relu`` non-linearity.

    >>> RNN(3, 4)(ndgrad.zeros(5, 2, 3))[0].shape
    ndgrad.Size([5, 2, 4])
    """

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward(input, hx, False)


class LSTM(RNNBase):
    """Multi-layer long short-term memory RNN; returns ``output, (h_n, c_n)``.

    >>> LSTM(3, 4, 2)(ndgrad.zeros(5, 2, 3))[1][0].shape
    ndgrad.Size([2, 2, 4])
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward(input, hx, True)


class GRU(RNNBase):
    """Multi-layer gated recurrent unit RNN.

    >>> GRU(3, 4)(ndgrad.zeros(5, 2, 3))[0].shape
    ndgrad.Size([5, 2, 4])
    """

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward(input, hx, False)


# --- cells ---
class RNNCellBase(Module):
    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _batched(self, input, hx, name):
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for h in (hx if isinstance(hx, tuple) else (hx,)):
                if h.dim() not in (1, 2):
                    raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {h.dim()}D instead")
        return input.dim() == 2

    def _zeros(self, input):
        return zeros((input.size(0), self.hidden_size), dtype=input.dtype, device=input.device)


class RNNCell(RNNCellBase):
    """An Elman RNN cell with tanh or ReLU non-linearity."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        batched = self._batched(input, hx, "RNNCell")
        if not batched:
            input = input.unsqueeze(0)
        hx = self._zeros(input) if hx is None else (hx if batched else hx.unsqueeze(0))
        pre = F.linear(input, self.weight_ih, self.bias_ih) + F.linear(hx, self.weight_hh, self.bias_hh)
        if self.nonlinearity == "tanh":
            ret = pre.tanh()
        elif self.nonlinearity == "relu":
            ret = pre.relu()
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return ret if batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    """A long short-term memory cell; returns ``(h_1, c_1)``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        batched = self._batched(input, hx, "LSTMCell")
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            z = self._zeros(input)
            hx = (z, z)
        elif not batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        hy, cy = lstm_cell(F.linear(input, self.weight_ih, self.bias_ih),
                           F.linear(hx[0], self.weight_hh, self.bias_hh), hx[1])
        return (hy, cy) if batched else (hy.squeeze(0), cy.squeeze(0))


class GRUCell(RNNCellBase):
    """A gated recurrent unit cell."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        batched = self._batched(input, hx, "GRUCell")
        if not batched:
            input = input.unsqueeze(0)
        hx = self._zeros(input) if hx is None else (hx if batched else hx.unsqueeze(0))
        ret = gru_cell(F.linear(input, self.weight_ih, self.bias_ih),
                       F.linear(hx, self.weight_hh, self.bias_hh), hx)
        return ret if batched else ret.squeeze(0)
