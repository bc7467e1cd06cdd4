"""attnbook: the shared code of the course "Attention, Step by Step".

Every chapter notebook imports from here; nothing here imports a chapter.
Modules, one concept each (dependencies flow downwards in this list):

- ``attnbook.data``        synthetic tasks, ``Vocab``, padding and batching
- ``attnbook.rnn``         GRU encoder, plain decoder, ``Seq2Seq`` (chapter 1)
- ``attnbook.training``    ``fit``: one training loop for every chapter
- ``attnbook.decoding``    greedy decoding
- ``attnbook.metrics``     exact match, token accuracy, accuracy by length
- ``attnbook.plot``        attention heatmaps and training curves
- ``attnbook.exercises``   checkers for the chapters' code exercises
"""

from attnbook._setup import setup

__all__ = ["setup"]
__version__ = "0.1.0"
