"""Chapter 1 (RNN encoder–decoder): the checkers of its code exercises.

- :func:`check_teacher_forcing_inputs`: build the decoder inputs for teacher forcing.
- :func:`check_masked_loss`: the cross-entropy over the non-padding target tokens.
- :func:`check_greedy_decode`: greedy decoding with the ``start``/``step`` model protocol.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
"""

import math
import numbers

import numpy as np
import torch
import torch.nn.functional as F

from attnbook.exercises._checking import (
    Case,
    ScriptedSeq2Seq,
    checker,
    compare,
    describe,
    kind_of,
)

__all__ = ["check_teacher_forcing_inputs", "check_masked_loss", "check_greedy_decode"]


# ============================================================ chapter 1: teacher forcing


def _teacher_forcing_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(1)
    specs = [  # (row lengths with eos, bos_id, eos_id, pad_id)
        ((4, 2, 3), 1, 2, 0),
        ((6, 3, 6, 1), 1, 2, 0),
        ((5,), 1, 2, 0),
        ((3, 7, 5), 7, 8, 9),
        ((2, 5), 4, 3, 6),
    ]
    cases = []
    for lengths, bos_id, eos_id, pad_id in specs:
        targets = _random_targets(lengths, eos_id, pad_id, {bos_id}, generator)
        expected = torch.cat([torch.full_like(targets[:, :1], bos_id), targets[:, :-1]], dim=1)
        cases.append(
            Case(
                description=(
                    f"targets = {targets.tolist()} ({describe(targets)}, rows of lengths "
                    f"{', '.join(map(str, lengths))} with eos={eos_id}), bos_id={bos_id}, pad_id={pad_id}"
                ),
                args=(targets, bos_id, pad_id),
                arg_names=("targets", "bos_id", "pad_id"),
                expected=expected,
                info={"targets": targets.clone(), "bos_id": bos_id, "pad_id": pad_id},
            )
        )
    return cases


def _random_targets(lengths, eos_id, pad_id, other_specials, generator) -> torch.Tensor:
    """(B, max(lengths)) long: random regular tokens, then eos, then padding."""
    specials = {eos_id, pad_id, *other_specials}
    regular = torch.tensor([t for t in range(12) if t not in specials])
    width = max(lengths)
    targets = torch.full((len(lengths), width), pad_id, dtype=torch.long)
    for row, length in enumerate(lengths):
        picks = torch.randint(len(regular), (length - 1,), generator=generator)
        targets[row, : length - 1] = regular[picks]
        targets[row, length - 1] = eos_id
    return targets


def _compare_teacher_forcing(got, case: Case) -> str | None:
    expected, targets = case.expected, case.info["targets"]
    pad_id = case.info["pad_id"]
    if _same_ids_allowing_pad(got, expected, targets == pad_id, pad_id):
        return None
    problem = compare(got, expected) or "the output differs from the expected inputs"
    hint = _teacher_forcing_hint(got, case)
    lines = [problem] + ([f"hint: {hint}"] if hint else [])
    if _is_int_tensor(got) and got.shape == expected.shape:
        row = int((got != expected).any(dim=1).nonzero()[0])
        lines.append(
            f"row {row}: targets {targets[row].tolist()} -> expected {expected[row].tolist()}, got {got[row].tolist()}"
        )
    return "\n".join(lines)


def _same_ids_allowing_pad(got, expected, padding, pad_id) -> bool:
    """True if ``got`` equals ``expected``, where positions under padding may hold pad_id."""
    if not _is_int_tensor(got) or got.shape != expected.shape:
        return False
    return bool(((got == expected) | (padding & (got == pad_id))).all())


def _is_int_tensor(value) -> bool:
    if not isinstance(value, torch.Tensor):
        return False
    kinds = (value.is_floating_point(), value.is_complex(), value.dtype == torch.bool)
    return not any(kinds)


def _teacher_forcing_hint(got, case: Case) -> str:
    """A plain-words guess at the mistake behind a wrong answer ("" if no guess)."""
    targets, bos_id = case.info["targets"], case.info["bos_id"]
    pad_id = case.info["pad_id"]
    batch, steps = targets.shape
    if not isinstance(got, torch.Tensor):
        if isinstance(got, list):
            return "build the result with torch operations (e.g. torch.cat), not a list"
        if isinstance(got, np.ndarray):
            return "return a torch tensor (e.g. torch.from_numpy(...)), like targets"
        return ""
    if tuple(got.shape) == (batch, steps + 1):
        return "you kept the last column; drop it (targets[:, :-1]) so the output has the shape of targets"
    if tuple(got.shape) == (batch, steps - 1):
        return "put a column of bos_id in front of targets[:, :-1]; the output has the same shape as targets"
    if tuple(got.shape) == (steps, batch):
        return "the output looks transposed; keep the batch first: (B, T)"
    if got.shape != targets.shape:
        return "the output must have the same shape as targets, (B, T)"
    if not _is_int_tensor(got):
        return "token ids must be integers: make the bos column with dtype=targets.dtype"
    return _shift_hint(got.detach().cpu().long(), targets, bos_id, pad_id)


