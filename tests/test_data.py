"""Unit tests of attnbook.data: tasks, splits, Vocab, batching and their error messages."""

import datetime
import re

import pytest
import torch

from attnbook import data, tasks
from attnbook.data import Batch, Batches, Example, Splits, Vocab, build_vocabs, make_batch
from attnbook.tasks import (
    DATE_FORMATS,
    DEFAULT_ALPHABET,
    FIRST_DATE,
    LAST_DATE,
    copy_task,
    date_part_spans,
    date_splits,
    date_task,
    format_date,
    reversal_task,
    reverse_sources,
    sequence_splits,
)

NUMBER_OF_DAYS = (LAST_DATE - FIRST_DATE).days + 1


# ------------------------------------------------------------------ dates


def test_the_examples_of_the_course_guide():
    date = datetime.date(1984, 3, 3)
    assert format_date(date, "wkd_d_month_yyyy") == "sat 3 march 1984"
    assert format_date(date, "dd/mm/yy") == "03/03/84"
    assert format_date(date, "Month_d_yyyy") == "March 3, 1984"
    assert format_date(date, "d_Mon_yyyy") == "3 Mar 1984"
    assert format_date(date, "yyyy.mm.dd") == "1984.03.03"
    assert format_date(date, "weekday_month_d_yyyy") == "saturday, march 3, 1984"
    assert format_date(date, "d.m.yy") == "3.3.84"
    assert format_date(date, "mon_d_yy") == "mar 3 84"


def test_date_part_spans_find_every_field_of_every_format():
    date = datetime.date(1984, 3, 3)
    assert date_part_spans(date, "dd/mm/yy") == dict(day=(0, 2), month=(3, 5), year=(6, 8))
    fields = tasks.date_fields(datetime.date(2003, 11, 22))
    for name in DATE_FORMATS:
        source = format_date(datetime.date(2003, 11, 22), name)
        spans = date_part_spans(datetime.date(2003, 11, 22), name)
        assert {"year", "month", "day"} <= set(spans), name
        for part, (start, end) in spans.items():
            assert source[start:end] in {fields[field] for field in tasks.DATE_PARTS[part]}, (name, part)
    with pytest.raises(ValueError, match="unknown date format 'mm-dd'; the formats are"):
        date_part_spans(date, "mm-dd")


def test_there_are_at_least_ten_formats():
    assert len(DATE_FORMATS) >= 10


@pytest.mark.parametrize(
    "date, expected",
    [
        (datetime.date(2001, 12, 1), "Saturday, December 1st 2001"),
        (datetime.date(2049, 1, 2), "Saturday, January 2nd 2049"),
        (datetime.date(1950, 7, 11), "Tuesday, July 11th 1950"),
        (datetime.date(1999, 2, 12), "Friday, February 12th 1999"),
        (datetime.date(2000, 2, 13), "Sunday, February 13th 2000"),
        (datetime.date(2024, 2, 22), "Thursday, February 22nd 2024"),
        (datetime.date(2024, 5, 23), "Thursday, May 23rd 2024"),
        (datetime.date(2024, 5, 31), "Friday, May 31st 2024"),
    ],
)
def test_ordinals_and_weekdays(date, expected):
    assert format_date(date, "Weekday_Month_dth_yyyy") == expected


def test_two_digit_years_cover_both_centuries():
    assert format_date(datetime.date(1950, 1, 5), "dd/mm/yy") == "05/01/50"
    assert format_date(datetime.date(2009, 11, 5), "dd/mm/yy") == "05/11/09"


def test_every_source_round_trips_to_its_target():
    examples = date_task(3000, seed=3)
    used_formats = set()
    for source, target in examples:
        date = datetime.date.fromisoformat(target)
        assert FIRST_DATE <= date <= LAST_DATE
        matching = [name for name in DATE_FORMATS if format_date(date, name) == source]
        assert matching, f"{source!r} is not {target} in any format"
        used_formats.update(matching)
    assert used_formats == set(DATE_FORMATS)


def test_targets_are_iso_dates():
    for _, target in date_task(200, seed=0):
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", target)


