"""Chapter 2 (Bahdanau attention): the checkers of its code exercises.

- :func:`check_masked_softmax`: a softmax that gives masked positions zero weight.
- :func:`check_additive_attention`: Bahdanau et al.'s additive attention, from its weights.
- :func:`check_bahdanau_step`: one full step of Bahdanau et al.'s decoder.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The references are :func:`attnbook.attention.masked_softmax` and
:class:`attnbook.attention.AdditiveAttention`.
"""

import re

import torch
from torch import nn

from attnbook.attention import masked_softmax
from attnbook.exercises._checking import (
    MASKING_HINTS,
    MASKING_MISTAKES,
    STEP_MASKING_MISTAKES,
    Case,
    checker,
    close,
    compare,
    first_leak,
    first_problem,
    is_shape_error,
    mistake_hint,
    named_tensors,
    non_finite_problem,
    softmax_with,
    weights_problem,
)

__all__ = ["check_masked_softmax", "check_additive_attention", "check_bahdanau_step"]


# ================================================================ chapter 2: masked softmax


def _masked_softmax_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(21)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    cases = []
    scores, mask = randn(2, 5), _length_mask((5, 3), 5)
    cases.append(
        _softmax_case(scores, mask, "mask (2, 5) with 5 and 3 positions that may be attended (padding at the end)")
    )
    scores, mask = randn(3, 4, 6), _length_mask((6, 2, 4), 6).unsqueeze(1)  # (3, 1, 6)
    cases.append(_softmax_case(scores, mask, "mask (3, 1, 6): one padding mask per batch row, shared by its 4 queries"))
    scores, mask = randn(2, 4, 4), torch.ones(4, 4, dtype=torch.bool).tril()  # (4, 4)
    cases.append(
        _softmax_case(scores, mask, "mask (4, 4): causal (True on and below the diagonal), shared by the batch")
    )
    scores, mask = randn(3, 5), _length_mask((5, 0, 2), 5)
    cases.append(
        _softmax_case(scores, mask, "mask (3, 5) whose row 1 is all False (fully masked)", fully_masked=[(1,)])
    )
    scores = torch.cat([1000 + 5 * randn(1, 6), -1000 + 5 * randn(1, 6)])  # (2, 6)
    mask = _length_mask((6, 4), 6)
    cases.append(
        _softmax_case(
            scores,
            mask,
            "mask (2, 6) with 6 and 4 positions that may be attended; "
            "scores near +1000 in row 0 and near -1000 in row 1",
            large=True,
        )
    )
    scores = torch.tensor([[0.0, 1.0, 200.0, 0.5], [2.0, 150.0, -1.0, 0.0]])  # (2, 4)
    mask = torch.tensor([[True, True, False, True], [True, False, True, True]])
    cases.append(
        _softmax_case(
            scores, mask, "mask (2, 4) whose masked positions have by far the largest scores (200, 150)", dominant=True
        )
    )
    return cases


def _length_mask(lengths, width: int) -> torch.Tensor:
    """(len(lengths), width) bool: True at the first ``length`` positions of each row."""
    return torch.arange(width) < torch.tensor(lengths).unsqueeze(1)  # (B, 1) vs (width,) -> (B, width)


def _softmax_case(scores, mask, mask_text: str, fully_masked=(), large=False, dominant=False) -> Case:
    values = f"scores rounded: {_rounded(scores)}" if scores.numel() <= 12 else ""
    description = f"scores {tuple(scores.shape)}, {mask_text}" + (f"; {values}" if values else "")
    return Case(
        description=description,
        args=(scores, mask),
        arg_names=("scores", "mask"),
        expected=masked_softmax(scores, mask),
        info={
            "fully_masked": list(fully_masked),
            "large": large,
            "dominant": dominant,
            "in_place_advice": _SOFTMAX_IN_PLACE,
        },
    )


#: What to do instead of changing ``scores`` in place (masked_fill_, scores[~mask] = ...).
_SOFTMAX_IN_PLACE = (
    "use scores.masked_fill(~mask, ...), which returns a new tensor (masked_fill_ and "
    "scores[~mask] = ... write into scores), or work on a .clone()"
)


def _rounded(tensor: torch.Tensor) -> list:
    return [[round(x, 1) for x in row] for row in tensor.tolist()]


