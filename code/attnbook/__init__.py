"""attnbook: the shared code of the course "Attention, Step by Step".

Every chapter notebook imports from here; nothing here imports a chapter.
Modules, one concept each (dependencies flow downwards in this list):

- ``attnbook.data``        synthetic tasks, ``Vocab``, padding and batching
- ``attnbook.protocol``    the model protocol every sequence-to-sequence model implements
- ``attnbook.attention``   ``masked_softmax``, ``AdditiveAttention`` (chapter 2), Luong's scores,
                           ``LuongAttention`` and local-p attention (chapter 3); later chapters add more
- ``attnbook.rnn``         GRU encoder, the base of the RNN models, Chapter 1's ``Seq2Seq``
- ``attnbook.bahdanau``    ``BahdanauDecoder``, ``BahdanauSeq2Seq`` (chapter 2)
- ``attnbook.luong``       ``LuongDecoder``, ``InputFeedingDecoder``, ``LuongSeq2Seq`` (chapter 3)
- ``attnbook.decoding``    greedy decoding, beam search, ``translate``
- ``attnbook.metrics``     exact match, token accuracy of decoded outputs, accuracy by length
- ``attnbook.training``    ``fit`` and ``evaluate`` for every chapter, the warm-up schedule
- ``attnbook.plot``        attention heatmaps and training curves
- ``attnbook.experiments`` experiments several chapters repeat (accuracy by length)
- ``attnbook.exercises``   checkers for the chapters' code exercises (one module per chapter)

Input validation lives in one private module, ``attnbook._checks``.
"""
from attnbook._setup import setup

__all__ = ["setup"]
__version__ = "0.1.0"
