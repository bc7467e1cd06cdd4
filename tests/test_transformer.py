"""Chapter 6: positions, masks, the layers (equal to PyTorch's), the Transformer and its checkers."""

import math

import pytest
import torch
from torch import nn

from attnbook import data
from attnbook.exercises import check_causal_mask, check_positional_encoding
from attnbook.protocol import select_rows
from attnbook.training import count_parameters, fit
from attnbook.transformer import (
    DecoderLayer,
    EncoderLayer,
    PositionalEncoding,
    PreLNDecoderLayer,
    PreLNEncoderLayer,
    Transformer,
    causal_mask,
    sinusoidal_positions,
)
from conftest import checker_fails, checker_passes, padded_batch, reversal_examples


def test_sinusoidal_positions_follow_the_paper():
    pe = sinusoidal_positions(50, 16)
    assert pe.shape == (50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)
    assert torch.equal(sinusoidal_positions(1, 4), torch.tensor([[0.0, 1.0, 0.0, 1.0]]))
    short = sinusoidal_positions(50, 16, base=1000.0)
    assert not torch.allclose(short, pe) and torch.allclose(short[:, :2], pe[:, :2])  # the fastest pair is the same


def test_a_shift_of_the_positions_is_a_fixed_rotation_of_each_pair():
    pe = sinusoidal_positions(60, 8)
    k = 5
    frequency = 10000 ** (-torch.arange(0, 8, 2) / 8)  # (4,)
    for i, w in enumerate(frequency.tolist()):
        rotation = torch.tensor([[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]])
        pair = pe[:, 2 * i : 2 * i + 2]  # (L, 2): (sin, cos) of pos·w
        assert torch.allclose(pair[:-k] @ rotation, pair[k:], atol=1e-5)  # the same matrix for every position


def test_positional_encoding_adds_the_positions_from_an_offset():
    layer = PositionalEncoding(8, max_positions=20)
    x = torch.randn(2, 5, 8)
    assert torch.allclose(layer(x), x + sinusoidal_positions(5, 8))
    assert torch.allclose(layer(x, offset=3), x + sinusoidal_positions(8, 8)[3:])
    with pytest.raises(ValueError, match="positions 18..22 do not fit max_positions=20"):
        layer(x, offset=18)
    with pytest.raises(ValueError, match="d_model=7 must be even"):
        sinusoidal_positions(4, 7)


def test_causal_mask():
    assert torch.equal(causal_mask(3), torch.tensor([[True, False, False], [True, True, False], [True, True, True]]))
    with pytest.raises(ValueError, match="size must be a positive int, got 0"):
        causal_mask(0)


def pad_mask(lengths, width):
    return torch.arange(width) < torch.tensor(lengths).view(-1, 1)  # (B, width): True = real


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_pytorchs(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True, norm_first=norm_first).eval()
    ours = EncoderLayer.from_torch(theirs).eval()
    assert type(ours) is (PreLNEncoderLayer if norm_first else EncoderLayer)
    x, real = torch.randn(3, 6, 16), pad_mask([6, 4, 1], 6)
    with torch.no_grad():
        expected = theirs(x, src_key_padding_mask=~real)  # PyTorch: True = ignore
        got, weights = ours(x, real[:, None, None, :])
    assert torch.allclose(got[real], expected[real], atol=1e-5)  # PyTorch's fast path may leave padded rows as 0
    assert weights.shape == (3, 4, 6, 6) and torch.equal(
        weights.masked_select(~real[:, None, None, :]), torch.zeros(int((~real).sum()) * 4 * 6)
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_pytorchs(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.1, batch_first=True, norm_first=norm_first).eval()
    ours = DecoderLayer.from_torch(theirs).eval()
    assert type(ours) is (PreLNDecoderLayer if norm_first else DecoderLayer)
    x, memory, real = torch.randn(3, 5, 16), torch.randn(3, 7, 16), pad_mask([7, 3, 2], 7)
    with torch.no_grad():
        expected = theirs(x, memory, tgt_mask=~causal_mask(5), memory_key_padding_mask=~real)
        got, self_weights, cross_weights = ours(x, memory, causal_mask(5), real[:, None, None, :])
    assert torch.allclose(got, expected, atol=1e-5)
    assert self_weights.shape == (3, 4, 5, 5) and cross_weights.shape == (3, 4, 5, 7)


def test_from_torch_refuses_layers_it_cannot_copy():
    with pytest.raises(ValueError, match="batch_first=True and activation='relu'"):
        EncoderLayer.from_torch(nn.TransformerEncoderLayer(16, 4, 32))
    with pytest.raises(ValueError, match="batch_first=True and activation='relu'"):
        DecoderLayer.from_torch(nn.TransformerDecoderLayer(16, 4, 32, batch_first=True, activation="gelu"))


def small(norm_first=False, seed=0, **sizes):
    torch.manual_seed(seed)
    options = dict(d_model=16, num_heads=2, num_encoder_layers=2, num_decoder_layers=2, d_ff=32, dropout=0.0)
    return Transformer(12, 11, norm_first=norm_first, **{**options, **sizes}).eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_changing_a_later_target_token_never_changes_earlier_outputs(norm_first):
    model = small(norm_first)
    src, tgt_in = padded_batch()
    changed = tgt_in.clone()
    changed[:, 2] = 7
    with torch.no_grad():
        before, after = model(src, tgt_in), model(src, changed)
    assert torch.allclose(before.logits[:, :2], after.logits[:, :2], atol=1e-6)
    assert not torch.allclose(before.logits[:, 2:], after.logits[:, 2:], atol=1e-3)


def test_without_the_causal_mask_the_no_leak_test_fails():
    model = small()
    src, tgt_in = padded_batch()
    changed = tgt_in.clone()
    changed[:, 2] = 7
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src)
        outputs = []
        for target in (tgt_in, changed):
            x = model.embed(target, model.tgt_embedding)
            for layer in model.decoder_layers:
                x, _, _ = layer(x, memory, None, src_mask[:, None, None, :])  # no causal mask
            outputs.append(model.generator(x))
    assert not torch.allclose(outputs[0][:, :2], outputs[1][:, :2], atol=1e-3)


