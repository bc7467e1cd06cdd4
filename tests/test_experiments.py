"""attnbook.experiments: the length experiment and context vectors."""

import pytest
import torch

from attnbook import data, experiments, tasks
from attnbook.experiments import context_vectors, evaluate_by_length, length_experiment
from attnbook.rnn import Seq2Seq
from attnbook.transformer import Transformer


def tiny_model(src_vocab_size, tgt_vocab_size):
    return Seq2Seq.build(src_vocab_size, tgt_vocab_size, embed_dim=8, hidden_size=16, bidirectional=False)


def test_length_experiment_reports_every_test_length():
    result = length_experiment(
        tiny_model, min_length=2, max_length=6, n_train=200, n_test=120, epochs=1, batch_size=32, alphabet="abcd"
    )
    lengths = sorted({len(e.source) for e in result.test_examples})
    assert list(result.by_length) == lengths
    assert set(lengths) <= set(range(2, 7))
    assert all(0.0 <= accuracy <= 1.0 for accuracy in result.by_length.values())
    assert len(result.history) == 1 and result.seconds > 0
    assert len(result.test_examples) == 120


def test_length_experiment_is_repeatable():
    settings = dict(min_length=2, max_length=5, n_train=150, n_test=60, epochs=1, batch_size=32, alphabet="abc")
    first = length_experiment(tiny_model, **settings)
    second = length_experiment(tiny_model, **settings)
    assert first.by_length == second.by_length
    assert first.history["train_loss"] == second.history["train_loss"]


def test_reverse_source_feeds_reversed_strings_with_unchanged_targets():
    settings = dict(min_length=3, max_length=5, n_train=100, n_test=40, epochs=1, batch_size=32, alphabet="abc")
    plain = length_experiment(tiny_model, **settings)
    flipped = length_experiment(tiny_model, reverse_source=True, **settings)
    for a, b in zip(plain.test_examples, flipped.test_examples):
        assert b.source == a.source[::-1]
        assert b.target == a.target


def test_evaluate_by_length_counts_a_perfect_model_as_perfect():
    """A scripted 'model' that reverses its source must score 1.0 at every length."""
    examples = tasks.reversal_task(30, 2, 5, seed=1, alphabet="abc")
    src_vocab, tgt_vocab = data.build_vocabs(examples)

    class Reverser(torch.nn.Module):
        pad_id = 0

        def start(self, src):
            lengths = (src != 0).sum(dim=1)
            return {"src": src, "lengths": lengths, "t": 0}

        def step(self, state, prev):
            src, lengths, t = state["src"], state["lengths"], state["t"]
            logits = torch.full((src.size(0), len(tgt_vocab)), -1e9)
            for row in range(src.size(0)):
                position = int(lengths[row]) - 1 - t
                token = (
                    tgt_vocab.eos_id
                    if position < 0
                    else tgt_vocab.encode(src_vocab.decode([int(src[row, position])]))[0]
                )
                logits[row, token] = 0.0
            return logits, {**state, "t": t + 1}, None

    by_length, overall = evaluate_by_length(Reverser(), examples, src_vocab, tgt_vocab)
    assert overall == 1.0
    assert set(by_length.values()) == {1.0}


def test_unknown_task_is_named():
    with pytest.raises(ValueError, match=r"unknown task 'sort'; choose one of \['copy', 'reversal'\]"):
        length_experiment(tiny_model, task="sort")


def test_context_vectors_match_the_encoder_and_ignore_batch_composition():
    examples = tasks.date_task(20, seed=0)
    src_vocab, tgt_vocab = data.build_vocabs(examples)
    torch.manual_seed(0)
    model = Seq2Seq.build(len(src_vocab), len(tgt_vocab), embed_dim=8, hidden_size=12, bidirectional=True)
    texts = [e.source for e in examples]
    together = context_vectors(model, texts, src_vocab)
    one_by_one = torch.cat([context_vectors(model, [text], src_vocab) for text in texts])
    assert together.shape == (20, 24)
    assert torch.allclose(together, one_by_one, atol=1e-6)
    assert model.training  # the mode it had before


def test_context_vectors_need_an_encoder_with_one_final_state():
    with pytest.raises(TypeError, match="has no encode"):
        context_vectors(torch.nn.Linear(2, 2), ["ab"], data.Vocab("ab"))
    vocab = data.Vocab("ab")
    transformer = Transformer(len(vocab), 5, d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=8)
    with pytest.raises(TypeError, match="Transformer.encode returns TransformerEncoded, not an Encoded"):
        context_vectors(transformer, ["ab"], vocab)
    assert transformer.training


