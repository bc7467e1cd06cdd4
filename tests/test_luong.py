"""attnbook.luong: what is particular to Luong et al.'s decoders (Chapter 3).

What every model shares (protocol, teacher forcing = stepping, padding, training) is in test_protocol.py.
"""

import math

import numpy as np
import pytest
import torch

from attnbook.attention import AdditiveAttention, LocalPAttention, LuongAttention, local_p_window
from attnbook.exercises import check_luong_step
from attnbook.luong import InputFeedingDecoder, LuongDecoder, LuongOutput, LuongSeq2Seq, LuongState
from attnbook.rnn import Encoder
from conftest import checker_fails, checker_passes, padded_batch, tiny


@pytest.mark.parametrize("feed", ["feed", "nofeed"])
@pytest.mark.parametrize("local", ["global", "local"])
def test_state_and_output(feed, local):
    model = tiny(f"luong-general-{feed}-{local}")
    src, tgt_in = padded_batch()
    state = model.start(src)
    assert isinstance(state, LuongState)
    assert state.annotations.shape == (3, 5, 12)  # annotations have the decoder's size (6 per direction)
    assert state.projected_keys.shape == (3, 5, 12) and state.hidden.shape == (3, 12)
    assert torch.equal(state.src_mask, src != 0) and torch.equal(state.attentional, torch.zeros(3, 12))  # h̃_0 = 0
    new_state = model.step(state, tgt_in[:, 0]).state
    assert new_state.annotations is state.annotations and new_state.projected_keys is state.projected_keys
    out = model(src, tgt_in)
    assert isinstance(out, LuongOutput) and out.states.shape == (3, 4, 12)
    if local == "global":
        assert torch.allclose(out.weights.sum(-1), torch.ones(3, 4))
    else:
        assert ((out.weights.sum(-1) > 0) & (out.weights.sum(-1) <= 1 + 1e-6)).all()


@pytest.mark.parametrize("feed", [True, False])
def test_without_input_feeding_the_gru_runs_once_over_the_whole_target(feed):
    model = tiny(f"luong-general-{'feed' if feed else 'nofeed'}-global")
    src, tgt_in = padded_batch()
    calls = []
    model.decoder.rnn.register_forward_hook(lambda module, args, output: calls.append(args[0].shape))
    model(src, tgt_in)
    if feed:
        assert isinstance(model.decoder, InputFeedingDecoder) and isinstance(model.decoder.rnn, torch.nn.GRUCell)
        assert calls == [(3, 8 + 12)] * 4  # a loop, input [E y_{t-1}; h̃_{t-1}]
    else:
        assert type(model.decoder) is LuongDecoder and isinstance(model.decoder.rnn, torch.nn.GRU)
        assert calls == [(3, 4, 8)]  # one call for all T steps, input E y_{t-1}


def test_scores_use_the_current_state_and_the_attentional_state_gives_the_output():
    """Unlike Bahdanau's, the first step's weights depend on the first input token (through h_1);
    the logits are W_s tanh(W_c [c_t; h_t])."""
    model = tiny("luong-general-feed-global")
    decoder = model.decoder
    src, _ = padded_batch()
    state = model.start(src)
    step = model.step(state, torch.tensor([1, 1, 1]))
    assert not torch.allclose(step.weights, model.step(state, torch.tensor([5, 7, 9])).weights)
    x = torch.cat([decoder.embedding(torch.tensor([1, 1, 1])), torch.zeros(3, 12)], dim=-1)  # [E y_0; h̃_0]
    h_1 = decoder.rnn(x, state.hidden)
    context, weights = decoder.attention(h_1, state.annotations, mask=src != 0)
    attentional = torch.tanh(decoder.W_c(torch.cat([context, h_1], dim=-1)))
    assert torch.allclose(step.state.hidden, h_1, atol=1e-6) and torch.allclose(step.weights, weights, atol=1e-6)
    assert torch.allclose(step.state.attentional, attentional, atol=1e-6)
    assert torch.allclose(step.logits, decoder.out(attentional), atol=1e-6)


