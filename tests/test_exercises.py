"""attnbook.exercises: the checker machinery, generic tests of every checker, and the checkers of chapters 1-3.

Every checker must pass a right solution, fail typical wrong ones with a specific
message, and never raise (except KeyboardInterrupt, so a learner can stop a hanging loop).
"""

import math
import sys

import numpy as np
import pytest
import torch

import attnbook.attention
import attnbook.exercises
from attnbook.exercises import (
    check_additive_attention,
    check_greedy_decode,
    check_local_p_window,
    check_luong_general_score,
    check_masked_softmax,
    check_teacher_forcing_inputs,
)
from attnbook.exercises._checking import (
    Case,
    RunawayDecoding,
    ScriptedSeq2Seq,
    call_safely,
    compare,
    run_checks,
)
from conftest import checker_fails, checker_passes

#: Every checker the package exports (the generic tests below run on each).
CHECKERS = [getattr(attnbook.exercises, name) for name in attnbook.exercises.__all__]


_passes, _fails = checker_passes, checker_fails


# =============================================================== compare(): messages


def test_compare_equal_values_give_none():
    assert compare(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7])) is None
    assert compare(torch.tensor([1, 2]), torch.tensor([1, 2])) is None
    assert compare(np.array([0.5]), np.array([0.5])) is None
    assert compare((torch.ones(2), [1, 2]), (torch.ones(2), [1, 2])) is None
    assert compare(True, True) is None
    assert compare(3, 3) is None and compare(0.1 + 0.2, 0.3) is None
    assert compare("abc", "abc") is None


def test_compare_float_precision_may_differ():
    assert compare(torch.tensor([0.5], dtype=torch.float64), torch.tensor([0.5])) is None
    assert compare(torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1, 2])) is None


def test_compare_shape_message():
    message = compare(torch.zeros(2, 5, 3), torch.zeros(2, 3, 5))
    assert message == "the output has shape (2, 5, 3) but expected (2, 3, 5)"


def test_compare_dtype_message():
    message = compare(torch.zeros(2, 2), torch.zeros(2, 2, dtype=torch.bool))
    assert message == "the output has dtype torch.float32 but expected torch.bool"


def test_compare_nan_message():
    got = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, float("nan")]])
    expected = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    message = compare(got, expected, name="weights")
    assert message.startswith("weights contains NaN at index (1, 2) (1 of 6 values)")


def test_compare_expected_inf_message():
    message = compare(torch.tensor([-1e9, 0.0]), torch.tensor([float("-inf"), 0.0]))
    assert "has -1e+09 at index 0 but expected -inf" in message


def test_compare_values_message_names_the_largest_difference():
    got = torch.tensor([[0.1, 0.2, 0.56], [0.3, 0.3, 0.4]])
    expected = torch.tensor([[0.1, 0.2, 0.25], [0.3, 0.35, 0.4]])
    message = compare(got, expected)
    assert message == ("the output values differ: largest difference 0.31 at index (0, 2); expected 0.25, got 0.56")


def test_compare_integer_values_message():
    message = compare(torch.tensor([[1, 5], [1, 7]]), torch.tensor([[1, 5], [1, 8]]))
    assert message == "the output values differ at index (1, 1): expected 8, got 7 (1 of 4 values differ)"


def test_compare_wrong_types():
    assert compare(None, torch.zeros(2)) == "the output is None; expected a torch tensor"
    assert compare([1.0, 2.0], torch.zeros(2)) == "the output is a list of 2 items; expected a torch tensor"
    assert compare(np.zeros(2), torch.zeros(2)).startswith("the output is a NumPy array of shape (2,)")
    message = compare((torch.zeros(2), torch.zeros(2)), torch.zeros(2))
    assert "a tuple of 2 items" in message and "return only the tensor" in message
    assert compare(torch.tensor(3), 3) == "the output is a tensor of shape (); expected a Python number (use .item())"


def test_compare_tuple_messages():
    expected = (torch.zeros(2, 3), torch.ones(2, 4))
    message = compare((torch.zeros(2, 3),), expected, item_names=("out", "weights"))
    assert message == "the output is a tuple of 1 item but expected 2 (out, weights)"
    message = compare(torch.zeros(2, 3), expected, item_names=("out", "weights"))
    assert message == "the output is a tensor of shape (2, 3); expected a tuple of 2 items (out, weights)"
    message = compare((torch.zeros(2, 3), torch.ones(4, 2)), expected, item_names=("out", "weights"))
    assert message == "weights has shape (4, 2) but expected (2, 4)"


def test_compare_list_messages():
    assert compare([[1, 2], [3]], [[1, 2], [4]]) == "the output[1][0] is 3 but expected 4"
    assert compare([1, 2], [1, 2, 3]).startswith("the output has 2 items but expected 3")
    assert compare(torch.tensor([1, 2]), [1, 2]).endswith("expected a list (use .tolist())")


def test_compare_bool_messages():
    assert compare(False, True) == "the output is False but expected True"
    assert compare(1, True) == "the output is an int (1) but expected a bool (True)"


# ============================================================ call_safely, run_checks


def _case(*args, expected=None, names=("x",)):
    return Case("x = a small tensor", args=args, arg_names=names, expected=expected)


