"""Chapter 6 (the Transformer): the checkers of its code exercises.

- :func:`check_positional_encoding`: the sinusoidal positional encodings of Vaswani et al. §3.5.
- :func:`check_causal_mask`: the decoder's look-ahead mask.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The references are :func:`attnbook.transformer.sinusoidal_positions` and :func:`attnbook.transformer.causal_mask`.
"""

import numpy as np
import torch

from attnbook.exercises._checking import Case, checker, close, compare
from attnbook.transformer import causal_mask, sinusoidal_positions

__all__ = ["check_positional_encoding", "check_causal_mask"]


# ============================================================ positional encoding


def _positional_cases() -> list[Case]:
    sizes = ((10, 8), (1, 4), (50, 16), (7, 64), (3, 2))  # one position; the smallest width; a wide one
    return [Case(f"length={length}, d_model={d_model}", args=(length, d_model), arg_names=("length", "d_model"),
                 expected=sinusoidal_positions(length, d_model)) for length, d_model in sizes]


def _angles(length: int, d_model: int, base: float = 10000.0, exponent: str = "pair", first: int = 0) -> torch.Tensor:
    """``pos / base^(...)`` for every feature ``j``: ``(length, d_model)``; the exponent as the paper (``2i/d`` for
    the pair ``i = j // 2``) or as a common mistake (``j/d``, one frequency per feature)."""
    position = torch.arange(first, first + length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    j = torch.arange(d_model, dtype=torch.float64)
    power = (2 * (j // 2) if exponent == "pair" else j) / d_model
    return position / base ** power  # (L, d)


def _interleaved(angles: torch.Tensor, even=torch.sin, odd=torch.cos) -> torch.Tensor:
    out = odd(angles)
    out[:, 0::2] = even(angles[:, 0::2])
    return out


def _positional_mistakes(length: int, d_model: int) -> list[tuple[torch.Tensor, str]]:
    half = _angles(length, d_model)[:, 0::2]  # (L, d/2): one angle per pair
    return [
        (_interleaved(_angles(length, d_model, base=1000.0)), "the base is 10000, not 1000: pos / 10000^(2i/d_model)"),
        (_interleaved(_angles(length, d_model), torch.cos, torch.sin),
         "sin and cos are swapped: sin goes on the even features (0, 2, ...), cos on the odd ones"),
        (_interleaved(_angles(length, d_model, exponent="feature")),
         "features 2i and 2i+1 share one frequency: the exponent is 2i/d_model with i = j // 2 for feature j, "
         "not j/d_model"),
        (torch.cat([torch.sin(half), torch.cos(half)], dim=1),
         "this is the [all sines | all cosines] layout; the exercise (and the paper) interleave them: sin on "
         "even features, cos on odd ones"),
        (_interleaved(_angles(length, d_model, first=1)), "positions count from 0: the first row is position 0"),
        (_interleaved(_angles(length, d_model).T.contiguous()).T if length == d_model else None,
         "rows are positions and columns features"),
    ]


def _compare_positional(got, case: Case) -> str | None:
    if isinstance(got, np.ndarray):
        got = torch.from_numpy(got)  # a NumPy answer is as good as a tensor
    problem = compare(got, case.expected, "the output", atol=1e-4)
    if problem is None or not isinstance(got, torch.Tensor):
        return problem
    length, d_model = case.args
    if tuple(got.shape) == (d_model, length) and length != d_model:
        return f"{problem}\nhint: the shape is (length, d_model): one row per position, one column per feature"
    for wrong, hint in _positional_mistakes(length, d_model):
        if wrong is not None and got.shape == wrong.shape and close(got.detach().double(), wrong, atol=1e-4):
            return f"{problem}\nhint: {hint}"
    return problem


@checker("positional encoding", _positional_cases, _compare_positional,
         summary="lengths 1 to 50, d_model 2 to 64")
def check_positional_encoding(fn) -> bool:
    """Check ``fn(length, d_model) -> pe`` with ``pe[pos, 2i] = sin(pos / 10000^(2i/d_model))`` and
    ``pe[pos, 2i+1] = cos(pos / 10000^(2i/d_model))``, positions from 0 (Vaswani et al. §3.5).

    A tensor or a NumPy array of floats; ``d_model`` is even.

    Shapes:
        pe: ``(length, d_model)``.

    Returns True if every case passed.
    """


# ============================================================ causal mask


def _causal_cases() -> list[Case]:
    return [Case(f"size={size}", args=(size,), arg_names=("size",), expected=causal_mask(size)) for size in (4, 1, 7)]


def _compare_causal(got, case: Case) -> str | None:
    problem = compare(got, case.expected, "the mask")
    if problem is None or not isinstance(got, torch.Tensor) or got.shape != case.expected.shape:
        return problem
    if got.dtype != torch.bool:
        return (f"{problem}\nhint: return a bool tensor, True = may attend (PyTorch's float masks hold 0 and -inf "
                "and are added to the scores; this course's masks are bool)")
    (size,) = case.args
    ones = torch.ones(size, size, dtype=torch.bool)
    mistakes = [
        (ones.triu(1), "True must mean *may attend*: you marked the future, the positions a query must not see "
                       "(the opposite polarity, as nn.MultiheadAttention's masks); use torch.tril"),
        (ones.triu(), "this is the upper triangle: row t (the query) must allow columns 0 .. t (the keys), the "
                      "lower triangle"),
        (ones.tril(-1), "a position may attend to itself: keep the diagonal (torch.tril with diagonal=0)"),
    ]
    for wrong, hint in mistakes:
        if torch.equal(got, wrong):
            return f"{problem}\nhint: {hint}"
    return problem


@checker("causal mask", _causal_cases, _compare_causal, summary="sizes 1, 4 and 7")
def check_causal_mask(fn) -> bool:
    """Check ``fn(size) -> mask``, the decoder's causal mask: ``mask[t, s]`` is True when query position ``t``
    may attend to key position ``s``, that is for ``s <= t``.

    Shapes:
        mask: ``(size, size)`` bool.

    Returns True if every case passed.
    """