def test_input_feeding_feeds_the_previous_attentional_state():
    model = tiny("luong-general-feed-global")
    src, _ = padded_batch()
    state = model.step(model.start(src), torch.tensor([1, 1, 1])).state
    logits = model.step(state, torch.tensor([4, 5, 6])).logits
    changed = model.step(state._replace(attentional=state.attentional + 0.5), torch.tensor([4, 5, 6])).logits
    assert not torch.allclose(logits, changed)
    no_feeding = tiny("luong-general-nofeed-global")
    state = no_feeding.step(no_feeding.start(src), torch.tensor([1, 1, 1])).state
    same = no_feeding.step(state._replace(attentional=state.attentional + 0.5), torch.tensor([4, 5, 6])).logits
    assert torch.equal(same, no_feeding.step(state, torch.tensor([4, 5, 6])).logits)
    assert no_feeding.decoder.rnn.input_size == 8


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
@pytest.mark.parametrize("feed", ["feed", "nofeed"])
def test_local_p_weights_live_in_the_window_around_p_t(score, feed):
    model = tiny(f"luong-{score}-{feed}-local")
    src, tgt_in = padded_batch()
    out = model(src, tgt_in)
    attention = model.decoder.attention
    assert isinstance(attention, LocalPAttention) and attention.D == 2
    positions = attention.centres(out.states, src != 0)  # (B, T)
    lengths = (src != 0).sum(-1, keepdim=True).float()  # (B, 1): S of each sentence
    assert positions.shape == (3, 4) and ((positions >= 0) & (positions <= lengths)).all()
    outside = (torch.arange(5).float() - positions.unsqueeze(-1)).abs() > 2  # (B, T, S)
    assert torch.equal(out.weights[outside], torch.zeros(int(outside.sum())))
    assert torch.all(out.weights <= local_p_window(positions, 5, 2) + 1e-7)  # softmax weight times the Gaussian


def test_build_sizes():
    model = LuongSeq2Seq.build(20, 15, embed_dim=8, hidden_size=16, score="concat", local_window=3)
    assert model.encoder.hidden_size == 8 and model.encoder.output_size == 16  # annotations of the decoder's size
    decoder = model.decoder
    assert decoder.hidden_size == 16 and decoder.encoder_size == 16
    assert decoder.rnn.input_size == 8 + 16  # [E y_{t-1}; h̃_{t-1}]
    assert decoder.W_c.weight.shape == (16, 16 + 16) and decoder.W_c.bias is None
    assert decoder.out.in_features == 16 and decoder.out.out_features == 15  # W_s reads h̃_t only
    assert decoder.attention.score_name == "concat" and "D=3" in repr(decoder.attention)
    unidirectional = LuongSeq2Seq.build(20, 15, hidden_size=16, score="dot", bidirectional=False)
    assert unidirectional.encoder.hidden_size == 16 and unidirectional.encoder.output_size == 16
    assert list(unidirectional.decoder.attention.parameters()) == []
    wide = LuongSeq2Seq.build(20, 15, hidden_size=16, score="general", encoder_hidden_size=16)
    assert wide.encoder.output_size == 32 and wide.decoder.attention.scorer.W_a.weight.shape == (16, 32)


def test_errors():
    with pytest.raises(ValueError, match="hidden_size=15 must be even with a bidirectional encoder"):
        LuongSeq2Seq.build(20, 15, hidden_size=15)
    with pytest.raises(
        ValueError,
        match=r"score='dot' compares the query with each key directly, so it needs "
        r"query_dim == key_dim, got query_dim=16 and key_dim=32",
    ):
        LuongSeq2Seq.build(20, 15, hidden_size=16, score="dot", encoder_hidden_size=16)
    with pytest.raises(ValueError, match=r"unknown score 'additive'; choose one of 'dot', 'general', 'concat'"):
        LuongSeq2Seq.build(20, 15, hidden_size=16, score="additive")
    with pytest.raises(ValueError, match="D must be a positive int, got 0"):
        LuongSeq2Seq.build(20, 15, hidden_size=16, local_window=0)
    with pytest.raises(TypeError, match="attention must be a LuongAttention or LocalPAttention, got AdditiveAttention"):
        LuongDecoder(11, 8, 16, AdditiveAttention(16, 16, 8))
    with pytest.raises(ValueError, match=r"the attention's query_dim=8 must equal hidden_size=16"):
        LuongDecoder(11, 8, 16, LuongAttention("general", 8, 16))
    encoder = Encoder(12, 8, 16, bidirectional=True)
    with pytest.raises(
        ValueError,
        match=r"decoder expects encoder outputs of size encoder_size=16 but the encoder "
        r"gives 32 \(bidirectional, hidden_size=16\)",
    ):
        LuongSeq2Seq(encoder, InputFeedingDecoder(11, 8, 16, LuongAttention("general", 16, 16)))
    model = tiny("luong-general-feed-global")
    src, tgt_in = padded_batch()
    with pytest.raises(TypeError, match="state must be the LuongState returned by start or step, got BahdanauState"):
        model.step(tiny("bahdanau").start(src), tgt_in[:, 0])
    with pytest.raises(TypeError, match=r"src_mask must be a bool tensor \(True = may attend\)"):
        model.decoder.start(torch.randn(3, 5, 12), torch.randn(3, 12), torch.ones(3, 5))