def test_a_source_means_exactly_one_date():
    # Years at the edges of the range and a leap year: a two-digit year or a
    # day/month order that could be read two ways would show up as a collision.
    dates = [
        datetime.date(year, 1, 1) + datetime.timedelta(days=offset)
        for year in (1950, 1984, 1999, 2000, 2012, 2049)
        for offset in range(365)
    ]
    meaning: dict[str, datetime.date] = {}
    for date in dates:
        for name in DATE_FORMATS:
            source = format_date(date, name)
            assert meaning.setdefault(source, date) == date, f"{source!r} is ambiguous"


def test_format_date_does_not_depend_on_the_locale_names():
    # every letter of the formatted dates is plain ASCII English
    for source, _ in date_task(500, seed=1):
        assert source.isascii()


def test_date_task_is_deterministic():
    assert date_task(50, seed=7) == date_task(50, seed=7)
    assert date_task(50, seed=7) != date_task(50, seed=8)


def test_date_task_does_not_touch_the_global_random_state():
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    date_task(10, seed=0)
    assert random.random() == expected


def test_date_task_dates_are_distinct():
    targets = [target for _, target in date_task(5000, seed=2)]
    assert len(set(targets)) == len(targets)


def test_date_task_can_restrict_the_formats():
    examples = date_task(100, seed=0, formats=["dd/mm/yy"])
    assert all(re.fullmatch(r"\d\d/\d\d/\d\d", source) for source, _ in examples)


def test_date_splits_sizes_and_disjoint_dates():
    splits = date_splits(2000, 300, 400, seed=5)
    assert isinstance(splits, Splits)
    assert [len(s) for s in splits] == [2000, 300, 400]
    train, valid, test = ({target for _, target in split} for split in splits)
    assert not train & valid
    assert not train & test
    assert not valid & test


def test_date_splits_is_deterministic():
    assert date_splits(100, 10, 10, seed=1) == date_splits(100, 10, 10, seed=1)
    assert date_splits(100, 10, 10, seed=1) != date_splits(100, 10, 10, seed=2)


def test_date_splits_can_use_every_day_of_the_range():
    splits = date_splits(NUMBER_OF_DAYS - 2, 1, 1)
    assert sum(len(split) for split in splits) == NUMBER_OF_DAYS


def test_too_many_dates_is_an_error():
    with pytest.raises(ValueError, match=r"n_train \+ n_valid \+ n_test = 36000 \+ 500 \+ 100 = 36600 .*36525 days"):
        date_splits(36000, 500, 100)
    with pytest.raises(ValueError, match=r"n=40000 distinct dates.*1950-01-01\.\.2049-12-31 holds only 36525"):
        date_task(40000)


def test_unknown_date_format_is_an_error():
    with pytest.raises(ValueError, match=r"unknown date format 'yyyy/dd/mm'; the formats are wkd_d_month_yyyy, "):
        format_date(datetime.date(2000, 1, 1), "yyyy/dd/mm")
    with pytest.raises(ValueError, match=r"unknown date format 'nope'"):
        date_task(10, formats=["dd/mm/yy", "nope"])
    with pytest.raises(ValueError, match=r"formats must be a non-empty list of format names, got \[\]"):
        date_task(10, formats=[])


@pytest.mark.parametrize("name", ["n_train", "n_valid", "n_test"])
def test_negative_split_size_is_an_error(name):
    sizes = {"n_train": 10, "n_valid": 10, "n_test": 10, name: -1}
    with pytest.raises(ValueError, match=rf"{name} must be a non-negative int, got -1"):
        date_splits(**sizes)
    with pytest.raises(ValueError, match=rf"{name} must be a non-negative int, got -1"):
        sequence_splits(reversal_task, **sizes, min_length=3, max_length=5)


def test_bad_n_and_seed_are_errors():
    with pytest.raises(ValueError, match=r"n must be a non-negative int, got -3"):
        date_task(-3)
    with pytest.raises(ValueError, match=r"n must be a non-negative int, got 2\.5"):
        reversal_task(2.5, 1, 3)
    with pytest.raises(ValueError, match=r"seed must be an int, got 'a'"):
        date_task(3, seed="a")


# ------------------------------------------------------------------ reversal and copy


def test_reversal_targets_are_reversed_sources():
    examples = reversal_task(300, 1, 12, seed=0)
    assert len(examples) == 300
    for source, target in examples:
        assert target == source[::-1]
        assert set(source) <= set(DEFAULT_ALPHABET)


