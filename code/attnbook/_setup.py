"""``attnbook.setup``: one call at the top of every notebook for reproducible runs."""

import random

import numpy as np
import torch

from attnbook import _checks as checks

#: The figure style every chapter uses (small, readable, the same on every machine).
PLOT_STYLE = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "image.cmap": "viridis",
}


def setup(seed: int = 0, threads: int = 1) -> None:
    """Seed Python, NumPy and torch, fix the thread count and set the plot style.

    One thread is the default because the small models of this course train 2-4x
    faster with ``torch.set_num_threads(1)`` than with 2 threads on a 2-core CPU,
    and a single thread makes CPU results repeatable run to run. String hashing is
    not seeded: ``PYTHONHASHSEED`` acts only when Python starts, and the package
    sorts every set before it uses the order.

    Args:
        seed: seed for ``random``, ``numpy.random`` and ``torch``.
        threads: number of intra-op threads torch may use (>= 1).

    Raises:
        ValueError: if ``seed`` is negative or ``threads`` is less than 1.
    """
    checks.non_negative_int(seed=seed)
    checks.positive_int(threads=threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    _set_plot_style()


def _set_plot_style() -> None:
    import matplotlib

    matplotlib.rcParams.update(PLOT_STYLE)
