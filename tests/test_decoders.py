"""Tests of attnbook.decoders: the Bahdanau (chapter 2) and Luong (chapter 3) attention decoders and models."""

import itertools

import pytest
import torch

from attnbook import data
from attnbook.attention import local_p_window
from attnbook.decoders import BahdanauDecoder, BahdanauSeq2Seq, BahdanauState, LuongDecoder, LuongSeq2Seq, LuongState
from attnbook.decoding import greedy_decode, translate
from attnbook.rnn import Encoder
from attnbook.training import fit


def padded_batch():
    """src (B=3, S=5) right-padded; tgt_in (B=3, T=4) starting with bos=1."""
    src = torch.tensor([[4, 5, 6, 7, 8], [9, 5, 4, 0, 0], [6, 6, 0, 0, 0]])
    tgt_in = torch.tensor([[1, 8, 7, 6], [1, 4, 5, 0], [1, 6, 0, 0]])
    return src, tgt_in


def tiny_model(**kwargs):
    torch.manual_seed(0)
    settings = dict(embed_dim=8, hidden_size=12, attention_dim=10)
    settings.update(kwargs)
    return BahdanauSeq2Seq.build(12, 11, **settings)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_shapes(bidirectional):
    model = tiny_model(bidirectional=bidirectional)
    src, tgt_in = padded_batch()
    logits = model(src, tgt_in)
    assert logits.shape == (3, 4, 11)
    logits_again, weights = model(src, tgt_in, return_weights=True)
    assert torch.equal(logits, logits_again)
    assert weights.shape == (3, 4, 5)
    assert torch.allclose(weights.sum(-1), torch.ones(3, 4))
    state = model.start(src)
    assert isinstance(state, BahdanauState)
    annotation_size = 24 if bidirectional else 12
    assert state.annotations.shape == (3, 5, annotation_size)
    assert state.projected_keys.shape == (3, 5, 10)
    assert state.hidden.shape == (3, 12)
    assert torch.equal(state.src_mask, src != 0)
    logits, new_state, step_weights = model.step(state, tgt_in[:, 0])
    assert logits.shape == (3, 11) and step_weights.shape == (3, 5) and new_state.hidden.shape == (3, 12)
    assert new_state.annotations is state.annotations  # encoded once, carried along


@pytest.mark.parametrize("bidirectional", [True, False])
def test_step_by_step_reproduces_teacher_forcing(bidirectional):
    model = tiny_model(bidirectional=bidirectional)
    model.eval()
    src, tgt_in = padded_batch()
    with torch.no_grad():
        logits, weights = model(src, tgt_in, return_weights=True)
        state = model.start(src)
        step_logits, step_weights = [], []
        for t in range(tgt_in.size(1)):
            out, state, alpha = model.step(state, tgt_in[:, t])
            step_logits.append(out)
            step_weights.append(alpha)
    assert torch.allclose(torch.stack(step_logits, dim=1), logits, atol=1e-5)
    assert torch.allclose(torch.stack(step_weights, dim=1), weights, atol=1e-6)


def test_scores_use_the_previous_state():
    """Step i's weights depend on s_{i-1}, so the first step's weights come from s_0 alone:
    they do not change with the first input token (Bahdanau), and the first state is tanh(W_s c)."""
    model = tiny_model()
    src, _ = padded_batch()
    state = model.start(src)
    _, context = model.encode(src)
    assert torch.allclose(state.hidden, torch.tanh(model.decoder.init(context)))
    _, _, first = model.step(state, torch.tensor([1, 1, 1]))
    _, _, other = model.step(state, torch.tensor([5, 7, 9]))
    assert torch.equal(first, other)
    _, expected_weights = model.decoder.attention(state.hidden, state.annotations, mask=src != 0)
    assert torch.allclose(first, expected_weights)


def test_padded_source_positions_get_exactly_zero_weight():
    model = tiny_model()
    src, tgt_in = padded_batch()
    _, weights = model(src, tgt_in, return_weights=True)
    padding = (src == 0).unsqueeze(1).expand_as(weights)  # (B, T, S)
    assert torch.equal(weights[padding], torch.zeros(int(padding.sum())))
    decoded = greedy_decode(model, src, max_len=6)
    padding = (src == 0).unsqueeze(1).expand_as(decoded.weights)
    assert torch.equal(decoded.weights[padding], torch.zeros(int(padding.sum())))


