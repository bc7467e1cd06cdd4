"""Chapter 1: the RNN encoder-decoder (Sutskever et al. 2014; Cho et al. 2014).

The encoder reads the source and squeezes it into one fixed-size *context vector*;
the decoder writes the target from that vector alone. Everything is batch-first.

Letters used in the shapes below:
``B`` batch, ``S`` source length, ``T`` target length, ``E`` embedding size,
``H`` hidden size, ``D`` number of directions (1 or 2), ``C`` context size, ``V`` vocabulary size.

Reversing the source (Sutskever et al.'s trick) is done in the data, not here.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

__all__ = ["Encoder", "Decoder", "Seq2Seq", "DecoderState", "source_lengths"]


def _check_positive(**sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def _check_token_ids(name: str, ids: Tensor, ndim: int = 2) -> None:
    if not isinstance(ids, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.dim() != ndim:
        want = "(B, S)" if ndim == 2 else "(B,)"
        raise ValueError(f"{name} must be {ndim}-D {want}, got shape {tuple(ids.shape)}")
    if ids.dtype != torch.long:
        raise TypeError(f"{name} must hold token ids as torch.long, got dtype {ids.dtype}")


def source_lengths(src: Tensor, pad_id: int) -> Tensor:
    """Number of real tokens per row; checks that ``src`` is right-padded and no row is empty.

    Shapes:
        src ``(B, S)`` long -> ``(B,)`` long
    """
    _check_token_ids("src", src)
    real = src != pad_id  # (B, S)
    lengths = real.sum(dim=1)  # (B,)
    empty = (lengths == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"src rows {empty} are all padding (pad_id={pad_id}); every source needs a token")
    positions = torch.arange(src.size(1), device=src.device)  # (S,)
    if not torch.equal(real, positions < lengths.unsqueeze(1)):  # (B, S)
        raise ValueError(f"src must be padded on the right only (pad_id={pad_id})")
    return lengths


class Encoder(nn.Module):
    """Embedding + one-layer GRU that reads the source into a context vector.

    Args:
        vocab_size: number of source symbols.
        embed_dim: size of a symbol's embedding.
        hidden_size: size of the GRU state per direction.
        bidirectional: also read the source right to left and concatenate both directions.
        pad_id: padding id (its embedding is kept at zero).
        pack: run the GRU only over real tokens (``pack_padded_sequence``). ``False`` runs it
            over the padding too; it exists only to show what goes wrong then.

    Attributes:
        output_size: ``hidden_size * D``, the size of every output and of the context.

    Shapes:
        forward(src ``(B, S)`` long, lengths ``(B,)``) -> (outputs ``(B, S, H*D)``, context ``(B, H*D)``)
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_size: int,
        bidirectional: bool = False,
        pad_id: int = 0,
        pack: bool = True,
    ) -> None:
        super().__init__()
        _check_positive(vocab_size=vocab_size, embed_dim=embed_dim, hidden_size=hidden_size)
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id={pad_id} is not an id of a vocabulary of size {vocab_size}")
        self.hidden_size = hidden_size
        self.bidirectional = bool(bidirectional)
        self.num_directions = 2 if bidirectional else 1
        self.output_size = hidden_size * self.num_directions
        self.pad_id = pad_id
        self.pack = bool(pack)
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.gru = nn.GRU(embed_dim, hidden_size, batch_first=True, bidirectional=self.bidirectional)

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Encode a right-padded batch.

        Shapes:
            src: ``(B, S)`` long, padded on the right with ``pad_id``.
            lengths: ``(B,)`` number of real tokens per row, each in ``1..S``.
            returns: outputs ``(B, S, H*D)`` (zero at padding when ``pack=True``) and the
            context ``(B, H*D)``: the last forward state, concatenated (bidirectional) with the
            last backward state, i.e. the backward state after reading position 0.
        """
        _check_token_ids("src", src)
        lengths = self._check_lengths(src, lengths)
        embedded = self.embedding(src)  # (B, S, E)
        if self.pack:
            packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
            packed_out, h_n = self.gru(packed)  # h_n: (D, B, H), back in the original row order
            outputs, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=src.size(1))
        else:
            outputs, h_n = self.gru(embedded)  # (B, S, H*D); h_n after the last column, pads included
        context = torch.cat(list(h_n), dim=-1)  # D x (B, H) -> (B, H*D)
        return outputs, context

    def _check_lengths(self, src: Tensor, lengths: Tensor) -> Tensor:
        lengths = torch.as_tensor(lengths, dtype=torch.long)
        if lengths.shape != (src.size(0),):
            raise ValueError(f"lengths must have shape (B,)=({src.size(0)},) for src of shape {tuple(src.shape)}, "
                             f"got {tuple(lengths.shape)}")
        if (lengths < 1).any() or (lengths > src.size(1)).any():
            raise ValueError(f"every length must be in 1..S={src.size(1)}, got {lengths.tolist()}")
        return lengths


class DecoderState(NamedTuple):
    """What ``Seq2Seq.step`` carries from one step to the next.

    Shapes:
        context ``(B, C)``, hidden ``(B, H)``.
    """

    context: Tensor
    hidden: Tensor


class Decoder(nn.Module):
    """Conditional GRU decoder in the style of Cho et al. (2014).

    The context vector ``c`` conditions every step, not only the first one:

    - initial state ``h_0 = tanh(W_init c)``;
    - GRU input at step t: ``[emb(y_{t-1}); c]``;
    - output: ``logits_t = W_out [h_t; c; emb(y_{t-1})]`` (Cho et al. use a maxout layer here;
      a linear layer keeps the model small).

    Args:
        vocab_size: number of target symbols ``V``.
        embed_dim: size of a symbol's embedding ``E``.
        hidden_size: size of the GRU state ``H``.
        context_size: size of the encoder's context vector ``C``.
        pad_id: padding id (its embedding is kept at zero).

    Shapes:
        init_state(context ``(B, C)``) -> ``(B, H)``
        forward(tgt_in ``(B, T)`` long, context ``(B, C)``, h0 ``(B, H)``) -> logits ``(B, T, V)``
        step(prev ``(B,)`` long, context ``(B, C)``, h ``(B, H)``) -> (logits ``(B, V)``, h ``(B, H)``)
    """

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, context_size: int, pad_id: int = 0) -> None:
        super().__init__()
        _check_positive(vocab_size=vocab_size, embed_dim=embed_dim, hidden_size=hidden_size,
                        context_size=context_size)
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id={pad_id} is not an id of a vocabulary of size {vocab_size}")
        self.hidden_size = hidden_size
        self.context_size = context_size
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.init = nn.Linear(context_size, hidden_size)
        self.gru = nn.GRU(embed_dim + context_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size + context_size + embed_dim, vocab_size)

    def init_state(self, context: Tensor) -> Tensor:
        """``h_0 = tanh(W_init c)``.

        Shapes:
            context ``(B, C)`` -> ``(B, H)``
        """
        self._check_context(context)
        return torch.tanh(self.init(context))

    def forward(self, tgt_in: Tensor, context: Tensor, h0: Tensor) -> Tensor:
        """Teacher forcing: run the whole target prefix through the GRU at once.

        Shapes:
            tgt_in: ``(B, T)`` long, ``[bos, y_1 .. y_{T-1}]``.
            context: ``(B, C)``; h0: ``(B, H)``.
            returns: logits ``(B, T, V)``.
        """
        _check_token_ids("tgt_in", tgt_in)
        self._check_context(context, batch=tgt_in.size(0))
        embedded = self.embedding(tgt_in)  # (B, T, E)
        ctx = context.unsqueeze(1).expand(-1, tgt_in.size(1), -1)  # (B, C) -> (B, T, C)
        states, _ = self.gru(torch.cat([embedded, ctx], dim=-1), h0.unsqueeze(0))  # (B, T, H)
        return self.out(torch.cat([states, ctx, embedded], dim=-1))  # (B, T, H+C+E) -> (B, T, V)

    def step(self, prev: Tensor, context: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        """One decoding step from the previous token.

        Shapes:
            prev: ``(B,)`` long; context: ``(B, C)``; h: ``(B, H)``.
            returns: logits ``(B, V)`` and the new state ``(B, H)``.
        """
        _check_token_ids("prev", prev, ndim=1)
        self._check_context(context, batch=prev.size(0))
        embedded = self.embedding(prev)  # (B, E)
        x = torch.cat([embedded, context], dim=-1).unsqueeze(1)  # (B, 1, E+C)
        _, h_new = self.gru(x, h.unsqueeze(0))  # h_new: (1, B, H)
        h_new = h_new.squeeze(0)  # (B, H)
        logits = self.out(torch.cat([h_new, context, embedded], dim=-1))  # (B, V)
        return logits, h_new

    def _check_context(self, context: Tensor, batch: int | None = None) -> None:
        if context.dim() != 2 or context.size(1) != self.context_size:
            raise ValueError(f"context must have shape (B, {self.context_size}), got {tuple(context.shape)}")
        if batch is not None and context.size(0) != batch:
            raise ValueError(f"context has batch size {context.size(0)} but the tokens have {batch}")


class Seq2Seq(nn.Module):
    """Encoder + decoder joined by one fixed-size context vector (the Chapter 1 model).

    Follows the model protocol every chapter's model shares: ``model(src, tgt_in)`` for
    teacher forcing, ``start``/``step`` for decoding one token at a time.

    Args:
        encoder: an :class:`Encoder`.
        decoder: a :class:`Decoder` whose ``context_size`` equals ``encoder.output_size``.
        pad_id: padding id of the source; lengths are counted from ``src != pad_id``.

    Shapes:
        forward(src ``(B, S)`` long, tgt_in ``(B, T)`` long) -> logits ``(B, T, V)``
        start(src ``(B, S)``) -> :class:`DecoderState` (context ``(B, C)``, hidden ``(B, H)``)
        step(state, prev ``(B,)`` long) -> (logits ``(B, V)``, state, ``None``)
    """

    def __init__(self, encoder: Encoder, decoder: Decoder, pad_id: int = 0) -> None:
        super().__init__()
        if decoder.context_size != encoder.output_size:
            how = "bidirectional" if encoder.bidirectional else "unidirectional"
            raise ValueError(
                f"decoder expects a context of size {decoder.context_size} but the encoder gives "
                f"{encoder.output_size} ({how}, hidden_size={encoder.hidden_size})")
        if encoder.pad_id != pad_id:
            raise ValueError(f"pad_id={pad_id} but the encoder was built with pad_id={encoder.pad_id}")
        self.encoder = encoder
        self.decoder = decoder
        self.pad_id = pad_id

    @classmethod
    def build(
        cls,
        src_vocab_size: int,
        tgt_vocab_size: int,
        embed_dim: int = 32,
        hidden_size: int = 128,
        bidirectional: bool = True,
        pad_id: int = 0,
        pack: bool = True,
    ) -> "Seq2Seq":
        """Build encoder, decoder and model with matching sizes.

        Both encoder and decoder use ``embed_dim`` and ``hidden_size``; the decoder's
        context size is the encoder's output size (``2 * hidden_size`` when bidirectional).
        """
        encoder = Encoder(src_vocab_size, embed_dim, hidden_size, bidirectional, pad_id, pack)
        decoder = Decoder(tgt_vocab_size, embed_dim, hidden_size, encoder.output_size, pad_id)
        return cls(encoder, decoder, pad_id)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Run the encoder, lengths taken from ``src != pad_id``.

        Shapes:
            src ``(B, S)`` -> (outputs ``(B, S, H*D)``, context ``(B, H*D)``)
        """
        return self.encoder(src, self.source_lengths(src))

    def source_lengths(self, src: Tensor) -> Tensor:
        """Number of real tokens per row (see :func:`source_lengths`).

        Shapes:
            src ``(B, S)`` long -> ``(B,)`` long
        """
        return source_lengths(src, self.pad_id)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits.

        Shapes:
            src ``(B, S)`` long, tgt_in ``(B, T)`` long -> logits ``(B, T, V)``
        """
        _check_token_ids("src", src)
        _check_token_ids("tgt_in", tgt_in)
        if src.size(0) != tgt_in.size(0):
            raise ValueError(f"src has batch size {src.size(0)} (shape {tuple(src.shape)}) but tgt_in has "
                             f"{tgt_in.size(0)} (shape {tuple(tgt_in.shape)})")
        state = self.start(src)
        return self.decoder(tgt_in, state.context, state.hidden)

    def start(self, src: Tensor) -> DecoderState:
        """Encode once; the state the first :meth:`step` needs.

        Shapes:
            src ``(B, S)`` -> DecoderState(context ``(B, C)``, hidden ``(B, H)``)
        """
        _, context = self.encode(src)
        return DecoderState(context, self.decoder.init_state(context))

    def step(self, state: DecoderState, prev: Tensor) -> tuple[Tensor, DecoderState, None]:
        """One decoding step. The third value is ``None``: this model has no attention weights.

        Shapes:
            prev ``(B,)`` long -> (logits ``(B, V)``, new state, None)
        """
        logits, hidden = self.decoder.step(prev, state.context, state.hidden)
        return logits, DecoderState(state.context, hidden), None
