"""The Transformer stack against PyTorch: same state dict keys, outputs and gradients (float64,
dropout off) for encoder and decoder stacks and the full model, across batch_first, norm_first,
causal and padding masks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ndgrad as nd

torch = pytest.importorskip("torch")


def _copy_weights(theirs, ours) -> None:
    state = {k: nd.from_numpy(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)


def _inputs(rng, shapes):
    arrays = [rng.standard_normal(s) for s in shapes]
    return ([torch.tensor(a, requires_grad=True) for a in arrays],
            [nd.tensor(a, requires_grad=True) for a in arrays])


def _check(t_out, n_out, t_in, n_in, t_mod, n_mod, tol=1e-10):
    np.testing.assert_allclose(n_out.detach().numpy(), t_out.detach().numpy(), rtol=tol, atol=tol)
    w = np.random.default_rng(1).standard_normal(tuple(t_out.shape))
    (t_out * torch.tensor(w)).sum().backward()
    (n_out * nd.tensor(w)).sum().backward()
    for a, b in zip(t_in, n_in):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=tol, atol=tol)
    t_params = dict(t_mod.named_parameters())
    for name, p in n_mod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), rtol=tol,
                                   atol=tol, err_msg=name)


@pytest.mark.parametrize("batch_first,norm_first", list(itertools.product([False, True], repeat=2)))
def test_full_transformer_matches_pytorch(batch_first, norm_first):
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16,
              dropout=0.0, batch_first=batch_first, norm_first=norm_first)
    torch.manual_seed(0)
    theirs = torch.nn.Transformer(**kw).double()
    ours = nd.nn.Transformer(**kw).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _copy_weights(theirs, ours)
    S, T, N = 5, 4, 3
    shape = (lambda L: (N, L, 8)) if batch_first else (lambda L: (L, N, 8))
    (ts, tt), (ns, nt) = _inputs(np.random.default_rng(0), [shape(S), shape(T)])
    t_mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    n_mask = nd.nn.Transformer.generate_square_subsequent_mask(T, dtype=nd.float64)
    np.testing.assert_array_equal(n_mask.numpy(), t_mask.numpy())
    pad = np.zeros((N, S), bool)
    pad[1, -2:] = True
    t_out = theirs(ts, tt, tgt_mask=t_mask, src_key_padding_mask=torch.tensor(pad),
                   memory_key_padding_mask=torch.tensor(pad))
    n_out = ours(ns, nt, tgt_mask=n_mask, src_key_padding_mask=nd.tensor(pad),
                 memory_key_padding_mask=nd.tensor(pad))
    _check(t_out, n_out, [ts, tt], [ns, nt], theirs, ours)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_stack_with_bool_masks_and_gelu(norm_first):
    kw = dict(d_model=6, nhead=3, dim_feedforward=12, dropout=0.0, norm_first=norm_first,
              activation="gelu")
    torch.manual_seed(1)
    t_layer = torch.nn.TransformerDecoderLayer(**kw).double()
    theirs = torch.nn.TransformerDecoder(t_layer, 2, norm=torch.nn.LayerNorm(6).double())
    n_layer = nd.nn.TransformerDecoderLayer(**kw).double()
    ours = nd.nn.TransformerDecoder(n_layer, 2, norm=nd.nn.LayerNorm(6).double())
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _copy_weights(theirs, ours)
    (tt, tm), (nt, nm) = _inputs(np.random.default_rng(2), [(4, 2, 6), (5, 2, 6)])
    causal = np.triu(np.ones((4, 4), bool), 1)
    t_out = theirs(tt, tm, tgt_mask=torch.tensor(causal))
    n_out = ours(nt, nm, tgt_mask=nd.tensor(causal))
    _check(t_out, n_out, [tt, tm], [nt, nm], theirs, ours)


def test_encoder_stack_unbatched_and_layers_are_independent_copies():
    torch.manual_seed(3)
    t_layer = torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0).double()
    theirs = torch.nn.TransformerEncoder(t_layer, 3, enable_nested_tensor=False)
    ours = nd.nn.TransformerEncoder(nd.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0).double(), 3)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight
    _copy_weights(theirs, ours)
    (ts,), (ns,) = _inputs(np.random.default_rng(4), [(5, 4)])
    _check(theirs(ts), ours(ns), [ts], [ns], theirs, ours)


def test_transformer_errors_match_pytorch():
    ours = nd.nn.Transformer(d_model=4, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                             dim_feedforward=8)
    theirs = torch.nn.Transformer(d_model=4, nhead=2, num_encoder_layers=1,
                                  num_decoder_layers=1, dim_feedforward=8)
    for src, tgt in (((5, 2, 4), (3, 3, 4)), ((5, 2, 4), (3, 2, 6))):
        with pytest.raises(RuntimeError) as want:
            theirs(torch.zeros(src), torch.zeros(tgt))
        with pytest.raises(RuntimeError) as got:
            ours(nd.zeros(src), nd.zeros(tgt))
        assert str(got.value) == str(want.value)
    # default init: xavier on every matrix, as PyTorch's _reset_parameters
    w = ours.encoder.layers[0].linear1.weight.detach().numpy()
    bound = np.sqrt(6 / (4 + 8))
    assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2