def test_longest_reliable_length_stops_at_the_first_failing_length():
    from attnbook.experiments.bottleneck import longest_reliable_length

    assert longest_reliable_length({5: 0.9, 3: 1.0, 4: 0.5, 6: 0.49, 7: 0.8}) == 5  # sorted; 7 is past a failure
    assert longest_reliable_length({3: 0.2, 4: 0.9}) == 0
    assert longest_reliable_length({3: 0.7, 4: 0.6}, threshold=0.65) == 3


def test_bottleneck_run_names_its_arms():
    from attnbook.experiments.bottleneck import bottleneck_run

    with pytest.raises(ValueError, match="unknown arm 'wide'; the arms are written, reversed, room, training"):
        bottleneck_run("wide", 0)


def test_measuring_every_epoch_does_not_change_the_training():
    settings = dict(min_length=2, max_length=6, n_train=200, n_test=80, epochs=3, batch_size=32, alphabet="abcd")
    once = length_experiment(tiny_model, **settings)
    each = length_experiment(tiny_model, every_epoch=True, **settings)
    assert once.curve is None and len(each.curve) == 3
    assert each.history["train_loss"] == once.history["train_loss"]
    assert each.history["epoch"] == [1, 2, 3] and len(each.history.step_losses) == len(once.history.step_losses)
    assert each.curve[-1]["by_length"] == once.by_length == each.by_length
    assert each.curve[-1]["symbols_by_length"] == once.symbols_by_length
    assert each.history["train_loss"][0] > each.history["train_loss"][-1]  # the curve's epochs differ


def test_extra_training_strings_keep_the_test_set_and_the_first_strings():
    settings = dict(min_length=2, max_length=6, n_train=100, n_test=60, epochs=1, batch_size=32, alphabet="abcd")
    base = length_experiment(tiny_model, **settings)
    more = length_experiment(tiny_model, extra_train=150, **settings)
    assert more.test_examples == base.test_examples
    test_sources = {example.source for example in base.test_examples}
    strings = dict(min_length=2, max_length=6, alphabet="abcd")
    extra = tasks.sequence_splits(tasks.reversal_task, 150, 0, 0, seed=1_000_003, exclude=test_sources, **strings).train
    assert len(extra) == 150 and not test_sources & {example.source for example in extra}
    with pytest.raises(ValueError, match="extra_train must be a non-negative int, got -1"):
        length_experiment(tiny_model, extra_train=-1, **settings)


class _ReadsItsInput(torch.nn.Module):
    """Guesses each target symbol from the next decoder input (``tgt_in`` shifted left, then
    ``<pad>``): right on every target symbol but the last real one (``<eos>``), and, with
    ``right_for=k``, wrong (it says ``<pad>``) from the ``k + 1``-th target symbol on."""

    pad_id = 0

    def __init__(self, vocab_size: int, right_for: int | None = None):
        super().__init__()
        self.vocab_size, self.right_for = vocab_size, right_for

    def forward(self, src, tgt_in):
        guess = torch.cat([tgt_in[:, 1:], torch.zeros_like(tgt_in[:, :1])], dim=1)  # (B, T)
        if self.right_for is not None:
            guess[:, self.right_for :] = self.pad_id
        return type("Out", (), {"logits": torch.nn.functional.one_hot(guess, self.vocab_size).float()})


def test_symbol_accuracy_counts_every_target_symbol_and_eos():
    examples = tasks.reversal_task(40, min_length=2, max_length=5, seed=3, alphabet="abc")
    src_vocab, tgt_vocab = data.build_vocabs(examples)
    model = _ReadsItsInput(len(tgt_vocab))
    by_length = experiments.symbol_accuracy_by_length(model, examples, src_vocab, tgt_vocab)
    assert set(by_length) == {len(e.source) for e in examples}
    # reading tgt_in shifted left predicts every target symbol but the last real one (<eos>) correctly
    for length, accuracy in by_length.items():
        assert accuracy == pytest.approx(length / (length + 1)), (length, accuracy)


