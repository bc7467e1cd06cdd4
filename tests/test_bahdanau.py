"""attnbook.bahdanau: what is particular to Bahdanau et al.'s decoder (Chapter 2).

What every model shares (protocol, teacher forcing = stepping, padding, training) is in test_protocol.py.
"""

import pytest
import torch

from attnbook.bahdanau import BahdanauDecoder, BahdanauSeq2Seq, BahdanauState
from attnbook.exercises import check_bahdanau_step
from attnbook.rnn import Encoder
from conftest import checker_fails, checker_passes, padded_batch, tiny


def test_state_holds_what_is_computed_once_per_sentence():
    model = tiny("bahdanau")
    src, tgt_in = padded_batch()
    state = model.start(src)
    assert isinstance(state, BahdanauState)
    assert state.annotations.shape == (3, 5, 24) and state.projected_keys.shape == (3, 5, 10)
    assert state.hidden.shape == (3, 12) and torch.equal(state.src_mask, src != 0)
    assert torch.allclose(state.projected_keys, model.decoder.attention.key_proj(state.annotations))
    new_state = model.step(state, tgt_in[:, 0]).state
    assert new_state.annotations is state.annotations and new_state.projected_keys is state.projected_keys


def test_scores_use_the_previous_state():
    """Step i attends from s_{i-1}: the first step's weights come from s_0 = tanh(W_s final) alone,
    whatever the first input token."""
    model = tiny("bahdanau")
    src, _ = padded_batch()
    state = model.start(src)
    _, final = model.encode(src)
    assert torch.allclose(state.hidden, torch.tanh(model.decoder.init(final)))
    first = model.step(state, torch.tensor([1, 1, 1])).weights
    other = model.step(state, torch.tensor([5, 7, 9])).weights
    assert torch.equal(first, other)
    _, expected = model.decoder.attention(state.hidden, state.annotations, mask=src != 0)
    assert torch.allclose(first, expected)


def test_one_step_by_hand():
    """s_i = GRUCell([E y; c_i], s_{i-1}), logits = W_o [s_i; c_i; E y]."""
    model = tiny("bahdanau")
    decoder = model.decoder
    src, _ = padded_batch()
    state = model.start(src)
    prev = torch.tensor([4, 5, 6])
    step = model.step(state, prev)
    embedded = decoder.embedding(prev)
    context, weights = decoder.attention(state.hidden, state.annotations, mask=src != 0)
    hidden = decoder.cell(torch.cat([embedded, context], -1), state.hidden)
    assert torch.allclose(step.state.hidden, hidden, atol=1e-6) and torch.allclose(step.weights, weights)
    assert torch.allclose(step.logits, decoder.out(torch.cat([hidden, context, embedded], -1)), atol=1e-6)


def test_without_the_mask_padding_gets_weight_and_changes_the_output():
    """What Chapter 2 shows: a state without its source mask lets the padding take weight."""
    model = tiny("bahdanau")
    src, tgt_in = padded_batch()
    state = model.start(src)
    masked = model.decoder(tgt_in, state)
    unmasked = model.decoder(tgt_in, state._replace(src_mask=None))
    weights = unmasked.weights
    assert (weights[1, :, 3:] > 0.01).all() and (weights[2, :, 2:] > 0.01).all()
    assert torch.allclose(weights.sum(-1), torch.ones(3, 4))
    assert (masked.weights[1, :, 3:] == 0).all()
    assert torch.allclose(masked.logits[0], unmasked.logits[0], atol=1e-6)  # the row without padding
    assert not torch.allclose(masked.logits[1], unmasked.logits[1], atol=1e-4)