def _compare_masked_softmax(got, case: Case) -> str | None:
    scores, mask = case.args
    expected = case.expected
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape or not got.is_floating_point():
        problem = compare(got, expected, "weights")
        hint = _softmax_form_hint(got, scores, mask)
        return problem + (f"\nhint: {hint}" if hint else "") if problem else None
    got = got.detach()
    full = mask.expand(scores.shape)  # (..., L) like the scores
    if close(got, expected):
        return None
    empty = [r for r in range(len(full.reshape(-1, full.size(-1)))) if _row_is_zero(got, full, r)]
    if case.info.get("dominant") and empty:
        return (
            f"{compare(got, expected, 'weights') or 'weights differ'}\nhint: a row came out all zeros although "
            "some of its positions may be attended: its largest scores are at masked positions, so "
            "exp(score - the row's largest) underflows to 0 at every allowed one; mask the scores before the "
            "softmax (fill with float('-inf')), or subtract the largest allowed score"
        )
    for variant, hint in _softmax_variants(scores, mask):
        if close(got, variant):
            return first_problem(got, expected, full, "weights") + f"\nhint: {hint}"
    values = compare(got, expected, "weights") or "weights differ"
    hint = _not_weights_hint(got, scores, full)
    if hint:
        return f"{values}\nhint: {hint}"
    if case.info.get("dominant") and torch.isnan(got).any():
        return (
            f"{values}\nhint: exp of a masked score overflowed to inf, and inf × 0 is NaN: "
            "mask the scores before exp (fill them with float('-inf')), not the exps after it"
        )
    problem = non_finite_problem(got, expected, case, "weights")
    if problem:
        return problem
    if case.info.get("large") and first_leak(got, full) is None:
        return (
            f"{values}\nhint: these scores are near ±1000, so a finite fill value "
            "such as -1000 is not far below them: fill with float('-inf') (or "
            "torch.finfo(scores.dtype).min)"
        )
    return weights_problem(got, expected, full, case, "weights")


def _row_is_zero(got, full, row: int) -> bool:
    """Whether row ``row`` of ``got`` (rows: every axis but the last) is all zeros though ``full`` allows some."""
    got_rows, allowed = got.reshape(-1, got.size(-1)), full.reshape(-1, full.size(-1))
    return bool(allowed[row].any()) and bool((got_rows[row] == 0).all())


def _not_weights_hint(got, scores, full) -> str:
    """A hint when ``got`` is not weights at all: log-weights or the masked scores."""
    allowed = got[full]
    expected = masked_softmax(scores, full)
    exps = torch.where(full, got.double().exp(), 0.0)
    if allowed.numel() and (allowed <= 1e-6).all() and close(exps, expected):
        return (
            "these are log-weights (log_softmax); the weights are "
            "torch.softmax(...), positive and summing to 1 in each row"
        )
    if close(torch.where(full, got, 0.0), torch.where(full, scores, 0.0)):
        return "these are the (masked) scores: the softmax is missing, torch.softmax(masked_scores, dim=-1)"
    return ""


def _softmax_form_hint(got, scores, mask) -> str:
    if not isinstance(got, torch.Tensor):
        return ""
    if not got.is_floating_point():
        return "the weights must be floats (a softmax of the scores), not the mask or integers"
    if got.shape == mask.shape != scores.shape:
        return "the weights must have the shape of scores; the mask only broadcasts to it"
    if got.shape == scores.shape[:-1]:
        return "you summed over the last dimension; return one weight per score"
    if got.dim() > scores.dim():
        return (
            "the weights have more dimensions than scores: the mask broadcasts to "
            "scores as it is given, so use it without unsqueeze"
        )
    return ""


def _softmax_variants(scores, mask):
    """(wrong answer, hint) pairs for the typical mistakes, computed on this case's inputs."""
    for name, hint in MASKING_HINTS.items():
        yield softmax_with(scores, mask, name), hint
    masked = scores.masked_fill(~mask.expand(scores.shape), 0.0)
    yield (
        masked / masked.sum(dim=-1, keepdim=True),
        ("the exp is missing: softmax(s)_j = exp(s_j) / Σ_k exp(s_k), not s_j / Σ_k s_k"),
    )
    for dim in range(scores.dim() - 1):
        yield (
            masked_softmax(scores, mask, dim=dim),
            (
                f"the softmax ran over dim={dim}; it must run over the last dimension (dim=-1), the "
                "keys, so that each row of weights sums to 1"
            ),
        )


def _masked_softmax_error_hint(problem: str, case: Case) -> str:
    if "Dimension out of range" in problem:
        return (
            "the scores have 2 or 3 dimensions: take the softmax over dim=-1, the "
            "last one, not over a fixed dimension number"
        )
    if problem.startswith("raised IndexError") and "shape of the mask" in problem:
        return (
            "indexing with a bool mask needs the full shape of scores: expand "
            "it first, mask.expand_as(scores), or use masked_fill / torch.where, "
            "which broadcast"
        )
    return ""


