"""Chapters 1 and 2's recorded experiment on the reversal benchmark, recorded as ``reversal``.

The setting is :data:`~attnbook.experiments.REVERSAL_BENCHMARK` (5 000 strings of 3 to 30
letters, 1 400 test strings, learning rate 7e-3) with a seed for the strings, the initial
weights and the batch order. Four models, each trained eight epochs and measured after every
one (the value after epoch 4 is the benchmark's four-epoch run): Chapter 1's one-directional
plain model, the same with twice the state, and Chapter 2's plain model and attention model,
which share one bidirectional encoder. Measures per epoch: exact match overall, and exact
match and per-symbol accuracy at every source length.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from attnbook.bahdanau import BahdanauSeq2Seq
from attnbook.data import Example, Vocab, make_batch
from attnbook.decoding import greedy_decode
from attnbook.experiments.bottleneck import one_way_model, room_model
from attnbook.experiments.lengths import (
    REVERSAL_BENCHMARK,
    length_experiment,
    length_splits,
    symbol_accuracy_by_position,
)
from attnbook.protocol import teacher_forced_weights
from attnbook.records import Experiment, check_arm, register, split_rate_arm
from attnbook.rnn import Seq2Seq

__all__ = [
    "REVERSAL_ARMS",
    "REVERSAL_RATE_ARMS",
    "reversal_rate_run",
    "bidirectional_plain_model",
    "attention_model",
    "wide_plain_model",
    "Diagonal",
    "diagonal_weight",
    "reversal_run",
    "test_examples",
    "WithoutTheMask",
    "mask_demonstration",
    "reversal_mask_run",
]

#: The arms: a short name and what it is (embeddings of 32 in all).
REVERSAL_ARMS = {
    "one_way": "plain, one direction of 128 (Chapter 1)",
    "one_way_room": "plain, one direction of 256 (twice Chapter 1's state)",
    "plain": "plain, bidirectional 2 x 64 (Chapter 2)",
    "attention": "Bahdanau attention, the same encoder",
}


def bidirectional_plain_model(src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
    """Chapter 2's plain model: the attention model's encoder (2 x 64), Chapter 1's decoder."""
    return Seq2Seq.build(src_vocab_size, tgt_vocab_size, embed_dim=32, hidden_size=64, bidirectional=True)


def attention_model(src_vocab_size: int, tgt_vocab_size: int) -> BahdanauSeq2Seq:
    """Chapter 2's attention model: the same encoder, a Bahdanau decoder with a state of 64."""
    return BahdanauSeq2Seq.build(src_vocab_size, tgt_vocab_size, embed_dim=32, hidden_size=64, attention_dim=64)


def test_examples(seed: int) -> list[Example]:
    """The 1 400 test strings of the record's runs with ``seed`` (every arm's)."""
    settings = {key: value for key, value in REVERSAL_BENCHMARK.items() if key not in ("epochs", "lr")}
    return length_splits(**{**settings, "seed": seed})[1]


class Diagonal(NamedTuple):
    """Where the output letters of the test strings of one length put their weight (means)."""

    on: float  # on the source letter that the output letter copies, at j
    previous: float  # on j + 1, the letter copied at the previous output step
    other: float  # on j - 1, the other neighbour
    band: float  # on j - 1, j and j + 1 together
    even: float  # what an even spread would put on the three
    strings: int  # how many test strings