def test_build_sizes():
    model = BahdanauSeq2Seq.build(20, 15, embed_dim=8, hidden_size=16, attention_dim=6, bidirectional=True)
    assert model.encoder.output_size == 32 and model.decoder.encoder_size == 32 and model.decoder.hidden_size == 16
    attention = model.decoder.attention
    assert (attention.query_dim, attention.key_dim, attention.attention_dim) == (16, 32, 6)
    assert model.decoder.cell.input_size == 8 + 32
    assert model.decoder.out.in_features == 16 + 32 + 8 and model.decoder.out.out_features == 15
    narrow = BahdanauSeq2Seq.build(20, 15, embed_dim=8, hidden_size=16, attention_dim=6, encoder_hidden_size=8)
    assert narrow.encoder.output_size == 16 and narrow.decoder.encoder_size == 16 and narrow.decoder.hidden_size == 16


def test_errors():
    encoder = Encoder(12, 8, 16, bidirectional=True)
    with pytest.raises(
        ValueError,
        match=r"decoder expects encoder outputs of size encoder_size=16 but the encoder "
        r"gives 32 \(bidirectional, hidden_size=16\)",
    ):
        BahdanauSeq2Seq(encoder, BahdanauDecoder(11, 8, 16, encoder_size=16, attention_dim=10))
    with pytest.raises(ValueError, match="pad_id=0 but the decoder's pad_id=3"):
        BahdanauSeq2Seq(encoder, BahdanauDecoder(11, 8, 16, 32, 10, pad_id=3))
    with pytest.raises(ValueError, match="attention_dim must be a positive int, got 0"):
        BahdanauDecoder(11, 8, 16, 32, 0)
    model = tiny("bahdanau")
    src, tgt_in = padded_batch()
    with pytest.raises(ValueError, match=r"tgt_in has B=2 \(shape \(2, 4\)\) but src has B=3 \(shape \(3, 5\)\)"):
        model(src, tgt_in[:2])
    with pytest.raises(TypeError, match="tgt_in must hold token ids as torch.long, got dtype torch.float32"):
        model(src, tgt_in.float())
    with pytest.raises(ValueError, match=r"src rows \[1\] are all padding"):
        model(torch.tensor([[4, 5], [0, 0]]), tgt_in[:2, :2])
    state = model.start(src)
    with pytest.raises(ValueError, match=r"prev has B=2 \(shape \(2,\)\) but state.hidden has B=3 \(shape \(3, 12\)\)"):
        model.step(state, torch.tensor([1, 1]))
    with pytest.raises(ValueError, match=r"prev must be 1-D \(B\), got shape \(3, 1\)"):
        model.step(state, torch.ones(3, 1, dtype=torch.long))
    with pytest.raises(TypeError, match="state must be the BahdanauState returned by start or step, got tuple"):
        model.step(tuple(state), tgt_in[:, 0])
    with pytest.raises(
        ValueError,
        match=r"annotations has A=12 \(shape \(3, 5, 12\)\) but BahdanauDecoder "
        r"expects A=24",
    ):
        model.decoder.start(torch.randn(3, 5, 12), torch.randn(3, 12), src != 0)
    with pytest.raises(ValueError, match=r"src_mask has S=4 \(shape \(3, 4\)\) but annotations has S=5"):
        model.decoder.start(torch.randn(3, 5, 24), torch.randn(3, 24), torch.ones(3, 4, dtype=torch.bool))


# ================================================================ check_bahdanau_step