@checker(
    "masked softmax",
    _masked_softmax_cases,
    _compare_masked_softmax,
    error_hint=_masked_softmax_error_hint,
    summary="padding masks, a (B, 1, L) mask over (B, T, L) scores, a causal mask, a fully masked row, "
    "masked positions with the largest scores, scores near ±1000",
)
def check_masked_softmax(fn) -> bool:
    """Check ``fn(scores, mask) -> weights``, a softmax that leaves masked positions out.

    ``mask`` is a bool tensor with ``True`` = *may attend* (the polarity of PyTorch's
    ``scaled_dot_product_attention``). It has fewer or size-1 dimensions where it is
    shared, and broadcasts to the shape of ``scores``: a ``(B, 1, L)`` padding mask
    covers every query of ``(B, T, L)`` scores, a ``(T, L)`` mask covers every batch row.
    The weights are a softmax over the **last** dimension (the keys), such that

    - a masked position (``mask`` False) gets exactly 0 weight;
    - the unmasked positions of a row share all the weight: the row sums to 1;
    - a row with no position it may attend (fully masked) gets all zeros, not NaN;
    - large scores such as 1000 work: ``exp(1000)`` overflows, so subtract each row's
      maximum before ``exp`` (``torch.softmax`` does that for you).

    One way: set masked scores to ``-inf`` with ``scores.masked_fill(~mask, float("-inf"))``,
    take ``torch.softmax(..., dim=-1)``, then handle fully masked rows (their softmax is
    ``0 / 0 = NaN``). Don't change ``scores`` in place.

    Shapes:
        scores: ``(..., L)`` float, e.g. ``(B, L)`` or ``(B, T, L)``.
        mask: bool, broadcastable to ``scores``: ``(B, L)``, ``(B, 1, L)``, ``(T, L)``, ...
        weights: the shape of ``scores``.

    The cases have padding masks, a mask broadcast over the queries, a causal ``(T, L)``
    mask shared by the batch, a fully masked row, and scores near ±1000.

    Returns True if every case passed.
    """


# ============================================================= chapter 2: additive attention


def _additive_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(22)
    specs = [  # (B, L, d_q, d_k, N, lengths that may be attended per row, or None for mask=None)
        (3, 5, 4, 6, 7, (5, 3, 4)),
        (2, 7, 5, 3, 4, None),
        (4, 6, 2, 5, 3, (6, 1, 4, 2)),
        (1, 3, 6, 2, 5, None),
        (3, 4, 3, 5, 2, (4, 0, 3)),
    ]
    return [_additive_case(*spec, generator) for spec in specs]


def _additive_case(batch, length, d_q, d_k, N, lengths, generator) -> Case:
    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    query, keys = randn(batch, d_q), randn(batch, length, d_k)
    W_q, W_k, v = randn(N, d_q) / d_q**0.5, randn(N, d_k) / d_k**0.5, randn(N)
    mask = None if lengths is None else _length_mask(lengths, length)
    if mask is None:
        mask_text = "mask=None"
    else:
        counts = ", ".join(map(str, lengths))
        mask_text = f"mask {tuple(mask.shape)} with {counts} positions that may be attended per row"
        if 0 in lengths:
            mask_text += f" (row {lengths.index(0)} is fully masked)"
    return Case(
        description=(
            f"query {tuple(query.shape)}, keys {tuple(keys.shape)}, W_q {tuple(W_q.shape)}, "
            f"W_k {tuple(W_k.shape)}, v {tuple(v.shape)}, {mask_text}"
        ),
        args=(query, keys, W_q, W_k, v, mask),
        arg_names=("query", "keys", "W_q", "W_k", "v", "mask"),
        expected=_additive_reference(query, keys, W_q, W_k, v, mask),
        info={
            "B": batch,
            "L": length,
            "d_q": d_q,
            "d_k": d_k,
            "N": N,
            "fully_masked": [] if lengths is None else [(r,) for r, n in enumerate(lengths) if n == 0],
        },
    )


