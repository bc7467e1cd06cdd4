"""Comparing an answer with the reference, and naming what differs."""

import math
from collections.abc import Callable

import numpy as np
import torch

from attnbook.exercises._wording import _count, _index, _quote, kind_of


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


def as_tensor(value):
    """A NumPy answer as a tensor (any strides, e.g. after ``[::-1]``); anything else as it is."""
    if not isinstance(value, np.ndarray):
        return value
    try:
        return torch.from_numpy(np.ascontiguousarray(value))
    except (TypeError, ValueError):  # e.g. an array of objects: compared as it is
        return value


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
