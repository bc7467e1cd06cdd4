"""NumPy versions of attention, the ones Chapters 4-5 build first (tested equal to :mod:`attnbook.attention`).

Plain arrays, no autograd: every step of ``softmax(Q Kᵀ / √d_k) V`` can be printed and checked by hand.
"""

from __future__ import annotations

import numpy as np

__all__ = ["softmax", "scaled_dot_product_attention"]


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``exp(x) / Σ exp(x)`` along ``axis``; the maximum is subtracted first so that ``exp`` cannot overflow.

    Shapes:
        x ``(..., L)`` -> ``(..., L)``
    """
    shifted = x - x.max(axis=axis, keepdims=True)  # the largest entry becomes 0: exp(...) <= 1
    exps = np.exp(shifted)
    return exps / exps.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                                 mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``softmax(Q Kᵀ / √d_k) V`` and the weights; ``mask`` (bool, True = may attend) zeroes weights.

    A row with nothing to attend gets zero weights (a ``-inf`` fill would give ``0 / 0 = NaN`` there).

    Shapes:
        q ``(..., L_q, d_k)``, k ``(..., L_k, d_k)``, v ``(..., L_k, d_v)``, mask broadcastable to
        ``(..., L_q, L_k)`` -> (output ``(..., L_q, d_v)``, weights ``(..., L_q, L_k)``)
    """
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (..., L_q, L_k)
    if mask is not None:
        scores = np.where(mask, scores, np.finfo(scores.dtype).min)  # masked: the most negative number
    weights = softmax(scores, axis=-1)  # (..., L_q, L_k)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)  # exactly 0 where masked; all 0 in a fully masked row
    return weights @ v, weights  # (..., L_q, d_v)