def _additive_reference(
    query,
    keys,
    W_q,
    W_k,
    v,
    mask,
    tanh=True,
    use_v=True,
    softmax_dim=-1,
    masking="fill",
    context_from="weights",
    squash="sum",
):
    """The right answer, or with one typical mistake (the keyword arguments).

    ``squash``: what the tanh is applied to: ``"sum"`` (right), ``"parts"`` (each part
    separately), ``"score"`` (after v); or another function: ``"relu"``, ``"sigmoid"``.
    """
    query_part, key_part = query @ W_q.T, keys @ W_k.T  # (B, N), (B, L, N)
    if squash == "parts":
        query_part, key_part = torch.tanh(query_part), torch.tanh(key_part)
    hidden = query_part.unsqueeze(1) + key_part  # (B, 1, N) + (B, L, N) -> (B, L, N)
    if tanh and squash in ("sum", "relu", "sigmoid"):
        hidden = getattr(torch, "tanh" if squash == "sum" else squash)(hidden)
    scores = hidden @ v if use_v else hidden.sum(-1)  # (B, L, N) @ (N,) -> (B, L)
    if squash == "score":
        scores = torch.tanh(scores)
    weights = softmax_with(scores, mask, masking, dim=softmax_dim)
    mixing = weights if context_from == "weights" else scores
    context = (mixing.unsqueeze(1) @ keys).squeeze(1)  # (B, 1, L) @ (B, L, d_k) -> (B, d_k)
    return context, weights


_ADDITIVE_MISTAKES = [  # (keyword arguments of _additive_reference, hint), most telling first
    *MASKING_MISTAKES,
    (
        dict(softmax_dim=0),
        "the softmax ran over the batch (dim=0); it must run over the L keys of each "
        "row (dim=-1), so that each row of weights sums to 1",
    ),
    (dict(tanh=False), "tanh is missing: e_j = vᵀ tanh(W_q q + W_k k_j)"),
    *[
        (dict(squash=name), f"the nonlinearity is tanh, not {name}: e_j = vᵀ tanh(W_q q + W_k k_j)")
        for name in ("relu", "sigmoid")
    ],
    (dict(squash="parts"), "the tanh goes around the sum, tanh(W_q q + W_k k_j), not around each part separately"),
    (
        dict(squash="score"),
        "the tanh comes before v: e_j = vᵀ tanh(W_q q + W_k k_j), i.e. torch.tanh(...) @ v, not torch.tanh(... @ v)",
    ),
    (
        dict(use_v=False),
        "e_j is the dot product of v with tanh(W_q q + W_k k_j), i.e. tanh(...) @ v, "
        "not a plain sum over the N features",
    ),
    (
        dict(context_from="scores"),
        "the context was mixed with the raw scores e; use the softmax weights: "
        "context = Σ_j α_j k_j, i.e. weights @ keys",
    ),
]


def _compare_additive(got, case: Case) -> str | None:
    expected_context, expected_weights = case.expected
    info = case.info
    batch, length = info["B"], info["L"]
    form = _additive_form_problem(got, case)
    if form:
        return form
    context, weights = got[0].detach(), got[1].detach()
    mask = case.args[5]
    full_mask = torch.ones(batch, length, dtype=torch.bool) if mask is None else mask
    problem = non_finite_problem(weights, expected_weights, case, "weights")
    if problem:
        return problem
    for mistake, hint in _ADDITIVE_MISTAKES:
        wrong_context, wrong_weights = _additive_reference(*case.args, **mistake)
        if close(weights, wrong_weights) and not close(weights, expected_weights):
            return first_problem(weights, expected_weights, full_mask, "weights") + f"\nhint: {hint}"
        if close(weights, expected_weights) and close(context, wrong_context) and not close(context, expected_context):
            if mistake == dict(masking="none"):
                hint = (
                    "the weights are right, but the context was mixed with "
                    "weights from before the masking: use the masked weights, "
                    "weights @ keys"
                )
            return compare(context, expected_context, "context") + f"\nhint: {hint}"
    problem = weights_problem(weights, expected_weights, full_mask, case, "weights")
    if problem:
        return problem
    problem = non_finite_problem(context, expected_context, case, "context")
    if problem:
        return (
            f"{problem}\nhint: the weights are right, so the keys were mixed with something else: "
            "context = Σ_j α_j k_j uses the softmax weights α (weights @ keys), not the masked scores"
        )
    problem = compare(context, expected_context, "context")
    if problem:
        return problem + "\nhint: the weights are right; the context is the weighted sum of the keys, weights @ keys"
    return None


