"""Chapter 7 (beyond 2017): the checkers of its code exercises.

- :func:`check_mask_tokens`: BERT's masked-token rule (15 % of positions; 80 % ``[MASK]``, 10 % a random
  token, 10 % unchanged).
- :func:`check_running_softmax`: attention computed block by block with a running maximum and sum.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The references are :func:`attnbook.language_models.mask_tokens` and
:func:`attnbook.numpy_attention.running_softmax_attention`.
"""

import functools

import numpy as np
import torch

from attnbook.exercises._checking import Case, checker, compare, kind_of
from attnbook.numpy_attention import running_softmax_attention, scaled_dot_product_attention

__all__ = ["check_mask_tokens", "check_running_softmax"]


# ============================================================ the 80/10/10 rule

MASK_ID, IGNORE = 40, -100
REPLACEMENTS = torch.arange(4, 40)  # ids 0-3 are the specials, 40 is [MASK], 41 [CLS]


def _masking_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 40, (300, 40), generator=g)  # (B, T) ordinary symbols
    ids[:, 0] = 41  # a [CLS] first
    lengths = torch.randint(10, 41, (300,), generator=g)
    ids[torch.arange(40) >= lengths.unsqueeze(1)] = 0  # right padding
    maskable = (ids >= 4) & (ids < 40)
    return [Case("300 rows of up to 40 ids: a [CLS] (41) first, then ordinary ids 4..39, then padding (0); "
                 f"mask_id={MASK_ID}, replacement_ids = 4..39", args=(ids, maskable, MASK_ID, REPLACEMENTS),
                 arg_names=("ids", "maskable", "mask_id", "replacement_ids"))]


def _as_tensor(value):
    return torch.from_numpy(value) if isinstance(value, np.ndarray) else value


def _compare_masking(got, case: Case) -> str | None:
    ids, maskable, mask_id, replacements = case.args
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"returned {kind_of(got)}; return a pair (inputs, targets)"
    inputs, targets = (_as_tensor(item) for item in got)
    for name, value in (("inputs", inputs), ("targets", targets)):
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(ids.shape):
            return f"{name} is {kind_of(value)} but expected a tensor of shape {tuple(ids.shape)}, like ids"
    chosen = targets != IGNORE  # (B, T)
    if not chosen.any():
        return "targets hold -100 everywhere: put the original id at every chosen position"
    if (chosen & ~maskable).any():
        return ("a position that is not maskable (padding or the [CLS] token) was chosen: choose among the "
                "positions where maskable is True")
    if not torch.equal(targets[chosen], ids[chosen]):
        return ("targets at the chosen positions must be the original ids (what the model has to restore), "
                "not the ids after masking")
    if not torch.equal(inputs[~chosen], ids[~chosen]):
        changed = (inputs != ids) & ~chosen
        hint = ""
        if not (inputs[changed] == mask_id).any():
            hint = ("\nhint: every [MASK] has its target, but the positions given a random id have none: targets "
                    "must cover every chosen position, also the 10 % replaced and the 10 % kept")
        return ("inputs changed at positions whose target is -100: change only the chosen positions, and give "
                f"every changed position its original id as target{hint}")
    share = chosen.sum().item() / maskable.sum().item()
    if not 0.13 <= share <= 0.17:
        return f"{share:.1%} of the maskable positions were chosen; expected 15 %"
    as_mask = (inputs == mask_id) & chosen
    random = (inputs != mask_id) & (inputs != ids) & chosen
    kept = (inputs == ids) & chosen
    n = chosen.sum().item()
    shares = f"[MASK] {as_mask.sum().item() / n:.1%}, another id {random.sum().item() / n:.1%}, " \
             f"unchanged {kept.sum().item() / n:.1%}"
    if random.any() and not torch.isin(inputs[random], replacements).all():
        return ("a chosen position got an id that is not in replacement_ids (a special token or [MASK]'s own id): "
                "draw the random ids from replacement_ids")
    chance = 0.1 / len(replacements)  # a random id that happens to be the original one
    expected = {"[MASK]": (as_mask, 0.8), "another id": (random, 0.1 - chance), "unchanged": (kept, 0.1 + chance)}
    for name, (where, target) in expected.items():
        if abs(where.sum().item() / n - target) > 0.045:
            return (f"of the chosen positions: {shares}; expected about 80 %, 10 % and 10 %\n"
                    "hint: draw one uniform number u per chosen position: u < 0.8 -> mask_id, 0.8 <= u < 0.9 -> a "
                    "random id from replacement_ids, otherwise keep the original")
    return None


