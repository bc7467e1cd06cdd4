"""The synthetic tasks every chapter trains on, made from explicit seeds, with no downloads.

- **Date normalisation**: ``"sat 3 march 1984"``, ``"03/03/84"``, ``"March 3, 1984"``
  ... -> ``"1984-03-03"`` (:func:`date_task`, :func:`date_splits`).
- **Reversal** and **copy** of random letter strings of controllable length
  (:func:`reversal_task`, :func:`copy_task`, :func:`sequence_splits`).
- **Word-level sentences** for self-attention (Chapter 4): "bat" in two senses
  (:func:`sense_task`) and what "it" refers to (:func:`referent_task`).
- **A toy translation** with word reordering (Chapter 3): "big dog sees cat" -> "kav gro mir vid",
  adjectives after their nouns and the verb last (:func:`translation_task`).

Each returns :class:`~attnbook.data.Example` pairs of strings (character level). Randomness
always comes from a ``random.Random(seed)`` made for the call, never from the global random
state, so the same seed gives the same data on every machine.
"""

import datetime
import random
import string
from collections.abc import Callable, Iterable, Sequence

from attnbook import _checks as checks
from attnbook.data import Example, Splits

__all__ = [
    "FIRST_DATE",
    "LAST_DATE",
    "MONTH_NAMES",
    "WEEKDAY_NAMES",
    "DATE_FORMATS",
    "date_fields",
    "DATE_PARTS",
    "date_part_spans",
    "format_date",
    "date_task",
    "date_splits",
    "DEFAULT_ALPHABET",
    "reversal_task",
    "copy_task",
    "sequence_splits",
    "reverse_sources",
    "BAT_CONTEXT",
    "NEUTRAL_WORDS",
    "sense_task",
    "ANIMALS",
    "PLACES",
    "ANIMAL_ADJECTIVES",
    "PLACE_ADJECTIVES",
    "referent_task",
    "TRANSLATION_WORDS",
    "translation_task",
    "translation_alignment",
    "referent_sentences",
]


# --------------------------------------------------------------------------------------
# Task 1: date normalisation
# --------------------------------------------------------------------------------------

#: The first and last date the date task draws from. With this range a two-digit year
#: is unambiguous: 50..99 means 1950..1999 and 00..49 means 2000..2049.
FIRST_DATE = datetime.date(1950, 1, 1)
LAST_DATE = datetime.date(2049, 12, 31)

#: English names, written here so the task never depends on the machine's locale.
MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

#: The human-readable formats of the date task: name -> template. The fields in braces
#: are filled in by :func:`date_fields`. Numeric formats are always day before month
#: (or year first), so every string means exactly one date. Examples are for 1984-03-03.
DATE_FORMATS = {
    "wkd_d_month_yyyy": "{wkd} {d} {month} {yyyy}",  # sat 3 march 1984
    "dd/mm/yy": "{dd}/{mm}/{yy}",  # 03/03/84
    "Month_d_yyyy": "{Month} {d}, {yyyy}",  # March 3, 1984
    "d_Mon_yyyy": "{d} {Mon} {yyyy}",  # 3 Mar 1984
    "yyyy.mm.dd": "{yyyy}.{mm}.{dd}",  # 1984.03.03
    "weekday_month_d_yyyy": "{weekday}, {month} {d}, {yyyy}",  # saturday, march 3, 1984
    "d.m.yy": "{d}.{m}.{yy}",  # 3.3.84
    "mon_d_yy": "{mon} {d} {yy}",  # mar 3 84
    "dd/mm/yyyy": "{dd}/{mm}/{yyyy}",  # 03/03/1984
    "the_dth_of_month_yyyy": "the {dth} of {month} {yyyy}",  # the 3rd of march 1984
    "dd-MON-yyyy": "{dd}-{MON}-{yyyy}",  # 03-MAR-1984
    "Weekday_Month_dth_yyyy": "{Weekday}, {Month} {dth} {yyyy}",  # Saturday, March 3rd 1984
}