def test_call_safely_reports_exceptions():
    def broken(x):
        return x.no_such_method()

    value, problem = call_safely(broken, _case(torch.zeros(2)))
    assert value is None
    assert problem.startswith("raised AttributeError: ")
    assert "no_such_method" in problem


def test_call_safely_reports_none():
    value, problem = call_safely(lambda x: None, _case(torch.zeros(2)))
    assert problem == "returned None — did you forget `return`?"


def test_call_safely_notices_print_instead_of_return(capsys):
    def prints(x):
        print(x + 1)

    _, problem = call_safely(prints, _case(torch.zeros(2)))
    assert "use `return`, not `print`" in problem
    assert "tensor([1., 1.])" in capsys.readouterr().out  # what it printed still shows


def test_call_safely_notices_in_place_changes():
    def in_place(x):
        x.add_(1)
        return x

    _, problem = call_safely(in_place, _case(torch.zeros(2)))
    assert problem.startswith("changed its input `x` in place")


def test_call_safely_unnamed_arguments_and_numpy_inputs():
    def in_place(a, b):
        b[0] = 5
        return a

    _, problem = call_safely(in_place, Case("two arrays", args=(np.zeros(2), np.zeros(2))))
    assert problem.startswith("changed its input `argument 2` in place")


def test_call_safely_catches_system_exit_and_other_base_exceptions():
    class Odd(BaseException):
        pass

    def odd(x):
        raise Odd("strange")

    _, problem = call_safely(lambda x: sys.exit(3), _case(1))
    assert problem.startswith("raised SystemExit")
    _, problem = call_safely(odd, _case(1))
    assert problem == "raised Odd: strange"


def test_call_safely_lets_keyboard_interrupt_through():
    def interrupted(x):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        call_safely(interrupted, _case(1))


def test_run_checks_prints_tick_and_cross(capsys):
    cases = [_case(torch.tensor([1.0, 2.0]), expected=torch.tensor([2.0, 4.0]))]
    assert run_checks("doubling", lambda x: 2 * x, cases, summary="one small vector") is True
    assert capsys.readouterr().out == "✓ doubling: the one case passed (one small vector).\n"

    assert run_checks("doubling", lambda x: x + 2, cases) is False
    out = capsys.readouterr().out
    assert out.startswith("✗ doubling: the output values differ: largest difference 1 at index 0; expected 2, got 3")
    assert out.endswith("\n  case 1 of 1: x = a small tensor\n")


def test_run_checks_stops_at_the_first_failing_case(capsys):
    calls = []

    def fn(x):
        calls.append(x)
        return 0

    cases = [_case(i, expected=0 if i != 1 else 9) for i in range(4)]
    assert run_checks("zeros", fn, cases) is False
    assert calls == [0, 1]
    assert "case 2 of 4" in capsys.readouterr().out


def test_run_checks_survives_a_compare_function_that_raises(capsys):
    def bad_compare(got, case):
        raise IndexError("boom")

    assert run_checks("odd", lambda x: object(), [_case(1)], bad_compare) is False
    assert "could not inspect" in capsys.readouterr().out


def test_run_checks_adds_an_error_hint(capsys):
    def raises(x):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    def hint(problem, case):
        assert problem.startswith("raised RuntimeError: mat1")
        return "transpose W"

    assert run_checks("t", raises, [_case(1)], error_hint=hint) is False
    out = capsys.readouterr().out
    assert out.startswith("✗ t: raised RuntimeError: mat1 and mat2 shapes cannot be multiplied\n  hint: transpose W\n")

    def broken_hint(problem, case):
        raise ValueError("a bug in the hint")

    assert run_checks("t", raises, [_case(1)], error_hint=broken_hint) is False
    assert "hint" not in capsys.readouterr().out


def test_run_checks_builds_cases_lazily(capsys):
    def cases():
        raise AssertionError("must not be built for a non-callable")

    assert run_checks("t", None, cases, checker="check_t") is False
    assert "check_t(my_function)" in capsys.readouterr().out


# ======================================================= check_teacher_forcing_inputs


def tf_right(targets, bos_id, pad_id):
    bos = torch.full_like(targets[:, :1], bos_id)  # (B, 1)
    return torch.cat([bos, targets[:, :-1]], dim=1)  # (B, T)


def tf_right_with_clone(targets, bos_id, pad_id):
    inputs = targets.clone()
    inputs[:, 1:] = targets[:, :-1]
    inputs[:, 0] = bos_id
    return inputs


def tf_right_replacing_eos_by_pad(targets, bos_id, pad_id):
    inputs = tf_right(targets, bos_id, pad_id)
    return inputs.masked_fill(targets == pad_id, pad_id)  # only under padding


@pytest.mark.parametrize("solution", [tf_right, tf_right_with_clone, tf_right_replacing_eos_by_pad])
def test_teacher_forcing_passes_right_solutions(solution, capsys):
    out = _passes(check_teacher_forcing_inputs, solution, capsys)
    assert "teacher-forcing inputs: all 5 cases passed" in out


def test_teacher_forcing_forgot_bos(capsys):
    _fails(
        check_teacher_forcing_inputs,
        lambda t, b, p: t[:, :-1],
        capsys,
        "the output has shape (3, 3) but expected (3, 4)",
        "column of bos_id in front",
        "case 1 of 5",
    )


