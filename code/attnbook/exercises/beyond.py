"""Chapter 7 (beyond 2017): the checkers of its code exercises.

- :func:`check_mask_tokens`: BERT's masked-token rule (15 % of positions; 80 % ``[MASK]``, 10 % a random
  token, 10 % unchanged).
- :func:`check_running_softmax`: attention computed block by block with a running maximum and sum.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The references are :func:`attnbook.language_models.mask_tokens` and
:func:`attnbook.numpy_attention.running_softmax_attention`.
"""

import functools
import math

import numpy as np
import torch

from attnbook.exercises._checking import Case, as_tensor, checker, compare, kind_of
from attnbook.numpy_attention import running_softmax_attention, scaled_dot_product_attention

__all__ = ["check_mask_tokens", "check_running_softmax"]


# ============================================================ the 80/10/10 rule

MASK_ID, IGNORE = 40, -100
REPLACEMENTS = torch.arange(4, 40)  # ids 0-3 are the specials, 40 is [MASK], 41 [CLS]
RATE = 0.15
#: Rows of the case: enough that every measured share lies far inside its margin, so a
#: correct solution passes however it draws its random numbers (about 3 700 chosen
#: positions, 350 random ids).
ROWS = 1000


def _masking_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 40, (ROWS, 40), generator=g)  # (B, T) ordinary symbols
    ids[:, 0] = 41  # a [CLS] first
    lengths = torch.randint(10, 41, (ROWS,), generator=g)
    ids[torch.arange(40) >= lengths.unsqueeze(1)] = 0  # right padding
    maskable = (ids >= 4) & (ids < 40)
    return [
        Case(
            f"{ROWS} rows of up to 40 ids: a [CLS] (41) first, then ordinary ids "
            f"4..39, then padding (0); mask_id={MASK_ID}, replacement_ids = 4..39",
            args=(ids, maskable, MASK_ID, REPLACEMENTS),
            arg_names=("ids", "maskable", "mask_id", "replacement_ids"),
            info={"in_place_advice": "build new tensors (e.g. with torch.where, or start from ids.clone())"},
        )
    ]


def _compare_masking(got, case: Case) -> str | None:
    ids = case.args[0]
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"returned {kind_of(got)}; return a pair (inputs, targets)"
    inputs, targets = (as_tensor(item) for item in got)
    for name, value in (("inputs", inputs), ("targets", targets)):
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(ids.shape):
            return f"{name} is {kind_of(value)} but expected a tensor of shape {tuple(ids.shape)}, like ids"
    for problem in (_form_problem, _choice_problem, _count_problem, _randomness_problem, _replacement_problem):
        found = problem(inputs, targets, case)
        if found:
            return found
    return None


def _form_problem(inputs, targets, case: Case) -> str | None:
    """The order of the pair, the dtypes, and -100 where nothing was chosen."""
    ids, maskable = case.args[:2]
    if (inputs == IGNORE).any() and not (targets == IGNORE).any():
        return "inputs hold -100 and targets do not: return the pair in the order (inputs, targets)"
    if inputs.dtype == torch.bool or inputs.is_floating_point() or inputs.is_complex():
        return (
            f"inputs has dtype {inputs.dtype}; token ids are integers: keep "
            "the dtype of ids (torch.long), e.g. start from ids.clone() or use "
            "torch.where"
        )
    if targets.dtype != torch.long:
        return (
            f"targets has dtype {targets.dtype}; F.cross_entropy needs integer "
            "targets of dtype torch.long (int64), else it raises 'expected target "
            "dtype to be Long': build them from ids, e.g. "
            "torch.where(chosen, ids, -100)"
        )
    if not (targets == IGNORE).any():
        outside = targets[~maskable].unique()
        if outside.numel() == 1:
            return (
                f"targets hold {outside.item()} at the positions that were not "
                "chosen; put -100 there, the ignore_index of F.cross_entropy, so "
                "that the loss skips them"
            )
    return None


