"""Chapter 3 (Luong attention): the checkers of its code exercises.

- :func:`check_luong_general_score`: Luong et al.'s ``general`` score ``h_tᵀ W_a h̄_s`` for
  every source position.
- :func:`check_luong_step`: one step of Luong's decoder with input feeding.
- :func:`check_local_p_window`: the Gaussian window of local-p attention.

Import them from :mod:`attnbook.exercises`; how a checker reports is described there.
The reference is :class:`attnbook.attention.GeneralScore`.
"""

import math
import types

import numpy as np
import torch
from torch import nn

from attnbook.exercises._checking import (
    STEP_MASKING_MISTAKES,
    Case,
    checker,
    close,
    compare,
    kind_of,
    mistake_hint,
    named_tensors,
    softmax_with,
)
from attnbook.exercises.bahdanau import (
    _first_wrong_item,
    _inconsistent_input_size,
)

__all__ = ["check_luong_general_score", "check_luong_step", "check_local_p_window"]


# ====================================================== chapter 3: the general score


def _general_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(31)
    # (B, S, d_t, d_s): the first case square, the others rectangular (d_t ≠ d_s), as when a
    # bidirectional encoder's annotations are larger than the decoder's state
    specs = [(3, 5, 4, 4), (2, 7, 6, 4), (4, 3, 5, 8), (1, 6, 3, 5), (5, 2, 7, 3)]
    return [_general_case(*spec, generator) for spec in specs]


def _general_case(batch: int, length: int, d_t: int, d_s: int, generator) -> Case:
    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    h_t, h_s = randn(batch, d_t), randn(batch, length, d_s)
    W_a = randn(d_t, d_s) / d_s**0.5
    while d_t == d_s and (W_a - W_a.T).abs().max() < 0.3:  # W_a and W_a.T clearly differ
        W_a = randn(d_t, d_s) / d_s**0.5
    return Case(
        description=f"h_t {tuple(h_t.shape)}, h_s {tuple(h_s.shape)}, W_a {tuple(W_a.shape)} (B={batch}, "
        f"S={length}, d_t={d_t}, d_s={d_s})",
        args=(h_t, h_s, W_a),
        arg_names=("h_t", "h_s", "W_a"),
        expected=_general_reference(h_t, h_s, W_a),
        info={"B": batch, "S": length, "d_t": d_t, "d_s": d_s},
    )


def _general_reference(h_t, h_s, W_a):
    """score[b, j] = h_t[b] @ W_a @ h_s[b, j]."""
    return torch.einsum("bd,de,ble->bl", h_t.double(), W_a.double(), h_s.double()).float()  # (B, S)


def _cross_scores(h_t, h_s, W_a):
    """cross[b, c, j] = h_t[b] @ W_a @ h_s[c, j]: every row's query against every row's keys."""
    return torch.einsum("bd,de,cle->bcl", h_t.double(), W_a.double(), h_s.double())  # (B, B, S)


def _compare_general(got, case: Case) -> str | None:
    expected = case.expected
    info = case.info
    batch, length = info["B"], info["S"]
    if isinstance(got, (tuple, list)) and got and all(isinstance(x, torch.Tensor) for x in got):
        shapes = ", ".join(str(tuple(x.shape)) for x in got)
        return (
            f"returned a {type(got).__name__} of {len(got)} tensors (shapes {shapes}); "
            f"return only the scores, one tensor of shape {(batch, length)}"
        )
    if isinstance(got, torch.Tensor) and tuple(got.shape) != (batch, length):
        hint = _general_shape_hint(tuple(got.shape), info)
        problem = compare(got, expected, "the output")
        return f"{problem}\nhint: {hint}" if hint else problem
    problem = compare(got, expected, "the output")
    if problem is None:
        return None
    if isinstance(got, (np.ndarray, list)):
        return (
            f"{problem}\nhint: return a torch tensor of shape {(batch, length)}, "
            "computed with torch operations on the given tensors"
        )
    if not isinstance(got, torch.Tensor) or not got.is_floating_point():
        return problem
    got = got.detach().double()
    h_t, h_s, W_a = case.args
    mistake = _general_mistake(got, h_t, h_s, W_a, batch)
    return (
        f"{problem}\nhint: {mistake}"
        if mistake
        else (f"{problem}\nhint: for each row b and position j the score is h_t[b] @ W_a @ h_s[b, j]")
    )


