"""Recurrent programs written for PyTorch, run with ndgrad and with torch from the same initial
weights on the same synthetic data (float64): a word-level language model (embedding, 2-layer
LSTM, tied decoder) and a sequence tagger (bidirectional LSTM over packed variable-length input).
Losses must fall and track torch's step by step."""

import numpy as np
import pytest

import ndgrad as nd

torch = pytest.importorskip("torch")

VOCAB, TAGS = 12, 3


def _grammar(rng, n, length):
    """A small deterministic grammar with a little noise: next = (3 cur + 1) mod V, else random."""
    seqs = np.empty((n, length), np.int64)
    seqs[:, 0] = rng.integers(0, VOCAB, n)
    for t in range(1, length):
        noise = rng.random(n) < 0.1
        seqs[:, t] = np.where(noise, rng.integers(0, VOCAB, n), (3 * seqs[:, t - 1] + 1) % VOCAB)
    return seqs


def lm_program(tm, state=None, steps=30):
    nn, F = tm.nn, tm.nn.functional

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(VOCAB, 16)
            self.rnn = nn.LSTM(16, 16, 2)
            self.decoder = nn.Linear(16, VOCAB)
            self.decoder.weight = self.encoder.weight

        def forward(self, x, hx=None):
            out, hx = self.rnn(self.encoder(x), hx)
            return self.decoder(out), hx

    model = LM().double()
    if state is not None:
        model.load_state_dict(state(tm))
    opt = tm.optim.SGD(model.parameters(), lr=0.5)
    data = tm.tensor(_grammar(np.random.default_rng(0), 4, 41).T.copy())  # (T, B)
    losses, hx = [], None
    for i in range(steps):
        j = (i * 8) % 32
        x, y = data[j:j + 8], data[j + 1:j + 9]
        if hx is not None:
            hx = tuple(h.detach() for h in hx)  # truncated BPTT across batches
        opt.zero_grad()
        logits, hx = model(x, hx)
        loss = F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1))
        loss.backward()
        tm.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    return model, losses


def tagger_program(tm, state=None, steps=30):
    nn, F = tm.nn, tm.nn.functional
    rnn_utils = tm.nn.utils.rnn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 8)
            self.rnn = nn.LSTM(8, 12, batch_first=True, bidirectional=True)
            self.out = nn.Linear(24, TAGS)

        def forward(self, x, lengths):
            packed = rnn_utils.pack_padded_sequence(self.emb(x), lengths, batch_first=True, enforce_sorted=False)
            out, _ = self.rnn(packed)
            padded, _ = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
            return self.out(padded)

    model = Tagger().double()
    if state is not None:
        model.load_state_dict(state(tm))
    opt = tm.optim.SGD(model.parameters(), lr=0.5)
    rng = np.random.default_rng(1)
    toks = _grammar(rng, 6, 9)
    lengths = [9, 4, 7, 2, 9, 5]
    tags = (toks + np.roll(toks, 1, axis=1)) % TAGS  # a tag needs the previous token
    for b, n in enumerate(lengths):
        toks[b, n:] = 0
        tags[b, n:] = -100
    x, y = tm.tensor(toks), tm.tensor(tags)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x, lengths).reshape(-1, TAGS), y.reshape(-1), ignore_index=-100)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


@pytest.mark.parametrize("program", [lm_program, tagger_program])
def test_program_tracks_torch(program):
    torch.manual_seed(0)
    t_model, _ = program(torch, steps=0)
    init = {k: v.detach().numpy().copy() for k, v in t_model.state_dict().items()}

    def state(tm):
        return {k: tm.tensor(v) for k, v in init.items()}

    t_model, t_losses = program(torch, state)
    n_model, n_losses = program(nd, state)
    np.testing.assert_allclose(n_losses, t_losses, rtol=1e-5, atol=1e-7)
    assert np.mean(n_losses[-5:]) < 0.7 * np.mean(n_losses[:5])
    t_sd, n_sd = t_model.state_dict(), n_model.state_dict()
    assert list(t_sd) == list(n_sd)
    for k in t_sd:
        np.testing.assert_allclose(n_sd[k].numpy(), t_sd[k].numpy(), rtol=1e-5, atol=1e-7)
