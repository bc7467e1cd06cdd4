"""attnbook.setup: seeds, threads, plot style, and clear errors."""

import random

import matplotlib
import numpy as np
import pytest
import torch

import attnbook


def draw_everything():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_setup_makes_runs_repeatable():
    attnbook.setup(seed=3)
    first = draw_everything()
    attnbook.setup(seed=3)
    assert draw_everything() == first
    attnbook.setup(seed=4)
    assert draw_everything() != first


def test_setup_fixes_threads_and_style():
    attnbook.setup(seed=0, threads=1)
    assert torch.get_num_threads() == 1
    assert matplotlib.rcParams["axes.spines.top"] is False


@pytest.mark.parametrize("kwargs, message", [
    (dict(seed=-1), "seed must be a non-negative int, got -1"),
    (dict(seed=1.5), "seed must be a non-negative int, got 1.5"),
    (dict(threads=0), "threads must be a positive int, got 0"),
])
def test_setup_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        attnbook.setup(**kwargs)