def _ordinal(day: int) -> str:
    """``1 -> "1st"``, ``2 -> "2nd"``, ``3 -> "3rd"``, ``11 -> "11th"``, ``22 -> "22nd"``."""
    if day in (11, 12, 13):
        return f"{day}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def date_fields(date: datetime.date) -> dict[str, str]:
    """The pieces of a date that the templates of :data:`DATE_FORMATS` use.

    Args:
        date: the date to describe.

    Returns:
        For 1984-03-03: ``d="3" dd="03" dth="3rd" m="3" mm="03" yy="84" yyyy="1984"
        month="march" Month="March" mon="mar" Mon="Mar" MON="MAR"
        weekday="saturday" Weekday="Saturday" wkd="sat"``.
    """
    month = MONTH_NAMES[date.month - 1]
    weekday = WEEKDAY_NAMES[date.weekday()]
    return {
        "d": str(date.day),
        "dd": f"{date.day:02d}",
        "dth": _ordinal(date.day),
        "m": str(date.month),
        "mm": f"{date.month:02d}",
        "yy": f"{date.year % 100:02d}",
        "yyyy": str(date.year),
        "month": month.lower(),
        "Month": month,
        "mon": month[:3].lower(),
        "Mon": month[:3],
        "MON": month[:3].upper(),
        "weekday": weekday.lower(),
        "Weekday": weekday,
        "wkd": weekday[:3].lower(),
    }


#: The fields of :data:`DATE_FORMATS` that write each part of a date.
DATE_PARTS = {
    "year": ("yyyy", "yy"),
    "month": ("m", "mm", "month", "Month", "mon", "Mon", "MON"),
    "day": ("d", "dd", "dth"),
    "weekday": ("wkd", "weekday", "Weekday"),
}


def date_part_spans(date: datetime.date, fmt_name: str) -> dict[str, tuple[int, int]]:
    """Where each part of :data:`DATE_PARTS` stands in ``format_date(date, fmt_name)``.

    Returns:
        ``{part: (start, end)}``, character positions, for the parts the format writes: for
        1984-03-03 in ``"dd/mm/yy"`` (``"03/03/84"``), ``day=(0, 2) month=(3, 5) year=(6, 8)``.
    """
    if fmt_name not in DATE_FORMATS:
        raise ValueError(f"unknown date format {fmt_name!r}; the formats are {', '.join(DATE_FORMATS)}")
    fields, spans, at = date_fields(date), {}, 0
    for literal, name, _, _ in string.Formatter().parse(DATE_FORMATS[fmt_name]):
        at += len(literal)
        if name:
            part = next(part for part, names in DATE_PARTS.items() if name in names)
            spans[part] = (at, at + len(fields[name]))
            at += len(fields[name])
    return spans


def format_date(date: datetime.date, fmt_name: str) -> str:
    """Write a date in one of the formats of :data:`DATE_FORMATS`.

    Args:
        date: the date to write.
        fmt_name: a key of ``DATE_FORMATS``, e.g. ``"dd/mm/yy"``.

    Returns:
        The date as text, e.g. ``format_date(date(1984, 3, 3), "dd/mm/yy") == "03/03/84"``.

    Raises:
        ValueError: for an unknown format name.
    """
    if fmt_name not in DATE_FORMATS:
        raise ValueError(f"unknown date format {fmt_name!r}; the formats are {', '.join(DATE_FORMATS)}")
    return DATE_FORMATS[fmt_name].format(**date_fields(date))


def _check_format_names(formats: Sequence[str] | None) -> list[str]:
    """All format names if ``formats`` is None, else ``formats`` after checking them."""
    if formats is None:
        return list(DATE_FORMATS)
    if isinstance(formats, str) or len(formats) == 0:
        raise ValueError(f"formats must be a non-empty list of format names, got {formats!r}")
    for name in formats:
        if name not in DATE_FORMATS:
            raise ValueError(f"unknown date format {name!r}; the formats are {', '.join(DATE_FORMATS)}")
    return list(formats)


def _number_of_days() -> int:
    return (LAST_DATE - FIRST_DATE).days + 1


