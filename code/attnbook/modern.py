"""Today's decoder block (Chapter 8): RMSNorm, rotary positions, SwiGLU, grouped-query attention.

The block of open decoder-only models since 2023: ``x = x + Attention(RMSNorm(x))``, then
``x = x + SwiGLU(RMSNorm(x))``, with rotary positions inside the attention, fewer key/value heads than
query heads, no biases, and optionally a sliding window. ``ModernDecoder`` stacks it behind Chapter 7's
``generate``. Letters: ``B`` batch, ``T`` positions, ``H`` query heads, ``G`` key/value heads.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnbook import _checks as checks
from attnbook.attention import KVCache, masked_softmax, merge_heads, scaled_dot_product_attention, split_heads
from attnbook.language_models import LMOutput
from attnbook.transformer import sinusoidal_positions

__all__ = [
    "RMSNorm",
    "rope_angles",
    "apply_rope",
    "apply_rope_halves",
    "SwiGLU",
    "swiglu_width",
    "expand_kv_heads",
    "GroupedQueryAttention",
    "sliding_window_mask",
    "banded_attention",
    "ModernBlock",
    "POSITION_SCHEMES",
    "ModernDecoder",
    "decoder_parameters",
    "kv_cache_bytes",
]


class RMSNorm(nn.Module):
    """``RMSNorm(x) = x / sqrt(mean(x²) + eps) · g`` (Zhang & Sennrich 2019): LayerNorm without the mean.

    No mean is subtracted and no bias added; one gain ``g`` per feature, initialised to 1.

    Shapes:
        x ``(..., d_model)`` -> ``(..., d_model)``
    """

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        checks.positive_int(d_model=d_model)
        checks.in_range("eps", eps, 0.0, 1.0)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # g

    def forward(self, x: Tensor) -> Tensor:
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)
        return x / rms * self.weight  # (..., d_model)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"


# ============================================================ rotary positions


def rope_angles(positions: Tensor, d: int, base: float = 10000.0) -> Tensor:
    """The angles ``pos · θ_i``, ``θ_i = base^(-2i/d)``, one per pair of features ``i = 0 .. d/2 - 1``.

    Shapes:
        positions ``(..., T)`` (any integer or float) -> ``(..., T, d/2)`` float
    """
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,): θ_0 = 1 down to ≈ 1/base
    return positions.to(torch.float32).unsqueeze(-1) * theta  # (..., T, 1) * (d/2,) -> (..., T, d/2)


def apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """Rotate each pair of features ``(2i, 2i+1)`` of ``x`` by the angle ``pos · base^(-2i/d)`` (Su et al.).

    ``(x_2i, x_2i+1) -> (x_2i cos a - x_2i+1 sin a, x_2i sin a + x_2i+1 cos a)``, the RoFormer paper's
    interleaved pairing. Applied to queries and keys, ``q·k`` then depends on their positions only
    through the difference.

    Shapes:
        x ``(..., T, d)``, ``d`` even; positions ``(T,)`` or broadcastable ``(..., T)`` -> ``(..., T, d)``

    Raises:
        ValueError: an odd ``d``, or positions that do not match ``T``.
    """
    _check_rope(x, positions)
    angles = rope_angles(positions, x.size(-1), base)  # (..., T, d/2)
    cos, sin = angles.cos(), angles.sin()
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each: the two halves of every pair
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)  # (..., T, d/2, 2)
    return rotated.flatten(-2).to(x.dtype)  # (..., T, d): pairs back side by side


def apply_rope_halves(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """The same rotations with feature ``i`` paired with ``i + d/2`` ("rotate half", as many codebases do).

    It equals :func:`apply_rope` up to a fixed reordering of the features (Chapter 8 shows it).

    Shapes:
        as :func:`apply_rope`
    """
    _check_rope(x, positions)
    angles = rope_angles(positions, x.size(-1), base)  # (..., T, d/2)
    cos, sin = angles.cos(), angles.sin()
    first, second = x.chunk(2, dim=-1)  # (..., T, d/2) each: feature i and feature i + d/2
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1).to(x.dtype)


def _check_rope(x, positions) -> None:
    checks.shapes("apply_rope", x=(x, "... T d : float"))
    if not isinstance(positions, Tensor) or positions.dim() == 0 or positions.size(-1) != x.size(-2):
        shape = tuple(positions.shape) if isinstance(positions, Tensor) else type(positions).__name__
        raise ValueError(f"positions of shape {shape} must end in T={x.size(-2)}, the positions of x {tuple(x.shape)}")
    if x.size(-1) % 2:
        raise ValueError(f"x has d={x.size(-1)} features: rotary positions rotate pairs, so d must be even")


# ============================================================ the gated feed-forward layer


class SwiGLU(nn.Module):
    """``SwiGLU(x) = W_2 (SiLU(W_1 x) ⊙ W_3 x)`` (Shazeer 2020), without biases.

    ``W_1 x`` through SiLU is the gate, ``W_3 x`` the value it opens; three matrices instead of two, so
    ``d_ff ≈ 8/3 · d_model`` (:func:`swiglu_width`) keeps the parameters of a ``4 · d_model`` ReLU layer.

    Shapes:
        x ``(..., d_model)`` -> ``(..., d_model)``, through ``d_ff`` hidden features
    """

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        checks.positive_int(d_model=d_model, d_ff=d_ff)
        self.w1 = nn.Linear(d_model, d_ff, bias=False)  # the gate
        self.w3 = nn.Linear(d_model, d_ff, bias=False)  # the value
        self.w2 = nn.Linear(d_ff, d_model, bias=False)  # back to d_model

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))  # (..., d_ff) ⊙ (..., d_ff) -> (..., d_model)


def swiglu_width(d_model: int, multiple_of: int = 1) -> int:
    """``8/3 · d_model`` rounded up to a multiple of ``multiple_of``: SwiGLU's ``d_ff`` at a ReLU layer's size."""
    checks.positive_int(d_model=d_model, multiple_of=multiple_of)
    width = -(-8 * d_model // 3)  # ceil(8 d / 3)
    return -(-width // multiple_of) * multiple_of


# ============================================================ grouped-query attention


def expand_kv_heads(x: Tensor, num_heads: int) -> Tensor:
    """Repeat each of ``G`` key/value heads for the ``H / G`` query heads of its group: query head ``h`` reads
    key/value head ``h // (H / G)`` (the order of ``repeat_interleave``, as PyTorch's ``enable_gqa``).

    Shapes:
        x ``(B, G, T, d_head)`` -> ``(B, H, T, d_head)``
    """
    return x.repeat_interleave(num_heads // x.size(1), dim=1)  # (B, G, T, d) -> (B, H, T, d)


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``H`` query heads sharing ``G`` key/value heads (Ainslie et al. 2023).

    ``G = H`` is Chapter 5's multi-head attention, ``G = 1`` multi-query attention (Shazeer 2019). Keys and
    values are projected to ``G · d_head`` features only, so a key/value cache holds ``G`` heads, not ``H``.
    With ``positions``, queries and keys are rotated (:func:`apply_rope`) before the scores; the cache keeps
    rotated keys.

    Args:
        d_model, num_heads (``H``), num_kv_heads (``G``, dividing ``H``); rope_base: the base of the rotations.

    Shapes:
        x ``(B, T, d_model)``, mask bool broadcastable to ``(B, H, T, t + T)`` after ``t`` cached positions,
        positions ``(T,)`` or None -> (output ``(B, T, d_model)``, weights ``(B, H, T, t + T)``)

    Raises:
        ValueError: ``d_model`` not divisible by ``num_heads``, or ``num_heads`` by ``num_kv_heads``.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, rope_base: float = 10000.0) -> None:
        super().__init__()
        checks.positive_int(d_model=d_model, num_heads=num_heads, num_kv_heads=num_kv_heads)
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        if num_heads % num_kv_heads:
            raise ValueError(
                f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}: every key/value head "
                f"serves the same number of query heads"
            )
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.d_head, self.rope_base = d_model // num_heads, rope_base
        self.q_proj = nn.Linear(d_model, d_model, bias=False)  # H heads of d_head
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)  # G heads only
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, positions: Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[Tensor, Tensor]:
        checks.shapes("GroupedQueryAttention", dict(d_model=self.d_model), x=(x, "B T d_model : float"))
        q = split_heads(self.q_proj(x), self.num_heads)  # (B, H, T, d_head)
        k = split_heads(self.k_proj(x), self.num_kv_heads)  # (B, G, T, d_head)
        v = split_heads(self.v_proj(x), self.num_kv_heads)  # (B, G, T, d_head)
        if positions is not None:
            q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)
        if cache is not None:
            k, v = cache.extend(k, v)  # (B, G, t + T, d_head): only G heads are stored
        k, v = expand_kv_heads(k, self.num_heads), expand_kv_heads(v, self.num_heads)  # (B, H, t + T, d_head)
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, d_head), (B, H, T, t + T)
        return self.out_proj(merge_heads(heads)), weights  # (B, T, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}"


def sliding_window_mask(queries: Tensor, keys: Tensor, window: int | None = None) -> Tensor:
    """True where query position ``i`` may attend to key position ``j``: ``0 <= i - j < window``.

    Causal when ``window`` is None; a band of ``window`` positions (itself and the ``window - 1`` before it)
    otherwise. Mistral's window of 4 096 lets position ``i`` see ``i - 4096 .. i``: ``window=4097`` here.

    Shapes:
        queries ``(T,)``, keys ``(L,)`` integer positions -> bool ``(T, L)``
    """
    if window is not None:
        checks.positive_int(window=window)  # 0 would mask every key: rows of NaN after the softmax
    distance = queries[:, None] - keys[None, :]  # (T, L): how far back key j is from query i
    allowed = distance >= 0
    return allowed if window is None else allowed & (distance < window)


def banded_attention(q: Tensor, k: Tensor, v: Tensor, window: int) -> Tensor:
    """Sliding-window causal attention computed block by block: ``2 T W`` scores instead of ``T²``.

    The queries are cut into blocks of ``window``; block ``b`` (positions ``bW .. bW + W - 1``) can only
    see keys ``(b - 1)W .. bW + W - 1``, so it scores those ``2W`` keys and masks the rest of them with
    :func:`sliding_window_mask`. Equal to masked full attention, without the ``T × T`` arrays.

    Shapes:
        q, k, v ``(..., T, d)`` -> ``(..., T, d_v)``
    """
    checks.positive_int(window=window)
    length, blocks = q.size(-2), math.ceil(q.size(-2) / window)
    tail = blocks * window - length  # padding that makes T a multiple of the window
    q = nn.functional.pad(q, (0, 0, 0, tail)).unflatten(-2, (blocks, window))  # (..., nb, W, d)
    k = nn.functional.pad(k, (0, 0, window, tail)).unfold(-2, 2 * window, window)  # (..., nb, d, 2W)
    v = nn.functional.pad(v, (0, 0, window, tail)).unfold(-2, 2 * window, window)  # (..., nb, d_v, 2W)
    query_at = torch.arange(blocks * window, device=q.device).view(blocks, window)  # (nb, W)
    key_at = torch.arange(-window, blocks * window, device=q.device).unfold(0, 2 * window, window)  # (nb, 2W)
    distance = query_at[:, :, None] - key_at[:, None, :]  # (nb, W, 2W)
    mask = (distance >= 0) & (distance < window) & (key_at[:, None, :] >= 0)  # the band; no padded keys
    scores = q @ k / math.sqrt(q.size(-1))  # (..., nb, W, d) @ (..., nb, d, 2W) -> (..., nb, W, 2W)
    out = masked_softmax(scores, mask) @ v.transpose(-2, -1)  # (..., nb, W, d_v)
    return out.flatten(-3, -2)[..., :length, :]  # (..., T, d_v)


# ============================================================ the block and the model


class ModernBlock(nn.Module):
    """``x = x + GQA(RMSNorm(x))``, then ``x = x + SwiGLU(RMSNorm(x))``: pre-norm, no biases, no dropout.

    Shapes:
        x ``(B, T, d_model)``, mask and positions as :class:`GroupedQueryAttention`
        -> (x ``(B, T, d_model)``, weights ``(B, H, T, t + T)``)
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, d_ff: int, rope_base: float = 10000.0):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(d_model), RMSNorm(d_model)
        self.attention = GroupedQueryAttention(d_model, num_heads, num_kv_heads, rope_base)
        self.feed_forward = SwiGLU(d_model, d_ff)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, positions: Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[Tensor, Tensor]:
        z, weights = self.attention(self.norm1(x), mask, positions, cache)  # (B, T, d), (B, H, T, t + T)
        x = x + z
        x = x + self.feed_forward(self.norm2(x))
        return x, weights