def _shift_hint(got, targets, bos_id: int, pad_id: int) -> str:
    """The hint for an integer answer of the right shape ("" if no guess)."""
    if torch.equal(got, targets):
        return (
            "this is targets unchanged; shift it one step to the right and put "
            "bos_id in front: bos_id, then targets[:, :-1]"
        )
    if torch.equal(got[:, :-1], targets[:, 1:]):
        return (
            "you shifted to the left; shift to the right: the input at step t is the "
            "target of step t - 1, and bos_id comes first"
        )
    shifted = torch.equal(got[:, 1:], targets[:, :-1])
    if torch.equal(got[:, 2:], targets[:, :-2]) and not shifted:
        return "you shifted by two steps; shift by one: bos_id, then targets[:, :-1]"
    if torch.equal(got[:, 1:], targets[:, 1:]):
        return "every target token must move one step to the right, not only the first be replaced by bos_id"
    if shifted and not (got[:, 0] == bos_id).all():
        return _first_column_hint(got[:, 0], targets, bos_id, pad_id)
    bos = torch.full_like(targets[:, :1], bos_id)  # (B, 1)
    right = torch.cat([bos, targets[:, :-1]], dim=1)  # (B, T)
    wrong = got != right
    padding = targets == pad_id
    early = torch.cat([padding[:, 1:], torch.zeros_like(padding[:, :1])], dim=1)  # next is pad
    if (early & ~padding).any() and any(
        torch.equal(got, right.masked_fill(where, pad_id)) for where in (early, early | padding)
    ):
        return (
            "pad_id is one column early: it sits where the *next* target is padding, so the "
            "last real token's input is lost; pad where targets itself is padding "
            "(targets == pad_id), or not at all"
        )
    if wrong.any() and not (wrong & ~padding).any():
        value = int(got[wrong][0])
        return (
            f"the output differs only where targets hold padding "
            f"(pad_id={pad_id}); there put the shifted token or pad_id, "
            f"not {value}"
        )
    return ""


def _first_column_hint(first, targets, bos_id: int, pad_id: int) -> str:
    if pad_id != bos_id and (first == pad_id).all():
        return (
            f"the first column holds pad_id={pad_id}; it must be bos_id={bos_id} "
            "(the arguments come in the order targets, bos_id, pad_id)"
        )
    if torch.equal(first, targets[:, -1]):
        return (
            "torch.roll wraps the last column around to the front; put bos_id in "
            "the first column afterwards (or build the result with torch.cat)"
        )
    return f"the first column must be bos_id={bos_id} (use the argument, not a fixed number)"


@checker(
    "teacher-forcing inputs",
    _teacher_forcing_cases,
    _compare_teacher_forcing,
    summary="rows of different lengths, a batch of one, other bos_id and pad_id, targets left unchanged",
)
def check_teacher_forcing_inputs(fn) -> bool:
    """Check ``fn(targets, bos_id, pad_id) -> decoder_inputs``, the teacher-forcing inputs.

    With teacher forcing the decoder reads the *correct* previous token at every step.
    Its input at step 0 is ``bos_id``; at step t it is the target token of step t - 1.
    So ``decoder_inputs`` is ``bos_id`` followed by ``targets`` shifted one step to the
    right, with the last column dropped (no step needs the final token as an input)::

        targets        = [[ 7,  8,  9,  2],      (2 = eos, 0 = pad)
                          [ 5,  2,  0,  0]]
        decoder_inputs = [[ 1,  7,  8,  9],      (1 = bos)
                          [ 1,  5,  2,  0]]

    Your function must return a new tensor and leave ``targets`` unchanged.
    Where ``targets`` holds padding, the loss ignores the step, so there either the
    shifted token or ``pad_id`` is accepted.

    Shapes:
        targets: (B, T) long; each row is target ids, then eos, then pad_id up to T.
        decoder_inputs: (B, T) long, the same shape and dtype kind as ``targets``.

    The cases have rows of different lengths, a batch of one, and ids other than the
    usual bos_id=1, pad_id=0.

    Returns True if every case passed.
    """


