"""The machinery behind every exercise checker.

A checker builds a few :class:`Case` objects (inputs plus the reference answer), then
calls :func:`run_checks`, which

1. calls the learner's function on each case with :func:`call_safely` (it never lets an
   exception escape, and notices a function that changes its inputs in place),
2. compares what came back with the reference using :func:`compare` (or a checker's own
   comparison, which can give more specific hints),
3. stops at the first failing case and prints one ``✗`` message saying what went wrong
   and on which inputs, or prints one ``✓`` line when every case passed.

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

This module also holds :class:`ScriptedSeq2Seq`, a tiny fake model that follows the
course's model protocol, for checking decoding functions without training anything.
"""

import contextlib
import copy
import functools
import io
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnbook.attention import masked_softmax
from attnbook.protocol import Step

__all__ = [
    "Case",
    "call_safely",
    "checker",
    "close",
    "first_problem",
    "non_finite_problem",
    "weights_problem",
    "softmax_with",
    "MASKING_MISTAKES",
    "is_shape_error",
    "is_view_error",
    "VIEW_HINT",
    "compare",
    "run_checks",
    "describe",
    "kind_of",
    "ScriptedSeq2Seq",
    "RunawayDecoding",
]

#: Longest piece of a learner's value or printout quoted in a message.
_MAX_QUOTE = 200


@dataclass
class Case:
    """One test case: what to call the learner's function with, and the right answer.

    Attributes:
        description: the inputs in plain words, shown when this case fails,
            e.g. ``"targets of shape (3, 6); bos_id=1, pad_id=0"``.
        args: positional arguments for the learner's function.
        kwargs: keyword arguments.
        expected: the reference answer.
        arg_names: names of the positional arguments, used in messages
            (``"changed its input `targets` in place"``).
        info: anything else a checker's own comparison needs (e.g. the ids used).
    """

    description: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    expected: Any = None
    arg_names: tuple = ()
    info: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- calling