class _FixedWeights(torch.nn.Module):
    """A model of the protocol whose attention weights are given by ``weights(src)``."""

    def __init__(self, weights):
        super().__init__()
        self.weights = weights

    def forward(self, src, tgt_in):
        from attnbook.protocol import Output

        weights = self.weights(src).unsqueeze(1).expand(-1, tgt_in.size(1), -1)  # (B, T, S)
        return Output(torch.zeros(*tgt_in.shape, 5), weights)


def test_weight_on_parts_of_an_even_spread_is_the_even_share():
    from attnbook.experiments.dates import weight_on_parts

    def even(src):
        real = (src != 0).float()  # (B, S)
        return real / real.sum(-1, keepdim=True)

    found = weight_on_parts(_FixedWeights(even), "dd/mm/yy")
    assert set(found) == {"year", "month", "day"}
    for part in found.values():
        assert part.on == pytest.approx(part.even, abs=1e-6) and part.even == pytest.approx(2 / 8)
        assert part.near == pytest.approx(part.even_near, abs=1e-6)
    assert found["day"].even_near == pytest.approx(3 / 8) and found["month"].even_near == pytest.approx(4 / 8)


def test_weight_on_parts_finds_all_the_weight_where_it_is_put():
    from attnbook.experiments.dates import PartWeight, part_rows, weight_on_parts
    from attnbook.tasks import DATE_FORMATS

    def on_the_first(src):  # all the weight on the first source character
        weights = torch.zeros(src.shape)
        weights[:, 0] = 1.0
        return weights

    found = weight_on_parts(_FixedWeights(on_the_first), "yyyy.mm.dd")
    assert found["year"].on == 1.0 and found["month"].on == 0.0 and found["day"].on == 0.0
    assert found["month"].near == 0.0 and found["year"].focus == pytest.approx(10 / 4)
    by_format = {fmt: weight_on_parts(_FixedWeights(on_the_first), fmt) for fmt in DATE_FORMATS}
    rows = part_rows(by_format)
    assert set(rows) == {"year", "month_digits", "month_letters", "day", "weekday"}
    assert isinstance(rows["year"], PartWeight) and 0 < rows["year"].on < 1  # first in some formats only


def test_diagonal_weight_of_a_perfect_reverser_is_all_on_the_letter():
    from attnbook.experiments.reversal import diagonal_weight

    examples = tasks.reversal_task(30, seed=0, min_length=4, max_length=5)
    vocabs = data.build_vocabs(examples)

    def on_the_copied(src):  # output i (of n) puts all its weight on source n - 1 - i
        n = src.size(1)
        return torch.eye(n).flip(1).expand(src.size(0), n, n)

    class Perfect(torch.nn.Module):
        def forward(self, src, tgt_in):
            from attnbook.protocol import Output

            weights = torch.cat([on_the_copied(src), torch.zeros(src.size(0), 1, src.size(1))], 1)
            return Output(torch.zeros(*tgt_in.shape, 3), weights)  # (B, n + 1, n)

    found = diagonal_weight(Perfect(), examples, vocabs, n=5)
    assert found.strings == sum(len(e.source) == 5 for e in examples) > 0
    assert (found.on, found.previous, found.other, found.band) == (1.0, 0.0, 0.0, 1.0)
    assert found.even == pytest.approx(13 / 25)
    with pytest.raises(ValueError, match="no example has a source of n=9 letters"):
        diagonal_weight(Perfect(), examples, vocabs, n=9)


def test_on_epoch_needs_every_epoch():
    with pytest.raises(ValueError, match="pass every_epoch=True"):
        length_experiment(tiny_model, on_epoch=lambda model, test, vocabs: {})


def test_symbol_accuracy_by_position_counts_each_output_position_over_the_long_examples():
    examples = tasks.reversal_task(60, min_length=3, max_length=8, seed=4, alphabet="abc")
    src_vocab, tgt_vocab = data.build_vocabs(examples)

    right_for_three = _ReadsItsInput(len(tgt_vocab), right_for=3)
    assert tgt_vocab.pad_id == right_for_three.pad_id
    found = experiments.symbol_accuracy_by_position(
        right_for_three, examples, src_vocab, tgt_vocab, positions=5, min_length=5
    )
    assert found == [1.0, 1.0, 1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="positions=6 must be at most min_length=5"):
        experiments.symbol_accuracy_by_position(right_for_three, examples, src_vocab, tgt_vocab, 6, 5)
    with pytest.raises(ValueError, match="no example has a source of at least 9 symbols"):
        experiments.symbol_accuracy_by_position(right_for_three, examples, src_vocab, tgt_vocab, 5, 9)