def date_task(n: int, seed: int = 0, formats: Sequence[str] | None = None) -> list[Example]:
    """Examples of date normalisation: a human-readable date -> ``"YYYY-MM-DD"``.

    The ``n`` dates are distinct, drawn uniformly from ``FIRST_DATE .. LAST_DATE``; each
    is written in a format drawn uniformly from ``formats``.

    Args:
        n: number of examples (at most the number of days in the range, 36 525).
        seed: seed of the random draws.
        formats: names of the formats to use (keys of ``DATE_FORMATS``); default all.

    Returns:
        ``n`` examples such as ``Example("sat 3 march 1984", "1984-03-03")``.

    Raises:
        ValueError: if ``n`` is negative or larger than the number of days in the
            range, or for an unknown format name.
    """
    checks.non_negative_int(n=n)
    checks.integer(seed=seed)
    format_names = _check_format_names(formats)
    if n > _number_of_days():
        raise ValueError(
            f"asked for n={n} distinct dates, but {FIRST_DATE}..{LAST_DATE} holds only {_number_of_days()} days"
        )
    rng = random.Random(seed)
    day_offsets = rng.sample(range(_number_of_days()), n)
    examples = []
    for offset in day_offsets:
        date = FIRST_DATE + datetime.timedelta(days=offset)
        source = format_date(date, rng.choice(format_names))
        examples.append(Example(source, date.isoformat()))
    return examples


def date_splits(
    n_train: int,
    n_valid: int,
    n_test: int,
    seed: int = 0,
    formats: Sequence[str] | None = None,
) -> Splits:
    """Train, validation and test sets of the date task, disjoint by calendar date.

    No date of the test (or validation) set appears in training in any format, so a
    model can only score well on them by learning to read dates, not by remembering.

    Args:
        n_train: number of training examples.
        n_valid: number of validation examples.
        n_test: number of test examples.
        seed: seed of the random draws.
        formats: names of the formats to use (keys of ``DATE_FORMATS``); default all.

    Returns:
        ``Splits(train, valid, test)``.

    Raises:
        ValueError: if a size is negative, or together they exceed the 36 525 days of
            ``FIRST_DATE .. LAST_DATE``.
    """
    checks.non_negative_int(n_train=n_train, n_valid=n_valid, n_test=n_test)
    total = n_train + n_valid + n_test
    if total > _number_of_days():
        raise ValueError(
            f"n_train + n_valid + n_test = {n_train} + {n_valid} + {n_test} = {total} "
            f"distinct dates, but {FIRST_DATE}..{LAST_DATE} holds only {_number_of_days()} days"
        )
    examples = date_task(total, seed=seed, formats=formats)  # every date distinct
    return Splits(
        train=examples[:n_train],
        valid=examples[n_train : n_train + n_valid],
        test=examples[n_train + n_valid :],
    )


# --------------------------------------------------------------------------------------
# Task 2: reversal and copy
# --------------------------------------------------------------------------------------

#: Letters of the reversal and copy tasks: the first 20 lowercase letters ("a".."t"),
#: so a vocabulary has 24 ids with the 4 specials.
DEFAULT_ALPHABET = "abcdefghijklmnopqrst"


def _random_strings(n: int, min_length: int, max_length: int, seed: int, alphabet: str) -> list[str]:
    """``n`` random strings over ``alphabet``, lengths uniform in ``[min_length, max_length]``."""
    checks.non_negative_int(n=n)
    checks.integer(seed=seed)
    checks.positive_int(min_length=min_length)
    if not isinstance(max_length, int) or max_length < min_length:
        raise ValueError(
            f"max_length must be an int >= min_length, got min_length={min_length!r}, max_length={max_length!r}"
        )
    if not isinstance(alphabet, str) or alphabet == "":
        raise ValueError(f"alphabet must be a non-empty string, got alphabet={alphabet!r}")
    if len(set(alphabet)) != len(alphabet):
        raise ValueError(f"alphabet must not repeat a character, got alphabet={alphabet!r}")
    rng = random.Random(seed)
    strings = []
    for _ in range(n):
        length = rng.randint(min_length, max_length)  # both ends included
        strings.append("".join(rng.choices(alphabet, k=length)))
    return strings


