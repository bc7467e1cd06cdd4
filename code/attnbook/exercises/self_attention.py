"""Chapter 4 (self-attention): the checkers of its code exercises.

- :func:`check_window_average`: every position's average of itself and the positions just before it.
- :func:`check_scaled_dot_product_attention`: ``softmax(Q Kᵀ / √d_k) V`` with a mask.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The reference is :func:`attnbook.attention.scaled_dot_product_attention`.
"""

import math

import torch

from attnbook.attention import masked_softmax, scaled_dot_product_attention
from attnbook.exercises._checking import (
    MASKING_HINTS,
    MASKING_MISTAKES,
    Case,
    checker,
    close,
    compare,
    describe,
    first_problem,
    non_finite_problem,
    softmax_with,
    weights_problem,
)

__all__ = ["check_window_average", "check_scaled_dot_product_attention"]


# ============================================================ chapter 4: averaging a window of the past


def _band(length: int, width: int) -> torch.Tensor:
    """``(T, T)``: ones in row t at columns t - width + 1 .. t (clipped at 0), zeros elsewhere."""
    ones = torch.ones(length, length)
    return torch.tril(ones) - torch.tril(ones, diagonal=-width)


def _window_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(41)
    cases = []
    for batch, length, d, window in ((2, 6, 3, 2), (1, 5, 4, 1), (3, 7, 2, 3), (2, 4, 5, 10)):
        x = torch.randn(batch, length, d, generator=generator)
        band = _band(length, window)
        expected = band / band.sum(dim=1, keepdim=True) @ x  # (T, T) @ (B, T, d) -> (B, T, d)
        cases.append(
            Case(
                f"x {describe(x)} (B={batch}, T={length}, d={d}), window={window}",
                args=(x, window),
                arg_names=("x", "window"),
                expected=expected,
            )
        )
    return cases


