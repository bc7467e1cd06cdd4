"""Attention decoders (chapter 2: Bahdanau et al. 2015; chapter 3: Luong et al. 2015).

Chapter 1's decoder read one fixed-size context vector. An attention decoder computes a
fresh context vector ``c_i`` for every output step ``i``: a weighted average of all the
encoder's outputs, which Bahdanau et al. call *annotations* ``h_j``, with weights that
depend on what the decoder has written so far.

Letters used in the shapes below:
``B`` batch, ``S`` source length, ``T`` target length, ``E`` embedding size,
``H`` decoder state size, ``A`` annotation size (``H_enc * D`` for :class:`attnbook.rnn.Encoder`),
``h`` hidden size of the additive scorer, ``V`` target vocabulary size,
``k`` size of a projected key (:attr:`attnbook.attention.LuongAttention.projected_size`).

- :class:`BahdanauDecoder`, :class:`BahdanauSeq2Seq` (chapter 2): scores from the previous state.
- :class:`LuongDecoder`, :class:`LuongSeq2Seq` (chapter 3): scores from the current state,
  the attentional hidden state, input feeding, global or local-p attention.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnbook.attention import LUONG_SCORES, AdditiveAttention, LuongAttention, PredictivePosition, local_p_window
from attnbook.rnn import Encoder, _check_positive, _check_token_ids, source_lengths

__all__ = ["BahdanauDecoder", "BahdanauSeq2Seq", "BahdanauState", "LuongDecoder", "LuongSeq2Seq", "LuongState"]


class BahdanauState(NamedTuple):
    """What :meth:`BahdanauSeq2Seq.step` carries from one step to the next.

    Everything but ``hidden`` is computed once per source sentence by ``start``.

    Shapes:
        annotations ``(B, S, A)``: the encoder outputs ``h_j``.
        projected_keys ``(B, S, h)``: ``U_a h_j``, the query-independent part of the scores.
        src_mask ``(B, S)`` bool (True = real token) or ``None`` (attend to padding too).
        hidden ``(B, H)``: the decoder state ``s_{i-1}``.
    """

    annotations: Tensor
    projected_keys: Tensor
    src_mask: Tensor | None
    hidden: Tensor


class BahdanauDecoder(nn.Module):
    """The decoder of Bahdanau, Cho and Bengio (2015), "align and translate".

    At output step ``i`` (counting from 1), with the previous state ``s_{i-1}`` and the
    previous target token ``y_{i-1}`` (``bos`` at the first step):

    1. score every annotation from the **previous** state:
       ``e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)`` (:class:`~attnbook.attention.AdditiveAttention`);
    2. ``α_i = softmax(e_i)`` over the real source positions (padding masked);
    3. context ``c_i = Σ_j α_ij h_j``;
    4. new state ``s_i = GRU([E y_{i-1}; c_i], s_{i-1})``;
    5. ``logits_i = W_o [s_i; c_i; E y_{i-1}]``.

    The initial state is ``s_0 = tanh(W_s c)``, ``c`` being the encoder's context vector.

    Where we simplify the paper (the attention itself is as in the paper):

    - Output layer. The paper's main text writes ``p(y_i) = g(y_{i-1}, s_i, c_i)``; its
      appendix implements ``g`` as a deep output with a maxout layer, computed from
      ``s_{i-1}``. We use one linear layer on ``[s_i; c_i; E y_{i-1}]``, as chapter 1's decoder does.
    - Initial state. The paper uses ``s_0 = tanh(W_s ←h_1)``, the backward encoder state at
      the first source position. :class:`attnbook.rnn.Encoder` gives the context
      ``c = [→h_T; ←h_1]`` (bidirectional) or ``→h_T`` (one direction), and we use all of it:
      the paper's choice is the special case where the weights on ``→h_T`` are zero, it
      works for a one-directional encoder too, and it is what chapter 1's decoder does,
      so that attention is the only difference between the two chapters' models.
    - GRU cell. ``nn.GRUCell`` applies the reset gate after the recurrent matrix,
      ``r ∘ (U s + b)``; the paper (like Cho et al. 2014) applies it before, ``U (r ∘ s)``.

    Args:
        vocab_size: number of target symbols ``V``.
        embed_dim: size of a target symbol's embedding ``E``.
        hidden_size: size of the decoder state ``H``.
        annotation_size: size ``A`` of an annotation ``h_j`` and of the encoder's context
            vector (both are ``encoder.output_size`` for :class:`attnbook.rnn.Encoder`).
        attention_dim: hidden size ``h`` of the additive scorer (1000 in the paper).
        pad_id: padding id of the target vocabulary (its embedding is kept at zero).

    Shapes:
        init_state(context ``(B, A)``) -> ``(B, H)``
        forward(tgt_in ``(B, T)`` long, annotations ``(B, S, A)``, hidden ``(B, H)``,
        src_mask ``(B, S)`` bool or None) -> (logits ``(B, T, V)``, weights ``(B, T, S)``)
        step(prev ``(B,)`` long, hidden ``(B, H)``, annotations ``(B, S, A)``,
        projected_keys ``(B, S, h)``, src_mask) -> (logits ``(B, V)``, hidden ``(B, H)``, weights ``(B, S)``)
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_size: int,
        annotation_size: int,
        attention_dim: int,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        _check_positive(vocab_size=vocab_size, embed_dim=embed_dim, hidden_size=hidden_size,
                        annotation_size=annotation_size, attention_dim=attention_dim)
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id={pad_id} is not an id of a vocabulary of size {vocab_size}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.annotation_size = annotation_size
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.attention = AdditiveAttention(query_dim=hidden_size, key_dim=annotation_size, hidden_dim=attention_dim)
        self.init = nn.Linear(annotation_size, hidden_size)  # W_s
        self.cell = nn.GRUCell(embed_dim + annotation_size, hidden_size)
        self.out = nn.Linear(hidden_size + annotation_size + embed_dim, vocab_size)

    def init_state(self, context: Tensor) -> Tensor:
        """``s_0 = tanh(W_s c)`` from the encoder's context vector.

        Shapes:
            context ``(B, A)`` -> ``(B, H)``
        """
        if context.dim() != 2 or context.size(1) != self.annotation_size:
            raise ValueError(f"context must have shape (B, {self.annotation_size}), got {tuple(context.shape)}")
        return torch.tanh(self.init(context))

    def forward(self, tgt_in: Tensor, annotations: Tensor, hidden: Tensor,
                src_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Teacher forcing: all ``T`` steps, feeding the true previous tokens.

        Unlike chapter 1's decoder this is a Python loop over the steps: the context of step
        ``i`` depends on ``s_{i-1}``, so the steps cannot be handed to ``nn.GRU`` in one call.
        The parts that do not depend on the state are computed once: the embeddings, the key
        projections ``U_a h_j`` and (after the loop) the output layer.

        Shapes:
            tgt_in ``(B, T)`` long ``[bos, y_1 .. y_{T-1}]``; annotations ``(B, S, A)``;
            hidden ``(B, H)`` = ``s_0``; src_mask ``(B, S)`` bool or None.
            returns: logits ``(B, T, V)`` and the attention weights ``(B, T, S)``.
        """
        _check_token_ids("tgt_in", tgt_in)
        self._check_annotations(annotations, hidden, src_mask, batch=tgt_in.size(0))
        embedded = self.embedding(tgt_in)  # (B, T, E)
        projected_keys = self.attention.project_keys(annotations)  # (B, S, h), once per sentence
        states, contexts, weights = [], [], []
        for embedded_prev in embedded.unbind(dim=1):  # T x (B, E): the input y_{i-1} of step i
            hidden, context, alpha = self._advance(embedded_prev, hidden, annotations, projected_keys, src_mask)
            states.append(hidden)
            contexts.append(context)
            weights.append(alpha)
        states = torch.stack(states, dim=1)  # T x (B, H) -> (B, T, H)
        contexts = torch.stack(contexts, dim=1)  # T x (B, A) -> (B, T, A)
        logits = self.out(torch.cat([states, contexts, embedded], dim=-1))  # (B, T, H+A+E) -> (B, T, V)
        return logits, torch.stack(weights, dim=1)  # T x (B, S) -> (B, T, S)

    def step(self, prev: Tensor, hidden: Tensor, annotations: Tensor, projected_keys: Tensor,
             src_mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """One decoding step from the previous token ``y_{i-1}`` and state ``s_{i-1}``.

        Shapes:
            prev ``(B,)`` long; hidden ``(B, H)``; annotations ``(B, S, A)``;
            projected_keys ``(B, S, h)`` (``self.attention.project_keys(annotations)``);
            src_mask ``(B, S)`` bool or None.
            returns: logits ``(B, V)``, the new state ``s_i`` ``(B, H)`` and the weights ``α_i`` ``(B, S)``.
        """
        _check_token_ids("prev", prev, ndim=1)
        embedded = self.embedding(prev)  # (B, E)
        hidden, context, weights = self._advance(embedded, hidden, annotations, projected_keys, src_mask)
        logits = self.out(torch.cat([hidden, context, embedded], dim=-1))  # (B, H+A+E) -> (B, V)
        return logits, hidden, weights

    def _advance(self, embedded: Tensor, hidden: Tensor, annotations: Tensor, projected_keys: Tensor,
                 src_mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """Steps 1-4: attend from ``s_{i-1}``, then update the state with ``[E y_{i-1}; c_i]``.

        Shapes:
            embedded ``(B, E)``, hidden ``(B, H)`` -> (hidden ``(B, H)``, context ``(B, A)``, weights ``(B, S)``)
        """
        context, weights = self.attention(hidden, annotations, mask=src_mask, projected_keys=projected_keys)
        hidden = self.cell(torch.cat([embedded, context], dim=-1), hidden)  # (B, E+A) -> (B, H)
        return hidden, context, weights

    def _check_annotations(self, annotations: Tensor, hidden: Tensor, src_mask: Tensor | None, batch: int) -> None:
        if annotations.dim() != 3 or annotations.size(-1) != self.annotation_size:
            raise ValueError(f"annotations must have shape (B, S, {self.annotation_size}), "
                             f"got {tuple(annotations.shape)}")
        if annotations.size(0) != batch:
            raise ValueError(f"annotations have batch size {annotations.size(0)} but tgt_in has {batch}")
        if tuple(hidden.shape) != (batch, self.hidden_size):
            raise ValueError(f"hidden must have shape (B, H) = {(batch, self.hidden_size)}, got {tuple(hidden.shape)}")
        if src_mask is not None and tuple(src_mask.shape) != tuple(annotations.shape[:2]):
            raise ValueError(f"src_mask has shape {tuple(src_mask.shape)} but annotations have (B, S) = "
                             f"{tuple(annotations.shape[:2])}")


class _AttentionSeq2Seq(nn.Module):
    """What the attention models share: an encoder whose outputs are the annotations, and a decoder.

    Checks that the sizes and padding ids match, and encodes a right-padded source.

    Shapes:
        encode(src ``(B, S)`` long) -> (annotations ``(B, S, A)``, context ``(B, A)``)
    """

    def __init__(self, encoder: Encoder, decoder: nn.Module, pad_id: int = 0) -> None:
        super().__init__()
        if decoder.annotation_size != encoder.output_size:
            how = "bidirectional" if encoder.bidirectional else "unidirectional"
            raise ValueError(
                f"decoder expects annotations of size annotation_size={decoder.annotation_size} but the encoder "
                f"gives {encoder.output_size} ({how}, hidden_size={encoder.hidden_size})")
        if encoder.pad_id != pad_id:
            raise ValueError(f"pad_id={pad_id} but the encoder was built with pad_id={encoder.pad_id}")
        if decoder.pad_id != pad_id:
            raise ValueError(f"pad_id={pad_id} but the decoder was built with pad_id={decoder.pad_id}")
        self.encoder = encoder
        self.decoder = decoder
        self.pad_id = pad_id

    def source_lengths(self, src: Tensor) -> Tensor:
        """Real tokens per row; checks right padding and no empty row (see :func:`attnbook.rnn.source_lengths`).

        Shapes:
            src ``(B, S)`` long -> ``(B,)`` long
        """
        return source_lengths(src, self.pad_id)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Run the encoder, lengths taken from ``src != pad_id``.

        Shapes:
            src ``(B, S)`` -> (annotations ``(B, S, A)``, context ``(B, A)``)
        """
        return self.encoder(src, self.source_lengths(src))


class BahdanauSeq2Seq(_AttentionSeq2Seq):
    """Bidirectional-GRU encoder + :class:`BahdanauDecoder`: the chapter 2 model (RNNsearch).

    Follows the model protocol of every chapter (``CONTRACT.md``): ``model(src, tgt_in)``
    for teacher forcing, ``start``/``step`` for decoding one token at a time, and ``step``
    returns the attention weights, so ``greedy_decode`` collects them for plotting.

    Args:
        encoder: an :class:`attnbook.rnn.Encoder` (``pack=True`` keeps its outputs at padded
            positions at zero and its context free of padding).
        decoder: a :class:`BahdanauDecoder` with ``annotation_size == encoder.output_size``.
        pad_id: padding id of source and target; source lengths come from ``src != pad_id``.
        mask_padding: mask padded source positions out of the attention. Leave it ``True``;
            ``False`` exists only to show the bug of forgetting the mask (weight on padding).

    Shapes:
        forward(src ``(B, S)`` long, tgt_in ``(B, T)`` long) -> logits ``(B, T, V)``
        (and weights ``(B, T, S)`` with ``return_weights=True``)
        start(src ``(B, S)``) -> :class:`BahdanauState`
        step(state, prev ``(B,)`` long) -> (logits ``(B, V)``, state, weights ``(B, S)``)
    """

    def __init__(self, encoder: Encoder, decoder: BahdanauDecoder, pad_id: int = 0, mask_padding: bool = True) -> None:
        super().__init__(encoder, decoder, pad_id)
        self.mask_padding = bool(mask_padding)

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
        mask_padding: bool = True,
    ) -> "BahdanauSeq2Seq":
        """Build encoder (packed GRU), decoder and model with matching sizes.

        The encoder has ``hidden_size`` units per direction and the decoder state has
        ``hidden_size`` units (the paper: 1000 each, and 1000 for ``attention_dim``); the
        annotations have ``2 * hidden_size`` features when bidirectional.
        """
        encoder = Encoder(src_vocab_size, embed_dim, hidden_size, bidirectional, pad_id, pack=True)
        decoder = BahdanauDecoder(tgt_vocab_size, embed_dim, hidden_size, encoder.output_size, attention_dim, pad_id)
        return cls(encoder, decoder, pad_id, mask_padding)

    def forward(self, src: Tensor, tgt_in: Tensor, return_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Teacher-forced logits (and, if asked, the attention weights of every step).

        Shapes:
            src ``(B, S)`` long, tgt_in ``(B, T)`` long -> logits ``(B, T, V)``
            [, weights ``(B, T, S)``]
        """
        _check_token_ids("src", src)
        _check_token_ids("tgt_in", tgt_in)
        if src.size(0) != tgt_in.size(0):
            raise ValueError(f"src has batch size {src.size(0)} (shape {tuple(src.shape)}) but tgt_in has "
                             f"{tgt_in.size(0)} (shape {tuple(tgt_in.shape)})")
        annotations, context = self.encode(src)
        logits, weights = self.decoder(tgt_in, annotations, self.decoder.init_state(context), self._mask(src))
        return (logits, weights) if return_weights else logits

    def start(self, src: Tensor) -> BahdanauState:
        """Encode once: annotations, their key projections, the source mask and ``s_0``.

        Shapes:
            src ``(B, S)`` -> BahdanauState(annotations ``(B, S, A)``, projected_keys ``(B, S, h)``,
            src_mask ``(B, S)`` or None, hidden ``(B, H)``)
        """
        annotations, context = self.encode(src)
        return BahdanauState(
            annotations=annotations,
            projected_keys=self.decoder.attention.project_keys(annotations),
            src_mask=self._mask(src),
            hidden=self.decoder.init_state(context),
        )

    def step(self, state: BahdanauState, prev: Tensor) -> tuple[Tensor, BahdanauState, Tensor]:
        """One decoding step.

        Shapes:
            prev ``(B,)`` long -> (logits ``(B, V)``, new state, weights ``(B, S)``)
        """
        if not isinstance(state, BahdanauState):
            raise TypeError(f"state must be the BahdanauState returned by start or step, got {type(state).__name__}")
        _check_token_ids("prev", prev, ndim=1)
        if prev.size(0) != state.hidden.size(0):
            raise ValueError(f"prev must have shape (B,) = ({state.hidden.size(0)},), one token per source row, "
                             f"got {tuple(prev.shape)}")
        logits, hidden, weights = self.decoder.step(prev, state.hidden, state.annotations,
                                                    state.projected_keys, state.src_mask)
        return logits, state._replace(hidden=hidden), weights

    def _mask(self, src: Tensor) -> Tensor | None:
        """``(B, S)`` bool, True at real tokens; None when ``mask_padding=False`` (the bug)."""
        return src != self.pad_id if self.mask_padding else None

    def extra_repr(self) -> str:
        return "" if self.mask_padding else "mask_padding=False"


# ===================================================================== chapter 3: Luong


class LuongState(NamedTuple):
    """What :meth:`LuongSeq2Seq.step` carries from one step to the next.

    ``annotations``, ``keys`` and ``src_mask`` are computed once per source sentence by
    ``start``; the other fields change at every step.

    Shapes:
        annotations ``(B, S, A)``: the encoder outputs ``h̄_s``.
        keys ``(B, S, k)``: ``attention.project_keys(annotations)``, the query-independent part
        of the scores (the annotations themselves for ``dot``, ``W_a h̄_s`` for ``general``).
        src_mask ``(B, S)`` bool, True = real token.
        hidden ``(B, H)``: the GRU state ``h_{t-1}`` the next step starts from.
        attentional ``(B, H)``: ``h̃_{t-1}``, fed to the next step with input feeding (zeros
        before the first step); ``None`` without input feeding.
        position ``(B,)``: local-p only: the window centre ``p_t`` of the latest step (``None``
        before the first step and for global attention).
    """

    annotations: Tensor
    keys: Tensor
    src_mask: Tensor
    hidden: Tensor
    attentional: Tensor | None
    position: Tensor | None


class LuongDecoder(nn.Module):
    """The decoder of Luong, Pham and Manning (2015), "effective approaches to attention".

    At output step ``t`` (counting from 1), with the previous token ``y_{t-1}`` (``bos`` first):

    1. new state ``h_t = GRU(x_t, h_{t-1})``, with input ``x_t = [E y_{t-1}; h̃_{t-1}]`` (input
       feeding; ``h̃_0 = 0``) or ``x_t = E y_{t-1}`` (without);
    2. score every annotation from the **current** state ``h_t`` (dot, general or concat,
       :class:`~attnbook.attention.LuongAttention`), ``a_t = softmax`` over the real source
       positions, context ``c_t = Σ_s a_t(s) h̄_s``;
    3. attentional hidden state ``h̃_t = tanh(W_c [c_t; h_t])``;
    4. ``logits_t = W_s h̃_t``.

    Compare Bahdanau's decoder: its scores come from the previous state ``s_{i-1}`` and its
    context goes *into* the recurrent update; here the context is read *after* the update and
    goes to the output. So without input feeding the recurrence never sees an attention result:
    with teacher forcing, the GRU runs over the whole target in one call and all ``T`` steps
    attend in one batched operation (:meth:`forward`'s fast path, no Python loop). Input
    feeding gives the recurrence the previous attentional state ``h̃_{t-1}`` (so the model
    knows where it looked before), at the price of a step-by-step loop again.

    **Local-p attention** (``local_window=D``): at each step the model predicts a centre
    ``p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))`` (:class:`~attnbook.attention.PredictivePosition`,
    ``S`` the sentence's real length) and attends only within ``[p_t - D, p_t + D]``: a softmax
    over the window, multiplied by the Gaussian ``exp(-(s - p_t)² / (2σ²))``, ``σ = D/2``
    (:func:`~attnbook.attention.local_p_window`). As in the paper the weights are not
    renormalised after the Gaussian, so a row sums to at most 1.

    Where we differ from the paper (the attention itself is as in the paper):

    - Recurrent unit. The paper stacks 4 LSTM layers of 1000 cells and attends from the top
      layer; we use one GRU layer, whose state is ``h_t``.
    - Initial state. The paper starts the decoder from the encoder's last state (same sizes);
      we use ``h_0 = tanh(W_init c)`` from the encoder's context ``c``, as chapters 1 and 2 do,
      which also works for a bidirectional encoder.
    - ``W_c`` has no bias (as eq. 5 is written); ``W_s`` (``out``) has one.

    Args:
        vocab_size: number of target symbols ``V``.
        embed_dim: size of a target symbol's embedding ``E``.
        hidden_size: size ``H`` of ``h_t`` and of ``h̃_t``.
        annotation_size: size ``A`` of an annotation ``h̄_s`` and of the encoder's context;
            ``score="dot"`` needs ``A == H``.
        score: ``"dot"``, ``"general"`` or ``"concat"`` (in the paper's comparison ``dot`` worked
            best with global attention, ``general`` with local attention, and ``concat`` was weaker).
        input_feeding: feed ``h̃_{t-1}`` into the GRU at step ``t``.
        local_window: ``None`` for global attention, or ``D`` (a positive int) for local-p.
        pad_id: padding id of the target vocabulary (its embedding is kept at zero).

    Attributes:
        attention: the :class:`~attnbook.attention.LuongAttention` (``query_dim=H``, ``key_dim=A``).
        position: the :class:`~attnbook.attention.PredictivePosition` (local-p), else ``None``.
        init: ``W_init``; W_c: ``nn.Linear(A + H, H, bias=False)``;
        rnn: an ``nn.GRU`` without input feeding (it runs over the whole target in one call), an
        ``nn.GRUCell`` with input feeding (one step at a time, like :class:`BahdanauDecoder`'s);
        out: ``W_s``, ``nn.Linear(H, V)``.

    Shapes:
        start(annotations ``(B, S, A)``, context ``(B, A)``, src_mask ``(B, S)``) -> :class:`LuongState`
        forward(tgt_in ``(B, T)`` long, annotations ``(B, S, A)``, hidden ``(B, H)``, src_mask ``(B, S)``)
        -> (logits ``(B, T, V)``, weights ``(B, T, S)``, positions ``(B, T)`` or None)
        step(state, prev ``(B,)`` long) -> (logits ``(B, V)``, state, weights ``(B, S)``)
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_size: int,
        annotation_size: int,
        score: str = "general",
        input_feeding: bool = True,
        local_window: int | None = None,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        _check_positive(vocab_size=vocab_size, embed_dim=embed_dim, hidden_size=hidden_size,
                        annotation_size=annotation_size)
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id={pad_id} is not an id of a vocabulary of size {vocab_size}")
        if score not in LUONG_SCORES:
            raise ValueError(f"unknown score {score!r}; choose one of 'dot', 'general', 'concat'")
        if score == "dot" and annotation_size != hidden_size:
            raise ValueError(
                f"score='dot' compares h_t with each annotation directly, so annotation_size must equal "
                f"hidden_size, got annotation_size={annotation_size} and hidden_size={hidden_size}; use "
                "score='general', or an encoder whose outputs have the decoder's size "
                "(LuongSeq2Seq.build does that)")
        if local_window is not None:
            _check_positive(local_window=local_window)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.annotation_size = annotation_size
        self.score = score
        self.input_feeding = bool(input_feeding)
        self.local_window = local_window
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.attention = LuongAttention(score, query_dim=hidden_size, key_dim=annotation_size)
        self.position = PredictivePosition(hidden_size) if local_window is not None else None
        self.init = nn.Linear(annotation_size, hidden_size)  # W_init
        rnn_input = embed_dim + hidden_size if self.input_feeding else embed_dim  # [E y; h̃] or E y
        if self.input_feeding:
            self.rnn = nn.GRUCell(rnn_input, hidden_size)  # stepped: x_t needs h̃_{t-1}
        else:
            self.rnn = nn.GRU(rnn_input, hidden_size, batch_first=True)  # all steps in one call
        self.W_c = nn.Linear(annotation_size + hidden_size, hidden_size, bias=False)
        self.out = nn.Linear(hidden_size, vocab_size)  # W_s

    def init_state(self, context: Tensor) -> Tensor:
        """``h_0 = tanh(W_init c)`` from the encoder's context vector.

        Shapes:
            context ``(B, A)`` -> ``(B, H)``
        """
        if context.dim() != 2 or context.size(1) != self.annotation_size:
            raise ValueError(f"context must have shape (B, {self.annotation_size}), got {tuple(context.shape)}")
        return torch.tanh(self.init(context))

    def start(self, annotations: Tensor, context: Tensor, src_mask: Tensor) -> LuongState:
        """The state before the first step: projected keys once per sentence, ``h_0``, ``h̃_0 = 0``.

        Shapes:
            annotations ``(B, S, A)``, context ``(B, A)``, src_mask ``(B, S)`` bool -> :class:`LuongState`
        """
        hidden = self.init_state(context)  # (B, H)
        self._check_annotations(annotations, hidden, src_mask, batch=hidden.size(0))
        attentional = hidden.new_zeros(hidden.shape) if self.input_feeding else None  # h̃_0 = 0, (B, H)
        return LuongState(annotations, self.attention.project_keys(annotations), src_mask, hidden,
                          attentional, position=None)

    def forward(self, tgt_in: Tensor, annotations: Tensor, hidden: Tensor,
                src_mask: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """Teacher forcing: all ``T`` steps, feeding the true previous tokens.

        Without input feeding this is the fast path: one ``nn.GRU`` call over the whole
        target, then one batched attention for all ``T`` states. With input feeding, step
        ``t`` needs ``h̃_{t-1}``, so it is a loop over the steps.

        Shapes:
            tgt_in ``(B, T)`` long ``[bos, y_1 .. y_{T-1}]``; annotations ``(B, S, A)``;
            hidden ``(B, H)`` = ``h_0``; src_mask ``(B, S)`` bool.
            returns: logits ``(B, T, V)``, weights ``(B, T, S)`` and, for local-p, the window
            centres ``p_t`` ``(B, T)`` (``None`` for global attention).
        """
        _check_token_ids("tgt_in", tgt_in)
        self._check_annotations(annotations, hidden, src_mask, batch=tgt_in.size(0))
        embedded = self.embedding(tgt_in)  # (B, T, E)
        keys = self.attention.project_keys(annotations)  # (B, S, k), once per sentence
        if not self.input_feeding:
            states, _ = self.rnn(embedded, hidden.unsqueeze(0))  # all T states h_t at once: (B, T, H)
            attentional, weights, positions = self._attend(states, annotations, keys, src_mask)
            return self.out(attentional), weights, positions  # (B, T, H) -> (B, T, V)
        attentional = hidden.new_zeros(hidden.shape)  # h̃_0 = 0, (B, H)
        outputs, weights, positions = [], [], []
        for embedded_prev in embedded.unbind(dim=1):  # T x (B, E): the input y_{t-1} of step t
            hidden = self._recur(embedded_prev, hidden, attentional)
            attentional, alpha, position = self._attend(hidden, annotations, keys, src_mask)
            outputs.append(attentional)
            weights.append(alpha)
            positions.append(position)
        logits = self.out(torch.stack(outputs, dim=1))  # T x (B, H) -> (B, T, H) -> (B, T, V)
        positions = torch.stack(positions, dim=1) if self.local_window is not None else None  # (B, T)
        return logits, torch.stack(weights, dim=1), positions  # weights: T x (B, S) -> (B, T, S)

    def step(self, state: LuongState, prev: Tensor) -> tuple[Tensor, LuongState, Tensor]:
        """One decoding step from the previous token ``y_{t-1}``.

        Shapes:
            prev ``(B,)`` long -> (logits ``(B, V)``, the new state, weights ``a_t`` ``(B, S)``);
            the new state holds ``h_t``, ``h̃_t`` (with input feeding) and ``p_t`` (local-p).
        """
        _check_token_ids("prev", prev, ndim=1)
        embedded = self.embedding(prev)  # (B, E)
        hidden = self._recur(embedded, state.hidden, state.attentional)  # (B, H)
        attentional, weights, position = self._attend(hidden, state.annotations, state.keys, state.src_mask)
        logits = self.out(attentional)  # (B, H) -> (B, V)
        new_state = state._replace(hidden=hidden, position=position,
                                   attentional=attentional if self.input_feeding else None)
        return logits, new_state, weights

    def _recur(self, embedded: Tensor, hidden: Tensor, attentional: Tensor | None) -> Tensor:
        """Step 1: ``h_t = GRU(x_t, h_{t-1})``, ``x_t = [E y_{t-1}; h̃_{t-1}]`` with input feeding.

        Shapes:
            embedded ``(B, E)``, hidden ``(B, H)``, attentional ``(B, H)`` or None -> ``(B, H)``
        """
        if self.input_feeding:
            return self.rnn(torch.cat([embedded, attentional], dim=-1), hidden)  # GRUCell: (B, E+H) -> (B, H)
        _, hidden = self.rnn(embedded.unsqueeze(1), hidden.unsqueeze(0))  # nn.GRU, one step: h_n (1, B, H)
        return hidden.squeeze(0)  # (B, H)

    def _attend(self, states: Tensor, annotations: Tensor, keys: Tensor,
                src_mask: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """Steps 2-3 from the current state(s): weights, context, ``h̃ = tanh(W_c [c; h])``.

        Works for one step (``(B, H)``) or all steps at once (``(B, T, H)``).

        Shapes:
            states ``(B, H)`` or ``(B, T, H)`` -> (attentional like ``states``,
            weights ``(B, S)`` or ``(B, T, S)``, positions ``(B,)`` or ``(B, T)`` or None)
        """
        positions = window = None
        if self.local_window is not None:
            lengths = src_mask.sum(dim=-1)  # (B,) real tokens: S in p_t = S · sigmoid(...)
            positions = self.position(states, lengths)  # (B,) or (B, T)
            window = local_p_window(positions, annotations.size(1), self.local_window)  # (B[, T], S)
        context, weights = self.attention(states, annotations, mask=src_mask, projected_keys=keys, window=window)
        attentional = torch.tanh(self.W_c(torch.cat([context, states], dim=-1)))  # [c_t; h_t] (.., A+H) -> (.., H)
        return attentional, weights, positions

    def _check_annotations(self, annotations: Tensor, hidden: Tensor, src_mask: Tensor, batch: int) -> None:
        if annotations.dim() != 3 or annotations.size(-1) != self.annotation_size:
            raise ValueError(f"annotations must have shape (B, S, {self.annotation_size}), "
                             f"got {tuple(annotations.shape)}")
        if annotations.size(0) != batch:
            raise ValueError(f"annotations have batch size {annotations.size(0)} but tgt_in has {batch}")
        if tuple(hidden.shape) != (batch, self.hidden_size):
            raise ValueError(f"hidden must have shape (B, H) = {(batch, self.hidden_size)}, got {tuple(hidden.shape)}")
        if not isinstance(src_mask, Tensor) or src_mask.dtype != torch.bool:
            raise TypeError("src_mask must be a bool tensor (True = real source token); Luong's decoder needs it "
                            "(local-p takes the sentence lengths from it)")
        if tuple(src_mask.shape) != tuple(annotations.shape[:2]):
            raise ValueError(f"src_mask has shape {tuple(src_mask.shape)} but annotations have (B, S) = "
                             f"{tuple(annotations.shape[:2])}")

    def extra_repr(self) -> str:
        local = "global" if self.local_window is None else f"local-p D={self.local_window}"
        return f"score={self.score!r}, input_feeding={self.input_feeding}, attention={local}"


class LuongSeq2Seq(_AttentionSeq2Seq):
    """Bidirectional-GRU encoder + :class:`LuongDecoder`: the chapter 3 model.

    Follows the model protocol of every chapter (``CONTRACT.md``), like
    :class:`BahdanauSeq2Seq`: ``model(src, tgt_in)`` for teacher forcing (``return_weights=True``
    adds the weights ``(B, T, S)``), ``start``/``step`` for decoding one token at a time, and
    ``step`` returns the weights, so ``greedy_decode`` collects them. For local-p,
    ``return_positions=True`` adds the window centres ``p_t`` ``(B, T)``, and the state
    returned by ``step`` holds the latest ``p_t`` (``state.position``), to draw the window on
    a heatmap.

    Args:
        encoder: an :class:`attnbook.rnn.Encoder` (``pack=True``).
        decoder: a :class:`LuongDecoder` with ``annotation_size == encoder.output_size``.
        pad_id: padding id of source and target; source lengths come from ``src != pad_id``.

    Shapes:
        forward(src ``(B, S)`` long, tgt_in ``(B, T)`` long) -> logits ``(B, T, V)``
        [, weights ``(B, T, S)``] [, positions ``(B, T)`` or None]
        start(src ``(B, S)``) -> :class:`LuongState`
        step(state, prev ``(B,)`` long) -> (logits ``(B, V)``, state, weights ``(B, S)``)
    """

    def __init__(self, encoder: Encoder, decoder: LuongDecoder, pad_id: int = 0) -> None:
        super().__init__(encoder, decoder, pad_id)

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
        """Build encoder (packed GRU), decoder and model with matching sizes.

        The decoder state has ``hidden_size`` units. As in the paper, where encoder and
        decoder have the same size (1000), the annotations ``h̄_s`` have the decoder's size
        ``hidden_size``: a bidirectional encoder gets ``hidden_size // 2`` units per direction
        (so ``hidden_size`` must be even), a unidirectional one ``hidden_size``. Then every
        score, ``dot`` included, compares ``h_t`` with ``h̄_s`` directly, and the three scores
        differ only in how they score. (Projecting the annotations to ``H`` for ``dot``
        instead would make it ``general``: ``h_tᵀ (P h̄_s)`` is ``h_tᵀ W_a h̄_s`` with ``W_a = P``.)

        ``encoder_hidden_size`` overrides the units per direction (e.g. ``hidden_size`` to
        match :meth:`BahdanauSeq2Seq.build`'s encoder); ``dot`` then needs
        ``encoder_hidden_size * directions == hidden_size``.
        """
        if encoder_hidden_size is None:
            if bidirectional and hidden_size % 2:
                raise ValueError(f"hidden_size={hidden_size} must be even with a bidirectional encoder: each "
                                 "direction gets hidden_size // 2 units, so that the annotations have the "
                                 "decoder's size (or give encoder_hidden_size)")
            encoder_hidden_size = hidden_size // 2 if bidirectional else hidden_size
        encoder = Encoder(src_vocab_size, embed_dim, encoder_hidden_size, bidirectional, pad_id, pack=True)
        decoder = LuongDecoder(tgt_vocab_size, embed_dim, hidden_size, encoder.output_size, score,
                               input_feeding, local_window, pad_id)
        return cls(encoder, decoder, pad_id)

    def forward(self, src: Tensor, tgt_in: Tensor, return_weights: bool = False,
                return_positions: bool = False) -> Tensor | tuple:
        """Teacher-forced logits, and on request the weights and the local-p window centres.

        Returns ``logits`` alone, or a tuple ``(logits, weights)``, ``(logits, positions)`` or
        ``(logits, weights, positions)``; ``positions`` is ``None`` for global attention.

        Shapes:
            src ``(B, S)`` long, tgt_in ``(B, T)`` long -> logits ``(B, T, V)``
            [, weights ``(B, T, S)``] [, positions ``(B, T)``]
        """
        _check_token_ids("src", src)
        _check_token_ids("tgt_in", tgt_in)
        if src.size(0) != tgt_in.size(0):
            raise ValueError(f"src has batch size {src.size(0)} (shape {tuple(src.shape)}) but tgt_in has "
                             f"{tgt_in.size(0)} (shape {tuple(tgt_in.shape)})")
        annotations, context = self.encode(src)
        hidden = self.decoder.init_state(context)
        logits, weights, positions = self.decoder(tgt_in, annotations, hidden, src != self.pad_id)
        extra = ((weights,) if return_weights else ()) + ((positions,) if return_positions else ())
        return (logits, *extra) if extra else logits

    def start(self, src: Tensor) -> LuongState:
        """Encode once: annotations, their projected keys, the source mask, ``h_0`` (and ``h̃_0 = 0``).

        Shapes:
            src ``(B, S)`` -> LuongState(annotations ``(B, S, A)``, keys ``(B, S, k)``, src_mask ``(B, S)``,
            hidden ``(B, H)``, attentional ``(B, H)`` or None, position None)
        """
        annotations, context = self.encode(src)
        return self.decoder.start(annotations, context, src != self.pad_id)

    def step(self, state: LuongState, prev: Tensor) -> tuple[Tensor, LuongState, Tensor]:
        """One decoding step.

        Shapes:
            prev ``(B,)`` long -> (logits ``(B, V)``, new state, weights ``(B, S)``)
        """
        if not isinstance(state, LuongState):
            raise TypeError(f"state must be the LuongState returned by start or step, got {type(state).__name__}")
        _check_token_ids("prev", prev, ndim=1)
        if prev.size(0) != state.hidden.size(0):
            raise ValueError(f"prev must have shape (B,) = ({state.hidden.size(0)},), one token per source row, "
                             f"got {tuple(prev.shape)}")
        return self.decoder.step(state, prev)
