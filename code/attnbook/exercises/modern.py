"""Chapter 8 (today's decoder block): the checkers of its code exercises.

- :func:`check_apply_rope`: rotary positions, the RoFormer paper's interleaved pairs.
- :func:`check_rms_norm`: RMSNorm without its gain.
- :func:`check_expand_kv_heads`: the key/value heads repeated for grouped-query attention.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The references are in :mod:`attnbook.modern`.
"""

import torch

from attnbook.exercises._checking import Case, as_tensor, checker, close, compare
from attnbook.modern import apply_rope, apply_rope_halves, expand_kv_heads

__all__ = ["check_apply_rope", "check_rms_norm", "check_expand_kv_heads"]


def _hinted(got, case: Case, mistakes) -> str | None:
    """Compare with the reference; on a mismatch, name the first listed mistake ``got`` equals."""
    got = as_tensor(got)
    problem = compare(got, case.expected, "the output", atol=1e-4)
    if problem is None or not isinstance(got, torch.Tensor) or got.shape != case.expected.shape:
        return problem
    for wrong, hint in mistakes(case):
        if wrong is not None and wrong.shape == got.shape and close(got.detach().double(), wrong.double(), atol=1e-4):
            return f"{problem}\nhint: {hint}"
    return problem


# ============================================================ rotary positions


def _rope_cases() -> list[Case]:
    gen = torch.Generator().manual_seed(8)
    cases = []
    for shape, start in (((1, 4, 2), 0), ((2, 5, 8), 0), ((2, 3, 6, 16), 3), ((1, 1, 4), 7)):
        x = torch.randn(*shape, generator=gen)
        positions = torch.arange(start, start + shape[-2])
        cases.append(
            Case(
                f"x of shape {shape}, positions {positions.tolist()}",
                args=(x, positions),
                arg_names=("x", "positions"),
                expected=apply_rope(x, positions),
            )
        )
    return cases


def _rope_by_hand(x, positions, base=10000.0, sign=1.0, exponent="pair", shift=0):
    d = x.size(-1)
    i = torch.arange(0, d, 2, dtype=torch.float64)
    theta = base ** (-(i if exponent == "pair" else i / 2) / d)  # "i": base^(-i/d) with i counting pairs
    angles = (positions.double() + shift).unsqueeze(-1) * theta  # (T, d/2)
    cos, sin = angles.cos(), sign * angles.sin()
    even, odd = x[..., 0::2].double(), x[..., 1::2].double()
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def _rope_mistakes(case: Case):
    x, positions = case.args
    d = x.size(-1)
    order = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # all first members, then all second
    return [
        (
            _rope_by_hand(x, positions, sign=-1.0),
            "the rotation turns the wrong way: the new even feature is x_2i·cos − x_2i+1·sin, the odd one "
            "x_2i·sin + x_2i+1·cos",
        ),
        (
            apply_rope_halves(x, positions),
            "you paired feature i with feature i + d/2 (the 'rotate half' layout); the exercise pairs "
            "neighbours (2i, 2i+1), as the RoFormer paper",
        ),
        (
            apply_rope(x, positions)[..., order],
            "the pairs are rotated right but put back as [all first members | all second members]: "
            "interleave them (stack on a new last axis, then flatten) instead of concatenating",
        ),
        (_rope_by_hand(x, positions, base=1000.0), "the base is 10000: θ_i = 10000^(−2i/d)"),
        (
            _rope_by_hand(x, positions, exponent="i"),
            "the exponent is −2i/d for pair i (torch.arange(0, d, 2) / d), not −i/d",
        ),
        (_rope_by_hand(x, positions, shift=1), "positions count from the ones given: rotate by positions, not +1"),
        (x.double(), "nothing was rotated: every pair turns by the angle position · θ_i"),
    ]


