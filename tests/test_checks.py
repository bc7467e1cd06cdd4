"""attnbook._checks: the shared input validation and its one message style."""

import pytest
import torch

from attnbook import _checks as checks


@pytest.mark.parametrize("value", [0, -3, 2.0, True, "4", None])
def test_positive_int_rejects_everything_but_a_positive_int(value):
    with pytest.raises(ValueError, match=f"^size must be a positive int, got {value!r}$".replace("(", r"\(")):
        checks.positive_int(size=value)
    checks.positive_int(size=1, other=7)


def test_non_negative_int_integer_and_in_range():
    checks.non_negative_int(n=0)
    with pytest.raises(ValueError, match="n must be a non-negative int, got -1"):
        checks.non_negative_int(n=-1)
    with pytest.raises(ValueError, match="seed must be an int, got False"):
        checks.integer(seed=False)
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\), got 1"):
        checks.in_range("label_smoothing", 1, 0.0, 1.0)


def test_pad_id_one_of_and_same():
    with pytest.raises(ValueError, match="pad_id=4 is not an id of a vocabulary of size 4"):
        checks.pad_id(4, 4)
    with pytest.raises(ValueError, match="pad_id=True is not an id"):
        checks.pad_id(True, 4)
    with pytest.raises(ValueError, match="unknown score 'x'; choose one of 'dot', 'general'"):
        checks.one_of("score", "x", ("dot", "general"))
    with pytest.raises(ValueError, match="pad_id=0 but the decoder's pad_id=3"):
        checks.same("pad_id", 0, "the decoder's pad_id", 3)


def test_shapes_binds_letters_across_tensors_and_to_known_sizes():
    sizes = checks.shapes(
        "Layer",
        dict(d=4),
        query=(torch.zeros(2, 4), "B d"),
        keys=(torch.zeros(2, 5, 4), "B L d"),
        mask=(torch.ones(2, 5, dtype=torch.bool), "B L : bool"),
        unused=(None, "B"),
    )
    assert sizes == dict(B=2, d=4, L=5)
    with pytest.raises(ValueError, match=r"keys has L=6 \(shape \(2, 6\)\) but mask has L=5 \(shape \(2, 5\)\)"):
        checks.shapes("Layer", mask=(torch.ones(2, 5, dtype=torch.bool), "B L"), keys=(torch.zeros(2, 6), "B L"))
    with pytest.raises(ValueError, match=r"query has d=3 \(shape \(2, 3\)\) but Layer expects d=4"):
        checks.shapes("Layer", dict(d=4), query=(torch.zeros(2, 3), "B d"))
    with pytest.raises(ValueError, match=r"query must be 2-D \(B, d\) or 3-D \(B, T, d\), got shape \(4,\)"):
        checks.shapes("Layer", query=(torch.zeros(4), ("B d", "B T d")))
    with pytest.raises(TypeError, match=r"src must hold token ids as torch.long, got dtype torch.float32"):
        checks.shapes("Model", src=(torch.zeros(2, 3), "B S : long"))
    with pytest.raises(TypeError, match=r"mask must be a bool tensor \(True = may attend\), got dtype torch.int64"):
        checks.shapes("Layer", mask=(torch.ones(2, 3, dtype=torch.long), "B L : bool"))
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor, got dtype torch.int64"):
        checks.shapes("Layer", x=(torch.ones(2, dtype=torch.long), "B : float"))
    with pytest.raises(TypeError, match=r"keys must be a tensor, 2-D \(B, L\), got list"):
        checks.shapes("Layer", keys=([1, 2], "B L"))


def test_broadcastable_and_right_padded():
    scores = torch.zeros(2, 3, 4)
    checks.broadcastable("mask", torch.ones(3, 4, dtype=torch.bool), "scores", scores)
    checks.broadcastable("mask", torch.ones(2, 1, 4, dtype=torch.bool), "scores", scores)
    with pytest.raises(
        ValueError, match=r"mask of shape \(5, 3, 4\) does not broadcast to scores of shape \(2, 3, 4\)"
    ):
        checks.broadcastable("mask", torch.ones(5, 3, 4, dtype=torch.bool), "scores", scores)
    with pytest.raises(TypeError, match=r"mask must be a bool tensor \(True = may attend\), got list"):
        checks.broadcastable("mask", [True], "scores", scores)
    assert torch.equal(
        checks.right_padded(torch.tensor([[4, 5, 0], [6, 0, 0]]), 0),
        torch.tensor([[True, True, False], [True, False, False]]),
    )
    with pytest.raises(ValueError, match="src must be padded on the right only"):
        checks.right_padded(torch.tensor([[4, 0, 5]]), 0)
    with pytest.raises(ValueError, match=r"src rows \[0\] are all padding \(pad_id=0\)"):
        checks.right_padded(torch.tensor([[0, 0], [4, 0]]), 0)
