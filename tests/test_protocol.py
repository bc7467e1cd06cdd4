"""Every model of the course implements the one protocol (attnbook.protocol), and the shared
training and decoding code drives them all unchanged."""

from typing import NamedTuple

import pytest
import torch

from attnbook import data
from attnbook.decoding import beam_search, greedy_decode, translate
from attnbook.protocol import Output, Seq2SeqModel, Step, reorder_state, select_rows
from attnbook.training import fit
from conftest import MODELS, TGT_VOCAB, overfit, padded_batch, reversal_examples, tiny

NAMES = list(MODELS)


@pytest.mark.parametrize("name", NAMES)
def test_forward_start_and_step_follow_the_protocol(name):
    model = tiny(name)
    assert isinstance(model, Seq2SeqModel)
    src, tgt_in = padded_batch()
    out = model(src, tgt_in)
    assert isinstance(out, tuple) and hasattr(out, "_fields") and out._fields[:2] == Output._fields
    assert out.logits.shape == (3, 4, TGT_VOCAB)
    step = model.step(model.start(src), tgt_in[:, 0])
    assert isinstance(step, Step) and step.logits.shape == (3, TGT_VOCAB)
    if name.startswith("rnn"):
        assert out.weights is None and step.weights is None
    else:  # (B, T, S) for one attention, (B, T, layers, heads, S) for the Transformer
        assert out.weights.shape[:2] == (3, 4) and out.weights.shape[-1] == 5
        assert step.weights.shape == (3, *out.weights.shape[2:])


