"""The checkers of chapters 1-3, audited as learners would use them (issue 23).

For every checker: several differently written right solutions, which must pass, and
typical wrong ones, which must fail with a message that names the mistake. Each defect
the audit found is kept here as the solution that exposed it.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnbook.attention import masked_softmax
from attnbook.exercises import (
    check_additive_attention,
    check_bahdanau_step,
    check_greedy_decode,
    check_local_p_window,
    check_luong_general_score,
    check_luong_step,
    check_masked_loss,
    check_masked_softmax,
    check_teacher_forcing_inputs,
)
from conftest import checker_fails, checker_passes

NEG_INF = float("-inf")

#: The pass line of each checker, as stored in the chapters' notebooks (before wrapping).
PASS_LINES = {
    check_teacher_forcing_inputs: (
        "✓ teacher-forcing inputs: all 5 cases passed (rows of different lengths, a "
        "batch of one, other bos_id and pad_id, targets left unchanged).\n"
    ),
    check_masked_loss: (
        "✓ masked loss: all 5 cases passed (rows of different lengths and one without padding, "
        "a batch of one, pad_id other than 0, logits of ±1000, B, T and V all different, "
        "the gradient reaching logits).\n"
    ),
    check_greedy_decode: (
        "✓ greedy decoding: all 5 cases passed (rows finishing at different steps, a "
        "row stopped by max_len, an empty answer, other bos_id and eos_id).\n"
    ),
    check_masked_softmax: (
        "✓ masked softmax: all 6 cases passed (padding masks, a (B, 1, L) mask over "
        "(B, T, L) scores, a causal mask, a fully masked row, masked positions with the largest scores, "
        "scores near ±1000).\n"
    ),
    check_additive_attention: (
        "✓ additive attention: all 5 cases passed (unequal B, L, d_q, d_k, N; padding "
        "masks; mask=None; a batch of one; a fully masked row).\n"
    ),
    check_bahdanau_step: (
        "✓ Bahdanau decoder step: all 3 cases passed (padding and no padding; B, E, H, A, S, V, N all different).\n"
    ),
    check_luong_general_score: (
        "✓ Luong general score: all 5 cases passed (B, S, d_t, d_s all different in four cases; "
        "a square, non-symmetric W_a in one; a batch of one).\n"
    ),
    check_luong_step: (
        "✓ Luong decoder step: all 3 cases passed (padding and no padding; B, E, H, S, "
        "V all different; a non-symmetric W_a).\n"
    ),
    check_local_p_window: (
        "✓ local-p window: all 5 cases passed (centres inside, at and near both ends, "
        "fractional centres, D = 1 to 4).\n"
    ),
}


def _passes(checker, solution, capsys):
    out = checker_passes(checker, solution, capsys)
    assert " ".join(out.split()) == " ".join(PASS_LINES[checker].split())  # wrapped at 88
    assert max(len(line) for line in out.splitlines()) <= 88, out


def _raises(*args):
    raise ValueError("a bug in the learner's code")


def _returns_none(*args):
    return None


def _prints(*args):
    print("the answer")


# ====================================================== chapter 1: teacher forcing


def _bos(targets, bos_id):
    return torch.full_like(targets[:, :1], bos_id)  # (B, 1)


def tf_cat(targets, bos_id, pad_id):
    return torch.cat([_bos(targets, bos_id), targets[:, :-1]], dim=1)


def tf_pad(targets, bos_id, pad_id):
    return F.pad(targets[:, :-1], (1, 0), value=bos_id)


def tf_roll(targets, bos_id, pad_id):
    inputs = torch.roll(targets, shifts=1, dims=1)  # a new tensor
    inputs[:, 0] = bos_id
    return inputs


def tf_new_full(targets, bos_id, pad_id):
    inputs = targets.new_full(targets.shape, pad_id)
    inputs[:, 0] = bos_id
    inputs[:, 1:] = targets[:, :-1]
    return inputs


def tf_lists(targets, bos_id, pad_id):
    return torch.tensor([[bos_id] + row[:-1] for row in targets.tolist()])


def tf_numpy_inside(targets, bos_id, pad_id):
    array = targets.numpy()
    column = np.full((array.shape[0], 1), bos_id, dtype=array.dtype)
    return torch.from_numpy(np.concatenate([column, array[:, :-1]], axis=1))


def tf_int32(targets, bos_id, pad_id):
    return tf_cat(targets, bos_id, pad_id).int()


def tf_pad_under_padding(targets, bos_id, pad_id):
    return tf_cat(targets, bos_id, pad_id).masked_fill(targets == pad_id, pad_id)


@pytest.mark.parametrize(
    "solution", [tf_cat, tf_pad, tf_roll, tf_new_full, tf_lists, tf_numpy_inside, tf_int32, tf_pad_under_padding]
)
def test_teacher_forcing_accepts_right_solutions(solution, capsys):
    _passes(check_teacher_forcing_inputs, solution, capsys)


def tf_in_place(targets, bos_id, pad_id):
    targets[:, 1:] = targets[:, :-1].clone()
    targets[:, 0] = bos_id
    return targets


TF_WRONG = [
    (lambda t, b, p: t[:, :-1], ["shape (3, 3) but expected (3, 4)", "column of bos_id in front"]),
    (lambda t, b, p: torch.cat([_bos(t, b), t], 1), ["you kept the last column"]),
    (lambda t, b, p: torch.cat([t[:, 1:], _bos(t, p)], 1), ["you shifted to the left"]),
    (
        lambda t, b, p: torch.cat([_bos(t, b), _bos(t, b), t[:, :-2]], 1),
        ["you shifted by two steps; shift by one"],
    ),  # defect: no hint before
    (lambda t, b, p: torch.cat([_bos(t, b), t[:, 1:]], 1), ["not only the first be replaced by bos_id"]),
    (
        lambda t, b, p: t.clone(),  # defect: a wrong hint before
        ["this is targets unchanged"],
    ),
    (
        lambda t, b, p: torch.cat([_bos(t, p), t[:, :-1]], 1),  # defect: "a fixed number"
        ["the first column holds pad_id=0; it must be bos_id=1", "targets, bos_id, pad_id"],
    ),
    (
        lambda t, p, b: tf_cat(t, b, p),  # swapped names; defect: "not a fixed number"
        ["the first column holds pad_id=0"],
    ),
    (
        lambda t, b, p: torch.roll(t, 1, dims=1),  # defect: "not a fixed number"
        ["torch.roll wraps the last column around to the front"],
    ),
    (lambda t, b, p: tf_cat(t, 1, p), ["bos_id=7 (use the argument", "case 4 of 5"]),
    (
        lambda t, b, p: tf_cat(t, b, p).masked_fill(t == p, 0),  # defect: no hint before
        ["differs only where targets hold padding (pad_id=9)", "not 0", "case 4 of 5"],
    ),
    (  # learner review: the padding mask one column early, no hint before
        lambda t, b, p: tf_cat(t, b, p).masked_fill(torch.cat([t[:, 1:] == p, t[:, :1] != t[:, :1]], 1), p),
        ["pad_id is one column early", "targets == pad_id"],
    ),
    (
        lambda t, b, p: tf_cat(t, b, p).float(),
        ["dtype torch.float32 but expected torch.int64", "token ids must be integers"],
    ),
    (
        lambda t, b, p: tf_cat(t, b, p).to(torch.complex64),  # defect: was accepted
        ["token ids must be integers"],
    ),
    (lambda t, b, p: tf_cat(t, b, p) > 0, ["token ids must be integers"]),
    (lambda t, b, p: tf_cat(t, b, p).T, ["shape (4, 3)", "looks transposed"]),
    (lambda t, b, p: tf_cat(t, b, p).unsqueeze(0), ["the same shape as targets"]),
    (
        lambda t, b, p: tf_cat(t, b, p).numpy(),  # defect: no hint before
        ["a NumPy array", "return a torch tensor"],
    ),
    (lambda t, b, p: tf_cat(t, b, p).tolist(), ["not a list"]),
    (lambda t, b, p: (tf_cat(t, b, p), t), ["return only the tensor"]),
    (tf_in_place, ["changed its input `targets` in place"]),
    (_raises, ["raised ValueError: a bug in the learner's code"]),
    (_returns_none, ["returned None — did you forget `return`?"]),
    (_prints, ["use `return`, not `print`"]),
]


@pytest.mark.parametrize(("wrong", "fragments"), TF_WRONG)
def test_teacher_forcing_names_the_mistake(wrong, fragments, capsys):
    checker_fails(check_teacher_forcing_inputs, wrong, capsys, *fragments)


# ========================================================= chapter 1: masked loss


def _token_nll(logits, targets):
    """-log p(target) at every position: (B, T)."""
    log_probs = F.log_softmax(logits, dim=-1)  # (B, T, V)
    return -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def ml_gather_mask(logits, targets, pad_id):
    mask = targets != pad_id  # (B, T)
    return (_token_nll(logits, targets) * mask).sum() / mask.sum()


def ml_cross_entropy(logits, targets, pad_id):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=pad_id)


def ml_cross_entropy_transposed(logits, targets, pad_id):
    return F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=pad_id)


def ml_nll_loss(logits, targets, pad_id):
    log_probs = F.log_softmax(logits, dim=-1).flatten(0, 1)  # (B·T, V)
    losses = F.nll_loss(log_probs, targets.flatten(), reduction="none")  # (B·T,)
    mask = (targets != pad_id).flatten().float()
    return (losses * mask).sum() / mask.sum()


def ml_float64(logits, targets, pad_id):
    return ml_gather_mask(logits.double(), targets, pad_id)


def ml_masked_select(logits, targets, pad_id):
    return _token_nll(logits, targets).masked_select(targets != pad_id).mean()


def ml_boolean_index(logits, targets, pad_id):
    mask = targets != pad_id
    log_probs = logits[mask].log_softmax(dim=-1)  # (N, V): the real positions only
    return -log_probs.gather(1, targets[mask].unsqueeze(1)).mean()


def ml_where_logsumexp(logits, targets, pad_id):
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    nll = torch.logsumexp(logits, dim=-1) - picked  # (B, T)
    mask = targets != pad_id
    return torch.where(mask, nll, torch.zeros_like(nll)).sum() / mask.sum()


def ml_one_hot(logits, targets, pad_id):
    one_hot = F.one_hot(targets, logits.size(-1)).to(logits.dtype)  # (B, T, V)
    nll = -(F.log_softmax(logits, dim=-1) * one_hot).sum(dim=-1)  # (B, T)
    mask = targets.ne(pad_id).to(logits.dtype)
    return nll.mul(mask).sum().div(mask.sum())


@pytest.mark.parametrize(
    "solution",
    [
        ml_gather_mask,
        ml_cross_entropy,
        ml_cross_entropy_transposed,
        ml_nll_loss,
        ml_float64,
        ml_masked_select,
        ml_boolean_index,
        ml_where_logsumexp,
        ml_one_hot,
    ],
)
def test_masked_loss_accepts_right_solutions(solution, capsys):
    _passes(check_masked_loss, solution, capsys)


def ml_variant(mistake):
    """ml_gather_mask with one mistake."""

    def masked_loss(logits, targets, pad_id):
        dims = {"softmax over T": 1, "softmax over B": 0}
        dim = dims.get(mistake, -1)
        if mistake == "probabilities":
            values = -F.softmax(logits, dim=-1)
        elif mistake == "probabilities, no minus":
            values = F.softmax(logits, dim=-1)
        elif mistake == "raw logits":
            values = -logits
        elif mistake == "softmax().log()":
            values = -F.softmax(logits, dim=-1).log()
        elif mistake == "exp by hand":
            values = -(logits.exp() / logits.exp().sum(dim=-1, keepdim=True)).log()
        else:
            values = -F.log_softmax(logits, dim=dim)
        if mistake == "no minus":
            values = -values
        nll = values.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
        mask = targets != (0 if mistake == "pad 0" else pad_id)
        if mistake == "inverted":
            mask = ~mask
        if mistake == "all positions":
            return nll.mean()
        if mistake == "zeroed, then mean":
            return (nll * mask).mean()
        if mistake == "sum":
            return (nll * mask).sum()
        if mistake == "row means":
            return ((nll * mask).sum(dim=1) / mask.sum(dim=1)).mean()
        if mistake == "per position":
            return nll * mask
        if mistake == "per row":
            return (nll * mask).sum(dim=1) / mask.sum(dim=1)
        if mistake == "keepdim":
            return (nll * mask).sum(dim=(0, 1), keepdim=True) / mask.sum()
        loss = (nll * mask).sum() / mask.sum()
        if mistake == "item":
            return loss.item()
        if mistake == "numpy":
            return loss.detach().numpy()
        if mistake == "detach":
            return loss.detach()
        if mistake == "torch.tensor":
            return torch.tensor(loss.item(), requires_grad=True)
        return loss

    return masked_loss


def ml_no_grad(logits, targets, pad_id):
    with torch.no_grad():
        return ml_gather_mask(logits, targets, pad_id)


def ml_numpy_inside(logits, targets, pad_id):
    log_probs = logits.log_softmax(dim=-1).numpy()
    return torch.tensor(float(log_probs.mean()))


def ml_in_place(logits, targets, pad_id):
    logits.masked_fill_((targets == pad_id).unsqueeze(-1), 0.0)
    return ml_gather_mask(logits, targets, pad_id)


def ml_unflattened_cross_entropy(logits, targets, pad_id):
    return F.cross_entropy(logits, targets, ignore_index=pad_id)


def ml_gather_without_unsqueeze(logits, targets, pad_id):
    picked = F.log_softmax(logits, dim=-1).gather(-1, targets)
    return -picked.mean()


def ml_mean_of_mask(logits, targets, pad_id):
    mask = targets != pad_id
    return (_token_nll(logits, targets) * mask).mean() / mask.mean()


ML_WRONG = [
    (ml_variant("all positions"), ["mean over all B·T positions, padding included", "case 1 of 5"]),
    (ml_variant("zeroed, then mean"), [".mean() still divides by all B·T positions", "mask.sum()"]),
    (ml_variant("sum"), ["this is the sum over the real tokens; the loss is their mean"]),
    (ml_variant("row means"), ["the mean of each row's mean", "each token counts the same"]),
    (ml_variant("inverted"), ["the loss on the padding only: the mask is inverted"]),
    (ml_variant("pad 0"), ["the argument pad_id (here 4), not a fixed 0", "case 3 of 5"]),
    (ml_variant("no minus"), ["the loss is negative", "put the minus sign in"]),
    (ml_variant("probabilities"), ["minus the probabilities", "log_softmax, not softmax"]),
    (ml_variant("probabilities, no minus"), ["averaged the probabilities", "log_softmax, not softmax"]),
    (ml_variant("raw logits"), ["you gathered the raw logits", "log_softmax over the vocabulary"]),
    (
        ml_variant("softmax().log()"),
        ["the loss is NaN", "log(0) = -inf", "logits reach ±1000", "use F.log_softmax", "case 5 of 5"],
    ),
    (ml_variant("exp by hand"), ["the loss is NaN", "use F.log_softmax", "case 5 of 5"]),
    (ml_variant("softmax over T"), ["log_softmax over dim=1 normalises over the time steps T", "dim=-1"]),
    (ml_variant("softmax over B"), ["log_softmax over dim=0 normalises over the rows of the batch"]),
    (ml_variant("per position"), ["shape (3, 5) but expected ()", "one loss per position"]),
    (ml_variant("per row"), ["shape (3,) but expected ()", "one loss per row"]),
    (ml_variant("keepdim"), ["shape (1, 1) but expected ()", "drop keepdim=True"]),
    (ml_variant("item"), ["returned a Python number", "(the right value)", "no .item()", "loss.backward()"]),
    (ml_variant("numpy"), ["returned a NumPy array", "return the torch scalar tensor", "loss.backward()"]),
    (ml_variant("detach"), ["detached from logits (requires_grad is False)", "no .item(), .detach()"]),
    (ml_no_grad, ["detached from logits (requires_grad is False)", "torch.no_grad()"]),
    (ml_variant("torch.tensor"), ["detached from logits (it does not depend on logits)"]),
    (ml_numpy_inside, ["numpy()", "logits requires grad, as a model's output does"]),
    (ml_in_place, ["in-place", "do not change logits in place"]),
    (ml_unflattened_cross_entropy, ["F.cross_entropy wants the vocabulary in dimension 1", "logits.flatten(0, 1)"]),
    (ml_gather_without_unsqueeze, ["targets.unsqueeze(-1)"]),
    (ml_mean_of_mask, ["a bool or integer tensor has no mean", "mask.sum()"]),
    (lambda lg, t, p: ml_gather_mask(lg, t, p).long(), ["dtype torch.int64", "floating-point scalar"]),
    (lambda lg, t, p: (ml_gather_mask(lg, t, p), t != p), ["return only the loss"]),
    (_raises, ["raised ValueError: a bug in the learner's code"]),
    (_returns_none, ["returned None — did you forget `return`?"]),
    (_prints, ["use `return`, not `print`"]),
    (lambda lg, t, p: "loss", ["returned a str ('loss'); expected a scalar tensor"]),
]


@pytest.mark.parametrize(("wrong", "fragments"), ML_WRONG)
def test_masked_loss_names_the_mistake(wrong, fragments, capsys):
    checker_fails(check_masked_loss, wrong, capsys, *fragments)


def test_masked_loss_cases_hold_what_the_summary_says():
    from attnbook.exercises.seq2seq import _masked_loss_cases

    cases = _masked_loss_cases()
    shapes = [tuple(case.info["logits"].shape) for case in cases]
    assert all(len(set(shape)) == 3 for shape in shapes), shapes  # B, T, V all different
    assert any(shape[0] == 1 for shape in shapes)  # a batch of one
    for case in cases:
        targets, pad_id = case.info["targets"], case.info["pad_id"]
        real = targets != pad_id
        assert (~real).any(), targets  # padding in every case (an inverted mask is not empty)
        lengths = real.sum(dim=1)
        assert bool((real == (torch.arange(targets.size(1)) < lengths[:, None])).all())  # pad only at the end
        if pad_id != 0:
            assert bool((targets[real] == 0).any()), targets  # a fixed 0 in the mask is wrong here
    assert any(len(set(c.info["targets"].ne(c.info["pad_id"]).sum(1).tolist())) > 1 for c in cases)
    assert any(bool(c.info["targets"].ne(c.info["pad_id"]).all(1).any()) for c in cases)  # a row without padding
    large = [case for case in cases if case.info["large"]]
    assert large and all(float(c.info["logits"].detach().abs().max()) > 900 for c in large)
    for case in large:  # softmax().log() really overflows there
        logits, targets, pad_id = case.args
        naive = ml_variant("softmax().log()")(logits, targets, pad_id)
        assert not math.isfinite(float(naive.detach()))


# ===================================================== chapter 1: greedy decoding


def greedy_flags(model, src, max_len, bos_id, eos_id):
    batch_size = src.shape[0]
    state = model.start(src)
    prev = torch.full((batch_size,), bos_id, dtype=torch.long)
    tokens, finished = [[] for _ in range(batch_size)], [False] * batch_size
    for _ in range(max_len):
        logits, state, _ = model.step(state, prev)
        prev = logits.argmax(dim=-1)
        for row, token in enumerate(prev.tolist()):
            if token == eos_id:
                finished[row] = True
            elif not finished[row]:
                tokens[row].append(token)
        if all(finished):
            break
    return tokens


def greedy_tensor_flags(model, src, max_len, bos_id, eos_id):
    state = model.start(src)
    prev = src.new_full((src.size(0),), bos_id)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    columns, step = [], 0
    while step < max_len and not done.all():
        logits, state, _ = model.step(state, prev)
        prev = logits.argmax(dim=1)
        done = done | (prev == eos_id)
        columns.append(prev.masked_fill(done, -1))
        step += 1
    return [[t for t in row if t != -1] for row in torch.stack(columns, 1).tolist()]


def greedy_one_row_at_a_time(model, src, max_len, bos_id, eos_id):
    answers = []
    for row in src:
        state, token, answer = model.start(row.unsqueeze(0)), torch.tensor([bos_id]), []
        while len(answer) < max_len:
            logits, state, _ = model.step(state, token)
            token = logits.argmax(dim=-1)
            if token.item() == eos_id:
                break
            answer.append(token.item())
        answers.append(answer)
    return answers


def _all_steps(model, src, max_len, bos_id, steps=None):
    """Every step's argmax, (B, steps) as lists, without looking at eos."""
    state, prev, columns = model.start(src), torch.full((src.shape[0],), bos_id), []
    for _ in range(max_len if steps is None else steps):
        logits, state, _ = model.step(state, prev)
        prev = logits.argmax(-1)
        columns.append(prev)
    return torch.stack(columns, dim=1).tolist()


