"""attnbook: the shared code of the course "Attention, Step by Step".

Every chapter notebook imports from here; nothing here imports a chapter.
Modules, one concept each (dependencies flow downwards in this list):

- ``attnbook.data``        ``Example``, ``Vocab``, padding and batching
- ``attnbook.tasks``       the synthetic tasks: dates, reversal and copy, word sentences, a toy translation
- ``attnbook.protocol``    the model protocol every sequence-to-sequence model implements
- ``attnbook.attention``   ``masked_softmax``, ``AdditiveAttention`` (chapter 2), Luong's scores,
                           ``LuongAttention`` and local-p attention (chapter 3); later chapters add more
- ``attnbook.numpy_attention`` NumPy references: softmax, attention, the running softmax (chapters 4-5, 7)
- ``attnbook.rnn``         GRU encoder, the base of the RNN models, Chapter 1's ``Seq2Seq``
- ``attnbook.bahdanau``    ``BahdanauDecoder``, ``BahdanauSeq2Seq`` (chapter 2)
- ``attnbook.luong``       ``LuongDecoder``, ``InputFeedingDecoder``, ``LuongSeq2Seq`` (chapter 3)
- ``attnbook.transformer``  positions, masks, the layers and the ``Transformer`` (chapter 6)
- ``attnbook.language_models`` encoder-only and decoder-only stacks, BERT's masking, sampling and
                           generation with a key/value cache (chapter 7)
- ``attnbook.modern``      today's decoder block: RMSNorm, rotary positions, SwiGLU, grouped-query
                           attention, sliding windows, ``ModernDecoder`` (chapter 8)
- ``attnbook.decoding``    greedy decoding, beam search, ``translate``
- ``attnbook.metrics``     exact match, token accuracy of decoded outputs, accuracy by length
- ``attnbook.training``    ``fit`` and ``evaluate`` for every chapter, the warm-up schedule
- ``attnbook.plot``        attention heatmaps, training curves, the interactive attention explorer
                           (its script and style are in ``attnbook/static``)
- ``attnbook.cost``        time, peak memory and growth rate of a computation; benchmark records
- ``attnbook.compare``     the comparison rule: mean, sd, 95 % intervals, paired differences by seed
- ``attnbook.records``     recorded experiments: run over many seeds, stored as JSON, replayed by the tests
- ``attnbook.experiments`` the experiments the chapters interpret, one module per chapter or task
- ``attnbook.exercises``   checkers for the chapters' code exercises (one module per chapter)
- ``attnbook.notebook``    ``run_chapter``: an evidence page runs its chapter's code first

Input validation lives in one private module, ``attnbook._checks``.

Importing ``attnbook`` pins torch's CPU kernels to one code path (AVX2 on x86-64, unless the
variables below are already set), so that the same seed trains to the same numbers on machines
with the same CPU. Across CPU vendors the numbers still differ in late digits (and, after
training, by up to a few points): a record replays exactly only on the CPU its provenance names
(``records.numerics``). It acts only if no torch computation ran before the import (torch reads
the settings on first use).
"""

import os as _os
import platform as _platform

#: The settings ``import attnbook`` makes (x86-64 only): MKL's conditional numerical
#: reproducibility, ATen's vectorised kernels and oneDNN, all on their AVX2 code path.
CPU_PINNING = {"MKL_CBWR": "AVX2,STRICT", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
if _platform.machine().lower() in ("x86_64", "amd64"):
    for _name, _value in CPU_PINNING.items():
        _os.environ.setdefault(_name, _value)

from attnbook._setup import setup  # noqa: E402

__all__ = ["setup"]
__version__ = "0.1.0"