def test_copy_targets_equal_sources_and_match_reversal_sources():
    copies = copy_task(100, 2, 9, seed=4)
    assert all(source == target for source, target in copies)
    reversals = reversal_task(100, 2, 9, seed=4)
    assert [ex.source for ex in copies] == [ex.source for ex in reversals]


def test_lengths_are_uniform_within_bounds_both_ends_included():
    lengths = [len(source) for source, _ in reversal_task(2000, 3, 7, seed=1)]
    assert min(lengths) == 3
    assert max(lengths) == 7
    assert set(lengths) == {3, 4, 5, 6, 7}
    for length in range(3, 8):  # about 400 each
        assert 300 < lengths.count(length) < 500


def test_fixed_length_and_custom_alphabet():
    examples = copy_task(50, 4, 4, seed=0, alphabet="xy")
    assert all(len(source) == 4 and set(source) <= {"x", "y"} for source, _ in examples)


def test_default_alphabet_is_twenty_letters():
    assert DEFAULT_ALPHABET == "abcdefghijklmnopqrst"


def test_reversal_task_is_deterministic():
    assert reversal_task(50, 1, 10, seed=3) == reversal_task(50, 1, 10, seed=3)
    assert reversal_task(50, 1, 10, seed=3) != reversal_task(50, 1, 10, seed=4)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(min_length=0, max_length=5), r"min_length must be a positive int, got 0"),
        (dict(min_length=6, max_length=5), r"max_length must be an int >= min_length, got min_length=6, max_length=5"),
        (dict(min_length=1, max_length=5, alphabet=""), r"alphabet must be a non-empty string, got alphabet=''"),
        (
            dict(min_length=1, max_length=5, alphabet="abca"),
            r"alphabet must not repeat a character, got alphabet='abca'",
        ),
    ],
)
@pytest.mark.parametrize("task", [reversal_task, copy_task])
def test_bad_sequence_arguments_are_errors(task, kwargs, message):
    with pytest.raises(ValueError, match=message):
        task(10, **kwargs)


def test_sequence_splits_have_disjoint_sources():
    splits = sequence_splits(reversal_task, 3000, 500, 500, seed=0, min_length=1, max_length=4)
    assert [len(s) for s in splits] == [3000, 500, 500]
    train, valid, test = ({ex.source for ex in split} for split in splits)
    assert not train & valid
    assert not train & test
    assert not valid & test
    assert all(ex.target == ex.source[::-1] for split in splits for ex in split)
    assert all(1 <= len(ex.source) <= 4 for split in splits for ex in split)


def test_sequence_splits_is_deterministic_and_passes_task_arguments():
    first = sequence_splits(copy_task, 50, 5, 5, seed=2, min_length=5, max_length=5, alphabet="abc")
    again = sequence_splits(copy_task, 50, 5, 5, seed=2, min_length=5, max_length=5, alphabet="abc")
    other = sequence_splits(copy_task, 50, 5, 5, seed=9, min_length=5, max_length=5, alphabet="abc")
    assert first == again
    assert first != other
    assert all(len(ex.source) == 5 and set(ex.source) <= {"a", "b", "c"} for split in first for ex in split)


def test_sequence_splits_with_too_few_strings_is_an_error():
    # "a" and "b" are the only strings: training takes both (almost surely).
    with pytest.raises(ValueError, match=r"could not find 1 valid examples whose sources are not in an earlier split"):
        sequence_splits(copy_task, 100, 1, 1, min_length=1, max_length=1, alphabet="ab")


def test_reverse_sources():
    examples = [Example("abc", "xyz"), Example("de", "de")]
    assert reverse_sources(examples) == [Example("cba", "xyz"), Example("ed", "de")]
    assert examples[0] == Example("abc", "xyz")  # the input is left alone


# ------------------------------------------------------------------ Vocab


def test_special_ids_and_symbol_ids():
    vocab = Vocab("abc")
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2, 3)
    assert vocab.tokens([0, 1, 2, 3, 4, 5, 6]) == ["<pad>", "<bos>", "<eos>", "<unk>", "a", "b", "c"]
    assert len(vocab) == 7
    assert vocab.name == "source"