def _choice_problem(inputs, targets, case: Case) -> str | None:
    """Which positions were chosen, and what targets and inputs hold there."""
    ids, maskable, mask_id = case.args[:3]
    chosen = targets != IGNORE  # (B, T)
    if not chosen.any():
        return "targets hold -100 everywhere: put the original id at every chosen position"
    if (chosen & ~maskable).any():
        if torch.equal(targets[~maskable], ids[~maskable]):
            return (
                "targets hold the original id at positions that are not maskable "
                "(padding or the [CLS] token), so they count as chosen\nhint: targets "
                "must hold -100 at every position that was not chosen, also at the "
                "padding and the [CLS] token"
            )
        return (
            "a position that is not maskable (padding or the [CLS] token) was "
            "chosen: choose among the positions where maskable is True"
        )
    if not torch.equal(targets[chosen], ids[chosen]):
        return (
            "targets at the chosen positions must be the original ids (what the "
            "model has to restore), not the ids after masking"
        )
    if not torch.equal(inputs[~chosen], ids[~chosen]):
        changed = (inputs != ids) & ~chosen
        unchosen = int((maskable & ~chosen).sum())  # maskable positions not chosen
        count = int(changed.sum())
        hint = ""
        if count > int(chosen.sum()) or count > 0.05 * unchosen:  # not chosen, changed
            became = "were changed" if (inputs[changed] == mask_id).any() else "got a random id"
            hint = (
                f"\nhint: {count} positions that were not chosen "
                f"({int(chosen.sum())} were) {became}: apply each replacement "
                "only where chosen is True, e.g. chosen & (action >= 0.8) & "
                "(action < 0.9) for the 10 % given a random id"
            )
        elif not (inputs[changed] == mask_id).any():
            hint = (
                "\nhint: every [MASK] has its target, but the positions given a "
                "random id have none: targets must cover every chosen position, "
                "also the 10 % replaced and the 10 % kept"
            )
        return (
            "inputs changed at positions whose target is -100: change only the "
            "chosen positions, and give every changed position its original id "
            f"as target{hint}"
        )
    return None


def _count_problem(inputs, targets, case: Case) -> str | None:
    """15 % of each row, rounded either way; or 15 % overall, each position drawn."""
    ids, maskable = case.args[:2]
    chosen = targets != IGNORE
    size, count = maskable.sum(dim=1), chosen.sum(dim=1)  # (B,), (B,)
    exact = RATE * size.double()
    if ((count >= exact.floor()) & (count <= exact.ceil())).all():
        return None  # exactly 15 % of every row: round, int() and ceil all count
    share = count.sum().item() / size.sum().item()
    if 0.13 <= share <= 0.17:
        return None  # each position chosen with probability 0.15
    message = f"{share:.1%} of the maskable positions were chosen; expected 15 %"
    length = RATE * ids.size(1)
    same_count = bool((count == count[0]).all())
    if same_count and math.floor(length) <= count[0] <= math.ceil(length):
        message += (
            "\nhint: that is 15 % of the row's length T; take 15 % of the row's maskable positions, maskable.sum(dim=1)"
        )
    return message


