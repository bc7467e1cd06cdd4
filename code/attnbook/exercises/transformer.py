"""Chapter 6 (the Transformer): the checkers of its code exercises.

- :func:`check_positional_encoding`: the sinusoidal positional encodings of Vaswani et al. §3.5.
- :func:`check_causal_mask`: the decoder's look-ahead mask.
- :func:`check_smoothing_over_others`: label smoothing that spreads alpha over the classes that are
  neither the right token nor padding.
- :func:`check_keep_best`: a beam step's bookkeeping, when each prefix proposes P tokens.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The references are :func:`attnbook.transformer.sinusoidal_positions`, :func:`attnbook.transformer.causal_mask`
and this module's ``_over_others_loss``.
"""

import numpy as np
import torch
import torch.nn.functional as F

from attnbook.exercises._checking import Case, as_tensor, checker, close, compare
from attnbook.transformer import causal_mask, sinusoidal_positions

__all__ = ["check_positional_encoding", "check_causal_mask", "check_smoothing_over_others", "check_keep_best"]


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


# ============================================================ label smoothing over the other classes


def _over_others_target(targets: torch.Tensor, V: int, alpha: float, pad_id: int) -> torch.Tensor:
    """The right token 1 - alpha, padding 0, each of the other V - 2 classes alpha / (V - 2): ``(N, V)``."""
    target = torch.full((len(targets), V), alpha / (V - 2), dtype=torch.float64)
    target[:, pad_id] = 0.0
    return target.scatter(1, targets.unsqueeze(1), 1 - alpha)