def reversal_task(
    n: int, min_length: int, max_length: int, seed: int = 0, alphabet: str = DEFAULT_ALPHABET
) -> list[Example]:
    """Examples of sequence reversal: ``"abc" -> "cba"``.

    The first output character depends on the last input character, so a model without
    attention must carry the whole input in its final state: accuracy drops with length.

    Args:
        n: number of examples.
        min_length: shortest source length (>= 1).
        max_length: longest source length (>= min_length); lengths are uniform in between,
            both ends included.
        seed: seed of the random draws.
        alphabet: the characters to draw from (default ``DEFAULT_ALPHABET``, "a".."t").

    Returns:
        ``n`` examples whose target is the source reversed.

    Raises:
        ValueError: if ``n < 0``, ``min_length < 1``, ``min_length > max_length`` or the alphabet
            is empty or repeats a character.
    """
    sources = _random_strings(n, min_length, max_length, seed, alphabet)
    return [Example(source, source[::-1]) for source in sources]


def copy_task(
    n: int, min_length: int, max_length: int, seed: int = 0, alphabet: str = DEFAULT_ALPHABET
) -> list[Example]:
    """Examples of sequence copying: ``"abc" -> "abc"``.

    Same arguments, draws and errors as :func:`reversal_task` (with the same seed the
    sources are the same); the target is the source itself.
    """
    sources = _random_strings(n, min_length, max_length, seed, alphabet)
    return [Example(source, source) for source in sources]


#: :func:`sequence_splits` draws candidates in rounds of at least this many examples,
#: for at most ``_MAX_ROUNDS`` rounds per split, before it gives up.
_ROUND_SIZE = 256
_MAX_ROUNDS = 100


def sequence_splits(
    task_fn: Callable[..., list[Example]],
    n_train: int,
    n_valid: int,
    n_test: int,
    seed: int = 0,
    exclude: Iterable[str] = (),
    **task_kwargs,
) -> Splits:
    """Train, validation and test sets of a task, with no source string in two splits.

    The training set is drawn as the task draws it. The validation set is then drawn
    from the task again, keeping only sources not in the training set, and the test set
    keeps only sources in neither. (A split may repeat a source within itself; with few
    possible strings, e.g. very short ones, the later splits hold the rarer ones.)

    Args:
        task_fn: a task such as :func:`reversal_task` or :func:`copy_task`, called as
            ``task_fn(n, seed=..., **task_kwargs)``.
        n_train: number of training examples.
        n_valid: number of validation examples.
        n_test: number of test examples.
        seed: seed of the random draws.
        exclude: sources that no split may hold (e.g. another split's test strings).
        **task_kwargs: passed on to ``task_fn``, e.g. ``min_length=5, max_length=15``.

    Returns:
        ``Splits(train, valid, test)``.

    Raises:
        ValueError: if a size is negative, or if there are too few distinct source
            strings to fill the splits.

    Example:
        >>> splits = sequence_splits(reversal_task, 1000, 100, 100, min_length=5, max_length=15)
    """
    checks.non_negative_int(n_train=n_train, n_valid=n_valid, n_test=n_test)
    checks.integer(seed=seed)
    rng = random.Random(seed)
    used_sources: set[str] = set(exclude)
    splits = []
    for name, size in (("train", n_train), ("valid", n_valid), ("test", n_test)):
        split = _draw_new_examples(task_fn, size, used_sources, rng, task_kwargs, name)
        used_sources.update(example.source for example in split)
        splits.append(split)
    return Splits(*splits)


def _draw_new_examples(
    task_fn: Callable[..., list[Example]],
    size: int,
    used_sources: set[str],
    rng: random.Random,
    task_kwargs: dict,
    split_name: str,
) -> list[Example]:
    """``size`` examples of ``task_fn`` whose sources are not in ``used_sources``."""
    kept: list[Example] = []
    for _ in range(_MAX_ROUNDS):
        if len(kept) == size:
            return kept
        candidates = task_fn(max(size, _ROUND_SIZE), seed=rng.randrange(2**32), **task_kwargs)
        for example in candidates:
            if example.source not in used_sources and len(kept) < size:
                kept.append(example)
    if len(kept) == size:
        return kept
    raise ValueError(
        f"could not find {size} {split_name} examples whose sources are not in an earlier "
        f"split (found {len(kept)}); the task has too few distinct sources for these sizes: "
        f"allow longer sequences or a larger alphabet, or ask for fewer examples"
    )


