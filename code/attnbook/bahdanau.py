"""Chapter 2: Bahdanau, Cho and Bengio (2015), "align and translate".

A fresh context ``c_i`` for every output step, scored from the **previous** decoder state.
Letters as in :mod:`attnbook.rnn`; ``N`` is the scorer's hidden size (``attention_dim``).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnbook import _checks as checks
from attnbook.attention import AdditiveAttention
from attnbook.protocol import Output, Step
from attnbook.rnn import Encoder, EncoderDecoder, RNNDecoder

__all__ = ["BahdanauState", "BahdanauDecoder", "BahdanauSeq2Seq"]


class BahdanauState(NamedTuple):
    """What the decoder carries from step to step; all but ``hidden`` is computed once per sentence.

    Shapes:
        annotations ``(B, S, A)`` = ``h_j``; projected_keys ``(B, S, N)`` = ``U_a h_j``;
        src_mask ``(B, S)`` bool or None (attend to padding too); hidden ``(B, H)`` = ``s_{i-1}``.
    """

    annotations: Tensor
    projected_keys: Tensor
    src_mask: Tensor | None
    hidden: Tensor


class BahdanauDecoder(RNNDecoder):
    """The decoder of RNNsearch, one step (``i`` from 1, ``y_0`` = bos)::

        c_i, α_i = AdditiveAttention(s_{i-1}, h_1..h_S)     e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)
        s_i      = GRUCell([E y_{i-1}; c_i], s_{i-1})
        logits_i = W_o [s_i; c_i; E y_{i-1}]

    with ``s_0 = tanh(W_s final)``. Chapter 2 lists where this simplifies the paper.

    Args:
        vocab_size, embed_dim, hidden_size: ``V``, ``E``, ``H``. encoder_size: ``A``, an annotation's size.
        attention_dim: ``N``, the scorer's hidden size (1000 in the paper). pad_id: padding id.

    Shapes:
        start(annotations ``(B, S, A)``, final ``(B, A)``, src_mask ``(B, S)``) -> :class:`BahdanauState`;
        step(state, prev ``(B,)``) -> Step(logits ``(B, V)``, state, weights ``(B, S)``);
        forward(tgt_in ``(B, T)``, state) -> Output(logits ``(B, T, V)``, weights ``(B, T, S)``)
    """

    State = BahdanauState

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_size: int,
        encoder_size: int,
        attention_dim: int,
        pad_id: int = 0,
    ) -> None:
        super().__init__(vocab_size, embed_dim, hidden_size, encoder_size, pad_id, attention_dim=attention_dim)
        self.attention = AdditiveAttention(query_dim=hidden_size, key_dim=encoder_size, attention_dim=attention_dim)
        self.init = nn.Linear(encoder_size, hidden_size)  # W_s
        self.cell = nn.GRUCell(embed_dim + encoder_size, hidden_size)
        self.out = nn.Linear(hidden_size + encoder_size + embed_dim, vocab_size)  # W_o

    def start(self, annotations: Tensor, final: Tensor, src_mask: Tensor) -> BahdanauState:
        checks.shapes(
            "BahdanauDecoder",
            dict(A=self.encoder_size),
            annotations=(annotations, "B S A"),
            final=(final, "B A"),
            src_mask=(src_mask, "B S : bool"),
        )
        projected_keys = self.attention.project_keys(annotations)  # U_a h_j, once per sentence: (B, S, N)
        hidden = torch.tanh(self.init(final))  # s_0: (B, H)
        return BahdanauState(annotations, projected_keys, src_mask, hidden)

    def advance(self, embedded: Tensor, state: BahdanauState) -> tuple[BahdanauState, Tensor, Tensor]:
        """Attend from ``s_{i-1}``, then update the state: ``(state with s_i, c_i (B, A), α_i (B, S))``."""
        context, weights = self.attention(
            state.hidden, state.annotations, mask=state.src_mask, projected_keys=state.projected_keys
        )  # c_i (B, A), α_i (B, S) from s_{i-1}
        hidden = self.cell(torch.cat([embedded, context], dim=-1), state.hidden)  # s_i: (B, E + A) -> (B, H)
        return state._replace(hidden=hidden), context, weights

    def step(self, state: BahdanauState, prev: Tensor) -> Step:
        embedded = self.embedding(prev)  # E y_{i-1}: (B, E)
        state, context, weights = self.advance(embedded, state)
        logits = self.out(torch.cat([state.hidden, context, embedded], dim=-1))  # (B, H + A + E) -> (B, V)
        return Step(logits, state, weights)

    def forward(self, tgt_in: Tensor, state: BahdanauState) -> Output:
        """Teacher forcing: a loop over the steps, since ``c_i`` needs ``s_{i-1}``; the output layer once at the end."""
        embedded = self.embedding(tgt_in)  # (B, T, E)
        hidden, contexts, weights = [], [], []
        for embedded_prev in embedded.unbind(dim=1):  # T x (B, E): E y_{i-1}
            state, context, alpha = self.advance(embedded_prev, state)
            hidden.append(state.hidden)
            contexts.append(context)
            weights.append(alpha)
        features = torch.cat([torch.stack(hidden, 1), torch.stack(contexts, 1), embedded], dim=-1)  # (B, T, H + A + E)
        return Output(self.out(features), torch.stack(weights, dim=1))  # (B, T, V), (B, T, S)


class BahdanauSeq2Seq(EncoderDecoder):
    """RNNsearch: a packed bidirectional GRU :class:`~attnbook.rnn.Encoder` and a :class:`BahdanauDecoder`."""

    @classmethod
    def build(
        cls,
        src_vocab_size: int,
        tgt_vocab_size: int,
        embed_dim: int = 32,
        hidden_size: int = 64,
        attention_dim: int = 64,
        bidirectional: bool = True,
        pad_id: int = 0,
        encoder_hidden_size: int | None = None,
    ) -> "BahdanauSeq2Seq":
        """Encoder (``encoder_hidden_size`` per direction, default ``hidden_size``) and decoder
        (state ``hidden_size``)."""
        encoder_hidden_size = hidden_size if encoder_hidden_size is None else encoder_hidden_size
        encoder = Encoder(src_vocab_size, embed_dim, encoder_hidden_size, bidirectional, pad_id)
        decoder = BahdanauDecoder(tgt_vocab_size, embed_dim, hidden_size, encoder.output_size, attention_dim, pad_id)
        return cls(encoder, decoder, pad_id)