def test_without_the_mask_padding_gets_weight_and_changes_the_output():
    masked, unmasked = tiny_model(), tiny_model(mask_padding=False)
    unmasked.load_state_dict(masked.state_dict())
    src, tgt_in = padded_batch()
    assert unmasked.start(src).src_mask is None
    _, weights = unmasked(src, tgt_in, return_weights=True)
    assert (weights[1, :, 3:] > 0.01).all() and (weights[2, :, 2:] > 0.01).all()
    assert torch.allclose(weights.sum(-1), torch.ones(3, 4))
    # The row without padding is the same either way; padded rows are not.
    logits_masked, logits_unmasked = masked(src, tgt_in), unmasked(src, tgt_in)
    assert torch.allclose(logits_masked[0], logits_unmasked[0], atol=1e-6)
    assert not torch.allclose(logits_masked[1], logits_unmasked[1], atol=1e-4)
    assert "mask_padding=False" in repr(unmasked)


def test_padding_does_not_change_a_rows_result():
    """With the mask (and a packed encoder), a row's logits do not depend on how far it is padded."""
    model = tiny_model()
    model.eval()
    src, tgt_in = padded_batch()
    with torch.no_grad():
        together = model(src, tgt_in)
        alone = model(src[2:, :2], tgt_in[2:])
    assert torch.allclose(together[2], alone[0], atol=1e-5)


def test_greedy_decode_collects_weights_rows_sum_to_one():
    model = tiny_model()
    src, _ = padded_batch()
    decoded = greedy_decode(model, src, max_len=7)
    assert decoded.weights.shape[0] == 3 and decoded.weights.shape[2] == 5
    for row, tokens in enumerate(decoded.tokens):
        steps = min(len(tokens) + 1, decoded.weights.shape[1])  # the eos step included
        assert torch.allclose(decoded.weights[row, :steps].sum(-1), torch.ones(steps))


def test_gradients_reach_every_parameter():
    model = tiny_model()
    src, tgt_in = padded_batch()
    model(src, tgt_in).sum().backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


def reversal_data(n, seed, max_len=6):
    examples = data.reversal_task(n, 2, max_len, seed=seed, alphabet="abcdef")
    return examples


