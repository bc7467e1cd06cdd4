"""RNN encoder-decoders (Chapters 1-3): the GRU :class:`Encoder`, the :class:`EncoderDecoder` and
:class:`RNNDecoder` bases of every RNN model, and Chapter 1's :class:`Decoder` and :class:`Seq2Seq`.

Letters: ``B`` batch, ``S`` source and ``T`` target length, ``E`` embedding size, ``H`` hidden size,
``D`` directions, ``A = H·D`` the encoder's output size, ``V`` vocabulary size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnbook import _checks as checks
from attnbook.protocol import Output, Step

__all__ = ["Encoded", "Encoder", "EncoderDecoder", "RNNDecoder", "Decoder", "DecoderState", "Seq2Seq", "source_lengths"]


def source_lengths(src: Tensor, pad_id: int) -> Tensor:
    """Real tokens per row of a right-padded source: ``(B, S) -> (B,)``; a ValueError for an empty row
    or left padding."""
    return checks.right_padded(src, pad_id).sum(dim=1)


class Encoded(NamedTuple):
    """What a recurrent encoder returns: every position's output and the final state.

    Shapes:
        annotations ``(B, S, A)``; final ``(B, A)``: Chapter 1's context vector
    """

    annotations: Tensor
    final: Tensor


class Encoder(nn.Module):
    """Embedding + one-layer GRU; returns every position's output and the final state.

    The final state is ``→h_S`` (one direction) or ``[→h_S; ←h_1]`` (bidirectional): in Chapter 1
    the context vector, in Chapters 2-3 the start of the decoder's state.

    Args:
        vocab_size, embed_dim, hidden_size: ``V``, ``E``, ``H`` (per direction).
        bidirectional: also read right to left. pad_id: padding id (zero embedding).

    The GRU runs over each row's real tokens only (a packed sequence), so padding changes nothing;
    Chapter 1 shows what reading the padding too would do.

    Shapes:
        src ``(B, S)`` long, lengths ``(B,)`` -> (outputs ``(B, S, A)``, zero at padding;
        final ``(B, A)``)
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_size: int,
        bidirectional: bool = False,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        checks.positive_int(vocab_size=vocab_size, embed_dim=embed_dim, hidden_size=hidden_size)
        checks.pad_id(pad_id, vocab_size)
        self.hidden_size, self.bidirectional, self.pad_id = hidden_size, bool(bidirectional), pad_id
        self.output_size = hidden_size * (2 if bidirectional else 1)
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.gru = nn.GRU(embed_dim, hidden_size, batch_first=True, bidirectional=self.bidirectional)

    def forward(self, src: Tensor, lengths: Tensor) -> Encoded:
        self.check(src, lengths)
        embedded = self.embedding(src)  # (B, S, E)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_outputs, h_n = self.gru(packed)  # h_n: (D, B, H), rows in the original order
        outputs, _ = pad_packed_sequence(packed_outputs, batch_first=True, total_length=src.size(1))  # (B, S, A)
        return Encoded(outputs, torch.cat(list(h_n), dim=-1))  # (B, S, A), D x (B, H) -> (B, A)

    def check(self, src: Tensor, lengths: Tensor) -> None:
        """Token ids ``(B, S)`` and one length in ``1..S`` per row."""
        sizes = checks.shapes("Encoder", src=(src, "B S : long"), lengths=(lengths, "B : long"))
        if (lengths < 1).any() or (lengths > sizes["S"]).any():
            raise ValueError(f"every length must be in 1..S={sizes['S']}, got {lengths.tolist()}")


class EncoderDecoder(nn.Module):
    """An :class:`Encoder` and an :class:`RNNDecoder` behind the model protocol (:mod:`attnbook.protocol`).

    Shapes:
        forward(src ``(B, S)``, tgt_in ``(B, T)``) -> the decoder's output (``.logits`` ``(B, T, V)``);
        start(src) -> the decoder's ``State``; step(state, prev ``(B,)``) -> :class:`~attnbook.protocol.Step`
    """

    def __init__(self, encoder: Encoder, decoder: nn.Module, pad_id: int = 0) -> None:
        super().__init__()
        if decoder.encoder_size != encoder.output_size:
            raise ValueError(
                f"decoder expects encoder outputs of size encoder_size={decoder.encoder_size} but the "
                f"encoder gives {encoder.output_size} ({'bi' if encoder.bidirectional else 'uni'}"
                f"directional, hidden_size={encoder.hidden_size})"
            )
        checks.same("pad_id", pad_id, "the encoder's pad_id", encoder.pad_id)
        checks.same("pad_id", pad_id, "the decoder's pad_id", decoder.pad_id)
        self.encoder, self.decoder, self.pad_id = encoder, decoder, pad_id

    def encode(self, src: Tensor) -> Encoded:
        """``Encoded(annotations (B, S, A), final (B, A))``, lengths counted from ``src != pad_id``."""
        return self.encoder(src, source_lengths(src, self.pad_id))

    def forward(self, src: Tensor, tgt_in: Tensor):
        checks.shapes(type(self).__name__, src=(src, "B S : long"), tgt_in=(tgt_in, "B T : long"))
        return self.decoder(tgt_in, self.start(src))

    def start(self, src: Tensor):
        annotations, final = self.encode(src)  # (B, S, A), (B, A)
        return self.decoder.start(annotations, final, src != self.pad_id)

    def step(self, state, prev: Tensor) -> Step:
        checks.instance(
            "state", state, self.decoder.State, f"the {self.decoder.State.__name__} returned by start or step"
        )
        checks.shapes("step", **{"state.hidden": (state.hidden, "B H")}, prev=(prev, "B : long"))
        return self.decoder.step(state, prev)