def _step_by_einsum(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
    e = torch.einsum(
        "bsk,k->bs",
        torch.tanh(torch.einsum("kh,bh->bk", W_a, hidden).unsqueeze(1) + torch.einsum("ka,bsa->bsk", U_a, annotations)),
        v_a,
    )
    w = torch.softmax(e.masked_fill(~mask, float("-inf")), dim=-1)
    c = torch.einsum("bs,bsa->ba", w, annotations)
    s = cell(torch.cat([embedded, c], -1), hidden)
    return torch.cat([s, c, embedded], -1) @ W_o.T, s, c, w


def _step_by_loop(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
    rows = []
    for b in range(annotations.size(0)):  # one sentence at a time, the output layer split in three blocks
        e = torch.stack([v_a @ torch.tanh(W_a @ hidden[b] + U_a @ h_j) for h_j in annotations[b]])
        w = torch.where(mask[b], torch.exp(e - e[mask[b]].max()), torch.zeros(()))
        rows.append(w / w.sum())
    w = torch.stack(rows)
    c = (w.unsqueeze(-1) * annotations).sum(dim=1)
    s = cell(torch.cat([embedded, c], -1), hidden)
    H, A = s.size(1), c.size(1)
    logits = s @ W_o[:, :H].T + c @ W_o[:, H : H + A].T + embedded @ W_o[:, H + A :].T
    return logits, s, c, w


@pytest.mark.parametrize("solution", [_step_by_einsum, _step_by_loop])
def test_bahdanau_step_checker_passes_right_solutions(solution, capsys):
    checker_passes(check_bahdanau_step, solution, capsys)


def _step_with(**mistake):
    def step(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
        part = (hidden @ W_a.T).unsqueeze(1) + annotations @ U_a.T
        e = (part if mistake.get("no_tanh") else torch.tanh(part)) @ v_a
        w = torch.softmax(e if mistake.get("unmasked") else e.masked_fill(~mask, float("-inf")), -1)
        c = (w.unsqueeze(1) @ annotations).squeeze(1)
        s = cell(torch.cat([c, embedded] if mistake.get("swapped") else [embedded, c], -1), hidden)
        state = hidden if mistake.get("old_state_out") else s
        return torch.cat([state, c, embedded], -1) @ W_o.T, s, c, w

    return step


def _luong_order(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
    s = cell(torch.cat([embedded, torch.zeros(annotations.size(0), annotations.size(2))], -1), hidden)
    return (
        _step_by_einsum(embedded, s, annotations, mask, cell, W_a, U_a, v_a, W_o)[:1]
        + (s,)
        + _step_by_einsum(embedded, s, annotations, mask, cell, W_a, U_a, v_a, W_o)[2:]
    )


def _no_context_in_cell(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
    s = cell(embedded, hidden)
    return _step_by_einsum(embedded, s, annotations, mask, cell, W_a, U_a, v_a, W_o)


@pytest.mark.parametrize(
    ("wrong", "fragment"),
    [
        (_step_with(no_tanh=True), "the tanh is missing"),
        (_step_with(unmasked=True), "the padded source positions got weight"),
        (_step_with(swapped=True), "the embedding first, then the context"),
        (_step_with(old_state_out=True), "the output layer reads the *new* state"),
        (_luong_order, "score the *previous* state s_(i-1)"),
        (_no_context_in_cell, "concatenate the embedding and the context before the GRU step"),
    ],
)
def test_bahdanau_step_checker_explains_typical_mistakes(wrong, fragment, capsys):
    checker_fails(check_bahdanau_step, wrong, capsys, fragment)


def test_bahdanau_step_checker_reference_is_the_package_step():
    model = tiny("bahdanau")
    src, tgt_in = padded_batch()
    decoder = model.decoder
    state = model.start(src)
    embedded = decoder.embedding(tgt_in[:, 0])
    attention = decoder.attention
    with torch.no_grad():
        step = model.step(state, tgt_in[:, 0])
        ours = _step_by_einsum(
            embedded,
            state.hidden,
            state.annotations,
            state.src_mask,
            decoder.cell,
            attention.query_proj.weight,
            attention.key_proj.weight,
            attention.score_proj.weight[0],
            decoder.out.weight,
        )
    logits = ours[0] + decoder.out.bias  # the exercise's W_o has no bias; the package's output layer has one
    assert torch.allclose(step.state.hidden, ours[1], atol=1e-6)
    assert torch.allclose(step.weights, ours[3], atol=1e-6)
    assert torch.allclose(step.logits, logits, atol=1e-5)
