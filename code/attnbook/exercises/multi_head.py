"""Chapter 5 (multi-head attention): the checkers of its code exercises.

- :func:`check_split_heads`: cut the features of every position into heads.
- :func:`check_merge_heads`: put the heads back together.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The references are :func:`attnbook.attention.split_heads` and :func:`attnbook.attention.merge_heads`.
"""

import torch

from attnbook.attention import merge_heads, split_heads
from attnbook.exercises._checking import VIEW_HINT, Case, checker, close, compare, describe, is_view_error

__all__ = ["check_split_heads", "check_merge_heads"]

#: (B, T, d_model, heads) of the cases: B, T, d_head and heads all different (so that a head axis in the
#: batch's place shows in the shape), a batch of one, one head, one feature per head.
_SIZES = ((5, 3, 8, 2), (1, 5, 12, 3), (3, 4, 6, 1), (2, 2, 4, 4))


def _labelled(batch: int, length: int, d_model: int) -> torch.Tensor:
    """Entries that tell where they came from: 1000·b + 100·t + feature."""
    b, t, f = torch.meshgrid(torch.arange(batch), torch.arange(length), torch.arange(d_model), indexing="ij")
    return (1000 * b + 100 * t + f).float()  # (B, T, d_model)


def _mistakes(x: torch.Tensor, heads: int) -> list[tuple[torch.Tensor, str]]:
    """(wrong output, hint) for the typical ways of splitting (B, T, d_model) into heads wrongly."""
    batch, length, d_model = x.shape
    d_head = d_model // heads
    slices = [x[..., i * d_head : (i + 1) * d_head] for i in range(heads)]  # each (B, T, d_head)
    stack_hint = (
        "torch.stack(slices, dim={}) puts the heads on axis {}; stack along dim=1, after the batch: (B, H, T, d_head)"
    )
    cat_hint = (
        "torch.cat joins the slices along an axis they already have, so the output keeps 3 axes; "
        "torch.stack(slices, dim=1) makes the new head axis"
    )
    return [
        *[(torch.cat(slices, dim=d), cat_hint) for d in (0, 1)],
        (
            x,
            "that is x unchanged (torch.cat along the last axis puts the slices back together); "
            "torch.stack(slices, dim=1) makes the new head axis",
        ),
        *[(torch.stack(slices, dim=d), stack_hint.format(d, d)) for d in (0, 3)],
        (
            torch.stack(slices[::-1], dim=1),
            "the heads are in reverse order: head 0 takes the first d_head features, x[..., 0:d_head]",
        ),
        (
            x.reshape(batch, heads, length, d_head),
            "a reshape straight to (B, H, T, d_head) mixes positions: head 0 "
            "gets the first T·d_head numbers of the row, which spill over into the next positions. View as "
            "(B, T, H, d_head) first, then transpose(1, 2) (or, without either, slice each head's block of "
            "features and torch.stack the slices along dim=1)",
        ),
        (
            x.view(batch, length, d_head, heads).permute(0, 3, 1, 2),
            "head i got every H-th feature (i, i + H, ...); "
            "it must get a contiguous block, features i·d_head .. (i+1)·d_head - 1: "
            "slice x[..., i·d_head:(i+1)·d_head], or view as (B, T, H, d_head)",
        ),
        (
            x.view(batch, length, heads, d_head).transpose(1, 3).transpose(2, 3),
            "the axes are in the wrong order; "
            "after view(B, T, H, d_head), transpose(1, 2) swaps T and H and leaves d_head last",
        ),
        (
            x.transpose(1, 2).reshape(batch, heads, length, d_head),
            "transposing x to (B, d_model, T) before the reshape mixes features and "
            "positions: view as (B, T, H, d_head) first, then transpose(1, 2)",
        ),
    ]


def _split_cases() -> list[Case]:
    cases = []
    for batch, length, d_model, heads in _SIZES:
        x = _labelled(batch, length, d_model)
        cases.append(
            Case(
                f"x {describe(x)} holding 1000·b + 100·t + feature, num_heads={heads}",
                args=(x, heads),
                arg_names=("x", "num_heads"),
                expected=split_heads(x, heads),
            )
        )
    return cases