def test_teacher_forcing_kept_last_column(capsys):
    def kept(targets, bos_id, pad_id):
        return torch.cat([torch.full_like(targets[:, :1], bos_id), targets], dim=1)

    _fails(check_teacher_forcing_inputs, kept, capsys, "shape (3, 5) but expected (3, 4)", "you kept the last column")


def test_teacher_forcing_shifted_left(capsys):
    def left(targets, bos_id, pad_id):
        return torch.cat([targets[:, 1:], torch.full_like(targets[:, :1], pad_id)], dim=1)

    _fails(check_teacher_forcing_inputs, left, capsys, "values differ", "you shifted to the left", "row 0: targets [")


def test_teacher_forcing_float_dtype(capsys):
    _fails(
        check_teacher_forcing_inputs,
        lambda t, b, p: tf_right(t, b, p).float(),
        capsys,
        "dtype torch.float32 but expected torch.int64",
        "dtype=targets.dtype",
    )


def test_teacher_forcing_in_place(capsys):
    def in_place(targets, bos_id, pad_id):
        targets[:, 1:] = targets[:, :-1].clone()
        targets[:, 0] = bos_id
        return targets

    _fails(check_teacher_forcing_inputs, in_place, capsys, "changed its input `targets` in place")


def test_teacher_forcing_hard_coded_bos(capsys):
    def fixed(targets, bos_id, pad_id):
        return tf_right(targets, 1, pad_id)

    _fails(
        check_teacher_forcing_inputs, fixed, capsys, "expected 7, got 1", "bos_id=7 (use the argument", "case 4 of 5"
    )


def test_teacher_forcing_no_shift(capsys):
    def replaced(targets, bos_id, pad_id):
        inputs = targets.clone()
        inputs[:, 0] = bos_id
        return inputs

    _fails(check_teacher_forcing_inputs, replaced, capsys, "move one step to the right")


def test_teacher_forcing_raises_none_and_list(capsys):
    _fails(check_teacher_forcing_inputs, lambda t, b, p: t.no_such(), capsys, "raised AttributeError")
    _fails(check_teacher_forcing_inputs, lambda t, b, p: None, capsys, "returned None — did you forget `return`?")
    _fails(
        check_teacher_forcing_inputs,
        lambda t, b, p: tf_right(t, b, p).tolist(),
        capsys,
        "the output is a list of 3 items; expected a torch tensor",
    )


# ================================================================= check_greedy_decode


def greedy_right(model, src, max_len, bos_id, eos_id):
    batch_size = src.shape[0]
    state = model.start(src)
    prev_tokens = torch.full((batch_size,), bos_id, dtype=torch.long)
    tokens = [[] for _ in range(batch_size)]
    finished = [False] * batch_size
    for _ in range(max_len):
        logits, state, _ = model.step(state, prev_tokens)
        prev_tokens = logits.argmax(dim=-1)
        for row, token in enumerate(prev_tokens.tolist()):
            if token == eos_id:
                finished[row] = True
            elif not finished[row]:
                tokens[row].append(token)
        if all(finished):
            break
    return tokens


def greedy_one_row_at_a_time(model, src, max_len, bos_id, eos_id):
    answers = []
    for row in range(src.shape[0]):
        state = model.start(src[row : row + 1])
        token = torch.tensor([bos_id])
        answer = []
        while len(answer) < max_len:
            logits, state, _ = model.step(state, token)
            token = logits.argmax(dim=-1)
            if token.item() == eos_id:
                break
            answer.append(token.item())
        answers.append(answer)
    return answers


def greedy_with_mistake(mistake):
    """A batched greedy loop with one typical mistake."""

    def greedy(model, src, max_len, bos_id, eos_id):
        batch_size = src.shape[0]
        first_state = state = model.start(src)
        prev_tokens = torch.full((batch_size,), bos_id, dtype=torch.long)
        tokens = [[bos_id] if mistake == "include bos" else [] for _ in range(batch_size)]
        finished = [False] * batch_size
        steps = max_len + 1 if mistake == "one step too many" else max_len
        step = 0
        while mistake == "no max_len" or step < steps:
            step += 1
            used_state = first_state if mistake == "reuse first state" else state
            logits, state, _ = model.step(used_state, prev_tokens)
            predicted = logits.argmax(dim=-1)
            if mistake != "feed bos every step":
                prev_tokens = predicted
            for row, token in enumerate(predicted.tolist()):
                if finished[row]:
                    continue
                if token == eos_id and mistake != "no stop at eos":
                    finished[row] = True
                    if mistake == "include eos":
                        tokens[row].append(token)
                elif token != eos_id:
                    tokens[row].append(token)
            if all(finished) or (mistake == "stop batch at first eos" and any(finished)):
                break
        if mistake == "return tensor":
            return torch.tensor([t + [0] * (max_len - len(t)) for t in tokens])
        return tokens

    return greedy


@pytest.mark.parametrize("solution", [greedy_right, greedy_one_row_at_a_time])
def test_greedy_passes_right_solutions(solution, capsys):
    out = _passes(check_greedy_decode, solution, capsys)
    assert "greedy decoding: all 5 cases passed" in out


