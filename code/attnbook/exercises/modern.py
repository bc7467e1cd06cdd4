"""Chapter 8 (today's decoder block): the checkers of its code exercises.

- :func:`check_apply_rope`: rotary positions, the RoFormer paper's interleaved pairs.
- :func:`check_rms_norm`: RMSNorm without its gain.
- :func:`check_expand_kv_heads`: the key/value heads repeated for grouped-query attention.
- :func:`check_grouped_attention`: grouped-query attention without copying the shared key/value heads.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The references are in :mod:`attnbook.modern`.
"""

import functools
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from attnbook.attention import scaled_dot_product_attention
from attnbook.exercises._checking import (
    VIEW_HINT,
    Case,
    as_tensor,
    checker,
    close,
    compare,
    is_shape_error,
    is_view_error,
    run_checks,
)
from attnbook.modern import apply_rope, apply_rope_halves, expand_kv_heads

__all__ = ["check_apply_rope", "check_rms_norm", "check_expand_kv_heads", "check_grouped_attention"]


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
                info={
                    "in_place_advice": "build a new tensor (e.g. torch.stack of the two rotated halves, or start "
                    "from x.clone())"
                },
            )
        )
    return cases


def _rope_by_hand(x, positions, base=10000.0, sign=1.0, exponent="pair", shift=0):
    d = x.size(-1)
    i = torch.arange(0, d, 2, dtype=torch.float64)  # 2i: 0, 2, 4, ...
    # "i": base^(-i/d) with i counting pairs; "4i": the 2 of 2i counted twice, base^(-2 · 2i/d)
    theta = base ** (-{"pair": 1.0, "i": 0.5, "4i": 2.0}[exponent] * i / d)
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
            "neighbours (2i, 2i+1), as the RoFormer paper does",
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
        (
            _rope_by_hand(x, positions, exponent="4i"),
            "torch.arange(0, d, 2) already counts 2i; don't multiply by 2 again: "
            "θ_i = 10000^(−torch.arange(0, d, 2) / d)",
        ),
        (_rope_by_hand(x, positions, shift=1), "positions count from the ones given: rotate by positions, not +1"),
        (
            _rope_by_hand(x, torch.arange(positions.numel())),
            "the rows were turned as positions 0, 1, ..., T − 1: use the positions given (here they start at "
            f"{int(positions[0])}), not torch.arange(T)",
        ),
        (x.double(), "nothing was rotated: every pair turns by the angle position · θ_i"),
    ]


_ANGLE_HINT = "angle must be (T, d/2), one angle per position and pair: positions[:, None] * theta"


def _compare_rope(got, case: Case) -> str | None:
    problem = _hinted(got, case, _rope_mistakes)
    got, (x, _) = as_tensor(got), case.args
    T, d = x.shape[-2:]
    if problem and isinstance(got, torch.Tensor) and tuple(got.shape) == (*x.shape[:-1], T * d):
        return f"{problem}\nhint: {_ANGLE_HINT}"  # (T,) times (d/2,) broadcast to (T, T), then flattened
    return problem


def _rope_error_hint(problem: str, case: Case) -> str:
    return _ANGLE_HINT if is_shape_error(problem) and "must match the size of tensor" in problem else ""


