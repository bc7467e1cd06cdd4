"""Tests of attnbook.decoding: greedy decoding and translate."""

import pytest
import torch
from torch import nn

from attnbook import data
from attnbook.decoding import Decoded, greedy_decode, translate
from attnbook.rnn import Seq2Seq
from attnbook.training import fit

V = 8


class ScriptedModel(nn.Module):
    """Emits a fixed script of tokens per row; optionally returns attention weights.

    ``script``: (B, steps) ids; at step t every row predicts ``script[b, t]`` (one-hot logits).
    Records the tokens it was fed and whether it ran in training mode / with gradients.
    """

    def __init__(self, script, with_weights=False):
        super().__init__()
        self.script = torch.tensor(script)
        self.with_weights = with_weights
        self.pad_id = 0
        self.dummy = nn.Parameter(torch.zeros(1))
        self.fed, self.modes = [], []

    def start(self, src):
        return {"t": 0, "S": src.size(1)}

    def step(self, state, prev):
        self.fed.append(prev.tolist())
        self.modes.append((self.training, torch.is_grad_enabled()))
        t = state["t"]
        logits = torch.full((self.script.size(0), V), -5.0)
        logits[torch.arange(self.script.size(0)), self.script[:, t]] = 5.0
        weights = None
        if self.with_weights:
            weights = torch.softmax(torch.arange(state["S"], dtype=torch.float) * (t + 1), 0)
            weights = weights.expand(self.script.size(0), -1)
        return logits, {"t": t + 1, "S": state["S"]}, weights


SRC = torch.tensor([[4, 5, 6], [7, 0, 0]])


def test_stops_at_eos_and_excludes_bos_and_eos():
    model = ScriptedModel([[4, 5, 2, 6, 6, 6], [7, 2, 5, 5, 5, 5]])
    out = greedy_decode(model, SRC, max_len=6)
    assert isinstance(out, Decoded)
    assert out.tokens == [[4, 5], [7]]
    assert out.weights is None
    assert len(model.fed) == 3  # every row had produced eos after 3 steps
    assert model.fed[0] == [1, 1]  # starts from bos
    assert model.fed[1] == [4, 7]  # then feeds its own predictions


def test_respects_max_len():
    model = ScriptedModel([[4, 5, 6, 7, 2], [5, 5, 5, 5, 5]])
    out = greedy_decode(model, SRC, max_len=3)
    assert out.tokens == [[4, 5, 6], [5, 5, 5]]
    assert len(model.fed) == 3


def test_weights_are_stacked_and_zero_after_eos():
    model = ScriptedModel([[4, 2, 6, 6], [7, 5, 2, 5]], with_weights=True)
    out = greedy_decode(model, SRC, max_len=4)
    assert out.tokens == [[4], [7, 5]]
    assert out.weights.shape == (2, 3, 3)  # (B, T_out, S)
    assert torch.allclose(out.weights[1].sum(-1), torch.ones(3))
    assert torch.allclose(out.weights[0, :2].sum(-1), torch.ones(2))  # up to and with the eos step
    assert torch.equal(out.weights[0, 2], torch.zeros(3))  # finished row


def test_eval_no_grad_and_mode_restored():
    model = ScriptedModel([[2], [2]]).train()
    greedy_decode(model, SRC, max_len=2)
    assert model.modes == [(False, False)]
    assert model.training
    model.eval()
    greedy_decode(model, SRC, max_len=2)
    assert not model.training


def test_equals_step_by_step_argmax():
    torch.manual_seed(0)
    model = Seq2Seq.build(10, 9, embed_dim=8, hidden_size=16).eval()
    src = torch.randint(4, 10, (5, 6))
    out = greedy_decode(model, src, max_len=7)
    state, prev, steps = model.start(src), torch.ones(5, dtype=torch.long), []
    with torch.no_grad():
        for _ in range(7):
            logits, state, _ = model.step(state, prev)
            prev = logits.argmax(-1)
            steps.append(prev)
    for row, expected in zip(out.tokens, torch.stack(steps, 1).tolist()):
        assert row == (expected[: expected.index(2)] if 2 in expected else expected)


def test_translate_round_trip_with_a_trained_model():
    torch.manual_seed(0)
    examples = data.reversal_task(16, 2, 4, seed=3)
    src_vocab, tgt_vocab = data.build_vocabs(examples)
    batches = [data.make_batch(examples, src_vocab, tgt_vocab)]
    model = Seq2Seq.build(len(src_vocab), len(tgt_vocab), embed_dim=16, hidden_size=64)
    fit(model, batches, epochs=50, lr=1e-2, progress=False)
    texts = [ex.source for ex in examples]
    assert translate(model, texts, src_vocab, tgt_vocab) == [text[::-1] for text in texts]


def test_translate_with_a_fake_model():
    vocab = data.Vocab("abcd", name="target")
    model = ScriptedModel([[4, 5, 2], [7, 2, 2]])
    assert translate(model, ["ab", "c"], vocab, vocab) == ["ab", "d"]


def test_errors():
    model = ScriptedModel([[2], [2]])
    with pytest.raises(ValueError, match="max_len must be an int >= 1, got 0"):
        greedy_decode(model, SRC, max_len=0)
    with pytest.raises(ValueError, match=r"src must be a 2-D tensor of token ids \(B, S\), got \(3,\)"):
        greedy_decode(model, torch.tensor([4, 5, 6]), max_len=3)
    vocab = data.Vocab("abcd")
    with pytest.raises(TypeError, match=r"translate\(model, \[text\]"):
        translate(model, "ab", vocab, vocab)
    with pytest.raises(ValueError, match="texts is empty"):
        translate(model, [], vocab, vocab)
    with pytest.raises(ValueError, match=r"texts \[1\] are empty strings"):
        translate(model, ["ab", ""], vocab, vocab)
