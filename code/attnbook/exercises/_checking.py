"""The machinery behind every exercise checker.

A checker builds a few :class:`Case` objects (inputs plus the reference answer), then
calls :func:`run_checks`, which

1. calls the learner's function on each case with :func:`call_safely` (it never lets an
   exception escape, and notices a function that changes its inputs in place),
2. compares what came back with the reference using :func:`compare` (or a checker's own
   comparison, which can give more specific hints),
3. stops at the first failing case and prints one ``✗`` message saying what went wrong
   and on which inputs, or prints one ``✓`` line (wrapped at 88 characters, the site's code
   column) when every case passed.

Messages look like this::

    ✓ teacher-forcing inputs: all 5 cases passed (rows of different lengths, ...).

    ✗ teacher-forcing inputs: the output has shape (3, 5) but expected (3, 4)
      hint: you kept the last column; drop it (targets[:, :-1]) so the output has the shape of targets
      case 1 of 5: targets = [[7, 8, 3, 2], [8, 2, 0, 0], [10, 4, 2, 0]] (...), bos_id=1, pad_id=0

The first line says what is wrong, then come optional lines from the checker (a hint,
the row that differs), and last the inputs of the failing case. Whatever the learner's
function prints still appears, above the message.

What is caught: any ``Exception`` and also ``SystemExit`` (a stray ``exit()``) and other
``BaseException``s. ``KeyboardInterrupt`` is *not* caught, so the stop button of a
notebook still interrupts a function that loops forever.

The parts, one job each, are re-exported here so that every checker imports from one place:
:mod:`._calling` (``Case``, ``call_safely``), :mod:`._comparing` (``compare``, ``close`` and
the hints they share), :mod:`._weights` (masking mistakes and leaks in attention weights),
:mod:`._wording` (how values are described) and :mod:`._fake_model` (``ScriptedSeq2Seq``, a
tiny model that follows the course's model protocol, for checking decoding functions).
"""

import functools
import textwrap
from collections.abc import Callable

from attnbook.exercises._calling import Case, call_safely, describe_exception
from attnbook.exercises._comparing import (
    VIEW_HINT,
    as_tensor,
    close,
    compare,
    is_shape_error,
    is_view_error,
    mistake_hint,
    named_tensors,
)
from attnbook.exercises._fake_model import RunawayDecoding, ScriptedSeq2Seq
from attnbook.exercises._weights import (
    LEAK,
    MASKING_HINTS,
    MASKING_MISTAKES,
    STEP_MASKING_MISTAKES,
    first_leak,
    first_problem,
    non_finite_problem,
    position,
    softmax_with,
    weights_problem,
)
from attnbook.exercises._wording import describe, kind_of

__all__ = [
    "Case",
    "call_safely",
    "describe_exception",
    "checker",
    "run_checks",
    "compare",
    "as_tensor",
    "close",
    "named_tensors",
    "mistake_hint",
    "is_shape_error",
    "is_view_error",
    "VIEW_HINT",
    "LEAK",
    "MASKING_HINTS",
    "MASKING_MISTAKES",
    "STEP_MASKING_MISTAKES",
    "softmax_with",
    "position",
    "first_leak",
    "first_problem",
    "non_finite_problem",
    "weights_problem",
    "describe",
    "kind_of",
    "ScriptedSeq2Seq",
    "RunawayDecoding",
]