@checker(
    "rotary positions",
    _rope_cases,
    _compare_rope,
    error_hint=_rope_error_hint,
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
    for shape, shift, scale, what in (
        ((2, 6), 0.0, 1.0, "mean about 0"),
        ((4, 4), 1.0, 1.0, "as many rows as features (T = d), mean about 1"),
        ((3, 4, 8), 3.0, 1.0, "mean about 3"),
        ((1, 5), -2.0, 1.0, "mean about -2"),
        ((2, 3, 8), 0.0, 1e-3, "values about 1e-3, so mean(x²) is about eps = 1e-6"),
    ):
        # a mean far from 0: LayerNorm would remove it; rows of size 1e-3: eps's place shows
        x = (torch.randn(*shape, generator=gen) + shift) * scale
        expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        cases.append(Case(f"x of shape {shape}, {what}", args=(x,), arg_names=("x",), expected=expected))
    return cases


_KEEPDIM_HINT = (
    "mean(dim=-1) without keepdim=True drops the last axis, so the means no longer line up with x's rows: "
    "keep it, mean(dim=-1, keepdim=True) of shape (..., 1), so that each row is divided by its own root mean "
    "square"
)


def _rms_mistakes(case: Case):
    (x,) = case.args
    x = x.double()
    square = x.dim() >= 2 and x.size(-1) == x.size(-2)  # without keepdim, (..., T) broadcasts as a row
    return [
        (
            (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-6),
            "this is LayerNorm: RMSNorm does not subtract the mean, it divides by sqrt(mean(x²) + eps)",
        ),
        *[
            (
                wrong,
                "do not subtract the mean: x.var and x.std measure the spread around the mean, RMSNorm divides by "
                "the root mean square around 0, sqrt(mean(x²) + eps)",
            )
            for correction in (0, 1)  # x.var() and x.std() default to 1
            for wrong in (
                x / torch.sqrt(x.var(-1, correction=correction, keepdim=True) + 1e-6),
                x / x.std(-1, correction=correction, keepdim=True),
                x / (x.std(-1, correction=correction, keepdim=True) + 1e-6),
            )
        ],
        (x / torch.sqrt(x.mean(-1, keepdim=True).pow(2) + 1e-6), "the mean of the squares, not the square of the mean"),
        (
            x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6),
            "the mean of the squares (divide their sum by d), not their sum (x.norm() is the root of the sum)",
        ),
        (x / x.pow(2).mean(-1, keepdim=True), "divide by the square root of the mean of squares"),
        *[
            (
                x / torch.sqrt(x.pow(2).mean(axis, keepdim=True) + 1e-6),
                f"the mean runs over axis {axis}: normalise over the features, the last axis (dim=-1)",
            )
            for axis in range(x.dim() - 1)  # every axis but the features
        ],
        (
            x / torch.sqrt(x.pow(2).mean(-1) + 1e-6) if square else None,
            _KEEPDIM_HINT
            + " (on a square x the shapes happen to fit, and column j was divided by row j's root mean square)",
        ),
        (
            x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + 1e-6),
            "eps goes inside the root: sqrt(mean(x²) + eps), not sqrt(mean(x²)) + eps. On rows as small as these, "
            "where mean(x²) is about eps itself, the two give visibly different results",
        ),
        (
            x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5),
            "eps is 1e-6 in this exercise (Llama 3's configuration uses 1e-5; the exercise does not)",
        ),
        (
            x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + torch.finfo(case.args[0].dtype).eps),
            "eps is 1e-6 here; torch.nn.RMSNorm and F.rms_norm without eps use the dtype's machine epsilon "
            "(about 1.2e-7 for float32): pass eps=1e-6",
        ),
        (
            x / torch.sqrt(x.pow(2).mean(-1, keepdim=True)),
            "add eps = 1e-6 inside the root, sqrt(mean(x²) + 1e-6): on rows as small as these, where mean(x²) is "
            "about eps itself, it changes the result",
        ),
    ]


def _rms_error_hint(problem: str, case: Case) -> str:
    broadcast = "must match the size of tensor" in problem  # two shapes that do not broadcast
    return _KEEPDIM_HINT if is_shape_error(problem) and broadcast else ""