def reverse_sources(examples: Iterable[Example]) -> list[Example]:
    """Reverse every source and keep the target: the trick of Sutskever et al. (2014).

    Reading the source backwards puts its first words next to the first words of the
    target, which shortens the paths the gradient must travel at the start.

    Args:
        examples: the examples to transform.

    Returns:
        New examples with ``source[::-1]`` and the same target.
    """
    return [Example(example.source[::-1], example.target) for example in examples]


# --------------------------------------------------------------------------------------
# Task 3: word-level sentences for self-attention (Chapter 4)
# --------------------------------------------------------------------------------------

#: Words of the sense task: "bat" with context words of its two senses, and words of neither.
BAT_CONTEXT = {
    "animal": ("cave", "wings", "night", "insects", "fur", "flew", "hung", "squeaked"),
    "sport": ("ball", "swung", "hit", "team", "pitch", "game", "player", "wooden"),
}
NEUTRAL_WORDS = ("the", "a", "was", "in", "and", "with", "big", "old")

#: Words of the referent task: ``the <animal> didn't cross the <place> because it was too <adjective>``;
#: the adjective says whether "it" is the animal or the place.
ANIMALS = ("dog", "cat", "horse", "cow", "fox", "goat", "sheep", "pig")
PLACES = ("street", "road", "river", "bridge", "track", "canal", "lane", "path")
ANIMAL_ADJECTIVES = ("tired", "scared", "sleepy", "hungry", "lazy", "weak")
PLACE_ADJECTIVES = ("wide", "busy", "icy", "long", "muddy", "steep")


def sense_task(n: int, seed: int = 0, context_words: int = 3, neutral_words: int = 2) -> list[Example]:
    """Sentences in which "bat" is an animal or a piece of sport equipment, tagged word by word.

    Each sentence holds "bat", ``context_words`` distinct words of one sense and ``neutral_words``
    words of neither, in a random order. The target tags every word: ``A`` (animal), ``S`` (sport)
    or ``-`` (neither); "bat" gets the tag of its sense, which only its context tells.

    Returns:
        ``n`` examples such as ``Example("the cave bat flew a night", "- A A A - A")``.
    """

    def sentence(rng: random.Random) -> Example:
        sense = rng.choice(sorted(BAT_CONTEXT))
        words = ["bat", *rng.sample(BAT_CONTEXT[sense], context_words), *rng.choices(NEUTRAL_WORDS, k=neutral_words)]
        rng.shuffle(words)
        return Example(" ".join(words), " ".join(_sense_tag(word, sense) for word in words))

    return _draw(n, seed, sentence)


def _draw(n: int, seed: int, example: Callable[[random.Random], Example]) -> list[Example]:
    """``n`` examples, each made by ``example(rng)`` from one ``random.Random(seed)``."""
    checks.non_negative_int(n=n)
    checks.integer(seed=seed)
    rng = random.Random(seed)
    return [example(rng) for _ in range(n)]


def _sense_tag(word: str, sense: str) -> str:
    if word == "bat":
        return sense[0].upper()
    return next((s[0].upper() for s, context in BAT_CONTEXT.items() if word in context), "-")


def referent_task(n: int, seed: int = 0) -> list[Example]:
    """Sentences like "the dog didn't cross the road because it was too tired", with what "it" is.

    The animal, the place and the adjective are drawn uniformly; the target is the animal for an
    adjective of :data:`ANIMAL_ADJECTIVES` and the place otherwise.

    Returns:
        ``n`` examples such as ``Example("the dog didn't cross the road because it was too wide", "road")``.
    """

    def sentence(rng: random.Random) -> Example:
        return _referent(rng.choice(ANIMALS), rng.choice(PLACES), rng.choice(ANIMAL_ADJECTIVES + PLACE_ADJECTIVES))

    return _draw(n, seed, sentence)


def referent_sentences() -> list[Example]:
    """Every sentence of :func:`referent_task` once (8 animals x 8 places x 12 adjectives = 768), in a fixed order."""
    return [
        _referent(animal, place, adjective)
        for animal in ANIMALS
        for place in PLACES
        for adjective in ANIMAL_ADJECTIVES + PLACE_ADJECTIVES
    ]