def _additive_form_problem(got, case: Case) -> str | None:
    """Problems with what came back (not a pair, shapes, dtypes), with a hint; None if fine."""
    info = case.info
    batch, length, d_k = info["B"], info["L"], info["d_k"]
    names = ("context", "weights")
    if isinstance(got, torch.Tensor):
        if tuple(got.shape) == (batch, d_k):
            return f"returned only a tensor of shape {(batch, d_k)} (the context?); return (context, weights)"
        if tuple(got.shape) == (batch, length):
            return f"returned only a tensor of shape {(batch, length)} (the weights?); return (context, weights)"
    if isinstance(got, (tuple, list)) and len(got) == 2 and all(isinstance(x, torch.Tensor) for x in got):
        shapes = tuple(tuple(x.shape) for x in got)
        if shapes == ((batch, length), (batch, d_k)):
            return (
                f"returned tensors of shapes {shapes[0]} and {shapes[1]}: (weights, context)?\n"
                "hint: return them in the order (context, weights)"
            )
        hint = _additive_shape_hint(shapes[0], shapes[1], info)
        problem = compare(tuple(got), case.expected, "the output", item_names=names)
        if problem and hint and ("shape" in problem or "dtype" in problem):
            return f"{problem}\nhint: {hint}"
        if problem and ("shape" in problem or "dtype" in problem):
            return problem
        return None
    return compare(got, case.expected, "the output", item_names=names)


def _additive_shape_hint(context_shape, weights_shape, info) -> str:
    batch, length, d_k, N = info["B"], info["L"], info["d_k"], info["N"]
    if context_shape == (batch, N):
        return (
            f"the context has N={N} features: it averages the keys themselves (d_k={d_k}), "
            "not the projected keys keys @ W_k.T"
        )
    if context_shape == (batch, length) and weights_shape == (batch, length):
        return (
            "the context sums over the L keys (dim=1), not over the features: "
            "(weights.unsqueeze(-1) * keys).sum(dim=1), or "
            "weights.unsqueeze(1) @ keys"
        )
    if context_shape == (batch, 1, d_k):
        return "drop the middle dimension of the context (.squeeze(1)): one context vector per row"
    if weights_shape == (batch, length, 1):
        return "drop the last dimension of the weights (.squeeze(-1)): one weight per key"
    if weights_shape == (batch, length, N):
        return (
            "each key gets one score: take the dot product with v over the N features, "
            "tanh(...) @ v, so the weights are (B, L)"
        )
    return ""


def _additive_error_hint(problem: str, case: Case) -> str:
    """A hint for an exception raised with ``mask=None``, or by a context whose shapes do not
    fit ("" if no guess: the checker's shape hint, about the scores, follows)."""
    if case.args[5] is None and "NoneType" in problem:
        return "mask may be None, which means no masking: apply it only `if mask is not None`"
    info = case.info
    # "The size of tensor a (5) must match the size of tensor b (6)": the weights' L met the
    # keys' d_k, so it came from the context (every case has L != d_k)
    sizes = sorted(int(size) for size in re.findall(r"size of tensor [ab] \((\d+)\)", problem))
    if is_shape_error(problem) and sizes == sorted((info["L"], info["d_k"])):
        return (
            "check the shapes of the context: weights (B, L) = ({B}, {L}) and keys (B, L, d_k) = "
            "({B}, {L}, {d_k}) meet over the L keys, so the weights' L must line up with the keys' L: "
            "(weights.unsqueeze(-1) * keys).sum(dim=1), or (weights.unsqueeze(1) @ keys).squeeze(1)"
        ).format(**info)
    return ""


@checker(
    "additive attention",
    _additive_cases,
    _compare_additive,
    error_hint=_additive_error_hint,
    shape_hint="query (B, d_q) = ({B}, {d_q}), W_q (N, d_q) = ({N}, {d_q}) and W_k (N, d_k) = ({N}, {d_k}) are "
    "stored (out, in) like nn.Linear.weight, so W_q q for the batch is query @ W_q.T (B, N), W_k k_j "
    "for all keys is keys @ W_k.T (B, L, N), and the two add after query_part.unsqueeze(1); the context "
    "(B, d_k) is (weights.unsqueeze(-1) * keys).sum(dim=1), or (weights.unsqueeze(1) @ keys).squeeze(1)",
    summary="unequal B, L, d_q, d_k, N; padding masks; mask=None; a batch of one; a fully masked row",
)
def check_additive_attention(fn) -> bool:
    """Check ``fn(query, keys, W_q, W_k, v, mask) -> (context, weights)``, additive attention.

    Bahdanau et al. (2015) score each key ``k_j`` against the query ``q`` with a small
    feed-forward network, then average the keys with the softmax of the scores::

        e_j = vᵀ tanh(W_q q + W_k k_j)     one score per key
        α   = softmax(e)                    masked positions (mask False) get weight 0
        context = Σ_j α_j k_j

    The weight matrices are stored like ``nn.Linear.weight``, as ``(out, in)``: ``W_q`` is
    ``(N, d_q)``, so ``W_q q`` for a whole batch of queries is ``query @ W_q.T`` ``(B, N)``,
    and ``W_k k_j`` for every key is ``keys @ W_k.T`` ``(B, L, N)``.

    ``mask`` is bool with ``True`` = may attend (e.g. real source tokens, False at padding),
    or ``None``: attend to every key. If a row's mask is all False, return zero weights and
    a zero context for that row, not NaN. Don't change the inputs in place.

    Shapes:
        query: ``(B, d_q)``; keys: ``(B, L, d_k)``; W_q: ``(N, d_q)``; W_k: ``(N, d_k)``;
        v: ``(N,)``; mask: ``(B, L)`` bool or None.
        returns: ``(context, weights)`` with context ``(B, d_k)`` and weights ``(B, L)``.

    The cases have sizes that all differ (``B``, ``L``, ``d_q``, ``d_k``, ``N``), padding
    masks, ``mask=None``, a batch of one, and, last, a fully masked row.

    Returns True if every case passed.
    """