def diagonal_weight(model: nn.Module, examples: list[Example], vocabs: tuple[Vocab, Vocab], n: int = 20) -> Diagonal:
    """Over the strings of ``n`` letters in ``examples``, teacher-forced (the model is fed the
    correct previous letters): the mean weight each output letter puts on the source letter it
    copies and on each of its neighbours. A neighbour's mean is over the output letters that have
    it: the first output letter copies the last source letter, which has no ``j + 1``.

    Shapes: the weights ``(B, n + 1, n)``; the ``n`` letters' rows are used, not ``<eos>``'s.
    """
    examples = [example for example in examples if len(example.source) == n]
    if not examples:
        raise ValueError(f"diagonal_weight: no example has a source of n={n} letters")
    weights = teacher_forced_weights(model, examples, *vocabs)[:, :n]  # (B, n, n): not <eos>'s row
    out, src = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    # (n, n): 0 where output i copies source j = n - 1 - i; +1 on j + 1, which output i - 1
    # copied; -1 on j - 1
    offset = out + src - (n - 1)

    def mean_on(cells: torch.Tensor) -> float:
        rows = cells.any(dim=-1)  # (n,): the output letters that have such a cell
        return float((weights * cells).sum(dim=-1)[:, rows].mean())

    band = offset.abs() <= 1
    on = [mean_on(offset == k) for k in (0, 1, -1)]
    return Diagonal(*on, mean_on(band), float(band.float().mean()), len(examples))


#: Output positions measured by :func:`_position_measures`, on the test strings of at least so many letters.
POSITIONS = 20


def _position_measures(model: nn.Module, test: list[Example], vocabs: tuple[Vocab, Vocab]) -> dict:
    """``position_<i>`` on the strings of 20 letters or more; ``first_<n>``: the first output letter
    (the last letter read) on the strings of ``n`` letters."""
    found = symbol_accuracy_by_position(model, test, *vocabs, positions=POSITIONS, min_length=POSITIONS)
    first = {
        f"first_{n}": symbol_accuracy_by_position(model, test, *vocabs, positions=1, min_length=n, max_length=n)[0]
        for n in sorted({len(example.source) for example in test})
    }
    return {**{f"position_{i}": value for i, value in enumerate(found, start=1)}, **first}


def _diagonal_measures(model: nn.Module, test: list[Example], vocabs: tuple[Vocab, Vocab]) -> dict:
    found = diagonal_weight(model, test, vocabs)
    diagonal = {f"diagonal_{name}": getattr(found, name) for name in ("on", "previous", "other", "band")}
    return {**_position_measures(model, test, vocabs), **diagonal}


