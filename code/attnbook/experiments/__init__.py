"""Experiments the chapters interpret, defined once; one module per chapter or shared task.

- :mod:`~attnbook.experiments.lengths`: accuracy against input length (Chapters 1, 2, 6) and
  the encoder's context vectors (Chapter 1).
- :mod:`~attnbook.experiments.bottleneck`: Chapter 1's short reversal (as written, reversed,
  twice the state, four times the strings), recorded as ``bottleneck``.
- :mod:`~attnbook.experiments.translation`: Chapter 3's attention decoders on the toy
  translation task, recorded as ``luong_scores``.

Every module here that registers an experiment (:func:`attnbook.records.register`) is imported
with this package, so ``./course experiments`` and the replay test see them all.
"""

import importlib
import pkgutil

from attnbook.experiments.lengths import (
    REVERSAL_BENCHMARK,
    LengthResult,
    context_vectors,
    evaluate_by_length,
    length_experiment,
    symbol_accuracy_by_length,
    symbol_accuracy_by_position,
)
from attnbook.experiments.translation import (
    CONTROL_ARMS,
    TRANSLATION_ARMS,
    TranslationRun,
    alignment_letters,
    alignment_measures,
    translation_data,
    translation_model,
    translation_run,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "REVERSAL_BENCHMARK",
    "LengthResult",
    "length_experiment",
    "evaluate_by_length",
    "symbol_accuracy_by_length",
    "symbol_accuracy_by_position",
    "context_vectors",
    "TRANSLATION_ARMS",
    "CONTROL_ARMS",
    "TranslationRun",
    "translation_data",
    "translation_model",
    "translation_run",
    "alignment_letters",
    "alignment_measures",
]