def _cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``-sum(target * log_softmax(logits))`` over the classes, averaged over the rows."""
    return -(target * logits.double().log_softmax(dim=-1)).sum(dim=-1).mean()


def _smoothing_cases() -> list[Case]:
    gen = torch.Generator().manual_seed(6)
    cases = []
    for N, V, alpha, pad_id, scale, what in (
        (4, 6, 0.1, 0, 1.0, "pad_id 0"),
        (3, 7, 0.2, 6, 1.0, "pad_id 6, the last class"),
        (5, 8, 0.1, 2, 40.0, "pad_id 2, logits so large that softmax rounds some probabilities to 0"),
        (2, 3, 0.3, 1, 1.0, "V = 3: one class is neither the right token nor padding"),
        (3, 5, 0.0, 0, 1.0, "alpha = 0: the plain cross-entropy"),
    ):
        logits = torch.randn(N, V, generator=gen) * scale  # (N, V)
        allowed = torch.tensor([v for v in range(V) if v != pad_id])
        targets = allowed[torch.randint(len(allowed), (N,), generator=gen)]  # (N,), never pad_id
        expected = _cross_entropy(logits, _over_others_target(targets, V, alpha, pad_id)).float()
        cases.append(
            Case(
                f"logits of shape ({N}, {V}), targets {targets.tolist()}, alpha={alpha}, {what}",
                args=(logits, targets, alpha, pad_id),
                arg_names=("logits", "targets", "alpha", "pad_id"),
                expected=expected,
            )
        )
    return cases


def _smoothing_mistakes(case: Case) -> list[tuple[torch.Tensor, str]]:
    logits, targets, alpha, pad_id = case.args
    N, V = logits.shape
    one_hot = F.one_hot(targets, V).double()  # (N, V)
    right = _over_others_target(targets, V, alpha, pad_id)

    def spread(over: int, pad_gets_some: bool, right_value: float) -> torch.Tensor:
        target = torch.full((N, V), alpha / over, dtype=torch.float64)
        if not pad_gets_some:
            target[:, pad_id] = 0.0
        return target.scatter(1, targets.unsqueeze(1), right_value)

    padding_at_0 = right.clone()
    if pad_id != 0:  # the padding column taken as 0 whatever pad_id says
        padding_at_0[:, pad_id] = alpha / (V - 2)
        padding_at_0[:, 0] = torch.where(targets == 0, 1 - alpha, 0.0)
    ce = _cross_entropy
    return [
        (
            ce(logits, one_hot * (1 - alpha) + alpha / V),
            "this is PyTorch's label smoothing (alpha / V to every class, padding included, and 1 - alpha + "
            "alpha / V to the right token); the exercise's gives the right token exactly 1 - alpha, padding 0, "
            "and alpha / (V - 2) to each of the other classes",
        ),
        (
            ce(logits, one_hot),
            "this is the plain cross-entropy, without smoothing: the target row should give the right token "
            "1 - alpha and share alpha among the other V - 2 classes",
        ),
        (
            ce(logits, padding_at_0) if pad_id != 0 else None,
            f"padding is class pad_id (here {pad_id}), not class 0: zero the column target[:, pad_id]",
        ),
        (
            ce(logits, (one_hot * (1 - alpha) + alpha / (V - 2))),
            "alpha / (V - 2) goes only to the V - 2 classes that are neither the right token nor padding: you "
            "gave it to every class, the right token and padding too (so the row sums to more than 1)",
        ),
        (
            ce(logits, spread(V - 2, True, 1 - alpha)),
            "the padding column must be 0: padding is never a right answer. With it zeroed, the row sums to 1",
        ),
        (
            ce(logits, spread(V - 1, True, 1 - alpha)),
            "alpha is shared among V - 2 classes, not V - 1: padding gets 0, the other classes alpha / (V - 2) each",
        ),
        (
            ce(logits, spread(V - 1, False, 1 - alpha)),
            "divide alpha by V - 2, the classes that are neither the right token nor padding: with V - 1 the "
            "row sums to less than 1",
        ),
        (
            ce(logits, right + alpha / (V - 2) * one_hot),
            "the right token gets exactly 1 - alpha: you added alpha / (V - 2) to it as well (fill the row, "
            "then *set* the right token, with scatter or an index, rather than adding to it)",
        ),
        (
            ce(logits, spread(V - 2, False, 1.0)),
            "the right token gets 1 - alpha, not 1: the row must sum to 1 (the right token's 1 - alpha plus "
            "the others' alpha)",
        ),
        (
            -ce(logits, right),
            "the sign: the loss is minus the sum of target × log-probability (log-probabilities are negative, so "
            "the loss is positive)",
        ),
        (
            ce(logits, right) * N,
            "average over the N rows (as F.cross_entropy does): you summed them",
        ),
        (
            ce(logits, right) / V,
            "sum over the classes, then average over the rows: .mean() over the whole (N, V) product also divides by V",
        ),
        (
            -(right * logits.double().log_softmax(dim=0)).sum(dim=-1).mean(),
            "log_softmax over the classes (dim=-1), not over the rows (dim=0)",
        ),
        (
            ce(logits, right) + (right * torch.where(right > 0, right.log(), 0.0)).sum(dim=-1).mean(),
            "this is the KL divergence from the target (F.kl_div, nn.KLDivLoss): it is the cross-entropy minus "
            "the target's own entropy. The exercise asks for the cross-entropy, which is what F.cross_entropy "
            "computes (so the two can be compared)",
        ),
    ]


def _compare_smoothing(got, case: Case) -> str | None:
    if isinstance(got, (float, int, np.floating)) and not isinstance(got, bool):
        got = torch.tensor(float(got))  # .item() is as good as the tensor
    got = as_tensor(got)
    if isinstance(got, torch.Tensor) and got.numel() == 1 and got.dim() > 0:
        got = got.reshape(())  # a (1,) or (1, 1) loss holds the same number
    if isinstance(got, torch.Tensor) and got.dim() > 0:
        N = case.args[0].size(0)
        rows = f": one value per row, (N,) = ({N},); average them with .mean()" if got.shape == (N,) else ""
        return f"the loss has shape {tuple(got.shape)} but should be one number (a 0-dim tensor){rows}"
    problem = compare(got, case.expected, "the loss", atol=1e-4)
    if problem is None or not isinstance(got, torch.Tensor):
        return problem
    if not torch.isfinite(got).all():
        return (
            f"{problem}\nhint: with logits this large, softmax rounds some probabilities to 0, so their log is -inf "
            "and the loss inf (or nan, where a target of 0 meets it: 0 × -inf): take logits.log_softmax(dim=-1) "
            "(or F.log_softmax), not the log of a softmax"
        )
    for wrong, hint in _smoothing_mistakes(case):
        if wrong is not None and close(got.detach().double().reshape(()), wrong.reshape(()), atol=1e-4):
            return f"{problem}\nhint: {hint}"
    return problem


@checker(
    "label smoothing over the V - 2 other classes",
    _smoothing_cases,
    _compare_smoothing,
    summary="pad_id first, last and in the middle, V = 3, logits large enough to round softmax to 0, alpha = 0",
)
def check_smoothing_over_others(fn) -> bool:
    """Check ``fn(logits, targets, alpha, pad_id) -> loss``: the cross-entropy against a target that gives the
    right token ``1 - alpha``, padding ``0`` and each of the other ``V - 2`` classes ``alpha / (V - 2)``,
    averaged over the rows. No target is ``pad_id``.

    Shapes:
        logits ``(N, V)``, targets ``(N,)`` -> loss ``()``.

    Returns True if every case passed.
    """


# ============================================================ a beam step's bookkeeping


def _keep_best(scores: torch.Tensor, log_probs: torch.Tensor, token: torch.Tensor) -> tuple:
    """The reference: the K best of each row's K·P candidates, best first."""
    batch, K = scores.shape
    P = log_probs.size(-1)
    totals = (scores.reshape(-1, 1) + log_probs).reshape(batch, K * P)  # (B, K·P)
    best_scores, best = totals.topk(K, dim=-1)  # (B, K) each
    parent = best // P + K * torch.arange(batch).unsqueeze(1)  # (B, K): rows of B·K
    return best_scores, parent, token.reshape(batch, K * P).gather(1, best)


