"""The model families after 2017, built from Chapter 6's layers (Chapter 7).

- *Encoder-only* (BERT, Devlin et al. 2019): every position attends to every other; trained to restore
  masked tokens (:func:`mask_tokens`, the 80/10/10 rule); a classification token's output summarises
  the sequence. :class:`EncoderOnly`.
- *Decoder-only* (GPT, Radford et al. 2018, 2019): a causal mask; trained to predict the next token;
  generates left to right (:func:`generate`, with temperature and top-k), reusing the keys and values
  of earlier positions (:class:`~attnbook.attention.KVCache`). :class:`DecoderOnly`.

Both are a stack of :class:`~attnbook.transformer.EncoderLayer` (or its pre-LN version) over token and
learned position embeddings; only the mask differs. Letters: ``B`` batch, ``T`` positions, ``N`` layers,
``H`` heads, ``V`` vocabulary.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnbook import _checks as checks
from attnbook.attention import KVCache
from attnbook.protocol import evaluating
from attnbook.transformer import EncoderLayer, PreLNEncoderLayer

__all__ = ["MaskedTokens", "mask_tokens", "LMOutput", "EncoderOnly", "DecoderOnly", "next_token", "generate"]


# ============================================================ the masked-token objective (Devlin et al. 2019, §3.1)


class MaskedTokens(NamedTuple):
    """A batch prepared for the masked-token objective.

    Shapes:
        inputs ``(B, T)``: the ids with the chosen positions replaced; targets ``(B, T)``: the original id at
        chosen positions and ``ignore_index`` (-100) elsewhere; chosen ``(B, T)`` bool
    """

    inputs: Tensor
    targets: Tensor
    chosen: Tensor


def mask_tokens(
    ids: Tensor,
    maskable: Tensor,
    mask_id: int,
    replacement_ids: Tensor,
    rate: float = 0.15,
    generator: torch.Generator | None = None,
    ignore_index: int = -100,
) -> MaskedTokens:
    """Choose ``rate`` of each row's maskable positions; replace 80 % of them by ``mask_id``, 10 % by a random
    id, and leave 10 % unchanged. The model must predict the original id at every chosen position.

    Each row gets ``max(1, round(rate · n))`` chosen positions out of its ``n`` maskable ones, as in BERT's
    data preparation. The random ids are drawn uniformly from ``replacement_ids`` (the ordinary symbols:
    never padding or a special token).

    Shapes:
        ids ``(B, T)`` long, maskable ``(B, T)`` bool, replacement_ids ``(R,)`` long -> :class:`MaskedTokens`
    """
    checks.shapes(
        "mask_tokens",
        ids=(ids, "B T : long"),
        maskable=(maskable, "B T : bool"),
        replacement_ids=(replacement_ids, "R : long"),
    )
    checks.in_range("rate", rate, 0.0, 1.0)
    count = (maskable.sum(dim=1).float() * rate).round().clamp(min=1).long()  # (B,) positions to choose per row
    # random numbers from the generator's device (the CPU's by default), then moved: the same draws on any device
    noise = torch.rand(ids.shape, generator=generator).to(ids.device).masked_fill(~maskable, 2.0)  # (B, T)
    rank = noise.argsort(dim=1).argsort(dim=1)  # (B, T): each position's place in a random order; unmaskable last
    chosen = (rank < count.unsqueeze(1)) & maskable  # (B, T)
    action = torch.rand(ids.shape, generator=generator).to(ids.device)  # (B, T): < 0.8 mask, < 0.9 random, else keep
    pick = torch.randint(len(replacement_ids), ids.shape, generator=generator)  # (B, T)
    random_ids = replacement_ids[pick.to(replacement_ids.device)].to(ids.device)  # (B, T)
    inputs = torch.where(chosen & (action < 0.8), mask_id, ids)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, inputs)
    return MaskedTokens(inputs, torch.where(chosen, ids, ignore_index), chosen)


# ============================================================ the two stacks


class LMOutput(NamedTuple):
    """What :class:`EncoderOnly` and :class:`DecoderOnly` return.

    Shapes:
        logits ``(B, T, V)``; weights ``(B, N, H, T, T_k)`` (``T_k = T`` plus any cached positions);
        hidden ``(B, T, d_model)``: the last layer's output (position 0 is BERT's classification token)
    """

    logits: Tensor
    weights: Tensor
    hidden: Tensor


class _TokenStack(nn.Module):
    """Token + learned position embeddings, ``N`` self-attention layers, a linear layer to the vocabulary."""

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        num_heads: int,
        num_layers: int,
        d_ff: int,
        dropout: float,
        max_positions: int,
        pad_id: int,
        norm_first: bool,
    ) -> None:
        super().__init__()
        checks.positive_int(vocab_size=vocab_size, num_layers=num_layers, max_positions=max_positions)
        checks.pad_id(pad_id, vocab_size)
        self.pad_id, self.max_positions, self.norm_first = pad_id, max_positions, norm_first
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(max_positions, d_model)  # learned, as in BERT and GPT
        self.dropout = nn.Dropout(dropout)
        layer = PreLNEncoderLayer if norm_first else EncoderLayer
        self.layers = nn.ModuleList(layer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()  # pre-LN: normalise the stack's output
        self.head = nn.Linear(d_model, vocab_size)

    def run(self, ids: Tensor, mask: Tensor, offset: int = 0, caches: list[KVCache] | None = None) -> LMOutput:
        """The stack on ``ids`` at positions ``offset ..``, with ``mask`` broadcastable to ``(B, H, T, T_k)``."""
        if offset + ids.size(1) > self.max_positions:
            raise ValueError(
                f"positions {offset}..{offset + ids.size(1) - 1} do not fit max_positions={self.max_positions}"
            )
        where = torch.arange(offset, offset + ids.size(1), device=ids.device)  # (T,)
        x = self.dropout(self.embedding(ids) + self.positions(where))  # (B, T, d) + (T, d)
        weights = []
        for i, layer in enumerate(self.layers):
            x, layer_weights = layer(x, mask, None if caches is None else caches[i])  # (B, T, d), (B, H, T, T_k)
            weights.append(layer_weights)
        x = self.norm(x)
        return LMOutput(self.head(x), torch.stack(weights, dim=1), x)  # (B, T, V), (B, N, H, T, T_k), (B, T, d)

    def extra_repr(self) -> str:
        return f"pad_id={self.pad_id}, max_positions={self.max_positions}, norm_first={self.norm_first}"


class EncoderOnly(_TokenStack):
    """BERT's shape: bidirectional self-attention over the whole sequence (only padding is masked).

    Post-LN by default, as in BERT. Trained with :func:`mask_tokens`: the logits at a chosen position predict
    its original token. The output at position 0 (a classification token placed there) feeds a classifier.

    Shapes:
        forward(ids ``(B, T)``) -> :class:`LMOutput` (logits ``(B, T, V)``, weights ``(B, N, H, T, T)``, hidden)
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.0,
        max_positions: int = 64,
        pad_id: int = 0,
        norm_first: bool = False,
    ) -> None:
        super().__init__(vocab_size, d_model, num_heads, num_layers, d_ff, dropout, max_positions, pad_id, norm_first)

    def forward(self, ids: Tensor) -> LMOutput:
        checks.shapes("EncoderOnly", ids=(ids, "B T : long"))
        real = ids != self.pad_id  # (B, T)
        return self.run(ids, real[:, None, None, :])  # keys: every real position, (B, 1, 1, T)