# ================================================================ chapter 2: one decoder step


_STEP_ITEMS = ("logits", "hidden", "context", "weights")


def _step_cases() -> list[Case]:
    specs = [(3, 4, 6, 10, 5, 7, 8, [5, 3, 1]), (2, 5, 4, 6, 6, 9, 3, [6, 6]), (1, 3, 5, 8, 4, 6, 7, None)]
    cases = []  # B, E, H, A, S, V, N (the alignment network's width), source lengths
    with torch.random.fork_rng():  # the learner's random state stays as it was
        torch.manual_seed(22)
        for batch, embed, hidden_size, annotation, length, vocab, width, lengths in specs:
            args = (
                torch.randn(batch, embed),
                torch.tanh(torch.randn(batch, hidden_size)),
                torch.randn(batch, length, annotation),
                torch.ones(batch, length, dtype=torch.bool)
                if lengths is None
                else torch.arange(length) < torch.tensor(lengths).view(-1, 1),
                nn.GRUCell(embed + annotation, hidden_size),
                torch.randn(width, hidden_size) / hidden_size**0.5,
                torch.randn(width, annotation) / annotation**0.5,
                torch.randn(width),
                torch.randn(vocab, hidden_size + annotation + embed) / 4,
            )
            padding = "no padding" if lengths is None else f"source lengths {lengths}"
            cases.append(
                Case(
                    f"B={batch}, E={embed}, H={hidden_size}, A={annotation}, S={length}, V={vocab}, "
                    f"N={width}; {padding}",
                    args=args,
                    arg_names=("embedded", "hidden", "annotations", "mask", "cell", "W_a", "U_a", "v_a", "W_o"),
                    expected=_bahdanau_step(*args),
                    info=dict(B=batch, E=embed, H=hidden_size, A=annotation, S=length, V=vocab, N=width),
                )
            )
    return cases


def _bahdanau_step(
    embedded,
    hidden,
    annotations,
    mask,
    cell,
    W_a,
    U_a,
    v_a,
    W_o,
    query="previous",
    order="ec",
    squash="tanh",
    masking="fill",
    output_state="new",
    softmax_dim=-1,
    output_order="sce",
    softmax_logits=False,
    previous="given",
):
    """The reference step; the keyword arguments rebuild the typical mistakes."""
    with torch.no_grad():
        if query == "new":  # a Luong-order step: the GRU first (reading the embedding only), then attention
            return _bahdanau_step_luong_order(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o)
        part = (hidden @ W_a.T).unsqueeze(1) + annotations @ U_a.T  # (B, S, N): W_a s_(i-1) + U_a h_j
        squashed = part if squash == "none" else getattr(torch, squash)(part)
        scores = squashed @ v_a  # (B, S)
        weights = softmax_with(scores, mask, masking, dim=softmax_dim)  # (B, S)
        context = (weights.unsqueeze(1) @ annotations).squeeze(1)  # (B, A)
        pair = [embedded, context] if order == "ec" else [context, embedded]
        cell_input = torch.cat(pair, dim=-1)  # (B, E + A)
        if previous == "zeros":  # the cell called without the previous state
            new_hidden = cell(cell_input)
        else:
            new_hidden = cell(cell_input, hidden)  # s_i: (B, H)
        state = new_hidden if output_state == "new" else hidden
        parts = {"s": state, "c": context, "e": embedded}
        inputs = torch.cat([parts[name] for name in output_order], dim=-1)
        logits = inputs @ W_o.T  # (B, V)
        if softmax_logits:
            logits = torch.softmax(logits, dim=-1)
    return logits, new_hidden, context, weights