#: How a :class:`ModernDecoder` tells positions apart: rotations inside attention (``"rope"``), or a vector
#: added to each token's embedding, learned (``"learned"``, GPT) or fixed (``"sinusoidal"``, Vaswani et al.).
POSITION_SCHEMES = ("rope", "learned", "sinusoidal")


class ModernDecoder(nn.Module):
    """A decoder-only language model of :class:`ModernBlock` layers, driven by Chapter 7's ``generate``.

    Token embedding, ``N`` blocks, a final RMSNorm, a linear layer to the vocabulary (no bias). ``positions``
    picks the scheme (:data:`POSITION_SCHEMES`); ``max_positions`` bounds only the added schemes (rotations
    have no table). ``window`` makes every layer attend to the last ``window`` positions only, and
    :meth:`new_caches` then keeps only those.

    Shapes:
        forward(ids ``(B, T)``, caches) -> ``LMOutput`` (logits ``(B, T, V)``, weights ``(B, N, H, T, t' + T)``
        with ``t'`` the cached positions kept, hidden ``(B, T, d_model)``)
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_kv_heads: int = 2,
        num_layers: int = 2,
        d_ff: int | None = None,
        positions: str = "rope",
        max_positions: int = 64,
        window: int | None = None,
        rope_base: float = 10000.0,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        checks.positive_int(vocab_size=vocab_size, num_layers=num_layers, max_positions=max_positions)
        checks.one_of("positions", positions, POSITION_SCHEMES)
        checks.pad_id(pad_id, vocab_size)
        if window is not None:
            checks.positive_int(window=window)
        self.pad_id, self.scheme, self.max_positions, self.window = pad_id, positions, max_positions, window
        d_ff = swiglu_width(d_model) if d_ff is None else d_ff
        self.embedding = nn.Embedding(vocab_size, d_model)
        if positions == "learned":
            self.positions = nn.Embedding(max_positions, d_model)
        elif positions == "sinusoidal":
            self.register_buffer("table", sinusoidal_positions(max_positions, d_model), persistent=False)
        self.layers = nn.ModuleList(
            ModernBlock(d_model, num_heads, num_kv_heads, d_ff, rope_base) for _ in range(num_layers)
        )
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def new_caches(self) -> list[KVCache]:
        """One empty key/value cache per layer (rolling, of ``window`` positions, when the model has one)."""
        return [KVCache(self.window) for _ in self.layers]

    def embed(self, ids: Tensor, where: Tensor) -> Tensor:
        """Token embeddings, plus the position vectors of an added scheme. ``(B, T)``, ``(T,)`` -> ``(B, T, d)``."""
        x = self.embedding(ids)  # (B, T, d)
        if self.scheme != "rope" and int(where[-1]) >= self.max_positions:
            raise ValueError(
                f"position {int(where[-1])} is beyond max_positions={self.max_positions} of {self.scheme} positions"
            )
        if self.scheme == "learned":
            x = x + self.positions(where)  # (B, T, d) + (T, d)
        elif self.scheme == "sinusoidal":
            x = x + self.table[where]
        return x

    def forward(self, ids: Tensor, caches: list[KVCache] | None = None) -> LMOutput:
        checks.shapes("ModernDecoder", ids=(ids, "B T : long"))
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(f"caches has {len(caches)} entries but the model has {len(self.layers)} layers")
        seen = 0 if caches is None else caches[0].seen  # positions before these
        kept = 0 if caches is None else len(caches[0])  # of which the caches still hold the last `kept`
        where = torch.arange(seen, seen + ids.size(1), device=ids.device)  # (T,): the new positions
        keys = torch.arange(seen - kept, seen + ids.size(1), device=ids.device)  # (t' + T,)
        mask = sliding_window_mask(where, keys, self.window)[None, None]  # (1, 1, T, t' + T)
        rotate = where if self.scheme == "rope" else None
        x = self.embed(ids, where)
        weights = []
        for i, layer in enumerate(self.layers):
            x, layer_weights = layer(x, mask, rotate, None if caches is None else caches[i])
            weights.append(layer_weights)  # (B, H, T, t' + T)
        x = self.norm(x)
        return LMOutput(self.head(x), torch.stack(weights, dim=1), x)  # (B, T, V), (B, N, H, T, t' + T), (B, T, d)

    def extra_repr(self) -> str:
        return f"positions={self.scheme!r}, window={self.window}, pad_id={self.pad_id}"


# ============================================================ counting


def decoder_parameters(
    vocab_size: int, d_model: int, num_layers: int, num_heads: int, num_kv_heads: int, d_ff: int, tied: bool = False
) -> int:
    """Parameters of a :class:`ModernDecoder`-shaped model (rotary positions), counted from its sizes.

    Per layer: ``W^Q`` and ``W^O`` (``d_model²`` each), ``W^K`` and ``W^V`` (``d_model · G · d_head`` each), three
    SwiGLU matrices (``d_model · d_ff`` each), two RMSNorm gains; then the embedding, the final norm and the
    output layer (shared with the embedding when ``tied``).
    """
    checks.positive_int(vocab_size=vocab_size, d_model=d_model, num_layers=num_layers, d_ff=d_ff)
    d_kv = num_kv_heads * (d_model // num_heads)
    per_layer = 2 * d_model * d_model + 2 * d_model * d_kv + 3 * d_model * d_ff + 2 * d_model
    return vocab_size * d_model * (1 if tied else 2) + num_layers * per_layer + d_model


def kv_cache_bytes(num_layers: int, num_kv_heads: int, d_head: int, bytes_per_number: int = 2) -> int:
    """Bytes a key/value cache holds per token: keys and values, every layer, ``G`` heads of ``d_head``."""
    checks.positive_int(num_layers=num_layers, num_kv_heads=num_kv_heads, d_head=d_head)
    return 2 * num_layers * num_kv_heads * d_head * bytes_per_number