def test_control_arms_start_from_their_arms_weights():
    from attnbook.experiments import translation_model

    torch.manual_seed(3)
    general = translation_model("general").state_dict()
    for control in ("identity", "frozen"):
        torch.manual_seed(3)
        model = translation_model(control)
        W_a = model.decoder.attention.scorer.W_a.weight
        assert torch.equal(W_a, torch.eye(64))
        assert W_a.requires_grad == (control == "identity")
        for name, value in model.state_dict().items():
            if not name.endswith("scorer.W_a.weight"):
                assert torch.equal(value, general[name]), (control, name)
    torch.manual_seed(3)
    concat = translation_model("concat").state_dict()
    torch.manual_seed(3)
    previous = translation_model("previous").state_dict()
    assert previous.keys() == concat.keys()
    assert all(torch.equal(previous[name], concat[name]) for name in concat)


def test_previous_query_decoder_scores_from_the_state_before_the_step():
    from attnbook import data as attnbook_data
    from attnbook.experiments import translation_data, translation_model
    from attnbook.experiments.translation import PreviousQueryDecoder

    data = translation_data()
    batch = attnbook_data.make_batch(data.splits.valid[:3], data.src_vocab, data.tgt_vocab)
    torch.manual_seed(0)
    model = translation_model("previous").eval()
    decoder = model.decoder
    assert isinstance(decoder, PreviousQueryDecoder)
    with torch.no_grad():
        state = model.start(batch.src)
        out = decoder(batch.tgt_in, state)  # every step at once
        # step by step: the query at step t is the state before it, h_{t-1}
        stepped, weights = [], []
        for t in range(batch.tgt_in.size(1)):
            query = state.hidden  # h_{t-1}
            _, expected = decoder.attention(
                query,
                state.annotations,
                mask=state.src_mask,
                projected_keys=state.projected_keys,
            )
            step = decoder.step(state, batch.tgt_in[:, t])
            assert torch.allclose(step.weights, expected, atol=1e-6)
            stepped.append(step.logits)
            weights.append(step.weights)
            state = step.state
    assert torch.allclose(out.logits, torch.stack(stepped, dim=1), atol=1e-5)
    assert torch.allclose(out.weights, torch.stack(weights, dim=1), atol=1e-6)
    # and it is not concat's decoder: from h_t the weights differ
    with torch.no_grad():
        state = model.start(batch.src)
        _, from_current = decoder.attention(
            out.states,
            state.annotations,
            mask=state.src_mask,
            projected_keys=state.projected_keys,
        )
    assert (from_current - out.weights).abs().max() > 1e-5  # the step-by-step check holds to 1e-6


def test_uniform_arm_starts_as_dot_and_spreads_its_weights_over_the_sentence():
    from attnbook import data as attnbook_data
    from attnbook.experiments import translation_data, translation_model
    from attnbook.experiments.translation import UniformWeightsDecoder

    torch.manual_seed(5)
    dot = translation_model("dot").state_dict()
    torch.manual_seed(5)
    model = translation_model("uniform").eval()
    assert isinstance(model.decoder, UniformWeightsDecoder)
    assert model.state_dict().keys() == dot.keys()
    assert all(torch.equal(model.state_dict()[name], dot[name]) for name in dot)

    data = translation_data()
    examples = sorted(data.splits.valid[:8], key=lambda e: len(e.source))  # lengths differ
    batch = attnbook_data.make_batch(examples, data.src_vocab, data.tgt_vocab)
    lengths = batch.src_mask.sum(dim=1)  # (B,)
    assert lengths.min() < lengths.max()  # some rows are padded
    with torch.no_grad():
        state = model.start(batch.src)
        out = model.decoder(batch.tgt_in, state)  # (B, T, S)
        expected = batch.src_mask / lengths.unsqueeze(1)  # 1/S on the sentence, 0 on padding
        assert torch.allclose(out.weights, expected.unsqueeze(1).expand_as(out.weights))
        context = (expected.unsqueeze(-1) * state.annotations).sum(dim=1)  # the mean annotation
        hidden = out.states[:, 0]
        by_hand = torch.tanh(model.decoder.W_c(torch.cat([context, hidden], dim=-1)))
        assert torch.allclose(model.decoder.out(by_hand), out.logits[:, 0], atol=1e-6)
        step = model.decoder.step(state, batch.tgt_in[:, 0])  # one step agrees with all at once
        assert torch.allclose(step.logits, out.logits[:, 0], atol=1e-5)
        assert torch.allclose(step.weights, expected)