def greedy_full_then_cut(model, src, max_len, bos_id, eos_id):
    rows = _all_steps(model, src, max_len, bos_id)
    return [row[: row.index(eos_id)] if eos_id in row else row for row in rows]


def greedy_softmax_numpy_tuple(model, src, max_len, bos_id, eos_id):
    state = model.start(src)
    prev = torch.tensor([bos_id] * len(src))
    results, active = [[] for _ in src], set(range(len(src)))
    for _ in range(max_len):
        logits, state, weights = model.step(state, prev)
        prev = torch.softmax(logits, dim=-1).max(dim=-1).indices
        for row in sorted(active):
            token = np.int64(prev[row])
            if token == eos_id:
                active.discard(row)
            else:
                results[row].append(token)
        if not active:
            break
    return tuple(results)


@pytest.mark.parametrize(
    "solution",
    [greedy_flags, greedy_tensor_flags, greedy_one_row_at_a_time, greedy_full_then_cut, greedy_softmax_numpy_tuple],
)
def test_greedy_accepts_right_solutions(solution, capsys):
    _passes(check_greedy_decode, solution, capsys)


def greedy_variant(mistake):
    """greedy_flags with one mistake."""

    def greedy(model, src, max_len, bos_id, eos_id):
        batch_size = src.shape[0]
        first = state = model.start(src)
        prev = torch.full((batch_size,), 1 if mistake == "bos 1" else bos_id)
        start = [bos_id] if mistake == "bos in output" else []
        tokens = [list(start) for _ in range(batch_size)]
        finished = [False] * batch_size
        generator = torch.Generator().manual_seed(0)
        steps = {"range(max_len - 1)": max_len - 1, "range(max_len + 1)": max_len + 1}
        default = max_len if mistake != "no max_len" else 10**6
        for _ in range(steps.get(mistake, default)):
            if mistake == "restart":
                state = model.start(src)
            used = first if mistake == "stale" else state
            logits, state, _ = model.step(used, prev)
            predicted = logits.argmax(dim=-1)
            if mistake == "sample":
                probs = torch.softmax(logits, dim=-1)
                predicted = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            if mistake != "feed bos":
                prev = predicted
            for row, token in enumerate(predicted.tolist()):
                end = 2 if mistake == "eos 2" else eos_id
                if finished[row]:
                    continue
                if token == end and mistake != "no stop":
                    finished[row] = True
                    if mistake == "eos in output":
                        tokens[row].append(token)
                elif token != end:
                    tokens[row].append(token)
            if all(finished) or (mistake == "batch stops" and any(finished)):
                break
        if mistake == "tensor":
            return torch.tensor([t + [0] * (max_len - len(t)) for t in tokens])
        if mistake == "padded":
            return [t + [0] * (max_len - len(t)) for t in tokens]
        return tokens

    return greedy


