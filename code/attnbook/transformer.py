"""The Transformer of Vaswani et al. (2017), "Attention is all you need" (Chapter 6).

Positions are added to the embeddings (``sinusoidal_positions``); each layer wraps its sub-layers in a
residual connection and layer normalisation — after the sum as in the paper (post-LN, ``EncoderLayer``,
``DecoderLayer``) or before the sub-layer as most code today (pre-LN, ``PreLNEncoderLayer``,
``PreLNDecoderLayer``). ``Transformer`` implements the model protocol (:mod:`attnbook.protocol`).
Letters: ``B`` batch, ``S`` source and ``T`` target positions, ``N`` layers, ``H`` heads.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnbook import _checks as checks
from attnbook.attention import KVCache, MultiHeadAttention
from attnbook.protocol import Step

__all__ = [
    "sinusoidal_positions",
    "PositionalEncoding",
    "causal_mask",
    "FeedForward",
    "EncoderLayer",
    "PreLNEncoderLayer",
    "DecoderLayer",
    "PreLNDecoderLayer",
    "TransformerEncoded",
    "TransformerOutput",
    "TransformerState",
    "Transformer",
]


def sinusoidal_positions(length: int, d_model: int, base: float = 10000.0) -> Tensor:
    """``PE(pos, 2i) = sin(pos / base^(2i/d_model))``, ``PE(pos, 2i+1) = cos(pos / base^(2i/d_model))``.

    Vaswani et al. §3.5 use ``base = 10000``: the wavelengths grow geometrically from ``2π`` to ``base · 2π``.

    Shapes:
        -> ``(length, d_model)``; ``d_model`` must be even
    """
    checks.positive_int(length=length, d_model=d_model)
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even: the features come in (sin, cos) pairs")
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)  # (L, 1)
    frequency = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)  # (d/2,): 1 / base^(2i/d)
    angle = position * frequency  # (L, d/2)
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).flatten(1)  # (L, d/2, 2) -> (L, d): sin, cos, ...


class PositionalEncoding(nn.Module):
    """``Dropout(x + PE[offset : offset + T])``: the fixed sinusoids added to the (scaled) embeddings.

    Args:
        d_model: features. max_positions: the most positions. dropout: on the sum (0.1 in the paper). base: 10000.

    Shapes:
        x ``(B, T, d_model)``, offset: the position of ``x[:, 0]`` -> ``(B, T, d_model)``
    """

    def __init__(self, d_model: int, max_positions: int = 512, dropout: float = 0.0, base: float = 10000.0) -> None:
        super().__init__()
        checks.in_range("dropout", dropout, 0.0, 1.0)
        self.register_buffer("pe", sinusoidal_positions(max_positions, d_model, base), persistent=False)  # (P, d)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        if offset + x.size(1) > self.pe.size(0):
            raise ValueError(f"positions {offset}..{offset + x.size(1) - 1} do not fit max_positions={self.pe.size(0)}")
        return self.dropout(x + self.pe[offset : offset + x.size(1)])  # (B, T, d) + (T, d)


def causal_mask(size: int) -> Tensor:
    """True on and below the diagonal: position ``t`` may attend to positions ``0 .. t`` only.

    Shapes:
        -> bool ``(size, size)``
    """
    checks.positive_int(size=size)
    return torch.ones(size, size, dtype=torch.bool).tril()


class FeedForward(nn.Module):
    """``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2``, the same at every position (Vaswani et al. eq. 2).

    Shapes:
        x ``(..., d_model)`` -> ``(..., d_model)``, through ``d_ff`` hidden features
    """

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        checks.positive_int(d_model=d_model, d_ff=d_ff)
        self.linear1 = nn.Linear(d_model, d_ff)  # W_1, b_1
        self.linear2 = nn.Linear(d_ff, d_model)  # W_2, b_2

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(torch.relu(self.linear1(x)))


class EncoderLayer(nn.Module):
    """Post-LN encoder layer, as in the paper: each sub-layer's output is ``LayerNorm(x + Dropout(Sublayer(x)))``.

    ``x = LayerNorm(x + Dropout(SelfAttention(x)))``, then ``x = LayerNorm(x + Dropout(FFN(x)))``.

    Args:
        d_model, num_heads, d_ff: sizes. dropout: on each sub-layer's output (the paper's residual dropout).

    Shapes:
        x ``(B, S, d_model)``, mask (True = may attend) broadcastable to ``(B, H, S, S)``, e.g. ``(B, 1, 1, S)``
        -> (x ``(B, S, d_model)``, weights ``(B, H, S, S)``); with a ``cache`` (:class:`~attnbook.attention.KVCache`,
        Chapter 7's decoder-only models) ``x`` holds the new positions and the keys are the cached ones and these
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None) -> tuple[Tensor, Tensor]:
        z, weights = self.self_attn(x, x, x, mask, cache)  # (B, S, d), (B, H, S, S)
        x = self.norm1(x + self.dropout(z))
        x = self.norm2(x + self.dropout(self.feed_forward(x)))
        return x, weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> "EncoderLayer":
        """The same layer as PyTorch's (``batch_first=True``, ReLU), weights copied; ``norm_first`` picks the class."""
        return _copied(PreLNEncoderLayer if layer.norm_first else EncoderLayer, layer, ("self_attn",))


