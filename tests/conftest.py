"""Shared test settings: a headless plot backend and one torch thread (fast, repeatable).

The backend is chosen with matplotlib.use, not the MPLBACKEND environment variable: nbval's
notebook kernels inherit the environment, and MPLBACKEND=Agg would stop them from showing
figures inline (so their outputs would no longer match the stored ones).
"""

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402

torch.set_num_threads(1)