def _general_mistake(got, h_t, h_s, W_a, batch: int) -> str:
    """Plain words for a typical mistake that gives these values ("" if none matches)."""
    right = _general_reference(h_t, h_s, W_a).double()
    if h_t.shape[-1] != h_s.shape[-1]:  # W_a is rectangular: only the square case has a W_a.T to mix up
        transposed = torch.full_like(right, float("nan"))
    else:
        transposed = _general_reference(h_t, h_s, W_a.T).double()
    if close(got, transposed):
        return (
            "W_a is used transposed: you computed h_tᵀ W_aᵀ h̄_s (e.g. h_s @ W_a @ h_t, or W_a @ h_t). "
            "The score is h_tᵀ W_a h̄_s = (h_t @ W_a) · h̄_s, or h_t · (W_a @ h̄_s)"
        )
    if h_t.shape[-1] == h_s.shape[-1] and close(got, torch.einsum("bd,bld->bl", h_t.double(), h_s.double())):
        return "W_a is missing: h_tᵀ h̄_s is the *dot* score; the *general* score puts W_a between them, h_tᵀ W_a h̄_s"
    if any(close(got, torch.softmax(scores, dim=dim)) for scores in (right, transposed) for dim in (-1, 0)):
        return (
            "these are softmax weights, not scores; return the raw scores h_tᵀ W_a h̄_s and leave "
            "the softmax out (attention applies it afterwards)"
        )
    if (got >= 0).all() and (((got.sum(-1) - 1).abs() < 1e-4).all() or ((got.sum(0) - 1).abs() < 1e-4).all()):
        return "the values sum to 1 like softmax weights; return the raw scores, before any softmax"
    if close(got, torch.tanh(right)):
        return "a tanh was applied: the general score is h_tᵀ W_a h̄_s itself (the tanh belongs to the *concat* score)"
    d = h_t.shape[-1]
    if h_s.shape[-1] == d and (close(got, right / math.sqrt(d)) or close(got, transposed / math.sqrt(d))):
        return (
            f"the scores were divided by √d = √{d}; Luong's general score has no scaling (the "
            "scaled dot product comes with self-attention, Chapter 4)"
        )
    if batch > 1:
        return _mixed_rows_hint(got, _cross_scores(h_t, h_s, W_a), batch)
    return ""


def _mixed_rows_hint(got, cross, batch: int) -> str:
    """A hint when the rows of the batch were mixed up ("" if they were not)."""
    if close(got, cross.sum(dim=1)) or close(got, cross.sum(dim=0)):
        return (
            "the scores were summed over the batch: each row's h_t must meet only its own row's "
            "annotations (in einsum, use the same letter for the batch of h_t and of h_s: "
            "'bd,de,ble->bl')"
        )
    for b in range(batch):
        if close(got[b], cross[b, b]):
            continue
        for c in range(batch):
            if c != b and close(got[b], cross[b, c]):
                return (
                    f"row {b} was scored against the annotations of row {c}; each row's h_t must meet "
                    "only its own row's h_s"
                )
            if c != b and close(got[b], cross[c, b]):
                return (
                    f"row {b}'s annotations were scored with h_t of row {c}; each row's h_t must meet "
                    "only its own row's h_s"
                )
    return ""


def _general_shape_hint(shape: tuple, info: dict) -> str:
    batch, length, d_t, d_s = info["B"], info["S"], info["d_t"], info["d_s"]
    if shape == (batch, length, 1):
        return "drop the last dimension (.squeeze(-1)): one score per position"
    if shape == (batch, 1, length):
        return "drop the middle dimension (.squeeze(1)): one score per position"
    if shape in ((batch, d_s), (batch, d_t)):
        return (
            f"this has {shape[1]} numbers per row: the sum ran over the S={length} positions; sum over "
            "the features instead, so that each position gets one score"
        )
    if shape == (batch, length, d_s):
        return (
            "one score per position means a sum over the d_s features (the last dimension) of the "
            "product of h_tᵀ W_a with h̄_s"
        )
    if shape == (batch, batch, length):
        return (
            "every row's h_t was scored against every row's annotations: (B, d) @ (B, d, S) "
            "broadcasts. Make h_t (B, 1, d) with .unsqueeze(1) so that each row meets only its own h_s, "
            "then .squeeze(1)"
        )
    if shape == (batch, length, batch):
        return (
            "every row's annotations were scored against every row's h_t: (B, S, d) @ (d, B) "
            "broadcasts (h_t.T puts all B states side by side). Score each row with its own h_t: "
            "(h_t @ W_a).unsqueeze(1) @ h_s.transpose(1, 2), then .squeeze(1)"
        )
    if shape == (length, batch):
        return "the dimensions are swapped: put the batch first, (B, S)"
    if batch == 1 and shape == (length,):
        return (
            "with a batch of one, .squeeze() without a dimension also drops the "
            "batch dimension; squeeze only the dimension you added, e.g. "
            ".squeeze(-1)"
        )
    if shape == (length,) or shape == (batch,):
        return "one score per row and position: keep both the batch and the position dimensions, (B, S)"
    return ""


