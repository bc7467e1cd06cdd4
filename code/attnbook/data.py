"""Examples, vocabularies, padding and batching.

An :class:`Example` is a pair of strings; a :class:`Vocab` turns the characters of a string into
integer ids and back; :func:`make_batch` and :class:`Batches` pad a list of examples into tensors.
The tasks that make the examples are in :mod:`attnbook.tasks`.
"""

import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from attnbook import _checks as checks

__all__ = [
    "Example",
    "Splits",
    "Vocab",
    "build_vocabs",
    "Batch",
    "make_batch",
    "Batches",
]


# --------------------------------------------------------------------------------------
# Examples and splits
# --------------------------------------------------------------------------------------


class Example(NamedTuple):
    """One training pair of a character-level task.

    Args:
        source: the input string, e.g. ``"sat 3 march 1984"``.
        target: the string the model should produce, e.g. ``"1984-03-03"``.
    """

    source: str
    target: str


class Splits(NamedTuple):
    """Training, validation and test examples of one task.

    Args:
        train: examples to learn from.
        valid: examples to choose settings and stop training with.
        test: examples to report results on, touched once at the end.
    """

    train: list[Example]
    valid: list[Example]
    test: list[Example]


# --------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------


class Vocab:
    """A mapping between symbols (here: characters) and integer ids.

    The first four ids are the special tokens every vocabulary of the course shares:
    ``0 = "<pad>"`` (padding), ``1 = "<bos>"`` (begin of sequence), ``2 = "<eos>"``
    (end of sequence) and ``3 = "<unk>"`` (unknown). The given symbols follow, in the
    order given, from id 4 on.

    Args:
        symbols: the symbols of the vocabulary, each a non-empty string, no repeats and
            none equal to a special token's name.
        name: what the vocabulary is for (``"source"`` or ``"target"``); error
            messages use it.
        allow_unk: if ``False`` (default), encoding an unknown symbol raises a
            ``ValueError``; if ``True``, it is encoded as ``unk_id``.

    Raises:
        ValueError: if a symbol is repeated, empty, not a string, or a special name.

    Example:
        >>> v = Vocab("abc")
        >>> v.encode("cab", add_eos=True)
        [6, 4, 5, 2]
        >>> v.decode([6, 4, 5, 2, 0, 0])
        'cab'
    """

    pad_id = 0
    bos_id = 1
    eos_id = 2
    unk_id = 3
    SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")

    def __init__(self, symbols: Iterable[str], name: str = "source", allow_unk: bool = False):
        self.name = name
        self.allow_unk = allow_unk
        self.symbols: tuple[str, ...] = tuple(symbols)
        self._check_symbols()
        self.id_to_symbol: list[str] = [*self.SPECIALS, *self.symbols]
        self.symbol_to_id: dict[str, int] = {s: i for i, s in enumerate(self.id_to_symbol)}

    def _check_symbols(self) -> None:
        seen = set()
        for symbol in self.symbols:
            if not isinstance(symbol, str) or symbol == "":
                raise ValueError(f"symbols of the {self.name} vocabulary must be non-empty strings, got {symbol!r}")
            if symbol in self.SPECIALS:
                specials = ", ".join(repr(s) for s in self.SPECIALS)
                raise ValueError(
                    f"symbol {symbol!r} of the {self.name} vocabulary is the name of a "
                    f"special token; the specials are {specials}"
                )
            if symbol in seen:
                raise ValueError(f"symbol {symbol!r} appears twice in the {self.name} vocabulary")
            seen.add(symbol)

    @classmethod
    def from_texts(cls, texts: Iterable[str], name: str = "source", allow_unk: bool = False) -> "Vocab":
        """Build a vocabulary of every character appearing in ``texts``, sorted.

        Args:
            texts: the strings to collect characters from.
            name: what the vocabulary is for (``"source"`` or ``"target"``).
            allow_unk: whether unknown characters encode to ``unk_id`` (see the class).

        Returns:
            A ``Vocab`` whose symbols are the distinct characters, in sorted order.
        """
        characters = set()
        for text in texts:
            characters.update(text)
        return cls(sorted(characters), name=name, allow_unk=allow_unk)

    def __len__(self) -> int:
        """Number of ids: the 4 specials plus the symbols."""
        return len(self.id_to_symbol)

    def __contains__(self, symbol: str) -> bool:
        return symbol in self.symbol_to_id

    def __repr__(self) -> str:
        return f"Vocab(name={self.name!r}, size={len(self)}, symbols={''.join(self.symbols)!r})"

    def encode(self, text: str | Sequence[str], add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Turn a string (one symbol per character) or a list of symbols into ids.

        Args:
            text: a string, or a sequence of symbols.
            add_bos: put ``bos_id`` in front.
            add_eos: put ``eos_id`` at the end.

        Returns:
            A list of ``len(text)`` ids, plus one for each of ``add_bos``/``add_eos``.

        Raises:
            ValueError: for a symbol not in the vocabulary when ``allow_unk`` is False,
                e.g. ``unknown character 'ß' in source; vocabulary has 'a', 'b', ...``.
        """
        ids = [self._symbol_id(symbol) for symbol in text]
        if add_bos:
            ids = [self.bos_id, *ids]
        if add_eos:
            ids = [*ids, self.eos_id]
        return ids

    def _symbol_id(self, symbol: str) -> int:
        if symbol in self.symbol_to_id:
            return self.symbol_to_id[symbol]
        if self.allow_unk:
            return self.unk_id
        raise ValueError(f"unknown character {symbol!r} in {self.name}; vocabulary has {self._symbol_list()}")

    def _symbol_list(self, limit: int = 40) -> str:
        """The symbols as ``'a', 'b', 'c'``; after ``limit`` of them, ``... and N more``."""
        shown = ", ".join(repr(s) for s in self.symbols[:limit])
        hidden = len(self.symbols) - limit
        if hidden > 0:
            return f"{shown}, ... and {hidden} more"
        return shown or "no symbols"

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """Turn ids back into a string: the inverse of :meth:`encode`.

        Padding and ``<bos>`` are skipped, decoding stops at the first ``<eos>``, and
        ``<unk>`` is shown as ``"<unk>"`` (so a prediction with an unknown token can
        never look equal to a correct one).

        Args:
            ids: a list of ids or a 1-D integer tensor.

        Returns:
            The symbols joined into one string.

        Raises:
            ValueError: if an id is outside ``0 .. len(self) - 1`` or a tensor is not 1-D.

        Shapes:
            ids: ``(T,)``
        """
        pieces = []
        for token_id in self._as_id_list(ids):
            if token_id == self.eos_id:
                break
            if token_id in (self.pad_id, self.bos_id):
                continue
            pieces.append(self.id_to_symbol[token_id])
        return "".join(pieces)

    def tokens(self, ids: Sequence[int] | torch.Tensor) -> list[str]:
        """The symbol of every id, specials included (as ``"<pad>"``, ``"<eos>"`` ...).

        Useful for labelling the axes of an attention heatmap.

        Args:
            ids: a list of ids or a 1-D integer tensor.

        Returns:
            One string per id, nothing skipped.

        Shapes:
            ids: ``(T,)``
        """
        return [self.id_to_symbol[token_id] for token_id in self._as_id_list(ids)]

    def _as_id_list(self, ids: Sequence[int] | torch.Tensor) -> list[int]:
        """Check ``ids`` and return them as a list of Python ints."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"{self.name} vocabulary decodes one sequence at a time: expected a 1-D "
                    f"tensor of ids, got shape {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        id_list = [int(token_id) for token_id in ids]
        for token_id in id_list:
            if not 0 <= token_id < len(self):
                raise ValueError(
                    f"id {token_id} is out of range for the {self.name} vocabulary of size "
                    f"{len(self)} (valid ids are 0..{len(self) - 1})"
                )
        return id_list


def build_vocabs(examples: Iterable[Example]) -> tuple[Vocab, Vocab]:
    """Build the source and target vocabularies of a task from its examples.

    Pass the training examples (or all of them): every character that appears gets an
    id, in sorted order, after the 4 special ids.

    Args:
        examples: the examples whose characters the vocabularies must cover.

    Returns:
        ``(source_vocab, target_vocab)``, named ``"source"`` and ``"target"``.
    """
    examples = list(examples)
    source_vocab = Vocab.from_texts((ex.source for ex in examples), name="source")
    target_vocab = Vocab.from_texts((ex.target for ex in examples), name="target")
    return source_vocab, target_vocab


# --------------------------------------------------------------------------------------
# Padding and batching
# --------------------------------------------------------------------------------------


@dataclass(eq=False, repr=False)
class Batch:
    """A padded batch of examples, ready for a seq2seq model.

    The decoder is trained with *teacher forcing*: it reads ``tgt_in`` (the target
    shifted right behind ``<bos>``) and must predict ``tgt_out`` (the target followed by
    ``<eos>``), so ``tgt_out[:, t]`` is the token that comes after ``tgt_in[:, t]``.
    The source has no ``<bos>``/``<eos>``.

    For a target ``"ab"``: ``tgt_in = [<bos>, a, b]`` and ``tgt_out = [a, b, <eos>]``.
    The masks and lengths are read off the padding (``Vocab.pad_id``), the one source of them,
    as the models do.

    Shapes:
        src: ``(B, S)`` long, padded with ``pad_id``; S is the longest source.
        tgt_in: ``(B, T)`` long, ``[bos, y1 .. yn]`` padded; T is the longest target + 1.
        tgt_out: ``(B, T)`` long, ``[y1 .. yn, eos]`` padded.
        examples: the ``B`` examples, in batch order.
        src_mask: ``(B, S)`` bool, True at real tokens; src_lengths: ``(B,)`` long, their count.
        tgt_mask: ``(B, T)`` bool, True at real positions of ``tgt_out`` (and so of ``tgt_in``).
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    examples: list[Example]

    @property
    def src_mask(self) -> torch.Tensor:
        return self.src != Vocab.pad_id  # (B, S)

    @property
    def src_lengths(self) -> torch.Tensor:
        return self.src_mask.sum(dim=1)  # (B,)

    @property
    def tgt_mask(self) -> torch.Tensor:
        return self.tgt_out != Vocab.pad_id  # (B, T)

    def __len__(self) -> int:
        """The batch size B."""
        return len(self.examples)

    def to(self, device) -> "Batch":
        """The same batch with its tensors on ``device`` (e.g. a model's, for a GPU)."""
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device), self.examples)

    def __repr__(self) -> str:
        return (
            f"Batch(size={len(self)}, src={tuple(self.src.shape)}, "
            f"tgt_in={tuple(self.tgt_in.shape)}, tgt_out={tuple(self.tgt_out.shape)})"
        )