def test_greedy_passes_a_loop_that_always_runs_max_len_steps(capsys):
    def full_length(model, src, max_len, bos_id, eos_id):
        state, prev = model.start(src), torch.full((src.shape[0],), bos_id)
        columns = []
        for _ in range(max_len):
            logits, state, _ = model.step(state, prev)
            prev = logits.argmax(-1)
            columns.append(prev)
        rows = torch.stack(columns, dim=1).tolist()  # (B, max_len)
        return [row[: row.index(eos_id)] if eos_id in row else row for row in rows]

    _passes(check_greedy_decode, full_length, capsys)


@pytest.mark.parametrize(
    ("mistake", "fragments"),
    [
        ("include bos", ["row 0 starts with bos_id=1", "row 0: expected [", "case 1 of 5"]),
        ("include eos", ["row 0 ends with eos_id=2; stop before eos"]),
        ("no stop at eos", ["goes on after the model predicted eos (after 2 tokens)"]),
        ("no max_len", ["raised RunawayDecoding", "max_len=6: stop after max_len steps", "case 2 of 5"]),
        ("one step too many", ["has 7 tokens but max_len=6"]),
        ("feed bos every step", ["got bos_id=1 at every step; feed back the tokens"]),
        ("reuse first state", ["called twice with the same state; pass the new state"]),
        ("stop batch at first eos", ["row 1 stops after 3 tokens, too early"]),
        ("return tensor", ["returned a tensor of shape (3, 8); return a list"]),
    ],
)
def test_greedy_typical_mistakes(mistake, fragments, capsys):
    _fails(check_greedy_decode, greedy_with_mistake(mistake), capsys, *fragments)


def test_greedy_hard_coded_ids(capsys):
    def fixed_eos(model, src, max_len, bos_id, eos_id):
        return greedy_right(model, src, max_len, bos_id, 2)

    def fixed_bos(model, src, max_len, bos_id, eos_id):
        return greedy_right(model, src, max_len, 1, eos_id)

    _fails(check_greedy_decode, fixed_eos, capsys, "contains eos_id=9", "not with a fixed 2", "case 4 of 5")
    _fails(check_greedy_decode, fixed_bos, capsys, "the first input must be bos_id=5")


def test_greedy_argmax_keepdim_and_wrong_dim(capsys):
    def keepdim(model, src, max_len, bos_id, eos_id):
        state, prev = model.start(src), torch.full((src.shape[0],), bos_id)
        logits, state, _ = model.step(state, prev)
        model.step(state, logits.argmax(dim=-1, keepdim=True))

    def dim0(model, src, max_len, bos_id, eos_id):
        state, prev = model.start(src), torch.full((src.shape[0],), bos_id)
        logits, state, _ = model.step(state, prev)
        model.step(state, logits.argmax(dim=0))

    _fails(check_greedy_decode, keepdim, capsys, "expects prev_tokens of shape (3,)", "got shape (3, 1)")
    _fails(check_greedy_decode, dim0, capsys, "argmax over dim=0 instead of the last dimension")


def test_greedy_output_form_messages(capsys):
    _fails(check_greedy_decode, lambda m, s, n, b, e: None, capsys, "returned None")
    _fails(check_greedy_decode, lambda m, s, n, b, e: m.missing(), capsys, "raised AttributeError")
    _fails(check_greedy_decode, lambda m, s, n, b, e: [5, 6], capsys, "a flat list of 2 ints")
    _fails(check_greedy_decode, lambda m, s, n, b, e: [[5]], capsys, "returned 1 row but src has 3")
    _fails(check_greedy_decode, lambda m, s, n, b, e: [torch.tensor([5])] * 3, capsys, "row 0 is a tensor")
    _fails(
        check_greedy_decode,
        lambda m, s, n, b, e: [[torch.tensor(5)]] * 3,
        capsys,
        "row 0 holds Tensor values, not ints",
    )
    _fails(check_greedy_decode, lambda m, s, n, b, e: m(s, s), capsys, "only decodes step by step")


def test_greedy_padded_rows(capsys):
    def padded(model, src, max_len, bos_id, eos_id):
        return [row + [0] * (max_len - len(row)) for row in greedy_right(model, src, max_len, bos_id, eos_id)]

    _fails(check_greedy_decode, padded, capsys, "row 0 has padding after its answer")


def test_greedy_in_place_change_of_src(capsys):
    def in_place(model, src, max_len, bos_id, eos_id):
        answer = greedy_right(model, src, max_len, bos_id, eos_id)
        src.zero_()
        return answer

    _fails(check_greedy_decode, in_place, capsys, "changed its input `src` in place")


# ========================================================== the scripted fake model


def test_scripted_model_follows_its_script_and_stops_runaways():
    src = torch.tensor([[4, 5, 0], [6, 7, 8]])
    scripts = [[9, 2, 9, 9], [10, 11, 10, 11]]
    model = ScriptedSeq2Seq(src, scripts, vocab_size=12, bos_id=1, eos_id=2, max_steps=4)
    state = model.start(src)
    prev = torch.tensor([1, 1])
    seen = []
    for _ in range(4):
        logits, state, weights = model.step(state, prev)
        assert logits.shape == (2, 12) and weights.shape == (2, 3)
        prev = logits.argmax(dim=-1)
        seen.append(prev.tolist())
    assert seen == [[9, 10], [2, 11], [9, 10], [9, 11]]
    with pytest.raises(RunawayDecoding):
        model.step(state, prev)