@checker(
    "Luong general score",
    _general_cases,
    _compare_general,
    shape_hint="h_t (B, d_t) = ({B}, {d_t}), h_s (B, S, d_s) = ({B}, {S}, {d_s}), W_a (d_t, d_s) = "
    "({d_t}, {d_s}). For all rows at once, h_t @ W_a is (B, d_s); make it (B, 1, d_s) with .unsqueeze(1) "
    "and multiply by h_s.transpose(1, 2) (B, d_s, S) to get (B, 1, S), then .squeeze(1)",
    summary="B, S, d_t, d_s all different in four cases; a square, non-symmetric W_a in one; a batch of one",
)
def check_luong_general_score(fn) -> bool:
    """Check ``fn(h_t, h_s, W_a) -> scores``, Luong et al.'s *general* score for every position.

    For each row of the batch, the current decoder state ``h_t`` is scored against every
    annotation ``h̄_s`` of that row's source::

        score_s = h_tᵀ W_a h̄_s        one number per source position s

    ``W_a`` is used as it is given, not transposed: for one row and one position the score is
    ``h_t @ W_a @ h_s[b, j]``. For all positions of all rows at once, for example
    ``((h_t @ W_a).unsqueeze(1) @ h_s.transpose(1, 2)).squeeze(1)``, or
    ``torch.einsum("bd,de,ble->bl", h_t, W_a, h_s)``. ``W_a`` is not symmetric, so ``W_a``
    and ``W_a.T`` give different scores. (In :class:`attnbook.attention.GeneralScore`,
    ``W_a`` is ``self.W_a.weight``, the weight of ``nn.Linear(key_dim, query_dim)``, so
    ``self.W_a(h_s)`` is ``W_a h̄_s`` for every ``s``: the same orientation.)

    Return the raw scores: the softmax over the positions comes later. Each row uses only its
    own keys. Don't change the inputs in place.

    Shapes:
        h_t: ``(B, d_t)``, the decoder state of each row; h_s: ``(B, S, d_s)``, the annotations;
        W_a: ``(d_t, d_s)``. The sizes need not be equal: unlike the dot score, the general
        score can meet annotations larger than the state (a bidirectional encoder's).
        returns: scores ``(B, S)``.

    ``B``, ``S``, ``d_t`` and ``d_s`` are all different in four of the five cases; the first has
    a square, non-symmetric ``W_a``; one case is a batch of one.

    Returns True if every case passed.
    """


# ============================================================ chapter 3: the local-p window


def _window_cases() -> list[Case]:
    specs = [(4.3, 10, 2), (0.0, 6, 2), (9.7, 10, 4), (2.5, 8, 1), (5.0, 12, 3)]  # (p_t, length, D)
    return [
        Case(
            description=f"position={p}, length={length}, D={D}",
            args=(p, length, D),
            arg_names=("position", "length", "D"),
            expected=_window_reference(p, length, D),
            info={"position": p, "length": length, "D": D},
        )
        for p, length, D in specs
    ]


