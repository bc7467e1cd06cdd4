"""attnbook: the shared code of the course "Attention, Step by Step".

Every chapter notebook imports from here; nothing here imports a chapter.
Modules, one concept each (dependencies flow downwards in this list):

- ``attnbook.data``        synthetic tasks, ``Vocab``, padding and batching
- ``attnbook.attention``   ``masked_softmax``, ``AdditiveAttention`` (chapter 2), ``LuongAttention``,
                           local-p windows (chapter 3); later chapters add more
- ``attnbook.rnn``         GRU encoder, plain decoder, ``Seq2Seq`` (chapter 1)
- ``attnbook.decoders``    attention decoders: ``BahdanauSeq2Seq`` (chapter 2), ``LuongSeq2Seq`` (chapter 3)
- ``attnbook.training``    ``fit``: one training loop for every chapter
- ``attnbook.decoding``    greedy decoding
- ``attnbook.metrics``     exact match, token accuracy, accuracy by length
- ``attnbook.plot``        attention heatmaps and training curves
- ``attnbook.experiments``  experiments several chapters repeat (accuracy by length)
- ``attnbook.exercises``   checkers for the chapters' code exercises (one module per chapter)
"""

from attnbook._setup import setup

__all__ = ["setup"]
__version__ = "0.1.0"