def test_outputs_do_not_depend_on_how_much_padding_follows_the_source():
    model = small()
    src, tgt_in = padded_batch()
    wider = torch.cat([src, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    with torch.no_grad():
        assert torch.allclose(model(src, tgt_in).logits, model(wider, tgt_in).logits, atol=1e-5)


def test_weights_have_the_documented_shapes_and_step_matches_forward():
    model = small(num_encoder_layers=3, num_decoder_layers=2)
    src, tgt_in = padded_batch()
    with torch.no_grad():
        out = model(src, tgt_in)
        state = model.start(src)
        steps = []
        for prev in tgt_in.unbind(1):
            step = model.step(state, prev)
            state = step.state
            steps.append(step)
    assert out.logits.shape == (3, 4, 11) and out.weights.shape == (3, 4, 2, 2, 5)
    assert out.self_weights.shape == (3, 2, 2, 4, 4) and out.encoder_weights.shape == (3, 3, 2, 5, 5)
    assert torch.allclose(torch.stack([s.logits for s in steps], 1), out.logits, atol=1e-5)
    assert torch.allclose(torch.stack([s.weights for s in steps], 1), out.weights, atol=1e-6)
    # every decoder layer's keys and values at the 4 positions: (B, H, t, d_head)
    assert all(cache.keys.shape == cache.values.shape == (3, 2, 4, 8) for cache in state.caches)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoding_projects_the_memory_once_and_leaves_old_states_alone(norm_first):
    """The encoder's output is projected to keys and values in ``start`` only; a step returns new
    caches, so stepping twice from one state gives the same logits (beam search relies on it)."""
    model = small(num_encoder_layers=1, num_decoder_layers=2, norm_first=norm_first)
    src, tgt_in = padded_batch()
    calls = []
    for layer in model.decoder_layers:
        layer.cross_attn.k_proj.register_forward_hook(lambda *args: calls.append(1))
    with torch.no_grad():
        state = model.start(src)
        assert len(calls) == 2  # one projection per decoder layer
        first = model.step(state, tgt_in[:, 0])
        for prev in tgt_in[:, 1:].unbind(1):
            first = model.step(first.state, prev)
        assert len(calls) == 2  # and none while stepping
        again = model.step(state, tgt_in[:, 0])
        assert torch.equal(again.logits, model.step(state, tgt_in[:, 0]).logits)
        assert all(len(cache) == 0 for cache in state.caches) and len(first.state.caches[0]) == 4
        order = torch.tensor([2, 0, 1])
        moved = select_rows(first.state, order)
        assert torch.equal(moved.caches[1].keys, first.state.caches[1].keys[order])
        assert torch.equal(moved.memory_caches[0].values, first.state.memory_caches[0].values[order])


def test_shared_embeddings_are_one_matrix_and_need_one_vocabulary():
    torch.manual_seed(0)
    model = Transformer(
        12, 12, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32, share_embeddings=True
    )
    assert model.src_embedding.weight is model.tgt_embedding.weight is model.generator.weight
    assert (
        count_parameters(model)
        == count_parameters(
            Transformer(12, 12, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)
        )
        - 2 * 12 * 16
    )
    with pytest.raises(
        ValueError, match="share_embeddings needs one shared vocabulary, got src_vocab_size=12 and tgt_vocab_size=11"
    ):
        Transformer(12, 11, share_embeddings=True)


def test_the_papers_model_sizes():
    assert count_parameters(Transformer(37000, 37000, share_embeddings=True)) == 63_082_496
    big = Transformer(37000, 37000, d_model=1024, num_heads=16, d_ff=4096, dropout=0.3, share_embeddings=True)
    assert count_parameters(big) == 214_245_376


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="d_model=100 is not divisible by num_heads=8"):
        Transformer(10, 10, d_model=100)
    with pytest.raises(ValueError, match="pad_id=12 is not an id of a vocabulary of size 11"):
        Transformer(12, 11, pad_id=12)
    model = small()
    with pytest.raises(ValueError, match="src must be padded on the right only"):
        model(torch.tensor([[0, 4, 5]]), torch.tensor([[1, 4]]))
    with pytest.raises(TypeError, match="state must be the TransformerState returned by start or step"):
        model.step((torch.zeros(1, 2, 16),), torch.tensor([1]))


@pytest.mark.parametrize("norm_first", [False, True])
def test_learns_reversal_with_fit_and_the_warm_up_schedule(norm_first):
    train, test = reversal_examples(800, seed=1), reversal_examples(60, seed=2)
    vocabs = data.build_vocabs(train + test)
    torch.manual_seed(0)
    model = Transformer(
        len(vocabs[0]),
        len(vocabs[1]),
        d_model=32,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        norm_first=norm_first,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 20))
    batches = data.Batches(train, *vocabs, 32, shuffle=True, seed=0)
    history = fit(
        model,
        batches,
        data.Batches(test, *vocabs, 60),
        epochs=12,
        optimizer=optimizer,
        scheduler=scheduler,
        progress=False,
    )
    assert history.last["exact_match"] >= 0.8, history["exact_match"]
    assert history["train_loss"][-1] < history["train_loss"][0] / 4


