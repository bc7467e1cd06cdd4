"""Chapter 1's recorded experiment: what moves the fixed-size bottleneck on short reversal.

Chapter 1 trains its one-directional encoder-decoder on reversing random strings of 3 to 12
letters (:data:`SMALL_REVERSAL`) and asks, one arm each against the model as written: is the
vector too small (``room``: twice the state), is the model under-trained (``training``: four
times the training strings, so four times the updates; ``passes``: four times the passes over
the same strings, the same updates without new data), and does Sutskever et al.'s trick help
(``reversed``: every source fed right to left)? Does the answer on room depend on the learning
rate, the benchmark's (set for Chapter 1's first model, not chosen on held-out strings for
either size; ``written_slow``, ``room_slow``: both at half the rate)?
:func:`bottleneck_run` trains one arm from one seed with
:func:`~attnbook.experiments.length_experiment`; registered as the record ``bottleneck``
(``./course experiments bottleneck``), which Chapter 1 reads, beside two more: room and
updates together (``bottleneck_room_passes``) and both sizes at two more rates
(``bottleneck_rates``). The chapter runs seed 0 of
``written`` live and shows it equals the record's.

A seed draws the strings and the initial weights. Every arm of one seed is tested on the same
1 000 strings and trains on the same 3 000, ``training`` on 9 000 more besides (drawn from
their own stream, none of them a test string; ``length_experiment(extra_train=...)``).
"""

from __future__ import annotations

from attnbook.experiments.lengths import LengthResult, length_experiment, symbol_accuracy_by_position
from attnbook.records import Experiment, check_arm, register, split_rate_arm
from attnbook.rnn import Seq2Seq

__all__ = [
    "SMALL_REVERSAL",
    "BOTTLENECK_ARMS",
    "ROOM_PASSES_ARMS",
    "MORE_RATES",
    "RATE_ARMS",
    "one_way_model",
    "bottleneck_run",
    "bottleneck_measures",
    "longest_reliable_length",
]

#: Chapter 1's short reversal setting: strings of 3 to 12 letters, 3 000 training strings,
#: 1 000 test strings, four epochs at learning rate 7e-3 (batches of 64).
SMALL_REVERSAL = dict(task="reversal", min_length=3, max_length=12, n_train=3000, n_test=1000, epochs=4, lr=7e-3)

#: The arms: a short name and what it is (all one-directional GRUs, embeddings of 32).
BOTTLENECK_ARMS = {
    "written": "128 numbers, source as written",
    "reversed": "128 numbers, source reversed",
    "room": "256 numbers (twice the state)",
    "training": "128 numbers, 4 x the training strings",
    "passes": "128 numbers, 4 x the passes (same strings)",
    "written_slow": "128 numbers, source as written, half the learning rate (3.5e-3)",
    "room_slow": "256 numbers, half the learning rate (3.5e-3)",
}

#: Room and updates together (the record ``bottleneck_room_passes``): the larger state with
#: four times the passes, at both rates, and the model as written with them at half the rate
#: (``passes`` in :data:`BOTTLENECK_ARMS` is the model as written with them at the full rate).
ROOM_PASSES_ARMS = {
    "room_passes": "256 numbers, 4 x the passes (same strings)",
    "written_slow_passes": "128 numbers, 4 x the passes, half the learning rate (3.5e-3)",
    "room_slow_passes": "256 numbers, 4 x the passes, half the learning rate (3.5e-3)",
}

#: The learning rate of the two ``_slow`` arms: half of :data:`SMALL_REVERSAL`'s.
SLOW_LR = 3.5e-3

#: Two more learning rates for both sizes (the record ``bottleneck_rates``): a quarter of and
#: twice :data:`SMALL_REVERSAL`'s, so that each size can be read at the best of four rates.
MORE_RATES = (1.75e-3, 1.4e-2)
RATE_ARMS = tuple(f"{model}, lr {rate}" for model in ("written", "room") for rate in MORE_RATES)

#: Output positions measured (teacher-forced, on the test strings of at least so many letters).
POSITIONS = 10


def one_way_model(src_vocab_size: int, tgt_vocab_size: int, hidden_size: int = 128) -> Seq2Seq:
    """Chapter 1's reversal model: a one-directional GRU encoder-decoder (embeddings of 32)."""
    return Seq2Seq.build(src_vocab_size, tgt_vocab_size, embed_dim=32, hidden_size=hidden_size, bidirectional=False)


