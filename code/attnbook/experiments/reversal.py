"""Chapters 1 and 2's recorded experiment on the reversal benchmark, recorded as ``reversal``.

The setting is :data:`~attnbook.experiments.REVERSAL_BENCHMARK` (5 000 strings of 3 to 30
letters, 1 400 test strings, learning rate 7e-3) with a seed for the strings, the initial
weights and the batch order. Three models, each trained eight epochs and measured after every
one (the value after epoch 4 is the benchmark's four-epoch run): Chapter 1's one-directional
plain model, and Chapter 2's plain model and attention model, which share one bidirectional
encoder. Measures per epoch: exact match overall, and exact match and per-symbol accuracy at
every source length.
"""

from __future__ import annotations

from attnbook.bahdanau import BahdanauSeq2Seq
from attnbook.data import Example
from attnbook.experiments.bottleneck import plain_model
from attnbook.experiments.lengths import REVERSAL_BENCHMARK, length_experiment, length_splits
from attnbook.records import Experiment, register
from attnbook.rnn import Seq2Seq

__all__ = ["REVERSAL_ARMS", "bidirectional_plain_model", "attention_model", "reversal_run", "test_examples"]

#: The arms: a short name and what it is (embeddings of 32 in all).
REVERSAL_ARMS = {
    "one_way": "plain, one direction of 128 (Chapter 1)",
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


FACTORIES = {"one_way": plain_model, "plain": bidirectional_plain_model, "attention": attention_model}


def reversal_run(arm: str, seed: int, epochs: int = 8) -> dict:
    """Train ``arm`` on the benchmark's strings for ``seed``; curves with one value per epoch:
    ``exact_match``, ``length_<n>`` (exact match) and ``symbols_<n>`` (per-symbol accuracy)."""
    if arm not in FACTORIES:
        raise ValueError(f"unknown arm {arm!r}; the arms are {', '.join(REVERSAL_ARMS)}")
    factory = FACTORIES[arm]
    settings = {**REVERSAL_BENCHMARK, "seed": seed, "epochs": epochs}
    result = length_experiment(factory, every_epoch=True, **settings)
    measures = dict(exact_match=[point["exact_match"] for point in result.curve])
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
        "one-directional plain model, Chapter 2's plain and attention models with one bidirectional encoder; "
        "exact match overall and by length, per-symbol accuracy by length, after every one of eight epochs.",
    )
)
