"""``fit``: the one training loop every chapter uses, plus ``evaluate`` and ``History``.

Training uses teacher forcing: the model sees the true previous target token at every
step (``batch.tgt_in``) and is scored against the next one (``batch.tgt_out``) with
cross-entropy, ignoring padding. Validation adds greedy decoding to measure exact match.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnbook.decoding import BOS_ID, EOS_ID, greedy_decode

__all__ = ["fit", "evaluate", "History", "count_parameters"]

#: The keys of one epoch's record in a :class:`History`.
RECORD_KEYS = ("epoch", "train_loss", "valid_loss", "token_accuracy", "exact_match", "seconds", "lr")
VALID_KEYS = ("valid_loss", "token_accuracy", "exact_match")


class History:
    """Per-epoch records of :func:`fit`.

    Each record is a dict with the keys of ``RECORD_KEYS``: ``epoch`` (from 1),
    ``train_loss`` (mean per target token over the epoch), ``valid_loss``,
    ``token_accuracy`` and ``exact_match`` (``None`` without validation data),
    ``seconds`` (wall time of the epoch's training, validation excluded) and ``lr``
    (the learning rate at the end of the epoch).

    ``history["exact_match"]`` is the list of one key over the epochs, ``history[i]`` the
    record of one epoch, ``history.last`` the last record, ``history.as_dict()`` all keys
    as lists.
    """

    def __init__(self, records: Iterable[dict] = ()) -> None:
        self.records: list[dict] = [dict(record) for record in records]

    def append(self, record: dict) -> None:
        self.records.append(dict(record))

    def __getitem__(self, key: str | int) -> list | dict:
        if isinstance(key, int):
            return dict(self.records[key])  # one epoch's record, e.g. history[-1]
        if key not in RECORD_KEYS:
            raise KeyError(f"unknown history key {key!r}; the keys are {', '.join(RECORD_KEYS)}")
        return [record[key] for record in self.records]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    @property
    def last(self) -> dict:
        if not self.records:
            raise IndexError("the history is empty: no epoch has been trained")
        return dict(self.records[-1])

    def as_dict(self) -> dict[str, list]:
        return {key: self[key] for key in RECORD_KEYS}

    def __repr__(self) -> str:
        if not self.records:
            return "History(0 epochs)"
        return f"History({len(self)} epochs; last: {_format_record(self.records[-1])})"


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (shared tensors counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def fit(
    model: nn.Module,
    train: Iterable,
    valid: Iterable | None = None,
    *,
    epochs: int,
    lr: float = 1e-3,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler=None,
    clip: float | None = 1.0,
    label_smoothing: float = 0.0,
    max_len: int | None = None,
    progress: bool | None = None,
) -> History:
    """Train ``model`` with teacher forcing; validate after every epoch.

    Args:
        model: a model of the course (``model(src, tgt_in) -> logits``, ``model.pad_id``).
        train: re-iterable of :class:`attnbook.data.Batch` (iterated once per epoch;
            ``data.Batches(..., shuffle=True)`` reshuffles itself every time).
        valid: optional batches for :func:`evaluate` after every epoch.
        epochs: number of passes over ``train`` (``>= 1``).
        lr: learning rate of the default optimizer, Adam (ignored when ``optimizer`` is given).
        optimizer: an optimizer over the model's parameters, instead of Adam.
        scheduler: a ``torch.optim.lr_scheduler`` built on ``optimizer``, stepped after every
            optimizer step (per batch), e.g. ``LambdaLR`` for the Transformer's schedule.
        clip: maximum global gradient norm; ``None`` disables clipping.
        label_smoothing: passed to ``F.cross_entropy`` (spreads it over all classes).
        max_len: decoding length for exact match; default longest target of a batch + 5.
        progress: print one line per epoch to stdout. ``None``: only when interactive (a
            terminal or a Jupyter kernel) and ``ATTNBOOK_QUIET`` is not set.

    Shapes:
        each batch: src ``(B, S)``, tgt_in ``(B, T)``, tgt_out ``(B, T)``; logits ``(B, T, V)``.
    """
    _check_fit_args(model, train, epochs, clip, label_smoothing)
    if optimizer is None:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    if scheduler is not None and getattr(scheduler, "optimizer", optimizer) is not optimizer:
        raise ValueError("scheduler was built on a different optimizer; pass that optimizer as optimizer=...")
    show = _show_progress(progress)
    history = History()
    for epoch in range(1, epochs + 1):
        started = time.perf_counter()
        train_loss = train_epoch(model, train, optimizer, scheduler, clip, label_smoothing, epoch)
        seconds = time.perf_counter() - started
        metrics = evaluate(model, valid, max_len) if valid is not None else dict.fromkeys(VALID_KEYS)
        history.append(dict(epoch=epoch, train_loss=train_loss, **metrics, seconds=seconds,
                            lr=optimizer.param_groups[0]["lr"]))
        if show:
            print(f"epoch {epoch}/{epochs}  {_format_record(history.records[-1])}", flush=True)
    return history


def _check_fit_args(model, train, epochs, clip, label_smoothing) -> None:
    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
        raise ValueError(f"epochs must be an int >= 1, got {epochs!r}")
    if clip is not None and not clip > 0:
        raise ValueError(f"clip must be a positive max gradient norm or None, got {clip!r}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}")
    if not hasattr(model, "pad_id"):
        raise ValueError(f"model ({type(model).__name__}) has no pad_id attribute; the loss needs it")
    if hasattr(train, "__len__") and len(train) == 0:
        raise ValueError("train is empty: it has no batches")
    if isinstance(train, Iterator) and epochs > 1:
        raise ValueError("train is a one-shot iterator (e.g. a generator) but epochs > 1; "
                         "pass a list of batches or data.Batches")


def train_epoch(model, train, optimizer, scheduler=None, clip=1.0, label_smoothing=0.0, epoch=1) -> float:
    """One pass over ``train``; returns the mean loss per target token."""
    model.train()
    total_loss, total_tokens = 0.0, 0
    for batch in train:
        loss, tokens = _batch_loss(model, batch, label_smoothing)
        optimizer.zero_grad()
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        total_loss += loss.item() * tokens
        total_tokens += tokens
    if total_tokens == 0:
        raise ValueError(f"train gave no batches (with target tokens) in epoch {epoch}")
    return total_loss / total_tokens


def _batch_loss(model, batch, label_smoothing: float = 0.0) -> tuple[Tensor, int]:
    """Mean cross-entropy per non-pad target token, and the number of such tokens."""
    logits = model(batch.src, batch.tgt_in)  # (B, T, V)
    if logits.shape[:2] != batch.tgt_out.shape:
        raise ValueError(f"model gave logits of shape {tuple(logits.shape)} for tgt_out of shape "
                         f"{tuple(batch.tgt_out.shape)}; expected (B, T, V)")
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)),  # (B*T, V)
                           batch.tgt_out.reshape(-1),  # (B*T,)
                           ignore_index=model.pad_id, label_smoothing=label_smoothing)
    return loss, int((batch.tgt_out != model.pad_id).sum())


def evaluate(model: nn.Module, batches: Iterable, max_len: int | None = None) -> dict:
    """Validation metrics of ``model`` on ``batches``.

    Returns a dict with ``valid_loss`` (cross-entropy per non-pad target token, teacher forced,
    no label smoothing), ``token_accuracy`` (teacher-forced argmax equals the target, over
    non-pad positions, ``eos`` included) and ``exact_match`` (fraction of examples whose
    greedy decoding equals the target exactly).

    Args:
        max_len: decoding length; default the longest target of each batch + 5.

    Shapes:
        each batch: src ``(B, S)``, tgt_in ``(B, T)``, tgt_out ``(B, T)``.
    """
    was_training = model.training
    model.eval()
    sums = dict(loss=0.0, correct=0, tokens=0, matches=0, examples=0)
    try:
        with torch.no_grad():
            for batch in batches:
                _accumulate(sums, model, batch, max_len)
    finally:
        model.train(was_training)
    if sums["tokens"] == 0:
        raise ValueError("evaluate got no batches (with target tokens)")
    return dict(valid_loss=sums["loss"] / sums["tokens"], token_accuracy=sums["correct"] / sums["tokens"],
                exact_match=sums["matches"] / sums["examples"])


def _accumulate(sums: dict, model, batch, max_len: int | None) -> None:
    logits = model(batch.src, batch.tgt_in)  # (B, T, V)
    real = batch.tgt_out != model.pad_id  # (B, T)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch.tgt_out.reshape(-1),  # (B*T, V), (B*T,)
                           ignore_index=model.pad_id, reduction="sum")
    sums["loss"] += loss.item()
    sums["correct"] += int(((logits.argmax(-1) == batch.tgt_out) & real).sum())
    sums["tokens"] += int(real.sum())
    targets = _target_ids(batch.tgt_out, model.pad_id)
    steps = max_len if max_len is not None else max(len(t) for t in targets) + 5
    decoded = greedy_decode(model, batch.src, steps, bos_id=BOS_ID, eos_id=EOS_ID)
    sums["matches"] += sum(out == target for out, target in zip(decoded.tokens, targets))
    sums["examples"] += len(targets)


def _target_ids(tgt_out: Tensor, pad_id: int) -> list[list[int]]:
    """Each row of ``tgt_out`` ``(B, T)`` without padding and the final ``eos``."""
    rows = []
    for row in tgt_out.tolist():
        ids = [i for i in row if i != pad_id]
        rows.append(ids[:-1] if ids and ids[-1] == EOS_ID else ids)
    return rows


def _show_progress(progress: bool | None) -> bool:
    if progress is not None:
        return bool(progress)
    if os.environ.get("ATTNBOOK_QUIET", "") not in ("", "0"):
        return False
    return _in_ipython_kernel() or _stdout_is_tty()


def _stdout_is_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _in_ipython_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def _format_record(record: dict) -> str:
    parts = [f"train_loss {record['train_loss']:.3f}"]
    for key in VALID_KEYS:
        if record.get(key) is not None:
            parts.append(f"{key} {record[key]:.3f}")
    parts.append(f"{record['seconds']:.1f} s")
    return "  ".join(parts)