def room_model(src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
    """Twice the room: :func:`one_way_model` with a state of 256."""
    return one_way_model(src_vocab_size, tgt_vocab_size, hidden_size=256)


def bottleneck_run(arm: str, seed: int, **settings) -> LengthResult:
    """Train one arm of :data:`BOTTLENECK_ARMS`, :data:`ROOM_PASSES_ARMS` or :data:`RATE_ARMS`
    from ``seed``; ``settings`` override :data:`SMALL_REVERSAL`.

    ``bottleneck_run("written", 0)`` is ``length_experiment(one_way_model, **SMALL_REVERSAL, seed=0)``.
    """
    check_arm(arm, (*BOTTLENECK_ARMS, *ROOM_PASSES_ARMS, *RATE_ARMS))
    settings = {**SMALL_REVERSAL, **settings}
    if arm in RATE_ARMS:  # "<model>, lr <rate>"
        arm, settings["lr"] = split_rate_arm(arm, RATE_ARMS)
    if arm.endswith("_passes"):  # four times the passes over the same strings
        settings["epochs"] *= 4
        arm = arm.removesuffix("_passes")
    if arm == "written":
        return length_experiment(one_way_model, **settings, seed=seed)
    if arm == "reversed":
        return length_experiment(one_way_model, **settings, reverse_source=True, seed=seed)
    if arm == "room":
        return length_experiment(room_model, **settings, seed=seed)
    if arm == "training":
        return length_experiment(one_way_model, **settings, extra_train=3 * settings["n_train"], seed=seed)
    if arm == "passes":
        return length_experiment(one_way_model, **{**settings, "epochs": 4 * settings["epochs"]}, seed=seed)
    if arm == "written_slow":
        return length_experiment(one_way_model, **{**settings, "lr": SLOW_LR}, seed=seed)
    if arm == "room_slow":
        return length_experiment(room_model, **{**settings, "lr": SLOW_LR}, seed=seed)
    raise AssertionError(arm)  # every arm is handled above


def longest_reliable_length(by_length: dict[int, float], threshold: float = 0.5) -> int:
    """The longest length up to which exact match stays at or above ``threshold`` (0 if the shortest fails)."""
    longest = 0
    for length, accuracy in sorted(by_length.items()):
        if accuracy < threshold:
            break
        longest = length
    return longest


def bottleneck_measures(result: LengthResult) -> dict:
    """A run's numbers: ``exact_match`` (all test strings), ``reliable_length``
    (:func:`longest_reliable_length`), ``train_loss`` (the last epoch's), ``length_<n>``,
    the exact match at every source length ``n``, ``symbols_<n>``, the per-symbol
    accuracy there (:func:`~attnbook.experiments.symbol_accuracy_by_length`), and
    ``position_<i>``, the teacher-forced per-symbol accuracy at output position ``i`` (1 to
    :data:`POSITIONS`) on the test strings of at least :data:`POSITIONS` letters
    (:func:`~attnbook.experiments.symbol_accuracy_by_position`)."""
    by_position = symbol_accuracy_by_position(
        result.model, result.test_examples, *result.vocabs, positions=POSITIONS, min_length=POSITIONS
    )
    return dict(
        exact_match=result.exact_match,
        reliable_length=longest_reliable_length(result.by_length),
        train_loss=result.history["train_loss"][-1],
        **{f"length_{n}": accuracy for n, accuracy in sorted(result.by_length.items())},
        **{f"symbols_{n}": accuracy for n, accuracy in sorted(result.symbols_by_length.items())},
        **{f"position_{i}": accuracy for i, accuracy in enumerate(by_position, start=1)},
    )


register(
    Experiment(
        name="bottleneck",
        run=lambda arm, seed, **settings: bottleneck_measures(bottleneck_run(arm, seed, **settings)),
        arms=tuple(BOTTLENECK_ARMS),
        seeds=tuple(range(8)),
        settings=dict(SMALL_REVERSAL),
        replay=dict(arm="written", seed=0),
        chapter="chapters/01_seq2seq.ipynb",
        description="Chapter 1's one-directional GRU encoder-decoder on reversing 3 to 12 letters: as written, "
        "with the source reversed, with twice the state, with four times the training strings, and with four "
        "times the passes over the same strings, and the first and third at half the learning rate; exact match "
        "overall and by length, per-symbol accuracy by length and (teacher-forced) by output position on strings of "
        "10 letters or more, after four epochs (sixteen for the passes arm).",
    )
)


register(
    Experiment(
        name="bottleneck_room_passes",
        run=lambda arm, seed, **settings: bottleneck_measures(bottleneck_run(arm, seed, **settings)),
        arms=tuple(ROOM_PASSES_ARMS),
        seeds=tuple(range(8)),
        settings=dict(SMALL_REVERSAL),
        replay=dict(arm="written_slow_passes", seed=0),
        chapter="chapters/01_seq2seq.ipynb",
        description="Room and updates together, beside the bottleneck record (the same seeds, strings and "
        "batches): twice the state with four times the passes over the same strings at the benchmark's rate, "
        "and both sizes with four times the passes at half the rate; the bottleneck record's measures after "
        "sixteen epochs.",
    )
)


register(
    Experiment(
        name="bottleneck_rates",
        run=lambda arm, seed, **settings: bottleneck_measures(bottleneck_run(arm, seed, **settings)),
        arms=RATE_ARMS,
        seeds=tuple(range(8)),
        settings=dict(SMALL_REVERSAL),
        replay=dict(arm=RATE_ARMS[0], seed=0),
        chapter="chapters/01_seq2seq.ipynb",
        description="The bottleneck record's model as written and with twice the state at a quarter of and "
        "twice its learning rate (1.75e-3, 1.4e-2), beside the bottleneck record's 7e-3 and 3.5e-3 (the same "
        "seeds, strings and batches): each size at the best of four rates; the bottleneck record's measures "
        "after four epochs.",
    )
)


register(
    Experiment(
        name="copy_order",
        run=lambda arm, seed, **settings: bottleneck_measures(bottleneck_run(arm, seed, **settings)),
        arms=("written", "reversed"),
        seeds=tuple(range(8)),
        settings={**SMALL_REVERSAL, "task": "copy"},
        replay=dict(arm="reversed", seed=0),
        chapter="chapters/01_seq2seq.ipynb",
        description="Chapter 1's exercise on the copy task: the bottleneck record's model on copying 3 to 12 "
        "letters (target = source), with the source as written and reversed, the same setting and measures; "
        "the runs the exercise's cell makes with seeds 0 to 7.",
    )
)
