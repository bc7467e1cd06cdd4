"""``fit``: the one training loop every chapter uses, plus ``evaluate``, ``History`` and the warm-up schedule.

Training uses teacher forcing: the model reads the true previous target token at every step
(``batch.tgt_in``) and is scored against the next one (``batch.tgt_out``) with cross-entropy,
ignoring padding. Validation can add greedy decoding to measure exact match.
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
from torch.optim.lr_scheduler import LambdaLR

from attnbook import _checks as checks
from attnbook.decoding import BOS_ID, EOS_ID, greedy_decode
from attnbook.metrics import exact_match
from attnbook.protocol import device_of, evaluating

__all__ = ["fit", "evaluate", "History", "count_parameters", "train_on_tensors", "warmup_schedule"]

#: The keys of one epoch's record in a :class:`History`.
RECORD_KEYS = ("epoch", "train_loss", "valid_loss", "teacher_forced_accuracy", "exact_match", "seconds", "lr")
VALID_KEYS = ("valid_loss", "teacher_forced_accuracy", "exact_match")


class History:
    """Per-epoch records of :func:`fit`.

    Each record is a dict with the keys of ``RECORD_KEYS``: ``epoch`` (from 1),
    ``train_loss`` (mean per target token over the epoch), ``valid_loss``,
    ``teacher_forced_accuracy`` and ``exact_match`` (see :func:`evaluate`; ``None`` without
    validation data, ``exact_match`` also ``None`` with ``decode=False``),
    ``seconds`` (wall time of the epoch's training, validation excluded) and ``lr``
    (the learning rate at the end of the epoch).

    ``history["exact_match"]`` is the list of one key over the epochs, ``history[i]`` the
    record of one epoch, ``history.last`` the last record, ``history.as_dict()`` all keys
    as lists. ``history.step_losses`` holds the training loss of every optimizer step.
    """

    def __init__(self, records: Iterable[dict] = ()) -> None:
        self.records: list[dict] = [dict(record) for record in records]
        self.step_losses: list[float] = []

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
    decode: bool = True,
    max_len: int | None = None,
    progress: bool | None = None,
) -> History:
    """Train ``model`` with teacher forcing; :func:`evaluate` on ``valid`` after every epoch.

    Where the defaults differ from Vaswani et al.'s recipe: Adam with PyTorch's betas and a fixed ``lr``
    (pass ``optimizer`` and ``scheduler=warmup_schedule(...)`` for theirs), and gradient clipping at
    norm 1 (the paper does not clip; ``clip=None``), which keeps the small RNNs of Chapters 1-3 stable.

    Args:
        model: a model of the protocol (:class:`attnbook.protocol.Seq2SeqModel`).
        train: re-iterable of :class:`attnbook.data.Batch` (``data.Batches(..., shuffle=True)`` reshuffles).
        valid: batches to evaluate after every epoch, or None.
        epochs: passes over ``train``. lr: Adam's learning rate (when no ``optimizer`` is given).
        optimizer: instead of Adam. scheduler: stepped after every optimizer step (per batch).
        clip: the largest global gradient norm, or None. label_smoothing: ``F.cross_entropy``'s (over all classes).
        decode, max_len: passed to :func:`evaluate`.
        progress: print a line per epoch; None: when interactive and ``ATTNBOOK_QUIET`` is not set.

    Shapes:
        each batch: src ``(B, S)``, tgt_in ``(B, T)``, tgt_out ``(B, T)``; logits ``(B, T, V)``
    """
    checks.positive_int(epochs=epochs)
    if clip is not None and not clip > 0:
        raise ValueError(f"clip must be a positive max gradient norm or None, got {clip!r}")
    checks.in_range("label_smoothing", label_smoothing, 0.0, 1.0)
    if isinstance(train, Iterator) and epochs > 1:
        raise ValueError(
            "train is a one-shot iterator (e.g. a generator) but epochs > 1; pass a list of batches or data.Batches"
        )
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True) if optimizer is None else optimizer
    if scheduler is not None and getattr(scheduler, "optimizer", optimizer) is not optimizer:
        raise ValueError("scheduler was built on a different optimizer; pass that optimizer as optimizer=...")
    show, history = _show_progress(progress), History()
    for epoch in range(1, epochs + 1):
        started = time.perf_counter()
        train_loss = train_epoch(model, train, optimizer, scheduler, clip, label_smoothing, history.step_losses)
        seconds = time.perf_counter() - started
        metrics = evaluate(model, valid, max_len, decode) if valid is not None else dict.fromkeys(VALID_KEYS)
        history.append(
            dict(epoch=epoch, train_loss=train_loss, **metrics, seconds=seconds, lr=optimizer.param_groups[0]["lr"])
        )
        if show:
            print(f"epoch {epoch}/{epochs}  {_format_record(history.records[-1])}", flush=True)
    return history


def train_epoch(
    model,
    train,
    optimizer,
    scheduler=None,
    clip: float | None = 1.0,
    label_smoothing: float = 0.0,
    step_losses: list | None = None,
) -> float:
    """One pass over ``train``; returns the mean loss per target token (each step's loss appended to
    ``step_losses``)."""
    model.train()
    total_loss, total_tokens = 0.0, 0
    for batch in train:
        loss, tokens = batch_loss(model, batch, label_smoothing)
        optimizer.zero_grad()
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        total_loss += loss.item() * tokens
        total_tokens += tokens
        if step_losses is not None:
            step_losses.append(loss.item())
    if total_tokens == 0:
        raise ValueError("train gave no batches with target tokens")
    return total_loss / total_tokens


def batch_loss(model, batch, label_smoothing: float = 0.0) -> tuple[Tensor, int]:
    """Cross-entropy over the non-pad target tokens of a batch, and how many there are.

    Shapes:
        batch.src ``(B, S)``, batch.tgt_in ``(B, T)``, batch.tgt_out ``(B, T)``; logits ``(B, T, V)``
    """
    batch = batch.to(device_of(model))  # the model's device: a GPU model gets GPU tensors
    logits = model(batch.src, batch.tgt_in).logits  # (B, T, V)
    if logits.shape[:2] != batch.tgt_out.shape:
        raise ValueError(
            f"model gave logits of shape {tuple(logits.shape)} for tgt_out of shape "
            f"{tuple(batch.tgt_out.shape)}; expected (B, T, V)"
        )
    loss = F.cross_entropy(
        logits.flatten(0, 1),
        batch.tgt_out.flatten(),  # (B·T, V), (B·T,)
        ignore_index=model.pad_id,
        label_smoothing=label_smoothing,
    )
    return loss, int((batch.tgt_out != model.pad_id).sum())


def evaluate(model: nn.Module, batches: Iterable, max_len: int | None = None, decode: bool = True) -> dict:
    """Validation metrics of ``model`` on ``batches``, in eval mode without gradients.

    Returns:
        ``valid_loss``: cross-entropy per non-pad target token, teacher forced, no label smoothing;
        ``teacher_forced_accuracy``: how often the argmax with the true previous tokens as input is
        the next target token (non-pad positions, ``eos`` included; not the decoded accuracy of
        :func:`attnbook.metrics.token_accuracy`);
        ``exact_match``: :func:`attnbook.metrics.exact_match` of the greedy decodings, or None with
        ``decode=False`` (which skips decoding).

    Args:
        max_len: decoding length; default the longest target of each batch + 5.
    """
    loss, correct, tokens, decoded, targets = 0.0, 0, 0, [], []
    with evaluating(model):
        for batch in batches:
            batch = batch.to(device_of(model))
            logits = model(batch.src, batch.tgt_in).logits  # (B, T, V)
            real = batch.tgt_out != model.pad_id  # (B, T)
            loss += F.cross_entropy(
                logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=model.pad_id, reduction="sum"
            ).item()
            correct += int(((logits.argmax(dim=-1) == batch.tgt_out) & real).sum())
            tokens += int(real.sum())
            if decode:
                rows = [[i for i in row if i != model.pad_id] for row in batch.tgt_out.tolist()]  # without padding
                rows = [row[: row.index(EOS_ID)] if EOS_ID in row else row for row in rows]  # and without eos
                steps = max_len if max_len is not None else max(map(len, rows)) + 5
                decoded += greedy_decode(model, batch.src, steps, bos_id=BOS_ID, eos_id=EOS_ID).tokens
                targets += rows
    if tokens == 0:
        raise ValueError("evaluate got no batches with target tokens")
    return dict(
        valid_loss=loss / tokens,
        teacher_forced_accuracy=correct / tokens,
        exact_match=exact_match(decoded, targets) if decode else None,
    )


def train_on_tensors(
    model: nn.Module,
    inputs: Tensor,
    targets: Tensor,
    loss_fn,
    epochs: int,
    lr: float = 1e-2,
    batch_size: int = 50,
    seed: int = 0,
) -> float:
    """Adam on shuffled mini-batches of tensors, for the small models of Chapters 4-5 that are not seq2seq.

    ``loss_fn(output, targets) -> loss`` receives the model's output (its first item, if it returns a
    tuple) for a batch. The shuffling comes from its own generator seeded with ``seed``. Returns the last
    batch's loss.

    Shapes:
        inputs ``(N, ...)``, targets ``(N, ...)``
    """
    checks.positive_int(epochs=epochs, batch_size=batch_size)
    checks.same("len(inputs)", len(inputs), "len(targets)", len(targets))
    order = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    model.train()
    for _ in range(epochs):
        for batch in torch.randperm(len(inputs), generator=order).split(batch_size):
            device = device_of(model)
            output = model(inputs[batch].to(device))
            loss = loss_fn(output[0] if isinstance(output, tuple) else output, targets[batch].to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    return loss.item()


def warmup_schedule(optimizer: torch.optim.Optimizer, d_model: int, warmup: int = 4000) -> LambdaLR:
    """Vaswani et al.'s learning rate: ``lr = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)``.

    ``step`` counts optimizer steps from 1: the rate rises linearly for ``warmup`` steps, then falls
    as ``step^-0.5`` (peak ``(d_model · warmup)^-0.5`` ≈ 6.99e-4 for 512 and 4000). The optimizer's own
    ``lr`` multiplies it: build the optimizer with ``lr=1.0`` for the paper's rates. Step the
    scheduler after every optimizer step (``fit(..., scheduler=...)`` does).
    """
    checks.positive_int(d_model=d_model, warmup=warmup)
    return LambdaLR(optimizer, lambda done: d_model**-0.5 * min((done + 1) ** -0.5, (done + 1) * warmup**-1.5))


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
