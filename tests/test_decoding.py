"""attnbook.decoding: greedy decoding, beam search and translate, on hand-built and real models."""

import itertools

import pytest
import torch
from torch import nn

from attnbook import data
from attnbook.decoding import Decoded, beam_search, greedy_decode, translate
from attnbook.protocol import Step
from conftest import padded_batch, tiny

V = 8
BOS, EOS = 1, 2


class ScriptedModel(nn.Module):
    """Row ``b`` predicts ``script[b, t]`` at step ``t`` (one-hot logits), whatever it is fed.

    Its weights have ``heads`` leading dims after B (``None``: no weights): ``(B, *heads, S)``, each
    row's weights sum to 1 and differ from row to row. Records what it was fed and its mode.
    """

    def __init__(self, script, heads=None):
        super().__init__()
        self.script, self.heads, self.pad_id = torch.tensor(script), heads, 0
        self.dummy = nn.Parameter(torch.zeros(1))
        self.fed, self.modes = [], []

    def start(self, src):
        return {"t": torch.zeros(src.size(0), dtype=torch.long), "row": torch.arange(src.size(0)), "S": src.size(1)}

    def step(self, state, prev):
        self.fed.append(prev.tolist())
        self.modes.append((self.training, torch.is_grad_enabled()))
        t, rows = int(state["t"][0]), state["row"]  # rows: which script row each state row follows
        logits = torch.full((rows.numel(), V), -5.0)
        logits[torch.arange(rows.numel()), self.script[rows, t]] = 5.0
        weights = None
        if self.heads is not None:
            ramp = torch.arange(state["S"], dtype=torch.float) * (t + 1)  # (S,)
            sharpness = (rows.float() + 1).view(-1, *[1] * (len(self.heads) + 1))  # (B, 1, ..., 1): rows differ
            weights = torch.softmax(ramp * sharpness, dim=-1).expand(rows.numel(), *self.heads, -1)  # (B, *heads, S)
        return Step(logits, {**state, "t": state["t"] + 1}, weights)


SRC = torch.tensor([[4, 5, 6], [7, 0, 0]])


def test_greedy_stops_at_eos_and_excludes_bos_and_eos():
    model = ScriptedModel([[4, 5, 2, 6, 6, 6], [7, 2, 5, 5, 5, 5]])
    out = greedy_decode(model, SRC, max_len=6)
    assert isinstance(out, Decoded) and out.tokens == [[4, 5], [7]] and out.weights is None
    assert len(model.fed) == 3  # every row had produced eos after 3 steps
    assert model.fed[0] == [1, 1] and model.fed[1] == [4, 7]  # bos, then its own predictions
    step_log_prob = torch.log_softmax(torch.tensor([5.0] + [-5.0] * (V - 1)), 0)[0]
    assert torch.allclose(out.scores, torch.stack([3 * step_log_prob, 2 * step_log_prob]), atol=1e-6)  # eos included


def test_greedy_respects_max_len():
    model = ScriptedModel([[4, 5, 6, 7, 2], [5, 5, 5, 5, 5]])
    out = greedy_decode(model, SRC, max_len=3)
    assert out.tokens == [[4, 5, 6], [5, 5, 5]] and len(model.fed) == 3


@pytest.mark.parametrize("heads", [(), (3,), (2,), (2, 4)], ids=["(B,S)", "(B,H,S) H!=B", "(B,H,S) H==B", "(B,L,H,S)"])
def test_greedy_zeroes_the_weights_of_finished_rows_only(heads):
    """Rows, not heads, are zeroed after eos, whatever the weights' shape (H == B included)."""
    model = ScriptedModel([[4, 2, 6, 6], [7, 5, 2, 5]], heads=heads)
    out = greedy_decode(model, SRC, max_len=4)
    assert out.tokens == [[4], [7, 5]]
    assert out.weights.shape == (2, 3, *heads, 3)  # (B, T_out, *heads, S)
    sums = out.weights.sum(-1)  # (B, T_out, *heads)
    assert torch.allclose(sums[1], torch.ones_like(sums[1]))  # row 1 runs for all 3 steps
    assert torch.allclose(sums[0, :2], torch.ones_like(sums[0, :2]))  # row 0 up to and with its eos step
    assert torch.equal(out.weights[0, 2], torch.zeros_like(out.weights[0, 2]))  # then zero
    assert not torch.equal(out.weights[0, 0], out.weights[1, 0])  # the rows' weights differ: not mixed up