# ================================================================ the checkers


def reference_positions(length, d_model):
    position = torch.arange(length).unsqueeze(1).float()
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)
    return pe


def numpy_positions(length, d_model):
    import numpy as np

    angle = np.arange(length)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


@pytest.mark.parametrize("solution", [sinusoidal_positions, reference_positions, numpy_positions])
def test_positional_encoding_checker_passes_right_solutions(solution, capsys):
    checker_passes(check_positional_encoding, solution, capsys)


def variant(length, d_model, base=10000.0, swap=False, per_feature=False, halves=False, first=0):
    position = torch.arange(first, first + length).unsqueeze(1).double()
    j = torch.arange(d_model).double()
    angle = position / base ** ((j if per_feature else 2 * (j // 2)) / d_model)
    sin, cos = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    if halves:
        return torch.cat([torch.sin(angle[:, 0::2]), torch.cos(angle[:, 0::2])], dim=1).float()
    out = cos(angle)
    out[:, 0::2] = sin(angle[:, 0::2])
    return out.float()


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (dict(base=1000.0), "the base is 10000, not 1000"),
        (dict(swap=True), "sin and cos are swapped"),
        (dict(per_feature=True), "features 2i and 2i+1 share one frequency"),
        (dict(halves=True), "[all sines | all cosines] layout"),
        (dict(first=1), "positions count from 0"),
    ],
)
def test_positional_encoding_checker_explains_typical_mistakes(options, fragment, capsys):
    checker_fails(check_positional_encoding, lambda length, d: variant(length, d, **options), capsys, fragment)


def test_positional_encoding_checker_explains_a_transposed_answer(capsys):
    checker_fails(
        check_positional_encoding, lambda length, d: sinusoidal_positions(length, d).T, capsys, "one row per position"
    )


@pytest.mark.parametrize(
    "solution",
    [
        causal_mask,
        lambda n: torch.tril(torch.ones(n, n)).bool(),
        lambda n: torch.arange(n).unsqueeze(1) >= torch.arange(n),
        lambda n: ~torch.ones(n, n, dtype=torch.bool).triu(1),
    ],
)
def test_causal_mask_checker_passes_right_solutions(solution, capsys):
    checker_passes(check_causal_mask, solution, capsys)


@pytest.mark.parametrize(
    ("wrong", "fragment"),
    [
        (lambda n: torch.ones(n, n, dtype=torch.bool).triu(1), "True must mean *may attend*"),
        (lambda n: torch.ones(n, n, dtype=torch.bool).triu(), "this is the upper triangle"),
        (lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1), "a position may attend to itself"),
        (lambda n: torch.tril(torch.ones(n, n)), "return a bool tensor"),
        (
            lambda n: torch.zeros(n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf")),
            "return a bool tensor",
        ),
    ],
)
def test_causal_mask_checker_explains_typical_mistakes(wrong, fragment, capsys):
    checker_fails(check_causal_mask, wrong, capsys, fragment)


def test_the_embeddings_are_initialised_in_a_fixed_order(monkeypatch):
    drawn = []
    normal = nn.init.normal_
    monkeypatch.setattr(
        nn.init, "normal_", lambda tensor, *args, **kwargs: drawn.append(tensor) or normal(tensor, *args, **kwargs)
    )
    for _ in range(5):  # the order must not depend on where in memory the modules happen to live
        drawn.clear()
        model = Transformer(12, 11, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)
        assert drawn[0] is model.src_embedding.weight and drawn[1] is model.tgt_embedding.weight
    torch.manual_seed(3)
    first = Transformer(12, 11, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)
    torch.manual_seed(3)
    second = Transformer(12, 11, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))