def test_wa_rate_arms_train_general_with_a_slower_W_a():
    from attnbook.experiments import translation

    for arm, factor in translation.WA_RATE_FACTORS.items():
        torch.manual_seed(0)
        model = translation.translation_model(arm)
        torch.manual_seed(0)
        general = translation.translation_model("general")
        assert all(torch.equal(a, b) for a, b in zip(model.parameters(), general.parameters()))
        groups = translation._parameter_groups(model, arm, lr=1e-2)
        W_a = model.decoder.attention.scorer.W_a.weight
        assert sum(len(group["params"]) for group in groups) == len(list(model.parameters()))
        if factor == 1.0:
            assert len(groups) == 1
        else:
            assert groups[1]["params"] == [W_a] and groups[1]["lr"] == pytest.approx(factor * 1e-2)
            assert all(p is not W_a for p in groups[0]["params"])


def test_first_steps_measures_adams_first_step_and_every_residual_sum():
    from attnbook.experiments import transformer_training

    found = transformer_training.first_steps(norm_first=False, schedule="constant", steps=5, layers=2)
    assert len(found.grad_norms) == len(found.logit_grads) == len(found.h1_grads) == 5
    assert sorted(found.adam) == [1, 2, 5] and sorted(found.travel) == [1, 5]
    assert len(found.spreads) == len(found.varying) == len(found.sums) == 3  # before step 1, after 1 and 5
    assert len(found.varying[0]) == 1 + 2 and len(found.sums[0]) == 2 * 2 + 3 * 2  # 2 per encoder layer, 3 per decoder
    one = found.adam[1]
    assert one.move == pytest.approx(1e-2, rel=1e-2)  # Adam's first step: the rate, whatever the gradient
    assert found.travel[1] == pytest.approx(one.move, rel=1e-2)
    assert one.grads.shape == one.moves.shape == found.key_biases.shape and found.key_biases.any()
    assert (one.grads[found.key_biases].abs() < 1e-9).all()  # a shift of every key's score: no gradient
    warm = transformer_training.first_steps(norm_first=True, schedule="paper", steps=5, layers=2)
    assert warm.adam[1].move == pytest.approx(1e-2 / 50, rel=1e-2)  # the warm-up's first rate
    with pytest.raises(ValueError, match="at least 5"):
        transformer_training.first_steps(norm_first=False, schedule="constant", steps=4)


def test_untrained_spread_is_first_steps_spread_before_step_1():
    from attnbook.experiments import transformer_training

    for norm_first in (False, True):
        found = transformer_training.first_steps(norm_first, "constant", steps=5, layers=2, seed=1)
        spread = transformer_training.untrained_spread(norm_first, seed=1, layers=2)
        assert spread == found.spreads[0] and spread > 0
    other = transformer_training.untrained_spread(False, seed=2, layers=2)
    assert other != transformer_training.untrained_spread(False, seed=1, layers=2)  # the seed acts


def test_values_at_rate_reads_dates_at_its_own_rate_and_dates_rates_at_the_others():
    from attnbook import records
    from attnbook.experiments.dates import DATE_RATE_ARMS, DATE_RATES, values_at_rate

    dates, rates = records.load("dates"), records.load("dates_rates")
    assert float("0.005") == dates.settings["lr"] and rates.seeds == dates.seeds
    assert values_at_rate("cho", "0.005", at=2) == dates.values("cho", "exact_match", 2)
    assert values_at_rate("attention", "0.02", "valid_loss", 1) == rates.values("attention, lr 0.02", "valid_loss", 1)
    assert {arm.split(", lr ")[1] for arm in DATE_RATE_ARMS} | {"0.005"} == set(DATE_RATES)
    with pytest.raises(ValueError, match=r"rate must be one of 0\.0025, .*got 0\.005"):
        values_at_rate("cho", 0.005)  # a float, not the string the arm names use


def test_a_partly_cho_decoder_names_where_it_reads_c():
    from attnbook.experiments.dates import PartlyChoDecoder

    with pytest.raises(ValueError, match="where must be 'steps' or 'output', got 'start'"):
        PartlyChoDecoder(10, 4, 6, 12, "start")