@checker(
    "RMSNorm",
    _rms_cases,
    lambda got, case: _hinted(got, case, _rms_mistakes),
    error_hint=_rms_error_hint,
    summary="2 and 3 axes, a square input (T = d), means 0, 1, 3 and -2, rows so small that mean(x²) is about eps",
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


# ============================================================ grouped-query attention without copies


def _grouped_cases() -> list[Case]:
    gen = torch.Generator().manual_seed(8)
    cases = []
    for B, H, G, T, S, d in (  # H / G query heads per key/value head
        (1, 4, 2, 3, 5, 4),
        (2, 6, 3, 2, 4, 8),
        (2, 4, 1, 3, 3, 2),  # multi-query: one key/value head for all
        (1, 3, 3, 4, 2, 4),  # G = H: Chapter 5's heads
        (2, 8, 2, 1, 6, 16),  # one new query, as in a decoding step
        (2, 6, 3, 5, 7, 4),  # the copy check's cases: S and d differ from every other size
        (1, 9, 3, 2, 5, 7),  # H / G = 3: a copy of k alone (3 times k) is more than k and v together
    ):
        q, k, v = (torch.randn(B, n, L, d, generator=gen) for n, L in ((H, T), (G, S), (G, S)))
        k_h, v_h = expand_kv_heads(k, H), expand_kv_heads(v, H)  # (B, H, S, d): the copies the learner avoids
        cases.append(
            Case(
                f"q of shape {tuple(q.shape)}, k and v of shape {tuple(k.shape)} (B = {B}, H = {H}, G = {G}, "
                f"T = {T}, S = {S}, d = {d})",
                args=(q, k, v),
                arg_names=("q", "k", "v"),
                expected=scaled_dot_product_attention(q, k_h, v_h)[0],
                info=dict(B=B, H=H, G=G, T=T, S=S, d=d),
            )
        )
    return cases


def _grouped_by_hand(q, k, v, order="h // (H/G)", scale="sqrt", softmax_over="keys", merge="same", mask=False):
    """Grouped-query attention in float64 with the key/value heads copied, and one mistake (the keywords)."""
    (B, H, T, d), (G, S) = q.shape, k.shape[1:3]
    heads = torch.arange(H)
    kv_head = heads // (H // G) if order == "h // (H/G)" else heads % G
    q, k, v = q.double(), k.double()[:, kv_head], v.double()[:, kv_head]  # k, v (B, H, S, d)
    scores = q @ k.transpose(-2, -1) / {"sqrt": math.sqrt(d), "none": 1.0, "d": d}[scale]  # (B, H, T, S)
    if mask:
        scores = scores.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(), float("-inf"))
    if softmax_over == "group":  # the H / G query heads of a group
        weights = scores.view(B, G, H // G, T, S).softmax(dim=2).view(B, H, T, S)
    elif softmax_over == "group rows":  # dim -2 of q reshaped to (B, G, (H // G) * T, d)
        weights = scores.view(B, G, H // G * T, S).softmax(dim=-2).view(B, H, T, S)
    else:
        weights = scores.softmax(dim={"keys": -1, "queries": -2}[softmax_over])
    out = weights @ v  # (B, H, T, d)
    if merge == "transposed":  # split as (B, G, H/G, ...) but merged as if (B, H/G, G, ...)
        out = out.view(B, G, H // G, T, d).transpose(1, 2).reshape(B, H, T, d)
    return out


_GROUPED_MISTAKES = [  # (keyword arguments of _grouped_by_hand, hint), most telling first
    (
        dict(order="h % G"),
        "the heads are grouped in the wrong order: query head h was paired with key/value head h % G "
        "(0, 1, 0, 1, ...), as q.reshape(B, H // G, G, T, d) or k.repeat pair them; it belongs to group "
        "h // (H / G) (0, 0, 1, 1, ...): q.reshape(B, G, H // G, T, d), the order of repeat_interleave",
    ),
    (
        dict(merge="transposed"),
        "each query head found its right group, but the heads were merged back in another order: reshape "
        "(B, G, H // G, T, d) straight back to (B, H, T, d), without a transpose",
    ),
    (dict(scale="none"), "the scores were not scaled: divide q @ kᵀ by √d (math.sqrt(q.size(-1)))"),
    (dict(scale="d"), "the scores were divided by d; the scale is √d"),
    (
        dict(softmax_over="queries"),
        "the softmax ran over the queries (the axis of T); each query's weights over the S keys must sum to 1: "
        "softmax over the last axis",
    ),
    (
        dict(softmax_over="group"),
        "the softmax ran over the query heads of a group (the axis of H // G); each query's weights over the "
        "S keys must sum to 1: softmax over the last axis",
    ),
    (
        dict(softmax_over="group rows"),
        "the softmax ran over dim -2, the (H // G) * T rows of a group (all its query heads' queries); each "
        "query's weights over the S keys must sum to 1: softmax over the last axis (dim=-1)",
    ),
    (dict(mask=True), "there is no mask in this exercise: every query attends to all S keys"),
]


def _compare_grouped(got, case: Case) -> str | None:
    got = as_tensor(got)
    problem = compare(got, case.expected, "the output", atol=1e-4)
    if problem is None or not isinstance(got, torch.Tensor):
        return problem
    B, H, G, T, d = (case.info[name] for name in ("B", "H", "G", "T", "d"))
    if tuple(got.shape) == (B, G, H // G, T, d):
        return (
            f"{problem}\nhint: the groups were not merged back: reshape the (B, G, H // G, T, d) result "
            "to (B, H, T, d), query head h = g · (H / G) + i"
        )
    if G != H and tuple(got.shape) == (B, G, H // G * T, d):
        return (
            f"{problem}\nhint: the last reshape is missing: the (B, G, (H // G) * T, d) result holds each group's "
            "query heads one after another as rows; reshape it back to (B, H, T, d)"
        )
    if got.shape != case.expected.shape:
        return problem
    for mistake, hint in _GROUPED_MISTAKES:
        if close(got.detach().double(), _grouped_by_hand(*case.args, **mistake), atol=1e-4):
            return f"{problem}\nhint: {hint}"
    heads = got.detach().double().unbind(1)  # H tensors of (B, T, d)
    for order in ("h // (H/G)", "h % G"):  # each head right, or right for the other grouping, elsewhere
        right = _grouped_by_hand(*case.args, order=order).unbind(1)
        if all(any(close(head, r, atol=1e-4) for r in right) for head in heads):
            return (
                f"{problem}\nhint: every head of your output is a head of grouped attention (query heads "
                "grouped as h // (H / G) or as h % G), but in another order: check that your last reshape "
                "undoes exactly what your first did (a transpose on the way in needs one on the way out), "
                "and that query head h is in group h // (H / G)"
            )
    return problem


class _OpsCalled(TorchDispatchMode):
    """Record each operation a call runs: its name, whether its result is a view, and its shape."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        returns = func._schema.returns
        view = bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)
        for tensor in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(tensor, torch.Tensor):
                self.calls.append((func.__name__.split(".")[0], view, tuple(tensor.shape)))
        return out


class _Watched:
    """The learner's function, run under :class:`_OpsCalled`; ``calls`` holds the last call's operations."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, *args, **kwargs):
        with _OpsCalled() as ops:
            try:
                return self.fn(*args, **kwargs)
            finally:
                self.calls = ops.calls


def _kv_copies(calls, case: Case) -> tuple[int, list[tuple[str, tuple]]]:
    """The numbers in every new (non-view) tensor shaped like keys or values (sizes S and d among its sizes),
    and those tensors' (operation, shape), in the copy check's case; (0, []) in the others."""
    B, H, G, T, S, d = (case.info[name] for name in ("B", "H", "G", "T", "S", "d"))
    if S == d or {S, d} & {B, H, G, T, H // G, H // G * T}:  # a shared size: a score or q could look like a copy
        return 0, []
    made = [
        (name, shape)
        for name, view, shape in calls
        if not view and name != "_unsafe_view" and S in shape and d in shape  # _unsafe_view: a view in effect
    ]
    return sum(math.prod(shape) for _, shape in made), made


def _compare_grouped_without_copies(watched: _Watched, got, case: Case) -> str | None:
    problem = _compare_grouped(got, case)
    if problem is not None:
        return problem
    if any("scaled_dot_product" in op for op, _, _ in watched.calls):
        return (
            "the values are right, but they came from torch's scaled_dot_product_attention\n"
            "hint: the exercise asks you to write the attention out: q @ kᵀ / √d, the softmax over the keys, "
            "then @ v, with q reshaped to (B, G, (H // G) * T, d) so that k and v are used as they are"
        )
    copied, made = _kv_copies(watched.calls, case)
    B, H, G, S, d = (case.info[key] for key in ("B", "H", "G", "S", "d"))
    if copied <= 2 * B * G * S * d:  # at most one copy each of k and v
        return None
    op, shape = max(made, key=lambda item: math.prod(item[1]))
    return (
        f"the values are right, but k or v was copied out to the H query heads: new tensors shaped like keys or "
        f"values hold {copied} numbers, {copied / (2 * B * G * S * d):.1f} times what k and v hold, "
        f"(B, G, S, d) = {(B, G, S, d)} each "
        f"(the largest, of shape {shape}, made inside PyTorch by `{op}`: repeat_interleave, "
        "expand(...).reshape and matmul's broadcasting of k or v all copy through it)\n"
        "hint: repeat, repeat_interleave, indexing by head, cat and expand(...).reshape all copy k and v out "
        "to the H query heads, and so does broadcasting them as (B, G, 1, S, d), since matmul copies a "
        "broadcast batch axis out to full size; reshape q to (B, G, (H // G) * T, d) instead, so that "
        "q @ kᵀ with k as it is, (B, G, S, d), batches over (B, G)"
    )


_GROUPED_TITLE = "grouped-query attention without copies"
_GROUPED_SHAPE_HINT = (
    "q (B, H, T, d) = ({B}, {H}, {T}, {d}) and k, v (B, G, S, d) = ({B}, {G}, {S}, {d}) do not "
    "line up over the heads: reshape q to (B, G, (H // G) * T, d), each group's query heads one after another as "
    "rows, so that q @ kᵀ with k as it is pairs them with their key/value head (giving k, v an axis of size 1 "
    "instead would broadcast them, and matmul copies a broadcast axis)"
)
_GROUPED_SUMMARY = (
    "G = 1, 2, 3 key/value heads for 3 to 9 query heads, G = H, S != T, one query (T = 1), d from 2 to 16; "
    "no copy of k or v for the query heads"
)


def check_grouped_attention(fn) -> bool:
    """Check ``fn(q, k, v) -> out``: grouped-query attention without a mask, query head ``h`` attending with
    key/value head ``g = h // (H / G)``: ``out_h = softmax(q_h k_gᵀ / √d) v_g``, the softmax over the keys,
    without copying ``k`` or ``v`` out to the ``H`` query heads.

    The values are compared first; then the operations ``fn`` ran (recorded with a ``TorchDispatchMode``), in
    the cases whose sizes ``S`` and ``d`` differ from every other: the new (non-view) tensors with both ``S``
    and ``d`` among their sizes may hold at most as many numbers as ``k`` and ``v`` together (one copy of each
    is allowed; ``einsum`` may make one). ``repeat``, ``repeat_interleave``, indexing with a list of heads,
    ``cat``, ``expand(...).reshape``, broadcasting ``k`` and ``v`` against the query heads (``torch.matmul``
    copies a broadcast batch axis), in one piece or group by group, all copy them ``H / G`` times and fail.
    Views, such as reshaping ``q`` to ``(B, G, (H // G) * T, d)`` so that ``q @ kᵀ`` batches over
    ``(B, G)``, are free. ``F.scaled_dot_product_attention`` fails too (the exercise asks for the attention
    written out). A NumPy solution is judged on its values only (its operations are not PyTorch's).

    Shapes:
        q ``(B, H, T, d)``, k and v ``(B, G, S, d)``, ``H`` divisible by ``G`` -> ``(B, H, T, d)``.

    Returns True if every case passed.
    """
    watched = _Watched(fn) if callable(fn) else fn
    return run_checks(
        _GROUPED_TITLE,
        watched,
        _grouped_cases,
        functools.partial(_compare_grouped_without_copies, watched),
        "check_grouped_attention",
        _GROUPED_SUMMARY,
        lambda problem, case: VIEW_HINT if is_view_error(problem) else "",
        _GROUPED_SHAPE_HINT,
    )