def _window_reference(
    position: float,
    length: int,
    D: int,
    sigma: float | None = None,
    cut: str = "<=",
    exponent: str = "right",
    start: int = 0,
    centre=None,
    normalise: bool = False,
    wrap: bool = False,
    density: bool = False,
) -> torch.Tensor:
    """The factors of every position; the keyword arguments rebuild typical mistakes.

    cut: ``"<="`` (right), ``"<"`` or ``"none"``. exponent: ``"right"``, ``"no 2"``
    (d² / σ²), ``"precedence"`` (d² / 2 · σ²), ``"sigma"`` (d² / 2σ), ``"abs"``
    (|d| / 2σ²) or ``"plus"`` (no minus). start: the first position (1: counted from
    one). centre: a function applied to p_t (e.g. round). normalise: divided by the
    sum. wrap: positions left of 0 land at the end (negative indices). density: the
    normal density, divided by sigma √(2π).
    """
    sigma = D / 2 if sigma is None else sigma
    p = float(position if centre is None else centre(position))
    positions = torch.arange(start, start + length, dtype=torch.float64)  # (length,)
    d = positions - p
    terms = {
        "right": d**2 / (2 * sigma**2),
        "no 2": d**2 / sigma**2,
        "precedence": d**2 / 2 * sigma**2,
        "sigma": d**2 / (2 * sigma),
        "abs": d.abs() / (2 * sigma**2),
        "plus": -(d**2) / (2 * sigma**2),
    }
    factors = torch.exp(-terms[exponent])
    if cut != "none":
        outside = d.abs() > D if cut == "<=" else d.abs() >= D
        factors = factors.masked_fill(outside, 0.0)
    if wrap:
        for s in range(math.ceil(p - D), 0):
            factors[s % length] = math.exp(-((s - p) ** 2) / (2 * sigma**2))
    if normalise:
        factors = factors / factors.sum()
    if density:
        factors = factors / (sigma * math.sqrt(2 * math.pi))
    return factors.float()