def _averaged(band: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Each row of ``band`` divided by its sum (0 / 0 = NaN if empty), times x."""
    return band / band.sum(dim=1, keepdim=True) @ x


def _window_slips(x: torch.Tensor, window: int) -> list[tuple[torch.Tensor, str]]:
    """(wrong output, hint) for the slips in the band's edges and in the division."""
    length = x.size(1)
    band, ones = _band(length, window), torch.ones(length, length)
    before_t = torch.tril(ones, diagonal=-1)  # (T, T): row t holds 0 .. t-1
    without_t = [before_t - torch.tril(ones, diagonal=-w) for w in (window, window + 1)]
    without_t_hint = (
        "the window includes position t itself: average "
        "x[t - window + 1], ..., x[t] (keep the diagonal: "
        "torch.tril(ones), not diagonal=-1)"
    )
    slips = [(_averaged(b, x), without_t_hint) for b in without_t]
    slips += [(torch.nan_to_num(_averaged(b, x)), without_t_hint) for b in without_t]
    if window > 1:
        slips.append(
            (
                _averaged(_band(length, window - 1), x),
                "one position too few: the window of t is t - window + 1 .. t, `window` positions including t",
            )
        )
    slips += [
        (
            band / band.sum(dim=0, keepdim=True) @ x,
            "each row must be divided by its own sum, band.sum(dim=1, keepdim=True); you "
            "divided by the column sums (dim=0)",
        ),
        (
            band / band.sum(dim=1) @ x,
            "band.sum(dim=1) has shape (T,), which divides column j by the sum of row j: "
            "keep the dimension, band.sum(dim=1, keepdim=True), so each row is divided by "
            "its own sum",
        ),
    ]
    return slips


def _compare_window(got, case: Case) -> str | None:
    problem = compare(got, case.expected, "the output")
    if problem is None or not isinstance(got, torch.Tensor) or got.shape != case.expected.shape:
        return problem
    x, window = case.args
    length = x.size(1)
    band, past = _band(length, window), _band(length, length)
    mistakes = [
        (
            band / window @ x,
            "near the start a window has fewer than `window` positions: divide each row by the "
            "number of positions it really covers (its sum), not by `window`",
        ),
        (band @ x, "these are sums, not averages: divide each row of the band by its sum"),
        (
            past / past.sum(dim=1, keepdim=True) @ x,
            "this is the average of the whole past: keep only the last `window` positions (t - window + 1 .. t)",
        ),
        (
            _band(length, window + 1) / _band(length, window + 1).sum(dim=1, keepdim=True) @ x,
            "one position too many: the window of t is t - window + 1 .. t, `window` positions including t",
        ),
        (
            band.T / band.T.sum(dim=1, keepdim=True) @ x,
            "the band points forward: position t averaged t .. t + window - 1; the window must end at t",
        ),
        *_window_slips(x, window),
    ]
    for wrong, hint in mistakes:
        if close(got.detach(), wrong):
            return f"{problem}\nhint: {hint}"
    return problem


def _window_error_hint(problem: str, case: Case) -> str:
    """A hint for ``x @ band``: the (T, T) matrix on the wrong side of the product."""
    x, _ = case.args
    batch, length, d = x.shape
    # x @ band folds x to (B*T, d) and meets the (T, T) band: "(12x3 and 6x6)"
    if f"({batch * length}x{d} and {length}x{length})" in problem:
        return (
            "the (T, T) matrix goes on the left: band @ x ((T, T) @ (B, T, d) -> (B, T, d)) "
            "averages over the positions; x @ band would mix each position's d features"
        )
    return ""


@checker(
    "window average",
    _window_cases,
    _compare_window,
    error_hint=_window_error_hint,
    summary="windows of 1 to 3 and one longer than the sequence; batches of 1 to 3; 2 to 5 features",
)
def check_window_average(fn) -> bool:
    """Check ``fn(x, window) -> out``, where ``out[b, t]`` is the mean of ``x[b, t - window + 1], ..., x[b, t]``.

    Each position averages itself and the ``window - 1`` positions before it; near the start, where
    fewer positions exist, it averages those that do (``window=1`` returns ``x``; a window longer than
    the sequence averages the whole past). Use one ``(T, T)`` matrix and one matrix product, no loop.

    The checker compares the result only; it cannot see whether you used one matrix
    product and no loop, so that part is up to you.

    Shapes:
        x: ``(B, T, d)`` float; window: int >= 1. out: ``(B, T, d)``.

    Returns True if every case passed.
    """


# ============================================================ chapter 4: scaled dot-product attention


def _sdpa_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(42)

    def randn(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=generator)

    specs = [  # (q shape, L_k, d_v, mask, description of the mask, scale of the inputs)
        ((2, 3, 4), 5, 6, None, "mask=None", 1.0),
        ((2, 4, 8), 4, 3, torch.ones(4, 4, dtype=torch.bool).tril(), "a causal (T, T) mask shared by the batch", 1.0),
        (
            (2, 2, 3, 8),
            6,
            5,
            torch.arange(6) < torch.tensor([6, 2]).view(2, 1, 1, 1),
            "heads (B, H, L_q, d_k); a padding mask (B, 1, 1, L_k) with 6 and 2 keys to attend",
            1.0,
        ),
        ((1, 3, 64), 4, 2, None, "d_k=64 with scores far from 0 (where the 1/√d_k matters)", 2.0),
        (
            (2, 3, 4),
            5,
            4,
            torch.tensor([[True] * 5, [False] * 5, [True, True, False, False, False]]).expand(2, 3, 5),
            "a (B, L_q, L_k) mask whose row 1 is fully masked",
            1.0,
        ),
    ]
    cases = []
    for q_shape, length, d_v, mask, mask_text, scale in specs:
        q = randn(*q_shape, scale=scale)
        k = randn(*q_shape[:-2], length, q_shape[-1], scale=scale)
        v = randn(*q_shape[:-2], length, d_v)
        full = (
            torch.ones(*q_shape[:-1], length, dtype=torch.bool) if mask is None else mask.expand(*q_shape[:-1], length)
        )
        fully_masked = [tuple(int(i) for i in row) for row in (~full.any(-1)).nonzero()]
        description = (
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} (L_q={q_shape[-2]}, L_k={length}, "
            f"d_k={q_shape[-1]}, d_v={d_v}); {mask_text}"
        )
        cases.append(
            Case(
                description,
                args=(q, k, v),
                kwargs={"mask": mask},
                arg_names=("q", "k", "v"),
                expected=scaled_dot_product_attention(q, k, v, mask),
                info={"full_mask": full, "fully_masked": fully_masked},
            )
        )
    return cases


def _sdpa_variant(q, k, v, mask, scale="sqrt", softmax_dim=-1, masking="fill", after=False):
    """Scaled dot-product attention with one typical mistake (the keyword arguments);
    ``after=True`` divides the weights by √d_k after the softmax instead of the scores."""
    divisor = {
        "sqrt": math.sqrt(q.size(-1)),
        "none": 1.0,
        "d_k": q.size(-1),
        "d_v": math.sqrt(v.size(-1)),
        "times": 1 / math.sqrt(q.size(-1)),
        "L_k": math.sqrt(k.size(-2)),
        "size(1)": math.sqrt(q.size(1)),
    }[scale]
    scores = q @ k.transpose(-2, -1) / divisor
    weights = softmax_with(scores, mask, masking, dim=softmax_dim)
    if after:
        weights = weights / math.sqrt(q.size(-1))
    return weights @ v, weights


_SDPA_MISTAKES = [  # (keyword arguments of _sdpa_variant, hint), most telling first
    (dict(scale="none"), "the scores were not scaled: divide q @ kᵀ by √d_k (math.sqrt(q.size(-1)))"),
    (dict(scale="d_k"), "the scores were divided by d_k; the scale is √d_k"),
    (dict(scale="d_v"), "the scale uses the size of the values; it is √d_k, the size of the queries and keys"),
    (dict(scale="times"), "the scores were multiplied by √d_k; divide them by it"),
    (
        dict(scale="none", after=True),
        "did you scale after the softmax? softmax(q @ kᵀ) / √d_k shrinks the weights, so a row no "
        "longer sums to 1; divide the scores before the softmax: softmax(q @ kᵀ / √d_k)",
    ),
    (dict(scale="L_k"), "the scale uses the number of keys L_k; it is √d_k, the last size of q and k"),
    (
        dict(scale="size(1)"),
        "q.size(1) is not d_k: it is L_q for q of shape "
        "(B, L_q, d_k) and the number of heads for "
        "(B, H, L_q, d_k); d_k is the last size, q.size(-1)",
    ),
    *(mistake for mistake in MASKING_MISTAKES if mistake[0]["masking"] != "multiply"),
    (
        dict(softmax_dim=-2),
        "the softmax ran over the queries (dim=-2); each query's weights over the keys must "
        "sum to 1: softmax over the last dimension",
    ),
]


def _flipped_polarity(weights: torch.Tensor, case: Case) -> bool:
    """Whether ``weights`` follow the mask with its polarity flipped, whatever the fill value.

    Where the flipped mask leaves something to attend, such weights equal the softmax over the
    positions the mask forbids. A row the true mask leaves whole has nothing left once flipped:
    a finite fill (``masked_fill(mask, -1e9)``) spreads its weight evenly, ``-inf`` with a
    clean-up gives zeros; either way that row is not compared.
    """
    mask = case.kwargs["mask"]
    if mask is None:
        return False
    q, k, _ = case.args
    full = case.info["full_mask"]  # (..., L_q, L_k): the mask broadcast to the scores
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    flipped = masked_softmax(scores, ~full)
    rows = (~full).any(dim=-1)  # (..., L_q): rows the flipped mask leaves something in
    return bool(rows.any()) and close(weights[rows], flipped[rows])


def _sdpa_error_hint(problem: str, case: Case) -> str:
    if "Boolean value of Tensor" in problem and "ambiguous" in problem:
        return (
            "`if mask:` asks a tensor of many values for one True or False; mask may be "
            "None, which means no masking: apply it only `if mask is not None`"
        )
    return ""


def _compare_sdpa(got, case: Case) -> str | None:
    expected_out, expected_weights = case.expected
    problem = compare(got, case.expected, "the output", item_names=("out", "weights"))
    if problem is None:
        return None
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and all(isinstance(x, torch.Tensor) for x in got)):
        return problem
    out, weights = got[0].detach(), got[1].detach()
    if out.shape == expected_weights.shape and weights.shape == expected_out.shape != expected_weights.shape:
        return f"{problem}\nhint: return them in the order (out, weights)"
    if weights.shape != expected_weights.shape:
        return problem
    full = case.info["full_mask"]
    found = non_finite_problem(weights, expected_weights, case, "weights")
    if found:
        if "\nhint:" in found and case.info["fully_masked"]:
            found += "; then compute out from the cleaned weights"
        return found
    for mistake, hint in _SDPA_MISTAKES:
        try:
            _, wrong_weights = _sdpa_variant(*case.args, case.kwargs["mask"], **mistake)
        except (RuntimeError, ValueError):  # this mistake does not even fit this case's shapes
            continue
        if close(weights, wrong_weights) and not close(weights, expected_weights):
            return first_problem(weights, expected_weights, full, "weights") + f"\nhint: {hint}"
    if _flipped_polarity(weights, case) and not close(weights, expected_weights):
        hint = MASKING_HINTS["inverted"]
        return first_problem(weights, expected_weights, full, "weights") + f"\nhint: {hint}"
    found = weights_problem(weights, expected_weights, full, case, "weights")
    if found:
        return found
    problem = compare(out, expected_out, "out")
    if problem and out.shape == expected_out.shape and not torch.isfinite(out).all():
        return (
            f"{problem}\nhint: the weights are right but out is not: compute out = "
            "weights @ v from the cleaned weights (after the NaN of a fully masked "
            "row became 0), not from the weights before the clean-up"
        )
    hint = "the weights are right; the output is their weighted sum of the values, weights @ v"
    return problem and f"{problem}\nhint: {hint}"