def _compare_split(got, case: Case) -> str | None:
    problem = compare(got, case.expected, "the output")
    if problem is None:
        return None
    x, heads = case.args
    if isinstance(got, (list, tuple)) and all(isinstance(item, torch.Tensor) for item in got):
        return f"{problem}\nhint: torch.stack the slices along dim=1 into one tensor, (B, H, T, d_head)"
    if isinstance(got, torch.Tensor) and tuple(got.shape) == (x.size(0), x.size(1), heads, x.size(2) // heads):
        return (
            f"{problem}\nhint: that is (B, T, H, d_head): transpose(1, 2) to put the heads before the "
            "positions (or, from slices, torch.stack(slices, dim=1))"
        )
    for wrong, hint in _mistakes(x, heads):
        if isinstance(got, torch.Tensor) and close(got.detach().float(), wrong):
            return f"{problem}\nhint: {hint}"
    d_head = x.size(2) // heads
    if isinstance(got, torch.Tensor) and got.dim() == 4 and tuple(got.shape[:3]) == (x.size(0), heads, x.size(1)):
        width = got.size(3)  # the features each head got
        if width != d_head and heads * width <= x.size(2):
            blocks = torch.stack([x[..., i * width : (i + 1) * width] for i in range(heads)], dim=1)
            if close(got.detach().float(), blocks):
                return (
                    f"{problem}\nhint: each head got {width} features; a head holds d_head = d_model / "
                    f"num_heads = {d_head}: slice x[..., i·d_head:(i+1)·d_head]"
                )
    return problem


def _split_error_hint(problem: str, case: Case) -> str:
    """A hint for slices that torch.stack cannot join: not all of shape (B, T, d_head)."""
    if "stack expects each tensor to be equal size" not in problem:
        return ""
    x, heads = case.args
    return (
        f"the slices must all be (B, T, d_head) = {(x.size(0), x.size(1), x.size(2) // heads)}: slice the "
        "last axis, x[..., i * d_head:(i + 1) * d_head] (x[:, a:b] slices the positions; "
        "i + 1 * d_head, without the parentheses, is i + d_head)"
    )


@checker(
    "split heads",
    _split_cases,
    _compare_split,
    error_hint=_split_error_hint,
    summary="B, T, d_head and the number of heads all different; one head; one feature per head; a batch of one",
)
def check_split_heads(fn) -> bool:
    """Check ``fn(x, num_heads) -> heads``: the features of every position cut into ``num_heads`` heads.

    Head ``i`` holds features ``i·d_head, ..., (i+1)·d_head - 1`` of every position, with
    ``d_head = d_model / num_heads``, and the heads come before the positions:
    ``heads[b, i, t] == x[b, t, i·d_head:(i+1)·d_head]``. The cases' entries are
    ``1000·b + 100·t + feature``, so a wrong answer shows where its numbers came from.

    Shapes:
        x: ``(B, T, d_model)``. heads: ``(B, num_heads, T, d_head)``.

    Returns True if every case passed.
    """


def _merge_cases() -> list[Case]:
    """The sizes of split heads, as the view split_heads returns; then two contiguous
    tensors, like the ``weights @ v`` that multi-head attention merges."""
    cases = []
    sizes = [(size, False) for size in _SIZES] + [(_SIZES[0], True), (_SIZES[1], True)]
    for (batch, length, d_model, heads), contiguous in sizes:
        # (B, H, T, d_head): 1000·b + 100·t + feature
        x = split_heads(_labelled(batch, length, d_model), heads)
        if contiguous:
            x = x.contiguous()
        sizes_text = f"(B={batch}, H={heads}, T={length}, d_head={d_model // heads})"
        memory = ", contiguous in memory (as weights @ v is)" if contiguous else ""
        labels = ", heads[b, i, t, j] holding 1000·b + 100·t + f, where f = i·d_head + j is its feature once merged"
        cases.append(
            Case(
                f"heads {describe(x)} {sizes_text}{memory}{labels}",
                args=(x,),
                arg_names=("heads",),
                expected=merge_heads(x),
            )
        )
    return cases


def _merge_mistakes(x: torch.Tensor) -> list[tuple[torch.Tensor, str]]:
    """(wrong output, hint) for the typical wrong ways of merging (B, H, T, d_head)."""
    batch, heads, length, d_head = x.shape
    d_model = heads * d_head
    each = list(x.unbind(1))  # the heads, each (B, T, d_head)
    axis = {0: "the batch (dim=0)", 1: "the positions (dim=1)"}
    return [
        *[
            (
                torch.cat(each, dim=d),
                f"you concatenated the heads along {axis[d]}; concatenate them along the last axis, "
                "the features (dim=-1)",
            )
            for d in (0, 1)
        ],
        *[
            (
                torch.cat(list(x), dim=d),
                "iterating over `heads` (or list(heads)) goes over the batch, axis 0; the heads are "
                "axis 1: heads[:, i] for i in range(H), or heads.unbind(1)",
            )
            for d in (0, 1, -1)
        ],
        *[
            (
                torch.stack(each, dim=d),
                "torch.stack adds a new axis; torch.cat(..., dim=-1) joins the heads along the features",
            )
            for d in (3,)  # dim=2 gives (B, T, H, d_head): _compare_merge names that shape
        ],
        (
            torch.cat(each[::-1], dim=-1),
            "the heads are in reverse order: head 0's d_head features come first, then head 1's, ...",
        ),
        (
            torch.cat(x.split(1, dim=1), dim=-1),
            "heads.split(1, dim=1) (or chunk) keeps a head axis of size 1 in every piece, and the cat "
            "keeps it too: index heads[:, i] for i in range(H), or use heads.unbind(1), which drop it",
        ),
        (
            x.reshape(batch, length, d_model),
            "a reshape straight from (B, H, T, d_head) to (B, T, d_model) mixes heads and "
            "positions: transpose(1, 2) to (B, T, H, d_head) first, then reshape",
        ),
        (
            x.permute(0, 2, 3, 1).reshape(batch, length, d_model),
            "permute(0, 2, 3, 1) gives (B, T, d_head, H), so the heads' features end up "
            "interleaved (every H-th feature from one head); permute(0, 2, 1, 3), that is "
            "transpose(1, 2), gives (B, T, H, d_head): each head's block in one piece",
        ),
        (
            x.transpose(2, 3).reshape(batch, length, d_model),
            "transpose(2, 3) swaps T and d_head; the heads and the positions must swap: "
            "transpose(1, 2) to (B, T, H, d_head), then reshape",
        ),
    ]


def _compare_merge(got, case: Case) -> str | None:
    problem = compare(got, case.expected, "the output")
    if problem is None or not isinstance(got, torch.Tensor):
        return problem
    (x,) = case.args
    batch, heads, length, d_head = x.shape
    if tuple(got.shape) == (batch, length, heads, d_head):  # e.g. a permute with no flatten
        return (
            f"{problem}\nhint: that is (B, T, H, d_head), one axis too many: flatten the last two "
            "into the H·d_head features, .flatten(2) or .reshape(B, T, H * d_head) (torch.cat(..., "
            "dim=-1) joins the heads without a new axis)"
        )
    for wrong, hint in _merge_mistakes(x):
        if close(got.detach().float(), wrong):
            return f"{problem}\nhint: {hint}"
    return problem


def _merge_error_hint(problem: str, case: Case) -> str:
    return VIEW_HINT if is_view_error(problem) else ""


@checker(
    "merge heads",
    _merge_cases,
    _compare_merge,
    error_hint=_merge_error_hint,
    summary="the same sizes as split heads, in reverse; the views split heads "
    "returns and contiguous tensors like weights @ v",
)
def check_merge_heads(fn) -> bool:
    """Check ``fn(heads) -> x``: the inverse of splitting, ``x[b, t, i·d_head:(i+1)·d_head] == heads[b, i, t]``.

    After a ``transpose`` the tensor is no longer contiguous in memory, so ``view`` may refuse to
    reshape it: use ``reshape`` (or ``.contiguous().view(...)``). The cases hold both
    the views that split heads returns and contiguous tensors, such as the
    ``weights @ v`` of attention.

    Shapes:
        heads: ``(B, H, T, d_head)``. x: ``(B, T, H·d_head)``.

    Returns True if every case passed.
    """
