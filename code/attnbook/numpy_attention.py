"""NumPy versions of attention, the ones Chapters 4-5 and 7 build first (tested equal to :mod:`attnbook.attention`).

Plain arrays, no autograd: every step of ``softmax(Q Kᵀ / √d_k) V`` can be printed and checked by hand.
"""

from __future__ import annotations

import numpy as np

__all__ = ["softmax", "scaled_dot_product_attention", "running_softmax_attention"]


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``exp(x) / Σ exp(x)`` along ``axis``; the maximum is subtracted first so that ``exp`` cannot overflow.

    Shapes:
        x ``(..., L)`` -> ``(..., L)``
    """
    shifted = x - x.max(axis=axis, keepdims=True)  # the largest entry becomes 0: exp(...) <= 1
    exps = np.exp(shifted)
    return exps / exps.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
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


def running_softmax_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, block_size: int) -> np.ndarray:
    """``softmax(Q Kᵀ / √d_k) V`` from blocks of ``block_size`` keys, never holding a full row of scores.

    The idea inside FlashAttention (Dao et al. 2022): keep, for every query, the largest score so far ``m``,
    the sum ``l`` of ``exp(score - m)`` and the weighted sum ``acc`` of values. A new block with a larger
    maximum ``m'`` rescales both by ``exp(m - m')``; at the end ``acc / l`` is the attention output.

    Shapes:
        q ``(..., L_q, d_k)``, k ``(..., L_k, d_k)``, v ``(..., L_k, d_v)`` -> ``(..., L_q, d_v)``
    """
    if not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    m = np.full(q.shape[:-1] + (1,), -np.inf)  # (..., L_q, 1): the largest score so far
    l = np.zeros(q.shape[:-1] + (1,))  # (..., L_q, 1): Σ exp(score - m)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],))  # (..., L_q, d_v): Σ exp(score - m) · value
    for start in range(0, k.shape[-2], block_size):
        k_block, v_block = k[..., start : start + block_size, :], v[..., start : start + block_size, :]  # (..., b, d)
        scores = q @ np.swapaxes(k_block, -1, -2) / np.sqrt(q.shape[-1])  # (..., L_q, b): one tile
        m_new = np.maximum(m, scores.max(axis=-1, keepdims=True))  # (..., L_q, 1)
        rescale = np.exp(m - m_new)  # (..., L_q, 1): old sums were relative to the old maximum
        p = np.exp(scores - m_new)  # (..., L_q, b), every entry <= 1
        l = l * rescale + p.sum(axis=-1, keepdims=True)
        acc = acc * rescale + p @ v_block  # (..., L_q, d_v)
        m = m_new
    return acc / l
