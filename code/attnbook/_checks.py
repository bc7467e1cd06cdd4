"""Input validation shared by every module, with one message style: ``<name> <what is wrong>, got <value>``.

Model code calls these in one line at the top of a public method, so the computation stays
first on the screen. ``shapes`` checks several tensors at once against letter patterns and
makes sure that a letter (``B``, ``L``, ``d_k`` ...) has the same size wherever it appears.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

_DTYPES = {
    "bool": "be a bool tensor (True = may attend)",
    "long": "hold token ids as torch.long",
    "float": "be a floating-point tensor",
}


def positive_int(**values) -> None:
    """``x must be a positive int, got 0`` (``True`` is not an int here)."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def non_negative_int(**values) -> None:
    """``n must be a non-negative int, got -1``."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")


def integer(**values) -> None:
    """``seed must be an int, got '3'``."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} must be an int, got {value!r}")


def in_range(name: str, value, low: float, high: float) -> None:
    """``low <= value < high``, e.g. ``label_smoothing must be in [0, 1), got 1.5``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value < high:
        raise ValueError(f"{name} must be in [{low:g}, {high:g}), got {value!r}")


def one_of(name: str, value, choices) -> None:
    """``unknown score 'additive'; choose one of 'dot', 'general', 'concat'``."""
    if value not in choices:
        listed = ", ".join(repr(choice) for choice in choices)
        raise ValueError(f"unknown {name} {value!r}; choose one of {listed}")


def pad_id(pad_id, vocab_size: int) -> None:
    """``pad_id=5 is not an id of a vocabulary of size 4``."""
    if isinstance(pad_id, bool) or not isinstance(pad_id, int) or not 0 <= pad_id < vocab_size:
        raise ValueError(f"pad_id={pad_id!r} is not an id of a vocabulary of size {vocab_size}")


def same(name: str, value, other_name: str, other) -> None:
    """``pad_id=0 but the decoder was built with pad_id=3``."""
    if value != other:
        raise ValueError(f"{name}={value!r} but {other_name}={other!r}")


def shapes(owner: str, known: dict[str, int] | None = None, **specs) -> dict[str, int]:
    """Check tensors against letter patterns; return the size of every letter.

    Each keyword is ``name=(tensor, pattern)``; a ``None`` tensor is skipped. A pattern is
    letters separated by spaces, optionally ``: bool``, ``: long`` or ``: float`` for the dtype,
    e.g. ``"B L d_k"`` or ``"B S : long"``; a tuple of patterns allows several ranks, and a leading
    ``...`` any number of leading dimensions (the same in every tensor whose pattern has ``...``).
    A letter in ``known`` must have that size (``owner`` says whose expectation it is).

    Raises:
        TypeError: not a tensor, or the wrong dtype.
        ValueError: the wrong rank (``keys must be 3-D (B, L, d_k), got shape (4, 16)``), or a
            size that disagrees (``mask has L=7 (shape (4, 7)) but keys has L=9 (shape (4, 9, 16))``).
    """
    known = known or {}
    seen: dict[str, tuple[str, int, Tensor]] = {}
    for name, (tensor, pattern) in specs.items():
        if tensor is None:
            continue
        letters, dtype = _pattern(tensor, name, pattern)
        if dtype and not _has_dtype(tensor, dtype):
            raise TypeError(f"{name} must {_DTYPES[dtype]}, got dtype {tensor.dtype}")
        sizes = list(tensor.shape)
        if letters[0] == "...":  # any leading dimensions, the same in every tensor that has "..."
            sizes = [tuple(sizes[: tensor.dim() - len(letters) + 1])] + sizes[tensor.dim() - len(letters) + 1 :]
        for letter, size in zip(letters, sizes):
            if letter in known and size != known[letter]:
                raise ValueError(
                    f"{name} has {_size(letter, size)} (shape {tuple(tensor.shape)}) but {owner} "
                    f"expects {_size(letter, known[letter])}"
                )
            first = seen.setdefault(letter, (name, size, tensor))
            if first[1] != size:
                raise ValueError(
                    f"{name} has {_size(letter, size)} (shape {tuple(tensor.shape)}) but {first[0]} "
                    f"has {_size(letter, first[1])} (shape {tuple(first[2].shape)})"
                )
    return {letter: size for letter, (_, size, _) in seen.items()}


def _size(letter: str, size) -> str:
    """``L=5``, or ``leading dimensions (2, 3)`` for ``...``."""
    return f"leading dimensions {size}" if letter == "..." else f"{letter}={size}"


@functools.lru_cache(maxsize=None)
def _parse(pattern: str | tuple) -> tuple[tuple[tuple[str, ...], str], ...]:
    """``"B S : long"`` -> ``((("B", "S"), "long"),)``; a tuple of patterns gives one entry each."""
    options = [pattern] if isinstance(pattern, str) else list(pattern)
    return tuple(
        (tuple(text.split(":")[0].split()), text.split(":")[1].strip() if ":" in text else "") for text in options
    )


def _pattern(tensor, name: str, pattern) -> tuple[tuple[str, ...], str]:
    """The letters of the pattern that fits the tensor's rank, and the dtype it asks for."""
    parsed = _parse(pattern)
    if isinstance(tensor, Tensor):
        for letters, dtype in parsed:
            if tensor.dim() == len(letters) or (letters[0] == "..." and tensor.dim() >= len(letters) - 1):
                return letters, dtype
    wanted = " or ".join(
        f"{len(letters)}-D ({', '.join(letters)})"
        if letters[0] != "..."
        else f"at least {len(letters) - 1}-D ({', '.join(letters)})"
        for letters, _ in parsed
    )
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name} must be a tensor, {wanted}, got {type(tensor).__name__}")
    raise ValueError(f"{name} must be {wanted}, got shape {tuple(tensor.shape)}")