# ============================================== one module per chapter, one import path


def test_checkers_live_in_chapter_modules_and_are_reexported():
    from attnbook.exercises import bahdanau, luong, seq2seq

    assert check_luong_general_score is luong.check_luong_general_score
    assert check_local_p_window is luong.check_local_p_window
    assert check_teacher_forcing_inputs is seq2seq.check_teacher_forcing_inputs
    assert check_greedy_decode is seq2seq.check_greedy_decode
    assert check_masked_softmax is bahdanau.check_masked_softmax
    assert check_additive_attention is bahdanau.check_additive_attention
    assert set(attnbook.exercises.__all__) == {checker.__name__ for checker in CHECKERS}


# ================================================================ check_masked_softmax


def ms_right(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.nan_to_num(weights, nan=0.0)


def ms_right_finite_fill(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)
    return weights.masked_fill(~mask, 0.0)


def ms_right_by_hand(scores, mask):  # the largest allowed score subtracted, so no allowed exp underflows
    largest = scores.masked_fill(~mask, float("-inf")).max(dim=-1, keepdim=True).values
    shifted = scores - largest.nan_to_num(neginf=0.0)  # a fully masked row: nothing allowed, shift by 0
    exps = torch.where(mask, shifted.exp(), 0.0)  # masked positions may overflow: never used
    totals = exps.sum(dim=-1, keepdim=True)
    return torch.where(totals > 0, exps / totals.clamp(min=1e-30), torch.zeros_like(exps))


@pytest.mark.parametrize(
    "solution", [ms_right, ms_right_finite_fill, ms_right_by_hand, lambda s, m: attnbook.attention.masked_softmax(s, m)]
)
def test_masked_softmax_passes_right_solutions(solution, capsys):
    out = _passes(check_masked_softmax, solution, capsys)
    assert "masked softmax: all 6 cases passed" in out


def ms_naive_exp(scores, mask):
    exps = scores.exp() * mask
    totals = exps.sum(dim=-1, keepdim=True)
    return torch.where(totals > 0, exps / totals, torch.zeros_like(exps))


def ms_in_place(scores, mask):
    scores.masked_fill_(~mask, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, dim=-1))


@pytest.mark.parametrize(
    ("wrong", "fragments"),
    [
        (
            lambda s, m: torch.softmax(s, dim=-1),
            ["position 3 of row 1 is masked but got weight 0.22", "the mask was not applied", "case 1 of 6"],
        ),
        (lambda s, m: ms_right(s, ~m), ["is masked but got weight", "True means *may attend*"]),
        (lambda s, m: torch.softmax(s * m, dim=-1), ["is masked but got weight", "exp(0) still gets weight"]),
        (lambda s, m: torch.softmax(s, dim=-1) * m, ["values differ", "rows that no longer sum to 1"]),
        (
            lambda s, m: torch.nan_to_num(torch.softmax(s.masked_fill(~m, float("-inf")), dim=0)),
            ["the softmax ran over dim=0", "last dimension (dim=-1)"],
        ),
        (
            lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), dim=-1),
            [
                "weights contains NaN at index (1, 0)",
                "row 1 has no position it may attend",
                "torch.nan_to_num",
                "case 4 of 6",
            ],
        ),
        (
            lambda s, m: torch.softmax(s.masked_fill(~m, -1e9), dim=-1),
            ["row 1 is fully masked but its weights sum to 1; they must all be 0", "case 4 of 6"],
        ),
        (ms_naive_exp, ["contains NaN", "exp(1000) overflows", "subtract each row's maximum", "case 5 of 6"]),
        (ms_in_place, ["changed its input `scores` in place"]),
        (lambda s, m: m, ["dtype torch.bool but expected torch.float32", "must be floats"]),
        (lambda s, m: ms_right(s, m).sum(-1), ["shape (2,) but expected (2, 5)", "you summed over the last dimension"]),
    ],
)
def test_masked_softmax_typical_mistakes(wrong, fragments, capsys):
    _fails(check_masked_softmax, wrong, capsys, *fragments)


def test_masked_softmax_broadcast_mask_shape_mistake(capsys):
    def mask_shaped(scores, mask):
        return ms_right(scores, mask) if mask.shape == scores.shape else mask.float()

    _fails(
        check_masked_softmax,
        mask_shaped,
        capsys,
        "shape (3, 1, 6) but expected (3, 4, 6)",
        "the mask only broadcasts",
        "case 2 of 6",
    )


# ============================================================ check_additive_attention


def aa_right(query, keys, W_q, W_k, v, mask):
    scores = torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v  # (B, L)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return (weights.unsqueeze(1) @ keys).squeeze(1), weights


def aa_right_with_module(query, keys, W_q, W_k, v, mask):
    attention = attnbook.attention.AdditiveAttention(W_q.shape[1], W_k.shape[1], W_q.shape[0])
    with torch.no_grad():
        attention.query_proj.weight.copy_(W_q)
        attention.key_proj.weight.copy_(W_k)
        attention.score_proj.weight.copy_(v.unsqueeze(0))
        return attention(query, keys, mask=mask)


