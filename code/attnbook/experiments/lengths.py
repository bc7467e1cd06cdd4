"""Accuracy against input length, which Chapters 1, 2 and 6 measure on the same data.

- :func:`length_experiment`: train a model on the reversal (or copy) task and measure exact
  match against source length — the bottleneck curve of Chapter 1, which Chapter 2 repeats
  with attention (the analogue of Bahdanau et al. 2015, Figure 2).
- :func:`context_vectors`: the encoder's fixed-size summaries of a list of sources, for a
  look inside the model (Chapter 1's PCA picture).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence

from attnbook import _checks as checks
from attnbook.data import Batches, Example, Vocab, build_vocabs
from attnbook.decoding import greedy_decode
from attnbook.metrics import accuracy_by_length, exact_match
from attnbook.protocol import device_of, evaluating
from attnbook.rnn import Encoded
from attnbook.tasks import DEFAULT_ALPHABET, copy_task, reversal_task, reverse_sources, sequence_splits
from attnbook.training import History, fit

__all__ = [
    "REVERSAL_BENCHMARK",
    "LengthResult",
    "length_experiment",
    "length_splits",
    "evaluate_by_length",
    "symbol_accuracy_by_length",
    "symbol_accuracy_by_position",
    "context_vectors",
]

#: The settings of the reversal benchmark that Chapters 1 and 2 both run, so that the models
#: with and without attention see the same strings for the same number of epochs:
#: ``length_experiment(model_factory, **REVERSAL_BENCHMARK)``.
REVERSAL_BENCHMARK = dict(
    task="reversal", min_length=3, max_length=30, n_train=5000, n_test=1400, epochs=4, lr=7e-3, seed=0
)

#: ``model_factory(src_vocab_size, tgt_vocab_size) -> model`` (a model of the course).
ModelFactory = Callable[[int, int], nn.Module]

TASKS = {"reversal": reversal_task, "copy": copy_task}

#: Added to the seed for the stream of ``extra_train`` strings (any number far from the seeds used).
EXTRA_STREAM = 1_000_003


class LengthResult(NamedTuple):
    """What :func:`length_experiment` measured.

    Attributes:
        by_length: exact match on the test split for each source length, ``{length: accuracy}``.
        exact_match: exact match over the whole test split.
        symbols_by_length: per-symbol accuracy for each source length
            (:func:`symbol_accuracy_by_length`), ``{length: accuracy}``.
        history: the training :class:`~attnbook.training.History`.
        model: the trained model.
        seconds: wall time of training (all epochs).
        vocabs: ``(src_vocab, tgt_vocab)`` the model was trained with.
        test_examples: the held-out examples the accuracies were measured on (with reversed
            sources when ``reverse_source=True``: exactly what the model read).
        curve: with ``every_epoch=True``, one dict per epoch with that epoch's ``exact_match``,
            ``by_length`` and ``symbols_by_length``; otherwise None.
    """

    by_length: dict[int, float]
    exact_match: float
    symbols_by_length: dict[int, float]
    history: History
    model: nn.Module
    seconds: float
    vocabs: tuple[Vocab, Vocab]
    test_examples: list[Example]
    curve: list[dict] | None = None


def length_experiment(
    model_factory: ModelFactory,
    *,
    task: str = "reversal",
    min_length: int = 3,
    max_length: int = 30,
    n_train: int = 8000,
    n_test: int = 1400,
    epochs: int = 3,
    batch_size: int = 64,
    lr: float = 3e-3,
    reverse_source: bool = False,
    alphabet: str = DEFAULT_ALPHABET,
    seed: int = 0,
    extra_train: int = 0,
    every_epoch: bool = False,
    on_epoch: Callable[[nn.Module, list[Example], tuple[Vocab, Vocab]], dict] | None = None,
) -> LengthResult:
    """Train a model on a sequence task, then measure exact match for every source length.

    The data come from :func:`attnbook.tasks.sequence_splits` with ``seed``, so two calls with
    the same arguments (say, with and without attention) train and test on the same strings.
    With ``reverse_source=True`` every source is fed right to left (Sutskever et al.'s trick),
    in training and in testing; lengths and targets are unchanged.

    Args:
        model_factory: builds a fresh model from the two vocabulary sizes.
        task: ``"reversal"`` or ``"copy"``.
        min_length, max_length: the range of source lengths (inclusive).
        n_train, n_test: number of training and test examples (test strings never occur in
            training).
        epochs, batch_size, lr: training settings for :func:`attnbook.training.fit`.
        reverse_source: feed every source reversed.
        alphabet: the symbols the strings are made of.
        seed: seed of the data and of the model's initial weights.
        extra_train: more training strings, drawn after the others from their own stream
            (``seed + EXTRA_STREAM``) and never equal to a test string: more data with the
            same test set and the same first ``n_train`` strings.
        every_epoch: measure the test split after every epoch (``curve``); the training is
            the same, so the last entry equals the final result.
        on_epoch: with ``every_epoch``, ``on_epoch(model, test, (src_vocab, tgt_vocab))`` after
            every epoch; its dict joins that epoch's entry of ``curve``.

    Shapes:
        the model maps src ``(B, S)`` and tgt_in ``(B, T)`` to logits ``(B, T, V)``.
    """
    if on_epoch is not None and not every_epoch:
        raise ValueError("on_epoch is called after every epoch; pass every_epoch=True with it")
    train, test = length_splits(task, min_length, max_length, n_train, n_test, alphabet, seed, extra_train)
    if reverse_source:
        train, test = reverse_sources(train), reverse_sources(test)
    src_vocab, tgt_vocab = build_vocabs(train + test)
    torch.manual_seed(seed)
    model = model_factory(len(src_vocab), len(tgt_vocab))
    batches = Batches(train, src_vocab, tgt_vocab, batch_size, shuffle=True, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)  # what fit would make
    history, curve, seconds = History(), [] if every_epoch else None, 0.0
    for _ in range(epochs if every_epoch else 1):
        started = time.perf_counter()
        part = fit(model, batches, epochs=1 if every_epoch else epochs, optimizer=optimizer)
        seconds += time.perf_counter() - started
        for record in part:
            history.append({**record, "epoch": len(history) + 1})
        history.step_losses += part.step_losses
        if every_epoch:
            point = _measure(model, test, src_vocab, tgt_vocab)
            if on_epoch is not None:
                point.update(on_epoch(model, test, (src_vocab, tgt_vocab)))
            curve.append(point)
    found = curve[-1] if every_epoch else _measure(model, test, src_vocab, tgt_vocab)
    return LengthResult(
        found["by_length"],
        found["exact_match"],
        found["symbols_by_length"],
        history,
        model,
        seconds,
        (src_vocab, tgt_vocab),
        test,
        curve,
    )


def length_splits(
    task: str = "reversal",
    min_length: int = 3,
    max_length: int = 30,
    n_train: int = 8000,
    n_test: int = 1400,
    alphabet: str = DEFAULT_ALPHABET,
    seed: int = 0,
    extra_train: int = 0,
) -> tuple[list[Example], list[Example]]:
    """The training and test strings :func:`length_experiment` uses for these settings (sources as
    written): ``length_splits(**REVERSAL_BENCHMARK)`` are the benchmark's. Extra keys are not accepted."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {sorted(TASKS)}")
    checks.non_negative_int(extra_train=extra_train)
    strings = dict(min_length=min_length, max_length=max_length, alphabet=alphabet)
    splits = sequence_splits(TASKS[task], n_train, 0, n_test, seed=seed, **strings)
    train, test = splits.train, splits.test
    if extra_train:
        test_sources = [example.source for example in test]
        stream = seed + EXTRA_STREAM
        more = sequence_splits(TASKS[task], extra_train, 0, 0, seed=stream, exclude=test_sources, **strings)
        train = train + more.train
    return train, test


def _measure(model: nn.Module, test: list[Example], src_vocab: Vocab, tgt_vocab: Vocab) -> dict:
    by_length, overall = evaluate_by_length(model, test, src_vocab, tgt_vocab)
    symbols = symbol_accuracy_by_length(model, test, src_vocab, tgt_vocab)
    return dict(exact_match=overall, by_length=by_length, symbols_by_length=symbols)


def evaluate_by_length(
    model: nn.Module, examples, src_vocab: Vocab, tgt_vocab: Vocab, batch_size: int = 256
) -> tuple[dict[int, float], float]:
    """Greedy-decode ``examples``; return (exact match by source length, overall exact match).

    Shapes:
        ``N`` examples -> a dict over the distinct source lengths, and one float.
    """
    predictions, targets, lengths = [], [], []
    for batch in Batches(examples, src_vocab, tgt_vocab, batch_size):
        decoded = greedy_decode(
            model, batch.src, max_len=batch.tgt_out.size(1) + 5, bos_id=tgt_vocab.bos_id, eos_id=tgt_vocab.eos_id
        )
        predictions += decoded.tokens
        targets += [tgt_vocab.encode(example.target) for example in batch.examples]
        lengths += batch.src_lengths.tolist()
    return accuracy_by_length(predictions, targets, lengths), exact_match(predictions, targets)


def symbol_accuracy_by_length(
    model: nn.Module, examples, src_vocab: Vocab, tgt_vocab: Vocab, batch_size: int = 256
) -> dict[int, float]:
    """Per-symbol accuracy by source length: the share of target symbols (``<eos>`` included)
    that the model's most likely symbol gets right when it reads the correct previous ones
    (teacher forcing), pooled over the examples of each length.

    Exact match needs every symbol right, so it falls with length even when each symbol is
    as easy as the last; this measure shows whether the symbols themselves get harder.

    Shapes:
        ``N`` examples -> a dict over the distinct source lengths.
    """
    right: dict[int, int] = {}
    total: dict[int, int] = {}
    with evaluating(model), torch.no_grad():
        for batch in Batches(examples, src_vocab, tgt_vocab, batch_size):
            batch = batch.to(device_of(model))
            logits = model(batch.src, batch.tgt_in).logits  # (B, T, V)
            real = batch.tgt_out != tgt_vocab.pad_id  # (B, T)
            hits = ((logits.argmax(dim=-1) == batch.tgt_out) & real).sum(dim=1)  # (B,)
            for length, hit, count in zip(batch.src_lengths.tolist(), hits.tolist(), real.sum(dim=1).tolist()):
                right[length] = right.get(length, 0) + hit
                total[length] = total.get(length, 0) + count
    return {length: right[length] / total[length] for length in sorted(total)}


def symbol_accuracy_by_position(
    model: nn.Module,
    examples,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    positions: int = 20,
    min_length: int = 20,
    max_length: int | None = None,
    batch_size: int = 256,
) -> list[float]:
    """Per-symbol accuracy by output position, teacher-forced, over the examples whose source
    has ``min_length`` to ``max_length`` symbols (no upper limit if ``None``): entry ``i`` is the
    share of those examples whose ``i + 1``-th target symbol the model's most likely symbol gets
    right, for the first ``positions`` target symbols.

    On reversal the ``i``-th output copies the ``i``-th source symbol from the end, so the
    position says how long a symbol had to last: read ``i - 1`` encoder steps before the
    source ended, written at the decoder's ``i``-th step, whatever the source's length.

    Shapes:
        ``N`` examples -> ``positions`` floats.
    """
    checks.positive_int(positions=positions, min_length=min_length)
    if positions > min_length:
        raise ValueError(f"positions={positions} must be at most min_length={min_length}: every example needs them")
    top = float("inf") if max_length is None else max_length
    chosen = [example for example in examples if min_length <= len(example.source) <= top]
    if not chosen:
        wanted = f"at least {min_length}" if max_length is None else f"{min_length} to {max_length}"
        raise ValueError(f"symbol_accuracy_by_position: no example has a source of {wanted} symbols")
    right = torch.zeros(positions)
    with evaluating(model), torch.no_grad():
        for batch in Batches(chosen, src_vocab, tgt_vocab, batch_size):
            batch = batch.to(device_of(model))
            logits = model(batch.src, batch.tgt_in).logits  # (B, T, V)
            hits = logits[:, :positions].argmax(dim=-1) == batch.tgt_out[:, :positions]  # (B, positions)
            right += hits.sum(dim=0).float().cpu()
    return (right / len(chosen)).tolist()


def context_vectors(model: nn.Module, sources: list[str], src_vocab: Vocab, batch_size: int = 512) -> Tensor:
    """The fixed-size context vector the encoder makes for each source string.

    Needs a recurrent model whose ``encode(src)`` returns an :class:`~attnbook.rnn.Encoded` (Chapter
    1's :class:`~attnbook.rnn.Seq2Seq`, or Chapters 2-3's models): its ``final`` state. A Transformer has
    no such vector. Runs in eval mode without gradients and restores the model's mode.

    Shapes:
        ``N`` strings -> ``(N, C)``, ``C`` the context size.
    """
    if not hasattr(model, "encode"):
        raise TypeError(f"{type(model).__name__} has no encode(src) method that returns a context vector")
    chunks = []
    with evaluating(model):
        for start in range(0, len(sources), batch_size):
            ids = [torch.tensor(src_vocab.encode(text)) for text in sources[start : start + batch_size]]
            src = pad_sequence(ids, batch_first=True, padding_value=src_vocab.pad_id)  # (b, S)
            encoded = model.encode(src.to(device_of(model)))
            if not isinstance(encoded, Encoded):
                raise TypeError(
                    f"{type(model).__name__}.encode returns {type(encoded).__name__}, not an Encoded with a "
                    "final state: only a recurrent encoder makes one fixed-size context vector"
                )
            chunks.append(encoded.final)  # (b, C)
    return torch.cat(chunks)  # (N, C)