class DecoderOnly(_TokenStack):
    """GPT's shape: causal self-attention, each position predicting the next token.

    Pre-LN with a final LayerNorm by default, as in GPT-2 (GPT-1 was post-LN). With ``caches`` (one
    :class:`~attnbook.attention.KVCache` per layer, from :meth:`new_caches`) ``ids`` are the positions after
    the cached ones: their keys and values join the caches, and they attend to every cached position.

    Shapes:
        forward(ids ``(B, T)``, caches) -> :class:`LMOutput` (logits ``(B, T, V)``, weights ``(B, N, H, T, t + T)``
        after ``t`` cached positions)
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.0,
        max_positions: int = 64,
        pad_id: int = 0,
        norm_first: bool = True,
    ) -> None:
        super().__init__(vocab_size, d_model, num_heads, num_layers, d_ff, dropout, max_positions, pad_id, norm_first)

    def new_caches(self) -> list[KVCache]:
        """One empty key/value cache per layer."""
        return [KVCache() for _ in self.layers]

    def forward(self, ids: Tensor, caches: list[KVCache] | None = None) -> LMOutput:
        checks.shapes("DecoderOnly", ids=(ids, "B T : long"))
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(f"caches has {len(caches)} entries but the model has {len(self.layers)} layers")
        seen = 0 if caches is None else len(caches[0])  # positions already cached
        length = ids.size(1)
        mask = torch.ones(length, seen + length, dtype=torch.bool, device=ids.device).tril(diagonal=seen)  # (T, t + T)
        return self.run(ids, mask[None, None], offset=seen, caches=caches)  # (1, 1, T, t + T): every sequence


# ============================================================ generation


def next_token(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, generator: torch.Generator | None = None
) -> Tensor:
    """Pick one id per row: ``argmax`` for ``temperature=0``, else a draw from ``softmax(logits / temperature)``
    restricted to the ``top_k`` likeliest ids (all ids for ``None``).

    Shapes:
        logits ``(B, V)`` -> ids ``(B,)``
    """
    checks.shapes("next_token", logits=(logits, "B V : float"))
    checks.in_range("temperature", temperature, 0.0, float("inf"))
    if temperature == 0:
        return logits.argmax(dim=-1)  # greedy
    if top_k is not None:
        checks.positive_int(top_k=top_k)
        kth_best = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth_best, float("-inf"))  # only the top k keep a chance
    probs = torch.softmax(logits / temperature, dim=-1)  # (B, V)
    on = probs.device if generator is None else generator.device  # draw where the generator lives
    return torch.multinomial(probs.to(on), 1, generator=generator).squeeze(1).to(logits.device)  # (B,)


def generate(
    model: DecoderOnly,
    prompt: Tensor,
    steps: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    eos_id: int | None = None,
) -> Tensor:
    """Extend ``prompt`` by ``steps`` tokens, one at a time, each chosen by :func:`next_token`.

    With ``use_cache`` the prompt is run once and every later step runs only the newest token, attending to
    the cached keys and values; without it every step runs the model on the whole sequence so far. Both give
    the same tokens. A row that has produced ``eos_id`` is padded with ``model.pad_id`` from then on; the
    loop stops early when every row has. Runs in eval mode without gradients and restores the model's mode.

    Shapes:
        prompt ``(B, P)`` long -> ``(B, P + n)``, ``n <= steps``
    """
    checks.shapes("generate", prompt=(prompt, "B P : long"))
    checks.positive_int(steps=steps)
    tokens = prompt
    done = torch.zeros(prompt.size(0), dtype=torch.bool, device=prompt.device)  # (B,)
    caches = model.new_caches() if use_cache else None
    with evaluating(model):
        logits = model(prompt, caches).logits[:, -1]  # (B, V): the prompt in one pass
        for step in range(steps):
            token = next_token(logits, temperature, top_k, generator).masked_fill(done, model.pad_id)  # (B,)
            tokens = torch.cat([tokens, token.unsqueeze(1)], dim=1)  # (B, t + 1)
            if eos_id is not None:
                done = done | (token == eos_id)
            if done.all() or step == steps - 1:
                break
            new = token.unsqueeze(1) if use_cache else tokens  # (B, 1) or (B, t + 1)
            logits = model(new, caches).logits[:, -1]  # (B, V)
    return tokens
