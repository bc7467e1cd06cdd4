"""Attention mechanisms, one concept per name (chapters 2-6).

An attention layer takes a *query* and a set of *keys* with their *values*, scores every
key against the query, turns the scores into weights with a softmax over the keys, and
returns the weighted average of the values together with the weights, ``(output, weights)``,
so every chapter can plot where the model looked.

Conventions (COURSE_GUIDE §3): batch first; masks are bool with ``True`` = may attend,
broadcastable to the scores; a fully masked row gives zero weights, never NaN.

Letters used in the shapes below:
``B`` batch, ``L`` number of keys (e.g. source positions), ``d_q`` query size,
``d_k`` key size, ``d_v`` value size, ``h`` hidden size of the additive scorer,
``T`` number of queries scored at once (all steps of a decoder).

- :func:`masked_softmax`: softmax that gives exactly zero weight where the mask is False.
- :class:`AdditiveAttention`: Bahdanau et al. (2015)'s alignment model (chapter 2).
- :class:`LuongAttention`: Luong et al. (2015)'s dot / general / concat scores (chapter 3).
- :class:`PredictivePosition` and :func:`local_p_window`: the predicted position ``p_t``
  and the Gaussian window of Luong et al.'s local-p attention (chapter 3).

(Scaled dot-product and multi-head attention join this module in chapters 4-5.)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["masked_softmax", "AdditiveAttention", "LuongAttention", "PredictivePosition", "local_p_window"]


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
        _check_keys("AdditiveAttention", keys, self.key_dim)

    def _check_inputs(self, query, keys, values, mask, projected_keys) -> None:
        if not isinstance(query, Tensor) or query.dim() != 2:
            shape = tuple(query.shape) if isinstance(query, Tensor) else type(query).__name__
            raise ValueError(f"query must be 2-D (B, d_q), one query per row, got {shape}")
        _check_attention_inputs("AdditiveAttention", query, self.query_dim, keys, self.key_dim, values, mask,
                                projected_keys, ("hidden_dim", self.hidden_dim))


# ============================================================ chapter 3: Luong et al. (2015)

#: The score functions of :class:`LuongAttention` (Luong et al. 2015, eq. 8).
LUONG_SCORES = ("dot", "general", "concat")


class LuongAttention(nn.Module):
    """Multiplicative attention of Luong, Pham and Manning (2015): dot, general or concat scores.

    In a decoder the query is the **current** state ``h_t`` (Bahdanau et al. score from the
    previous state ``s_{t-1}``) and the keys are the encoder's annotations ``h̄_s``. Each key
    gets a score (the paper's eq. 8)::

        dot      score(h_t, h̄_s) = h_tᵀ h̄_s
        general  score(h_t, h̄_s) = h_tᵀ W_a h̄_s
        concat   score(h_t, h̄_s) = v_aᵀ tanh(W_a [h_t; h̄_s])

        a_t = softmax(scores) over the keys  (masked positions get exactly 0)
        c_t = Σ_s a_t(s) h̄_s                 (the values; by default the keys themselves)

    The paper has a fourth, *location*-based score, ``a_t = softmax(W_a h_t)``, computed from
    the query alone (it never looks at the keys and needs a fixed source length); it is not
    implemented here.

    Which way round ``W_a`` is, in ``general``: ``W_a`` is ``self.W_a.weight``, of shape
    ``(d_q, d_k)``; ``self.W_a = nn.Linear(key_dim, query_dim, bias=False)`` maps a key into
    the query's space, ``W_a h̄_s``, and the score is the dot product of the query with it:
    ``h_tᵀ (W_a h̄_s)``. With ``W_a`` the identity it is the dot score; unlike dot, it also
    works when ``d_q != d_k``.

    ``concat`` is Bahdanau et al.'s additive score written with one matrix on the
    concatenation: ``W_a [h_t; h̄_s] = W_a[:, :d_q] h_t + W_a[:, d_q:] h̄_s``. The key half does
    not depend on the query, so it is computed once per set of keys (:meth:`project_keys`),
    as is ``W_a h̄_s`` for ``general``: a decoder calls :meth:`project_keys` once per sentence
    and passes the result as ``projected_keys`` at every step.

    **Several queries at once.** ``query`` may be ``(B, T, d_q)``: ``T`` queries against the
    same keys (every step of a decoder that does not feed its attention back, all in one
    batched operation); the outputs then have a ``T`` dimension too.

    **Local attention** (the paper's section 3.2). Pass ``window``, the factors of
    :func:`local_p_window`: only the positions with a factor above 0 (those within ``D`` of
    the centre ``p_t``) take part in the softmax, as the paper's ``a_t`` has only the ``2D + 1``
    entries of the window, and the weights are then multiplied by the factors::

        a_t(s) = softmax over the window(score(h_t, h̄_s)) · exp(-(s - p_t)² / (2σ²))

    As in the paper, the result is *not* renormalised: a row of weights sums to less than 1
    (exactly 1 only if all of its weight sits at ``s = p_t``), and the context is shrunk by
    the same amount. Positions outside the window get exactly 0.

    Args:
        score: ``"dot"``, ``"general"`` or ``"concat"``.
        query_dim: size ``d_q`` of a query (the decoder state ``h_t``).
        key_dim: size ``d_k`` of a key (an annotation ``h̄_s``); ``"dot"`` needs ``d_k == d_q``.
        hidden_dim: hidden size ``h`` of the ``concat`` scorer (default ``query_dim``); only
            for ``"concat"``.

    Attributes:
        W_a: ``general``: ``nn.Linear(key_dim, query_dim, bias=False)``;
            ``concat``: ``nn.Linear(query_dim + key_dim, hidden_dim, bias=False)``; absent for ``dot``.
        v_a: ``concat`` only: ``nn.Linear(hidden_dim, 1, bias=False)``.
        projected_size: the last size of :meth:`project_keys`'s output (``d_k``, ``d_q`` or ``h``).

    Shapes:
        forward(query ``(B, d_q)``, keys ``(B, L, d_k)``, values ``(B, L, d_v)`` or None,
        mask ``(B, L)`` bool or None, projected_keys or None, window ``(B, L)`` or None)
        -> (context ``(B, d_v)``, weights ``(B, L)``);
        with query ``(B, T, d_q)`` (and window ``(B, T, L)``): context ``(B, T, d_v)``, weights ``(B, T, L)``.
        score(query, keys, projected_keys=None) -> scores ``(B, L)`` or ``(B, T, L)``.
        project_keys(keys ``(B, L, d_k)``) -> ``(B, L, projected_size)``.
    """

    def __init__(self, score: str, query_dim: int, key_dim: int, hidden_dim: int | None = None) -> None:
        super().__init__()
        if score not in LUONG_SCORES:
            raise ValueError(f"unknown score {score!r}; choose one of 'dot', 'general', 'concat'")
        for name, value in (("query_dim", query_dim), ("key_dim", key_dim)):
            _check_positive_int(name, value)
        if hidden_dim is not None:
            _check_positive_int("hidden_dim", hidden_dim)
            if score != "concat":
                raise ValueError(f"hidden_dim is only used by score='concat', got hidden_dim={hidden_dim} "
                                 f"with score={score!r}")
        if score == "dot" and query_dim != key_dim:
            raise ValueError(
                f"score='dot' compares the query with each key directly, so it needs query_dim == key_dim, "
                f"got query_dim={query_dim} and key_dim={key_dim}; use score='general' (W_a maps between "
                "the sizes) or give encoder and decoder the same size")
        self.score_name = score
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.hidden_dim = (hidden_dim or query_dim) if score == "concat" else None
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)  # weight (d_q, d_k): h̄_s -> W_a h̄_s
            self.projected_size = query_dim
        elif score == "concat":
            self.W_a = nn.Linear(query_dim + key_dim, self.hidden_dim, bias=False)  # weight (h, d_q + d_k)
            self.v_a = nn.Linear(self.hidden_dim, 1, bias=False)
            self.projected_size = self.hidden_dim
        else:
            self.projected_size = key_dim

    def project_keys(self, keys: Tensor) -> Tensor:
        """The part of the scores that does not depend on the query, once per set of keys.

        ``dot``: the keys themselves; ``general``: ``W_a h̄_s``; ``concat``: ``W_a[:, d_q:] h̄_s``.

        Shapes:
            keys ``(B, L, d_k)`` -> ``(B, L, projected_size)``
        """
        self._check_keys(keys)
        if self.score_name == "general":
            return self.W_a(keys)  # (B, L, d_k) -> (B, L, d_q)
        if self.score_name == "concat":
            return keys @ self._concat_halves()[1].T  # (B, L, d_k) @ (d_k, h) -> (B, L, h)
        return keys  # dot: (B, L, d_k)

    def score(self, query: Tensor, keys: Tensor, projected_keys: Tensor | None = None) -> Tensor:
        """One score per key (before the softmax).

        Args:
            query: one query per row ``(B, d_q)``, or ``T`` queries per row ``(B, T, d_q)``.
            keys: the keys.
            projected_keys: ``self.project_keys(keys)``, if already computed.

        Shapes:
            query ``(B, d_q)`` or ``(B, T, d_q)``, keys ``(B, L, d_k)`` -> ``(B, L)`` or ``(B, T, L)``
        """
        self._check_inputs(query, keys, projected_keys=projected_keys)
        if projected_keys is None:
            projected_keys = self.project_keys(keys)
        return self._score(query, projected_keys)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        projected_keys: Tensor | None = None,
        window: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Score every key against the query and average the values with the weights.

        Args:
            query: in a decoder, the current state ``h_t`` (or all states ``(B, T, d_q)``).
            keys: the encoder's annotations ``h̄_s``.
            values: what is averaged; ``None`` uses the keys.
            mask: bool ``(B, L)``, ``True`` = may attend (real source tokens); ``None`` attends
                everywhere. With ``T`` queries it is shared by all of them.
            projected_keys: ``self.project_keys(keys)``, if already computed.
            window: local attention: the factors of :func:`local_p_window`, one row per query
                (the shape of the weights); positions with factor 0 get weight 0, the others
                share a softmax and are then multiplied by their factor.

        Returns:
            ``(context, weights)``; a row with nothing to attend gets zero weights and a zero context.

        Shapes:
            query ``(B, d_q)``, keys ``(B, L, d_k)``, values ``(B, L, d_v)``, mask ``(B, L)``,
            window ``(B, L)`` -> (context ``(B, d_v)``, weights ``(B, L)``);
            query ``(B, T, d_q)``, window ``(B, T, L)`` -> (context ``(B, T, d_v)``, weights ``(B, T, L)``)
        """
        self._check_inputs(query, keys, values, mask, projected_keys, window)
        if projected_keys is None:
            projected_keys = self.project_keys(keys)
        return self._attend(query, projected_keys, keys if values is None else values, mask, window)

    # ------------------------------------------------------------------ the computation

    def _attend(self, query: Tensor, projected_keys: Tensor, values: Tensor, mask: Tensor | None,
                window: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The computation of :meth:`forward`, without checking the inputs."""
        single = query.dim() == 2
        scores = self._score(query, projected_keys)  # (B, L) or (B, T, L)
        if mask is not None and not single:
            mask = mask.unsqueeze(1)  # (B, L) -> (B, 1, L), shared by the T queries
        if window is not None:
            in_window = window > 0  # the 2D + 1 positions around p_t
            mask = in_window if mask is None else mask & in_window
        weights = masked_softmax(scores, mask, dim=-1)
        if window is not None:
            weights = weights * window  # Gaussian around p_t; exactly 0 outside the window
        if single:
            context = torch.bmm(weights.unsqueeze(1), values).squeeze(1)  # (B, 1, L) @ (B, L, d_v) -> (B, d_v)
        else:
            context = torch.bmm(weights, values)  # (B, T, L) @ (B, L, d_v) -> (B, T, d_v)
        return context, weights

    def _score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """Scores from the query and :meth:`project_keys`'s output, without checks."""
        single = query.dim() == 2
        queries = query.unsqueeze(1) if single else query  # (B, T, d_q), T = 1 for one query
        if self.score_name == "concat":
            query_part = queries @ self._concat_halves()[0].T  # (B, T, d_q) @ (d_q, h) -> (B, T, h)
            hidden = torch.tanh(query_part.unsqueeze(2) + projected_keys.unsqueeze(1))  # (B, T, L, h)
            scores = self.v_a(hidden).squeeze(-1)  # (B, T, L, 1) -> (B, T, L)
        else:  # dot and general: h_t · (W_a) h̄_s for every key at once
            scores = torch.bmm(queries, projected_keys.transpose(1, 2))  # (B, T, d_q) @ (B, d_q, L) -> (B, T, L)
        return scores.squeeze(1) if single else scores  # (B, L) or (B, T, L)

    def _concat_halves(self) -> tuple[Tensor, Tensor]:
        """``concat``: the columns of ``W_a`` that multiply ``h_t`` ``(h, d_q)`` and ``h̄_s`` ``(h, d_k)``."""
        return self.W_a.weight.split([self.query_dim, self.key_dim], dim=1)

    def extra_repr(self) -> str:
        text = f"score={self.score_name!r}, query_dim={self.query_dim}, key_dim={self.key_dim}"
        return text + (f", hidden_dim={self.hidden_dim}" if self.hidden_dim is not None else "")

    # ------------------------------------------------------------------ input checks

    def _check_keys(self, keys: Tensor) -> None:
        _check_keys("LuongAttention", keys, self.key_dim)

    def _check_inputs(self, query, keys, values=None, mask=None, projected_keys=None, window=None) -> None:
        if not isinstance(query, Tensor) or query.dim() not in (2, 3):
            shape = tuple(query.shape) if isinstance(query, Tensor) else type(query).__name__
            raise ValueError(f"query must be 2-D (B, d_q) or 3-D (B, T, d_q), got {shape}")
        _, length = _check_attention_inputs("LuongAttention", query, self.query_dim, keys, self.key_dim, values,
                                            mask, projected_keys, ("projected_size", self.projected_size))
        if window is not None:
            expected = (*query.shape[:-1], length)
            if not isinstance(window, Tensor) or tuple(window.shape) != expected:
                shape = tuple(window.shape) if isinstance(window, Tensor) else type(window).__name__
                raise ValueError(f"window has shape {shape} but the weights have {expected} "
                                 "(one row of factors per query)")


def _check_keys(layer: str, keys: Tensor, key_dim: int) -> None:
    """Keys must be ``(B, L, d_k)`` with the layer's ``key_dim``."""
    if not isinstance(keys, Tensor) or keys.dim() != 3:
        shape = tuple(keys.shape) if isinstance(keys, Tensor) else type(keys).__name__
        raise ValueError(f"keys must be 3-D (B, L, d_k), got {shape}")
    if keys.size(-1) != key_dim:
        raise ValueError(f"keys have d_k={keys.size(-1)} but {layer} expects key_dim={key_dim}")


def _check_attention_inputs(layer: str, query: Tensor, query_dim: int, keys: Tensor, key_dim: int, values, mask,
                            projected_keys, projected: tuple[str, int]) -> tuple[int, int]:
    """The checks every attention layer shares; returns ``(B, L)`` of the keys.

    ``projected`` names the last size of ``project_keys(keys)`` and gives its value.
    """
    if query.size(-1) != query_dim:
        raise ValueError(f"query has d_q={query.size(-1)} but {layer} expects query_dim={query_dim}")
    _check_keys(layer, keys, key_dim)
    batch, length = keys.shape[:2]
    if query.size(0) != batch:
        raise ValueError(f"keys have batch size {batch} but query has {query.size(0)}")
    if values is not None:
        if not isinstance(values, Tensor) or values.dim() != 3 or values.shape[:2] != keys.shape[:2]:
            shape = tuple(values.shape) if isinstance(values, Tensor) else type(values).__name__
            raise ValueError(f"values must have shape (B, L, d_v) with (B, L) = {(batch, length)} "
                             f"like the keys, got {shape}")
    if projected_keys is not None:
        expected = (batch, length, projected[1])
        if not isinstance(projected_keys, Tensor) or tuple(projected_keys.shape) != expected:
            shape = tuple(projected_keys.shape) if isinstance(projected_keys, Tensor) else None
            raise ValueError(f"projected_keys has shape {shape} but project_keys(keys) gives "
                             f"(B, L, {projected[0]}) = {expected}")
    if mask is not None:
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            what = f"dtype {mask.dtype}" if isinstance(mask, Tensor) else type(mask).__name__
            raise TypeError(f"mask must be a bool tensor (True = may attend), got {what}")
        if tuple(mask.shape) != (batch, length):
            raise ValueError(f"mask has shape {tuple(mask.shape)} but keys have (B, L) = {(batch, length)}")
    return batch, length


def _check_positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def local_p_window(position: Tensor, length: int, D: int) -> Tensor:
    """The Gaussian window of local-p attention (Luong et al. 2015, eq. 10), one row per centre.

    For source positions ``s = 0 .. length-1`` and a centre ``p_t`` (a real number)::

        factor(s) = exp(-(s - p_t)² / (2σ²)),  σ = D / 2,   if p_t - D <= s <= p_t + D
        factor(s) = 0 exactly                                 otherwise

    The factor is 1 at ``s = p_t`` and ``exp(-2) ≈ 0.135`` at the edges of the window. Pass the
    result as ``window=`` to :class:`LuongAttention`: the alignment weights are a softmax over
    the window's positions, multiplied by these factors. (Local-m, the paper's other local
    variant, sets ``p_t = t`` and uses no Gaussian.)

    Args:
        position: the centres ``p_t`` (from :class:`PredictivePosition`, or ``t`` for local-m),
            any shape, floating point.
        length: number of source positions ``L`` (the padded width; padding is masked separately).
        D: half width of the window (the paper's ``D``; 10 in its experiments).

    Shapes:
        position ``(B,)`` -> ``(B, L)``; ``(B, T)`` -> ``(B, T, L)``; in general ``(...)`` -> ``(..., L)``.
    """
    if not isinstance(position, Tensor) or not position.is_floating_point():
        what = f"dtype {position.dtype}" if isinstance(position, Tensor) else type(position).__name__
        raise TypeError(f"position must be a floating-point tensor of window centres p_t, got {what}")
    _check_positive_int("length", length)
    _check_positive_int("D", D)
    sigma = D / 2
    source_positions = torch.arange(length, dtype=position.dtype, device=position.device)  # (L,)
    distance = source_positions - position.unsqueeze(-1)  # (L,) - (..., 1) -> (..., L)
    gaussian = torch.exp(-distance.square() / (2 * sigma**2))  # (..., L)
    return torch.where(distance.abs() <= D, gaussian, torch.zeros_like(gaussian))


class PredictivePosition(nn.Module):
    """Predictive alignment of local-p attention: where to centre the window (Luong et al. eq. 9).

    ``p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))``, with ``S`` the length of each source sentence
    (its real tokens, not the padded width), so ``p_t`` lies in ``[0, S]``. Positions are
    counted from 0 in this package, so the last real token is at ``S - 1``: ``p_t`` may sit
    up to one position past it, which only moves the window's centre off the end (its weights
    still fall on the last ``D`` tokens).

    Args:
        query_dim: size of the decoder state ``h_t``.
        hidden_dim: rows of ``W_p`` (the paper does not give it); default ``query_dim``.

    Attributes:
        W_p: ``nn.Linear(query_dim, hidden_dim, bias=False)``.
        v_p: ``nn.Linear(hidden_dim, 1, bias=False)``.

    Shapes:
        forward(query ``(B, d_q)`` or ``(B, T, d_q)``, lengths ``(B,)``) -> ``(B,)`` or ``(B, T)``
    """

    def __init__(self, query_dim: int, hidden_dim: int | None = None) -> None:
        super().__init__()
        _check_positive_int("query_dim", query_dim)
        if hidden_dim is not None:
            _check_positive_int("hidden_dim", hidden_dim)
        self.query_dim = query_dim
        self.hidden_dim = hidden_dim or query_dim
        self.W_p = nn.Linear(query_dim, self.hidden_dim, bias=False)
        self.v_p = nn.Linear(self.hidden_dim, 1, bias=False)

    def forward(self, query: Tensor, lengths: Tensor) -> Tensor:
        """The window centre ``p_t`` of every query.

        Shapes:
            query ``(B, d_q)`` or ``(B, T, d_q)``, lengths ``(B,)`` -> ``(B,)`` or ``(B, T)``
        """
        if not isinstance(query, Tensor) or query.dim() not in (2, 3) or query.size(-1) != self.query_dim:
            shape = tuple(query.shape) if isinstance(query, Tensor) else type(query).__name__
            raise ValueError(f"query must be (B, {self.query_dim}) or (B, T, {self.query_dim}), got {shape}")
        if not isinstance(lengths, Tensor) or tuple(lengths.shape) != (query.size(0),):
            shape = tuple(lengths.shape) if isinstance(lengths, Tensor) else type(lengths).__name__
            raise ValueError(f"lengths must have shape (B,) = ({query.size(0)},), got {shape}")
        fraction = torch.sigmoid(self.v_p(torch.tanh(self.W_p(query)))).squeeze(-1)  # (B[, T], 1) -> (B[, T])
        lengths = lengths.to(fraction.dtype)
        return fraction * (lengths if query.dim() == 2 else lengths.unsqueeze(1))  # (B,) or (B, T)

    def extra_repr(self) -> str:
        return f"query_dim={self.query_dim}, hidden_dim={self.hidden_dim}"