@checker("80/10/10 masking", _masking_cases, _compare_masking,
         summary="300 rows: which positions, how many, and what each chosen one became")
def check_mask_tokens(fn) -> bool:
    """Check ``fn(ids, maskable, mask_id, replacement_ids) -> (inputs, targets)``, BERT's masked-token rule:
    choose 15 % of the maskable positions at random (each row's share, or each position with probability
    0.15); of the chosen, replace 80 % by ``mask_id``, 10 % by an id drawn from ``replacement_ids``, and keep
    10 %; ``targets`` hold the original id at every chosen position and -100 elsewhere.

    The checker seeds torch's random numbers, so its verdict does not change from run to run; it measures
    the shares on 300 rows and accepts them within a few percentage points.

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
    for L_q, L_k, d, d_v, block, scale, note in ((3, 8, 4, 5, 4, 1.0, "blocks that divide L_k"),
                                                 (2, 7, 4, 3, 3, 1.0, "a last block shorter than the others"),
                                                 (4, 6, 3, 2, 1, 1.0, "blocks of one key"),
                                                 (2, 5, 4, 4, 16, 1.0, "one block larger than L_k"),
                                                 (3, 9, 4, 2, 4, 1500.0, "scores in the thousands")):
        q, k, v = rng.normal(size=(L_q, d)) * scale, rng.normal(size=(L_k, d)), rng.normal(size=(L_k, d_v))
        cases.append(Case(f"q {q.shape}, k {k.shape}, v {v.shape}, block_size={block}: {note}",
                          args=(q, k, v, block), arg_names=("q", "k", "v", "block_size"),
                          expected=running_softmax_attention(q, k, v, block)))
    return cases


def _blockwise(q, k, v, block, mistake):
    """The running softmax with one ``mistake``."""
    m, l, acc = np.full((len(q), 1), -np.inf), np.zeros((len(q), 1)), np.zeros((len(q), v.shape[1]))
    for start in range(0, len(k), block):
        scores = q @ k[start:start + block].T / np.sqrt(q.shape[1])
        new = np.maximum(m, scores.max(axis=1, keepdims=True))
        p = np.exp(scores - new)
        l = l * np.exp(m - new) + p.sum(axis=1, keepdims=True)
        acc = acc * (1.0 if mistake == "acc not rescaled" else np.exp(m - new)) + p @ v[start:start + block]
        m = new
    return acc if mistake == "not divided" else acc / l


def _compare_running(got, case: Case) -> str | None:
    if isinstance(got, torch.Tensor):
        got = got.detach().double().numpy()  # a tensor answer is as good as an array
    problem = compare(got, case.expected, "the output", atol=1e-6)
    if problem is None or not isinstance(got, np.ndarray) or got.shape != case.expected.shape:
        return problem
    q, k, v, block = case.args
    if not np.all(np.isfinite(got)):
        return (f"{problem}\nhint: exp overflowed: subtract the running maximum before exp, and when a block "
                "raises the maximum from m to m', multiply the old sums by exp(m - m')")
    mistakes = [(_blockwise(q, k, v, block, "acc not rescaled"),
                 "the sum l is rescaled when the maximum grows, but the weighted sum of values is not: multiply "
                 "acc by exp(m - m') too"),
                (_blockwise(q, k, v, block, "not divided"), "divide the weighted sum of values by l at the end"),
                (scaled_dot_product_attention(q, k[-block:], v[-block:])[0] if block < len(k) else None,
                 "this is attention to the last block only: carry m, l and acc from block to block"),
                (scaled_dot_product_attention(q * np.sqrt(q.shape[1]), k, v)[0],
                 "the scores are q·k / √d_k: divide by the square root of q's last size")]
    for wrong, hint in mistakes:
        if wrong is not None and np.allclose(got, wrong, atol=1e-6):
            return f"{problem}\nhint: {hint}"
    return problem


@checker("running softmax", _running_cases, _compare_running,
         summary="block sizes 1 to 16, a short last block, scores in the thousands")
def check_running_softmax(fn) -> bool:
    """Check ``fn(q, k, v, block_size) -> out``, ``softmax(q kᵀ / √d_k) v`` computed from blocks of
    ``block_size`` keys with a running maximum, sum and weighted sum of values (FlashAttention's idea).

    NumPy arrays of floats (a tensor answer is accepted too). The checker compares the result; it cannot see
    whether you held a whole row of scores at once, so that part is up to you.

    Shapes:
        q ``(L_q, d_k)``, k ``(L_k, d_k)``, v ``(L_k, d_v)`` -> out ``(L_q, d_v)``.

    Returns True if every case passed.
    """