# ================================================================ check_luong_step


def _step_by_einsum(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s):
    h = cell(torch.cat([embedded, attentional], -1), hidden)
    scores = torch.einsum("bh,hk,bsk->bs", h, W_a, annotations).masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, -1)
    c = torch.einsum("bs,bsh->bh", w, annotations)
    a = torch.tanh(torch.cat([c, h], -1) @ W_c.T)
    return a @ W_s.T, h, a, w


def _step_by_matmul(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s):
    h = cell(torch.cat((embedded, attentional), dim=1), hidden)
    scores = (annotations @ (W_a.T @ h.unsqueeze(-1))).squeeze(-1)  # (B, S)
    w = torch.softmax(scores.masked_fill(~mask, -1e9), dim=1)
    c = (w.unsqueeze(1) @ annotations).squeeze(1)
    a = torch.tanh(W_c[:, : c.size(1)] @ c.T + W_c[:, c.size(1) :] @ h.T).T  # W_c split into its two halves
    return (W_s @ a.T).T, h, a, w


@pytest.mark.parametrize("solution", [_step_by_einsum, _step_by_matmul])
def test_luong_step_checker_passes_right_solutions(solution, capsys):
    checker_passes(check_luong_step, solution, capsys)


def _step_with(**mistake):
    def step(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s):
        h = cell(torch.cat([embedded, attentional], -1), hidden)
        q = hidden if mistake.get("old_query") else h
        W = W_a.T if mistake.get("transposed") else W_a
        scores = torch.einsum("bh,hk,bsk->bs", q, W, annotations)
        w = torch.softmax(scores if mistake.get("unmasked") else scores.masked_fill(~mask, float("-inf")), -1)
        c = torch.einsum("bs,bsh->bh", w, annotations)
        pair = torch.cat([h, c] if mistake.get("swapped") else [c, h], -1)
        a = pair @ W_c.T if mistake.get("no_tanh") else torch.tanh(pair @ W_c.T)
        logits = (h if mistake.get("logits_from_h") else a) @ W_s.T
        return (logits, a, h, w) if mistake.get("order") else (logits, h, a, w)

    return step


def _no_input_feeding(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s):
    h = cell(embedded, hidden)
    return _step_by_einsum(embedded, h, attentional, annotations, mask, cell, W_a, W_c, W_s)


@pytest.mark.parametrize(
    ("wrong", "fragment"),
    [
        (_step_with(old_query=True), "the query is the *new* state h_t"),
        (_step_with(transposed=True), "W_a is used transposed"),
        (_step_with(unmasked=True), "the padded source positions got weight"),
        (_step_with(swapped=True), "the context first"),
        (_step_with(no_tanh=True), "the tanh is missing"),
        (_step_with(logits_from_h=True), "the logits come from the attentional state"),
        (_step_with(order=True), "in this order: h_t, then h̃_t"),
        (_no_input_feeding, "with input feeding, concatenate the embedding and the previous attentional state"),
    ],
)
def test_luong_step_checker_explains_typical_mistakes(wrong, fragment, capsys):
    checker_fails(check_luong_step, wrong, capsys, fragment)


@pytest.mark.parametrize(
    "as_returned",
    [
        lambda factors: factors,  # a list of floats
        lambda factors: [torch.tensor(f) for f in factors],  # 0-d tensors
        lambda factors: [np.float32(f) for f in factors],  # NumPy scalars
        lambda factors: np.array(factors),  # a NumPy array
        lambda factors: torch.tensor(factors),  # a tensor
    ],
)
def test_local_p_window_checker_accepts_every_form_the_exercise_allows(as_returned, capsys):
    from attnbook.exercises import check_local_p_window

    def window(position, length, D):
        sigma = D / 2
        return as_returned(
            [
                math.exp(-((s - position) ** 2) / (2 * sigma**2)) if abs(s - position) <= D else 0.0
                for s in range(length)
            ]
        )

    checker_passes(check_local_p_window, window, capsys)