def _same_rows_share(chosen: torch.Tensor, maskable: torch.Tensor) -> float:
    """Of the pairs of rows with the same maskable positions, the share alike."""
    same = pairs = 0
    for pattern in maskable.unique(dim=0):
        group = chosen[(maskable == pattern).all(dim=1)]  # rows with this pattern
        _, counts = group.unique(dim=0, return_counts=True)
        same += int((counts * (counts - 1) // 2).sum())
        pairs += len(group) * (len(group) - 1) // 2
    return same / pairs if pairs else 0.0


def _randomness_problem(inputs, targets, case: Case) -> str | None:
    """The chosen positions are spread over each row, and differ from row to row."""
    maskable = case.args[1]
    chosen = targets != IGNORE
    size = maskable.sum(dim=1, keepdim=True)  # (B, 1)
    count = chosen.sum(dim=1, keepdim=True)  # (B, 1)
    rank = maskable.long().cumsum(dim=1) - 1  # (B, T): place among the maskable ones
    for end, positions in (("first", rank < count), ("last", rank >= size - count)):
        if torch.equal(chosen, maskable & positions):
            return (
                f"every row chose its {end} maskable positions; choose them at "
                "random (e.g. torch.rand(ids.shape) < 0.15, and maskable)"
            )
    same = _same_rows_share(chosen, maskable)
    if same > 0.5:
        return (
            f"{same:.0%} of the pairs of rows with the same maskable positions "
            "chose the same positions; at random hardly any would\nhint: draw "
            "new random numbers for every row, e.g. torch.rand(ids.shape), not "
            "one draw of shape (T,) shared by all rows (and do not call "
            "torch.manual_seed in your function)"
        )
    first = chosen & (2 * rank < size)  # in the first half of the maskable positions
    total = chosen.sum().item()
    share = first.sum().item() / total
    expected = ((count * ((size + 1) // 2)) / size).sum().item() / total
    if abs(share - expected) > 0.12:
        return (
            f"{share:.0%} of the chosen positions lie in the first half of their "
            f"row's maskable positions; at random about {expected:.0%} would\n"
            "hint: every maskable position must have the same chance: choose "
            "them at random over the whole row, e.g. "
            "torch.rand(ids.shape) < 0.15, and maskable"
        )
    return None


def _replacement_problem(inputs, targets, case: Case) -> str | None:
    """80 % [MASK], 10 % random ids drawn uniformly from replacement_ids, 10 % kept."""
    ids, _, mask_id, replacements = case.args
    chosen = targets != IGNORE
    as_mask = (inputs == mask_id) & chosen
    random = (inputs != mask_id) & (inputs != ids) & chosen
    kept = (inputs == ids) & chosen
    n = chosen.sum().item()
    shares = (
        f"[MASK] {as_mask.sum().item() / n:.1%}, another id "
        f"{random.sum().item() / n:.1%}, unchanged {kept.sum().item() / n:.1%}"
    )
    if random.any() and not torch.isin(inputs[random], replacements).all():
        return (
            "a chosen position got an id that is not in replacement_ids (a special "
            "token or [MASK]'s own id): draw the random ids from replacement_ids"
        )
    chance = 0.1 / len(replacements)  # a random id that happens to be the original one
    expected = {"[MASK]": (as_mask, 0.8), "another id": (random, 0.1 - chance), "unchanged": (kept, 0.1 + chance)}
    mask_share, random_share = as_mask.sum().item() / n, random.sum().item() / n
    if mask_share < 0.045 and random_share > 0.5:  # the random ids written over the [MASK]s
        return (
            f"of the chosen positions: {shares}; expected about 80 %, 10 % and 10 %\nhint: "
            "[MASK] is missing: did the random-id step overwrite the masked positions? "
            "Give each chosen position one action from disjoint ranges of one u: u < 0.8 "
            "-> mask_id, 0.8 <= u < 0.9 -> a random id, otherwise keep the original"
        )
    for name, (where, target) in expected.items():
        if abs(where.sum().item() / n - target) > 0.045:
            return (
                f"of the chosen positions: {shares}; expected about 80 %, 10 % and "
                "10 %\nhint: draw one uniform number u per chosen position: "
                "u < 0.8 -> mask_id, 0.8 <= u < 0.9 -> a random id from "
                "replacement_ids, otherwise keep the original"
            )
    return _drawn_problem(ids[random], inputs[random], replacements)


def _drawn_problem(originals, drawn, replacements) -> str | None:
    """The random ids are uniform over replacements and independent of the originals."""
    if len(drawn) == 0:
        return None
    counts = (drawn.unsqueeze(1) == replacements.unsqueeze(0)).sum(dim=0)  # (R,)
    mean, freedom = len(drawn) / len(replacements), len(replacements) - 1
    chi_square = float(((counts - mean) ** 2 / mean).sum())
    # far beyond chance: a uniform draw exceeds this less than once in millions
    if chi_square > freedom + 10 * math.sqrt(2 * freedom):
        most = int(counts.argmax())
        return (
            f"the random ids are not drawn uniformly from replacement_ids: "
            f"{int((counts > 0).sum())} of its {len(replacements)} ids appeared "
            f"among the {len(drawn)} random replacements, id "
            f"{int(replacements[most])} {int(counts[most])} times (about "
            f"{mean:.0f} each expected)\nhint: draw one id per position, each id "
            "of replacement_ids equally likely: "
            "replacement_ids[torch.randint(len(replacement_ids), ids.shape)]"
        )
    top = replacements.argmax()  # randint(low, high) never draws high itself
    if mean >= 8 and counts[top] == 0:  # a uniform draw misses it about once in 3 000
        return (
            f"the random ids never included {int(replacements[top])}, the largest of "
            f"replacement_ids, among {len(drawn)} random replacements (about {mean:.0f} "
            "expected)\nhint: torch.randint(low, high) draws up to high - 1, never "
            "high itself: index instead, "
            "replacement_ids[torch.randint(len(replacement_ids), ids.shape)]"
        )
    repeated = sum(
        int(drawn[originals == original].unique(return_counts=True)[1].max()) for original in originals.unique()
    )
    if repeated > 0.75 * len(drawn):  # at random about 0.25
        offsets, counts = (drawn - originals).unique(return_counts=True)
        usual = (
            f" (here mostly the original id + {int(offsets[counts.argmax()])})"
            if counts.max() > 0.5 * len(drawn)
            else ""
        )
        return (
            "the random id depends on the original one: the same original id "
            f"mostly got the same replacement{usual}\nhint: draw it at random, "
            "whatever the original: "
            "replacement_ids[torch.randint(len(replacement_ids), ids.shape)]"
        )
    return None


@checker(
    "80/10/10 masking",
    _masking_cases,
    _compare_masking,
    summary=f"{ROWS} rows: how many positions, spread at random over each row and "
    "different in every row; what each chosen one became; random ids "
    "uniform over replacement_ids",
)
def check_mask_tokens(fn) -> bool:
    """Check ``fn(ids, maskable, mask_id, replacement_ids) -> (inputs, targets)``, BERT's masked-token rule:
    choose 15 % of the maskable positions at random (each row's share, or each position with probability
    0.15); of the chosen, replace 80 % by ``mask_id``, 10 % by an id drawn from ``replacement_ids``, and keep
    10 %; ``targets`` hold the original id at every chosen position and -100 elsewhere.

    A row's share may be rounded either way: round, ``int()`` (down) or ceil of 0.15·n
    for a row of n maskable positions. The positions must be spread at random over each
    row and differ from row to row; the random ids must be spread evenly over
    ``replacement_ids`` and not depend on the original ones. ``targets`` must be
    ``torch.long``, as ``F.cross_entropy`` needs.

    The checker seeds torch's random numbers, so its verdict does not change from run
    to run; it measures the shares on 1000 rows and accepts them within a few
    percentage points.

    Shapes:
        ids ``(B, T)`` long, maskable ``(B, T)`` bool, replacement_ids ``(R,)`` long -> inputs, targets ``(B, T)``.

    Returns True if every case passed.
    """


def _seeded(check):
    """Run ``check`` with torch's global random numbers seeded, and restore them after."""

    @functools.wraps(check)
    def run(fn) -> bool:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            return check(fn)

    return run


check_mask_tokens = _seeded(check_mask_tokens)


# ============================================================ the running softmax


def _running_cases() -> list[Case]:
    rng = np.random.default_rng(0)
    cases = []
    for L_q, L_k, d, d_v, block, scale, note in (
        (3, 8, 4, 5, 4, 1.0, "blocks that divide L_k"),
        (2, 7, 4, 3, 3, 1.0, "a last block shorter than the others"),
        (4, 6, 3, 2, 1, 1.0, "blocks of one key"),
        (2, 5, 4, 4, 16, 1.0, "one block larger than L_k"),
        (3, 9, 4, 2, 4, 1500.0, "scores in the thousands"),
        (3, 6, 4, 3, 2, -1500.0, "every score far below zero"),
    ):
        q, k, v = rng.normal(size=(L_q, d)) * scale, rng.normal(size=(L_k, d)), rng.normal(size=(L_k, d_v))
        if scale < 0:  # q and k on opposite sides: every score about -1000 or lower
            q, k = -np.abs(q), np.abs(k)
        cases.append(
            Case(
                f"q {q.shape}, k {k.shape}, v {v.shape}, block_size={block}: {note}",
                args=(q, k, v, block),
                arg_names=("q", "k", "v", "block_size"),
                expected=running_softmax_attention(q, k, v, block),
                info={"large": scale > 1, "negative": scale < 0},
            )
        )
    return cases


def _blockwise(q, k, v, block, mistake):
    """The running softmax with one ``mistake``: ``"not rescaled"`` (neither old sum
    times exp(m - m')), ``"ell not rescaled"``, ``"a not rescaled"``, ``"not divided"``,
    ``"inverted"`` (old sums times exp(m' - m), 0 on the first block), ``"short"``
    (blocks one key short), ``"one m"`` (one maximum shared by all queries) or ``"block max"``
    (each block's own maximum instead of the running one), ``"m at 0"`` (m starts at 0, not
    -inf), ``"old m"`` (each block's terms relative to the old maximum, once it is finite),
    ``"pooled sum"`` (p.sum() without an axis: one ell for all queries), ``"loop over q"``
    (blocks over range(0, L_q), not range(0, L_k)) or ``"p block max"`` (the running maximum
    kept and the old sums rescaled, but the block's terms relative to its own maximum).
    The names are the chapter's: m, ell (ℓ) and a."""
    m, ell, a = np.full((len(q), 1), -np.inf), np.zeros((len(q), 1)), np.zeros((len(q), v.shape[1]))
    if mistake == "m at 0":
        m = np.zeros_like(m)
    size = block - 1 if mistake == "short" else block
    for start in range(0, len(q) if mistake == "loop over q" else len(k), block):
        scores = q @ k[start : start + size].T / np.sqrt(q.shape[1])
        new = np.maximum(m, scores.max(axis=1, keepdims=True))
        if mistake == "block max":  # the block's own maximum, not the running one
            new = scores.max(axis=1, keepdims=True)
        if mistake == "one m":  # the largest score of every query so far, for all of them
            new = np.full_like(m, max(m.max(), scores.max()))
        p = np.exp(scores - new)
        if mistake == "old m":  # relative to the maximum before this block
            p = np.exp(scores - np.where(np.isfinite(m), m, new))
        if mistake == "p block max":  # relative to the block's own maximum, not m'
            p = np.exp(scores - scores.max(axis=1, keepdims=True))
        rescale = np.exp(m - new)
        if mistake == "inverted":
            finite = np.isfinite(m)
            rescale = np.where(finite, np.exp(new - np.where(finite, m, 0.0)), 0.0)
        ell_rescale = 1.0 if mistake in ("not rescaled", "ell not rescaled") else rescale
        ell = ell * ell_rescale + (p.sum() if mistake == "pooled sum" else p.sum(axis=1, keepdims=True))
        a_rescale = 1.0 if mistake in ("not rescaled", "a not rescaled") else rescale
        a = a * a_rescale + p @ v[start : start + size]
        m = new
    return a if mistake == "not divided" else a / ell


def _running_mistakes(q, k, v, block) -> list:
    """(wrong output or None, hint) for the typical mistakes, on this case's inputs."""
    d_k = q.shape[1]
    end = len(k) // block * block  # where a loop without the short last block stops
    return [
        (
            _blockwise(q, k, v, block, "not rescaled"),
            "the old sums were computed relative to the old maximum: when a block raises the "
            "maximum from m to m', multiply the old ell and a by exp(m - m') before adding the "
            "block's terms",
        ),
        (
            _blockwise(q, k, v, block, "ell not rescaled"),
            "the weighted sum of values a is rescaled when the maximum grows, but the sum ell "
            "is not: multiply ell by exp(m - m') too",
        ),
        (
            _blockwise(q, k, v, block, "a not rescaled"),
            "the sum ell is rescaled when the maximum grows, but the weighted sum of values a "
            "is not: multiply a by exp(m - m') too",
        ),
        (_blockwise(q, k, v, block, "not divided"), "divide the weighted sum of values a by ell at the end"),
        (
            _blockwise(q, k, v, block, "pooled sum"),
            "p.sum() without an axis adds up the whole block, every query's terms together: each query "
            "needs its own sum, p.sum(axis=1, keepdims=True), shape (L_q, 1)",
        ),
        (
            _blockwise(q, k, v, block, "loop over q") if len(q) < len(k) else None,
            "the blocks run over the keys: range(0, L_k, block_size) with L_k = len(k), not len(q)",
        ),
        (
            _blockwise(q, k, v, block, "old m"),
            "compute the block's terms relative to the new maximum, p = exp(s - m'), after "
            "updating m' = max(m, the block's maximum); relative to the old m they are too large "
            "whenever the block raised the maximum",
        ),
        (
            _blockwise(q, k, v, block, "p block max"),
            "your block's terms p = exp(s - the block's maximum) are relative to the block's own "
            "maximum, but ell and a are relative to the running maximum m': compute p = "
            "exp(s - m'), or multiply p's sum and p @ v by exp(the block's maximum - m') "
            "before adding them",
        ),
        (
            scaled_dot_product_attention(q, k[-block:], v[-block:])[0] if block < len(k) else None,
            "this is attention to the last block only: carry m, ell and a from block to block "
            "(after each block set m = m'; if m stays -inf, exp(m - m') is 0 and every block "
            "wipes out the sums before it)",
        ),
        (
            scaled_dot_product_attention(q * np.sqrt(q.shape[1]), k, v)[0],
            "the scores are q·k / √d_k: divide by the square root of q's last size",
        ),
        (
            scaled_dot_product_attention(q / np.sqrt(d_k), k, v)[0],
            "the scores were divided by d_k; the scale is √d_k, np.sqrt(q.shape[1])",
        ),
        (
            _blockwise(q, k, v, block, "inverted"),
            "when a block raises the maximum from m to m', the old sums shrink: multiply "
            "ell and a by exp(m - m'), not exp(m' - m)",
        ),
        (
            _blockwise(q, k, v, block, "short") if block > 1 else None,
            "each block holds block_size keys, k[start:start + block_size] (the end of a "
            "slice is not included): yours left out one key per block",
        ),
        (
            scaled_dot_product_attention(q, k[:end], v[:end])[0] if 0 < end < len(k) else None,
            "the last block is shorter than the others and was left out: loop over "
            "range(0, L_k, block_size); a slice stops at L_k by itself",
        ),
    ]


def _compare_running(got, case: Case) -> str | None:
    if isinstance(got, torch.Tensor):
        got = got.detach().double().numpy()  # a tensor answer is as good as an array
    problem = compare(got, case.expected, "the output", atol=1e-6)
    if problem is None or not isinstance(got, np.ndarray) or got.shape != case.expected.shape:
        return problem
    if not np.all(np.isfinite(got)):
        with np.errstate(all="ignore"):
            from_zero = _blockwise(*case.args, "m at 0")  # 0 / 0 where every score is far below 0
        if case.info["negative"] and np.allclose(got, from_zero, atol=1e-6, equal_nan=True):
            return (
                f"{problem}\nhint: m must start at -inf (np.full((L_q, 1), -np.inf)), not 0: a "
                "query whose scores all lie far below 0 then gets exp(s - 0) = 0 for every key, so "
                "ell = 0 and a / ell is NaN"
            )
        if not case.info["large"] and np.all(np.isnan(got)):
            return (
                f"{problem}\nhint: m starts at -inf, so on the first block "
                "exp(x - m) is inf (and 0 · inf or inf / inf is NaN): subtract the "
                "new maximum, exp(scores - m'), and multiply the old sums by "
                "exp(m - m'), which is 0 on the first block, not by exp(m' - m)"
            )
        with np.errstate(all="ignore"):  # two mistakes that give inf / inf or 0 / 0 here
            own_max = _blockwise(*case.args, "block max")  # exp(m - m') overflows
            shared = _blockwise(*case.args, "one m")  # ell = 0 for some queries
        like_own = np.allclose(got, own_max, atol=1e-6, equal_nan=True)
        like_shared = np.allclose(got, shared, atol=1e-6, equal_nan=True)
        running = "m' = np.maximum(m, s.max(axis=1, keepdims=True)), shape (L_q, 1)"
        if like_own and like_shared:  # this case cannot tell the two apart
            return (
                f"{problem}\nhint: keep one running maximum per query, {running}: a block's own "
                "maximum makes exp(m - m') overflow when a later block's scores lie far below, "
                "and one maximum for all queries makes ell = 0 for a query far below it"
            )
        if like_own:
            return (
                f"{problem}\nhint: m' must be the running maximum, np.maximum(m, the block's "
                "maximum), not the block's own: when a block's scores lie far below an earlier "
                "block's, exp(m - m') overflows; with the running maximum exp(m - m') <= 1"
            )
        if like_shared:
            return (
                f"{problem}\nhint: one maximum for all queries: a query whose scores lie far "
                "below it gets exp(s - m) = 0 for every key, so ell = 0 and a / ell is NaN; keep one "
                "m per query, shape (L_q, 1): s.max(axis=1, keepdims=True)"
            )
        return (
            f"{problem}\nhint: exp overflowed: subtract the running maximum before exp, and when a block "
            "raises the maximum from m to m', multiply the old sums by exp(m - m')"
        )
    with np.errstate(all="ignore"):  # a mistake may divide 0 by 0 on some case
        mistakes = _running_mistakes(*case.args)
    for wrong, hint in mistakes:
        if wrong is not None and np.allclose(got, wrong, atol=1e-6):
            return f"{problem}\nhint: {hint}"
    return problem


def _running_error_hint(problem: str, case: Case) -> str:
    if "could not be broadcast" in problem:
        return (
            "keep the reduced axis: s.max(axis=1, keepdims=True) and p.sum(axis=1, "
            "keepdims=True) have shape (L_q, 1), one number per query, which broadcasts "
            "against the block's (L_q, block_size) scores"
        )
    return ""


@checker(
    "running softmax",
    _running_cases,
    _compare_running,
    summary="block sizes 1 to 16, a short last block, scores in the thousands and far below zero",
    error_hint=_running_error_hint,
)
def check_running_softmax(fn) -> bool:
    """Check ``fn(q, k, v, block_size) -> out``, ``softmax(q kᵀ / √d_k) v`` computed from blocks of
    ``block_size`` keys with a running maximum, sum and weighted sum of values (FlashAttention's idea).

    NumPy arrays of floats (a tensor answer is accepted too). The checker compares the result; it cannot see
    whether you held a whole row of scores at once, so that part is up to you.

    Shapes:
        q ``(L_q, d_k)``, k ``(L_k, d_k)``, v ``(L_k, d_v)`` -> out ``(L_q, d_v)``.

    Returns True if every case passed.
    """
