"""Attention weights: the typical masking mistakes and where a weight leaks."""

import torch

from attnbook.attention import masked_softmax
from attnbook.exercises._calling import Case
from attnbook.exercises._comparing import compare

#: A weight above this at a masked position counts as "not masked".
LEAK = 1e-6


#: The typical masking mistakes, one catalogue for every checker of a masked softmax
#: (chapters 2-4): the ``masking=`` name of :func:`softmax_with` and its hint.
MASKING_HINTS = {
    "none": (
        "the mask was not applied: set the masked scores to -inf before the "
        "softmax, e.g. scores.masked_fill(~mask, float('-inf'))"
    ),
    "inverted": (
        "mask True means *may attend* (like torch's "
        "scaled_dot_product_attention): you left out the True positions "
        "instead of the False ones"
    ),
    "multiply": (
        "masked scores set to 0 (by scores * mask, or masked_fill with 0) "
        "still count: exp(0) still gets weight; set them to -inf instead "
        "(masked_fill)"
    ),
    "after": (
        "zeroing the masked weights after the softmax leaves rows that no longer "
        "sum to 1; mask the scores before the softmax"
    ),
}


#: The same as ``(keyword arguments, hint)`` entries for a checker's catalogue of mistakes
#: whose reference takes ``masking=``.
MASKING_MISTAKES = [(dict(masking=name), hint) for name, hint in MASKING_HINTS.items()]


#: A decoder step's masking mistakes, as ``(keyword arguments, the first item they change,
#: hint)`` for a step reference that takes ``masking=`` and ``softmax_dim=`` (chapters 2-3).
STEP_MASKING_MISTAKES = [
    (
        dict(masking="none"),
        "weights",
        "the padded source positions got weight: pass the mask to the softmax (masked positions exactly 0)",
    ),
    *[(dict(masking=name), "weights", MASKING_HINTS[name]) for name in ("inverted", "multiply", "after")],
    (
        dict(softmax_dim=0),
        "weights",
        "the softmax ran over the batch (dim=0); it must run over the S source positions of each row (dim=-1)",
    ),
]


def softmax_with(scores, mask, masking: str = "fill", dim: int = -1):
    """A masked softmax done right (``"fill"``) or with a typical mistake: ``"none"`` (mask ignored),
    ``"multiply"`` (scores times the mask), ``"after"`` (weights times the mask), ``"inverted"`` (~mask)."""
    if mask is None or masking == "none":
        return torch.softmax(scores, dim=dim)
    if masking == "multiply":
        return torch.softmax(scores * mask, dim=dim)
    if masking == "after":
        return torch.softmax(scores, dim=dim) * mask
    return masked_softmax(scores, ~mask if masking == "inverted" else mask, dim=dim)


def position(index: tuple) -> str:
    """'position 3 of row 1' for (1, 3); 'position 2 of row (0, 1)' for (0, 1, 2)."""
    row = index[:-1]
    return f"position {index[-1]} of row {row[0] if len(row) == 1 else row}"


def first_leak(weights: torch.Tensor, mask: torch.Tensor):
    """The first masked position with a non-zero weight: (index, value), or None."""
    leaks = (~mask) & (weights.abs() > LEAK)
    if not leaks.any():
        return None
    index = tuple(int(i) for i in leaks.nonzero()[0])
    return index, float(weights[index])


def first_problem(got: torch.Tensor, expected: torch.Tensor, mask: torch.Tensor, name: str) -> str:
    """The first line of a message about wrong weights: a masked position's weight, or the values."""
    leak = first_leak(got, mask)
    if leak:
        index, value = leak
        return f"{name}: {position(index)} is masked but got weight {value:.2g}"
    return compare(got, expected, name) or f"{name} differ from the expected ones"


def non_finite_problem(got: torch.Tensor, expected: torch.Tensor, case: Case, name: str) -> str | None:
    """A message for NaN or inf in ``got``, with a hint when the case explains it."""
    bad = ~torch.isfinite(got)
    if not bad.any():
        return None
    problem = compare(got, expected, name) or f"{name} contains NaN or inf"
    rows = {tuple(int(i) for i in index[:-1]) for index in bad.nonzero()}
    fully_masked = [row for row in case.info.get("fully_masked", []) if row in rows]
    if fully_masked:
        row = fully_masked[0]
        where = row[0] if len(row) == 1 else row
        hint = (
            f"row {where} has no position it may attend, so its softmax is 0 / 0 = NaN; return all "
            "zeros there, e.g. torch.nan_to_num(weights, nan=0.0) after the softmax, or fill masked "
            "scores with a large negative finite number and zero the masked weights afterwards"
        )
        return f"{problem}\nhint: {hint}"
    if case.info.get("large"):
        return (
            f"{problem}\nhint: exp(1000) overflows to inf and exp(-1000) underflows to 0, so the "
            "division gives inf / inf or 0 / 0 = NaN: subtract each row's maximum score before exp "
            "(torch.softmax does this for you)"
        )
    return problem


def weights_problem(got: torch.Tensor, expected: torch.Tensor, mask: torch.Tensor, case: Case, name: str) -> str | None:
    """Checks of any weights against the rules: masked -> 0, fully masked rows -> 0, rows sum to 1."""
    leak = first_leak(got, mask)
    if leak:
        index, value = leak
        row = index[:-1]
        if row in case.info.get("fully_masked", []):
            where = row[0] if len(row) == 1 else row
            total = float(got[row].sum())
            return (
                f"{name}: row {where} is fully masked but its weights sum to {total:.3g}; "
                f"they must all be 0\nhint: with a finite fill value such as -1e9 the softmax "
                "spreads the weight evenly over a fully masked row; set the masked weights to 0 "
                "after the softmax (e.g. weights.masked_fill(~mask, 0.0))"
            )
        return (
            f"{name}: {position(index)} is masked but got weight {value:.2g}\n"
            "hint: masked positions must get exactly 0 weight: set their scores to -inf "
            "before the softmax"
        )
    problem = compare(got, expected, name)
    if problem is None:
        return None
    sums = got.double().sum(dim=-1)  # (...,)
    allowed = mask.any(dim=-1)  # (...,) rows with something to attend
    off = allowed & ((sums - 1).abs() > 1e-3)
    if off.any():
        row = tuple(int(i) for i in off.nonzero()[0])
        where = row[0] if len(row) == 1 else row
        return f"{problem}\nhint: row {where} of the {name} sums to {float(sums[row]):.3g}; a softmax row sums to 1"
    return problem