def aa_right_one_row_at_a_time(query, keys, W_q, W_k, v, mask):
    contexts, weights = [], []
    for b in range(query.shape[0]):
        scores = torch.stack([v @ torch.tanh(W_q @ query[b] + W_k @ k) for k in keys[b]])  # (L,)
        if mask is not None:
            scores = scores.masked_fill(~mask[b], -1e9)
        alpha = torch.softmax(scores, dim=0)
        if mask is not None:
            alpha = alpha * mask[b]
        weights.append(alpha)
        contexts.append(alpha @ keys[b])
    return torch.stack(contexts), torch.stack(weights)


@pytest.mark.parametrize("solution", [aa_right, aa_right_with_module, aa_right_one_row_at_a_time])
def test_additive_attention_passes_right_solutions(solution, capsys):
    out = _passes(check_additive_attention, solution, capsys)
    assert "additive attention: all 5 cases passed" in out


def additive_with_mistake(mistake):
    """aa_right with one typical mistake."""

    def additive(query, keys, W_q, W_k, v, mask):
        projected_query = query @ (W_q if mistake == "W_q not transposed" else W_q.T)  # (B, h)
        hidden = projected_query.unsqueeze(1) + keys @ W_k.T  # (B, L, h)
        if mistake != "no tanh":
            hidden = torch.tanh(hidden)
        scores = hidden.sum(-1) if mistake == "no v" else hidden @ v  # (B, L)
        if mask is not None and mistake != "no mask":
            scores = scores * mask if mistake == "multiply by mask" else scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=0 if mistake == "softmax over batch" else -1)
        if mistake != "NaN for fully masked row":
            weights = torch.nan_to_num(weights, nan=0.0)
        mixing = scores if mistake == "context from scores" else weights
        values = keys @ W_k.T if mistake == "projected keys as values" else keys
        context = (mixing.unsqueeze(1) @ values).squeeze(1)  # (B, d)
        if mistake == "swapped":
            return weights, context
        return context, weights

    return additive


@pytest.mark.parametrize(
    ("mistake", "fragments"),
    [
        ("W_q not transposed", ["raised RuntimeError", "query @ W_q.T", "case 1 of 5"]),
        ("no tanh", ["weights values differ", "tanh is missing"]),
        ("no v", ["weights values differ", "dot product of v"]),
        ("no mask", ["weights: position 3 of row 1 is masked but got weight 0.12", "the mask was not applied"]),
        ("multiply by mask", ["position 3 of row 1 is masked but got weight", "exp(0) still gets weight"]),
        ("softmax over batch", ["the softmax ran over the batch (dim=0)"]),
        ("context from scores", ["context contains inf", "uses the softmax weights"]),
        ("projected keys as values", ["context has shape (3, 7) but expected (3, 6)", "not the projected keys"]),
        ("swapped", ["shapes (3, 5) and (3, 6): (weights, context)?", "order (context, weights)"]),
        ("NaN for fully masked row", ["weights contains NaN", "row 1 has no position it may attend", "case 5 of 5"]),
    ],
)
def test_additive_attention_typical_mistakes(mistake, fragments, capsys):
    _fails(check_additive_attention, additive_with_mistake(mistake), capsys, *fragments)


def test_additive_attention_context_from_raw_scores_without_mask(capsys):
    def raw(query, keys, W_q, W_k, v, mask):
        context, weights = aa_right(query, keys, W_q, W_k, v, mask)
        if mask is None:
            scores = torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v
            context = (scores.unsqueeze(1) @ keys).squeeze(1)
        return context, weights

    _fails(check_additive_attention, raw, capsys, "context values differ", "mixed with the raw scores", "case 2 of 5")


def test_additive_attention_output_form_mistakes(capsys):
    _fails(
        check_additive_attention,
        lambda *a: aa_right(*a)[0],
        capsys,
        "returned only a tensor of shape (3, 6) (the context?)",
    )
    _fails(
        check_additive_attention,
        lambda *a: aa_right(*a)[1],
        capsys,
        "returned only a tensor of shape (3, 5) (the weights?)",
    )
    _fails(
        check_additive_attention,
        lambda *a: (aa_right(*a)[0].unsqueeze(1), aa_right(*a)[1]),
        capsys,
        "context has shape (3, 1, 6)",
        ".squeeze(1)",
    )
    _fails(
        check_additive_attention,
        lambda *a: (aa_right(*a)[0], aa_right(*a)[1].unsqueeze(-1)),
        capsys,
        "weights has shape (3, 5, 1)",
        ".squeeze(-1)",
    )
    _fails(
        check_additive_attention,
        lambda *a: aa_right(*a) + (None,),
        capsys,
        "a tuple of 3 items but expected 2 (context, weights)",
    )


def test_additive_attention_mask_none_crash(capsys):
    def crashes_on_none(query, keys, W_q, W_k, v, mask):
        scores = torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v
        weights = torch.nan_to_num(torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1))
        return (weights.unsqueeze(1) @ keys).squeeze(1), weights

    _fails(
        check_additive_attention,
        crashes_on_none,
        capsys,
        "raised TypeError",
        "mask may be None",
        "if mask is not None",
        "case 2 of 5",
    )