def _keep_best_cases() -> list[Case]:
    gen = torch.Generator().manual_seed(11)
    cases = []
    for batch, K, P, first, what in (
        # first: two rows, so a missing or wrong row offset shows at once; the last prefix
        # scores best, so the kept candidates lie past index K and best // K goes wrong
        (2, 3, 5, False, "P > K, the last prefix the best"),
        (1, 2, 3, False, "one row"),
        (3, 4, 2, False, "P < K"),
        (2, 2, 4, True, "the first step: only each row's first prefix is live (the others score -inf)"),
        (2, 1, 3, False, "K = 1: greedy"),
        (2, 3, 3, False, "P = K"),
    ):
        scores = -torch.rand(batch, K, generator=gen) * 5  # (B, K): summed log-probabilities
        if "last prefix" in what:
            scores = scores.sort(dim=-1).values  # ascending: prefix K - 1 leads
        if first:
            scores[:, 1:] = float("-inf")
        log_probs = -torch.rand(batch * K, P, generator=gen) * 3  # (B·K, P)
        log_probs = log_probs.sort(dim=-1, descending=True).values  # as topk returns them
        token = torch.stack([torch.randperm(20, generator=gen)[:P] for _ in range(batch * K)])  # (B·K, P) ids
        cases.append(
            Case(
                f"B={batch}, K={K}, P={P}, {what}",
                args=(scores, log_probs, token),
                arg_names=("scores", "log_probs", "token"),
                expected=_keep_best(scores, log_probs, token),
                info={"B": batch, "K": K, "P": P},
            )
        )
    return cases