class DecoderState(NamedTuple):
    """Chapter 1's decoder state: the context vector ``c (B, C)`` and the hidden state ``(B, H)``."""

    context: Tensor
    hidden: Tensor


class RNNDecoder(nn.Module):
    """What every RNN decoder has: sizes, padding id, target embedding; subclasses add a ``State`` class,
    ``start(annotations, final, src_mask)``, ``step(state, prev)`` and ``forward(tgt_in, state)``."""

    def __init__(
        self, vocab_size: int, embed_dim: int, hidden_size: int, encoder_size: int, pad_id: int = 0, **more_sizes: int
    ) -> None:
        super().__init__()
        checks.positive_int(
            vocab_size=vocab_size, embed_dim=embed_dim, hidden_size=hidden_size, encoder_size=encoder_size, **more_sizes
        )
        checks.pad_id(pad_id, vocab_size)
        self.hidden_size, self.encoder_size, self.pad_id = hidden_size, encoder_size, pad_id
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)


class Decoder(RNNDecoder):
    """Cho et al.'s conditional GRU decoder: the context vector ``c`` enters every step.

    ``s_0 = tanh(W_init c + b_init)``, ``s_t = GRU([E y_{t-1}; c], s_{t-1})``,
    ``logits_t = W_o [s_t; c; E y_{t-1}] + b_o``.

    Args:
        vocab_size, embed_dim, hidden_size: ``V``, ``E``, ``H``. encoder_size: ``C``. pad_id: padding id.

    Shapes:
        start(annotations, final ``(B, C)``, src_mask) -> :class:`DecoderState`;
        step(state, prev ``(B,)``) -> Step(logits ``(B, V)``, state, None);
        forward(tgt_in ``(B, T)``, state) -> Output(logits ``(B, T, V)``, None)
    """

    State = DecoderState

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, encoder_size: int, pad_id: int = 0) -> None:
        super().__init__(vocab_size, embed_dim, hidden_size, encoder_size, pad_id)
        self.init = nn.Linear(encoder_size, hidden_size)  # W_init and b_init
        self.gru = nn.GRU(embed_dim + encoder_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size + encoder_size + embed_dim, vocab_size)  # W_o and b_o

    def start(self, annotations: Tensor, final: Tensor, src_mask: Tensor) -> DecoderState:
        checks.shapes("Decoder", dict(C=self.encoder_size), final=(final, "B C"))
        return DecoderState(context=final, hidden=torch.tanh(self.init(final)))  # c and s_0 = tanh(W_init c + b_init)

    def step(self, state: DecoderState, prev: Tensor) -> Step:
        embedded = self.embedding(prev)  # (B, E)
        x = torch.cat([embedded, state.context], dim=-1)  # (B, E + C)
        _, hidden = self.gru(x.unsqueeze(1), state.hidden.unsqueeze(0))  # one step; hidden (1, B, H)
        hidden = hidden.squeeze(0)  # (B, H)
        logits = self.out(torch.cat([hidden, state.context, embedded], dim=-1))  # (B, H + C + E) -> (B, V)
        return Step(logits, state._replace(hidden=hidden), None)

    def forward(self, tgt_in: Tensor, state: DecoderState) -> Output:
        embedded = self.embedding(tgt_in)  # (B, T, E)
        context = state.context.unsqueeze(1).expand(-1, tgt_in.size(1), -1)  # (B, C) -> (B, T, C)
        states, _ = self.gru(
            torch.cat([embedded, context], dim=-1), state.hidden.unsqueeze(0)
        )  # all T at once: (B, T, H)
        return Output(self.out(torch.cat([states, context, embedded], dim=-1)), None)  # (B, T, V)


class Seq2Seq(EncoderDecoder):
    """Chapter 1's model: an :class:`Encoder` whose final state is the context vector, and a :class:`Decoder`."""

    @classmethod
    def build(
        cls,
        src_vocab_size: int,
        tgt_vocab_size: int,
        embed_dim: int = 32,
        hidden_size: int = 128,
        bidirectional: bool = True,
        pad_id: int = 0,
    ) -> "Seq2Seq":
        """Encoder and decoder with matching sizes (the context has ``hidden_size · D`` features)."""
        encoder = Encoder(src_vocab_size, embed_dim, hidden_size, bidirectional, pad_id)
        decoder = Decoder(tgt_vocab_size, embed_dim, hidden_size, encoder.output_size, pad_id)
        return cls(encoder, decoder, pad_id)