def wide_plain_model(src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
    """Chapter 2's plain model widened to 2 x 70 (its decoder state to 70): at least as many
    parameters as the attention model."""
    return Seq2Seq.build(src_vocab_size, tgt_vocab_size, embed_dim=32, hidden_size=70, bidirectional=True)


FACTORIES = {
    "one_way": one_way_model,
    "one_way_room": room_model,
    "plain": bidirectional_plain_model,
    "attention": attention_model,
    "plain_wide": wide_plain_model,
}


def reversal_run(arm: str, seed: int, epochs: int = 8, lr: float | None = None) -> dict:
    """Train ``arm`` on the benchmark's strings for ``seed``; curves with one value per epoch:
    ``exact_match``, ``length_<n>`` (exact match), ``symbols_<n>`` (per-symbol accuracy) and
    ``position_<i>`` (per-symbol accuracy at output position ``i`` from 1 to 20, teacher-forced, on
    the test strings of 20 letters or more: :func:`symbol_accuracy_by_position`), ``first_<n>`` (the
    same for the first output letter, on the strings of ``n`` letters); for the attention
    model also ``diagonal_on``, ``diagonal_previous``, ``diagonal_other`` and
    ``diagonal_band`` (:func:`diagonal_weight` on the test strings of 20 letters). ``lr``: instead of
    the benchmark's learning rate."""
    check_arm(arm, FACTORIES)
    factory = FACTORIES[arm]
    settings = {**REVERSAL_BENCHMARK, "seed": seed, "epochs": epochs, **({} if lr is None else {"lr": lr})}
    on_epoch = _diagonal_measures if arm == "attention" else _position_measures
    result = length_experiment(factory, every_epoch=True, on_epoch=on_epoch, **settings)
    measures = dict(exact_match=[point["exact_match"] for point in result.curve])
    extra = [name for name in result.curve[0] if name.startswith(("position_", "first_", "diagonal_"))]
    for name in extra:
        measures[name] = [point[name] for point in result.curve]
    for n in result.by_length:
        measures[f"length_{n}"] = [point["by_length"][n] for point in result.curve]
        measures[f"symbols_{n}"] = [point["symbols_by_length"][n] for point in result.curve]
    return measures


register(
    Experiment(
        name="reversal",
        run=reversal_run,
        arms=tuple(REVERSAL_ARMS),
        seeds=tuple(range(8)),
        settings=dict(epochs=8),
        replay=dict(arm="plain", seed=0, epochs=1),
        chapter="chapters/02_bahdanau.ipynb",
        description="Reversing 3 to 30 letters (REVERSAL_BENCHMARK's strings, one draw per seed): Chapter 1's "
        "one-directional plain model and the same with twice the state, Chapter 2's plain and attention models "
        "with one bidirectional encoder; "
        "exact match overall and by length, per-symbol accuracy by length and by output position (strings of 20 "
        "letters or more), after every one of eight epochs; for "
        "the attention model, its weight on and beside the letter each output letter copies (20-letter strings).",
    )
)


register(
    Experiment(
        name="reversal_half_rate",
        run=reversal_run,
        arms=("one_way", "one_way_room"),
        seeds=tuple(range(8)),
        settings=dict(epochs=8, lr=3.5e-3),
        replay=dict(arm="one_way", seed=0, epochs=1, lr=3.5e-3),
        chapter="chapters/01_seq2seq.ipynb",
        description="The reversal record's two one-directional plain models (a state of 128 and of 256) at half "
        "the benchmark's learning rate (3.5e-3), where Chapter 1's short setting found twice the state ahead: "
        "the same strings, seeds and measures, 8 epochs.",
    )
)


register(
    Experiment(
        name="reversal_longer",
        run=reversal_run,
        arms=("plain", "plain_wide"),
        seeds=tuple(range(8)),
        settings=dict(epochs=24),
        replay=dict(arm="plain_wide", seed=0, epochs=1),
        chapter="chapters/02_bahdanau.ipynb",
        description="Chapter 2's plain model trained three times as long as in the reversal record (24 epochs; "
        "its first 8 are the record's), and the same model widened to 2 x 70 so that it has at least the "
        "attention model's parameters: the reversal record's strings, seeds and measures after every epoch.",
    )
)


#: ``reversal_rates``' arms: Chapter 2's pair at half and twice the benchmark's learning rate (0.007).
REVERSAL_RATE_ARMS = tuple(f"{arm}, lr {rate}" for rate in ("0.0035", "0.014") for arm in ("plain", "attention"))


def reversal_rate_run(arm: str, seed: int, epochs: int = 4) -> dict:
    """:func:`reversal_run` for the model and learning rate ``arm`` names (:data:`REVERSAL_RATE_ARMS`):
    its exact match overall and by length, after every epoch."""
    model, rate = split_rate_arm(arm, REVERSAL_RATE_ARMS)
    found = reversal_run(model, seed, epochs=epochs, lr=rate)
    return {name: value for name, value in found.items() if name == "exact_match" or name.startswith("length_")}


register(
    Experiment(
        name="reversal_rates",
        run=reversal_rate_run,
        arms=REVERSAL_RATE_ARMS,
        seeds=tuple(range(8)),
        settings=dict(epochs=4),
        replay=dict(arm="plain, lr 0.014", seed=0, epochs=1),
        chapter="chapters/02_bahdanau.ipynb",
        description="The reversal record's plain and attention models (Chapter 2's pair; the same strings, seeds "
        "and batches) at half and twice the benchmark's learning rate, 0.0035 and 0.014: exact match overall "
        "and by length after each of four epochs.",
    )
)


class WithoutTheMask(nn.Module):
    """A trained Bahdanau model with its source mask removed at decoding: every position may be
    attended to, the padding too (Chapter 2's demonstration, written out there)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model, self.pad_id = model, model.pad_id
        self.train(model.training)

    def start(self, src: torch.Tensor):
        return self.model.start(src)._replace(src_mask=None)

    def step(self, state, prev: torch.Tensor):
        return self.model.step(state, prev)


def mask_demonstration(model: nn.Module, test: list[Example], vocabs: tuple[Vocab, Vocab], strings: int = 200) -> dict:
    """Chapter 2's demonstration: the first ``strings`` test strings of at most 8 letters, decoded
    greedily with and without the source mask, once in a batch with the longest test string (padded
    to its columns) and once in a batch of their own. Returns exact match on those strings
    (``masked``, ``unmasked``, ``unmasked_own``), the mean weight a decoding step puts on padding
    without the mask (``pad_weight``, ``pad_weight_own``), and how many answers differ between the
    two batches (``changed``, ``changed_masked``)."""
    src_vocab, tgt_vocab = vocabs
    short = [example for example in test if len(example.source) <= 8][:strings]
    if not short:
        raise ValueError("mask_demonstration: test holds no string of at most 8 letters")
    longest = max(test, key=lambda example: len(example.source))
    batches = {  # the same short strings, padded to the longest test string or only to their own
        "wide": make_batch(short + [longest], src_vocab, tgt_vocab),
        "own": make_batch(short, src_vocab, tgt_vocab),
    }
    targets = [tgt_vocab.encode(example.target) for example in short]
    found = {}
    for name, decoder in (("masked", model), ("unmasked", WithoutTheMask(model))):
        for width, batch in batches.items():
            decoded = greedy_decode(decoder, batch.src, max_len=35, bos_id=tgt_vocab.bos_id, eos_id=tgt_vocab.eos_id)
            tokens = decoded.tokens[: len(short)]
            weights = decoded.weights[: len(short)]  # (n, T, S)
            pads = ~batch.src_mask[: len(short)].unsqueeze(1)  # (n, 1, S)
            on_pads = (weights * pads).sum(dim=-1)  # (n, T)
            taken = weights.sum(dim=-1) > 0  # (n, T): the steps each row took
            exact = sum(t == r for t, r in zip(tokens, targets)) / len(short)
            found[name, width] = (tokens, float(exact), float(on_pads[taken].mean()))

    def changed(name: str) -> float:
        return float(sum(a != b for a, b in zip(found[name, "wide"][0], found[name, "own"][0])))

    return {
        "masked": found["masked", "wide"][1],
        "unmasked": found["unmasked", "wide"][1],
        "unmasked_own": found["unmasked", "own"][1],
        "pad_weight": found["unmasked", "wide"][2],
        "pad_weight_own": found["unmasked", "own"][2],
        "changed": changed("unmasked"),
        "changed_masked": changed("masked"),
    }


def reversal_mask_run(arm: str, seed: int, epochs: int = 4) -> dict:
    """Train the attention model on the benchmark's strings for ``seed`` (the reversal record's
    attention arm, four epochs), then :func:`mask_demonstration` on its test strings."""
    check_arm(arm, ("attention",))
    result = length_experiment(attention_model, **{**REVERSAL_BENCHMARK, "seed": seed, "epochs": epochs})
    return mask_demonstration(result.model, result.test_examples, result.vocabs)


register(
    Experiment(
        name="reversal_mask",
        run=reversal_mask_run,
        arms=("attention",),
        seeds=tuple(range(8)),
        settings=dict(epochs=4),
        replay=dict(arm="attention", seed=0),  # the whole run: its measures are read after it
        chapter="chapters/02_bahdanau.ipynb",
        description="Chapter 2's mask demonstration over seeds: the attention model of the reversal benchmark "
        "(four epochs) decodes its first 200 test strings of at most 8 letters with and without the source mask, "
        "padded to the longest test string and in a batch of their own: exact match, weight on padding, "
        "and answers that change between the two batches.",
    )
)