# ================================================================= chapter 1: masked loss


def _masked_loss_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(3)
    specs = [  # (row lengths, T, V, pad_id, logits scale)
        ((5, 2, 4), 5, 7, 0, 2.0),
        ((3,), 4, 6, 0, 2.0),
        ((6, 3), 6, 9, 4, 2.0),
        ((2, 5, 1, 3), 5, 8, 7, 2.0),
        ((4, 2, 3), 4, 6, 0, 1000.0),
    ]
    return [_masked_loss_case(*spec, generator) for spec in specs]


def _masked_loss_case(lengths, steps, vocab_size, pad_id, scale, generator) -> Case:
    batch = len(lengths)
    real = torch.tensor([t for t in range(vocab_size) if t != pad_id])
    targets = torch.full((batch, steps), pad_id, dtype=torch.long)
    for row, length in enumerate(lengths):
        targets[row, :length] = real[torch.randint(len(real), (length,), generator=generator)]
    if pad_id != 0:
        targets[0, 0] = 0  # a real token 0: a mask built with a fixed 0 is wrong here
    if scale > 100:  # logits of ±scale: far apart, so most probabilities underflow to 0
        logits = (torch.rand(batch, steps, vocab_size, generator=generator) * 2 - 1) * scale
        size = f"values between -{scale:.0f} and {scale:.0f}, "
    else:
        logits = torch.randn(batch, steps, vocab_size, generator=generator) * scale
        size = ""
    logits.requires_grad_(True)
    expected = F.cross_entropy(
        logits.detach().double().flatten(0, 1), targets.flatten(), ignore_index=pad_id
    )  # a 0-d float64 tensor
    rows = "row" if batch == 1 else "rows"
    return Case(
        description=(
            f"logits is {describe(logits.detach())} ({size}requires_grad=True), targets = "
            f"{targets.tolist()} ({describe(targets)}, {rows} of lengths "
            f"{', '.join(map(str, lengths))}), pad_id={pad_id}"
        ),
        args=(logits, targets, pad_id),
        arg_names=("logits", "targets", "pad_id"),
        expected=expected,
        info={
            "logits": logits,
            "targets": targets,
            "pad_id": pad_id,
            "B": batch,
            "T": steps,
            "V": vocab_size,
            "large": scale > 100,
        },
    )


def _masked_loss_mistakes(logits, targets, pad_id: int) -> list[tuple[float, str]]:
    """(the value a mistake gives, its hint) for the plausible mistakes, in float64."""
    logits = logits.detach().double()  # (B, T, V)
    index = targets.unsqueeze(-1)  # (B, T, 1)
    real = targets != pad_id  # (B, T)

    def picked(values):  # (B, T, V) -> the target's entry at each position, (B, T)
        return values.gather(-1, index).squeeze(-1)

    nll = -picked(logits.log_softmax(dim=-1))  # (B, T)
    probs = picked(logits.softmax(dim=-1))  # (B, T)
    raw = picked(logits)  # (B, T)
    per_row = (nll * real).sum(dim=1) / real.sum(dim=1)  # (B,)
    log_probs = "take log_softmax over the vocabulary (dim=-1) first, then gather"
    wrong_dim = (
        "log_softmax over dim={dim} normalises over the {what}; the probabilities of the next "
        "token are over the vocabulary, the last dimension: log_softmax(logits, dim=-1)"
    )
    mistakes = [
        (
            nll.mean(),
            "this is the mean over all B·T positions, padding included; average only "
            "over the positions where targets != pad_id",
        ),
        (
            (nll * real).mean(),
            "you zeroed the padding, but .mean() still divides by all B·T positions; "
            "divide the sum by the number of real tokens, mask.sum()",
        ),
        (
            nll[real].sum(),
            "this is the sum over the real tokens; the loss is their mean: divide by "
            "the number of real tokens, mask.sum()",
        ),
        (
            nll.sum(),
            "this is the sum over all positions, padding included; the loss is the mean over the real tokens only",
        ),
        (
            per_row.mean(),
            "this is the mean of each row's mean, which weighs a short row as much as a long "
            "one; the loss is the mean over all real tokens of the batch together (each token counts "
            "the same): sum them all, then divide by the number of real tokens",
        ),
        (
            nll[~real].mean(),
            "this is the loss on the padding only: the mask is inverted; the real tokens are where targets != pad_id",
        ),
        (nll[targets != 0].mean(), f"the mask must use the argument pad_id (here {pad_id}), not a fixed 0"),
        (
            -nll[real].mean(),
            "the loss is negative: each token's term is minus the log-probability of its "
            "target (log-probabilities are <= 0, so the loss is >= 0); put the minus sign in",
        ),
        (
            probs[real].mean(),
            "you averaged the probabilities of the targets; the loss averages minus "
            "their log-probabilities: log_softmax, not softmax",
        ),
        (
            -probs[real].mean(),
            "you averaged minus the probabilities of the targets; the loss averages "
            "minus their log-probabilities: log_softmax, not softmax",
        ),
        (-raw[real].mean(), "you gathered the raw logits; " + log_probs),
        (raw[real].mean(), "you gathered the raw logits (and the loss has no minus sign); " + log_probs),
        (-picked(logits.log_softmax(dim=1))[real].mean(), wrong_dim.format(dim=1, what="time steps T")),
        (-picked(logits.log_softmax(dim=0))[real].mean(), wrong_dim.format(dim=0, what="rows of the batch")),
    ]
    return [(float(value), hint) for value, hint in mistakes]