@checker(
    "scaled dot-product attention",
    _sdpa_cases,
    _compare_sdpa,
    error_hint=_sdpa_error_hint,
    shape_hint="q (..., L_q, d_k), k (..., L_k, d_k), v (..., L_k, d_v): the scores are q @ k.transpose(-2, -1), "
    "(..., L_q, L_k); the output is weights @ v, (..., L_q, d_v)",
    summary="3-D and 4-D inputs, L_q != L_k, d_v != d_k, no mask, causal and padding masks, a fully masked row, d_k=64",
)
def check_scaled_dot_product_attention(fn) -> bool:
    """Check ``fn(q, k, v, mask=None) -> (out, weights)``, scaled dot-product attention.

    The weights are ``softmax(q kᵀ / √d_k)`` over the keys (the last dimension), with
    ``d_k = q.size(-1)``; ``out = weights @ v``. ``mask`` is None or a bool tensor that broadcasts to
    the scores, ``True`` = may attend (the polarity of ``torch.nn.functional.scaled_dot_product_attention``).
    A masked position gets exactly 0 weight, the others of its row share all the weight, and a row with
    nothing to attend gets all zeros (not NaN). Any leading dimensions (batch, heads) are kept.

    Shapes:
        q ``(..., L_q, d_k)``, k ``(..., L_k, d_k)``, v ``(..., L_k, d_v)``, mask broadcastable to
        ``(..., L_q, L_k)``; out ``(..., L_q, d_v)``, weights ``(..., L_q, L_k)``.

    Returns True if every case passed.
    """