def _has_dtype(tensor: Tensor, dtype: str) -> bool:
    if dtype == "bool":
        return tensor.dtype == torch.bool
    if dtype == "long":
        return tensor.dtype == torch.long
    return tensor.is_floating_point()


def broadcastable(name: str, mask, target_name: str, target: Tensor) -> None:
    """A bool mask (True = may attend) that broadcasts to ``target``'s shape without enlarging it."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        what = f"dtype {mask.dtype}" if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"{name} must be a bool tensor (True = may attend), got {what}")
    fits = mask.dim() <= target.dim() and all(
        m == 1 or m == t for m, t in zip(reversed(mask.shape), reversed(target.shape))
    )
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to {target_name} of shape {tuple(target.shape)}"
        )


def head_mask(mask, batch: int, heads: int, queries: int, keys: int) -> None:
    """A bool mask for multi-head scores ``(B, H, L_q, L_k)`` that cannot be read two ways.

    4-D ``(B, H, L_q, L_k)`` with 1 for a size shared, or 2-D ``(L_q, L_k)``: one pattern for
    every sequence (e.g. causal). A 2-D ``(B, L_k)`` padding mask would line ``B`` up with the
    queries, so a 2-D mask is refused when ``B = L_q > 1``, and 3-D masks always.
    """
    if mask is None:
        return
    target = torch.Size([batch, heads, queries, keys])
    if isinstance(mask, Tensor) and mask.dim() == 2 and mask.size(0) == batch == queries > 1:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} is ambiguous when B = L_q = {batch}: as (L_q, L_k) "
            f"it is one pattern for every sequence, as (B, L_k) a padding mask per sequence. "
            f"Pass mask[None, None] (1, 1, L_q, L_k) for a pattern, mask[:, None, None, :] "
            f"(B, 1, 1, L_k) for padding"
        )
    if isinstance(mask, Tensor) and mask.dim() == 2 and mask.size(0) not in (1, queries):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)}: a 2-D mask is (L_q, L_k) with L_q={queries}; "
            f"for padding per sequence pass mask[:, None, None, :] (B, 1, 1, L_k)"
        )
    if isinstance(mask, Tensor) and mask.dim() not in (2, 4):
        raise ValueError(
            f"mask must be 2-D (L_q, L_k) or 4-D (B, H, L_q, L_k), with 1 for a size shared, got "
            f"shape {tuple(mask.shape)}: a 3-D mask would line its first size up with the heads"
        )
    broadcastable("mask", mask, "the scores", torch.empty(target, device="meta"))


def floating(name: str, tensor) -> None:
    """``scores must be a floating-point tensor, got dtype torch.int64``."""
    if not isinstance(tensor, Tensor) or not tensor.is_floating_point():
        what = f"dtype {tensor.dtype}" if isinstance(tensor, Tensor) else type(tensor).__name__
        raise TypeError(f"{name} must be a floating-point tensor, got {what}")


def right_padded(src: Tensor, pad_id: int) -> Tensor:
    """Token ids ``(B, S)`` padded on the right only, no row empty; returns ``src != pad_id``."""
    shapes("src", src=(src, "B S : long"))
    real = src != pad_id  # (B, S)
    empty = (~real.any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"src rows {empty} are all padding (pad_id={pad_id}); every source needs a token")
    if (real[:, 1:] & ~real[:, :-1]).any():  # a real token right after a pad
        raise ValueError(f"src must be padded on the right only (pad_id={pad_id})")
    return real


def instance(name: str, value, kind: type, what: str) -> None:
    """``state must be the BahdanauState returned by start or step, got tuple``."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")