def test_greedy_runs_in_eval_mode_without_gradients_and_restores_the_mode():
    model = ScriptedModel([[2], [2]]).train()
    greedy_decode(model, SRC, max_len=2)
    assert model.modes == [(False, False)] and model.training
    model.eval()
    greedy_decode(model, SRC, max_len=2)
    assert not model.training


class PrefixModel(nn.Module):
    """A hand-built model whose next-token probabilities depend on the prefix: ``table[prefix] = {token: p}``.

    Tokens missing from a prefix's entry share what is left of the probability.
    """

    def __init__(self, table):
        super().__init__()
        self.table, self.pad_id = table, 0
        self.dummy = nn.Parameter(torch.zeros(1))

    def start(self, src):
        return [()] * src.size(0)

    def step(self, state, prev):
        prefixes = [p + (int(t),) if p or int(t) != BOS else () for p, t in zip(state, prev)]
        probs = torch.zeros(len(prefixes), V)
        for row, prefix in enumerate(prefixes):
            given = self.table.get(prefix, {})
            rest = (1 - sum(given.values())) / (V - len(given))
            probs[row] = torch.tensor([given.get(token, rest) for token in range(V)])
        return Step(probs.log(), prefixes, None)

    def reorder_state(self, state, index):
        return [state[i] for i in index.tolist()]


#: Greedy takes 4 (p 0.5), then 5 (0.35): p(4 5 eos) = 0.175. The likelier 6 eos (0.4 · 0.9 = 0.36) starts with 6 (0.4).
MYOPIC = {(): {4: 0.5, 6: 0.4}, (4,): {5: 0.35, 7: 0.3, 3: 0.3}, (4, 5): {EOS: 1.0 - 1e-6}, (6,): {EOS: 0.9}}


def test_beam_search_finds_the_likelier_sequence_that_greedy_misses():
    model, src = PrefixModel(MYOPIC), torch.tensor([[4], [5]])
    greedy = greedy_decode(model, src, max_len=5)
    assert greedy.tokens == [[4, 5], [4, 5]]
    beam = beam_search(model, src, max_len=5, beam_size=2)
    assert beam.tokens == [[6], [6]]
    assert torch.allclose(beam.scores, torch.log(torch.tensor([0.36, 0.36])))  # 6 and eos, summed log-probabilities
    assert torch.allclose(greedy.scores, torch.log(torch.tensor([0.175, 0.175])), atol=1e-5)
    assert beam_search(model, src, max_len=5, beam_size=1).tokens == greedy.tokens


def test_length_penalty_only_ranks():
    """6 eos has the larger sum (0.45 > 0.5 · 0.9³ = 0.3645); with lengths normalised (alpha = 2) the
    longer 4 5 7 eos ranks first, and ``scores`` stay the plain sums."""
    table = {(): {4: 0.5, 6: 0.5}, (6,): {EOS: 0.9}, (4,): {5: 0.9}, (4, 5): {7: 0.9}, (4, 5, 7): {EOS: 0.9}}
    model, src = PrefixModel(table), torch.tensor([[4]])
    plain = beam_search(model, src, max_len=6, beam_size=3)
    assert plain.tokens == [[6]] and plain.scores.item() == pytest.approx(torch.log(torch.tensor(0.45)).item())
    normalised = beam_search(model, src, max_len=6, beam_size=3, length_penalty=2.0)
    assert normalised.tokens == [[4, 5, 7]]
    assert normalised.scores.item() == pytest.approx(torch.log(torch.tensor(0.5 * 0.9**3)).item(), abs=1e-6)


