"""Decoding: turn a model's one-step predictions into output sequences (Chapters 1-7).

Works with every model of the course through the protocol (:mod:`attnbook.protocol`):
``start(src) -> state`` and ``step(state, prev) -> Step(logits, state, weights)``.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import Tensor, nn

from attnbook import _checks as checks
from attnbook.data import Vocab
from attnbook.protocol import device_of, evaluating, reorder_state, zero_finished

__all__ = ["Decoded", "greedy_decode", "beam_search", "translate", "BOS_ID", "EOS_ID"]

#: Special ids shared by every vocabulary of the course (defined by attnbook.data.Vocab).
BOS_ID = Vocab.bos_id
EOS_ID = Vocab.eos_id


class Decoded(NamedTuple):
    """Decoded sequences.

    Attributes:
        tokens: one list of ids per row, without ``bos`` and stopping before ``eos``.
        weights: ``weights[b, t]`` are the attention weights of the step that produced output ``t``
            of row ``b`` (``t == len(tokens[b])`` is the ``eos`` step); zero after a row has finished.
            ``None`` for a model without attention.
        scores: the summed log-probability of each returned sequence, its ``eos`` included.

    Shapes:
        weights ``(B, T_out, ..., S)`` (the step's weights' shape after ``B``), scores ``(B,)``
    """

    tokens: list[list[int]]
    weights: Tensor | None
    scores: Tensor


def greedy_decode(model: nn.Module, src: Tensor, max_len: int, bos_id: int = BOS_ID, eos_id: int = EOS_ID) -> Decoded:
    """The most likely token at every step, until every row has produced ``eos`` or ``max_len`` steps.

    Runs in ``eval`` mode without gradients and restores the model's mode.

    Shapes:
        src ``(B, S)`` -> Decoded(tokens: ``B`` lists, weights ``(B, T_out, ..., S)`` or None, scores ``(B,)``)
    """
    _check_decoding(src, max_len)
    with evaluating(model):
        state = model.start(src)
        prev = torch.full((src.size(0),), bos_id, dtype=torch.long, device=src.device)  # (B,)
        done = torch.zeros_like(prev, dtype=torch.bool)  # (B,) rows that have produced eos
        scores = torch.zeros(src.size(0), device=src.device)  # (B,)
        tokens, weights = [], []
        for _ in range(max_len):
            logits, state, step_weights = model.step(state, prev)  # logits (B, V)
            log_probs = logits.log_softmax(dim=-1)  # (B, V)
            prev = log_probs.argmax(dim=-1)  # (B,)
            scores += log_probs.gather(1, prev.unsqueeze(1)).squeeze(1).masked_fill(done, 0.0)
            tokens.append(prev)
            weights.append(zero_finished(step_weights, done))  # (B, ..., S) or None
            done = done | (prev == eos_id)
            if done.all():
                break
    stacked = torch.stack(weights, dim=1) if weights[0] is not None else None  # (B, T_out, ..., S)
    return Decoded([_until(row, eos_id) for row in torch.stack(tokens, dim=1).tolist()], stacked, scores)


class _Beams(NamedTuple):
    """The live beams of every row: ``K`` per row, rows one after another (``B·K`` in all).

    Shapes:
        state: the model's, for ``B·K`` rows; tokens ``(B·K, 1 + t)`` (bos first); weights
        ``(B·K, t, ..., S)`` or None; scores ``(B, K)``, summed log-probabilities, best first.
    """

    state: object
    tokens: Tensor
    weights: Tensor | None
    scores: Tensor


class _Hypothesis(NamedTuple):
    rank: float  # what sequences are compared by: score / length penalty
    score: float  # summed log-probability
    tokens: list[int]  # without bos and eos
    weights: Tensor | None  # (steps, ..., S)


def beam_search(
    model: nn.Module,
    src: Tensor,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.0,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> Decoded:
    """Keep the ``beam_size`` likeliest prefixes of every row; return each row's best finished sequence.

    Each step, every beam proposes its ``2K`` likeliest next tokens and each row keeps its ``2K`` best
    candidates: one ending with ``eos`` that ranks in the first ``K`` is finished, and the ``K`` best
    that do not end go on. Sequences are ranked by ``score / ((5 + length) / 6) ** length_penalty``
    (Wu et al. 2016; ``length`` counts the ``eos``). A row is done when no live beam can outrank its
    best finished sequence: scores only fall, so a live beam can reach at most ``score / lp(max_len)``.
    ``Decoded.scores`` are the plain sums. ``beam_size=1`` gives greedy's tokens.

    Shapes:
        src ``(B, S)`` -> Decoded(tokens: ``B`` lists, weights ``(B, T_out, ..., S)`` or None, scores ``(B,)``)
    """
    _check_decoding(src, max_len)
    checks.positive_int(beam_size=beam_size)
    checks.in_range("length_penalty", length_penalty, 0.0, float("inf"))
    batch, K = src.size(0), beam_size
    finished: list[list[_Hypothesis]] = [[] for _ in range(batch)]
    done = [False] * batch

    def rank(score: float, length: int) -> float:
        return score / ((5 + length) / 6) ** length_penalty

    with evaluating(model):
        rows = torch.arange(batch, device=src.device).repeat_interleave(K)  # (B·K,): the source row of each beam
        scores = torch.full((batch, K), float("-inf"), device=src.device)
        scores[:, 0] = 0.0  # one live beam per row to start with
        beams = _Beams(
            reorder_state(model, model.start(src), rows),
            torch.full((batch * K, 1), bos_id, device=src.device),
            None,
            scores,
        )
        for _ in range(max_len):
            logits, state, weights = model.step(beams.state, beams.tokens[:, -1])  # logits (B·K, V)
            parent, token, score, tokens, history = _candidates(beams, logits, weights, K)  # (B, 2K) each, best first
            ends = (token == eos_id) & (torch.arange(2 * K, device=src.device) < K) & torch.isfinite(score)
            for b, c in ends.nonzero().tolist():
                if not done[b]:
                    finished[b].append(
                        _Hypothesis(
                            rank(float(score[b, c]), tokens.size(-1) - 1),
                            float(score[b, c]),
                            tokens[b, c, 1:-1].tolist(),
                            None if history is None else history[b, c],
                        )
                    )
            goes_on = (token != eos_id) & ((token != eos_id).cumsum(dim=1) <= K)  # (B, 2K): exactly K per row
            keep = goes_on.nonzero()[:, 1].view(batch, K)  # (B, K) candidate indices, best first
            pick = torch.arange(batch, device=src.device).unsqueeze(1), keep  # index (B, K) into (B, 2K, ...)
            beams = _Beams(
                reorder_state(model, state, parent[pick].flatten()),
                tokens[pick].flatten(0, 1),
                None if history is None else history[pick].flatten(0, 1),
                score[pick],
            )
            ceiling = (
                beams.scores[:, 0] / ((5 + max_len) / 6) ** length_penalty
            )  # (B,) the best rank a live beam could reach
            for b in range(batch):
                done[b] = done[b] or max((h.rank for h in finished[b]), default=float("-inf")) >= ceiling[b]
            if all(done):
                break
    for b in range(batch):  # a row that reached max_len before it was done: its live beams count too
        for k in range(K if not done[b] else 0):
            if torch.isfinite(beams.scores[b, k]):
                row = beams.tokens[b * K + k, 1:]
                finished[b].append(
                    _Hypothesis(
                        rank(float(beams.scores[b, k]), row.numel()),
                        float(beams.scores[b, k]),
                        row.tolist(),
                        None if beams.weights is None else beams.weights[b * K + k],
                    )
                )
    best = [max(hypotheses, key=lambda h: h.rank) for hypotheses in finished]
    weights = (
        None if best[0].weights is None else nn.utils.rnn.pad_sequence([h.weights for h in best], batch_first=True)
    )
    return Decoded([h.tokens for h in best], weights, torch.tensor([h.score for h in best], device=src.device))


def _candidates(beams: _Beams, logits: Tensor, weights: Tensor | None, K: int):
    """The ``2K`` best one-token extensions of each row's beams, best first.

    Returns parent ``(B, 2K)`` (the beam extended, an index into ``B·K``), token ``(B, 2K)``, score
    ``(B, 2K)``, the grown tokens ``(B, 2K, 2 + t)`` and weights ``(B, 2K, t + 1, ..., S)`` (or None).
    """
    batch = beams.scores.size(0)
    log_probs, proposed = logits.log_softmax(dim=-1).topk(min(2 * K, logits.size(-1)), dim=-1)  # (B·K, P) each
    totals = (beams.scores.view(-1, 1) + log_probs).view(batch, -1)  # (B, K·P): every beam's every proposal
    order = totals.sort(dim=-1, descending=True, stable=True).indices[:, : 2 * K]  # (B, 2K)
    offsets = torch.arange(batch, device=logits.device).unsqueeze(1) * K  # (B, 1): first beam of each row
    parent = order // log_probs.size(-1) + offsets  # (B, 2K)
    token = proposed.view(batch, -1).gather(1, order)  # (B, 2K)
    tokens = torch.cat([beams.tokens[parent], token.unsqueeze(-1)], dim=-1)  # (B, 2K, 1 + t) + (B, 2K, 1)
    if weights is None:
        return parent, token, totals.gather(1, order), tokens, None
    step = weights[parent].unsqueeze(2)  # (B, 2K, 1, ..., S)
    history = step if beams.weights is None else torch.cat([beams.weights[parent], step], dim=2)  # (B, 2K, t + 1, ..)
    return parent, token, totals.gather(1, order), tokens, history


def translate(
    model: nn.Module, texts: Sequence[str], src_vocab, tgt_vocab, max_len: int | None = None, beam_size: int = 1
) -> list[str]:
    """Decode source strings into target strings: greedy for ``beam_size=1``, else :func:`beam_search`.

    Args:
        max_len: the most target symbols per text; default ``2 ·`` the longest source ``+ 10``.

    Shapes:
        ``N`` strings -> ``N`` strings
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings; for one text use translate(model, [text], ...)")
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty; give at least one source string")
    empty = [i for i, text in enumerate(texts) if not text]
    if empty:
        raise ValueError(f"texts {empty} are empty strings; every source needs at least one symbol")
    ids = [src_vocab.encode(text) for text in texts]
    longest = max(len(row) for row in ids)
    src = torch.tensor(
        [row + [src_vocab.pad_id] * (longest - len(row)) for row in ids], dtype=torch.long, device=device_of(model)
    )  # (N, S), padded on the right
    max_len = 2 * longest + 10 if max_len is None else max_len
    if beam_size == 1:
        decoded = greedy_decode(model, src, max_len, bos_id=tgt_vocab.bos_id, eos_id=tgt_vocab.eos_id)
    else:
        decoded = beam_search(model, src, max_len, beam_size, bos_id=tgt_vocab.bos_id, eos_id=tgt_vocab.eos_id)
    return [tgt_vocab.decode(row) for row in decoded.tokens]


def _check_decoding(src, max_len) -> None:
    checks.shapes("decoding", src=(src, "B S"))
    checks.positive_int(max_len=max_len)


def _until(row: list[int], eos_id: int) -> list[int]:
    """The ids before the first ``eos``."""
    return row[: row.index(eos_id)] if eos_id in row else row