def _window_mistakes(p: float, length: int, D: int) -> list:
    """(wrong factors, hint) for the typical mistakes, on this case's inputs."""
    window = f"[p_t - D, p_t + D] = [{p - D:g}, {p + D:g}]"
    mistakes = [
        (dict(sigma=D), "you used sigma = D; Luong et al. use sigma = D / 2"),
        (dict(sigma=D // 2), f"sigma = D / 2 = {D / 2:g} here; D // 2 rounds it down to {D // 2}: use /, not //"),
        (dict(cut="none"), f"positions outside {window} must get exactly 0"),
        (dict(cut="<"), "the window includes its ends: keep positions with |s - p_t| <= D (not < D)"),
        (dict(exponent="no 2"), "the exponent is -(s - p_t)² / (2 sigma²): the 2 is missing"),
        (
            dict(exponent="precedence"),
            "a / 2 * sigma**2 multiplies by sigma²; put the denominator in parentheses: / (2 * sigma**2)",
        ),
        (dict(exponent="sigma"), "the denominator is 2 sigma², with sigma squared: / (2 * sigma**2)"),
        (dict(exponent="abs"), "the distance is squared in a Gaussian: (s - p_t)², not |s - p_t|"),
        (dict(exponent="plus"), "the exponent is negative: exp(-(s - p_t)² / (2 sigma²)), at most 1"),
        (dict(start=1), f"positions run from 0 to length - 1 = {length - 1}: use range(length)"),
        (
            dict(normalise=True),
            "the factors are not normalised: don't divide them by their sum (the factor at s = p_t is 1)",
        ),
        (
            dict(wrap=True),
            "a negative index wraps around to the end of the list (or tensor): positions "
            "left of 0 don't exist, so keep only 0 <= s < length",
        ),
        (
            dict(density=True),
            "the factors are not a probability density: no 1 / (sigma √(2π)) in front, so the factor at s = p_t is 1",
        ),
    ]
    rounding = (
        f"p_t = {p:g} is used as it is, a float: rounding it (round, int, "
        "floor, ceil) moves the centre of the window and of the Gaussian"
    )
    for centre in (round, int, math.floor, math.ceil):
        mistakes.append((dict(centre=centre), rounding))
    return [(_window_reference(p, length, D, **keywords), hint) for keywords, hint in mistakes]


#: Mistakes in the exponent's denominator that can give the same numbers for some D.
_DENOMINATOR_MISTAKES = ("the 2 is missing", "in parentheses", "with sigma squared")


def _window_as_tensor(got):
    """``got`` as a float tensor if it has one of the allowed forms; else a message."""
    allowed = "a list of floats or a 1-D tensor"
    if isinstance(got, np.ndarray) and got.dtype.kind in "biuf":
        got = torch.from_numpy(got)
    if isinstance(got, (list, tuple)):
        for i, x in enumerate(got):
            number = isinstance(x, (int, float, np.number)) and not isinstance(x, (bool, np.bool_))
            if not number and not (isinstance(x, torch.Tensor) and x.dim() == 0):
                return f"item {i} of the list is {kind_of(x)}; every item must be a float (0.0 outside the window)"
        # numbers, NumPy scalars, 0-d tensors
        return torch.tensor([float(x) for x in got], dtype=torch.float32)
    if not isinstance(got, torch.Tensor):
        if isinstance(got, (types.GeneratorType, map, filter, range)):
            return f"returned {kind_of(got)}; return {allowed}, e.g. list(...) or a list comprehension"
        return f"the factors is {kind_of(got)}; expected {allowed}"
    if not got.is_floating_point():
        return (
            f"the factors have dtype {got.dtype}; they are floats between 0 and 1 "
            "(build them with a float dtype, without rounding)"
        )
    got = got.detach().float()
    return got.flatten() if got.dim() == 2 and got.shape[0] == 1 else got


def _compare_window(got, case: Case) -> str | None:
    p, length, D = case.info["position"], case.info["length"], case.info["D"]
    got = _window_as_tensor(got)
    if isinstance(got, str):
        return got
    problem = compare(got, case.expected, "the factors")
    if problem is None:
        return None
    if got.shape != case.expected.shape:
        return f"{problem}\nhint: {_window_length_hint(got, p, length, D)}"
    mistakes = _window_mistakes(p, length, D)
    hints = [hint for wrong, hint in mistakes if close(got, wrong)]
    if len(hints) > 1 and all(any(m in hint for m in _DENOMINATOR_MISTAKES) for hint in hints):
        hints = [
            f"the exponent is -(s - p_t)² / (2 sigma²), and with sigma = D / 2 = "
            f"{D / 2:g} the denominator 2 sigma² is {2 * (D / 2) ** 2:g}: write "
            "/ (2 * sigma**2)"
        ]
    if hints:
        return f"{problem}\nhint: {hints[0]}"
    if not torch.isfinite(got).all():
        return problem
    return f"{problem}\nhint: {_window_position_hint(got, case.expected, p, D)}"


def _window_length_hint(got, p: float, length: int, D: int) -> str:
    inside = sum(1 for s in range(length) if abs(s - p) <= D)
    if got.dim() == 1 and got.shape[0] == inside:
        return (
            "return a factor for every position 0, 1, ..., length - 1, with 0.0 "
            "outside the window, not only the positions inside it"
        )
    if got.dim() != 1:
        return f"return {length} numbers, one per position: a list or a 1-D tensor of shape ({length},)"
    return f"one factor per position s = 0, 1, ..., length - 1 = {length - 1}: {length} in all (range(length))"


def _window_position_hint(got, expected, p: float, D: int) -> str:
    """The first wrong position: inside or outside the window, and its right factor."""
    s = int(((got - expected).abs() > 1e-5).nonzero()[0])
    distance = f"|{s} - {p:g}| = {abs(s - p):.3g}"
    if expected[s] == 0:
        return f"position {s} is outside the window ({distance} > D = {D}), so its factor is 0"
    if got[s] == 0:
        return (
            f"position {s} is inside the window ({distance} <= D = {D}), so its "
            f"factor is exp(-(s - p_t)² / (2 sigma²)) = {float(expected[s]):.4g}, "
            "not 0"
        )
    return (
        f"at s = {s}: exp(-(s - p_t)² / (2 sigma²)) with sigma = D / 2 = {D / 2:g} "
        f"is exp(-{(s - p) ** 2:.4g} / {2 * (D / 2) ** 2:g}) = "
        f"{float(expected[s]):.4g}"
    )


def _window_error_hint(problem: str, case: Case) -> str:
    p, length, D = case.info["position"], case.info["length"], case.info["D"]
    if problem.startswith("raised ZeroDivisionError") and D // 2 == 0:
        return f"sigma = D / 2 = {D / 2:g} here; D // 2 rounds it down to 0: use /, not //"
    if problem.startswith("raised IndexError"):
        return (
            f"the window [p_t - D, p_t + D] = [{p - D:g}, {p + D:g}] can reach "
            "past the ends of the source: keep only positions "
            f"0 <= s <= length - 1 = {length - 1}"
        )
    return ""


@checker(
    "local-p window",
    _window_cases,
    _compare_window,
    error_hint=_window_error_hint,
    summary="centres inside, at and near both ends, fractional centres, D = 1 to 4",
)
def check_local_p_window(fn) -> bool:
    """Check ``fn(position, length, D) -> factors``, the Gaussian window of local-p attention.

    Local-p attention (Luong et al. 2015) predicts a centre ``p_t`` (a float) and keeps only the
    source positions ``s`` with ``|s - p_t| <= D``, weighting them by a Gaussian with
    ``sigma = D / 2``::

        factor(s) = exp(-(s - p_t)² / (2 sigma²))   if |s - p_t| <= D,   else 0

    Positions are counted from 0 to ``length - 1``. Return the ``length`` factors as a list of
    floats or a 1-D tensor; the factor at ``s = p_t`` is exactly 1.

    Shapes:
        position: a float ``p_t``; length: an int ``L``; D: an int.
        returns: ``L`` factors (a list of floats or a ``(L,)`` tensor).

    The cases have a window in the middle, windows cut by either end of the source, a centre
    between two positions, and different ``D``.

    Returns True if every case passed.
    """


# ============================================================ chapter 3: one decoder step with input feeding


_STEP_ITEMS = ("logits", "hidden", "attentional", "weights")


def _step_cases() -> list[Case]:
    specs = [(3, 4, 6, 5, 7, [5, 3, 1]), (2, 5, 4, 6, 9, [6, 6]), (1, 3, 5, 4, 6, None)]  # B, E, H, S, V, lengths
    cases = []
    with torch.random.fork_rng():  # the learner's random state stays as it was
        torch.manual_seed(33)
        for batch, embed, hidden_size, length, vocab, lengths in specs:
            args = (
                torch.randn(batch, embed),
                torch.randn(batch, hidden_size),
                torch.tanh(torch.randn(batch, hidden_size)),
                torch.randn(batch, length, hidden_size),
                torch.ones(batch, length, dtype=torch.bool)
                if lengths is None
                else torch.arange(length) < torch.tensor(lengths).view(-1, 1),
                nn.GRUCell(embed + hidden_size, hidden_size),
                torch.randn(hidden_size, hidden_size) / hidden_size**0.5,
                torch.randn(hidden_size, 2 * hidden_size) / (2 * hidden_size) ** 0.5,
                torch.randn(vocab, hidden_size) / hidden_size**0.5,
            )
            padding = "no padding" if lengths is None else f"source lengths {lengths}"
            cases.append(
                Case(
                    f"B={batch}, E={embed}, H={hidden_size}, S={length}, V={vocab}; {padding}",
                    args=args,
                    arg_names=("embedded", "hidden", "attentional", "annotations", "mask", "cell", "W_a", "W_c", "W_s"),
                    expected=_luong_step(*args),
                    info=dict(B=batch, E=embed, H=hidden_size, S=length, V=vocab),
                )
            )
    return cases


def _luong_step(
    embedded,
    hidden,
    attentional,
    annotations,
    mask,
    cell,
    W_a,
    W_c,
    W_s,
    query="new",
    order="ch",
    squash=True,
    transposed=False,
    masking="fill",
    logits_from="attentional",
    feed="ea",
    score="general",
    softmax_dim=-1,
    third="attentional",
    softmax_logits=False,
    previous="given",
):
    """The reference step; the keyword arguments rebuild the typical mistakes."""
    with torch.no_grad():
        fed = {"ea": [embedded, attentional], "ae": [attentional, embedded], "eh": [embedded, hidden]}[feed]
        if previous == "zeros":  # the cell called without the previous state
            h_t = cell(torch.cat(fed, dim=-1))
        else:
            h_t = cell(torch.cat(fed, dim=-1), hidden)  # (B, H): input feeding
        q = {"new": h_t, "old": hidden, "attentional": attentional}[query]
        keys = annotations  # the dot score
        if score != "dot":
            keys = annotations @ (W_a if transposed else W_a.T)  # (B, S, H): W_a h̄_s
        scores = (keys @ q.unsqueeze(-1)).squeeze(-1)  # (B, S)
        if score == "scaled":
            scores = scores / math.sqrt(q.shape[-1])
        weights = softmax_with(scores, mask, masking, dim=softmax_dim)  # (B, S)
        context = (weights.unsqueeze(1) @ annotations).squeeze(1)  # (B, H)
        pair = torch.cat([context, h_t] if order == "ch" else [h_t, context], dim=-1)  # (B, 2H)
        new_attentional = pair @ W_c.T
        new_attentional = torch.tanh(new_attentional) if squash else new_attentional  # (B, H)
        logits = (new_attentional if logits_from == "attentional" else h_t) @ W_s.T  # (B, V)
        if softmax_logits == "log":
            logits = torch.log_softmax(logits, dim=-1)
        elif softmax_logits:
            logits = torch.softmax(logits, dim=-1)
    third_item = new_attentional if third == "attentional" else context
    return logits, h_t, third_item, weights


_STEP_MISTAKES = [  # (keyword arguments of _luong_step, the item they change first, hint)
    (
        dict(query="old"),
        "weights",
        "the query is the *new* state h_t, after the GRU step: Luong et al. score the current "
        "state (scoring h_{t-1} is Bahdanau's order)",
    ),
    (
        dict(query="attentional"),
        "weights",
        "the query is the *new* state h_t, after the GRU step, not the previous attentional state h̃_(t-1)",
    ),
    (
        dict(transposed=True),
        "weights",
        "W_a is used transposed: the score is h_tᵀ W_a h̄_s, i.e. annotations @ W_a.T gives W_a h̄_s for every s",
    ),
    (dict(score="dot"), "weights", "W_a is missing: h_tᵀ h̄_s is the *dot* score; the *general* score is h_tᵀ W_a h̄_s"),
    (dict(score="scaled"), "weights", "the scores were divided by √H; Luong's general score has no scaling"),
    *STEP_MASKING_MISTAKES,
    (
        dict(order="hc"),
        "attentional",
        "the order of the concatenation matters: h̃_t = tanh(W_c [c_t; h_t]), the context first",
    ),
    (dict(squash=False), "attentional", "h̃_t = tanh(W_c [c_t; h_t]): the tanh is missing"),
    (
        dict(third="context"),
        "attentional",
        "the third item is the attentional state h̃_t = tanh(W_c [c_t; h_t]), not the context c_t",
    ),
    (dict(logits_from="hidden"), "logits", "the logits come from the attentional state: W_s h̃_t, not W_s h_t"),
    (dict(softmax_logits=True), "logits", "return the raw logits W_s h̃_t, without a softmax (the loss applies it)"),
    (
        dict(softmax_logits="log"),
        "logits",
        "return the raw logits W_s h̃_t, without a log_softmax (the loss, cross_entropy, applies it)",
    ),
]

_FEEDING_MISTAKES = [  # (keyword arguments of _luong_step, hint): a wrong new state
    (
        dict(feed="ae"),
        "the cell reads [E y_(t-1); h̃_(t-1)]: the embedding first, then the previous attentional state, in this order",
    ),
    (
        dict(feed="eh"),
        "input feeding feeds the previous *attentional* state h̃_(t-1) (the argument "
        "`attentional`), not the previous state h_(t-1): "
        "cell([E y_(t-1); h̃_(t-1)], h_(t-1))",
    ),
    (
        dict(previous="zeros"),
        "the cell also needs the previous state: cell(input, hidden); without it the GRU starts from zeros",
    ),
]

#: The items in the order they are computed: the first wrong one is reported.
_STEP_ORDER = ("hidden", "weights", "attentional", "logits")


def _compare_step(got, case: Case) -> str | None:
    problem = compare(got, case.expected, "the output", item_names=_STEP_ITEMS)
    got = named_tensors(got, _STEP_ITEMS)
    if problem is None or got is None:
        return problem
    if not all(x.is_floating_point() for x in got.values()):
        return problem
    expected = dict(zip(_STEP_ITEMS, case.expected))
    if not close(got["hidden"], expected["hidden"]):
        if close(got["hidden"], expected["attentional"]) or close(got["attentional"], expected["hidden"]):
            return f"{problem}\nhint: return (logits, hidden, attentional, weights) in this order: h_t, then h̃_t"
    problem = _first_wrong_item(got, expected, _STEP_ORDER, case.args[4]) or problem
    if not close(got["hidden"], expected["hidden"]):
        return f"{problem}\nhint: {_new_state_hint(got['hidden'], case)}"
    hint = mistake_hint(got, expected, _luong_step, case.args, _STEP_MISTAKES)
    return problem if hint is None else f"{problem}\nhint: {hint}"


def _new_state_hint(hidden: torch.Tensor, case: Case) -> str:
    """Why h_t is wrong: the old state returned, or the cell fed the wrong input."""
    if close(hidden, case.args[1]):
        return "this is the previous state h_(t-1): return the new one, h_t = cell([E y_(t-1); h̃_(t-1)], h_(t-1))"
    for mistake, hint in _FEEDING_MISTAKES:
        if close(hidden, _luong_step(*case.args, **mistake)[1]):
            return hint
    return (
        "the new state is h_t = cell([E y_(t-1); h̃_(t-1)], h_(t-1)): concatenate "
        "the embedding with the previous attentional state (input feeding), in "
        "this order"
    )


def _step_error_hint(problem: str, case: Case) -> str:
    info = case.info
    E, H, V = info["E"], info["H"], info["V"]
    width = _inconsistent_input_size(problem)
    cell_input = f"[E y_(t-1); h̃_(t-1)], E + H = {E + H} numbers"
    if width == H:
        return (
            f"the cell's input is {cell_input}, and the cell is called as "
            "cell(input, h_(t-1)): the input first, the previous state second"
        )
    if width == 2 * H:
        return (
            f"the cell reads {cell_input}: the embedding and the previous attentional state (not h_(t-1) and h̃_(t-1))"
        )
    if width is not None or ("mat1 and mat2" in problem and f"x{E}" in problem):
        return (
            f"the cell reads {cell_input}: with input feeding, concatenate the "
            "embedding and the previous attentional state before the GRU step"
        )
    for name, rows, columns in (("W_c", H, 2 * H), ("W_s", V, H)):
        if f"x{columns} and {rows}x{columns})" in problem:
            return f"{name} ({rows}, {columns}) is stored like nn.Linear.weight, (out, in): {name} x is x @ {name}.T"
    return ""


@checker(
    "Luong decoder step",
    _step_cases,
    _compare_step,
    error_hint=_step_error_hint,
    shape_hint="embedded (B, E) = ({B}, {E}), hidden and attentional (B, H) = ({B}, {H}), annotations (B, S, H) = "
    "({B}, {S}, {H}), W_a (H, H), W_c (H, 2H), W_s (V, H) = ({V}, {H})",
    summary="padding and no padding; B, E, H, S, V all different; a non-symmetric W_a",
)
def check_luong_step(fn) -> bool:
    """Check ``fn(embedded, hidden, attentional, annotations, mask, cell, W_a, W_c, W_s)``, one step of Luong's
    decoder with input feeding and *general* scores, returning ``(logits, hidden, attentional, weights)``::

        h_t      = cell([E y_(t-1); h̃_(t-1)], h_(t-1))       input feeding: the previous h̃ joins the input
        score_s  = h_tᵀ W_a h̄_s                               the *current* state is the query
        a_t      = softmax(scores), 0 where mask is False
        c_t      = Σ_s a_t(s) h̄_s
        h̃_t      = tanh(W_c [c_t; h_t])                       the context first
        logits_t = W_s h̃_t

    ``cell`` is an ``nn.GRUCell(E + H, H)``, called as ``cell(input, h_(t-1))``; the matrices are used as given,
    so ``W_a h̄_s`` is ``annotations @ W_a.T``, ``W_c [c; h]`` is ``torch.cat([c, h], -1) @ W_c.T`` and
    ``W_s h̃`` is ``h̃ @ W_s.T``.

    Shapes:
        embedded ``(B, E)``; hidden, attentional ``(B, H)``; annotations ``(B, S, H)``; mask ``(B, S)`` bool
        (True = a real source position); W_a ``(H, H)``; W_c ``(H, 2H)``; W_s ``(V, H)``.
        returns: logits ``(B, V)``, hidden ``(B, H)``, attentional ``(B, H)``, weights ``(B, S)``.

    Returns True if every case passed.
    """