def _keep_best_mistakes(case: Case) -> list[tuple[torch.Tensor, str, str]]:
    """(wrong parent or token or scores, which output, hint)."""
    scores, log_probs, token = case.args
    batch, K = scores.shape
    P = log_probs.size(-1)
    totals = (scores.reshape(-1, 1) + log_probs).reshape(batch, K * P)
    _, best = totals.topk(K, dim=-1)
    offsets = torch.arange(batch).unsqueeze(1)  # (B, 1)
    alone = log_probs.reshape(batch, K * P).topk(K, dim=-1)
    tiled = (scores.repeat(1, P) + log_probs.reshape(batch, K * P)).topk(K, dim=-1).values
    return [
        (
            tiled,
            "scores",
            "scores.repeat(1, P) lays the prefixes' scores out as k0 k1 k0 k1 ..., but a row's candidates lie "
            "prefix by prefix (P of prefix 0, then P of prefix 1, ...): use scores.repeat_interleave(P, dim=1), or "
            "add scores.reshape(-1, 1) to the (B·K, P) log-probabilities before flattening",
        ),
        (
            best // K + K * offsets,
            "parent",
            "candidate j of a row came from prefix j // P (each prefix proposed P tokens), not j // K: "
            "beam_step's best // K works only because there P = K",
        ),
        (best % P + K * offsets, "parent", "the prefix is best // P; best % P is which of its P proposals won"),
        (best % K + K * offsets, "parent", "the prefix is best // P (integer division), not a remainder"),
        (
            best // P,
            "parent",
            "best // P is the prefix among its own row's K; add K * torch.arange(B)[:, None] to make it a row "
            "of the B·K rows (row b's prefixes are rows b·K to b·K + K - 1)",
        ),
        (
            best // P + offsets,
            "parent",
            "row b's prefixes start at row b·K of the B·K rows: add K * torch.arange(B)[:, None], not "
            "torch.arange(B)[:, None]",
        ),
        (
            best // P + P * offsets,
            "parent",
            "row b's prefixes start at row b·K (K prefixes a row), not b·P: add K * torch.arange(B)[:, None]",
        ),
        (
            best % P,
            "token",
            "return the token ids: token.reshape(B, K·P).gather(1, best), not best % P (which column won)",
        ),
        (
            token.reshape(batch * K * P)[best],
            "token",
            "gather each row's tokens from its own K·P candidates: token.reshape(B, K·P).gather(1, best); indexing "
            "the flattened tokens with best reads row 0's candidates for every row",
        ),
        (
            alone.values,
            "scores",
            "add each prefix's score to its proposals' log-probabilities before choosing: a candidate's score "
            "is its prefix's score plus the new token's log-probability",
        ),
    ]


_KEEP_BEST_NAMES = ("scores", "parent", "token")


def _compare_keep_best(got, case: Case) -> str | None:
    problem = compare(got, case.expected, "the output", item_names=_KEEP_BEST_NAMES)
    if problem is None or not isinstance(got, tuple) or len(got) != 3:
        return problem
    expected_scores, _, _ = case.expected
    parts = dict(zip(_KEEP_BEST_NAMES, (as_tensor(g) for g in got)))
    scores, log_probs, token = case.args
    batch, K = scores.shape
    for name, value in parts.items():
        if isinstance(value, torch.Tensor) and tuple(value.shape) == (batch * K,):
            return f"{problem}\nhint: return {name} as (B, K) = ({batch}, {K}), one row per sentence, not flattened"
    got_scores = parts["scores"]
    if isinstance(got_scores, torch.Tensor) and got_scores.shape == expected_scores.shape and K > 1:
        totals = (scores.reshape(-1, 1) + log_probs).reshape(batch, -1)  # (B, K·P)
        lowest = totals.topk(K, dim=-1, largest=False).values
        if torch.equal(got_scores, expected_scores.flip(-1)) or torch.equal(got_scores, lowest):
            return f"{problem}\nhint: keep the K *largest* totals, best first: topk(K) (or sort descending)"
    expected = dict(zip(_KEEP_BEST_NAMES, case.expected))
    # hint only at the first output that is wrong: a wrong choice of candidates makes the later
    # outputs wrong too, and one of them can then equal another mistake's by chance
    first = next((name for name in _KEEP_BEST_NAMES if compare(parts[name], expected[name]) is not None), None)
    for wrong, name, hint in _keep_best_mistakes(case):
        value = parts[name]
        if name != first or not isinstance(value, torch.Tensor) or value.shape != wrong.shape:
            continue
        if torch.equal(value.to(wrong.dtype), wrong):
            return f"{problem}\nhint: {hint}"
    return problem


@checker(
    "keeping a beam's best candidates",
    _keep_best_cases,
    _compare_keep_best,
    summary="P above, below and equal to K, one row, K = 1, a first step with -inf scores",
    shape_hint="scores (B, K) = ({B}, {K}), log_probs and token (B·K, P) = ({B}·{K}, {P})",
)
def check_keep_best(fn) -> bool:
    """Check ``fn(scores, log_probs, token) -> (scores, parent, token)``: of each row's ``K·P`` candidates
    (prefix ``k``'s score plus its ``p``-th proposal's log-probability) keep the ``K`` best, best first; ``parent``
    is the row of ``B·K`` each kept candidate grew from, ``token`` its token id.

    Shapes:
        scores ``(B, K)``, log_probs and token ``(B·K, P)`` -> scores, parent, token ``(B, K)`` each.

    Returns True if every case passed.
    """