def _pad(sequences: list[list[int]], pad_id: int) -> torch.Tensor:
    """Stack lists of ids of different lengths into one tensor, padded on the right.

    Shapes:
        returns: ``(len(sequences), longest sequence)`` long.
    """
    width = max(len(seq) for seq in sequences)
    rows = [seq + [pad_id] * (width - len(seq)) for seq in sequences]
    return torch.tensor(rows, dtype=torch.long)  # (B, width)


def make_batch(examples: Sequence[Example], src_vocab: Vocab, tgt_vocab: Vocab) -> Batch:
    """Encode and pad a list of examples into one :class:`Batch`.

    Args:
        examples: the examples of the batch (at least one; every source non-empty).
        src_vocab: vocabulary of the sources.
        tgt_vocab: vocabulary of the targets.

    Returns:
        The padded batch (see :class:`Batch` for what each tensor holds).

    Raises:
        ValueError: for an empty list, an empty source, or an unknown character.

    Shapes:
        With B = ``len(examples)``, S = longest source, T = longest target + 1:
        ``src, src_mask (B, S)``, ``src_lengths (B,)``, ``tgt_in, tgt_out, tgt_mask (B, T)``.
    """
    examples = list(examples)
    if not examples:
        raise ValueError("make_batch needs at least one example, got an empty list")
    for index, example in enumerate(examples):
        if len(example.source) == 0:
            raise ValueError(
                f"example {index} has an empty source (target {example.target!r}); "
                "every source needs at least one character"
            )

    sources = [src_vocab.encode(ex.source) for ex in examples]
    targets_in = [tgt_vocab.encode(ex.target, add_bos=True) for ex in examples]
    targets_out = [tgt_vocab.encode(ex.target, add_eos=True) for ex in examples]

    src = _pad(sources, src_vocab.pad_id)  # (B, S)
    tgt_in = _pad(targets_in, tgt_vocab.pad_id)  # (B, T)
    tgt_out = _pad(targets_out, tgt_vocab.pad_id)  # (B, T)
    return Batch(src=src, tgt_in=tgt_in, tgt_out=tgt_out, examples=examples)