@checker(
    "rotary positions",
    _rope_cases,
    lambda got, case: _hinted(got, case, _rope_mistakes),
    summary="d from 2 to 16, positions from 0 and from 3 and 7, extra leading axes",
)
def check_apply_rope(fn) -> bool:
    """Check ``fn(x, positions) -> rotated``: each pair of features ``(2i, 2i+1)`` of ``x`` at position ``p``
    turned by the angle ``p · 10000^(−2i/d)``: ``(a, b) -> (a cos − b sin, a sin + b cos)``.

    Shapes:
        x ``(..., T, d)`` float, ``d`` even; positions ``(T,)`` integers -> ``(..., T, d)``.

    Returns True if every case passed.
    """


# ============================================================ RMSNorm


def _rms_cases() -> list[Case]:
    gen = torch.Generator().manual_seed(8)
    cases = []
    for shape, shift in (((2, 6), 0.0), ((3, 4, 8), 3.0), ((1, 5), -2.0)):
        x = torch.randn(*shape, generator=gen) + shift  # a mean far from 0: LayerNorm would remove it
        expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        cases.append(Case(f"x of shape {shape}, mean about {shift:g}", args=(x,), arg_names=("x",), expected=expected))
    return cases


def _rms_mistakes(case: Case):
    (x,) = case.args
    x = x.double()
    return [
        (
            (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-6),
            "this is LayerNorm: RMSNorm does not subtract the mean, it divides by sqrt(mean(x²) + eps)",
        ),
        (x / torch.sqrt(x.mean(-1, keepdim=True).pow(2) + 1e-6), "the mean of the squares, not the square of the mean"),
        (
            x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6),
            "the mean of the squares (divide their sum by d), not their sum (x.norm() is the root of the sum)",
        ),
        (x / x.pow(2).mean(-1, keepdim=True), "divide by the square root of the mean of squares"),
        (x / torch.sqrt(x.pow(2).mean(0, keepdim=True) + 1e-6), "normalise over the features (the last axis)"),
    ]


@checker(
    "RMSNorm",
    _rms_cases,
    lambda got, case: _hinted(got, case, _rms_mistakes),
    summary="2 and 3 axes, inputs with means 0, 3 and -2",
)
def check_rms_norm(fn) -> bool:
    """Check ``fn(x) -> x / sqrt(mean(x²) + 1e-6)`` over the last axis (RMSNorm without its gain).

    Shapes:
        x ``(..., d)`` -> ``(..., d)``.

    Returns True if every case passed.
    """


# ============================================================ grouped-query heads


def _kv_cases() -> list[Case]:
    gen = torch.Generator().manual_seed(8)
    cases = []
    for shape, heads in (((1, 2, 3, 4), 4), ((2, 3, 5, 2), 6), ((2, 1, 4, 3), 4), ((1, 4, 2, 2), 4)):
        x = torch.randn(*shape, generator=gen)
        cases.append(
            Case(
                f"x of shape {shape} (G = {shape[1]}), num_heads={heads}",
                args=(x, heads),
                arg_names=("x", "num_heads"),
                expected=expand_kv_heads(x, heads),
            )
        )
    return cases


def _kv_mistakes(case: Case):
    x, heads = case.args
    groups = heads // x.size(1)
    return [
        (
            x.repeat(1, groups, 1, 1),
            "the heads come out in the order 0, 1, 0, 1, ...: query head h reads key/value head h // (H / G), so "
            "each key/value head repeats next to itself (repeat_interleave, not repeat)",
        ),
    ]


@checker(
    "key/value heads for grouped-query attention",
    _kv_cases,
    lambda got, case: _hinted(got, case, _kv_mistakes),
    summary="G = 1, 2, 3, 4 key/value heads for 4 or 6 query heads",
)
def check_expand_kv_heads(fn) -> bool:
    """Check ``fn(x, num_heads) -> expanded``: each of the ``G`` key/value heads repeated for the
    ``num_heads / G`` query heads of its group, query head ``h`` reading key/value head ``h // (num_heads / G)``.

    Shapes:
        x ``(B, G, T, d_head)`` -> ``(B, num_heads, T, d_head)``.

    Returns True if every case passed.
    """