def test_encode_with_bos_and_eos():
    vocab = Vocab("abc")
    assert vocab.encode("cab") == [6, 4, 5]
    assert vocab.encode("cab", add_bos=True, add_eos=True) == [1, 6, 4, 5, 2]
    assert vocab.encode(["a", "b"], add_eos=True) == [4, 5, 2]
    assert vocab.encode("") == []


def test_encode_decode_round_trip():
    examples = date_task(200, seed=0)
    source_vocab, target_vocab = build_vocabs(examples)
    for source, target in examples:
        assert source_vocab.decode(source_vocab.encode(source)) == source
        ids = target_vocab.encode(target, add_bos=True, add_eos=True)
        assert target_vocab.decode(ids) == target
        assert target_vocab.decode(torch.tensor(ids)) == target


def test_decode_skips_pad_and_bos_and_stops_at_eos():
    vocab = Vocab("abc")
    assert vocab.decode([1, 4, 0, 5, 2, 6, 6]) == "ab"
    assert vocab.decode(torch.tensor([4, 5, 6, 0, 0])) == "abc"
    assert vocab.decode([2, 4]) == ""
    assert vocab.decode([4, 3, 5]) == "a<unk>b"


def test_decode_bad_ids_are_errors():
    vocab = Vocab("abc", name="target")
    with pytest.raises(
        ValueError, match=r"id 7 is out of range for the target vocabulary of size 7 \(valid ids are 0\.\.6\)"
    ):
        vocab.decode([4, 7])
    with pytest.raises(ValueError, match=r"id -1 is out of range"):
        vocab.tokens([-1])
    with pytest.raises(ValueError, match=r"expected a 1-D tensor of ids, got shape \(2, 3\)"):
        vocab.decode(torch.zeros(2, 3, dtype=torch.long))


def test_unknown_character_message():
    vocab = Vocab("abc")
    with pytest.raises(ValueError, match=r"^unknown character 'ß' in source; vocabulary has 'a', 'b', 'c'$"):
        vocab.encode("aßc")


def test_unknown_character_message_names_the_vocabulary_and_abbreviates():
    vocab = Vocab.from_texts(["ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"], name="target")
    with pytest.raises(
        ValueError, match=r"^unknown character '!' in target; vocabulary has 'A', 'B', .*, 'n', \.\.\. and 12 more$"
    ):
        vocab.encode("!")


def test_allow_unk_maps_unknown_characters_to_unk():
    vocab = Vocab("abc", allow_unk=True)
    assert vocab.encode("aßc") == [4, 3, 6]


def test_from_texts_and_build_vocabs_sort_every_character():
    vocab = Vocab.from_texts(["cab", "bad"], name="target")
    assert vocab.symbols == ("a", "b", "c", "d")
    assert vocab.name == "target"
    source_vocab, target_vocab = build_vocabs([Example("z y", "1-2"), Example("x", "3")])
    assert source_vocab.symbols == (" ", "x", "y", "z")
    assert target_vocab.symbols == ("-", "1", "2", "3")
    assert (source_vocab.name, target_vocab.name) == ("source", "target")


def test_bad_symbols_are_errors():
    with pytest.raises(ValueError, match=r"symbol 'a' appears twice in the source vocabulary"):
        Vocab("aba")
    with pytest.raises(ValueError, match=r"symbol '<eos>' of the target vocabulary is the name of a special token"):
        Vocab(["a", "<eos>"], name="target")
    with pytest.raises(ValueError, match=r"must be non-empty strings, got ''"):
        Vocab(["a", ""])


# ------------------------------------------------------------------ batching


@pytest.fixture
def tiny():
    examples = [Example("abc", "xy"), Example("a", "xyzx"), Example("bb", "")]
    source_vocab, target_vocab = build_vocabs(examples)
    return examples, source_vocab, target_vocab


def test_batch_shapes_and_dtypes(tiny):
    examples, source_vocab, target_vocab = tiny
    batch = make_batch(examples, source_vocab, target_vocab)
    assert isinstance(batch, Batch)
    assert len(batch) == 3
    assert batch.src.shape == (3, 3)  # longest source
    assert batch.tgt_in.shape == batch.tgt_out.shape == batch.tgt_mask.shape == (3, 5)  # longest target + 1
    assert batch.src_mask.shape == (3, 3)
    for tensor in (batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out):
        assert tensor.dtype == torch.long
    assert batch.src_mask.dtype == batch.tgt_mask.dtype == torch.bool
    assert batch.examples == examples
    assert repr(batch) == "Batch(size=3, src=(3, 3), tgt_in=(3, 5), tgt_out=(3, 5))"