def greedy_extra_step(model, src, max_len, bos_id, eos_id):
    """Right tokens, but one model.step call too many."""
    rows = _all_steps(model, src, max_len, bos_id, steps=max_len + 1)
    return [(row[: row.index(eos_id)] if eos_id in row else row)[:max_len] for row in rows]


def greedy_cut_at_last_eos(model, src, max_len, bos_id, eos_id):
    rows = _all_steps(model, src, max_len, bos_id)
    return [row[: len(row) - 1 - row[::-1].index(eos_id)] if eos_id in row else row for row in rows]


def greedy_time_major(model, src, max_len, bos_id, eos_id):
    return [list(column) for column in zip(*_all_steps(model, src, max_len, bos_id))]


def greedy_argmax_without_dim(model, src, max_len, bos_id, eos_id):
    state, prev = model.start(src), torch.full((src.shape[0],), bos_id)
    for _ in range(max_len):
        logits, state, _ = model.step(state, prev)
        prev = logits.argmax()
    return []


def greedy_argmax_dim0(model, src, max_len, bos_id, eos_id):
    state, prev = model.start(src), torch.full((src.shape[0],), bos_id)
    for _ in range(max_len):
        logits, state, _ = model.step(state, prev)
        prev = logits.argmax(dim=0)
    return []


def greedy_keepdim_lists(model, src, max_len, bos_id, eos_id):
    rows = greedy_flags(model, src, max_len, bos_id, eos_id)
    return [[[token] for token in row] for row in rows]


def greedy_changes_src(model, src, max_len, bos_id, eos_id):
    answer = greedy_flags(model, src, max_len, bos_id, eos_id)
    src.zero_()
    return answer


GREEDY_WRONG = [
    (greedy_variant("bos in output"), ["row 0 starts with bos_id=1"]),
    (greedy_variant("eos in output"), ["row 0 ends with eos_id=2; stop before eos"]),
    (greedy_variant("no stop"), ["goes on after the model predicted eos"]),
    (
        greedy_cut_at_last_eos,  # defect: was accepted
        ["row 0 contains eos_id=2; stop at the first eos"],
    ),
    (greedy_variant("no max_len"), ["raised RunawayDecoding", "stop after max_len steps"]),
    (greedy_variant("range(max_len + 1)"), ["has 7 tokens but max_len=6"]),
    (
        greedy_extra_step,  # defect: was accepted
        ["model.step was called 9 times for one batch and max_len=8", "call model.step at most max_len times"],
    ),
    (
        greedy_variant("range(max_len - 1)"),  # defect: vaguer hint before
        ["row 0 has 5 tokens but should have max_len=6", "range(max_len)"],
    ),
    (greedy_variant("feed bos"), ["got bos_id=1 at every step; feed back the tokens"]),
    (greedy_variant("stale"), ["called twice with the same state"]),
    (
        greedy_variant("restart"),  # defect: the hint blamed the first input before
        ["model.start was called again", "call model.start(src) once"],
    ),
    (greedy_variant("batch stops"), ["row 1 stops after 3 tokens, too early"]),
    (greedy_variant("eos 2"), ["contains eos_id=9", "not with a fixed 2", "case 4 of 5"]),
    (greedy_variant("bos 1"), ["the first input must be bos_id=5"]),
    (greedy_variant("sample"), ["feed back the argmax of the logits"]),
    (
        greedy_argmax_without_dim,  # defect: no hint before
        ["got shape ()", "argmax() without dim"],
    ),
    (greedy_argmax_dim0, ["argmax over dim=0 instead of the last dimension"]),
    (greedy_variant("tensor"), ["returned a tensor of shape (3, 8); return a list"]),
    (greedy_variant("padded"), ["row 0 has padding after its answer"]),
    (
        greedy_time_major,  # defect: no hint before
        ["returned 8 rows but src has 3", "one list per decoding step"],
    ),
    (
        greedy_keepdim_lists,  # defect: the hint spoke of 0-d tensors before
        ["row 0 holds lists such as [5], not ints"],
    ),
    (lambda m, s, n, b, e: [[torch.tensor(5)]] * 3, ["row 0 holds Tensor values, not ints"]),
    (lambda m, s, n, b, e: m(s, s), ["only decodes step by step"]),
    (greedy_changes_src, ["changed its input `src` in place"]),
    (_raises, ["raised ValueError"]),
    (_returns_none, ["returned None"]),
]