def test_additive_attention_finite_fill_without_zeroing(capsys):
    def finite(query, keys, W_q, W_k, v, mask):
        scores = torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        weights = torch.softmax(scores, dim=-1)
        return (weights.unsqueeze(1) @ keys).squeeze(1), weights

    _fails(check_additive_attention, finite, capsys, "row 1 is fully masked but its weights sum to 1", "case 5 of 5")


def test_additive_attention_does_not_change_the_inputs(capsys):
    def in_place(query, keys, W_q, W_k, v, mask):
        keys.mul_(1.0)
        if mask is not None:
            mask.fill_(True)
        return aa_right(query, keys, W_q, W_k, v, mask)

    _fails(check_additive_attention, in_place, capsys, "changed its input `mask` in place")


# =========================================================== check_luong_general_score


def lg_right(h_t, h_s, W_a):
    return torch.einsum("bd,de,ble->bl", h_t, W_a, h_s)


def lg_right_matmul(h_t, h_s, W_a):
    return ((h_t @ W_a).unsqueeze(1) @ h_s.transpose(1, 2)).squeeze(1)  # (B, 1, d) @ (B, d, L) -> (B, L)


def lg_right_keys_first(h_t, h_s, W_a):
    return (h_s @ W_a.T @ h_t.unsqueeze(-1)).squeeze(-1)  # (B, L, d) @ (d, d) @ (B, d, 1) -> (B, L)


def lg_right_loops(h_t, h_s, W_a):
    return torch.stack(
        [torch.stack([h_t[b] @ W_a @ h_s[b, j] for j in range(h_s.shape[1])]) for b in range(h_t.shape[0])]
    )


def lg_right_with_module(h_t, h_s, W_a):
    scorer = attnbook.attention.GeneralScore(W_a.shape[0], W_a.shape[1])
    with torch.no_grad():
        scorer.W_a.weight.copy_(W_a)
        return scorer(h_t.unsqueeze(1), scorer.project_keys(h_s)).squeeze(1)  # (B, 1, L) -> (B, L)


@pytest.mark.parametrize(
    "solution", [lg_right, lg_right_matmul, lg_right_keys_first, lg_right_loops, lg_right_with_module]
)
def test_luong_general_score_passes_right_solutions(solution, capsys):
    out = _passes(check_luong_general_score, solution, capsys)
    assert (
        "Luong general score: all 5 cases passed (B, S, d_t, d_s all different in four cases; "
        "a square, non-symmetric W_a in one; a batch of one)"
    ) in " ".join(out.split())  # the line is wrapped at 88


@pytest.mark.parametrize(
    ("wrong", "fragments"),
    [
        (
            lambda h, s, W: torch.einsum("bd,ed,ble->bl", h, W, s),
            ["the output values differ", "W_a is used transposed", "h_tᵀ W_aᵀ h̄_s", "case 1 of 5"],
        ),
        (lambda h, s, W: (s @ W @ h.unsqueeze(-1)).squeeze(-1), ["W_a is used transposed"]),
        (lambda h, s, W: torch.einsum("bd,bld->bl", h, s), ["W_a is missing", "the *dot* score"]),
        (
            lambda h, s, W: torch.softmax(lg_right(h, s, W), dim=-1),
            ["these are softmax weights, not scores", "leave the softmax out"],
        ),
        (
            lambda h, s, W: ((h @ W).unsqueeze(1) * s).sum(1),
            ["the output has shape (3, 4) but expected (3, 5)", "the sum ran over the S=5 positions"],
        ),
        (
            lambda h, s, W: (h @ W).unsqueeze(1) * s,
            ["shape (3, 5, 4) but expected (3, 5)", "a sum over the d_s features"],
        ),
        (lambda h, s, W: lg_right(h, s, W).unsqueeze(-1), ["shape (3, 5, 1)", ".squeeze(-1)"]),
        (lambda h, s, W: lg_right(h, s, W).unsqueeze(1), ["shape (3, 1, 5)", ".squeeze(1)"]),
        (
            lambda h, s, W: torch.einsum("bd,de,cle->bl", h, W, s),
            ["the scores were summed over the batch", "'bd,de,ble->bl'"],
        ),
        (
            lambda h, s, W: h @ W @ s.transpose(1, 2),
            [
                "shape (3, 3, 5) but expected (3, 5)",
                "every row's h_t was scored against every row's annotations",
                ".unsqueeze(1)",
            ],
        ),
        (lambda h, s, W: lg_right(h, s.roll(1, dims=0), W), ["row 0 was scored against the annotations of row 2"]),
        (lambda h, s, W: lg_right(h, s, W) / h.shape[1] ** 0.5, ["divided by √d = √4", "no scaling"]),
        (lambda h, s, W: h @ W @ s, ["raised RuntimeError", "check the shapes", ".unsqueeze(1)"]),
        (
            lambda h, s, W: (lg_right(h, s, W), torch.softmax(lg_right(h, s, W), -1)),
            ["returned a tuple of 2 tensors", "return only the scores"],
        ),
        (lambda h, s, W: lg_right(h, s, W).T, ["shape (5, 3) but expected (3, 5)", "put the batch first"]),
        (lambda h, s, W: lg_right(h, s, W).long(), ["dtype torch.int64 but expected torch.float32"]),
    ],
)
def test_luong_general_score_typical_mistakes(wrong, fragments, capsys):
    _fails(check_luong_general_score, wrong, capsys, *fragments)


