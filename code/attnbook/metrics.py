"""Metrics for sequence outputs: exact match, token accuracy, accuracy by length.

Every function takes ``predictions`` and ``targets``: two equally long collections of
sequences, one prediction per target. A sequence may be a list or tuple of token ids, a
string (compared character by character), a list of token strings, or a 1-D tensor or
NumPy array (converted with ``.tolist()``). Predictions and targets must be in the same
form: both *without* ``<bos>``/``<eos>`` (as ``greedy_decode`` returns them and as
``Vocab.decode`` gives strings), or both with them.

A prediction ``[5, 6, 7]`` and a target ``"abc"`` are compared element by element, so
compare ids with ids and strings with strings.

Each function returns fractions in [0, 1] and raises a ValueError when predictions and
targets have different numbers of sequences, or none.

Shapes:
    predictions: N sequences, each of any length.
    targets:     N sequences, each of any length.
    lengths:     N ints (for ``accuracy_by_length``).
"""

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["exact_match", "token_accuracy", "accuracy_by_length"]


def exact_match(predictions, targets) -> float:
    """Fraction of predictions that equal their target exactly (same tokens, same length).

    Example:
        >>> exact_match([[5, 6], [7]], [[5, 6], [8]])
        0.5
    """
    pairs = _pairs(predictions, targets)
    correct = sum(prediction == target for prediction, target in pairs)
    return correct / len(pairs)


def token_accuracy(predictions, targets) -> float:
    """Fraction of target positions whose token is predicted at the same position.

    The end of each sequence counts as one more position, as if both sequences ended
    with ``<eos>``: a prediction gets it right only if it stops exactly where the
    target stops. So

    - a prediction *shorter* than its target gets the missing positions wrong, and
      the end position wrong too;
    - a prediction *longer* than its target gets the end position wrong (the extra
      tokens are not counted again);
    - an empty prediction for an empty target is 1 of 1 right.

    Positions are pooled over all pairs (a long target weighs more than a short one).

    Example:
        >>> token_accuracy([[5, 6, 9]], [[5, 6]])   # 5 and 6 right, the end wrong
        0.6666666666666666
    """
    pairs = _pairs(predictions, targets)
    correct = 0
    total = 0
    for prediction, target in pairs:
        correct += sum(p == t for p, t in zip(prediction, target))
        correct += len(prediction) == len(target)  # the end position
        total += len(target) + 1
    return correct / total


def accuracy_by_length(predictions, targets, lengths) -> dict[int, float]:
    """Exact match grouped by source length: ``{length: exact match of that group}``.

    This is the curve that shows a fixed-size context vector breaking on long inputs.

    Shapes:
        predictions, targets: N sequences each (see the module docstring).
        lengths: N ints, the source length of each example (a list, or a 1-D tensor
            such as ``batch.src_lengths``).

    Returns:
        A dict from source length to exact match, with keys in increasing order.

    Raises:
        ValueError: if the three have different numbers of items, or none.

    Example:
        >>> accuracy_by_length([[1], [2], [3]], [[1], [0], [3]], [4, 4, 9])
        {4: 0.5, 9: 1.0}
    """
    pairs = _pairs(predictions, targets)
    lengths = _as_list(lengths, "lengths")
    if len(lengths) != len(pairs):
        raise ValueError(
            f"lengths has {len(lengths)} items but predictions and targets have "
            f"{len(pairs)}; give one source length per example"
        )
    groups: dict[int, list[bool]] = {}
    for (prediction, target), length in zip(pairs, lengths):
        groups.setdefault(int(length), []).append(prediction == target)
    return {length: sum(groups[length]) / len(groups[length]) for length in sorted(groups)}


def _pairs(predictions, targets) -> list[tuple[list, list]]:
    """Check the two collections and return them as a list of (prediction, target) lists."""
    predictions = _as_list(predictions, "predictions")
    targets = _as_list(targets, "targets")
    if len(predictions) != len(targets):
        raise ValueError(
            f"predictions has {len(predictions)} sequences but targets has {len(targets)}; "
            "give one prediction per target"
        )
    if not predictions:
        raise ValueError("predictions and targets are empty (length 0); need at least one pair")
    return [
        (_as_list(p, f"predictions[{i}]"), _as_list(t, f"targets[{i}]"))
        for i, (p, t) in enumerate(zip(predictions, targets))
    ]


def _as_list(sequence, name: str) -> list:
    """Turn a list, tuple, string, 1-D tensor or array into a list (tensors via ``.tolist()``)."""
    if isinstance(sequence, (torch.Tensor, np.ndarray)):
        if sequence.ndim == 0:
            raise ValueError(f"{name} is a single number ({sequence.item()!r}), not a sequence")
        return list(sequence) if sequence.ndim > 1 else sequence.tolist()
    if isinstance(sequence, (str, Sequence)):
        return list(sequence)
    raise ValueError(f"{name} must be a sequence (list, string or 1-D tensor), got {sequence!r}")