def test_batch_padding_and_masks(tiny):
    examples, source_vocab, target_vocab = tiny
    batch = make_batch(examples, source_vocab, target_vocab)
    a, b, c = source_vocab.encode("abc")
    assert batch.src.tolist() == [[a, b, c], [a, 0, 0], [b, b, 0]]
    assert batch.src_lengths.tolist() == [3, 1, 2]
    assert batch.src_mask.tolist() == [[True, True, True], [True, False, False], [True, True, False]]
    assert batch.tgt_mask.tolist() == [
        [True, True, True, False, False],
        [True, True, True, True, True],
        [True, False, False, False, False],
    ]
    assert (batch.src_mask == (batch.src != source_vocab.pad_id)).all()


def test_tgt_in_and_tgt_out_are_shifted_by_one(tiny):
    examples, source_vocab, target_vocab = tiny
    batch = make_batch(examples, source_vocab, target_vocab)
    x, y, z = target_vocab.encode("xyz")
    bos, eos = target_vocab.bos_id, target_vocab.eos_id
    assert batch.tgt_in.tolist() == [[bos, x, y, 0, 0], [bos, x, y, z, x], [bos, 0, 0, 0, 0]]
    assert batch.tgt_out.tolist() == [[x, y, eos, 0, 0], [x, y, z, x, eos], [eos, 0, 0, 0, 0]]
    # the token after tgt_in[:, t] is tgt_out[:, t]
    assert torch.equal(batch.tgt_in[:, 1:][batch.tgt_mask[:, 1:]], batch.tgt_out[:, :-1][batch.tgt_mask[:, 1:]])
    for row, (_, target) in enumerate(examples):
        assert target_vocab.decode(batch.tgt_out[row]) == target
        assert target_vocab.decode(batch.tgt_in[row]) == target
        assert source_vocab.decode(batch.src[row]) == examples[row].source


def test_make_batch_errors(tiny):
    _, source_vocab, target_vocab = tiny
    with pytest.raises(ValueError, match=r"make_batch needs at least one example, got an empty list"):
        make_batch([], source_vocab, target_vocab)
    with pytest.raises(ValueError, match=r"example 1 has an empty source \(target 'x'\)"):
        make_batch([Example("a", "x"), Example("", "x")], source_vocab, target_vocab)
    with pytest.raises(ValueError, match=r"unknown character 'q' in source; vocabulary has 'a', 'b', 'c'"):
        make_batch([Example("aq", "x")], source_vocab, target_vocab)


def _sources_per_epoch(batches):
    return [ex.source for batch in batches for ex in batch.examples]


def test_batches_cover_every_example_once_per_epoch():
    examples = reversal_task(103, 1, 6, seed=0)
    source_vocab, target_vocab = build_vocabs(examples)
    batches = Batches(examples, source_vocab, target_vocab, batch_size=10, shuffle=True, seed=0)
    assert len(batches) == 11
    for _ in range(3):
        sizes = [len(batch) for batch in batches]
        assert sizes == [10] * 10 + [3]
    expected = sorted(ex.source for ex in examples)
    assert sorted(_sources_per_epoch(batches)) == expected


def test_batches_reshuffle_each_epoch_deterministically():
    examples = reversal_task(50, 1, 6, seed=0)
    source_vocab, target_vocab = build_vocabs(examples)

    def three_epochs(seed):
        batches = Batches(examples, source_vocab, target_vocab, batch_size=8, shuffle=True, seed=seed)
        return [_sources_per_epoch(batches) for _ in range(3)]

    first = three_epochs(seed=0)
    assert first == three_epochs(seed=0)
    assert first != three_epochs(seed=1)
    assert first[0] != first[1] != first[2]
    assert first[0] != [ex.source for ex in examples]