@pytest.mark.parametrize("margin, winner", [(1.01, [4, 5, 7]), (0.99, [6])])
def test_length_penalty_is_wu_et_als(margin, winner):
    """At alpha = 1, ``6 eos`` (probability 0.45, length 2) and ``4 5 7 eos`` (length 4) tie when
    log P_long / (5 + 4) = log P_short / (5 + 2); 1 % either side decides. A constant other than 5
    in ``(5 + length) / 6`` moves the tie by more than that (4: 0.344, 6: 0.369, tie 0.359)."""
    tie = 0.45 ** (9 / 7)
    q = (margin * tie / 0.5) ** (1 / 3)  # each of the long sequence's last three steps
    table = {(): {4: 0.5, 6: 0.5}, (6,): {EOS: 0.9}, (4,): {5: q}, (4, 5): {7: q}, (4, 5, 7): {EOS: q}}
    out = beam_search(PrefixModel(table), torch.tensor([[4]]), max_len=6, beam_size=3, length_penalty=1.0)
    assert out.tokens == [winner]


def test_beam_search_with_a_wide_beam_is_exhaustive():
    """With more beams than prefixes, beam search returns the most likely sequence of all: checked by
    enumerating every sequence of at most ``max_len`` tokens of a small real model."""
    model, (src, _) = tiny("bahdanau").eval(), padded_batch()
    max_len, vocab = 3, 11
    beam = beam_search(model, src, max_len=max_len, beam_size=vocab ** (max_len - 1) * 5)
    for row in range(src.size(0)):
        best_score, best_tokens = float("-inf"), None
        for length in range(1, max_len + 1):
            for tokens in itertools.product(range(vocab), repeat=length):
                ends = tokens[-1] == EOS
                if EOS in tokens[:-1] or (not ends and length < max_len):
                    continue  # eos only at the end; without eos only at max_len (never finished)
                score = sequence_log_prob(model, src[row : row + 1], tokens)
                if score > best_score:
                    best_score, best_tokens = score, list(tokens[:-1] if ends else tokens)
        assert beam.tokens[row] == best_tokens
        assert beam.scores[row].item() == pytest.approx(best_score, abs=1e-5)


def sequence_log_prob(model, src, tokens) -> float:
    with torch.no_grad():
        state, prev, total = model.start(src), torch.tensor([BOS]), 0.0
        for token in tokens:
            logits, state, _ = model.step(state, prev)
            total += logits.log_softmax(-1)[0, token].item()
            prev = torch.tensor([token])
    return total


def test_beam_search_returns_weights_of_the_chosen_sequences():
    model, (src, _) = tiny("luong-general-feed-global").eval(), padded_batch()
    beam = beam_search(model, src, max_len=6, beam_size=3)
    for row, tokens in enumerate(beam.tokens):
        with torch.no_grad():
            state, prev, weights = model.start(src[row : row + 1]), torch.tensor([BOS]), []
            for token in tokens + [EOS]:
                step = model.step(state, prev)
                state, prev = step.state, torch.tensor([token])
                weights.append(step.weights[0])
        steps = min(len(weights), beam.weights.size(1))
        assert torch.allclose(beam.weights[row, :steps], torch.stack(weights)[:steps], atol=1e-6)


def test_translate_with_a_scripted_model_and_a_beam():
    vocab = data.Vocab("abcd", name="target")
    model = ScriptedModel([[4, 5, 2], [7, 2, 2]])
    assert translate(model, ["ab", "c"], vocab, vocab) == ["ab", "d"]
    assert translate(model, ["ab", "c"], vocab, vocab, beam_size=2) == ["ab", "d"]


def test_errors():
    model = ScriptedModel([[2], [2]])
    with pytest.raises(ValueError, match="max_len must be a positive int, got 0"):
        greedy_decode(model, SRC, max_len=0)
    with pytest.raises(ValueError, match=r"src must be 2-D \(B, S\), got shape \(3,\)"):
        greedy_decode(model, torch.tensor([4, 5, 6]), max_len=3)
    with pytest.raises(ValueError, match="beam_size must be a positive int, got 0"):
        beam_search(model, SRC, max_len=3, beam_size=0)
    with pytest.raises(ValueError, match=r"length_penalty must be in \[0, inf\), got -1"):
        beam_search(model, SRC, max_len=3, length_penalty=-1)
    vocab = data.Vocab("abcd")
    with pytest.raises(TypeError, match=r"translate\(model, \[text\]"):
        translate(model, "ab", vocab, vocab)
    with pytest.raises(ValueError, match="texts is empty"):
        translate(model, [], vocab, vocab)
    with pytest.raises(ValueError, match=r"texts \[1\] are empty strings"):
        translate(model, ["ab", ""], vocab, vocab)