class Batches:
    """The batches of a list of examples, for one training loop.

    Iterate over it once per epoch. With ``shuffle=True`` every new iteration uses a
    new order, yet the same on every run: epoch ``k`` (counting from 0) shuffles with
    ``random.Random(seed * 2**64 + k)``. With ``shuffle=False`` the examples keep their order.
    Each epoch yields every example exactly once; the last batch may be smaller.

    Args:
        examples: the examples to batch (at least one).
        src_vocab: vocabulary of the sources.
        tgt_vocab: vocabulary of the targets.
        batch_size: number of examples per batch (>= 1).
        shuffle: reshuffle the examples at the start of each epoch.
        seed: names the stream of shuffles (>= 0): epoch k shuffles with
            ``random.Random(seed * 2**64 + k)``, so no two seeds share an epoch's order.

    Raises:
        ValueError: if ``examples`` is empty or ``batch_size`` is not an int >= 1.

    Shapes:
        Each item is a :class:`Batch` with B = ``batch_size`` (the last may be smaller).
    """

    def __init__(
        self,
        examples: Sequence[Example],
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
    ):
        checks.positive_int(batch_size=batch_size)
        checks.non_negative_int(seed=seed)
        self.examples = list(examples)
        if not self.examples:
            raise ValueError("Batches needs at least one example, got an empty list")
        self.src_vocab = src_vocab
        self.tgt_vocab = tgt_vocab
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0  # how many iterations have started

    def __len__(self) -> int:
        """Number of batches per epoch."""
        return math.ceil(len(self.examples) / self.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        order = list(range(len(self.examples)))
        if self.shuffle:
            # not seed + epoch, which made seed s's epoch k+1 seed s+1's epoch k; and not
            # seed * 2**32 + epoch, whose Mersenne-Twister key [k, s] seeds as [k] when s = k - 1
            random.Random(self.seed * 2**64 + self.epoch).shuffle(order)
        self.epoch += 1
        return self._batches_in_order(order)

    def _batches_in_order(self, order: list[int]) -> Iterator[Batch]:
        for start in range(0, len(order), self.batch_size):
            chunk = [self.examples[i] for i in order[start : start + self.batch_size]]
            yield make_batch(chunk, self.src_vocab, self.tgt_vocab)

    def __repr__(self) -> str:
        return (
            f"Batches({len(self.examples)} examples, batch_size={self.batch_size}, "
            f"{len(self)} batches, shuffle={self.shuffle})"
        )