def test_overfits_a_tiny_reversal_batch_quickly():
    examples = reversal_data(16, seed=3)
    src_vocab, tgt_vocab = data.build_vocabs(examples)
    batch = data.make_batch(examples, src_vocab, tgt_vocab)
    torch.manual_seed(0)
    model = BahdanauSeq2Seq.build(len(src_vocab), len(tgt_vocab), embed_dim=16, hidden_size=32, attention_dim=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        logits = model(batch.src, batch.tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch.tgt_out.reshape(-1),
                                                 ignore_index=model.pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    decoded = translate(model, [e.source for e in examples], src_vocab, tgt_vocab)
    assert decoded == [e.target for e in examples]


def test_trains_with_fit_and_decodes_with_greedy_decode():
    train = reversal_data(600, seed=1)
    test = reversal_data(60, seed=2)
    src_vocab, tgt_vocab = data.build_vocabs(train + test)
    torch.manual_seed(0)
    model = BahdanauSeq2Seq.build(len(src_vocab), len(tgt_vocab), embed_dim=16, hidden_size=32, attention_dim=32)
    batches = data.Batches(train, src_vocab, tgt_vocab, 32, shuffle=True, seed=0)
    history = fit(model, batches, data.Batches(test, src_vocab, tgt_vocab, 60), epochs=6, lr=1e-2, progress=False)
    assert history["train_loss"][-1] < history["train_loss"][0] / 3
    assert history.last["exact_match"] >= 0.8
    batch = next(iter(data.Batches(test, src_vocab, tgt_vocab, 60)))
    decoded = greedy_decode(model, batch.src, max_len=10)
    assert len(decoded.tokens) == 60 and decoded.weights.shape[:1] == (60,)


def test_build_sizes():
    model = BahdanauSeq2Seq.build(20, 15, embed_dim=8, hidden_size=16, attention_dim=6, bidirectional=True)
    assert model.encoder.output_size == 32 and model.decoder.annotation_size == 32
    assert model.decoder.hidden_size == 16
    attention = model.decoder.attention
    assert (attention.query_dim, attention.key_dim, attention.hidden_dim) == (16, 32, 6)
    assert model.encoder.pack and model.mask_padding
    assert model.decoder.cell.input_size == 8 + 32
    assert model.decoder.out.in_features == 16 + 32 + 8 and model.decoder.out.out_features == 15


def test_errors():
    encoder = Encoder(12, 8, 16, bidirectional=True)
    with pytest.raises(ValueError, match=r"decoder expects annotations of size annotation_size=16 but the encoder "
                                         r"gives 32 \(bidirectional, hidden_size=16\)"):
        BahdanauSeq2Seq(encoder, BahdanauDecoder(11, 8, 16, annotation_size=16, attention_dim=10))
    with pytest.raises(ValueError, match="pad_id=0 but the decoder was built with pad_id=3"):
        BahdanauSeq2Seq(encoder, BahdanauDecoder(11, 8, 16, 32, 10, pad_id=3))
    with pytest.raises(ValueError, match="attention_dim must be a positive int, got 0"):
        BahdanauDecoder(11, 8, 16, 32, 0)
    model = tiny_model()
    src, tgt_in = padded_batch()
    with pytest.raises(ValueError, match=r"src has batch size 3 \(shape \(3, 5\)\) but tgt_in has 2"):
        model(src, tgt_in[:2])
    with pytest.raises(TypeError, match="tgt_in must hold token ids as torch.long, got dtype torch.float32"):
        model(src, tgt_in.float())
    with pytest.raises(ValueError, match=r"src rows \[1\] are all padding"):
        model(torch.tensor([[4, 5], [0, 0]]), tgt_in[:2, :2])
    state = model.start(src)
    with pytest.raises(ValueError, match=r"prev must have shape \(B,\) = \(3,\), one token per source row, got \(2,\)"):
        model.step(state, torch.tensor([1, 1]))
    with pytest.raises(ValueError, match=r"prev must be 1-D \(B,\), got shape \(3, 1\)"):
        model.step(state, torch.ones(3, 1, dtype=torch.long))
    with pytest.raises(TypeError, match="state must be the BahdanauState returned by start or step, got tuple"):
        model.step(tuple(state), tgt_in[:, 0])
    decoder = model.decoder
    with pytest.raises(ValueError, match=r"annotations must have shape \(B, S, 24\), got \(3, 5, 12\)"):
        decoder(tgt_in, torch.randn(3, 5, 12), torch.zeros(3, 12))
    with pytest.raises(ValueError, match=r"hidden must have shape \(B, H\) = \(3, 12\), got \(3, 24\)"):
        decoder(tgt_in, torch.randn(3, 5, 24), torch.zeros(3, 24))
    with pytest.raises(ValueError, match=r"src_mask has shape \(3, 4\) but annotations have \(B, S\) = \(3, 5\)"):
        decoder(tgt_in, torch.randn(3, 5, 24), torch.zeros(3, 12), torch.ones(3, 4, dtype=torch.bool))


# ============================================================================ Luong

#: Every configuration: score x input feeding x (global, local-p with D=2).
LUONG_CONFIGS = [dict(score=score, input_feeding=feeding, local_window=local)
                 for score, feeding, local in itertools.product(["dot", "general", "concat"], [True, False], [None, 2])]


def config_id(config):
    return (f"{config['score']}-{'feed' if config['input_feeding'] else 'nofeed'}-"
            f"{'global' if config['local_window'] is None else 'local'}")


def tiny_luong(**kwargs):
    torch.manual_seed(0)
    settings = dict(embed_dim=8, hidden_size=12)
    settings.update(kwargs)
    return LuongSeq2Seq.build(12, 11, **settings)


def luong_steps(model, src, tgt_in):
    """Teacher forcing by hand with start/step: logits (B, T, V), weights (B, T, S), states."""
    state = model.start(src)
    logits, weights, states = [], [], []
    for t in range(tgt_in.size(1)):
        out, state, alpha = model.step(state, tgt_in[:, t])
        logits.append(out)
        weights.append(alpha)
        states.append(state)
    return torch.stack(logits, dim=1), torch.stack(weights, dim=1), states


@pytest.mark.parametrize("config", LUONG_CONFIGS, ids=config_id)
def test_luong_shapes(config):
    model = tiny_luong(**config)
    src, tgt_in = padded_batch()
    logits = model(src, tgt_in)
    assert logits.shape == (3, 4, 11)
    logits_again, weights = model(src, tgt_in, return_weights=True)
    assert torch.equal(logits, logits_again) and weights.shape == (3, 4, 5)
    _, weights_again, positions = model(src, tgt_in, return_weights=True, return_positions=True)
    assert torch.equal(weights, weights_again)
    if config["local_window"] is None:
        assert positions is None
        assert torch.allclose(weights.sum(-1), torch.ones(3, 4))
    else:
        assert positions.shape == (3, 4)
        assert ((weights.sum(-1) > 0) & (weights.sum(-1) <= 1 + 1e-6)).all()
    state = model.start(src)
    assert isinstance(state, LuongState)
    assert state.annotations.shape == (3, 5, 12)  # annotations have the decoder's size (6 per direction)
    assert state.keys.shape == (3, 5, 12) and state.hidden.shape == (3, 12)
    assert torch.equal(state.src_mask, src != 0) and state.position is None
    if config["input_feeding"]:
        assert torch.equal(state.attentional, torch.zeros(3, 12))  # h̃_0 = 0
    else:
        assert state.attentional is None
    logits, new_state, step_weights = model.step(state, tgt_in[:, 0])
    assert logits.shape == (3, 11) and step_weights.shape == (3, 5) and new_state.hidden.shape == (3, 12)
    assert new_state.annotations is state.annotations and new_state.keys is state.keys  # once per sentence
    assert (new_state.position is None) == (config["local_window"] is None)


@pytest.mark.parametrize("config", LUONG_CONFIGS, ids=config_id)
def test_luong_step_by_step_reproduces_teacher_forcing(config):
    """Holds for the input-feeding loop and for the fast path (one GRU call, one batched attention)."""
    model = tiny_luong(**config)
    model.eval()
    src, tgt_in = padded_batch()
    with torch.no_grad():
        logits, weights, positions = model(src, tgt_in, return_weights=True, return_positions=True)
        step_logits, step_weights, states = luong_steps(model, src, tgt_in)
    assert torch.allclose(step_logits, logits, atol=1e-5)
    assert torch.allclose(step_weights, weights, atol=1e-6)
    if config["local_window"] is not None:
        assert torch.allclose(torch.stack([s.position for s in states], dim=1), positions, atol=1e-5)


@pytest.mark.parametrize("input_feeding", [True, False])
def test_luong_without_input_feeding_the_gru_runs_once_over_the_whole_target(input_feeding):
    model = tiny_luong(input_feeding=input_feeding)
    src, tgt_in = padded_batch()
    calls = []
    model.decoder.rnn.register_forward_hook(lambda module, args, output: calls.append(args[0].shape))
    model(src, tgt_in)
    if input_feeding:
        assert isinstance(model.decoder.rnn, torch.nn.GRUCell)
        assert calls == [(3, 8 + 12)] * 4  # a loop: one step at a time, input [E y_{t-1}; h̃_{t-1}]
    else:
        assert isinstance(model.decoder.rnn, torch.nn.GRU)
        assert calls == [(3, 4, 8)]  # one call for all T steps, input E y_{t-1}


def test_luong_scores_use_the_current_state_and_the_attentional_state_gives_the_output():
    """Unlike Bahdanau's, the first step's weights depend on the first input token (through h_1),
    and the logits are W_s tanh(W_c [c_t; h_t])."""
    model = tiny_luong(score="general")
    decoder = model.decoder
    src, _ = padded_batch()
    state = model.start(src)
    logits, new_state, first = model.step(state, torch.tensor([1, 1, 1]))
    _, _, other = model.step(state, torch.tensor([5, 7, 9]))
    assert not torch.allclose(first, other)
    # By hand: h_1 = GRU([E y_0; h̃_0], h_0); a_1 from h_1; h̃_1 = tanh(W_c [c_1; h_1]); logits = W_s h̃_1.
    x = torch.cat([decoder.embedding(torch.tensor([1, 1, 1])), torch.zeros(3, 12)], dim=-1)
    h_1 = decoder.rnn(x, state.hidden)  # a GRUCell with input feeding
    context, weights = decoder.attention(h_1, state.annotations, mask=src != 0)
    attentional = torch.tanh(decoder.W_c(torch.cat([context, h_1], dim=-1)))
    assert torch.allclose(new_state.hidden, h_1, atol=1e-6) and torch.allclose(first, weights, atol=1e-6)
    assert torch.allclose(new_state.attentional, attentional, atol=1e-6)
    assert torch.allclose(logits, decoder.out(attentional), atol=1e-6)


def test_luong_input_feeding_feeds_the_previous_attentional_state():
    model = tiny_luong(input_feeding=True)
    src, _ = padded_batch()
    _, state, _ = model.step(model.start(src), torch.tensor([1, 1, 1]))
    logits, _, _ = model.step(state, torch.tensor([4, 5, 6]))
    changed, _, _ = model.step(state._replace(attentional=state.attentional + 0.5), torch.tensor([4, 5, 6]))
    assert not torch.allclose(logits, changed)
    no_feeding = tiny_luong(input_feeding=False)
    _, state, _ = no_feeding.step(no_feeding.start(src), torch.tensor([1, 1, 1]))
    assert state.attentional is None and no_feeding.decoder.rnn.input_size == 8


@pytest.mark.parametrize("config", LUONG_CONFIGS, ids=config_id)
def test_luong_padded_source_positions_get_exactly_zero_weight(config):
    model = tiny_luong(**config)
    src, tgt_in = padded_batch()
    _, weights = model(src, tgt_in, return_weights=True)
    padding = (src == 0).unsqueeze(1).expand_as(weights)  # (B, T, S)
    assert torch.equal(weights[padding], torch.zeros(int(padding.sum())))
    decoded = greedy_decode(model, src, max_len=6)
    padding = (src == 0).unsqueeze(1).expand_as(decoded.weights)
    assert torch.equal(decoded.weights[padding], torch.zeros(int(padding.sum())))


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
@pytest.mark.parametrize("input_feeding", [True, False])
def test_luong_local_p_weights_live_in_the_window_around_p_t(score, input_feeding):
    D = 1
    model = tiny_luong(score=score, input_feeding=input_feeding, local_window=D)
    src, tgt_in = padded_batch()
    _, weights, positions = model(src, tgt_in, return_weights=True, return_positions=True)
    lengths = (src != 0).sum(-1, keepdim=True).float()  # (B, 1): S of each sentence
    assert ((positions >= 0) & (positions <= lengths)).all()
    source_positions = torch.arange(5).float()
    outside = (source_positions - positions.unsqueeze(-1)).abs() > D  # (B, T, S)
    assert torch.equal(weights[outside], torch.zeros(int(outside.sum())))
    window = local_p_window(positions, 5, D)
    assert torch.all(weights <= window + 1e-7)  # softmax weight (<= 1) times the Gaussian factor


def test_luong_padding_does_not_change_a_rows_result():
    for config in LUONG_CONFIGS:
        model = tiny_luong(**config)
        model.eval()
        src, tgt_in = padded_batch()
        with torch.no_grad():
            together = model(src, tgt_in)
            alone = model(src[2:, :2], tgt_in[2:])
        assert torch.allclose(together[2], alone[0], atol=1e-5), config


@pytest.mark.parametrize("config", LUONG_CONFIGS, ids=config_id)
def test_luong_gradients_reach_every_parameter(config):
    model = tiny_luong(**config)
    src, tgt_in = padded_batch()
    model(src, tgt_in).sum().backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


@pytest.mark.parametrize("config", [dict(score="general", input_feeding=True), dict(score="dot", input_feeding=False),
                                    dict(score="concat", input_feeding=True),
                                    dict(score="general", input_feeding=True, local_window=2)], ids=str)
def test_luong_overfits_a_tiny_reversal_batch_quickly(config):
    examples = reversal_data(16, seed=3)
    src_vocab, tgt_vocab = data.build_vocabs(examples)
    batch = data.make_batch(examples, src_vocab, tgt_vocab)
    torch.manual_seed(0)
    model = LuongSeq2Seq.build(len(src_vocab), len(tgt_vocab), embed_dim=16, hidden_size=32, **config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        logits = model(batch.src, batch.tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch.tgt_out.reshape(-1),
                                                 ignore_index=model.pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    decoded = translate(model, [e.source for e in examples], src_vocab, tgt_vocab)
    assert decoded == [e.target for e in examples]


@pytest.mark.parametrize("input_feeding", [True, False])
def test_luong_trains_with_fit_and_decodes_with_greedy_decode(input_feeding):
    train = reversal_data(600, seed=1)
    test = reversal_data(60, seed=2)
    src_vocab, tgt_vocab = data.build_vocabs(train + test)
    torch.manual_seed(0)
    model = LuongSeq2Seq.build(len(src_vocab), len(tgt_vocab), embed_dim=16, hidden_size=48,
                               input_feeding=input_feeding)
    batches = data.Batches(train, src_vocab, tgt_vocab, 32, shuffle=True, seed=0)
    history = fit(model, batches, data.Batches(test, src_vocab, tgt_vocab, 60), epochs=6, lr=1e-2, progress=False)
    assert history["train_loss"][-1] < history["train_loss"][0] / 3
    assert history.last["exact_match"] >= 0.8
    batch = next(iter(data.Batches(test, src_vocab, tgt_vocab, 60)))
    decoded = greedy_decode(model, batch.src, max_len=10)
    assert len(decoded.tokens) == 60 and decoded.weights.shape[:1] == (60,)


def test_luong_build_sizes():
    model = LuongSeq2Seq.build(20, 15, embed_dim=8, hidden_size=16, score="concat", local_window=3)
    assert model.encoder.hidden_size == 8 and model.encoder.output_size == 16  # annotations of the decoder's size
    decoder = model.decoder
    assert decoder.hidden_size == 16 and decoder.annotation_size == 16 and model.encoder.pack
    assert decoder.rnn.input_size == 8 + 16  # [E y_{t-1}; h̃_{t-1}]
    assert decoder.W_c.weight.shape == (16, 16 + 16) and decoder.W_c.bias is None
    assert decoder.out.in_features == 16 and decoder.out.out_features == 15  # W_s reads h̃_t only
    assert decoder.attention.score_name == "concat" and decoder.position is not None
    assert "score='concat', input_feeding=True, attention=local-p D=3" in repr(decoder)
    unidirectional = LuongSeq2Seq.build(20, 15, hidden_size=16, score="dot", bidirectional=False)
    assert unidirectional.encoder.hidden_size == 16 and unidirectional.encoder.output_size == 16
    assert list(unidirectional.decoder.attention.parameters()) == [] and unidirectional.decoder.position is None
    wide = LuongSeq2Seq.build(20, 15, hidden_size=16, score="general", encoder_hidden_size=16)
    assert wide.encoder.output_size == 32 and wide.decoder.attention.W_a.weight.shape == (16, 32)


def test_luong_errors():
    with pytest.raises(ValueError, match="hidden_size=15 must be even with a bidirectional encoder"):
        LuongSeq2Seq.build(20, 15, hidden_size=15)
    with pytest.raises(ValueError, match=r"score='dot' compares h_t with each annotation directly, so annotation_size "
                                         r"must equal hidden_size, got annotation_size=32 and hidden_size=16"):
        LuongSeq2Seq.build(20, 15, hidden_size=16, score="dot", encoder_hidden_size=16)
    with pytest.raises(ValueError, match=r"unknown score 'additive'; choose one of 'dot', 'general', 'concat'"):
        LuongDecoder(11, 8, 16, 16, score="additive")
    with pytest.raises(ValueError, match="local_window must be a positive int, got 0"):
        LuongDecoder(11, 8, 16, 16, local_window=0)
    encoder = Encoder(12, 8, 16, bidirectional=True)
    with pytest.raises(ValueError, match=r"decoder expects annotations of size annotation_size=16 but the encoder "
                                         r"gives 32 \(bidirectional, hidden_size=16\)"):
        LuongSeq2Seq(encoder, LuongDecoder(11, 8, 16, annotation_size=16))
    with pytest.raises(ValueError, match="pad_id=0 but the decoder was built with pad_id=3"):
        LuongSeq2Seq(encoder, LuongDecoder(11, 8, 16, 32, pad_id=3))
    model = tiny_luong()
    src, tgt_in = padded_batch()
    with pytest.raises(ValueError, match=r"src has batch size 3 \(shape \(3, 5\)\) but tgt_in has 2"):
        model(src, tgt_in[:2])
    with pytest.raises(ValueError, match=r"src rows \[1\] are all padding"):
        model(torch.tensor([[4, 5], [0, 0]]), tgt_in[:2, :2])
    state = model.start(src)
    with pytest.raises(ValueError, match=r"prev must have shape \(B,\) = \(3,\), one token per source row, got \(2,\)"):
        model.step(state, torch.tensor([1, 1]))
    with pytest.raises(TypeError, match="state must be the LuongState returned by start or step, got BahdanauState"):
        model.step(tiny_model().start(src), tgt_in[:, 0])
    decoder = model.decoder
    with pytest.raises(ValueError, match=r"annotations must have shape \(B, S, 12\), got \(3, 5, 24\)"):
        decoder(tgt_in, torch.randn(3, 5, 24), torch.zeros(3, 12), src != 0)
    with pytest.raises(TypeError, match="src_mask must be a bool tensor"):
        decoder(tgt_in, torch.randn(3, 5, 12), torch.zeros(3, 12), None)
