"""Decoding: turn a trained model's one-step predictions into output sequences.

Works with every model of the course through the shared protocol
(``model.start(src) -> state``; ``model.step(state, prev) -> (logits, state, weights | None)``).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import Tensor, nn

from attnbook.data import Vocab

__all__ = ["Decoded", "greedy_decode", "translate", "BOS_ID", "EOS_ID"]

#: Special ids shared by every vocabulary of the course (defined by attnbook.data.Vocab).
BOS_ID = Vocab.bos_id
EOS_ID = Vocab.eos_id


class Decoded(NamedTuple):
    """The result of :func:`greedy_decode`.

    Attributes:
        tokens: one list of ids per row, without ``bos`` and stopping before ``eos``.
        weights: the attention weights of every step, or ``None`` when the model has none.
            ``weights[b, t]`` are the weights used to predict output ``t`` of row ``b``
            (``t == len(tokens[b])`` is the step that predicted ``eos``); rows that had
            already finished are zero.

    Shapes:
        weights ``(B, T_out, S)``, ``T_out`` = number of steps taken (at most ``max_len``).
    """

    tokens: list[list[int]]
    weights: Tensor | None


def greedy_decode(model: nn.Module, src: Tensor, max_len: int, bos_id: int = BOS_ID, eos_id: int = EOS_ID) -> Decoded:
    """Decode by taking the most likely token at every step.

    Runs in ``eval`` mode without gradients and restores the model's previous mode.
    Stops when every row has produced ``eos`` or after ``max_len`` steps.

    Args:
        model: a model of the course (``start``/``step`` protocol).
        src: padded source ids.
        max_len: the most tokens to produce per row (``eos`` included), ``>= 1``.
        bos_id, eos_id: ids of the start and end symbols of the target vocabulary.

    Shapes:
        src ``(B, S)`` long -> Decoded(tokens: ``B`` lists, weights ``(B, T_out, S)`` or ``None``)
    """
    _check_decode_args(src, max_len)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            steps, weights = _greedy_steps(model, src, max_len, bos_id, eos_id)
    finally:
        model.train(was_training)
    return Decoded(_cut_at_eos(steps, eos_id), weights)


def _check_decode_args(src: Tensor, max_len: int) -> None:
    if not isinstance(src, Tensor) or src.dim() != 2:
        shape = tuple(src.shape) if isinstance(src, Tensor) else type(src).__name__
        raise ValueError(f"src must be a 2-D tensor of token ids (B, S), got {shape}")
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1:
        raise ValueError(f"max_len must be an int >= 1, got {max_len!r}")


def _greedy_steps(model, src: Tensor, max_len: int, bos_id: int, eos_id: int) -> tuple[Tensor, Tensor | None]:
    """The decoding loop: returns the predicted ids ``(B, T_out)`` and the weights or ``None``."""
    batch = src.size(0)
    state = model.start(src)
    prev = torch.full((batch,), bos_id, dtype=torch.long, device=src.device)  # (B,)
    done = torch.zeros(batch, dtype=torch.bool, device=src.device)  # (B,)
    predicted, weights = [], []
    for _ in range(max_len):
        logits, state, step_weights = model.step(state, prev)  # logits (B, V)
        prev = logits.argmax(dim=-1)  # (B,)
        predicted.append(prev)
        if step_weights is not None:
            weights.append(step_weights.masked_fill(done.unsqueeze(1), 0.0))  # (B, S)
        done = done | (prev == eos_id)
        if done.all():
            break
    stacked = torch.stack(weights, dim=1) if weights else None  # (B, T_out, S)
    return torch.stack(predicted, dim=1), stacked  # (B, T_out)


def _cut_at_eos(steps: Tensor, eos_id: int) -> list[list[int]]:
    rows = []
    for row in steps.tolist():
        rows.append(row[: row.index(eos_id)] if eos_id in row else row)
    return rows


def translate(model: nn.Module, texts: Sequence[str], src_vocab, tgt_vocab, max_len: int | None = None) -> list[str]:
    """Greedy-decode a list of source strings into target strings.

    Args:
        model: a trained model of the course.
        texts: source strings (no special symbols; reversal, if the model was trained on
            reversed sources, is the caller's job, as it is in the data).
        src_vocab, tgt_vocab: the vocabularies the model was trained with.
        max_len: the most target symbols per text; default ``2 * longest source + 10``.

    Shapes:
        ``N`` strings -> ``N`` strings.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings; for one text use translate(model, [text], ...)")
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty; give at least one source string")
    empty = [i for i, text in enumerate(texts) if not text]
    if empty:
        raise ValueError(f"texts {empty} are empty strings; every source needs at least one symbol")
    src = _pad([src_vocab.encode(text) for text in texts], src_vocab.pad_id, _device(model))  # (N, S)
    if max_len is None:
        max_len = 2 * src.size(1) + 10
    decoded = greedy_decode(model, src, max_len, bos_id=tgt_vocab.bos_id, eos_id=tgt_vocab.eos_id)
    return [tgt_vocab.decode(ids) for ids in decoded.tokens]


def _pad(rows: list[list[int]], pad_id: int, device: torch.device) -> Tensor:
    longest = max(len(row) for row in rows)
    padded = [row + [pad_id] * (longest - len(row)) for row in rows]
    return torch.tensor(padded, dtype=torch.long, device=device)  # (N, S)


def _device(model: nn.Module) -> torch.device:
    parameter = next(model.parameters(), None)
    return parameter.device if parameter is not None else torch.device("cpu")