def call_safely(fn: Callable, case: Case) -> tuple[Any, str | None]:
    """Call ``fn(*case.args, **case.kwargs)`` and never raise (except KeyboardInterrupt).

    Returns:
        ``(value, problem)``: ``problem`` is None when the call went well, or a message:
        ``"raised TypeError: ..."``, ``"returned None — did you forget `return`?"``,
        ``"changed its input `targets` in place ..."``.

    What the function prints still appears (after its call finishes); it is also used
    for a hint when the function prints its answer instead of returning it.
    """
    snapshots = {name: _snapshot(value) for name, value in _named_inputs(case)}
    printed = io.StringIO()
    value, problem = None, None
    try:
        with contextlib.redirect_stdout(printed):
            value = fn(*case.args, **case.kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - a checker must survive anything
        problem = f"raised {describe_exception(error)}"
    finally:
        sys.stdout.write(printed.getvalue())

    if problem is None:
        problem = _inputs_changed(case, snapshots)
    if problem is None and value is None:
        problem = "returned None — did you forget `return`?"
        if printed.getvalue().strip():
            problem += " (it printed something: use `return`, not `print`, to give back the answer)"
    return value, problem


def describe_exception(error: BaseException) -> str:
    """``"TypeError: message"``, shortened; SystemExit gets a plain-words note."""
    if isinstance(error, SystemExit):
        return "SystemExit (it called exit() or sys.exit(); return a value instead)"
    try:
        message = _shorten(str(error))
    except Exception:  # noqa: BLE001 - a broken __str__
        message = ""
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _named_inputs(case: Case):
    """(name, value) for every argument, named after ``case.arg_names`` where given."""
    for i, value in enumerate(case.args):
        name = case.arg_names[i] if i < len(case.arg_names) else f"argument {i + 1}"
        yield name, value
    yield from case.kwargs.items()


def _snapshot(value):
    """A copy of a tensor, array or plain container, to detect in-place changes; else None."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, tuple, dict)):
        try:
            return copy.deepcopy(value)
        except Exception:  # noqa: BLE001 - not copyable: not checked
            return None
    return None


def _inputs_changed(case: Case, snapshots: dict) -> str | None:
    for name, value in _named_inputs(case):
        before = snapshots[name]
        if before is not None and not _same(before, value):
            if isinstance(before, np.ndarray):  # a NumPy exercise: NumPy words
                advice = "work on a .copy(), or write the result into a new array"
            else:
                advice = "build a new result (e.g. with torch.cat, or work on a .clone())"
            return f"changed its input `{name}` in place; leave the inputs as they are and " + advice
    return None


def _same(before, after) -> bool:
    """True when ``after`` still equals the snapshot ``before`` (NaN equals NaN)."""
    if isinstance(before, torch.Tensor):
        if not isinstance(after, torch.Tensor) or before.shape != after.shape:
            return False
        if before.dtype != after.dtype:
            return False
        after = after.detach()
        both_nan = torch.isnan(before) & torch.isnan(after) if before.is_floating_point() else False
        return bool(((before == after) | both_nan).all())
    if isinstance(before, np.ndarray):
        if not isinstance(after, np.ndarray):
            return False
        return np.array_equal(before, after, equal_nan=before.dtype.kind == "f")
    try:
        return bool(before == after)
    except Exception:  # noqa: BLE001 - e.g. lists holding tensors: cannot tell, assume unchanged
        return True


# --------------------------------------------------------------------------- comparing


def compare(
    got, expected, name: str = "the output", atol: float = 1e-5, rtol: float = 1e-4, item_names: tuple | None = None
) -> str | None:
    """Compare a learner's value with the reference; None if they match, else a message.

    Works for tensors, NumPy arrays, tuples and lists (compared item by item), bools,
    numbers and strings. Tensors must match in type, shape and dtype *kind* (bool,
    integer or floating point; the precision may differ); integer and bool values must
    be equal, floating-point values close (``|got - expected| <= atol + rtol·|expected|``).

    Args:
        name: what to call ``got`` in the message, e.g. ``"the output"`` or ``"weights"``.
        item_names: names of the items when ``expected`` is a tuple, e.g. ``("out", "weights")``.

    Messages, for example:
        ``"the output has shape (2, 5, 3) but expected (2, 3, 5)"``,
        ``"the output has dtype torch.float32 but expected torch.bool"``,
        ``"the output contains NaN at index (0, 2) (1 of 6 values)"``,
        ``"the output values differ: largest difference 0.31 at index (0, 2);
        expected 0.25, got 0.56"`` (one line),
        ``"the output is a tuple of 3 items but expected 2 (out, weights)"``.
    """
    if isinstance(expected, (torch.Tensor, np.ndarray)):
        return _compare_arrays(got, expected, name, atol, rtol)
    if isinstance(expected, tuple):
        return _compare_tuple(got, expected, name, atol, rtol, item_names)
    if isinstance(expected, list):
        return _compare_list(got, expected, name, atol, rtol)
    if isinstance(expected, (bool, np.bool_)):
        if not isinstance(got, (bool, np.bool_)):
            return f"{name} is {kind_of(got)} but expected a bool ({expected})"
        if bool(got) == bool(expected):
            return None
        return f"{name} is {bool(got)} but expected {bool(expected)}"
    if isinstance(expected, (int, float, np.number)):
        return _compare_number(got, expected, name, atol, rtol)
    if got == expected:
        return None
    return f"{name} is {_quote(got)} but expected {_quote(expected)}"


def _compare_arrays(got, expected, name, atol, rtol) -> str | None:
    library = "torch tensor" if isinstance(expected, torch.Tensor) else "NumPy array"
    if not isinstance(got, type(expected)):
        hint = ""
        if isinstance(got, tuple):
            thing = "tensor" if library == "torch tensor" else "array"
            hint = f" — return only the {thing}"
        return f"{name} is {kind_of(got)}; expected a {library}{hint}"
    got_shape, expected_shape = tuple(got.shape), tuple(expected.shape)
    if got_shape != expected_shape:
        return f"{name} has shape {got_shape} but expected {expected_shape}"
    if _dtype_kind(got) != _dtype_kind(expected):
        return f"{name} has dtype {got.dtype} but expected {expected.dtype}"
    got, expected = _as_numpy(got), _as_numpy(expected)
    if expected.dtype.kind in "biu":
        return _compare_exact(got, expected, name)
    return _compare_close(got, expected, name, atol, rtol)


def _compare_exact(got: np.ndarray, expected: np.ndarray, name: str) -> str | None:
    wrong = got != expected
    if not wrong.any():
        return None
    index = tuple(int(i) for i in np.argwhere(wrong)[0])
    return (
        f"{name} values differ at index {_index(index)}: expected {expected[index].item()}, "
        f"got {got[index].item()} ({int(wrong.sum())} of {wrong.size} values differ)"
    )


def _compare_close(got: np.ndarray, expected: np.ndarray, name: str, atol, rtol) -> str | None:
    problem = _compare_non_finite(got, expected, name)
    if problem:
        return problem
    finite = np.isfinite(expected)
    difference = np.where(finite, np.abs(got - np.where(finite, expected, 0.0)), 0.0)
    too_far = difference > atol + rtol * np.abs(np.where(finite, expected, 0.0))
    if not too_far.any():
        return None
    index = np.unravel_index(np.argmax(np.where(too_far, difference, -1.0)), got.shape)
    index = tuple(int(i) for i in index)
    return (
        f"{name} values differ: largest difference {difference[index]:.3g} at index {_index(index)}; "
        f"expected {expected[index]:.4g}, got {got[index]:.4g}"
    )


def _compare_non_finite(got: np.ndarray, expected: np.ndarray, name: str) -> str | None:
    """Where either side is NaN or ±inf, both must hold the same (NaN matches NaN)."""
    special = ~np.isfinite(got) | ~np.isfinite(expected)
    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    wrong = special & ~same
    if not wrong.any():
        return None
    index = tuple(int(i) for i in np.argwhere(wrong)[0])
    got_value, expected_value = got[index], expected[index]
    where = f"at index {_index(index)}"
    count = f"{int(wrong.sum())} of {got.size} values"
    if np.isnan(got_value) or np.isinf(got_value):
        word = "NaN" if np.isnan(got_value) else str(got_value)
        return f"{name} contains {word} {where} ({count}); expected {expected_value:.4g} there"
    return f"{name} has {got_value:.4g} {where} but expected {expected_value} there ({count})"


def _compare_tuple(got, expected, name, atol, rtol, item_names) -> str | None:
    names = item_names or tuple(f"item {i} of {name}" for i in range(len(expected)))
    listing = f" ({', '.join(item_names)})" if item_names else ""
    if not isinstance(got, (tuple, list)):
        return f"{name} is {kind_of(got)}; expected a tuple of {len(expected)} items{listing}"
    if len(got) != len(expected):
        return f"{name} is a tuple of {_count(len(got), 'item')} but expected {len(expected)}{listing}"
    for got_item, expected_item, item_name in zip(got, expected, names):
        problem = compare(got_item, expected_item, item_name, atol, rtol)
        if problem:
            return problem
    return None


def _compare_list(got, expected, name, atol, rtol) -> str | None:
    if isinstance(got, torch.Tensor):
        return f"{name} is a tensor of shape {tuple(got.shape)}; expected a list (use .tolist())"
    if not isinstance(got, (list, tuple)):
        return f"{name} is {kind_of(got)}; expected a list of {len(expected)} items"
    if len(got) != len(expected):
        return (
            f"{name} has {_count(len(got), 'item')} but expected {len(expected)}: "
            f"expected {_quote(expected)}, got {_quote(got)}"
        )
    for i, (got_item, expected_item) in enumerate(zip(got, expected)):
        problem = compare(got_item, expected_item, f"{name}[{i}]", atol, rtol)
        if problem:
            return problem
    return None


def _compare_number(got, expected, name, atol, rtol) -> str | None:
    if isinstance(got, (torch.Tensor, np.ndarray)):
        return f"{name} is {kind_of(got)}; expected a Python number (use .item())"
    if isinstance(got, bool) or not isinstance(got, (int, float, np.number)):
        return f"{name} is {kind_of(got)}; expected a number ({expected})"
    if got == expected or math.isclose(got, expected, rel_tol=rtol, abs_tol=atol):
        return None
    return f"{name} is {got!r} but expected {expected!r}"


def _dtype_kind(array) -> str:
    """'bool', 'integer', 'floating' or 'complex' for a tensor or an array."""
    if isinstance(array, torch.Tensor):
        if array.dtype == torch.bool:
            return "bool"
        if array.is_floating_point():
            return "floating"
        return "complex" if array.is_complex() else "integer"
    kinds = {"b": "bool", "i": "integer", "u": "integer", "f": "floating", "c": "complex"}
    return kinds.get(array.dtype.kind, "other")


def _as_numpy(array) -> np.ndarray:
    """A NumPy copy; floating tensors as float64 (half and bfloat16 have no NumPy type)."""
    if isinstance(array, torch.Tensor):
        array = array.detach().cpu()
        if array.is_floating_point():
            array = array.double()
        return array.numpy()
    return array.astype(np.float64) if array.dtype.kind == "f" else array


# ---------------------------------------------------------------------------- running


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
    passed = "the 1 case passed" if len(cases) == 1 else f"all {len(cases)} cases passed"
    print(f"✓ {title}: {passed} ({summary})." if summary else f"✓ {title}: {passed}.")
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
    message = f"✗ {title}: {lines[0]}"
    for line in lines[1:] + ([where] if where else []):
        message += f"\n  {line}"
    print(message)


def close(got: torch.Tensor, other: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Same shape and ``allclose`` in float64 (NaN equals NaN): for matching a wrong answer to a known mistake."""
    if got.shape != other.shape:
        return False
    return bool(torch.allclose(got.double(), other.double(), atol=atol, rtol=rtol, equal_nan=True))


def named_tensors(got, names: tuple[str, ...]) -> dict[str, torch.Tensor] | None:
    """``got`` as ``{name: tensor}`` if it is a tuple or list of ``len(names)`` tensors, else None."""
    if isinstance(got, (tuple, list)) and len(got) == len(names) and all(isinstance(x, torch.Tensor) for x in got):
        return {name: value.detach() for name, value in zip(names, got)}
    return None


def mistake_hint(got: dict, expected: dict, reference: Callable, args: tuple, mistakes: list) -> str | None:
    """The hint of the first ``(keywords, item, hint)`` in ``mistakes`` whose wrong answer, ``reference(*args,
    **keywords)``, matches ``got[item]`` where the right one does not; None if no mistake matches."""
    for keywords, item, hint in mistakes:
        wrong = dict(zip(expected, reference(*args, **keywords)))
        if not close(got[item], expected[item]) and close(got[item], wrong[item]):
            return hint
    return None


def is_shape_error(problem: str) -> bool:
    """True for a problem that is a RuntimeError about shapes (a matrix product that does not fit ...)."""
    words = ("shape", "size", "dimension", "cannot be multiplied")
    return problem.startswith("raised RuntimeError") and any(word in problem.lower() for word in words)


#: The hint for ``view`` on a tensor whose memory does not allow it (after a transpose).
VIEW_HINT = (
    "view needs the tensor's numbers laid out in one block of memory, which a "
    "transpose or permute breaks: use reshape, or .contiguous().view(...)"
)


def is_view_error(problem: str) -> bool:
    """True for the RuntimeError of ``view`` on a non-contiguous tensor."""
    text = problem.lower()
    return problem.startswith("raised RuntimeError") and ("view size is not compatible" in text or "contiguous" in text)


# ------------------------------------------------------------- attention weights

#: A weight above this at a masked position counts as "not masked".
LEAK = 1e-6


#: The typical masking mistakes, as ``(keyword arguments, hint)`` for a checker's catalogue of mistakes
#: whose reference takes ``masking=`` (see :func:`softmax_with`).
MASKING_MISTAKES = [
    (
        dict(masking="none"),
        "the mask was not applied: set the masked scores to -inf (or the most negative float) "
        "before the softmax, e.g. scores.masked_fill(~mask, float('-inf'))",
    ),
    (
        dict(masking="multiply"),
        "multiplying the scores by the mask turns masked scores into 0, and exp(0) still "
        "gets weight; set them to -inf instead (masked_fill)",
    ),
    (
        dict(masking="inverted"),
        "mask True means *may attend* (as in torch's scaled_dot_product_attention): you "
        "left out the True positions instead of the False ones",
    ),
    (
        dict(masking="after"),
        "zeroing the masked weights after the softmax leaves rows that no longer sum to 1; "
        "mask the scores before the softmax",
    ),
]


def softmax_with(scores, mask, masking: str = "fill", dim: int = -1):
    """A masked softmax done right (``"fill"``) or with a typical mistake: ``"none"`` (mask ignored),
    ``"multiply"`` (scores times the mask), ``"after"`` (weights times the mask), ``"inverted"`` (~mask)."""
    if mask is None or masking == "none":
        return torch.softmax(scores, dim=dim)
    if masking == "multiply":
        return torch.softmax(scores * mask, dim=dim)
    if masking == "after":
        return torch.softmax(scores, dim=dim) * mask
    return masked_softmax(scores, ~mask if masking == "inverted" else mask, dim=dim)


def position(index: tuple) -> str:
    """'position 3 of row 1' for (1, 3); 'position 2 of row (0, 1)' for (0, 1, 2)."""
    row = index[:-1]
    return f"position {index[-1]} of row {row[0] if len(row) == 1 else row}"


def first_leak(weights: torch.Tensor, mask: torch.Tensor):
    """The first masked position with a non-zero weight: (index, value), or None."""
    leaks = (~mask) & (weights.abs() > LEAK)
    if not leaks.any():
        return None
    index = tuple(int(i) for i in leaks.nonzero()[0])
    return index, float(weights[index])


def first_problem(got: torch.Tensor, expected: torch.Tensor, mask: torch.Tensor, name: str) -> str:
    """The first line of a message about wrong weights: a masked position's weight, or the values."""
    leak = first_leak(got, mask)
    if leak:
        index, value = leak
        return f"{name}: {position(index)} is masked but got weight {value:.2g}"
    return compare(got, expected, name) or f"{name} differ from the expected ones"


def non_finite_problem(got: torch.Tensor, expected: torch.Tensor, case: Case, name: str) -> str | None:
    """A message for NaN or inf in ``got``, with a hint when the case explains it."""
    bad = ~torch.isfinite(got)
    if not bad.any():
        return None
    problem = compare(got, expected, name) or f"{name} contains NaN or inf"
    rows = {tuple(int(i) for i in index[:-1]) for index in bad.nonzero()}
    fully_masked = [row for row in case.info.get("fully_masked", []) if row in rows]
    if fully_masked:
        row = fully_masked[0]
        where = row[0] if len(row) == 1 else row
        hint = (
            f"row {where} has no position it may attend, so its softmax is 0 / 0 = NaN; return all "
            "zeros there, e.g. torch.nan_to_num(weights, nan=0.0) after the softmax, or fill masked "
            "scores with a large negative finite number and zero the masked weights afterwards"
        )
        return f"{problem}\nhint: {hint}"
    if case.info.get("large"):
        return (
            f"{problem}\nhint: exp(1000) overflows to inf and exp(-1000) underflows to 0, so the "
            "division gives inf / inf or 0 / 0 = NaN: subtract each row's maximum score before exp "
            "(torch.softmax does this for you)"
        )
    return problem


def weights_problem(got: torch.Tensor, expected: torch.Tensor, mask: torch.Tensor, case: Case, name: str) -> str | None:
    """Checks of any weights against the rules: masked -> 0, fully masked rows -> 0, rows sum to 1."""
    leak = first_leak(got, mask)
    if leak:
        index, value = leak
        row = index[:-1]
        if row in case.info.get("fully_masked", []):
            where = row[0] if len(row) == 1 else row
            total = float(got[row].sum())
            return (
                f"{name}: row {where} is fully masked but its weights sum to {total:.3g}; "
                f"they must all be 0\nhint: with a finite fill value such as -1e9 the softmax "
                "spreads the weight evenly over a fully masked row; set the masked weights to 0 "
                "after the softmax (e.g. weights.masked_fill(~mask, 0.0))"
            )
        return (
            f"{name}: {position(index)} is masked but got weight {value:.2g}\n"
            "hint: masked positions must get exactly 0 weight: set their scores to -inf "
            "before the softmax"
        )
    problem = compare(got, expected, name)
    if problem is None:
        return None
    sums = got.double().sum(dim=-1)  # (...,)
    allowed = mask.any(dim=-1)  # (...,) rows with something to attend
    off = allowed & ((sums - 1).abs() > 1e-3)
    if off.any():
        row = tuple(int(i) for i in off.nonzero()[0])
        where = row[0] if len(row) == 1 else row
        return f"{problem}\nhint: row {where} of the {name} sums to {float(sums[row]):.3g}; a softmax row sums to 1"
    return problem


# --------------------------------------------------------------------------- wording


def describe(value) -> str:
    """A short plain-words description of an input, for case descriptions.

    ``describe(torch.zeros(3, 6, dtype=torch.long))`` -> ``"a long tensor of shape (3, 6)"``.
    """
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        dtype = {"int64": "long", "float32": "float"}.get(dtype, dtype)
        return f"a {dtype} tensor of shape {tuple(value.shape)}"
    return _quote(value)


def kind_of(value) -> str:
    """What ``value`` is, in words.

    'None', 'a list of 2 items', 'a tensor of shape (2, 3)', 'an int (5)', 'a generator'.
    """
    if value is None:
        return "None"
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, np.ndarray):
        return f"a NumPy array of shape {value.shape}"
    if isinstance(value, (bool, int, float, str)):
        return f"{_a(type(value).__name__)} ({_quote(value)})"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {_count(len(value), 'item')}"
    return _a(type(value).__name__)