class PreLNEncoderLayer(EncoderLayer):
    """Pre-LN encoder layer: the norm comes first and the residual path stays un-normalised.

    ``x = x + Dropout(SelfAttention(LayerNorm(x)))``, then ``x = x + Dropout(FFN(LayerNorm(x)))``; a stack
    of these ends with one more LayerNorm (``Transformer`` adds it). Same parameters and shapes as
    :class:`EncoderLayer`.
    """

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None) -> tuple[Tensor, Tensor]:
        y = self.norm1(x)
        z, weights = self.self_attn(y, y, y, mask, cache)  # (B, S, d), (B, H, S, S)
        x = x + self.dropout(z)
        x = x + self.dropout(self.feed_forward(self.norm2(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Post-LN decoder layer: masked self-attention, cross-attention to the encoder's output, FFN.

    ``x = LayerNorm(x + Dropout(SelfAttention(x)))``, ``x = LayerNorm(x + Dropout(CrossAttention(x,
    memory)))``, ``x = LayerNorm(x + Dropout(FFN(x)))``. In teacher forcing ``x`` is every target position
    (with a causal mask). Decoding step by step, ``x`` is the newest position: ``cache`` (a
    :class:`~attnbook.attention.KVCache`) holds the earlier positions' self-attention keys and values and
    gains this one's, and ``memory_cache`` the encoder output's keys and values, projected once per
    sentence (``cross_attn.keys_values(memory)``); ``memory`` is then not read.

    Args:
        d_model, num_heads, d_ff, dropout: as :class:`EncoderLayer`.

    Shapes:
        x ``(B, T, d_model)``, memory ``(B, S, d_model)``, self_mask for ``(B, H, T, t + T)``,
        memory_mask for ``(B, H, T, S)`` -> (x ``(B, T, d_model)``, self weights ``(B, H, T, t + T)``,
        cross weights ``(B, H, T, S)``), with ``t`` positions in ``cache`` (0 without one)
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
        memory_cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        z, self_weights = self.self_attn(x, x, x, self_mask, cache)  # (B, T, d), (B, H, T, t + T)
        x = self.norm1(x + self.dropout(z))
        z, cross_weights = self._cross(x, memory, memory_mask, memory_cache)  # (B, T, d), (B, H, T, S)
        x = self.norm2(x + self.dropout(z))
        x = self.norm3(x + self.dropout(self.feed_forward(x)))
        return x, self_weights, cross_weights

    def _cross(self, x, memory, memory_mask, memory_cache) -> tuple[Tensor, Tensor]:
        """Cross-attention to the memory, or to its keys and values projected once."""
        if memory_cache is not None:
            return self.cross_attn(x, None, None, memory_mask, memory_cache)
        return self.cross_attn(x, memory, memory, memory_mask)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> "DecoderLayer":
        """The same layer as PyTorch's (``batch_first=True``, ReLU), weights copied; ``norm_first`` picks the class."""
        return _copied(
            PreLNDecoderLayer if layer.norm_first else DecoderLayer, layer, ("self_attn", "multihead_attn"), norm3=True
        )


class PreLNDecoderLayer(DecoderLayer):
    """Pre-LN decoder layer: ``x = x + Dropout(Sublayer(LayerNorm(x)))`` for each of the three sub-layers.

    The cache holds keys and values of the normalised inputs, as the queries are.
    """

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
        memory_cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        y = self.norm1(x)
        z, self_weights = self.self_attn(y, y, y, self_mask, cache)  # (B, T, d), (B, H, T, t + T)
        x = x + self.dropout(z)
        z, cross_weights = self._cross(self.norm2(x), memory, memory_mask, memory_cache)  # (B, T, d), (B, H, T, S)
        x = x + self.dropout(z)
        x = x + self.dropout(self.feed_forward(self.norm3(x)))
        return x, self_weights, cross_weights


def _copied(cls, layer: nn.Module, attention_names: tuple[str, ...], norm3: bool = False):
    """A layer of ``cls`` with the weights of PyTorch's encoder or decoder ``layer``."""
    if not layer.self_attn.batch_first or layer.activation is not torch.nn.functional.relu:
        raise ValueError("from_torch needs a PyTorch layer with batch_first=True and activation='relu'")
    d_model, num_heads = layer.self_attn.embed_dim, layer.self_attn.num_heads
    copy = cls(d_model, num_heads, layer.linear1.out_features, layer.dropout.p)
    ours = [copy.self_attn] + ([copy.cross_attn] if len(attention_names) > 1 else [])
    for mine, name in zip(ours, attention_names):
        mine.load_state_dict(MultiHeadAttention.from_torch(getattr(layer, name)).state_dict())
    norms = ("norm1", "norm2") + (("norm3",) if norm3 else ())
    for name in ("linear1", "linear2"):
        getattr(copy.feed_forward, name).load_state_dict(getattr(layer, name).state_dict())
    for name in norms:
        getattr(copy, name).load_state_dict(getattr(layer, name).state_dict())
    return copy


class TransformerEncoded(NamedTuple):
    """What the Transformer's encoder returns.

    Shapes:
        memory ``(B, S, d_model)``; src_mask ``(B, S)`` bool, True at real tokens; weights
        ``(B, N, H, S, S)``, every encoder layer's self-attention
    """

    memory: Tensor
    src_mask: Tensor
    weights: Tensor


class TransformerOutput(NamedTuple):
    """What the teacher-forced ``Transformer(src, tgt_in)`` returns.

    Shapes:
        logits ``(B, T, V)``; weights: the cross-attention of every decoder layer ``(B, T, N, H, S)``;
        self_weights ``(B, N, H, T, T)`` of the decoder; encoder_weights ``(B, N, H, S, S)``

    ``weights`` puts the target step second because every model's ``weights`` do (the protocol's
    ``(B, T, ..., S)``, which decoding, the plots and the explorer read the same way for all
    models); the Transformer-only ``self_weights`` and ``encoder_weights`` keep the layer-major
    ``(B, N, H, ·, ·)`` of the layers that made them.
    """

    logits: Tensor
    weights: Tensor
    self_weights: Tensor
    encoder_weights: Tensor


class TransformerState(NamedTuple):
    """The decoding state: what the encoder gave, once per sentence, and each decoder layer's cache.

    ``memory_caches``: per decoder layer, the encoder output's keys and values for its cross-attention,
    projected once. ``caches``: per decoder layer, the self-attention keys and values of the ``t``
    positions decoded so far (a causal decoder never changes them). Every step returns new caches and
    leaves the old state as it was; beam search reorders them with :func:`~attnbook.protocol.select_rows`.

    Shapes:
        memory ``(B, S, d_model)``; src_mask ``(B, S)`` bool; memory_caches: ``N`` caches of ``S``
        positions; caches: ``N`` caches of ``t`` positions (keys and values ``(B, H, t, d_head)``)
    """

    memory: Tensor
    src_mask: Tensor
    memory_caches: tuple[KVCache, ...]
    caches: tuple[KVCache, ...]


class Transformer(nn.Module):
    """The encoder-decoder Transformer of Vaswani et al. (2017), behind the model protocol.

    Embeddings are multiplied by ``√d_model`` and added to sinusoidal positions; ``N`` encoder and ``N``
    decoder layers (post-LN by default, pre-LN with ``norm_first=True``, whose stacks end with a LayerNorm);
    a linear layer gives the logits. Source padding (``pad_id``) is masked in every attention to the
    source; the decoder's self-attention is causal.

    Args:
        src_vocab_size, tgt_vocab_size: vocabulary sizes. d_model, num_heads, d_ff: sizes (512, 8, 2048 in
            the base model). num_encoder_layers, num_decoder_layers: ``N`` (6). dropout: on embeddings +
            positions and on every sub-layer's output (0.1). share_embeddings: one matrix for the source and
            target embeddings and the output layer (needs one shared vocabulary). norm_first: pre-LN layers.
        pad_id: the padding id of both vocabularies. max_positions: the most positions.

    Shapes:
        forward(src ``(B, S)``, tgt_in ``(B, T)``) -> :class:`TransformerOutput`; start(src) ->
        :class:`TransformerState`; step(state, prev ``(B,)``) -> Step(logits ``(B, V)``, state,
        weights ``(B, N, H, S)``)
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        share_embeddings: bool = False,
        norm_first: bool = False,
        pad_id: int = 0,
        max_positions: int = 512,
    ) -> None:
        super().__init__()
        checks.positive_int(
            src_vocab_size=src_vocab_size,
            tgt_vocab_size=tgt_vocab_size,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
        )
        checks.pad_id(pad_id, min(src_vocab_size, tgt_vocab_size))
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs one shared vocabulary, got src_vocab_size={src_vocab_size} "
                f"and tgt_vocab_size={tgt_vocab_size}"
            )
        self.d_model, self.pad_id, self.norm_first = d_model, pad_id, norm_first
        encoder_layer, decoder_layer = (
            (PreLNEncoderLayer, PreLNDecoderLayer) if norm_first else (EncoderLayer, DecoderLayer)
        )
        self.src_embedding = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embedding = self.src_embedding if share_embeddings else nn.Embedding(tgt_vocab_size, d_model)
        self.positions = PositionalEncoding(d_model, max_positions, dropout)
        self.encoder_layers = nn.ModuleList(
            encoder_layer(d_model, num_heads, d_ff, dropout) for _ in range(num_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            decoder_layer(d_model, num_heads, d_ff, dropout) for _ in range(num_decoder_layers)
        )
        self.encoder_norm = (
            nn.LayerNorm(d_model) if norm_first else nn.Identity()
        )  # pre-LN: normalise the stack's output
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.generator = nn.Linear(d_model, tgt_vocab_size, bias=False)  # the pre-softmax linear transformation
        if share_embeddings:
            self.generator.weight = self.tgt_embedding.weight
        for embedding in dict.fromkeys([self.src_embedding, self.tgt_embedding]):  # each once, in this order
            nn.init.normal_(embedding.weight, std=d_model**-0.5)  # times √d_model: unit-variance inputs

    def embed(self, ids: Tensor, embedding: nn.Embedding, offset: int = 0) -> Tensor:
        """``Dropout(E[ids] · √d_model + PE)`` for ids ``(B, T)`` at positions ``offset ..``: ``(B, T, d_model)``."""
        return self.positions(embedding(ids) * math.sqrt(self.d_model), offset)

    def encode(self, src: Tensor) -> TransformerEncoded:
        """:class:`TransformerEncoded`: memory ``(B, S, d_model)``, src_mask ``(B, S)``, weights
        ``(B, N, H, S, S)``."""
        src_mask = checks.right_padded(src, self.pad_id)  # (B, S): True = a real token
        x = self.embed(src, self.src_embedding)  # (B, S, d)
        weights = []
        for layer in self.encoder_layers:
            x, layer_weights = layer(x, src_mask[:, None, None, :])  # padding mask on the keys: (B, 1, 1, S)
            weights.append(layer_weights)
        return TransformerEncoded(self.encoder_norm(x), src_mask, torch.stack(weights, dim=1))

    def forward(self, src: Tensor, tgt_in: Tensor) -> TransformerOutput:
        checks.shapes("Transformer", src=(src, "B S : long"), tgt_in=(tgt_in, "B T : long"))
        memory, src_mask, encoder_weights = self.encode(src)  # (B, S, d), (B, S), (B, N, H, S, S)
        x = self.embed(tgt_in, self.tgt_embedding)  # (B, T, d)
        future_hidden = causal_mask(tgt_in.size(1)).to(src.device)[None, None]  # (1, 1, T, T)
        self_weights, cross_weights = [], []
        for layer in self.decoder_layers:
            x, self_w, cross_w = layer(x, memory, future_hidden, src_mask[:, None, None, :])
            self_weights.append(self_w)  # (B, H, T, T)
            cross_weights.append(cross_w)  # (B, H, T, S)
        logits = self.generator(self.decoder_norm(x))  # (B, T, V)
        cross = torch.stack(cross_weights, dim=1).permute(0, 3, 1, 2, 4)  # (B, N, H, T, S) -> (B, T, N, H, S)
        return TransformerOutput(logits, cross, torch.stack(self_weights, dim=1), encoder_weights)

    def start(self, src: Tensor) -> TransformerState:
        memory, src_mask, _ = self.encode(src)  # once per sentence
        memory_caches = tuple(layer.cross_attn.keys_values(memory) for layer in self.decoder_layers)
        return TransformerState(memory, src_mask, memory_caches, tuple(KVCache() for _ in self.decoder_layers))

    def step(self, state: TransformerState, prev: Tensor) -> Step:
        checks.instance("state", state, TransformerState, "the TransformerState returned by start or step")
        checks.shapes("step", **{"state.memory": (state.memory, "B S d")}, prev=(prev, "B : long"))
        x = self.embed(prev.unsqueeze(1), self.tgt_embedding, offset=len(state.caches[0]))  # (B, 1, d)
        caches = tuple(cache.copy() for cache in state.caches)  # extended below; the old state stays as it was
        cross_weights = []
        for layer, cache, memory_cache in zip(self.decoder_layers, caches, state.memory_caches):
            # the newest position attends to every position so far: no mask needed
            x, _, cross_w = layer(x, None, None, state.src_mask[:, None, None, :], cache, memory_cache)
            cross_weights.append(cross_w[:, :, 0])  # (B, H, S)
        logits = self.generator(self.decoder_norm(x[:, 0]))  # (B, V)
        return Step(logits, state._replace(caches=caches), torch.stack(cross_weights, dim=1))  # (B, N, H, S)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, pad_id={self.pad_id}, norm_first={self.norm_first}"
