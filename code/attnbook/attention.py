"""Attention: score every key against a query, softmax the scores, average the values (Chapters 2-5).

Every layer returns ``(output, weights)``. Masks are bool, ``True`` = may attend; a row with nothing to
attend gets zero weights, never NaN. Letters: ``B`` batch, ``T`` queries, ``L`` keys, ``d_q``/``d_k``/``d_v``
sizes, ``N`` a scorer's hidden size (``h`` is kept for heads). Sections follow the chapters: Bahdanau,
Luong, Vaswani et al.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnbook import _checks as checks

__all__ = [
    "masked_softmax",
    "AdditiveAttention",
    "DotScore",
    "GeneralScore",
    "ConcatScore",
    "LUONG_SCORES",
    "LuongAttention",
    "local_p_window",
    "PredictivePosition",
    "LocalPAttention",
    "scaled_dot_product_attention",
    "SelfAttention",
    "split_heads",
    "merge_heads",
    "KVCache",
    "MultiHeadAttention",
]


def masked_softmax(scores: Tensor, mask: Tensor | None = None, dim: int = -1) -> Tensor:
    """Softmax over ``dim`` with exactly zero weight where ``mask`` is False; a fully masked row is all zeros.

    Masked scores become ``finfo.min`` (``-inf`` would make an all-masked row 0/0 = NaN), masked weights 0.

    Args:
        scores: floating point.
        mask: bool, True = may attend, broadcastable to ``scores`` (e.g. ``(B, 1, L)`` or ``(T, L)``); None: all.
        dim: the dimension of the keys.

    Shapes:
        scores ``(..., L)``, mask broadcastable to it -> weights ``(..., L)``

    Raises:
        TypeError: non-float scores or a non-bool mask. ValueError: a mask that does not broadcast.
    """
    checks.floating("scores", scores)
    if mask is None:
        return torch.softmax(scores, dim=dim)
    checks.broadcastable("mask", mask, "scores", scores)
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=dim).masked_fill(~mask, 0.0)


class _Attention(nn.Module):
    """What every attention layer here shares: its sizes and the check of its inputs."""

    query_pattern: str | tuple = "B d_q"

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        checks.positive_int(query_dim=query_dim, key_dim=key_dim)
        self.query_dim, self.key_dim = query_dim, key_dim

    def check(self, query, keys, values=None, mask=None, projected_keys=None) -> None:
        """Shapes agree with each other and with the layer; the mask is bool."""
        checks.shapes(
            type(self).__name__,
            dict(d_q=self.query_dim, d_k=self.key_dim, k=self.projected_size),
            query=(query, self.query_pattern),
            keys=(keys, "B L d_k"),
            values=(values, "B L d_v"),
            mask=(mask, "B L : bool"),
            projected_keys=(projected_keys, "B L k"),
        )


class AdditiveAttention(_Attention):
    """Bahdanau et al.'s alignment model: a one-hidden-layer network scores each key.

    ``e_j = vᵀ tanh(W_q q + W_k k_j)``, ``α = softmax(e)``, ``c = Σ_j α_j v_j`` (values default
    to the keys). Paper: ``e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)``. ``W_k k_j`` does not depend
    on the query: :meth:`project_keys` computes it once per sentence.

    Args:
        query_dim, key_dim: ``d_q``, ``d_k``. attention_dim: ``N``, the scorer's width (Bahdanau's hidden layer).

    Shapes:
        query ``(B, d_q)``, keys ``(B, L, d_k)``, values ``(B, L, d_v)``, mask ``(B, L)``,
        projected_keys ``(B, L, N)`` -> (context ``(B, d_v)``, weights ``(B, L)``)
    """

    def __init__(self, query_dim: int, key_dim: int, attention_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        checks.positive_int(attention_dim=attention_dim)
        self.attention_dim = self.projected_size = attention_dim
        self.query_proj = nn.Linear(query_dim, attention_dim, bias=False)  # W_q
        self.key_proj = nn.Linear(key_dim, attention_dim, bias=False)  # W_k
        self.score_proj = nn.Linear(attention_dim, 1, bias=False)  # v

    def project_keys(self, keys: Tensor) -> Tensor:
        """``W_k k_j`` for every key: ``(B, L, d_k) -> (B, L, N)``."""
        self.check(None, keys)
        return self.key_proj(keys)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        projected_keys: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        self.check(query, keys, values, mask, projected_keys)
        values = keys if values is None else values  # (B, L, d_v)
        projected_keys = self.key_proj(keys) if projected_keys is None else projected_keys  # (B, L, N)
        projected_query = self.query_proj(query).unsqueeze(1)  # (B, d_q) -> (B, 1, N)
        scores = self.score_proj(torch.tanh(projected_query + projected_keys)).squeeze(-1)  # (B, L, 1) -> (B, L)
        weights = masked_softmax(scores, mask)  # (B, L)
        context = (weights.unsqueeze(1) @ values).squeeze(1)  # (B, 1, L) @ (B, L, d_v) -> (B, d_v)
        return context, weights

    def extra_repr(self) -> str:
        return f"query_dim={self.query_dim}, key_dim={self.key_dim}, attention_dim={self.attention_dim}"


# ============================================================ Luong et al. (2015): score functions


class DotScore(nn.Module):
    """``score(h_t, h̄_s) = h_tᵀ h̄_s`` (needs ``d_q == d_k``; nothing to learn).

    Shapes:
        project_keys(keys ``(B, L, d_k)``) -> ``(B, L, k)``; forward(queries ``(B, T, d_q)``,
        projected_keys ``(B, L, k)``) -> scores ``(B, T, L)``
    """

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        if query_dim != key_dim:
            raise ValueError(
                f"score='dot' compares the query with each key directly, so it needs query_dim == "
                f"key_dim, got query_dim={query_dim} and key_dim={key_dim}; use score='general' "
                "(W_a maps between the sizes)"
            )
        self.projected_size = key_dim

    def project_keys(self, keys: Tensor) -> Tensor:
        """The part of the score that does not depend on the query, once per sentence: here the keys."""
        return keys

    def forward(self, queries: Tensor, projected_keys: Tensor) -> Tensor:
        return queries @ projected_keys.transpose(1, 2)  # (B, T, k) @ (B, k, L) -> (B, T, L)


class GeneralScore(nn.Module):
    """``score(h_t, h̄_s) = h_tᵀ W_a h̄_s``; ``W_a = self.W_a.weight`` is ``(d_q, d_k)``, so ``W_a h̄_s`` is a key
    in the query's space (computed once per sentence by :meth:`project_keys`); then the dot product.

    Shapes: as :class:`DotScore`, with ``k = d_q``.
    """

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        self.projected_size = query_dim
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.W_a(keys)  # (B, L, d_k) -> (B, L, d_q): W_a h̄_s

    def forward(self, queries: Tensor, projected_keys: Tensor) -> Tensor:
        return queries @ projected_keys.transpose(1, 2)  # (B, T, d_q) @ (B, d_q, L) -> (B, T, L)


class ConcatScore(nn.Module):
    """``score(h_t, h̄_s) = v_aᵀ tanh(W_a [h_t; h̄_s])``: Bahdanau's additive score with one matrix.

    ``W_a [h_t; h̄_s] = W_a[:, :d_q] h_t + W_a[:, d_q:] h̄_s``; the key half is :meth:`project_keys`.
    """

    def __init__(self, query_dim: int, key_dim: int, attention_dim: int | None = None) -> None:
        super().__init__()
        self.query_dim = query_dim
        self.projected_size = attention_dim or query_dim
        self.W_a = nn.Linear(query_dim + key_dim, self.projected_size, bias=False)  # weight (N, d_q + d_k)
        self.v_a = nn.Linear(self.projected_size, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return keys @ self.W_a.weight[:, self.query_dim :].T  # (B, L, d_k) @ (d_k, N) -> (B, L, N)

    def forward(self, queries: Tensor, projected_keys: Tensor) -> Tensor:
        query_part = queries @ self.W_a.weight[:, : self.query_dim].T  # (B, T, d_q) @ (d_q, N) -> (B, T, N)
        hidden = torch.tanh(query_part.unsqueeze(2) + projected_keys.unsqueeze(1))  # (B, T, 1, N) + (B, 1, L, N)
        return self.v_a(hidden).squeeze(-1)  # (B, T, L, 1) -> (B, T, L)


#: Luong et al.'s score functions by name (the paper's eq. 8).
LUONG_SCORES = {"dot": DotScore, "general": GeneralScore, "concat": ConcatScore}


def luong_score(score: str, query_dim: int, key_dim: int, attention_dim: int | None = None) -> nn.Module:
    """The score module named ``score``; ``attention_dim`` only for ``"concat"``."""
    checks.one_of("score", score, LUONG_SCORES)
    if attention_dim is not None:
        checks.positive_int(attention_dim=attention_dim)
        if score != "concat":
            raise ValueError(
                f"attention_dim is only used by score='concat', got attention_dim={attention_dim} with score={score!r}"
            )
        return ConcatScore(query_dim, key_dim, attention_dim)
    return LUONG_SCORES[score](query_dim, key_dim)


class LuongAttention(_Attention):
    """Global attention of Luong et al.: scores from the current state, softmax, weighted sum.

    ``a_t = softmax(score(h_t, h̄_s))`` over the keys, ``c_t = Σ_s a_t(s) h̄_s``. The query may be
    one per row ``(B, d_q)`` or ``T`` per row ``(B, T, d_q)`` (every step of a decoder at once).

    Args:
        score: ``"dot"``, ``"general"`` or ``"concat"``. query_dim, key_dim: ``d_q``, ``d_k``.
        attention_dim: ``concat``'s hidden size (default ``query_dim``).

    Shapes:
        query ``(B, d_q)`` or ``(B, T, d_q)``, keys ``(B, L, d_k)``, values ``(B, L, d_v)``, mask ``(B, L)``,
        projected_keys ``(B, L, k)`` -> (context ``(B, [T,] d_v)``, weights ``(B, [T,] L)``)
    """

    query_pattern = ("B d_q", "B T d_q")

    def __init__(self, score: str, query_dim: int, key_dim: int, attention_dim: int | None = None) -> None:
        super().__init__(query_dim, key_dim)
        self.scorer = luong_score(score, query_dim, key_dim, attention_dim)
        self.score_name, self.projected_size = score, self.scorer.projected_size

    def project_keys(self, keys: Tensor) -> Tensor:
        """The query-independent part of the scores, once per sentence: ``(B, L, d_k) -> (B, L, k)``."""
        self.check(None, keys)
        return self.scorer.project_keys(keys)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        projected_keys: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        self.check(query, keys, values, mask, projected_keys)
        values = keys if values is None else values  # (B, L, d_v)
        projected_keys = self.scorer.project_keys(keys) if projected_keys is None else projected_keys  # (B, L, k)
        queries = query.reshape(query.size(0), -1, self.query_dim)  # (B, d_q) -> (B, 1, d_q); (B, T, d_q) stays
        scores = self.scorer(queries, projected_keys)  # (B, T, L)
        weights = masked_softmax(scores, None if mask is None else mask.unsqueeze(1))  # (B, 1, L) mask for every t
        context = weights @ values  # (B, T, L) @ (B, L, d_v) -> (B, T, d_v)
        return context.reshape(*query.shape[:-1], -1), weights.reshape(*query.shape[:-1], -1)

    def extra_repr(self) -> str:
        return f"score={self.score_name!r}, query_dim={self.query_dim}, key_dim={self.key_dim}"


# ============================================================ Luong et al. (2015): local-p attention


def local_p_window(position: Tensor, length: int, D: int) -> Tensor:
    """The Gaussian window of local-p attention (Luong et al. eq. 10), exactly 0 outside ``[p_t - D, p_t + D]``.

    ``factor(s) = exp(-(s - p_t)² / (2σ²))`` with ``σ = D / 2`` for ``|s - p_t| <= D``, else 0.

    Shapes:
        position ``(...)`` float -> ``(..., length)``
    """
    checks.floating("position", position)
    checks.positive_int(length=length, D=D)
    source_positions = torch.arange(length, dtype=position.dtype, device=position.device)  # (L,)
    distance = source_positions - position.unsqueeze(-1)  # (L,) - (..., 1) -> (..., L)
    gaussian = torch.exp(-distance.square() / (2 * (D / 2) ** 2))  # (..., L)
    return torch.where(distance.abs() <= D, gaussian, torch.zeros_like(gaussian))


class PredictivePosition(nn.Module):
    """Where local-p attention looks: ``p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))`` (Luong et al. eq. 9).

    ``S`` is each sentence's real length, so ``p_t`` lies in ``[0, S]`` (positions count from 0).

    Args:
        query_dim: size of ``h_t``. hidden_dim: rows of ``W_p`` (default ``query_dim``).

    Shapes:
        query ``(B, d_q)`` or ``(B, T, d_q)``, lengths ``(B,)`` -> ``(B,)`` or ``(B, T)``
    """

    def __init__(self, query_dim: int, hidden_dim: int | None = None) -> None:
        super().__init__()
        hidden_dim = query_dim if hidden_dim is None else hidden_dim
        checks.positive_int(query_dim=query_dim, hidden_dim=hidden_dim)
        self.query_dim, self.hidden_dim = query_dim, hidden_dim
        self.W_p = nn.Linear(query_dim, self.hidden_dim, bias=False)
        self.v_p = nn.Linear(self.hidden_dim, 1, bias=False)

    def forward(self, query: Tensor, lengths: Tensor) -> Tensor:
        checks.shapes(
            "PredictivePosition", dict(d_q=self.query_dim), query=(query, ("B d_q", "B T d_q")), lengths=(lengths, "B")
        )
        fraction = torch.sigmoid(self.v_p(torch.tanh(self.W_p(query)))).squeeze(-1)  # (B[, T])
        return fraction * lengths.to(fraction.dtype).view(-1, *[1] * (query.dim() - 2))  # (B[, T]) · S

    def extra_repr(self) -> str:
        return f"query_dim={self.query_dim}, hidden_dim={self.hidden_dim}"


class LocalPAttention(LuongAttention):
    """Local-p attention: the positions ``s`` with ``|s - p_t| <= D`` around a predicted centre ``p_t``.

    The paper (§3.2) gives the window ``2D + 1`` entries; with a real-valued ``p_t``, as here, it
    holds ``2D`` whole positions (``2D + 1`` only when ``p_t`` is a whole number), cut by the ends
    of the source.

    ``a_t(s) = softmax over the window(score(h_t, h̄_s)) · exp(-(s - p_t)² / (2σ²))``, ``σ = D/2``; as in
    the paper the result is not renormalised (a row sums to at most 1). Lengths come from the mask.

    Args:
        score, query_dim, key_dim, attention_dim: as :class:`LuongAttention`. D: the half width (10 in the paper).

    Shapes:
        as :class:`LuongAttention`; :meth:`centres` (query, mask) -> ``p_t`` ``(B,)`` or ``(B, T)``
    """

    def __init__(self, score: str, query_dim: int, key_dim: int, D: int, attention_dim: int | None = None) -> None:
        super().__init__(score, query_dim, key_dim, attention_dim)
        checks.positive_int(D=D)
        self.D = D
        self.position = PredictivePosition(query_dim)

    def centres(self, query: Tensor, mask: Tensor) -> Tensor:
        """The window centres ``p_t`` for every query, with ``S`` = the real tokens of ``mask``."""
        return self.position(query, mask.sum(dim=-1))

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        projected_keys: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        self.check(query, keys, values, mask, projected_keys)
        values = keys if values is None else values  # (B, L, d_v)
        mask = keys.new_ones(keys.shape[:2], dtype=torch.bool) if mask is None else mask  # (B, L)
        projected_keys = self.scorer.project_keys(keys) if projected_keys is None else projected_keys  # (B, L, k)
        queries = query.reshape(query.size(0), -1, self.query_dim)  # (B, T, d_q), T = 1 for one query
        window = local_p_window(self.centres(queries, mask), keys.size(1), self.D)  # (B, T, L)
        scores = self.scorer(queries, projected_keys)  # (B, T, L)
        weights = masked_softmax(scores, mask.unsqueeze(1) & (window > 0)) * window  # softmax in the window × Gaussian
        context = weights @ values  # (B, T, L) @ (B, L, d_v) -> (B, T, d_v)
        return context.reshape(*query.shape[:-1], -1), weights.reshape(*query.shape[:-1], -1)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", D={self.D}"


# ============================================================ Vaswani et al. (2017): scaled dot-product attention


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """``softmax(Q Kᵀ / √d_k) V`` (Vaswani et al. eq. 1), and the weights.

    Args:
        q, k, v: queries, keys and values with the same leading dimensions (batch, heads, ...).
        mask: bool, True = may attend, broadcastable to the scores ``(..., L_q, L_k)``; None: everything.
        dropout_p: drop weights with this probability before they average ``v`` (pass 0.0 when not
            training); the weights returned are those before dropout.

    Shapes:
        q ``(..., L_q, d_k)``, k ``(..., L_k, d_k)``, v ``(..., L_k, d_v)``
        -> (output ``(..., L_q, d_v)``, weights ``(..., L_q, L_k)``)

    Raises:
        ValueError: sizes that disagree, or a mask that does not broadcast. TypeError: a mask that is not bool.
    """
    checks.shapes(
        "scaled_dot_product_attention",
        q=(q, "... L_q d_k : float"),
        k=(k, "... L_k d_k : float"),
        v=(v, "... L_k d_v : float"),
    )
    checks.in_range("dropout_p", dropout_p, 0.0, 1.0)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., L_q, d_k) @ (..., d_k, L_k) -> (..., L_q, L_k)
    weights = masked_softmax(scores, mask)  # (..., L_q, L_k), each row sums to 1 (or is all 0)
    dropped = nn.functional.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights  # (..., L_q, L_k) @ (..., L_k, d_v) -> (..., L_q, d_v)


class SelfAttention(nn.Module):
    """One head of self-attention: every position of ``x`` is a query, a key and a value.

    ``Q = X W^Q``, ``K = X W^K``, ``V = X W^V``, ``Z = softmax(Q Kᵀ / √d_k) V`` (Vaswani et al. §3.2.1).

    Args:
        d_model: input size. d_k: query and key size (default ``d_model``). d_v: value and output size
            (default ``d_k``). bias: biases in the projections ``q_proj``, ``k_proj``, ``v_proj``
            (``W^Q``, ``W^K``, ``W^V``).

    Shapes:
        x ``(B, T, d_model)``, mask broadcastable to ``(B, T, T)`` -> (output ``(B, T, d_v)``, weights ``(B, T, T)``)
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None, bias: bool = False) -> None:
        super().__init__()
        d_k = d_model if d_k is None else d_k
        d_v = d_k if d_v is None else d_v
        checks.positive_int(d_model=d_model, d_k=d_k, d_v=d_v)
        self.d_model, self.d_k, self.d_v = d_model, d_k, d_v
        self.q_proj = nn.Linear(d_model, d_k, bias=bias)  # W^Q
        self.k_proj = nn.Linear(d_model, d_k, bias=bias)  # W^K
        self.v_proj = nn.Linear(d_model, d_v, bias=bias)  # W^V

    def forward(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        checks.shapes("SelfAttention", dict(d_model=self.d_model), x=(x, "B T d_model : float"))
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
        return scaled_dot_product_attention(q, k, v, mask)  # (B, T, d_v), (B, T, T)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_k={self.d_k}, d_v={self.d_v}"


# ============================================================ Vaswani et al. (2017): multi-head attention


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Cut the features into ``num_heads`` heads: head ``i`` gets features ``i·d_head .. (i+1)·d_head - 1``.

    Shapes:
        x ``(B, T, d_model)`` -> ``(B, H, T, d_head)``, ``d_head = d_model / H``
    """
    batch, length, d_model = x.shape
    x = x.view(batch, length, num_heads, d_model // num_heads)  # (B, T, H, d_head): features cut into H pieces
    return x.transpose(1, 2)  # (B, H, T, d_head): one (T, d_head) block per head


def merge_heads(x: Tensor) -> Tensor:
    """Undo :func:`split_heads`: concatenate the heads' features.

    Shapes:
        x ``(B, H, T, d_head)`` -> ``(B, T, H·d_head)``
    """
    batch, num_heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, num_heads * d_head)  # (B, T, H, d_head) -> (B, T, d_model)


class KVCache:
    """The projected keys and values one attention layer has computed so far (Chapter 7).

    A causal model never changes what it computed for an earlier position, so when it generates one token
    at a time it can keep ``K`` and ``V`` of the positions so far and project only the new token's.
    ``MultiHeadAttention(..., cache=c)`` appends the new keys and values to ``c`` and attends to all of them.

    With a ``window`` (Chapter 8's sliding-window attention) it keeps only the last ``window`` positions;
    ``seen`` counts every position extended so far.

    Shapes:
        keys, values ``(B, H, t, d_head)`` after ``t`` positions (at most ``window``); ``None`` before the first
    """

    def __init__(self, window: int | None = None) -> None:
        if window is not None:
            checks.positive_int(window=window)
        self.keys: Tensor | None = None
        self.values: Tensor | None = None
        self.window = window  # keep only the last `window` positions (a rolling cache, Chapter 8)
        self.seen = 0  # positions extended so far; more than len(self) once a rolling cache drops some

    def extend(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new positions' keys and values ``(B, H, n, d_head)``; return all ``(B, H, t + n, d_head)``.

        A rolling cache returns all of them too (the new queries may need the oldest), then keeps the last
        ``window``.
        """
        new_positions = keys.size(2)
        if self.keys is not None:
            new, old = (
                (keys.size(0), keys.size(1), keys.size(3)),
                (self.keys.size(0), self.keys.size(1), self.keys.size(3)),
            )
            if new != old:
                raise ValueError(
                    f"new keys have (B, H, d_head)={new} but the cache holds {old}: one cache per layer "
                    f"and per batch of sequences"
                )
            keys, values = torch.cat([self.keys, keys], dim=2), torch.cat([self.values, values], dim=2)
        self.seen += new_positions
        start = 0 if self.window is None else max(0, keys.size(2) - self.window)
        self.keys, self.values = keys[:, :, start:], values[:, :, start:]  # a rolling cache drops the oldest
        return keys, values

    def copy(self) -> "KVCache":
        """A new cache holding the same tensors: extending it leaves this one as it is."""
        copy = KVCache(self.window)
        copy.keys, copy.values, copy.seen = self.keys, self.values, self.seen
        return copy

    def select_rows(self, index: Tensor) -> "KVCache":
        """A new cache with the sequences ``index`` (beam search reorders its beams with it)."""
        copy = KVCache(self.window)
        copy.seen = self.seen
        if self.keys is not None:
            copy.keys, copy.values = self.keys.index_select(0, index), self.values.index_select(0, index)
        return copy

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.size(2)

    def __repr__(self) -> str:
        return (
            "KVCache(empty)" if self.keys is None else f"KVCache({len(self)} positions, keys {tuple(self.keys.shape)})"
        )


class MultiHeadAttention(nn.Module):
    """``MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O``, ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.

    Vaswani et al. §3.2.2, with ``d_k = d_v = d_model / h``. The ``h`` matrices ``W_i^Q`` (``d_model × d_k``) are
    packed side by side into one ``d_model × d_model`` projection, and likewise for keys and values.

    Args:
        d_model: model width. num_heads: ``h``, which must divide ``d_model``. dropout: on the weights (training
            only). bias: biases in the four projections (as ``nn.MultiheadAttention``).

    Attributes:
        q_proj, k_proj, v_proj, out_proj: ``nn.Linear(d_model, d_model)``: the packed ``W^Q``, ``W^K``,
            ``W^V``, and ``W^O``.

    Shapes:
        query ``(B, L_q, d_model)``, key and value ``(B, L_k, d_model)``, mask (True = may attend) 4-D,
        broadcastable to ``(B, H, L_q, L_k)`` (padding: ``(B, 1, 1, L_k)``), or 2-D ``(L_q, L_k)``, one
        pattern for every sequence (refused when ``B = L_q``, where it could be padding)
        -> (output ``(B, L_q, d_model)``, weights
        ``(B, H, L_q, L_k)``); with a ``cache`` holding ``t`` positions the keys are those ``t`` and the new
        ``L_k``, and mask and weights have ``t + L_k`` keys; with ``key = value = None`` the keys are the
        cache's only (:meth:`keys_values`)

    Raises:
        ValueError: ``d_model=100 is not divisible by num_heads=8``; inputs of the wrong width or lengths;
            a mask that is 3-D, or 2-D when ``B = L_q`` (it could be a padding mask or a pattern).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        checks.positive_int(d_model=d_model, num_heads=num_heads)
        checks.in_range("dropout", dropout, 0.0, 1.0)
        if d_model % num_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}: every head gets "
                f"d_model / num_heads features"
            )
        self.d_model, self.num_heads, self.dropout = d_model, num_heads, dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W^Q: h blocks of d_model x d_k, side by side
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)  # W^K
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)  # W^V
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W^O: (h·d_v) x d_model

    def forward(
        self,
        query: Tensor,
        key: Tensor | None,
        value: Tensor | None,
        mask: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor]:
        checks.shapes(
            "MultiHeadAttention",
            dict(d_model=self.d_model),
            query=(query, "B L_q d_model : float"),
            key=(key, "B L_k d_model : float"),
            value=(value, "B L_k d_model : float"),
        )
        if key is None and (cache is None or len(cache) == 0):
            raise ValueError("key and value may be None only with a filled cache (from keys_values)")
        checks.head_mask(
            mask,
            query.size(0),
            self.num_heads,
            query.size(1),
            (0 if key is None else key.size(1)) + (0 if cache is None else len(cache)),
        )
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, H, L_q, d_head)
        if key is None:  # attend to the cache only: e.g. the encoder's output, projected once
            k, v = cache.keys, cache.values  # (B, H, S, d_head)
        else:
            k = split_heads(self.k_proj(key), self.num_heads)  # (B, H, L_k, d_head)
            v = split_heads(self.v_proj(value), self.num_heads)  # (B, H, L_k, d_head)
        if cache is not None and key is not None:
            k, v = cache.extend(k, v)  # (B, H, t + L_k, d_head): the earlier positions' keys and values first
        heads, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout if self.training else 0.0)
        return self.out_proj(merge_heads(heads)), weights  # (B, L_q, d_model), (B, H, L_q, L_k)

    def keys_values(self, x: Tensor) -> KVCache:
        """``x``'s keys and values, projected once, as a cache to attend to with ``key=None``.

        A decoder projects the encoder's output this way once per sentence, not at every step.

        Shapes:
            x ``(B, S, d_model)`` -> a cache of ``S`` positions, keys and values ``(B, H, S, d_head)``
        """
        checks.shapes("MultiHeadAttention", dict(d_model=self.d_model), x=(x, "B S d_model : float"))
        cache = KVCache()
        cache.extend(split_heads(self.k_proj(x), self.num_heads), split_heads(self.v_proj(x), self.num_heads))
        return cache

    @classmethod
    def from_torch(cls, layer: nn.MultiheadAttention) -> "MultiHeadAttention":
        """The same layer as a ``torch.nn.MultiheadAttention`` (``batch_first=True``), weights copied.

        PyTorch packs ``W^Q``, ``W^K``, ``W^V`` on top of each other in ``in_proj_weight`` ``(3·d_model, d_model)``.
        Its masks have the opposite polarity (``key_padding_mask`` and boolean ``attn_mask``: True = ignore).
        """
        if not layer.batch_first or not layer._qkv_same_embed_dim:
            raise ValueError(
                "from_torch needs an nn.MultiheadAttention with batch_first=True and kdim = vdim = embed_dim"
            )
        copy = cls(layer.embed_dim, layer.num_heads, layer.dropout, bias=layer.in_proj_bias is not None)
        with torch.no_grad():
            for linear, weight in zip((copy.q_proj, copy.k_proj, copy.v_proj), layer.in_proj_weight.chunk(3)):
                linear.weight.copy_(weight)  # (d_model, d_model) each
            copy.out_proj.weight.copy_(layer.out_proj.weight)
            if layer.in_proj_bias is not None:
                for linear, bias in zip((copy.q_proj, copy.k_proj, copy.v_proj), layer.in_proj_bias.chunk(3)):
                    linear.bias.copy_(bias)
                copy.out_proj.bias.copy_(layer.out_proj.bias)
        return copy

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, dropout={self.dropout}"
