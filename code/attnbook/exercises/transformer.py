"""Chapter 6 (the Transformer): the checkers of its code exercises.

- :func:`check_positional_encoding`: the sinusoidal positional encodings of Vaswani et al. §3.5.
- :func:`check_causal_mask`: the decoder's look-ahead mask.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The references are :func:`attnbook.transformer.sinusoidal_positions` and :func:`attnbook.transformer.causal_mask`.
"""

import numpy as np
import torch

from attnbook.exercises._checking import Case, as_tensor, checker, close, compare
from attnbook.transformer import causal_mask, sinusoidal_positions

__all__ = ["check_positional_encoding", "check_causal_mask"]


# ============================================================ positional encoding


def _positional_cases() -> list[Case]:
    sizes = ((10, 8), (1, 4), (50, 16), (7, 64), (3, 2))  # one position; the smallest width; a wide one
    return [
        Case(
            f"length={length}, d_model={d_model}",
            args=(length, d_model),
            arg_names=("length", "d_model"),
            expected=sinusoidal_positions(length, d_model),
        )
        for length, d_model in sizes
    ]


def _angles(
    length: int, d_model: int, base: float = 10000.0, exponent: str = "pair", first: int = 0, times: bool = False
) -> torch.Tensor:
    """``pos / base^(...)`` for every feature ``j``: ``(length, d_model)``; the exponent
    as the paper (``2i/d`` for the pair ``i = j // 2``) or as a common mistake:
    ``"feature"`` (``j/d``), ``"2j"`` (``2j/d``), ``"4i"`` (``2·2i/d``) or ``"i"``
    (``i/d``). ``times``: ``pos · base^(...)`` instead of the division."""
    position = torch.arange(first, first + length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    j = torch.arange(d_model, dtype=torch.float64)
    top = {"pair": 2 * (j // 2), "feature": j, "2j": 2 * j, "4i": 4 * (j // 2), "i": j // 2}[exponent]
    power = top / d_model
    return position * base**power if times else position / base**power  # (L, d)


def _interleaved(angles: torch.Tensor, even=torch.sin, odd=torch.cos) -> torch.Tensor:
    out = odd(angles)
    out[:, 0::2] = even(angles[:, 0::2])
    return out


def _rotated_in_place(length: int, d_model: int, sine_first: bool) -> torch.Tensor:
    """The exercise's recurrence with one slip: each row's second value is computed from the
    first one's *new* value (a loop that updates the sines, or the cosines, in place)."""
    omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    cos, sin = torch.cos(omega), torch.sin(omega)
    s, c = torch.zeros_like(omega), torch.ones_like(omega)  # PE(0): sin 0 and cos 0
    out = torch.empty(length, d_model, dtype=torch.float64)
    for pos in range(length):
        out[pos, 0::2], out[pos, 1::2] = s, c
        if sine_first:
            s = s * cos + c * sin
            c = c * cos - s * sin  # the new s
        else:
            c = c * cos - s * sin
            s = s * cos + c * sin  # the new c
    return out


def _positional_mistakes(length: int, d_model: int) -> list[tuple[torch.Tensor, str]]:
    half = _angles(length, d_model)[:, 0::2]  # (L, d/2): one angle per pair
    return [
        (_interleaved(_angles(length, d_model, base=1000.0)), "the base is 10000, not 1000: pos / 10000^(2i/d_model)"),
        (
            _interleaved(_angles(length, d_model), torch.cos, torch.sin),
            "sin and cos are swapped: sin goes on the even features (0, 2, ...), cos on the odd ones",
        ),
        (
            _interleaved(_angles(length, d_model, exponent="feature")),
            "features 2i and 2i+1 share one frequency: the exponent is 2i/d_model with i = j // 2 for feature j, "
            "not j/d_model",
        ),
        (
            torch.cat([torch.sin(half), torch.cos(half)], dim=1),
            "this is the [all sines | all cosines] layout; the exercise (and the paper) interleave them: sin on "
            "even features, cos on odd ones",
        ),
        (
            _interleaved(_angles(length, d_model, exponent="2j")),
            "the exponent is 2i/d_model where 2i is the even feature of the pair "
            "(i = j // 2 for feature j): features 2i and 2i+1 share one angle; "
            "2j/d_model, with j the feature index, gives each feature its own",
        ),
        (
            _interleaved(_angles(length, d_model, exponent="4i")),
            "torch.arange(0, d_model, 2) already counts 2i (0, 2, 4, ...): the exponent "
            "is arange(0, d_model, 2) / d_model, without another factor 2",
        ),
        (
            _interleaved(_angles(length, d_model, exponent="i")),
            "the exponent is 2i/d_model, not i/d_model: pair i uses 10000^(2i/d_model), "
            "that is torch.arange(0, d_model, 2) / d_model",
        ),
        (
            _interleaved(_angles(length, d_model, times=True)),
            "divide the position by 10000^(2i/d_model) (or multiply it by "
            "10000^(-2i/d_model)); multiplying by 10000^(2i/d_model) makes the later "
            "features turn faster instead of slower",
        ),
        (
            _interleaved(_angles(length, d_model), even=lambda angle: -torch.sin(angle)),
            "the sines have the wrong sign: your rows rotate backwards, by -w_i a step; rotating forwards, "
            "sin(a + w) = sin a cos w + cos a sin w and cos(a + w) = cos a cos w - sin a sin w",
        ),
        (_interleaved(_angles(length, d_model, first=1)), "positions count from 0: the first row is position 0"),
        (
            _rotated_in_place(length, d_model, sine_first=True),
            "compute both new values from the previous row: your cosine used the already-updated sine "
            "(keep the old sine, or assign both at once: s, c = s * cos_w + c * sin_w, c * cos_w - s * sin_w)",
        ),
        (
            _rotated_in_place(length, d_model, sine_first=False),
            "compute both new values from the previous row: your sine used the already-updated cosine "
            "(keep the old cosine, or assign both at once: s, c = s * cos_w + c * sin_w, c * cos_w - s * sin_w)",
        ),
        (
            _interleaved(_angles(length, d_model).T.contiguous()).T if length == d_model else None,
            "rows are positions and columns features",
        ),
    ]


#: Floating-point types too coarse for the checker's tolerance of 1e-4.
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _compare_positional(got, case: Case) -> str | None:
    got = as_tensor(got)  # a NumPy answer is as good as a tensor
    problem = compare(got, case.expected, "the output", atol=1e-4)
    if problem is None or not isinstance(got, torch.Tensor):
        return problem
    length, d_model = case.args
    if tuple(got.shape) == (d_model, length) and length != d_model:
        return f"{problem}\nhint: the shape is (length, d_model): one row per position, one column per feature"
    low = got.dtype in _LOW_PRECISION
    atol = 1e-2 if low else 1e-4  # half precision keeps about 3 digits
    for wrong, hint in _positional_mistakes(length, d_model):
        fits = wrong is not None and got.shape == wrong.shape
        if fits and close(got.detach().double(), wrong, atol=atol):
            return f"{problem}\nhint: {hint}"
    if low:
        dtype = str(got.dtype).removeprefix("torch.")
        return (
            f"{problem}\nhint: the output is {dtype}, which keeps only about 3 "
            "significant digits: too few here; compute and return float32 (torch's "
            "default) or float64"
        )
    return problem


@checker("positional encoding", _positional_cases, _compare_positional, summary="lengths 1 to 50, d_model 2 to 64")
def check_positional_encoding(fn) -> bool:
    """Check ``fn(length, d_model) -> pe`` with ``pe[pos, 2i] = sin(pos / 10000^(2i/d_model))`` and
    ``pe[pos, 2i+1] = cos(pos / 10000^(2i/d_model))``, positions from 0 (Vaswani et al. §3.5).

    A tensor or a NumPy array of floats (float32 or float64: float16 is too coarse for
    the checker's tolerance of 1e-4); ``d_model`` is even.

    Shapes:
        pe: ``(length, d_model)``.

    Returns True if every case passed.
    """


# ============================================================ causal mask


def _causal_cases() -> list[Case]:
    return [Case(f"size={size}", args=(size,), arg_names=("size",), expected=causal_mask(size)) for size in (4, 1, 7)]


def _compare_causal(got, case: Case) -> str | None:
    problem = compare(got, case.expected, "the mask")
    if problem is not None and isinstance(got, np.ndarray):
        right = got.dtype == bool and np.array_equal(got, case.expected.numpy())
        return (
            f"{problem}\nhint: {'its values are right, but ' if right else ''}the course's masks are torch "
            "tensors: convert it with torch.from_numpy(...), or build it with torch.arange"
        )
    if problem is None or not isinstance(got, torch.Tensor) or got.shape != case.expected.shape:
        return problem
    if got.dtype != torch.bool:
        return (
            f"{problem}\nhint: return a bool tensor, True = may attend (PyTorch's float masks hold 0 and -inf "
            "and are added to the scores; this course's masks are bool)"
        )
    (size,) = case.args
    ones = torch.ones(size, size, dtype=torch.bool)
    mistakes = [
        (
            ones.triu(1),
            "True must mean *may attend*: you marked the future, the positions a query must not see "
            "(the opposite polarity, as nn.MultiheadAttention's masks); mark the allowed keys instead, s <= t",
        ),
        (
            ones.triu(),
            "this is the upper triangle: row t (the query) must allow the columns s <= t (the keys), "
            "the lower triangle",
        ),
        (ones.tril(-1), "a position may attend to itself: the rule is s <= t, not s < t (keep the diagonal)"),
        (
            ones.tril(1),
            "this also lets each position see the next one (s <= t + 1): the rule is s <= t, "
            "key position s at most query position t",
        ),
        (
            ones,
            "every entry is True, so nothing is hidden: position t must not see the "
            "positions after it: keep only s <= t, the lower triangle",
        ),
        (
            ~ones,
            "every entry is False, so no position may attend to anything: True "
            "must mark the allowed positions s <= t (compare two aranges: the query "
            "positions t as a column, the key positions s as a row)",
        ),
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