@pytest.mark.parametrize("name", NAMES)
def test_stepping_reproduces_teacher_forcing(name):
    model = tiny(name).eval()
    src, tgt_in = padded_batch()
    with torch.no_grad():
        out = model(src, tgt_in)
        state, logits, weights = model.start(src), [], []
        for prev in tgt_in.unbind(1):
            step = model.step(state, prev)
            state = step.state
            logits.append(step.logits)
            weights.append(step.weights)
    assert torch.allclose(torch.stack(logits, 1), out.logits, atol=1e-5)
    if out.weights is not None:
        assert torch.allclose(torch.stack(weights, 1), out.weights, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_padded_source_positions_get_exactly_zero_weight_and_do_not_change_a_row(name):
    model = tiny(name).eval()
    src, tgt_in = padded_batch()
    with torch.no_grad():
        out = model(src, tgt_in)
        alone = model(src[2:, :2], tgt_in[2:])
    assert torch.allclose(out.logits[2], alone.logits[0], atol=1e-5)
    if out.weights is not None:
        padding = (src == 0).view(3, *[1] * (out.weights.dim() - 2), 5).expand_as(out.weights)  # (B, T, ..., S)
        assert torch.equal(out.weights[padding], torch.zeros(int(padding.sum())))
        decoded = greedy_decode(model, src, max_len=6)
        padding = (src == 0).view(3, *[1] * (decoded.weights.dim() - 2), 5).expand_as(decoded.weights)
        assert torch.equal(decoded.weights[padding], torch.zeros(int(padding.sum())))


@pytest.mark.parametrize("name", NAMES)
def test_gradients_reach_every_parameter(name):
    model = tiny(name)
    src, tgt_in = padded_batch()
    model(src, tgt_in).logits.sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


@pytest.mark.parametrize(
    "name",
    [
        "rnn",
        "bahdanau",
        "luong-general-feed-global",
        "luong-dot-nofeed-global",
        "luong-concat-feed-global",
        "luong-general-feed-local",
        "transformer-pre",
        "transformer-post",
    ],
)
def test_overfits_a_tiny_reversal_batch_and_every_decoder_reads_it_back(name):
    examples = reversal_examples(16, seed=3)
    vocabs = data.build_vocabs(examples)
    torch.manual_seed(0)
    model = MODELS[name](len(vocabs[0]), len(vocabs[1]), 16, 64 if name == "rnn" else 32)
    assert overfit(model, examples, vocabs, steps=300 if name == "rnn" else 150) < 0.05
    targets = [e.target for e in examples]
    sources = [e.source for e in examples]
    assert translate(model, sources, *vocabs) == targets
    assert translate(model, sources, *vocabs, beam_size=3) == targets


@pytest.mark.parametrize("name", ["bahdanau", "luong-general-feed-global", "luong-general-nofeed-global"])
def test_trains_with_fit_and_decodes(name):
    train, test = reversal_examples(600, seed=1), reversal_examples(60, seed=2)
    vocabs = data.build_vocabs(train + test)
    torch.manual_seed(0)
    model = MODELS[name](len(vocabs[0]), len(vocabs[1]), 16, 48)
    batches = data.Batches(train, *vocabs, 32, shuffle=True, seed=0)
    history = fit(model, batches, data.Batches(test, *vocabs, 60), epochs=6, lr=1e-2, progress=False)
    assert history["train_loss"][-1] < history["train_loss"][0] / 3
    assert history.last["exact_match"] >= 0.8


@pytest.mark.parametrize("name", NAMES)
def test_beam_of_one_is_greedy_and_wider_beams_score_at_least_as_high(name):
    model = tiny(name)
    src, _ = padded_batch()
    greedy = greedy_decode(model, src, max_len=7)
    one = beam_search(model, src, max_len=7, beam_size=1)
    assert one.tokens == greedy.tokens
    assert torch.allclose(one.scores, greedy.scores, atol=1e-5)
    if greedy.weights is not None:
        assert torch.allclose(one.weights, greedy.weights[:, : one.weights.size(1)])
    wide = beam_search(model, src, max_len=7, beam_size=5)
    assert (wide.scores >= greedy.scores - 1e-5).all()


class Pair(NamedTuple):
    a: torch.Tensor
    b: object


def test_select_rows_picks_rows_of_every_tensor_in_any_container():
    x = torch.arange(6).view(3, 2)
    index = torch.tensor([2, 2, 0])
    state = {"pair": Pair(x, None), "list": [x, 7], "tuple": (x, "text"), "tensor": x}
    picked = select_rows(state, index)
    assert torch.equal(picked["tensor"], x[[2, 2, 0]])
    assert isinstance(picked["pair"], Pair) and picked["pair"].b is None
    assert torch.equal(picked["pair"].a, x[[2, 2, 0]])
    assert picked["list"][1] == 7 and picked["tuple"][1] == "text"
    assert torch.equal(picked["list"][0], x[[2, 2, 0]])


def test_reorder_state_uses_the_models_own_method_when_it_has_one():
    class Model:
        def reorder_state(self, state, index):
            return ("mine", index.tolist())

    assert reorder_state(Model(), torch.zeros(3), torch.tensor([1])) == ("mine", [1])
    assert torch.equal(reorder_state(object(), torch.arange(3), torch.tensor([2, 0])), torch.tensor([2, 0]))


def test_teacher_forced_weights_are_the_models_weights_in_eval_mode():
    from attnbook.bahdanau import BahdanauSeq2Seq
    from attnbook.data import build_vocabs, make_batch
    from attnbook.protocol import teacher_forced_weights
    from attnbook.rnn import Seq2Seq
    from attnbook.tasks import reversal_task

    examples = reversal_task(6, 3, 7, seed=0)
    vocabs = build_vocabs(examples)
    torch.manual_seed(0)
    model = BahdanauSeq2Seq.build(len(vocabs[0]), len(vocabs[1]), embed_dim=8, hidden_size=8, attention_dim=8)
    model.train()
    weights = teacher_forced_weights(model, examples, *vocabs)
    batch = make_batch(examples, *vocabs)
    assert model.training  # the mode is restored
    model.eval()
    with torch.no_grad():
        assert torch.equal(weights, model(batch.src, batch.tgt_in).weights)
    assert weights.shape == (6, batch.tgt_in.size(1), batch.src.size(1))
    plain = Seq2Seq.build(len(vocabs[0]), len(vocabs[1]), embed_dim=8, hidden_size=8)
    with pytest.raises(ValueError, match="Seq2Seq returns no attention weights"):
        teacher_forced_weights(plain, examples, *vocabs)
