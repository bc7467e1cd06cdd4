"""The model protocol: what every sequence-to-sequence model of the course implements.

The plain RNN encoder-decoder (Chapter 1), the Bahdanau and Luong models (Chapters 2-3) and
the Transformer (Chapter 6) all implement :class:`Seq2SeqModel`, so one training loop
(:func:`attnbook.training.fit`) and one set of decoders (:mod:`attnbook.decoding`) drive them all.
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple, Protocol, runtime_checkable

import torch
from torch import Tensor

from attnbook.data import Example, Vocab, make_batch

__all__ = ["Seq2SeqModel", "Step", "Output", "select_rows", "reorder_state", "evaluating", "teacher_forced_weights"]


class Step(NamedTuple):
    """What ``model.step`` returns.

    Shapes:
        logits ``(B, V)``; weights ``(B, S)`` for one attention, ``(B, H, S)`` (or more leading
        dimensions after ``B``) for several heads or layers, or ``None``.
    """

    logits: Tensor
    state: Any
    weights: Tensor | None


class Output(NamedTuple):
    """What a teacher-forced ``model(src, tgt_in)`` returns; models may add fields after these.

    Shapes:
        logits ``(B, T, V)``; weights ``(B, T, S)`` (or ``(B, T, H, S)`` ...) or ``None``.
    """

    logits: Tensor
    weights: Tensor | None


@runtime_checkable
class Seq2SeqModel(Protocol):
    """Every sequence-to-sequence model of the course.

    - ``pad_id``: the padding id of source and target;
    - ``forward(src (B, S), tgt_in (B, T))``: teacher forcing; a NamedTuple whose first field
      is ``logits (B, T, V)`` (:class:`Output`, or one with more fields);
    - ``start(src (B, S)) -> state``: encode once; the state is opaque to the caller;
    - ``step(state, prev (B,)) -> Step(logits (B, V), state, weights)``: one decoding step.

    Optional: ``reorder_state(state, index (N,)) -> state`` to pick and repeat rows of a state
    (beam search); without it, :func:`select_rows` index-selects every tensor along dim 0.
    """

    pad_id: int

    def forward(self, src: Tensor, tgt_in: Tensor) -> tuple: ...

    def start(self, src: Tensor) -> Any: ...

    def step(self, state: Any, prev: Tensor) -> Step: ...


def select_rows(state: Any, index: Tensor) -> Any:
    """Rows ``index`` of every tensor in a state: a tensor, tuple, NamedTuple, list or dict of them,
    or an object with its own ``select_rows(index)`` (a :class:`~attnbook.attention.KVCache`).

    Anything that is not a tensor (``None``, ints, strings) is kept as it is.

    Shapes:
        every tensor ``(B, ...)`` -> ``(N, ...)``, index ``(N,)`` long
    """
    if isinstance(state, Tensor):
        return state.index_select(0, index)
    if hasattr(state, "select_rows"):  # e.g. a KVCache
        return state.select_rows(index)
    if isinstance(state, tuple) and hasattr(state, "_fields"):
        return type(state)(*(select_rows(item, index) for item in state))
    if isinstance(state, (tuple, list)):
        return type(state)(select_rows(item, index) for item in state)
    if isinstance(state, dict):
        return {key: select_rows(value, index) for key, value in state.items()}
    return state


def reorder_state(model, state: Any, index: Tensor) -> Any:
    """``model.reorder_state(state, index)`` if the model has it, else :func:`select_rows`."""
    reorder = getattr(model, "reorder_state", None)
    return reorder(state, index) if reorder is not None else select_rows(state, index)


def zero_finished(weights: Tensor | None, done: Tensor) -> Tensor | None:
    """Zero the rows of ``weights`` whose sequence has finished (any number of dims after ``B``).

    Shapes:
        weights ``(B, ..., S)`` or None, done ``(B,)`` bool -> like ``weights``
    """
    if weights is None:
        return None
    return weights.masked_fill(done.view(-1, *[1] * (weights.dim() - 1)), 0.0)  # (B, 1, ..., 1) broadcast


@contextlib.contextmanager
def evaluating(model):
    """``with evaluating(model):`` eval mode and no gradients inside; the model's mode is restored after."""
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        if hasattr(model, "train"):
            model.train(was_training)


def teacher_forced_weights(model, examples: list[Example], src_vocab: Vocab, tgt_vocab: Vocab) -> Tensor:
    """The attention weights of ``model`` on ``examples`` when it is fed the correct previous target
    symbols (teacher forcing), in eval mode: one row per target symbol, ``<eos>`` included.

    Shapes: ``(B, T, S)`` for ``B`` examples, padded to the longest target ``T`` and source ``S``.

    Raises:
        ValueError: if the model returns no attention weights (a plain encoder-decoder).
    """
    batch = make_batch(examples, src_vocab, tgt_vocab)
    with evaluating(model):
        weights = model(batch.src, batch.tgt_in).weights  # (B, T, S)
    if weights is None:
        raise ValueError(f"{type(model).__name__} returns no attention weights (its Output.weights is None)")
    return weights


def device_of(model) -> torch.device:
    """The device of a model's first parameter (the CPU for a model without parameters)."""
    parameters = getattr(model, "parameters", None)
    parameter = next(parameters(), None) if parameters is not None else None
    return parameter.device if parameter is not None else torch.device("cpu")
