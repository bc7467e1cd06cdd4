"""Chapter 3: Luong, Pham and Manning (2015), effective approaches to attention-based translation.

Scores from the **current** state ``h_t``; the attentional hidden state ``h̃_t = tanh(W_c [c_t; h_t])``
gives the output and, with input feeding, enters the next step. Letters as in :mod:`attnbook.rnn`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnbook import _checks as checks
from attnbook.attention import LocalPAttention, LuongAttention
from attnbook.protocol import Step
from attnbook.rnn import Encoder, EncoderDecoder, RNNDecoder

__all__ = ["LuongState", "LuongOutput", "LuongDecoder", "InputFeedingDecoder", "LuongSeq2Seq"]


class LuongState(NamedTuple):
    """What the decoder carries from step to step; the first three are computed once per sentence.

    Shapes:
        annotations ``(B, S, A)`` = ``h̄_s``; projected_keys ``(B, S, k)`` (the scorer's
        ``project_keys``); src_mask ``(B, S)`` bool; hidden ``(B, H)`` = ``h_{t-1}``;
        attentional ``(B, H)`` = ``h̃_{t-1}`` (zeros before the first step).
    """

    annotations: Tensor
    projected_keys: Tensor
    src_mask: Tensor
    hidden: Tensor
    attentional: Tensor


class LuongOutput(NamedTuple):
    """Teacher-forced output: logits ``(B, T, V)``, weights ``a_t`` ``(B, T, S)``, states ``h_t`` ``(B, T, H)``."""

    logits: Tensor
    weights: Tensor
    states: Tensor


class LuongDecoder(RNNDecoder):
    """Luong's decoder without input feeding, one step::

        h_t      = GRU(E y_{t-1}, h_{t-1})
        c_t, a_t = attention(h_t, h̄_1..h̄_S)          global (LuongAttention) or local-p (LocalPAttention)
        h̃_t      = tanh(W_c [c_t; h_t])
        logits_t = W_s h̃_t

    with ``h_0 = tanh(W_init final)``. Teacher forcing runs the GRU over all steps in one call, then
    attends from all ``T`` states at once.

    Args:
        vocab_size, embed_dim, hidden_size: ``V``, ``E``, ``H``.
        attention: a :class:`~attnbook.attention.LuongAttention` (global) or
        :class:`~attnbook.attention.LocalPAttention` with ``query_dim == H``; its ``key_dim`` is the
        annotations' size ``A``. pad_id: padding id.

    Shapes:
        start(annotations ``(B, S, A)``, final ``(B, A)``, src_mask ``(B, S)``) -> :class:`LuongState`;
        step(state, prev ``(B,)``) -> Step(logits ``(B, V)``, state, weights ``(B, S)``);
        forward(tgt_in ``(B, T)``, state) -> :class:`LuongOutput`
    """

    State = LuongState

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_size: int,
        attention: LuongAttention,
        pad_id: int = 0,
    ) -> None:
        if not isinstance(attention, LuongAttention):
            raise TypeError(f"attention must be a LuongAttention or LocalPAttention, got {type(attention).__name__}")
        if attention.query_dim != hidden_size:
            raise ValueError(
                f"the attention's query_dim={attention.query_dim} must equal hidden_size={hidden_size}: "
                "it scores the decoder state h_t"
            )
        encoder_size = attention.key_dim  # A
        super().__init__(vocab_size, embed_dim, hidden_size, encoder_size, pad_id)
        self.attention = attention
        self.init = nn.Linear(encoder_size, hidden_size)  # W_init
        self.rnn = self.recurrence(embed_dim, hidden_size)
        self.W_c = nn.Linear(encoder_size + hidden_size, hidden_size, bias=False)
        self.out = nn.Linear(hidden_size, vocab_size)  # W_s

    def recurrence(self, embed_dim: int, hidden_size: int) -> nn.Module:
        """The recurrent layer: here reads ``E y_{t-1}``, all steps in one call."""
        return nn.GRU(embed_dim, hidden_size, batch_first=True)

    def start(self, annotations: Tensor, final: Tensor, src_mask: Tensor) -> LuongState:
        checks.shapes(
            type(self).__name__,
            dict(A=self.encoder_size),
            annotations=(annotations, "B S A"),
            final=(final, "B A"),
            src_mask=(src_mask, "B S : bool"),
        )
        hidden = torch.tanh(self.init(final))  # h_0: (B, H)
        projected_keys = self.attention.project_keys(annotations)  # once per sentence: (B, S, k)
        return LuongState(annotations, projected_keys, src_mask, hidden, torch.zeros_like(hidden))  # h̃_0 = 0

    def attentional_state(self, hidden: Tensor, state: LuongState) -> tuple[Tensor, Tensor]:
        """``h̃ = tanh(W_c [c; h])`` and the weights, for one state ``(B, H)`` or all steps ``(B, T, H)``."""
        context, weights = self.attention(
            hidden, state.annotations, mask=state.src_mask, projected_keys=state.projected_keys
        )  # c_t (B, [T,] A), a_t (B, [T,] S)
        return torch.tanh(self.W_c(torch.cat([context, hidden], dim=-1))), weights  # (B, [T,] A + H) -> (B, [T,] H)

    def step(self, state: LuongState, prev: Tensor) -> Step:
        embedded = self.embedding(prev)  # E y_{t-1}: (B, E)
        _, hidden = self.rnn(embedded.unsqueeze(1), state.hidden.unsqueeze(0))  # one step: (1, B, H)
        hidden = hidden.squeeze(0)  # h_t: (B, H)
        attentional, weights = self.attentional_state(hidden, state)  # h̃_t (B, H), a_t (B, S)
        return Step(self.out(attentional), state._replace(hidden=hidden, attentional=attentional), weights)

    def forward(self, tgt_in: Tensor, state: LuongState) -> LuongOutput:
        states, _ = self.rnn(self.embedding(tgt_in), state.hidden.unsqueeze(0))  # every h_t at once: (B, T, H)
        attentional, weights = self.attentional_state(states, state)  # (B, T, H), (B, T, S)
        return LuongOutput(self.out(attentional), weights, states)  # logits (B, T, V)


class InputFeedingDecoder(LuongDecoder):
    """Luong's decoder with input feeding: ``h_t = GRUCell([E y_{t-1}; h̃_{t-1}], h_{t-1})``.

    The rest as :class:`LuongDecoder`; teacher forcing is a loop, since step ``t`` needs ``h̃_{t-1}``.
    """

    def recurrence(self, embed_dim: int, hidden_size: int) -> nn.Module:
        """The recurrent layer: reads ``[E y_{t-1}; h̃_{t-1}]``, one step at a time."""
        return nn.GRUCell(embed_dim + hidden_size, hidden_size)

    def advance(self, embedded: Tensor, state: LuongState) -> tuple[LuongState, Tensor]:
        """One step before the output layer: ``(state with h_t and h̃_t, a_t (B, S))``."""
        hidden = self.rnn(torch.cat([embedded, state.attentional], dim=-1), state.hidden)  # h_t from [E y; h̃_{t-1}]
        attentional, weights = self.attentional_state(hidden, state)  # h̃_t (B, H), a_t (B, S)
        return state._replace(hidden=hidden, attentional=attentional), weights

    def step(self, state: LuongState, prev: Tensor) -> Step:
        state, weights = self.advance(self.embedding(prev), state)
        return Step(self.out(state.attentional), state, weights)  # logits (B, V)

    def forward(self, tgt_in: Tensor, state: LuongState) -> LuongOutput:
        attentional, weights, states = [], [], []
        for embedded in self.embedding(tgt_in).unbind(dim=1):  # T x (B, E): E y_{t-1}
            state, alpha = self.advance(embedded, state)
            attentional.append(state.attentional)
            weights.append(alpha)
            states.append(state.hidden)
        logits = self.out(torch.stack(attentional, dim=1))  # (B, T, H) -> (B, T, V)
        return LuongOutput(logits, torch.stack(weights, dim=1), torch.stack(states, dim=1))  # (B, T, S), (B, T, H)


class LuongSeq2Seq(EncoderDecoder):
    """A packed bidirectional GRU :class:`~attnbook.rnn.Encoder` and a Luong decoder."""

    @classmethod
    def build(
        cls,
        src_vocab_size: int,
        tgt_vocab_size: int,
        embed_dim: int = 32,
        hidden_size: int = 64,
        score: str = "general",
        input_feeding: bool = True,
        local_window: int | None = None,
        bidirectional: bool = True,
        pad_id: int = 0,
        encoder_hidden_size: int | None = None,
    ) -> "LuongSeq2Seq":
        """Encoder and decoder with matching sizes.

        As in the paper the annotations have the decoder's size ``hidden_size`` (``hidden_size // 2`` per
        direction when bidirectional), so every score, ``dot`` included, compares ``h_t`` with ``h̄_s``
        directly; ``encoder_hidden_size`` overrides the units per direction.
        """
        if encoder_hidden_size is None:
            if bidirectional and hidden_size % 2:
                raise ValueError(
                    f"hidden_size={hidden_size} must be even with a bidirectional encoder (each direction "
                    "gets hidden_size // 2 units so that the annotations have the decoder's size), "
                    "or give encoder_hidden_size"
                )
            encoder_hidden_size = hidden_size // 2 if bidirectional else hidden_size
        encoder = Encoder(src_vocab_size, embed_dim, encoder_hidden_size, bidirectional, pad_id)
        if local_window is None:
            attention = LuongAttention(score, hidden_size, encoder.output_size)
        else:
            attention = LocalPAttention(score, hidden_size, encoder.output_size, D=local_window)
        decoder_class = InputFeedingDecoder if input_feeding else LuongDecoder
        decoder = decoder_class(tgt_vocab_size, embed_dim, hidden_size, attention, pad_id)
        return cls(encoder, decoder, pad_id)
