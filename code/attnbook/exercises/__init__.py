"""Checkers for the chapters' code exercises.

Each ``check_<name>(fn)`` calls your function on several small cases, compares the
answers with a reference and prints either

    ✓ <what was checked>: all N cases passed (...).

or a ``✗`` message saying what went wrong, a hint, and the inputs of the failing case.
It returns True or False and never raises, whatever your function does (you can stop a
function that hangs with the notebook's stop button: that interrupt is let through).

One module per chapter; import every checker from here, e.g.
``from attnbook.exercises import check_masked_softmax``.

- Chapter 1 (RNN encoder–decoder, :mod:`attnbook.exercises.seq2seq`):
  :func:`check_teacher_forcing_inputs`, :func:`check_masked_loss`, :func:`check_greedy_decode`.
- Chapter 2 (Bahdanau attention, :mod:`attnbook.exercises.bahdanau`):
  :func:`check_masked_softmax`, :func:`check_additive_attention`,
  :func:`check_bahdanau_step`.
- Chapter 3 (Luong attention, :mod:`attnbook.exercises.luong`):
  :func:`check_luong_general_score`, :func:`check_luong_step`, :func:`check_local_p_window`.
- Chapter 4 (self-attention, :mod:`attnbook.exercises.self_attention`):
  :func:`check_window_average`, :func:`check_scaled_dot_product_attention`.
- Chapter 5 (multi-head attention, :mod:`attnbook.exercises.multi_head`):
  :func:`check_split_heads`, :func:`check_merge_heads`.
- Chapter 6 (the Transformer, :mod:`attnbook.exercises.transformer`):
  :func:`check_positional_encoding`, :func:`check_causal_mask`,
  :func:`check_smoothing_over_others`, :func:`check_keep_best`.
- Chapter 7 (beyond 2017, :mod:`attnbook.exercises.beyond`):
  :func:`check_mask_tokens`, :func:`check_running_softmax`.
- Chapter 8 (today's decoder block, :mod:`attnbook.exercises.modern`):
  :func:`check_apply_rope`, :func:`check_rms_norm`, :func:`check_expand_kv_heads`,
  :func:`check_grouped_attention`.
"""

from attnbook.exercises.bahdanau import check_additive_attention, check_bahdanau_step, check_masked_softmax
from attnbook.exercises.beyond import check_mask_tokens, check_running_softmax
from attnbook.exercises.luong import check_local_p_window, check_luong_general_score, check_luong_step
from attnbook.exercises.modern import check_apply_rope, check_expand_kv_heads, check_grouped_attention, check_rms_norm
from attnbook.exercises.multi_head import check_merge_heads, check_split_heads
from attnbook.exercises.self_attention import check_scaled_dot_product_attention, check_window_average
from attnbook.exercises.seq2seq import check_greedy_decode, check_masked_loss, check_teacher_forcing_inputs
from attnbook.exercises.transformer import (
    check_causal_mask,
    check_keep_best,
    check_positional_encoding,
    check_smoothing_over_others,
)

__all__ = [
    "check_teacher_forcing_inputs",
    "check_masked_loss",
    "check_greedy_decode",
    "check_masked_softmax",
    "check_additive_attention",
    "check_bahdanau_step",
    "check_luong_general_score",
    "check_luong_step",
    "check_local_p_window",
    "check_window_average",
    "check_scaled_dot_product_attention",
    "check_split_heads",
    "check_merge_heads",
    "check_positional_encoding",
    "check_causal_mask",
    "check_smoothing_over_others",
    "check_keep_best",
    "check_mask_tokens",
    "check_running_softmax",
    "check_apply_rope",
    "check_rms_norm",
    "check_expand_kv_heads",
    "check_grouped_attention",
]