@pytest.mark.parametrize(("wrong", "fragments"), GREEDY_WRONG)
def test_greedy_names_the_mistake(wrong, fragments, capsys):
    checker_fails(check_greedy_decode, wrong, capsys, *fragments)


# ====================================================== chapter 2: masked softmax


def ms_fill(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, NEG_INF), dim=-1).nan_to_num(0.0)


def ms_where(scores, mask):
    weights = torch.softmax(torch.where(mask, scores, torch.tensor(NEG_INF)), dim=-1)
    return torch.where(mask, weights, torch.zeros(()))


def ms_finite_fill(scores, mask):
    lowest = torch.finfo(scores.dtype).min
    weights = torch.softmax(scores.masked_fill(~mask, lowest), dim=-1)
    return weights * mask


def ms_log_mask(scores, mask):
    return torch.softmax(scores + mask.float().log(), dim=-1).nan_to_num(0.0)


def ms_renormalised(scores, mask):
    weights = torch.softmax(scores, dim=-1) * mask
    return weights / weights.sum(dim=-1, keepdim=True).clamp_min(1e-30)


def ms_float64(scores, mask):
    return ms_fill(scores.double(), mask)


def ms_by_hand(scores, mask):
    shifted = scores - scores.max(dim=-1, keepdim=True).values
    exps = shifted.exp() * mask
    totals = exps.sum(dim=-1, keepdim=True)
    return torch.where(totals > 0, exps / totals.clamp(min=1e-30), torch.zeros_like(exps))


def ms_index_expanded(scores, mask):
    mask = mask.expand_as(scores)
    filled = scores.clone()
    filled[~mask] = NEG_INF
    weights = torch.softmax(filled, dim=-1)
    weights[~mask] = 0.0
    return weights


@pytest.mark.parametrize(
    "solution",
    [ms_fill, ms_where, ms_finite_fill, ms_log_mask, ms_float64, ms_index_expanded],
)
def test_masked_softmax_accepts_right_solutions(solution, capsys):
    _passes(check_masked_softmax, solution, capsys)


@pytest.mark.parametrize("underflowing", [ms_renormalised, ms_by_hand])
def test_masked_softmax_rejects_answers_that_underflow_when_masked_scores_dominate(underflowing, capsys):
    # right in exact arithmetic; in float32 a row whose largest scores are masked comes out all zeros
    checker_fails(check_masked_softmax, underflowing, capsys, "case 6 of 6", "mask the scores before the softmax")


def ms_naive_exp(scores, mask):
    exps = scores.exp() * mask
    totals = exps.sum(dim=-1, keepdim=True)
    return torch.where(totals > 0, exps / totals, torch.zeros_like(exps))


def ms_index_not_expanded(scores, mask):
    filled = scores.clone()
    filled[~mask] = NEG_INF
    return torch.softmax(filled, dim=-1).nan_to_num(0.0)


def ms_in_place(scores, mask):
    scores.masked_fill_(~mask, NEG_INF)
    return torch.softmax(scores, dim=-1).nan_to_num(0.0)


def ms_unsqueezed_mask(scores, mask):
    return ms_fill(scores, mask.unsqueeze(1) if scores.dim() == 3 else mask)


def ms_no_exp(scores, mask):
    masked = scores * mask
    return masked / masked.sum(dim=-1, keepdim=True)


MS_WRONG = [
    (
        lambda s, m: torch.softmax(s, dim=-1),
        ["position 3 of row 1 is masked but got weight", "the mask was not applied"],
    ),
    (lambda s, m: ms_fill(s, ~m), ["True means *may attend*"]),
    (lambda s, m: torch.softmax(s * m, dim=-1), ["exp(0) still gets weight"]),
    (
        lambda s, m: torch.softmax(s.masked_fill(~m, 0.0), -1),  # defect: "multiplying"
        ["masked_fill with 0", "exp(0) still gets weight"],
    ),
    (lambda s, m: torch.softmax(s, dim=-1) * m, ["rows that no longer sum to 1"]),
    (lambda s, m: torch.softmax(s.masked_fill(~m, NEG_INF), dim=0).nan_to_num(), ["the softmax ran over dim=0"]),
    (
        lambda s, m: masked_softmax(s, m, dim=1) if s.dim() == 3 else ms_fill(s, m),
        ["the softmax ran over dim=1", "case 2 of 6"],
    ),
    (
        lambda s, m: masked_softmax(s, m, dim=2),  # defect: no hint before
        ["raised IndexError: Dimension out of range", "not over a fixed dimension number"],
    ),
    (
        lambda s, m: torch.softmax(s.masked_fill(~m, NEG_INF), dim=-1),
        ["contains NaN", "row 1 has no position it may attend", "case 4 of 6"],
    ),
    (
        lambda s, m: torch.softmax(s.masked_fill(~m, -1e9), dim=-1),
        ["row 1 is fully masked but its weights sum to 1", "case 4 of 6"],
    ),
    (ms_naive_exp, ["subtract each row's maximum", "case 5 of 6"]),
    (
        lambda s, m: torch.softmax(s.masked_fill(~m, -1000.0), dim=-1) * m,  # defect
        ["a finite fill value such as -1000 is not far below them", "case 5 of 6"],
    ),
    (
        lambda s, m: torch.log_softmax(s.masked_fill(~m, NEG_INF), dim=-1),  # defect
        ["these are log-weights (log_softmax)"],
    ),
    (
        lambda s, m: torch.log_softmax(s.masked_fill(~m, NEG_INF), -1).nan_to_num(0, 0, 0),
        ["these are log-weights (log_softmax)"],
    ),  # defect: no hint before
    (lambda s, m: s.masked_fill(~m, 0.0), ["the softmax is missing"]),  # defect
    (lambda s, m: s.masked_fill(~m, NEG_INF), ["the softmax is missing"]),  # defect
    (ms_no_exp, ["the exp is missing"]),  # defect: no hint before
    (
        ms_unsqueezed_mask,  # defect: no hint before
        ["shape (3, 3, 4, 6) but expected (3, 4, 6)", "use it without unsqueeze"],
    ),
    (
        ms_index_not_expanded,  # defect: no hint before
        ["raised IndexError", "expand it first, mask.expand_as(scores)", "case 2 of 6"],
    ),
    (ms_in_place, ["changed its input `scores` in place", "scores.masked_fill(~mask, ...)"]),
    (lambda s, m: m, ["must be floats"]),
    (lambda s, m: ms_fill(s, m).sum(-1), ["you summed over the last dimension"]),
    (lambda s, m: ms_fill(s, m).numpy(), ["weights is a NumPy array", "torch tensor"]),
    (_raises, ["raised ValueError"]),
    (_returns_none, ["returned None"]),
]


@pytest.mark.parametrize(("wrong", "fragments"), MS_WRONG)
def test_masked_softmax_names_the_mistake(wrong, fragments, capsys):
    checker_fails(check_masked_softmax, wrong, capsys, *fragments)


def ms_largest_allowed(scores, mask):
    """Stable by hand: subtract the largest allowed score, exp, then zero the masked ones."""
    largest = scores.masked_fill(~mask, NEG_INF).amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)
    exps = (scores - largest).exp() * mask  # a masked score above the largest: inf * 0
    totals = exps.sum(dim=-1, keepdim=True)
    return exps / torch.where(totals == 0, torch.ones_like(totals), totals)


def test_masked_softmax_names_an_overflow_times_the_mask(capsys):
    """exp of a dominant masked score overflows, and inf * 0 is NaN (learner review, round 15)."""
    checker_fails(
        check_masked_softmax,
        ms_largest_allowed,
        capsys,
        "case 6 of 6",
        "contains NaN",
        "exp of a masked score overflowed to inf, and inf × 0 is NaN",
        "mask the scores before exp",
    )


def test_masked_softmax_in_place_advice_fits_the_exercise(capsys):
    """Changing scores in place: the advice is masked_fill or a clone, not torch.cat."""
    out = checker_fails(check_masked_softmax, ms_in_place, capsys, "masked_fill_", ".clone()")
    assert "torch.cat" not in out, out


# =================================================== chapter 2: additive attention


def _soft(scores, mask):
    return torch.softmax(scores, -1) if mask is None else ms_fill(scores, mask)


def aa_vectorised(query, keys, W_q, W_k, v, mask):
    scores = torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v  # (B, L)
    weights = _soft(scores, mask)
    return (weights.unsqueeze(-1) * keys).sum(dim=1), weights