def run_checks(
    title: str,
    fn,
    cases,
    compare_fn: Callable | None = None,
    checker: str = "check_x",
    summary: str = "",
    error_hint: Callable | None = None,
    shape_hint: str = "",
) -> bool:
    """Check ``fn`` on every case; print one ✓ line or one ✗ message; return True if all passed.

    Args:
        title: what is being checked, e.g. ``"teacher-forcing inputs"``.
        fn: the learner's function (anything: it may not even be callable).
        cases: a list of :class:`Case`, or a function returning one (built only if
            ``fn`` is callable).
        compare_fn: ``compare_fn(got, case) -> str | None``; the default compares with
            ``compare(got, case.expected)``. A checker's own version can give specific
            hints. A returned message may hold several lines.
        summary: what the cases cover, shown after ``✓`` (one line).
        checker: the public checker's name, for the message when ``fn`` is not a function.
        error_hint: ``error_hint(problem, case) -> str``, a hint for a problem found while
            calling ``fn`` (e.g. ``"raised RuntimeError: mat1 and mat2 shapes cannot be
            multiplied ..."``), or ``""``; shown as a ``hint:`` line under the problem.
        shape_hint: the hint for an error about shapes (a matrix product that does not fit ...)
            when ``error_hint`` has none: a template filled in with ``case.info``, e.g.
            ``"h_t (B, d) = ({B}, {d})"``, shown after ``check the shapes:``.

    Never raises, except KeyboardInterrupt (see the module docstring).
    """
    if not callable(fn):
        _print_failure(title, _not_callable_message(fn, checker))
        return False
    try:
        cases = list(cases() if callable(cases) else cases)
    except Exception as error:  # noqa: BLE001 - a bug in a checker must still not raise
        _print_failure(title, f"the checker could not build its cases ({describe_exception(error)})")
        return False
    compare_fn = compare_fn or _default_compare
    for number, case in enumerate(cases, start=1):
        value, problem = call_safely(fn, case)
        if problem is None:
            problem = _compare_safely(compare_fn, value, case)
        else:
            hint = _hint_safely(error_hint, problem, case) if error_hint is not None else ""
            if not hint and shape_hint and is_shape_error(problem):
                hint = _hint_safely(
                    lambda _, shape_case: "check the shapes: " + shape_hint.format(**shape_case.info), problem, case
                )
            problem += f"\nhint: {hint}" if hint else ""
        if problem is not None:
            _print_failure(title, problem, f"case {number} of {len(cases)}: {case.description}")
            return False
    passed = "the one case passed" if len(cases) == 1 else f"all {len(cases)} cases passed"
    line = f"✓ {title}: {passed} ({summary})." if summary else f"✓ {title}: {passed}."
    print(textwrap.fill(line, width=88, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False))
    return True


def checker(
    title: str,
    cases,
    compare_fn: Callable | None = None,
    summary: str = "",
    error_hint: Callable | None = None,
    shape_hint: str = "",
) -> Callable:
    """Turn a function that holds only the learner's docstring into ``check_<name>(fn) -> bool``.

    The arguments are :func:`run_checks`'s; the checker's name and docstring are the function's.
    """

    def make(stub: Callable) -> Callable:
        @functools.wraps(stub)
        def check(fn) -> bool:
            return run_checks(title, fn, cases, compare_fn, stub.__name__, summary, error_hint, shape_hint)

        return check

    return make


def _default_compare(got, case: Case) -> str | None:
    return compare(got, case.expected)


def _compare_safely(compare_fn: Callable, value, case: Case) -> str | None:
    try:
        return compare_fn(value, case)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - an odd return value must not crash the checker
        return f"returned {kind_of(value)}, which the checker could not inspect ({describe_exception(error)})"


def _hint_safely(error_hint: Callable, problem: str, case: Case) -> str:
    try:
        return error_hint(problem, case) or ""
    except Exception:  # noqa: BLE001 - a hint must never crash the checker
        return ""


def _not_callable_message(fn, checker: str) -> str:
    return (
        f"got {kind_of(fn)} instead of a function — pass the function itself, without "
        f"calling it: {checker}(my_function), not {checker}(my_function(...))"
    )


def _print_failure(title: str, problem: str, where: str = "") -> None:
    lines = problem.split("\n")
    message = [f"✗ {title}: {lines[0]}"] + [f"  {line}" for line in lines[1:] + ([where] if where else [])]
    print("\n".join(_fit(line) for line in message))


def _fit(line: str) -> str:
    """A line of prose wrapped at 88 characters, as the site's code column is wide; a line with a run of
    spaces inside (a table's columns) is left as it is."""
    if len(line) <= 88 or "  " in line.strip():
        return line
    indent = "    " if line.startswith("  ") else "  "
    return textwrap.fill(line, width=88, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