def _near(got: float, value: float, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    return math.isfinite(value) and abs(got - value) <= atol + rtol * abs(value)


def _compare_masked_loss(got, case: Case) -> str | None:
    expected = float(case.expected)
    info = case.info
    problem = _masked_loss_form(got, expected, info)
    if problem:
        return problem
    value = float(got.detach().double())
    if not math.isfinite(value):
        return _non_finite_loss(value, expected, info["large"])
    if not _near(value, expected):
        return _wrong_loss(value, expected, info)
    return _gradient_problem(got, case)


def _masked_loss_form(got, expected: float, info: dict) -> str | None:
    """A message if ``got`` is not a 0-d floating-point tensor, else None."""
    backprop = "return the torch scalar tensor itself, so that loss.backward() can train the model"
    if isinstance(got, (numbers.Real, np.floating, np.integer)) and not isinstance(got, (bool, np.bool_)):
        right = " (the right value)" if _near(float(got), expected) else f"; expected {expected:.6g}"
        return f"returned a Python number, {float(got):.6g}{right}\nhint: {backprop} (no .item())"
    if isinstance(got, np.ndarray):
        return f"returned a NumPy array of shape {got.shape}\nhint: {backprop} (no .numpy())"
    if isinstance(got, (tuple, list)):
        return f"returned {kind_of(got)}; expected a scalar tensor — return only the loss"
    if not isinstance(got, torch.Tensor):
        return f"returned {kind_of(got)}; expected a scalar tensor (shape ()), the loss"
    if not got.is_floating_point():
        return f"the loss has dtype {got.dtype}; expected a floating-point scalar tensor, like logits"
    batch, steps = info["B"], info["T"]
    shape = tuple(got.shape)
    if shape == ():
        return None
    problem = f"the loss has shape {shape} but expected (), one number"
    if shape == (batch, steps):
        hint = (
            "this looks like one loss per position, the shape of targets (B, T); average it over "
            "the real (non-padding) positions to one number"
        )
    elif shape == (batch,):
        hint = (
            "this looks like one loss per row (B,); the loss is one number, the mean over all real tokens of the batch"
        )
    elif got.numel() == 1:
        hint = "return a 0-d tensor: drop keepdim=True, or .squeeze() the result"
    else:
        hint = "reduce the per-position losses to one number, their mean over the real tokens"
    return f"{problem}\nhint: {hint}"


def _non_finite_loss(value: float, expected: float, large: bool) -> str:
    word = "NaN" if math.isnan(value) else str(value)
    where = " (here the logits reach ±1000)" if large else ""
    return (
        f"the loss is {word} but expected {expected:.6g}\nhint: softmax(...).log() gives log(0) = -inf "
        f"where a probability underflows to 0{where}, exp() of a large logit overflows to inf, "
        "and inf times a 0 of the mask is NaN: use F.log_softmax (or torch.log_softmax), "
        "which stays finite"
    )


def _wrong_loss(value: float, expected: float, info: dict) -> str:
    problem = f"the loss is {value:.6g} but expected {expected:.6g}"
    for wrong, hint in _masked_loss_mistakes(info["logits"], info["targets"], info["pad_id"]):
        if _near(value, wrong, rtol=1e-4) and not _near(wrong, expected, rtol=1e-4):
            return f"{problem}\nhint: {hint}"
    if value < 0:
        return (
            f"{problem}\nhint: a loss below 0 is impossible: it is minus a log-probability, "
            "averaged; check the minus sign and that you used log_softmax"
        )
    return (
        f"{problem}\nhint: the loss is the mean of -log_softmax(logits, dim=-1) at each target "
        "token, over the positions where targets != pad_id"
    )


def _gradient_problem(got: torch.Tensor, case: Case) -> str | None:
    """A message if the right value cannot train the model: detached, or a wrong gradient."""
    logits = case.info["logits"]
    detached = (
        "the value is right, but the loss is detached from logits ({why}), so loss.backward() "
        "could not train the model\nhint: build the loss from logits with torch operations only: "
        "no .item(), .detach(), .numpy(), torch.tensor(...) or torch.no_grad() on the way"
    )
    if not got.requires_grad:
        return detached.format(why="requires_grad is False")
    (gradient,) = torch.autograd.grad(got, logits, allow_unused=True)
    if gradient is None:
        return detached.format(why="it does not depend on logits")
    reference = logits.detach().double().requires_grad_(True)
    targets, pad_id = case.info["targets"], case.info["pad_id"]
    loss = F.cross_entropy(reference.flatten(0, 1), targets.flatten(), ignore_index=pad_id)
    (expected,) = torch.autograd.grad(loss, reference)
    if not torch.allclose(gradient.double(), expected, rtol=1e-4, atol=1e-6):
        return (
            "the value is right, but its gradient with respect to logits is not, so training "
            "would go the wrong way\nhint: compute the loss from logits itself, with torch "
            "operations only"
        )
    return None


def _masked_loss_error_hint(problem: str, case: Case) -> str:
    """A hint for an error raised inside the learner's function ("" if no guess)."""
    text = problem.lower()
    if "numpy() on tensor that requires grad" in text:
        return (
            "logits requires grad, as a model's output does; stay with torch operations "
            "(log_softmax, gather, a boolean mask) and return a torch scalar tensor"
        )
    if "leaf variable that requires grad" in text and "in-place" in text:
        return "do not change logits in place; build new tensors (masked_fill, not masked_fill_)"
    if "expected target size" in text:
        return (
            "F.cross_entropy wants the vocabulary in dimension 1; flatten first: "
            "logits.flatten(0, 1) is (B·T, V) and targets.flatten() is (B·T,)"
        )
    if "index tensor must have the same number of dimensions" in text:
        return (
            "gather needs an index with as many dimensions as logits: targets.unsqueeze(-1) is "
            "(B, T, 1); .squeeze(-1) the result back to (B, T)"
        )
    if "could not infer output dtype" in text:
        return "a bool or integer tensor has no mean; count the real tokens with mask.sum()"
    return ""


@checker(
    "masked loss",
    _masked_loss_cases,
    _compare_masked_loss,
    error_hint=_masked_loss_error_hint,
    shape_hint="logits (B, T, V) = ({B}, {T}, {V}), targets (B, T) = ({B}, {T})",
    summary=(
        "rows of different lengths and one without padding, a batch of one, pad_id other than 0, "
        "logits of ±1000, B, T and V all different, the gradient reaching logits"
    ),
)
def check_masked_loss(fn) -> bool:
    """Check ``fn(logits, targets, pad_id) -> loss``, the cross-entropy without the padding.

    The loss is the mean, over the real (non-padding) target tokens of the whole batch, of
    minus the log-probability the model gives the target token::

        log_probs = log_softmax(logits, dim=-1)          # (B, T, V)
        loss = mean of -log_probs[b, t, targets[b, t]]   over every (b, t) with
                                                          targets[b, t] != pad_id

    Every real token counts the same, whichever row it is in; padded positions count not at
    all. It is the value ``F.cross_entropy(logits.flatten(0, 1), targets.flatten(),
    ignore_index=pad_id)`` gives, the course's training loss. Return it as a 0-d tensor
    that is still connected to ``logits``, so that ``loss.backward()`` works.

    Shapes:
        logits: (B, T, V) float, requires_grad=True (like a model's output).
        targets: (B, T) long; each row is target ids, then pad_id up to T.
        loss: () float, a scalar tensor.

    The cases have rows of different lengths (and one with no padding), a batch of one, a
    pad_id other than 0 (with 0 a real token), and logits of ±1000, where computing
    ``softmax(...).log()`` gives inf.

    Returns True if every case passed.
    """


# ============================================================= chapter 1: greedy decoding


def _greedy_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(2)
    specs = [  # (source lengths, tokens before eos per row (None: never eos), max_len, bos_id, eos_id)
        ((5, 3, 4), (2, 5, 3), 8, 1, 2),
        ((4, 6, 2, 5), (None, 1, 0, 3), 6, 1, 2),
        ((3,), (None,), 4, 1, 2),
        ((4, 2, 5), (3, 1, 4), 7, 5, 9),
        ((6, 3), (4, 6), 3, 1, 2),
    ]
    return [_greedy_case(*spec, generator) for spec in specs]


def _greedy_case(src_lengths, answer_lengths, max_len, bos_id, eos_id, generator) -> Case:
    vocab_size, pad_id = 12, 0
    regular = [t for t in range(vocab_size) if t not in (pad_id, bos_id, eos_id)]
    src = _distinct_sources(src_lengths, regular, pad_id, generator)
    max_steps = max_len + 3
    scripts = [_script(n, max_steps, regular, eos_id, generator) for n in answer_lengths]

    def new_model():
        return _CountingSeq2Seq(
            src,
            scripts,
            vocab_size,
            bos_id,
            eos_id,
            max_steps,
            pad_id=pad_id,
            runaway_hint=(f"but max_len={max_len}: stop after max_len steps even if a row never predicts eos"),
        )

    expected = _reference_greedy(new_model(), src, max_len, bos_id, eos_id)
    return Case(
        description=(
            f"src is {describe(src)} (rows of lengths {', '.join(map(str, src_lengths))}); "
            f"{_describe_answers(answer_lengths)}; max_len={max_len}, bos_id={bos_id}, eos_id={eos_id}"
        ),
        args=(new_model(), src, max_len, bos_id, eos_id),
        arg_names=("model", "src", "max_len", "bos_id", "eos_id"),
        expected=expected,
        info={"max_len": max_len, "bos_id": bos_id, "eos_id": eos_id, "pad_id": pad_id},
    )


def _describe_answers(answer_lengths) -> str:
    """E.g. "the model predicts eos after 1, 0 tokens in rows 1, 2 and never in row 0"."""
    ending = {row: n for row, n in enumerate(answer_lengths) if n is not None}
    never = [row for row, n in enumerate(answer_lengths) if n is None]
    if not ending:
        return "the model never predicts eos"
    text = f"the model predicts eos after {', '.join(map(str, ending.values()))} tokens"
    if never:
        text += (
            f" in rows {', '.join(map(str, ending))} and never in "
            f"row{'s' if len(never) > 1 else ''} {', '.join(map(str, never))}"
        )
    return text


def _distinct_sources(lengths, regular, pad_id, generator) -> torch.Tensor:
    """(B, max(lengths)) long source rows, padded, no two rows alike."""
    while True:
        src = torch.full((len(lengths), max(lengths)), pad_id, dtype=torch.long)
        for row, length in enumerate(lengths):
            picks = torch.randint(len(regular), (length,), generator=generator)
            src[row, :length] = torch.tensor(regular)[picks]
        if len({tuple(row) for row in src.tolist()}) == len(lengths):
            return src


def _script(answer_length, num_steps, regular, eos_id, generator) -> list[int]:
    """What the model predicts at each step: the answer, eos, then arbitrary tokens.

    Two steps after the first eos comes a second one, as a real model may predict, so
    that only a cut at the *first* eos gives the answer.
    """
    num_steps = max(num_steps, (answer_length or 0) + 1)
    picks = torch.randint(len(regular), (num_steps,), generator=generator).tolist()
    script = [regular[i] for i in picks]
    if answer_length is not None:
        script[answer_length] = eos_id
        if answer_length + 2 < num_steps:
            script[answer_length + 2] = eos_id
    return script


class _CountingSeq2Seq(ScriptedSeq2Seq):
    """A :class:`ScriptedSeq2Seq` that also counts steps and notices restarts."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.most_steps = 0  # the most model.step calls along one chain of states
        self.started = []  # the source rows of every model.start call
        self.restarted = False  # model.start got rows it had already started

    def start(self, src):
        state = super().start(src)
        rows = {tuple(row) for row in src.tolist()}
        self.restarted = self.restarted or any(rows & seen for seen in self.started)
        self.started.append(rows)
        return state

    def step(self, state, prev_tokens):
        if hasattr(state, "step"):
            self.most_steps = max(self.most_steps, int(state.step) + 1)
        return super().step(state, prev_tokens)


def _reference_greedy(model, src, max_len, bos_id, eos_id) -> list[list[int]]:
    """The reference greedy loop (the same as ``attnbook.decoding.greedy_decode``)."""
    batch_size = src.shape[0]
    state = model.start(src)
    prev_tokens = torch.full((batch_size,), bos_id, dtype=torch.long)  # (B,)
    tokens = [[] for _ in range(batch_size)]
    finished = [False] * batch_size
    for _ in range(max_len):
        logits, state, _ = model.step(state, prev_tokens)  # logits: (B, V)
        prev_tokens = logits.argmax(dim=-1)  # (B,)
        for row, token in enumerate(prev_tokens.tolist()):
            if token == eos_id:
                finished[row] = True
            elif not finished[row]:
                tokens[row].append(token)
        if all(finished):
            break
    return tokens


def _compare_greedy(got, case: Case) -> str | None:
    expected = case.expected
    problem = _greedy_output_form(got, len(expected))
    if problem:
        return problem
    for row, (got_row, expected_row) in enumerate(zip(got, expected)):
        got_row = list(got_row)
        if got_row != expected_row:
            hint = _greedy_row_hint(row, got_row, expected_row, case)
            return f"{hint}\nrow {row}: expected {expected_row}, got {got_row}"
    model, max_len = case.args[0], case.info["max_len"]
    if model.most_steps > max_len:
        return (
            f"the tokens are right, but model.step was called {model.most_steps} "
            f"times for one batch and max_len={max_len}\nhint: call model.step at "
            "most max_len times: stop after max_len steps, or as soon as every row "
            "has predicted eos"
        )
    return None


def _greedy_output_form(got, batch_size: int) -> str | None:
    """A message if ``got`` is not a list of ``batch_size`` lists of ints, else None."""
    if isinstance(got, torch.Tensor):
        return (
            f"returned a tensor of shape {tuple(got.shape)}; return a list with one list of "
            "ints per row instead (e.g. with .tolist()), each cut before eos"
        )
    if not isinstance(got, (list, tuple)):
        return f"returned {kind_of(got)}; expected a list with one list of token ids per row"
    if got and all(_is_int(item) for item in got):
        return (
            f"returned a flat list of {len(got)} ints; expected one list per row, e.g. [[5, 6], [7]] for a batch of two"
        )
    if len(got) != batch_size:
        rows = "1 row" if len(got) == 1 else f"{len(got)} rows"
        problem = f"returned {rows} but src has {batch_size}; give one list per source row"
        if all(isinstance(step, (list, tuple)) and len(step) == batch_size for step in got):
            problem += (
                "\nhint: this looks like one list per decoding step (one token "
                "per row in each); regroup the tokens by row"
            )
        return problem
    for row, tokens in enumerate(got):
        if isinstance(tokens, torch.Tensor):
            return f"row {row} is a tensor; make it a list of ints (e.g. with .tolist())"
        if not isinstance(tokens, (list, tuple)):
            return f"row {row} is {kind_of(tokens)}; expected a list of ints"
        for token in tokens:
            if isinstance(token, (list, tuple)):
                return (
                    f"row {row} holds lists such as {token!r}, not ints: one token "
                    "is one int (take argmax(dim=-1) without keepdim, or squeeze "
                    "the (B, 1) tensor before .tolist())"
                )
            if not _is_int(token):
                return (
                    f"row {row} holds {type(token).__name__} values, not ints "
                    "(use .item() on a 0-d tensor, or .tolist())"
                )
    return None


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _greedy_row_hint(row: int, got: list, expected: list, case: Case) -> str:
    """Plain words for the first wrong row: the likely mistake behind it."""
    model = case.args[0]
    max_len, bos_id, eos_id = case.info["max_len"], case.info["bos_id"], case.info["eos_id"]
    if got[:1] == [bos_id]:
        return f"row {row} starts with bos_id={bos_id}; leave the start token out of the output"
    if eos_id in got:
        if got[:-1] == expected and got[-1] == eos_id:
            return f"row {row} ends with eos_id={eos_id}; stop before eos and leave it out"
        hint = f"row {row} contains eos_id={eos_id}; stop at the first eos and leave it out"
        return hint + (f" (compare with eos_id={eos_id}, not with a fixed 2)" if eos_id != 2 else "")
    if len(got) > max_len:
        return f"row {row} has {len(got)} tokens but max_len={max_len}; stop after at most max_len steps"
    feeding = _feeding_hint(model, bos_id)
    if feeding:
        return feeding
    if got[: len(expected)] == expected:
        return _too_long_hint(row, got, expected, case.info["pad_id"])
    if expected[: len(got)] == got:
        return _too_short_hint(row, got, expected, eos_id, max_len)
    return f"row {row} has wrong tokens"


def _feeding_hint(model: ScriptedSeq2Seq, bos_id: int) -> str:
    """What the fake model noticed about the tokens and states it was given ("" if nothing)."""
    if model.stale_state:
        return (
            "model.step was called twice with the same state; pass the new state that "
            "model.step returns into the next step"
        )
    if model.only_fed_bos:
        return (
            f"model.step got bos_id={bos_id} at every step; feed back the tokens predicted "
            "at the previous step (the argmax of the logits)"
        )
    if model.fed_wrong_token:
        step, row, fed, right = model.fed_wrong_token
        if step == 0 and getattr(model, "restarted", False):
            return (
                "model.start was called again for rows already started, so the "
                "decoder began anew; call model.start(src) once, before the loop, "
                "and pass on the state that model.step returns"
            )
        if step == 0:
            return (
                f"the first call of model.step got token {fed} for row {row}; the first input must be bos_id={bos_id}"
            )
        return (
            f"at step {step}, row {row} was fed token {fed} but the previous step "
            f"predicted {right}; "
            "feed back the argmax of the logits (over the last dimension)"
        )
    return ""


def _too_long_hint(row: int, got: list, expected: list, pad_id: int) -> str:
    extra = got[len(expected) :]
    if all(token == pad_id for token in extra):
        return f"row {row} has padding after its answer; cut each row where the model predicts eos"
    return (
        f"row {row} goes on after the model predicted eos (after {len(expected)} tokens); "
        "stop each row at its first eos"
    )


def _too_short_hint(row: int, got: list, expected: list, eos_id: int, max_len: int = 0) -> str:
    if len(expected) == max_len and len(got) == max_len - 1:
        return (
            f"row {row} has {len(got)} tokens but should have max_len={max_len} "
            "(it never predicts eos in time): run max_len steps, e.g. "
            "for _ in range(max_len)"
        )
    hint = (
        f"row {row} stops after {len(got)} tokens, too early; keep decoding a row until it "
        "predicts eos itself (or max_len steps are done), even when other rows have finished"
    )
    if expected[len(got)] == 2 != eos_id:
        hint += f" (here eos_id={eos_id}: compare with eos_id, not with a fixed 2)"
    return hint


def _greedy_error_hint(problem: str, case: Case) -> str:
    """A hint for an error raised inside the loop ("" if no guess)."""
    if "expects prev_tokens of shape" in problem and "got shape ()" in problem:
        return (
            "prev_tokens holds one token per row, shape (B,): start with "
            "torch.full((B,), bos_id), and take logits.argmax(dim=-1) (argmax() "
            "without dim gives one number for the whole batch)"
        )
    return ""


@checker(
    "greedy decoding",
    _greedy_cases,
    _compare_greedy,
    error_hint=_greedy_error_hint,
    summary="rows finishing at different steps, a row stopped by max_len, an empty answer, other bos_id and eos_id",
)
def check_greedy_decode(fn) -> bool:
    """Check ``fn(model, src, max_len, bos_id, eos_id) -> tokens``, greedy decoding.

    Greedy decoding asks the model for the most likely next token, again and again,
    feeding each prediction back in:

    1. ``state = model.start(src)`` encodes the source once.
    2. The first input token of every row is ``bos_id``.
    3. ``logits, state, weights = model.step(state, prev_tokens)`` gives logits (B, V)
       for the next token; the prediction is ``logits.argmax(dim=-1)``, and it becomes
       ``prev_tokens`` of the next step. Always pass the *new* state on.
    4. A row is finished when it predicts ``eos_id``; stop after at most ``max_len``
       steps even if some row never predicts eos. (You may keep stepping finished rows
       while others go on; just don't add their tokens.)

    Return a list with one list of ints per source row: the predicted tokens, without
    bos, stopping *before* eos (eos not included), at most ``max_len`` of them.

    The checker uses small fake models whose answers are known: rows that finish at
    different steps, a row that never predicts eos, a row whose first prediction is
    eos (its answer is ``[]``), and ids other than the usual bos_id=1, eos_id=2.

    Shapes:
        src: (B, S) long, padded source ids.
        prev_tokens: (B,) long, one token per row.
        logits: (B, V).
        returns: B lists of ints, each of length <= max_len.

    Returns True if every case passed.
    """
