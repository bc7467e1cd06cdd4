"""How checkers word values in their messages: shapes, kinds, quotes."""

import numpy as np
import torch

#: Longest piece of a learner's value or printout quoted in a message.
_MAX_QUOTE = 200


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