def aa_einsum(query, keys, W_q, W_k, v, mask):
    query_part = torch.einsum("hq,bq->bh", W_q, query)
    hidden = query_part[:, None] + torch.einsum("hk,blk->blh", W_k, keys)
    weights = _soft(torch.einsum("blh,h->bl", torch.tanh(hidden), v), mask)
    return torch.einsum("bl,bld->bd", weights, keys), weights


def aa_linear(query, keys, W_q, W_k, v, mask):
    scores = torch.tanh(F.linear(query, W_q).unsqueeze(1) + F.linear(keys, W_k)) @ v
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, -1e30))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    return torch.bmm(weights.unsqueeze(1), keys).squeeze(1), weights


def aa_rows(query, keys, W_q, W_k, v, mask):
    contexts, weights = [], []
    for b in range(query.shape[0]):
        scores = torch.stack([v @ torch.tanh(W_q @ query[b] + W_k @ k) for k in keys[b]])
        if mask is not None:
            scores = scores.masked_fill(~mask[b], -1e9)
        alpha = torch.softmax(scores, dim=0)
        alpha = alpha if mask is None else alpha * mask[b]
        weights.append(alpha)
        contexts.append(alpha @ keys[b])
    return torch.stack(contexts), torch.stack(weights)


def aa_float64(query, keys, W_q, W_k, v, mask):
    inputs = (x.double() for x in (query, keys, W_q, W_k, v))
    context, weights = aa_vectorised(*inputs, mask)
    return [context, weights]  # a list works as well as a tuple


@pytest.mark.parametrize("solution", [aa_vectorised, aa_einsum, aa_linear, aa_rows, aa_float64])
def test_additive_attention_accepts_right_solutions(solution, capsys):
    _passes(check_additive_attention, solution, capsys)


def additive_variant(mistake):
    """aa_vectorised with one mistake."""

    def additive(query, keys, W_q, W_k, v, mask):
        query_part = query @ (W_q if mistake == "W_q" else W_q.T)  # (B, h)
        key_part = keys @ W_k.T  # (B, L, h)
        if mistake == "tanh parts":
            query_part, key_part = torch.tanh(query_part), torch.tanh(key_part)
        hidden = query_part.unsqueeze(1) + key_part
        act = {"relu": torch.relu, "no tanh": lambda x: x, "tanh parts": lambda x: x, "tanh after v": lambda x: x}.get(
            mistake, torch.tanh
        )
        hidden = act(hidden)
        scores = hidden.sum(-1) if mistake == "no v" else hidden @ v
        if mistake == "tanh after v":
            scores = torch.tanh(scores)
        unmasked = torch.softmax(scores, dim=-1)
        if mask is not None and mistake != "no mask":
            if mistake == "multiply":
                scores = scores * mask
            else:
                fill = 0.0 if mistake == "fill 0" else NEG_INF
                scores = scores.masked_fill(~mask, fill)
        weights = torch.softmax(scores, dim=0 if mistake == "dim 0" else -1)
        if mistake != "NaN":
            weights = weights.nan_to_num(0.0)
        mixing = {"from scores": scores, "unmasked context": unmasked}.get(mistake, weights)
        values = keys @ W_k.T if mistake == "projected" else keys
        dim = -1 if mistake == "sum features" else 1
        products = mixing.unsqueeze(-1) * values  # (B, L, d_k)
        context = products.mean(1) if mistake == "mean" else products.sum(dim)
        return (weights, context) if mistake == "swapped" else (context, weights)

    return additive


def aa_changes_mask(query, keys, W_q, W_k, v, mask):
    if mask is not None:
        mask.fill_(True)
    return aa_vectorised(query, keys, W_q, W_k, v, mask)


def aa_context_unsqueeze_1(query, keys, W_q, W_k, v, mask):
    """The context with the weights unsqueezed in the wrong place: (B, 1, L) * (B, L, d_k)."""
    weights = aa_vectorised(query, keys, W_q, W_k, v, mask)[1]
    return (weights.unsqueeze(1) * keys).sum(1), weights


def aa_crashes_on_none(query, keys, W_q, W_k, v, mask):
    scores = torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v
    weights = ms_fill(scores, mask)
    return (weights.unsqueeze(1) @ keys).squeeze(1), weights


AA_WRONG = [
    (additive_variant("W_q"), ["raised RuntimeError", "query @ W_q.T"]),
    (additive_variant("no tanh"), ["tanh is missing"]),
    (additive_variant("relu"), ["the nonlinearity is tanh, not relu"]),  # defect
    (additive_variant("tanh parts"), ["not around each part separately"]),  # defect
    (additive_variant("tanh after v"), ["the tanh comes before v"]),  # defect
    (additive_variant("no v"), ["dot product of v"]),
    (additive_variant("no mask"), ["the mask was not applied"]),
    (additive_variant("multiply"), ["exp(0) still gets weight"]),
    (
        additive_variant("fill 0"),  # defect: the hint spoke of multiplying
        ["masked_fill with 0", "exp(0) still gets weight"],
    ),
    (additive_variant("dim 0"), ["the softmax ran over the batch (dim=0)"]),
    (additive_variant("from scores"), ["uses the softmax weights"]),
    (
        additive_variant("unmasked context"),  # defect: "the mask was not applied" before
        ["context values differ", "weights from before the masking"],
    ),
    (additive_variant("projected"), ["not the projected keys"]),
    (
        additive_variant("sum features"),  # defect: no hint before
        ["context has shape (3, 5) but expected (3, 6)", "sums over the L keys (dim=1)"],
    ),
    (additive_variant("swapped"), ["order (context, weights)"]),
    (additive_variant("mean"), ["context values differ", "the weighted sum of the keys, weights @ keys"]),
    (additive_variant("NaN"), ["row 1 has no position it may attend", "case 5 of 5"]),
    (lambda *a: aa_vectorised(*a)[0], ["(the context?)"]),
    (aa_crashes_on_none, ["mask may be None", "case 2 of 5"]),
    (aa_changes_mask, ["changed its input `mask` in place"]),
    (
        lambda *a: dict(zip(("context", "weights"), aa_vectorised(*a))),
        ["expected a tuple of 2 items (context, weights)"],
    ),
    (_raises, ["raised ValueError"]),
    (_returns_none, ["returned None"]),
]


@pytest.mark.parametrize(("wrong", "fragments"), AA_WRONG)
def test_additive_attention_names_the_mistake(wrong, fragments, capsys):
    checker_fails(check_additive_attention, wrong, capsys, *fragments)


def test_additive_attention_shape_hint_follows_the_error(capsys):
    """A context whose shapes do not fit gets the context's hint, not the scores' (learner
    review, round 13): the error names L and d_k, which meet only in the context."""
    out = checker_fails(
        check_additive_attention,
        aa_context_unsqueeze_1,
        capsys,
        "raised RuntimeError",
        "check the shapes of the context",
        "(weights.unsqueeze(-1) * keys).sum(dim=1)",
    )
    assert "query @ W_q.T" not in out, out


# ================================================= chapter 2: Bahdanau decoder step