def _count(number: int, noun: str) -> str:
    """'1 item', '3 items'."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _a(noun: str) -> str:
    """'a list', 'an int'."""
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


def _quote(value) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__
        text = f"<{type(value).__name__}>"
    return _shorten(text)


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_QUOTE else text[: _MAX_QUOTE - 1] + "…"


def _index(index: tuple) -> str:
    return str(index[0]) if len(index) == 1 else str(index)


# ------------------------------------------------------------------ a fake seq2seq model


class RunawayDecoding(RuntimeError):
    """Raised by :class:`ScriptedSeq2Seq` when decoding goes on far past ``max_len``."""


class _ScriptedState:
    """The decoder state of :class:`ScriptedSeq2Seq`: the step number and the scripts."""

    def __init__(self, scripts: list, step: int):
        self.scripts = scripts
        self.step = step
        self.used = False


class ScriptedSeq2Seq:
    """A fake seq2seq model that follows the course's model protocol with fixed answers.

    Each source row has a *script*: the tokens the model predicts at steps 0, 1, 2, ...
    when it is fed back its own predictions, as greedy decoding does. A script may
    contain ``eos_id`` (tokens after it are arbitrary, as a real model's would be) or
    not (the row never ends by itself, so ``max_len`` has to stop it). If a step is fed
    a token other than the one predicted just before (or ``bos_id`` at step 0), the
    model predicts a "confused" token instead, so a loop that does not feed back its
    predictions gets wrong answers.

    Protocol (:class:`attnbook.protocol.Seq2SeqModel`):
        ``start(src (B, S) long) -> state``;
        ``step(state, prev_tokens (B,) long) -> Step(logits (B, V), new state, weights (B, S))``.

    The model also records misuse for the checker's hints: ``stale_state`` (a state was
    stepped twice), ``only_fed_bos`` (every step after the first was fed ``bos_id``) and
    ``fed_wrong_token``, the first ``(step, row, fed, predicted)`` where an unfinished
    row was fed something other than its previous prediction.

    Calling ``step`` more than ``max_steps`` times in a row raises :class:`RunawayDecoding`
    with ``runaway_hint`` in its message, so a loop that never stops fails quickly.

    Shapes:
        sources: (N, S) long, the source rows it knows; ``start`` accepts any of them,
            in any order or batch size (decoding one row at a time works too).
        scripts: N lists of token ids, each at least ``max_steps`` long.
    """

    def __init__(
        self,
        sources: torch.Tensor,
        scripts: list,
        vocab_size: int,
        bos_id: int,
        eos_id: int,
        max_steps: int,
        pad_id: int = 0,
        runaway_hint: str = "decoding should have stopped earlier",
    ):
        self.pad_id = pad_id
        self.runaway_hint = runaway_hint
        self.vocab_size = vocab_size
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.max_steps = max_steps
        self._scripts = {tuple(row.tolist()): list(script) for row, script in zip(sources, scripts)}
        self._num_src = sources.shape[1]
        self.stale_state = False
        self._fed_only_bos = True
        self.fed_wrong_token = None
        self._steps_after_first = 0

    def __call__(self, *args, **kwargs):
        raise TypeError("this model only decodes step by step: use model.start(src) and model.step(state, prev_tokens)")

    def start(self, src: torch.Tensor) -> _ScriptedState:
        """Encode ``src`` (B, S): here, look up each row's script."""
        if not isinstance(src, torch.Tensor) or src.dim() != 2:
            raise ValueError(f"model.start expects src as a (B, S) tensor, got {describe(src)}")
        scripts = []
        for row in src.tolist():
            if tuple(row) not in self._scripts:
                raise ValueError("model.start got a source row the checker did not give: pass src unchanged")
            scripts.append(self._scripts[tuple(row)])
        return _ScriptedState(scripts, step=0)

    def step(self, state: _ScriptedState, prev_tokens: torch.Tensor):
        """One decoder step: logits (B, V) whose argmax is each row's next scripted token."""
        self._check_step_inputs(state, prev_tokens)
        if state.used:
            self.stale_state = True
        state.used = True
        if state.step >= self.max_steps:
            raise RunawayDecoding(f"model.step was called {state.step + 1} times for one batch, {self.runaway_hint}")
        batch_size = len(state.scripts)
        generator = torch.Generator().manual_seed(1000 + state.step)
        logits = torch.rand(batch_size, self.vocab_size, generator=generator)  # noise in [0, 1)
        for row, script in enumerate(state.scripts):
            logits[row, self._next_token(state, row, script, int(prev_tokens[row]))] = 3.0
        weights = torch.full((batch_size, self._num_src), 1.0 / self._num_src)  # (B, S), uniform
        return Step(logits, _ScriptedState(state.scripts, state.step + 1), weights)

    def _next_token(self, state: _ScriptedState, row: int, script: list, fed: int) -> int:
        step = state.step
        right = self.bos_id if step == 0 else script[step - 1]
        if step > 0 and not self._finished(script, step):
            self._steps_after_first += 1
            if fed != self.bos_id:
                self._fed_only_bos = False
        if fed == right:
            return script[step]
        if self.fed_wrong_token is None and not self._finished(script, step):
            self.fed_wrong_token = (step, row, fed, right)
        return self._confused_token(script[step])

    def _finished(self, script: list, step: int) -> bool:
        """True if this row already predicted eos before ``step``."""
        return self.eos_id in script[:step]

    def _confused_token(self, token: int) -> int:
        """A regular token other than ``token`` (never pad, bos or eos)."""
        specials = {self.pad_id, self.bos_id, self.eos_id, token}
        return next(t for t in range(self.vocab_size - 1, -1, -1) if t not in specials)

    def _check_step_inputs(self, state, prev_tokens) -> None:
        if not isinstance(state, _ScriptedState):
            raise TypeError(
                f"model.step expects the state returned by model.start or by the previous "
                f"model.step, got {kind_of(state)}"
            )
        batch_size = len(state.scripts)
        if not isinstance(prev_tokens, torch.Tensor):
            raise TypeError(
                f"model.step expects prev_tokens as a tensor of shape ({batch_size},), got {kind_of(prev_tokens)}"
            )
        if tuple(prev_tokens.shape) != (batch_size,):
            hint = ""
            if tuple(prev_tokens.shape) == (self.vocab_size,):
                hint = " — did you take the argmax over dim=0 instead of the last dimension?"
            raise ValueError(
                f"model.step expects prev_tokens of shape ({batch_size},), one token per row, "
                f"but got shape {tuple(prev_tokens.shape)}{hint}"
            )
        if prev_tokens.is_floating_point() or prev_tokens.dtype == torch.bool:
            raise TypeError(f"model.step expects integer token ids (torch.long), got dtype {prev_tokens.dtype}")

    @property
    def only_fed_bos(self) -> bool:
        """True if, after step 0, every unfinished row was always fed ``bos_id``."""
        return self._steps_after_first > 0 and self._fed_only_bos
