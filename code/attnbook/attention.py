"""Attention mechanisms, one concept per name (chapters 2-6).

An attention layer takes a *query* and a set of *keys* with their *values*, scores every
key against the query, turns the scores into weights with a softmax over the keys, and
returns the weighted average of the values together with the weights, ``(output, weights)``,
so every chapter can plot where the model looked.

Conventions (COURSE_GUIDE §3): batch first; masks are bool with ``True`` = may attend,
broadcastable to the scores; a fully masked row gives zero weights, never NaN.

Letters used in the shapes below:
``B`` batch, ``L`` number of keys (e.g. source positions), ``d_q`` query size,
``d_k`` key size, ``d_v`` value size, ``h`` hidden size of the additive scorer.

- :func:`masked_softmax`: softmax that gives exactly zero weight where the mask is False.
- :class:`AdditiveAttention`: Bahdanau et al. (2015)'s alignment model (chapter 2).

(Luong's multiplicative scores, scaled dot-product and multi-head attention join this
module in chapters 3-5.)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["masked_softmax", "AdditiveAttention"]


def masked_softmax(scores: Tensor, mask: Tensor | None = None, dim: int = -1) -> Tensor:
    """Softmax over ``dim`` that gives exactly zero weight where ``mask`` is False.

    How: masked scores are replaced by the most negative finite number of the dtype
    (``torch.finfo(dtype).min``), the softmax is taken, and the masked positions are then
    set to exactly 0. Why not ``-inf``? In a row whose every position is masked, the
    softmax of all ``-inf`` is ``0 / 0 = NaN``, and the NaN would also poison the gradients.
    With a finite fill value that row becomes uniform, and the last step turns it into all
    zeros; in a partly masked row ``exp(finfo.min - max)`` is already exactly 0, and the last
    step makes that explicit. ``torch.softmax`` subtracts the row maximum before ``exp``, so
    large scores (say 1000) do not overflow.

    Args:
        scores: attention scores, floating point.
        mask: bool, ``True`` = may attend (the polarity of
            ``torch.nn.functional.scaled_dot_product_attention``); ``None`` attends everywhere.
            It must broadcast to the shape of ``scores``, e.g. a ``(B, 1, L)`` padding mask
            over ``(B, T, L)`` scores, or a ``(T, L)`` causal mask.
        dim: the dimension to normalise over (the keys).

    Returns:
        Weights of the shape of ``scores``: non-negative, summing to 1 over ``dim`` wherever
        at least one position may be attended, exactly 0 at masked positions, and all zeros
        along a fully masked row.

    Shapes:
        scores ``(..., L)``, mask broadcastable to it -> weights ``(..., L)``

    Raises:
        TypeError: if ``scores`` is not a floating-point tensor or ``mask`` is not bool.
        ValueError: if ``mask`` does not broadcast to the shape of ``scores``.
    """
    if not isinstance(scores, Tensor) or not scores.is_floating_point():
        what = f"dtype {scores.dtype}" if isinstance(scores, Tensor) else type(scores).__name__
        raise TypeError(f"scores must be a floating-point tensor, got {what}")
    if mask is None:
        return torch.softmax(scores, dim=dim)
    _check_mask_broadcasts(mask, scores)
    blocked = ~mask  # True = may NOT attend; broadcasts to scores.shape
    filled = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    weights = torch.softmax(filled, dim=dim)
    return weights.masked_fill(blocked, 0.0)


def _check_mask_broadcasts(mask: Tensor, scores: Tensor) -> None:
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a bool tensor (True = may attend) or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}")
    # Broadcasting aligns shapes from the right; every mask size must be 1 or equal the scores'.
    fits = mask.dim() <= scores.dim() and all(
        m == 1 or m == s for m, s in zip(reversed(mask.shape), reversed(scores.shape)))
    if not fits:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to scores of shape "
                         f"{tuple(scores.shape)}")


class AdditiveAttention(nn.Module):
    """Additive attention: Bahdanau et al. (2015)'s alignment model.

    A one-hidden-layer feed-forward network scores each key ``k_j`` against the query ``q``::

        e_j = vᵀ tanh(W_q q + W_k k_j)        (the paper: e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j))
        α   = softmax(e)  over the keys, masked positions get 0
        c   = Σ_j α_j v_j                      (the values; by default the keys themselves)

    ``W_k k_j`` does not depend on the query, so when one set of keys is scored against many
    queries (every step of a decoder) it can be computed once, as Bahdanau et al. note in
    their appendix: call :meth:`project_keys` once and pass the result as ``projected_keys``.

    Args:
        query_dim: size ``d_q`` of a query (the decoder state).
        key_dim: size ``d_k`` of a key (an encoder annotation).
        hidden_dim: size ``h`` of the scoring network's hidden layer.

    Attributes:
        query_proj: ``W_q``, ``nn.Linear(query_dim, hidden_dim, bias=False)``.
        key_proj: ``W_k``, ``nn.Linear(key_dim, hidden_dim, bias=False)``.
        score_proj: ``v``, ``nn.Linear(hidden_dim, 1, bias=False)``.

    Shapes:
        forward(query ``(B, d_q)``, keys ``(B, L, d_k)``, values ``(B, L, d_v)`` or None,
        mask ``(B, L)`` bool or None, projected_keys ``(B, L, h)`` or None)
        -> (context ``(B, d_v)``, weights ``(B, L)``)
        project_keys(keys ``(B, L, d_k)``) -> ``(B, L, h)``
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int) -> None:
        super().__init__()
        for name, value in (("query_dim", query_dim), ("key_dim", key_dim), ("hidden_dim", hidden_dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.hidden_dim = hidden_dim
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # W_q
        self.key_proj = nn.Linear(key_dim, hidden_dim, bias=False)  # W_k
        self.score_proj = nn.Linear(hidden_dim, 1, bias=False)  # v

    def project_keys(self, keys: Tensor) -> Tensor:
        """``W_k k_j`` for every key: the part of the scores that the query does not change.

        Shapes:
            keys ``(B, L, d_k)`` -> ``(B, L, h)``
        """
        self._check_keys(keys)
        return self.key_proj(keys)  # (B, L, d_k) -> (B, L, h)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        projected_keys: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Score every key against the query and average the values with the weights.

        Args:
            query: one query per row (in a decoder: the previous state ``s_{i-1}``).
            keys: the keys (in a decoder: the encoder's annotations ``h_j``).
            values: what is averaged; ``None`` uses the keys.
            mask: bool, ``True`` = may attend (e.g. real source tokens); ``None`` attends to all.
            projected_keys: ``self.project_keys(keys)``, if already computed; it is used
                instead of ``W_k keys`` (and must have come from these keys).

        Returns:
            ``(context, weights)``; rows whose mask is all False get zero weights and a
            zero context.

        Shapes:
            query ``(B, d_q)``, keys ``(B, L, d_k)``, values ``(B, L, d_v)``, mask ``(B, L)``,
            projected_keys ``(B, L, h)`` -> (context ``(B, d_v)``, weights ``(B, L)``)
        """
        self._check_inputs(query, keys, values, mask, projected_keys)
        if projected_keys is None:
            projected_keys = self.key_proj(keys)  # (B, L, h)
        return self._attend(query, projected_keys, keys if values is None else values, mask)

    def _attend(self, query: Tensor, projected_keys: Tensor, values: Tensor,
                mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """The computation of :meth:`forward`, without checking the inputs."""
        projected_query = self.query_proj(query).unsqueeze(1)  # (B, d_q) -> (B, h) -> (B, 1, h)
        hidden = torch.tanh(projected_query + projected_keys)  # (B, 1, h) + (B, L, h) -> (B, L, h)
        scores = self.score_proj(hidden).squeeze(-1)  # (B, L, 1) -> (B, L)
        weights = masked_softmax(scores, mask, dim=-1)  # (B, L)
        context = torch.bmm(weights.unsqueeze(1), values).squeeze(1)  # (B, 1, L) @ (B, L, d_v) -> (B, d_v)
        return context, weights

    def extra_repr(self) -> str:
        return f"query_dim={self.query_dim}, key_dim={self.key_dim}, hidden_dim={self.hidden_dim}"

    # ------------------------------------------------------------------ input checks

    def _check_keys(self, keys: Tensor) -> None:
        if not isinstance(keys, Tensor) or keys.dim() != 3:
            shape = tuple(keys.shape) if isinstance(keys, Tensor) else type(keys).__name__
            raise ValueError(f"keys must be 3-D (B, L, d_k), got {shape}")
        if keys.size(-1) != self.key_dim:
            raise ValueError(f"keys have d_k={keys.size(-1)} but AdditiveAttention expects key_dim={self.key_dim}")

    def _check_inputs(self, query, keys, values, mask, projected_keys) -> None:
        if not isinstance(query, Tensor) or query.dim() != 2:
            shape = tuple(query.shape) if isinstance(query, Tensor) else type(query).__name__
            raise ValueError(f"query must be 2-D (B, d_q), one query per row, got {shape}")
        if query.size(-1) != self.query_dim:
            raise ValueError(f"query has d_q={query.size(-1)} but AdditiveAttention expects "
                             f"query_dim={self.query_dim}")
        self._check_keys(keys)
        batch, length = keys.shape[:2]
        if query.size(0) != batch:
            raise ValueError(f"keys have batch size {batch} but query has {query.size(0)}")
        if values is not None:
            if not isinstance(values, Tensor) or values.dim() != 3 or values.shape[:2] != keys.shape[:2]:
                shape = tuple(values.shape) if isinstance(values, Tensor) else type(values).__name__
                raise ValueError(f"values must have shape (B, L, d_v) with (B, L) = {(batch, length)} "
                                 f"like the keys, got {shape}")
        if projected_keys is not None:
            expected = (batch, length, self.hidden_dim)
            if not isinstance(projected_keys, Tensor) or tuple(projected_keys.shape) != expected:
                shape = tuple(projected_keys.shape) if isinstance(projected_keys, Tensor) else None
                raise ValueError(f"projected_keys has shape {shape} but project_keys(keys) gives "
                                 f"(B, L, hidden_dim) = {expected}")
        if mask is not None:
            if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
                what = f"dtype {mask.dtype}" if isinstance(mask, Tensor) else type(mask).__name__
                raise TypeError(f"mask must be a bool tensor (True = may attend), got {what}")
            if tuple(mask.shape) != (batch, length):
                raise ValueError(f"mask has shape {tuple(mask.shape)} but keys have (B, L) = {(batch, length)}")
