"""attnbook.metrics: exact match, token accuracy, accuracy by length."""

import numpy as np
import pytest
import torch

from attnbook.metrics import accuracy_by_length, exact_match, token_accuracy


def test_exact_match_counts_identical_sequences():
    predictions = [[5, 6], [7], [8, 9, 10], []]
    targets = [[5, 6], [7, 7], [8, 9], []]
    assert exact_match(predictions, targets) == 0.5


def test_exact_match_accepts_strings_tensors_and_arrays():
    assert exact_match(["abc", "de"], ["abc", "dx"]) == 0.5
    assert exact_match([torch.tensor([4, 5])], [[4, 5]]) == 1.0
    assert exact_match([np.array([4, 5])], [(4, 5)]) == 1.0
    assert exact_match([["<a>", "b"]], [["<a>", "b"]]) == 1.0


def test_exact_match_accepts_a_2d_tensor_as_rows():
    predictions = torch.tensor([[4, 5], [6, 7]])
    assert exact_match(predictions, [[4, 5], [6, 8]]) == 0.5


def test_token_accuracy_same_length():
    # 3 of 4 tokens right + both ends right: (3 + 1) / (4 + 1)
    assert token_accuracy([[1, 2, 3, 4]], [[1, 2, 0, 4]]) == pytest.approx(4 / 5)


def test_token_accuracy_short_prediction_loses_missing_positions_and_the_end():
    # target has 3 tokens + end = 4 positions; prediction gets 2 tokens right, the end wrong
    assert token_accuracy([[5, 6]], [[5, 6, 7]]) == pytest.approx(2 / 4)


def test_token_accuracy_long_prediction_loses_the_end_only():
    assert token_accuracy([[5, 6, 9, 9, 9]], [[5, 6]]) == pytest.approx(2 / 3)


def test_token_accuracy_pools_positions_over_pairs():
    predictions = ["ab", "xyz"]
    targets = ["ab", "xyw"]
    # pair 1: 2 + end = 3 of 3; pair 2: 2 + end = 3 of 4
    assert token_accuracy(predictions, targets) == pytest.approx(6 / 7)


def test_token_accuracy_empty_prediction_for_empty_target_is_right():
    assert token_accuracy([[]], [[]]) == 1.0
    assert token_accuracy([[3]], [[]]) == 0.0


def test_token_accuracy_perfect_and_zero():
    assert token_accuracy([[1, 2], [3]], [[1, 2], [3]]) == 1.0
    assert token_accuracy([[9, 9]], [[1, 2, 3]]) == 0.0


def test_accuracy_by_length_groups_and_sorts():
    predictions = [[1], [2], [3], [4], [5]]
    targets = [[1], [0], [3], [4], [0]]
    lengths = [7, 3, 3, 12, 7]
    result = accuracy_by_length(predictions, targets, lengths)
    assert result == {3: 0.5, 7: 0.5, 12: 1.0}
    assert list(result) == [3, 7, 12]


def test_accuracy_by_length_accepts_a_lengths_tensor():
    result = accuracy_by_length(["a", "b"], ["a", "c"], torch.tensor([4, 2]))
    assert result == {2: 0.0, 4: 1.0}
    assert all(type(key) is int for key in result)


@pytest.mark.parametrize("metric", [exact_match, token_accuracy])
def test_mismatched_counts_name_both_arguments(metric):
    with pytest.raises(ValueError, match=r"predictions has 2 sequences but targets has 3"):
        metric([[1], [2]], [[1], [2], [3]])


@pytest.mark.parametrize("metric", [exact_match, token_accuracy])
def test_empty_input_is_an_error(metric):
    with pytest.raises(ValueError, match=r"predictions and targets are empty"):
        metric([], [])


def test_accuracy_by_length_mismatched_lengths_is_an_error():
    with pytest.raises(ValueError, match=r"lengths has 1 items but predictions and targets have 2"):
        accuracy_by_length([[1], [2]], [[1], [2]], [3])


def test_accuracy_by_length_empty_is_an_error():
    with pytest.raises(ValueError, match=r"empty"):
        accuracy_by_length([], [], [])


def test_a_number_instead_of_a_sequence_is_an_error():
    with pytest.raises(ValueError, match=r"predictions\[1\] must be a sequence"):
        exact_match([[1], 5], [[1], [5]])
    with pytest.raises(ValueError, match=r"targets\[0\] is a single number"):
        exact_match([[1]], [torch.tensor(1)])