def test_luong_general_score_catches_mixing_rows_only_where_the_batch_has_several(capsys):
    """A solution that only works for a batch of one (it uses row 0 everywhere) fails on case 1."""

    def first_row_only(h_t, h_s, W_a):
        return lg_right(h_t, h_s[:1].expand_as(h_s), W_a)

    _fails(
        check_luong_general_score,
        first_row_only,
        capsys,
        "row 1 was scored against the annotations of row 0",
        "case 1 of 5",
    )


def test_luong_general_score_does_not_change_the_inputs(capsys):
    def in_place(h_t, h_s, W_a):
        W_a.t_()
        return lg_right(h_t, h_s, W_a.T)

    _fails(check_luong_general_score, in_place, capsys, "changed its input `W_a` in place")


# ===================================================== every checker, whatever fn is


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("not_a_function", [None, 42, "fn", torch.zeros(2), [1, 2]])
def test_checkers_never_raise_for_non_callables(checker, not_a_function, capsys):
    assert checker(not_a_function) is False
    out = " ".join(capsys.readouterr().out.split())  # wrapped at 88 characters
    assert out.startswith("✗ ") and "instead of a function" in out
    assert f"{checker.__name__}(my_function)" in out


@pytest.mark.parametrize("checker", CHECKERS)
def test_checkers_never_raise_whatever_fn_does(checker, capsys):
    def exits(*args):
        sys.exit(0)

    def returns_a_generator(*args):
        yield 1

    class Strange:
        def __eq__(self, other):
            raise RuntimeError("no comparing me")

        def __repr__(self):
            raise RuntimeError("no printing me")

    for fn in [
        exits,
        returns_a_generator,
        lambda *a: Strange(),
        lambda *a: (1, 2, 3),
        lambda *a: float("nan"),
        lambda: 0,
        lambda *a: print("hello") or 7,
    ]:
        assert checker(fn) is False
        out = capsys.readouterr().out
        assert out.count("✗") == 1, out


@pytest.mark.parametrize("checker", CHECKERS)
def test_checkers_let_keyboard_interrupt_through(checker):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        checker(interrupted)


@pytest.mark.parametrize("checker", CHECKERS)
def test_checkers_have_learner_docstrings(checker):
    doc = checker.__doc__
    assert doc and "Shapes:" in doc and "Returns True if every case passed." in doc


# ---------------------------------------------------------------- check_local_p_window


def _window(position, length, D, sigma_factor=0.5, cut=lambda distance, D: distance <= D):
    sigma = D * sigma_factor
    return [
        math.exp(-((s - position) ** 2) / (2 * sigma**2)) if cut(abs(s - position), D) else 0.0 for s in range(length)
    ]


def test_local_p_window_accepts_lists_and_tensors(capsys):
    assert check_local_p_window(_window)
    assert check_local_p_window(lambda p, n, D: torch.tensor(_window(p, n, D)))
    assert "✓ local-p window" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda p, n, D: _window(p, n, D, sigma_factor=1.0), "you used sigma = D; Luong et al. use sigma = D / 2"),
        (lambda p, n, D: _window(p, n, D, cut=lambda distance, D: True), "must get exactly 0"),
        (lambda p, n, D: _window(p, n, D, cut=lambda distance, D: distance < D), "(not < D)"),
        (lambda p, n, D: _window(p, n - 1, D), "the factors"),
        (lambda p, n, D: None, "returned None"),
        (lambda p, n, D: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_local_p_window_explains_typical_mistakes(wrong, message, capsys):
    assert check_local_p_window(wrong) is False
    out = capsys.readouterr().out
    assert "✗ local-p window" in out
    assert message in out


def test_luong_general_score_is_checked_with_rectangular_W_a(capsys):
    """A solution right only for a square W_a (it uses W_a transposed otherwise) fails on
    case 2, with the shapes named: d_t ≠ d_s there."""

    def square_only(h_t, h_s, W_a):
        if W_a.shape[0] == W_a.shape[1]:
            return lg_right(h_t, h_s, W_a)
        return (h_s @ W_a @ h_t.unsqueeze(-1)).squeeze(-1)

    _fails(
        check_luong_general_score,
        square_only,
        capsys,
        "case 2 of 5",
        "d_t=6, d_s=4",
        "check the shapes",
        "W_a (d_t, d_s) = (6, 4)",
    )


def test_masked_softmax_names_an_underflow_when_the_largest_scores_are_masked(capsys):
    def shifted_by_the_row_max(scores, mask):  # right in exact arithmetic, not in float32 here
        exps = (scores - scores.max(dim=-1, keepdim=True).values).exp() * mask
        totals = exps.sum(dim=-1, keepdim=True)
        return torch.where(totals > 0, exps / totals.clamp(min=1e-30), torch.zeros_like(exps))

    out = " ".join(_fails(check_masked_softmax, shifted_by_the_row_max, capsys).split())
    assert "underflows to 0 at every allowed one" in out and "subtract the largest allowed score" in out, out