def test_batches_give_each_seed_its_own_epochs():
    # with Random(seed + epoch), seed 0's second epoch was seed 1's first: runs that differ only
    # in the seed saw the same orders, one epoch apart
    examples = reversal_task(50, 1, 6, seed=0)
    source_vocab, target_vocab = build_vocabs(examples)
    epochs = {}
    for seed in range(8):
        batches = Batches(examples, source_vocab, target_vocab, batch_size=8, shuffle=True, seed=seed)
        for epoch in range(12):
            epochs[seed, epoch] = tuple(_sources_per_epoch(batches))
    assert len(set(epochs.values())) == len(epochs)


def test_batches_without_shuffle_keep_the_order():
    examples = reversal_task(20, 1, 6, seed=0)
    source_vocab, target_vocab = build_vocabs(examples)
    batches = Batches(examples, source_vocab, target_vocab, batch_size=6)
    for _ in range(2):
        assert _sources_per_epoch(batches) == [ex.source for ex in examples]


@pytest.mark.parametrize("batch_size", [0, -2, 2.0])
def test_bad_batch_size_is_an_error(tiny, batch_size):
    examples, source_vocab, target_vocab = tiny
    with pytest.raises(ValueError, match=rf"batch_size must be a positive int, got {batch_size}"):
        Batches(examples, source_vocab, target_vocab, batch_size=batch_size)


def test_batches_of_no_examples_is_an_error(tiny):
    _, source_vocab, target_vocab = tiny
    with pytest.raises(ValueError, match=r"Batches needs at least one example, got an empty list"):
        Batches([], source_vocab, target_vocab, batch_size=4)


def test_translation_task_reorders_as_documented():
    examples = tasks.translation_task(300, seed=4)
    assert examples == tasks.translation_task(300, seed=4) and examples != tasks.translation_task(300, seed=5)
    table = {word: translation for kind in tasks.TRANSLATION_WORDS.values() for word, translation in kind.items()}
    verbs, adjectives = tasks.TRANSLATION_WORDS["verb"], tasks.TRANSLATION_WORDS["adjective"]
    for example in examples:
        words = example.source.split()
        verb_at = next(i for i, word in enumerate(words) if word in verbs)
        subject, obj = words[:verb_at], words[verb_at + 1 :]
        expected = [table[w] for w in subject[::-1]] + [table[w] for w in obj[::-1]] + [table[words[verb_at]]]
        assert example.target.split() == expected
        assert all(len(phrase) in (1, 2) and (len(phrase) == 1 or phrase[0] in adjectives) for phrase in (subject, obj))
    with_adjectives = sum(len(e.source.split()) for e in examples) / len(examples)
    assert 3.7 < with_adjectives < 4.3  # about half of the noun phrases have an adjective
    assert all(len(e.source.split()) == 3 for e in tasks.translation_task(20, adjective_rate=0.0))
    with pytest.raises(ValueError, match="adjective_rate must be in \\[0, 1\\], got 1.5"):
        tasks.translation_task(3, adjective_rate=1.5)


def test_translation_alignment_points_every_letter_at_the_word_it_translates():
    table = {word: translation for kind in tasks.TRANSLATION_WORDS.values() for word, translation in kind.items()}
    aligned = tasks.translation_alignment(data.Example("big dog sees cat", "kav gro mir vid"))
    assert (
        aligned
        == [(4, 7, False)] * 3
        + [None]
        + [(0, 3, False)] * 3
        + [None]
        + [(13, 16, False)] * 3
        + [None]
        + [(8, 12, True)] * 3
    )
    for example in tasks.translation_task(200, seed=6):
        aligned = tasks.translation_alignment(example)
        assert len(aligned) == len(example.target)
        for character, item, word in zip(example.target, aligned, _word_of_each_character(example.target)):
            assert (item is None) == (character == " ")
            if item is not None:
                begin, end, is_verb = item
                assert table[example.source[begin:end]] == word
                assert is_verb == (example.source[begin:end] in tasks.TRANSLATION_WORDS["verb"])
    with pytest.raises(ValueError, match="not a sentence of translation_task"):
        tasks.translation_alignment(data.Example("dog cat", "kav mir"))


def _word_of_each_character(text):
    return [word for word in text.split(" ") for _ in word + " "][: len(text)]


def test_batches_with_a_negative_seed_is_an_error(tiny):
    examples, source_vocab, target_vocab = tiny
    with pytest.raises(ValueError, match=r"seed must be a non-negative int, got -1"):
        Batches(examples, source_vocab, target_vocab, batch_size=4, shuffle=True, seed=-1)