def _bahdanau_step_luong_order(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
    zeros = annotations.new_zeros(annotations.size(0), annotations.size(2))
    new_hidden = cell(torch.cat([embedded, zeros], dim=-1), hidden)
    scores = torch.tanh((new_hidden @ W_a.T).unsqueeze(1) + annotations @ U_a.T) @ v_a
    weights = masked_softmax(scores, mask)
    context = (weights.unsqueeze(1) @ annotations).squeeze(1)
    return torch.cat([new_hidden, context, embedded], dim=-1) @ W_o.T, new_hidden, context, weights


_OUTPUT_ORDER_HINT = (
    "the output layer reads [s_i; c_i; E y_(i-1)] in this order (the columns of W_o "
    "are laid out that way): torch.cat([hidden, context, embedded], dim=-1) @ W_o.T"
)

_SCORE = "v_aᵀ tanh(W_a s_(i-1) + U_a h_j)"

_STEP_MISTAKES = [  # (keyword arguments of _bahdanau_step, the item they change first, hint)
    (dict(squash="none"), "weights", f"the score is {_SCORE}: the tanh is missing"),
    *[
        (dict(squash=name), "weights", f"the nonlinearity is tanh, not {name}: {_SCORE}")
        for name in ("relu", "sigmoid")
    ],
    *STEP_MASKING_MISTAKES,
    (dict(order="ce"), "hidden", "the cell reads [E y_(i-1); c_i], the embedding first, then the context"),
    (
        dict(previous="zeros"),
        "hidden",
        "the cell also needs the previous state: cell(input, hidden); without it the GRU starts from zeros",
    ),
    (dict(output_state="previous"), "logits", "the output layer reads the *new* state: W_o [s_i; c_i; E y_(i-1)]"),
    *[(dict(output_order=order), "logits", _OUTPUT_ORDER_HINT) for order in ("sec", "cse", "ces", "esc", "ecs")],
    (
        dict(softmax_logits=True),
        "logits",
        "return the raw logits W_o [s_i; c_i; E y_(i-1)], without a softmax (the loss applies it)",
    ),
]

#: The items in the order they are computed: the first wrong one is reported.
_STEP_ORDER = ("weights", "context", "hidden", "logits")


def _compare_step(got, case: Case) -> str | None:
    problem = compare(got, case.expected, "the output", item_names=_STEP_ITEMS)
    if problem is not None and (order := _returned_order(got, case.expected)):
        return (
            f"{problem}\nhint: the right values, returned in the order ({', '.join(order)}); "
            f"return them as ({', '.join(_STEP_ITEMS)})"
        )
    got = named_tensors(got, _STEP_ITEMS)
    if problem is None or got is None:
        return problem
    if not all(x.is_floating_point() for x in got.values()):
        return problem
    expected = dict(zip(_STEP_ITEMS, case.expected))
    problem = _first_wrong_item(got, expected, _STEP_ORDER, case.args[3]) or problem
    hidden = got["hidden"]
    if close(hidden, case.args[1]) and not close(hidden, expected["hidden"]):
        return (
            f"{problem}\nhint: this is the previous state s_(i-1): return the new "
            "one, s_i = cell([E y_(i-1); c_i], s_(i-1))"
        )
    if not close(got["weights"], expected["weights"]) and close(
        got["weights"], _bahdanau_step(*case.args, query="new")[3]
    ):
        return (
            f"{problem}\nhint: score the *previous* state s_(i-1), before the GRU step: the context is an "
            "input of that step, so it must exist first"
        )
    if not close(got["weights"], expected["weights"]) and close(
        got["weights"], _reattended_weights(case.args, expected["hidden"])
    ):
        return (
            f"{problem}\nhint: these weights score the new state s_i (attention run again after the step): "
            "return the weights and context computed from s_(i-1), the ones the step used"
        )
    hint = mistake_hint(got, expected, _bahdanau_step, case.args, _STEP_MISTAKES)
    return problem if hint is None else f"{problem}\nhint: {hint}"


def _returned_order(got, expected) -> tuple[str, ...] | None:
    """The names in the order ``got`` returned the right values, if it returned them all
    in another order; else None."""
    if not isinstance(got, (tuple, list)) or len(got) != len(expected):
        return None
    order = []
    for item in got:
        names = [
            name
            for name, value in zip(_STEP_ITEMS, expected)
            if isinstance(item, torch.Tensor) and item.shape == value.shape and close(item, value)
        ]
        if len(names) != 1:
            return None
        order.append(names[0])
    return tuple(order) if len(set(order)) == len(order) and tuple(order) != _STEP_ITEMS else None


def _reattended_weights(args, new_hidden) -> torch.Tensor:
    """The weights of attention run again from the right new state s_i, after the step.

    The circular mix of the two orders: attend from s_(i-1), step, then score s_i and
    return those weights.
    """
    _, _, annotations, mask, _, W_a, U_a, v_a, _ = args
    with torch.no_grad():  # the additive scoring of Exercise 2.2, from s_i
        _, weights = _additive_reference(new_hidden, annotations, W_a, U_a, v_a, mask)
    return weights  # (B, S)


def _first_wrong_item(got: dict, expected: dict, order: tuple, mask) -> str | None:
    """The message about the first wrong item, in the order of computation.

    None if an item has the wrong shape (the caller's message covers it) or if none is
    wrong.
    """
    if any(got[name].shape != expected[name].shape for name in order):
        return None
    for name in order:
        if close(got[name], expected[name]):
            continue
        if name == "weights" and mask is not None:
            full = mask.expand(expected[name].shape)
            return first_problem(got[name], expected[name], full, name)
        return compare(got[name], expected[name], name) or f"{name} differ"
    return None


def _step_error_hint(problem: str, case: Case) -> str:
    info = case.info
    E, H, A, N = info["E"], info["H"], info["A"], info["N"]
    width = _inconsistent_input_size(problem)
    if width == H:
        return (
            "call the cell as cell(input, hidden): the input [E y_(i-1); c_i] first, the previous state s_(i-1) second"
        )
    if width == E + N:
        return f"the context averages the annotations h_j themselves (A = {A} numbers), not the projected U_a h_j"
    if width is not None or ("mat1 and mat2" in problem and f"x{E}" in problem):
        return (
            f"the cell reads [E y_(i-1); c_i], E + A = {E + A} numbers: "
            "concatenate the embedding and the context before the GRU step"
        )
    matrices = (("W_a", N, H, "hidden"), ("U_a", N, A, "annotations"))
    for name, rows, columns, x in matrices:
        if f"x{columns} and {rows}x{columns})" in problem:
            return (
                f"{name} ({rows}, {columns}) is stored like nn.Linear.weight, "
                f"(out, in): {name} x for every x is {x} @ {name}.T"
            )
    if any(f"x{n} and {H + A + E}x" in problem for n in (H + A, H + E, A + E)):
        return (
            f"the output layer reads all three, [s_i; c_i; E y_(i-1)]: "
            f"H + A + E = {H + A + E} numbers, "
            "torch.cat([hidden, context, embedded], dim=-1) @ W_o.T"
        )
    return ""


def _inconsistent_input_size(problem: str) -> int | None:
    """N in a GRUCell's 'inconsistent input_size: got N' error, or None."""
    match = re.search(r"inconsistent input_size: got (\d+)", problem)
    return int(match.group(1)) if match else None


@checker(
    "Bahdanau decoder step",
    _step_cases,
    _compare_step,
    error_hint=_step_error_hint,
    shape_hint="embedded (B, E) = ({B}, {E}), hidden (B, H) = ({B}, {H}), annotations (B, S, A) = ({B}, {S}, {A}), "
    "W_a (N, H) = ({N}, {H}), U_a (N, A) = ({N}, {A}), v_a (N,), W_o (V, H + A + E) = "
    "({V}, {H} + {A} + {E})",
    summary="padding and no padding; B, E, H, A, S, V, N all different",
)
def check_bahdanau_step(fn) -> bool:
    """Check ``fn(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o)``, one step of Bahdanau et al.'s
    decoder, returning ``(logits, hidden, context, weights)``::

        e_j    = v_aᵀ tanh(W_a s_(i-1) + U_a h_j)       the *previous* state is the query
        α      = softmax(e), 0 where mask is False
        c_i    = Σ_j α_j h_j
        s_i    = cell([E y_(i-1); c_i], s_(i-1))        the context is an input of the recurrent step
        logits = W_o [s_i; c_i; E y_(i-1)]

    ``cell`` is an ``nn.GRUCell(E + A, H)``, called as ``cell(input, s_(i-1))``; the matrices are used as
    given, like ``nn.Linear.weight``: ``W_a s`` is ``hidden @ W_a.T``, ``U_a h_j`` for every j is
    ``annotations @ U_a.T``, and ``W_o x`` is ``x @ W_o.T``.

    Shapes:
        embedded ``(B, E)``; hidden ``(B, H)``; annotations ``(B, S, A)``; mask ``(B, S)`` bool (True = a real
        source position); W_a ``(N, H)``; U_a ``(N, A)``; v_a ``(N,)``; W_o ``(V, H + A + E)``.
        returns: logits ``(B, V)``, hidden ``(B, H)``, context ``(B, A)``, weights ``(B, S)``.

    Returns True if every case passed.
    """
