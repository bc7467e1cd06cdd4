"""Calling a learner's function safely: no exception escapes, changed inputs are noticed."""

import contextlib
import copy
import io
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnbook.exercises._wording import _shorten


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
            else:  # a checker may give advice that fits its exercise (case.info)
                advice = case.info.get("in_place_advice") or (
                    "build a new result: write x = x * y, not x *= y or x.mul_(y), or work on a .clone()"
                )
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