def _referent(animal: str, place: str, adjective: str) -> Example:
    referent = animal if adjective in ANIMAL_ADJECTIVES else place
    return Example(f"the {animal} didn't cross the {place} because it was too {adjective}", referent)


# --------------------------------------------------------------------------------------
# Task 4: a toy translation with word reordering (Chapter 3)
# --------------------------------------------------------------------------------------

#: The toy language pair: English words and their made-up translations, by part of speech.
TRANSLATION_WORDS = {
    "adjective": {"big": "gro", "small": "pit", "old": "ves", "young": "nal", "red": "rub", "black": "zen"},
    "noun": {
        "dog": "kav",
        "cat": "mir",
        "bird": "tul",
        "fox": "ros",
        "horse": "pel",
        "fish": "nem",
        "goat": "dar",
        "mouse": "sus",
    },
    "verb": {"sees": "vid", "likes": "lub", "chases": "gon", "finds": "naj", "helps": "pom", "follows": "sle"},
}


def translation_task(n: int, seed: int = 0, adjective_rate: float = 0.5) -> list[Example]:
    """Sentences "[adjective] noun verb [adjective] noun" and their translation into a made-up language.

    The target language puts the verb last (subject, object, verb, where English has subject, verb,
    object) and the adjective after its noun, so the alignment between the two is not monotonic: the
    verb jumps to the end, and each noun phrase is read backwards.

    Args:
        n: number of examples. seed: seed of the draws. adjective_rate: probability that a noun has an
            adjective.

    Returns:
        ``n`` examples such as ``Example("big dog sees cat", "kav gro mir vid")``.
    """
    checks.non_negative_int(n=n)
    if not 0.0 <= adjective_rate <= 1.0:
        raise ValueError(f"adjective_rate must be in [0, 1], got {adjective_rate!r}")
    words = {kind: sorted(table) for kind, table in TRANSLATION_WORDS.items()}

    def phrase(rng: random.Random) -> tuple[list[str], list[str]]:
        noun = rng.choice(words["noun"])
        if rng.random() < adjective_rate:
            adjective = rng.choice(words["adjective"])
            return [adjective, noun], [TRANSLATION_WORDS["noun"][noun], TRANSLATION_WORDS["adjective"][adjective]]
        return [noun], [TRANSLATION_WORDS["noun"][noun]]

    def sentence(rng: random.Random) -> Example:
        (subject, subject_t), verb, (obj, obj_t) = phrase(rng), rng.choice(words["verb"]), phrase(rng)
        return Example(
            " ".join(subject + [verb] + obj), " ".join(subject_t + obj_t + [TRANSLATION_WORDS["verb"][verb]])
        )

    return _draw(n, seed, sentence)


def translation_alignment(example: Example) -> list[tuple[int, int, bool] | None]:
    """For every target character of a :func:`translation_task` example, the source word it translates.

    Returns one item per target character: ``(begin, end, is_verb)``, the character span
    ``source[begin:end]`` of the source word that the character's word translates, or ``None`` for a
    space. For ``"big dog sees cat" -> "kav gro mir vid"`` the letters of ``kav`` get the span of
    ``dog``, those of ``vid`` the span of ``sees`` (with ``is_verb`` True).

    Raises:
        ValueError: if the example is not a sentence of :func:`translation_task`.
    """
    words, targets = example.source.split(" "), example.target.split(" ")
    verbs = [i for i, word in enumerate(words) if word in TRANSLATION_WORDS["verb"]]
    if len(verbs) != 1 or len(words) != len(targets):
        raise ValueError(f"not a sentence of translation_task: {example!r}")
    verb = verbs[0]
    order = (
        list(range(verb))[::-1] + list(range(verb + 1, len(words)))[::-1] + [verb]
    )  # source word of each target word
    starts = [sum(len(word) + 1 for word in words[:i]) for i in range(len(words))]  # where each source word begins
    aligned: list[tuple[int, int, bool] | None] = []
    for position, (target_word, source_word) in enumerate(zip(targets, order)):
        if position:
            aligned.append(None)  # the space before this word
        span = (starts[source_word], starts[source_word] + len(words[source_word]), source_word == verb)
        aligned += [span] * len(target_word)
    return aligned
