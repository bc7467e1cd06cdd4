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


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(seed=-1), "seed must be a non-negative int, got -1"),
        (dict(seed=1.5), "seed must be a non-negative int, got 1.5"),
        (dict(threads=0), "threads must be a positive int, got 0"),
    ],
)
def test_setup_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        attnbook.setup(**kwargs)


def test_import_pins_the_cpu_kernels_so_seeds_give_the_same_numbers_everywhere():
    """Without the pinning, the same seed trains to different numbers on AVX2 and AVX-512 machines."""
    import os
    import platform
    import subprocess
    import sys

    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the pinning applies to x86-64 only")
    env = {key: value for key, value in os.environ.items() if key not in attnbook.CPU_PINNING}
    shown = subprocess.run(
        [sys.executable, "-c", "import os, torch, attnbook; print([os.environ[k] for k in attnbook.CPU_PINNING])"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert shown == str(list(attnbook.CPU_PINNING.values()))