def bs_reference(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
    context, weights = aa_vectorised(hidden, annotations, W_a, U_a, v_a, mask)
    new_hidden = cell(torch.cat([embedded, context], dim=-1), hidden)
    logits = torch.cat([new_hidden, context, embedded], dim=-1) @ W_o.T
    return logits, new_hidden, context, weights


def bs_einsum(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
    part = torch.einsum("kh,bh->bk", W_a, hidden)[:, None] + torch.einsum("ka,bsa->bsk", U_a, annotations)
    e = torch.einsum("bsk,k->bs", torch.tanh(part), v_a)
    w = torch.softmax(e.masked_fill(~mask, NEG_INF), -1)
    c = torch.einsum("bs,bsa->ba", w, annotations)
    s = cell(torch.cat([embedded, c], -1), hidden)
    return torch.cat([s, c, embedded], -1) @ W_o.T, s, c, w


def bs_linear(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
    part = torch.tanh(F.linear(hidden, W_a).unsqueeze(1) + F.linear(annotations, U_a))
    scores = F.linear(part, v_a.unsqueeze(0)).squeeze(-1)
    weights = torch.softmax(scores.masked_fill(mask.logical_not(), -1e9), dim=1) * mask
    context = torch.bmm(weights.unsqueeze(1), annotations).squeeze(1)
    state = cell(torch.cat((embedded, context), 1), hidden)
    logits = F.linear(torch.cat((state, context, embedded), 1), W_o)
    return logits, state, context, weights


def bs_float64_scores(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
    e = (
        torch.tanh((hidden.double() @ W_a.double().T).unsqueeze(1) + annotations.double() @ U_a.double().T)
        @ v_a.double()
    )
    w = torch.softmax(e.masked_fill(~mask, NEG_INF), -1).float()
    c = (w.unsqueeze(-1) * annotations).sum(1)
    s = cell(torch.cat([embedded, c], -1), hidden)
    return [torch.cat([s, c, embedded], -1) @ W_o.T, s, c, w]


@pytest.mark.parametrize("solution", [bs_reference, bs_einsum, bs_linear, bs_float64_scores])
def test_bahdanau_step_accepts_right_solutions(solution, capsys):
    _passes(check_bahdanau_step, solution, capsys)


def bahdanau_variant(mistake):
    """bs_reference with one mistake."""

    def step(embedded, hidden, annotations, mask, cell, W_a, U_a, v_a, W_o):
        query = hidden
        if mistake == "luong order":
            zeros = annotations.new_zeros(annotations.size(0), annotations.size(2))
            query = cell(torch.cat([embedded, zeros], -1), hidden)
        W = W_a if mistake == "W_a" else W_a.T
        part = (query @ W).unsqueeze(1) + annotations @ U_a.T
        act = {"no tanh": lambda x: x, "relu": torch.relu}.get(mistake, torch.tanh)
        scores = act(part) @ v_a
        if mistake == "multiply":
            scores = scores * mask
        elif mistake != "unmasked":
            scores = scores.masked_fill(~mask, NEG_INF)
        dim = 0 if mistake == "dim 0" else -1
        weights = torch.softmax(scores, dim=dim).nan_to_num(0.0)
        context = (weights.unsqueeze(1) @ annotations).squeeze(1)
        cell_context = context @ U_a.T if mistake == "projected context" else context
        pair = {"ce": [cell_context, embedded], "no context": [embedded]}.get(mistake, [embedded, cell_context])
        if mistake == "luong order":
            new = query
        elif mistake == "cell(hidden, input)":
            new = cell(hidden, torch.cat(pair, -1))
        elif mistake == "no previous state":
            new = cell(torch.cat(pair, -1))
        else:
            new = cell(torch.cat(pair, -1), hidden)
        state = hidden if mistake == "old state out" else new
        parts = {"order": [context, state, embedded], "no embedding": [state, context]}
        logits = torch.cat(parts.get(mistake, [state, context, embedded]), -1) @ W_o.T
        if mistake == "softmax logits":
            logits = torch.softmax(logits, -1)
        returned = hidden if mistake == "returns s_(i-1)" else new
        if mistake == "re-attends":  # the circular mix: attention again, from s_i
            part = (new @ W_a.T).unsqueeze(1) + annotations @ U_a.T
            scores = (torch.tanh(part) @ v_a).masked_fill(~mask, NEG_INF)
            weights = torch.softmax(scores, dim=-1)
            context = (weights.unsqueeze(1) @ annotations).squeeze(1)
        return logits, returned, context, weights

    return step


def bs_changes_hidden(embedded, hidden, annotations, mask, cell, *matrices):
    hidden.zero_()
    return bs_reference(embedded, hidden, annotations, mask, cell, *matrices)


BS_WRONG = [
    (bahdanau_variant("no tanh"), ["the tanh is missing"]),
    (bahdanau_variant("relu"), ["the nonlinearity is tanh, not relu"]),  # defect
    (
        bahdanau_variant("unmasked"),  # defect: the message showed the logits' numbers
        ["weights: position", "the padded source positions got weight"],
    ),
    (
        bahdanau_variant("multiply"),  # defect: no hint before
        ["weights: position", "exp(0) still gets weight"],
    ),
    (
        bahdanau_variant("dim 0"),  # defect: only the logits' numbers before
        ["weights values differ", "the softmax ran over the batch (dim=0)"],
    ),
    (bahdanau_variant("ce"), ["the embedding first, then the context"]),
    (bahdanau_variant("old state out"), ["the output layer reads the *new* state"]),
    (bahdanau_variant("order"), ["[s_i; c_i; E y_(i-1)] in this order"]),  # defect
    (bahdanau_variant("no embedding"), ["the output layer reads all three"]),  # defect
    (bahdanau_variant("softmax logits"), ["without a softmax"]),  # defect
    (bahdanau_variant("luong order"), ["score the *previous* state s_(i-1)"]),
    (bahdanau_variant("no context"), ["concatenate the embedding and the context before the GRU step"]),
    (
        bahdanau_variant("cell(hidden, input)"),  # defect: "concatenate ..." before
        ["call the cell as cell(input, hidden)"],
    ),
    (
        bahdanau_variant("no previous state"),  # defect: no hint before
        ["the cell also needs the previous state"],
    ),
    (
        bahdanau_variant("projected context"),  # defect: "concatenate ..." before
        ["not the projected U_a h_j"],
    ),
    (bahdanau_variant("W_a"), ["hidden @ W_a.T"]),  # defect: generic shapes before
    (
        bahdanau_variant("returns s_(i-1)"),  # defect: no hint before
        ["this is the previous state s_(i-1): return the new one"],
    ),
    (
        bahdanau_variant("re-attends"),  # learner review, round 15: no hint before
        ["weights values differ", "these weights score the new state s_i"],
    ),
    (  # learner review: only a shape message before
        lambda *a: (lambda lo, hi, c, w: (lo, hi, w, c))(*bs_reference(*a)),
        [
            "returned in the order (logits, hidden, weights, context)",
            "return them as (logits, hidden, context, weights)",
        ],
    ),
    (lambda *a: bs_reference(*a)[:3], ["a tuple of 3 items but expected 4"]),
    (lambda *a: tuple(x.long() for x in bs_reference(*a)), ["dtype torch.int64"]),
    (lambda *a: bs_reference(*a)[:3] + (bs_reference(*a)[3] > 0,), ["weights has dtype torch.bool"]),
    (bs_changes_hidden, ["changed its input `hidden` in place"]),
    (_raises, ["raised ValueError"]),
    (_returns_none, ["returned None"]),
]


@pytest.mark.parametrize(("wrong", "fragments"), BS_WRONG)
def test_bahdanau_step_names_the_mistake(wrong, fragments, capsys):
    checker_fails(check_bahdanau_step, wrong, capsys, *fragments)


# ================================================= chapter 3: the general score


def lg_einsum(h_t, h_s, W_a):
    return torch.einsum("bd,de,ble->bl", h_t, W_a, h_s)


def lg_matmul(h_t, h_s, W_a):
    return ((h_t @ W_a).unsqueeze(1) @ h_s.transpose(1, 2)).squeeze(1)


def lg_bmm(h_t, h_s, W_a):
    return torch.bmm(h_s, (h_t @ W_a).unsqueeze(2)).squeeze(2)


def lg_broadcast_sum(h_t, h_s, W_a):
    return (h_s * (h_t @ W_a).unsqueeze(1)).sum(dim=-1)


def lg_keys_first(h_t, h_s, W_a):
    return (h_s @ W_a.T @ h_t.unsqueeze(-1)).squeeze(-1)


def lg_loops(h_t, h_s, W_a):
    return torch.stack(
        [torch.stack([h_t[b] @ W_a @ h_s[b, j] for j in range(h_s.shape[1])]) for b in range(h_t.shape[0])]
    )


def lg_numpy_inside(h_t, h_s, W_a):
    arrays = (h_t.numpy(), W_a.numpy(), h_s.numpy())
    return torch.from_numpy(np.einsum("bd,de,ble->bl", *arrays))


def lg_float64(h_t, h_s, W_a):
    return lg_einsum(h_t.double(), h_s.double(), W_a.double())


@pytest.mark.parametrize(
    "solution", [lg_einsum, lg_matmul, lg_bmm, lg_broadcast_sum, lg_keys_first, lg_loops, lg_numpy_inside, lg_float64]
)
def test_luong_general_score_accepts_right_solutions(solution, capsys):
    _passes(check_luong_general_score, solution, capsys)


def lg_changes_W_a(h_t, h_s, W_a):
    W_a.t_()
    return lg_einsum(h_t, h_s, W_a.T)


LG_WRONG = [
    (lambda h, s, W: lg_einsum(h, s, W.T), ["W_a is used transposed"]),
    (lambda h, s, W: (s @ W @ h.unsqueeze(-1)).squeeze(-1), ["W_a is used transposed"]),
    (lambda h, s, W: torch.einsum("bd,bld->bl", h, s), ["W_a is missing"]),
    (lambda h, s, W: torch.softmax(lg_einsum(h, s, W), -1), ["these are softmax weights"]),
    (lambda h, s, W: lg_einsum(h, s, W) / h.shape[1] ** 0.5, ["no scaling"]),
    (
        lambda h, s, W: torch.tanh(lg_einsum(h, s, W)),  # defect: no named mistake before
        ["a tanh was applied", "*concat* score"],
    ),
    (lambda h, s, W: ((h @ W).unsqueeze(1) * s).sum(1), ["the sum ran over the S=5 positions"]),
    (lambda h, s, W: (h @ W).unsqueeze(1) * s, ["a sum over the d_s features"]),
    (
        lambda h, s, W: (s @ (h @ W).unsqueeze(-1)).squeeze(),  # defect: a vaguer hint
        ["shape (6,) but expected (1, 6)", ".squeeze() without a dimension", "case 4 of 5"],
    ),
    (lambda h, s, W: h @ W @ s.transpose(1, 2), ["every row's h_t was scored against every"]),
    (lambda h, s, W: (s @ W.T) @ h.T, ["every row's annotations were scored against every"]),
    (lambda h, s, W: torch.einsum("bd,de,cle->bl", h, W, s), ["summed over the batch"]),
    (lambda h, s, W: lg_einsum(h, s.roll(1, dims=0), W), ["was scored against the annotations of row"]),
    (lambda h, s, W: lg_einsum(h, s, W).T, ["put the batch first"]),
    (
        lambda h, s, W: lg_einsum(h, s, W).numpy(),  # defect: no hint before
        ["a NumPy array", "return a torch tensor of shape (3, 5)"],
    ),
    (
        lambda h, s, W: lg_einsum(h, s, W).tolist(),  # defect: no hint before
        ["return a torch tensor of shape (3, 5)"],
    ),
    (lambda h, s, W: (lg_einsum(h, s, W), None), ["expected a torch tensor"]),
    (lambda h, s, W: lg_einsum(h, s, W).long(), ["dtype torch.int64"]),
    (lg_changes_W_a, ["changed its input `W_a` in place"]),
    (_raises, ["raised ValueError"]),
    (_returns_none, ["returned None"]),
]


@pytest.mark.parametrize(("wrong", "fragments"), LG_WRONG)
def test_luong_general_score_names_the_mistake(wrong, fragments, capsys):
    checker_fails(check_luong_general_score, wrong, capsys, *fragments)


# =================================================== chapter 3: Luong decoder step


def ls_reference(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s):
    h = cell(torch.cat([embedded, attentional], dim=-1), hidden)
    scores = ((annotations @ W_a.T) @ h.unsqueeze(-1)).squeeze(-1)
    weights = masked_softmax(scores, mask)
    context = (weights.unsqueeze(1) @ annotations).squeeze(1)
    a = torch.tanh(torch.cat([context, h], dim=-1) @ W_c.T)
    return a @ W_s.T, h, a, weights


def ls_linear(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s):
    h = cell(torch.cat((embedded, attentional), 1), hidden)
    scores = torch.bmm(F.linear(annotations, W_a), h.unsqueeze(2)).squeeze(2)
    weights = torch.where(mask, scores, torch.full_like(scores, NEG_INF)).softmax(-1)
    context = (weights.unsqueeze(2) * annotations).sum(1)
    a = torch.tanh(F.linear(torch.cat((context, h), 1), W_c))
    return F.linear(a, W_s), h, a, weights


def ls_rows(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s):
    h = cell(torch.cat([embedded, attentional], -1), hidden)
    rows = []
    for b in range(h.shape[0]):
        scores = torch.stack([h[b] @ W_a @ annotations[b, s] for s in range(annotations.shape[1])])
        row = torch.zeros(annotations.shape[1])
        row[mask[b]] = torch.softmax(scores[mask[b]], dim=0)
        rows.append(row)
    weights = torch.stack(rows)
    context = (weights.unsqueeze(1) @ annotations).squeeze(1)
    a = torch.tanh(torch.cat([context, h], -1) @ W_c.T)
    return a @ W_s.T, h, a, weights


def ls_split_W_c(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s):
    h = cell(torch.cat([embedded, attentional], -1), hidden)
    scores = torch.einsum("bh,hk,bsk->bs", h, W_a, annotations)
    weights = torch.softmax(scores.masked_fill(~mask, -1e9), -1)
    context = torch.einsum("bs,bsh->bh", weights, annotations)
    H = h.size(1)
    a = torch.tanh(context @ W_c[:, :H].T + h @ W_c[:, H:].T)
    return (W_s @ a.T).T, h, a, weights


def ls_float64_scores(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s):
    h = cell(torch.cat([embedded, attentional], -1), hidden)
    scores = torch.einsum("bh,hk,bsk->bs", h.double(), W_a.double(), annotations.double())
    weights = masked_softmax(scores, mask)
    context = (weights.unsqueeze(1) @ annotations.double()).squeeze(1)
    a = torch.tanh(torch.cat([context, h.double()], -1) @ W_c.double().T)
    return a @ W_s.double().T, h, a, weights


@pytest.mark.parametrize("solution", [ls_reference, ls_linear, ls_rows, ls_split_W_c, ls_float64_scores])
def test_luong_step_accepts_right_solutions(solution, capsys):
    _passes(check_luong_step, solution, capsys)


def luong_variant(mistake):
    """ls_reference with one mistake."""

    def step(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s):
        fed = {"feed ae": [attentional, embedded], "feed hidden": [embedded, hidden], "no feeding": [embedded]}.get(
            mistake, [embedded, attentional]
        )
        if mistake == "cell(hidden, input)":
            h = cell(hidden, torch.cat(fed, -1))
        elif mistake == "no previous state":
            h = cell(torch.cat(fed, -1))
        else:
            h = cell(torch.cat(fed, -1), hidden)
        query = {"old query": hidden, "attentional query": attentional}.get(mistake, h)
        keys = {"dot": annotations, "transposed": annotations @ W_a}.get(mistake, annotations @ W_a.T)
        scores = (keys @ query.unsqueeze(-1)).squeeze(-1)
        if mistake == "scaled":
            scores = scores / math.sqrt(h.shape[-1])
        if mistake == "multiply":
            scores = scores * mask
        elif mistake != "unmasked":
            scores = scores.masked_fill(~mask, NEG_INF)
        dim = 0 if mistake == "dim 0" else -1
        weights = torch.softmax(scores, dim=dim).nan_to_num(0.0)
        context = (weights.unsqueeze(1) @ annotations).squeeze(1)
        pair = [h, context] if mistake == "hc" else [context, h]
        a = torch.cat(pair, -1) @ (W_c if mistake == "W_c" else W_c.T)
        a = a if mistake == "no tanh" else torch.tanh(a)
        logits = (h if mistake == "logits from h" else a) @ W_s.T
        if mistake == "softmax logits":
            logits = torch.softmax(logits, -1)
        if mistake == "log_softmax logits":
            logits = torch.log_softmax(logits, -1)
        third = context if mistake == "returns context" else a
        returned = hidden if mistake == "returns h_(t-1)" else h
        if mistake == "swapped":
            return logits, third, returned, weights
        return logits, returned, third, weights

    return step


def ls_changes_attentional(embedded, hidden, attentional, *rest):
    attentional.mul_(0.5)
    return ls_reference(embedded, hidden, attentional, *rest)


LS_WRONG = [
    (luong_variant("old query"), ["the query is the *new* state h_t"]),
    (
        luong_variant("attentional query"),  # defect: no hint before
        ["not the previous attentional state"],
    ),
    (luong_variant("transposed"), ["W_a is used transposed"]),
    (luong_variant("dot"), ["W_a is missing", "*dot* score"]),  # defect: no hint before
    (luong_variant("scaled"), ["divided by √H"]),  # defect: no hint before
    (luong_variant("unmasked"), ["the padded source positions got weight"]),
    (luong_variant("multiply"), ["exp(0) still gets weight"]),  # defect: no hint before
    (
        luong_variant("dim 0"),  # defect: only the logits' numbers before
        ["weights values differ", "the softmax ran over the batch (dim=0)"],
    ),
    (luong_variant("hc"), ["the context first"]),
    (luong_variant("no tanh"), ["the tanh is missing"]),
    (
        luong_variant("returns context"),  # defect: no hint before
        ["the third item is the attentional state", "not the context c_t"],
    ),
    (luong_variant("logits from h"), ["the logits come from the attentional state"]),
    (luong_variant("softmax logits"), ["without a softmax"]),  # defect: no hint before
    (luong_variant("log_softmax logits"), ["without a log_softmax"]),  # a learner's answer
    (luong_variant("swapped"), ["in this order: h_t, then h̃_t"]),
    (luong_variant("no feeding"), ["with input feeding, concatenate the embedding"]),
    (
        luong_variant("feed ae"),  # defect: the message showed the logits' numbers
        ["hidden values differ", "the embedding first"],
    ),
    (
        luong_variant("feed hidden"),  # defect: generic hint before
        ["input feeding feeds the previous *attentional* state"],
    ),
    (
        luong_variant("cell(hidden, input)"),  # defect: generic shapes before
        ["cell(input, h_(t-1)): the input first"],
    ),
    (
        luong_variant("no previous state"),  # defect: the input-feeding hint before
        ["the cell also needs the previous state"],
    ),
    (
        luong_variant("returns h_(t-1)"),  # defect: the input-feeding hint before
        ["this is the previous state h_(t-1): return the new one"],
    ),
    (luong_variant("W_c"), ["W_c (6, 12) is stored like nn.Linear.weight"]),  # defect
    (lambda *a: ls_reference(*a)[:3] + (ls_reference(*a)[3] > 0,), ["weights has dtype torch.bool"]),
    (ls_changes_attentional, ["changed its input `attentional` in place"]),
    (_raises, ["raised ValueError"]),
    (_returns_none, ["returned None"]),
]


@pytest.mark.parametrize(("wrong", "fragments"), LS_WRONG)
def test_luong_step_names_the_mistake(wrong, fragments, capsys):
    checker_fails(check_luong_step, wrong, capsys, *fragments)


# ===================================================== chapter 3: local-p window


def window(position, length, D, sigma=None, exponent=None, keep=None, positions=None, centre=None):
    """The factors as a list, as a learner would write it; keywords inject mistakes."""
    sigma = D / 2 if sigma is None else sigma
    exponent = exponent or (lambda d, sigma: d**2 / (2 * sigma**2))
    keep = keep or (lambda distance, D: distance <= D)
    p = position if centre is None else centre(position)
    return [math.exp(-exponent(s - p, sigma)) if keep(abs(s - p), D) else 0.0 for s in (positions or range)(length)]


def window_torch(position, length, D):
    s = torch.arange(length, dtype=torch.float32)
    d = s - position
    gaussian = torch.exp(-(d**2) / (2 * (D / 2) ** 2))
    return torch.where(d.abs() <= D, gaussian, torch.zeros(length))


def window_numpy(position, length, D):
    s = np.arange(length)
    factors = np.exp(-((s - position) ** 2) / (2 * (D / 2) ** 2))
    factors[np.abs(s - position) > D] = 0.0
    return factors


def window_clipped_loop(position, length, D):
    factors = [0.0] * length
    first = max(0, math.ceil(position - D))
    last = min(length - 1, math.floor(position + D))
    for s in range(first, last + 1):
        factors[s] = math.exp(-((s - position) ** 2) / (2 * (D / 2) ** 2))
    return factors


def window_float64(position, length, D):
    s = torch.arange(length, dtype=torch.float64)
    return torch.exp(-((s - position) ** 2) / (D**2 / 2)) * ((s - position).abs() <= D)


@pytest.mark.parametrize(
    "solution",
    [
        window,
        window_torch,
        window_numpy,
        window_clipped_loop,
        window_float64,
        lambda p, n, D: tuple(window(p, n, D)),
        lambda p, n, D: [np.float32(x) for x in window(p, n, D)],
        lambda p, n, D: [torch.tensor(x) for x in window(p, n, D)],
    ],
)
def test_local_p_window_accepts_right_solutions(solution, capsys):
    _passes(check_local_p_window, solution, capsys)


def window_past_the_end(position, length, D):
    factors = [0.0] * length
    for s in range(max(0, math.ceil(position - D)), math.floor(position + D) + 1):
        factors[s] = math.exp(-((s - position) ** 2) / (2 * (D / 2) ** 2))
    return factors


def window_negative_index(position, length, D):
    factors = torch.zeros(length)
    for s in range(math.ceil(position - D), min(length, math.floor(position + D) + 1)):
        factors[s] = math.exp(-((s - position) ** 2) / (2 * (D / 2) ** 2))
    return factors


def window_int_bounds(position, length, D):
    factors = [0.0] * length
    for s in range(max(0, int(position - D)), min(length, int(position + D))):
        factors[s] = math.exp(-((s - position) ** 2) / (2 * (D / 2) ** 2))
    return factors


def window_floor_sigma_torch(position, length, D):
    d = torch.arange(length) - position
    return torch.exp(-(d**2) / (2 * (D // 2) ** 2)) * (d.abs() <= D)


LW_WRONG = [
    (lambda p, n, D: window(p, n, D, sigma=D), ["you used sigma = D; Luong et al. use sigma = D / 2"]),
    (
        lambda p, n, D: window(p, n, D, sigma=D // 2),  # defect: no hint before
        ["raised ZeroDivisionError", "D // 2 rounds it down to 0", "case 4 of 5"],
    ),
    (window_floor_sigma_torch, ["D // 2 rounds it down to 0", "case 4 of 5"]),  # defect
    (lambda p, n, D: window(p, n, D, keep=lambda d, D: True), ["must get exactly 0"]),
    (lambda p, n, D: window(p, n, D, keep=lambda d, D: d < D), ["(not < D)"]),
    (
        lambda p, n, D: window(p, n, D, exponent=lambda d, s: d**2 / s**2),  # defect
        ["the 2 is missing"],
    ),
    (
        lambda p, n, D: window(p, n, D, exponent=lambda d, s: d**2 / 2 * s**2),  # defect
        ["put the denominator in parentheses"],
    ),
    (
        lambda p, n, D: window(p, n, D, exponent=lambda d, s: d**2 / (2 * s)),  # defect
        ["the denominator 2 sigma² is 8"],
    ),
    (
        lambda p, n, D: window(p, n, D, exponent=lambda d, s: abs(d) / (2 * s**2)),
        ["the distance is squared"],
    ),  # defect: no hint before
    (
        lambda p, n, D: window(p, n, D, exponent=lambda d, s: -(d**2) / (2 * s**2)),
        ["the exponent is negative"],
    ),  # defect: no hint before
    (
        lambda p, n, D: window(p, n, D, positions=lambda n: range(1, n + 1)),  # defect
        ["positions run from 0 to length - 1"],
    ),
    (
        lambda p, n, D: window(p, n, D, centre=round),  # defect: no hint before
        ["rounding it (round, int"],
    ),
    (
        lambda p, n, D: window(p, n, D, centre=int),  # defect: no hint before
        ["rounding it (round, int"],
    ),
    (
        lambda p, n, D: [x / sum(window(p, n, D)) for x in window(p, n, D)],  # defect
        ["the factors are not normalised"],
    ),
    (
        lambda p, n, D: [x / (D / 2 * math.sqrt(2 * math.pi)) for x in window(p, n, D)],
        ["not a probability density"],
    ),  # defect: no hint before
    (
        window_negative_index,  # defect: no hint before
        ["a negative index wraps around", "case 2 of 5"],
    ),
    (
        window_past_the_end,  # defect: no hint before
        ["raised IndexError", "can reach past the ends", "case 3 of 5"],
    ),
    (
        window_int_bounds,  # defect: no hint before
        ["position 2 is outside the window (|2 - 4.3| = 2.3 > D = 2)"],
    ),
    (
        lambda p, n, D: window(p, n, D, keep=lambda d, D: d <= D - 1),  # defect
        ["is inside the window", "not 0"],
    ),
    (
        lambda p, n, D: [x for x in window(p, n, D) if x > 0],  # defect: no hint before
        ["not only the positions inside it"],
    ),
    (
        lambda p, n, D: window(p, n - 1, D),  # defect: no hint before
        ["one factor per position", "range(length)"],
    ),
    (
        lambda p, n, D: (x for x in window(p, n, D)),  # defect: "expected a torch tensor"
        ["returned a generator", "a list of floats or a 1-D tensor"],
    ),
    (
        lambda p, n, D: [x or None for x in window(p, n, D)],  # defect: "a tensor"
        ["item 0 of the list is None"],
    ),
    (
        lambda p, n, D: torch.tensor(window(p, n, D)).round().long(),  # defect: crashed
        ["dtype torch.int64", "floats between 0 and 1"],
    ),
    (
        lambda p, n, D: torch.tensor(window(p, n, D)).unsqueeze(1),  # defect: no hint
        ["shape (10, 1)", "a 1-D tensor of shape (10,)"],
    ),
    (lambda p, n, D: torch.tensor(window(p, n, D)) * float("nan"), ["contains NaN"]),
    (_raises, ["raised ValueError"]),
    (_returns_none, ["returned None"]),
]


@pytest.mark.parametrize(("wrong", "fragments"), LW_WRONG)
def test_local_p_window_names_the_mistake(wrong, fragments, capsys):
    checker_fails(check_local_p_window, wrong, capsys, *fragments)


# ================================================================= every checker

RIGHT = {
    check_teacher_forcing_inputs: tf_cat,
    check_greedy_decode: greedy_flags,
    check_masked_softmax: ms_fill,
    check_additive_attention: aa_vectorised,
    check_bahdanau_step: bs_reference,
    check_luong_general_score: lg_einsum,
    check_luong_step: ls_reference,
    check_local_p_window: window,
}


@pytest.mark.parametrize("checker", list(RIGHT))
def test_verdicts_are_stable_and_leave_the_random_state_alone(checker, capsys):
    """The cases are seeded inside the checker: the same verdict and message every time,
    whatever the learner's random state, which the checker leaves unchanged."""
    wrong = {
        check_teacher_forcing_inputs: TF_WRONG,
        check_greedy_decode: GREEDY_WRONG,
        check_masked_softmax: MS_WRONG,
        check_additive_attention: AA_WRONG,
        check_bahdanau_step: BS_WRONG,
        check_luong_general_score: LG_WRONG,
        check_luong_step: LS_WRONG,
        check_local_p_window: LW_WRONG,
    }[checker][0][0]
    outputs = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        before = torch.get_rng_state()
        assert checker(RIGHT[checker]) is True
        assert checker(wrong) is False
        assert torch.equal(torch.get_rng_state(), before)
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]


def test_masked_softmax_names_a_mask_applied_after_the_softmax_where_masked_scores_dominate(capsys):
    def renormalised_after(scores, mask):  # renormalising hides the problem unless a masked score dominates
        weights = torch.softmax(scores, dim=-1) * mask
        return weights / weights.sum(-1, keepdim=True).clamp_min(1e-12)

    checker_fails(
        check_masked_softmax,
        renormalised_after,
        capsys,
        "mask the scores before the softmax",
        "masked positions have by far the largest scores",
    )
