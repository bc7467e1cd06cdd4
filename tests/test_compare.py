"""The comparison rule: mean, sd, 95 % t-interval; paired differences decide or say undecided."""

import math
import statistics

import pytest

from attnbook.compare import (
    paired_difference,
    paired_t_p,
    pairs_tested,
    permutation_test,
    sign_test,
    summarize,
    t_p_value,
    t_quantile,
)


def test_t_quantiles_match_the_tables():
    assert t_quantile(1) == 12.706 and t_quantile(4) == 2.776 and t_quantile(30) == 2.042
    assert t_quantile(40) == pytest.approx(2.021, abs=1e-3)  # expansion beyond the table
    assert t_quantile(120) == pytest.approx(1.980, abs=1e-3)
    assert t_quantile(31) < t_quantile(30)


def test_summary_is_mean_sd_and_t_interval():
    values = [0.2, 0.4, 0.3, 0.5, 0.6]
    summary = summarize(values)
    half = 2.776 * statistics.stdev(values) / math.sqrt(5)
    assert summary.n == 5 and summary.mean == pytest.approx(0.4)
    assert summary.sd == pytest.approx(statistics.stdev(values))
    assert (summary.low, summary.high) == (pytest.approx(0.4 - half), pytest.approx(0.4 + half))


def test_pairing_decides_what_unpaired_means_cannot():
    # Each seed moves both arms alike; a is ahead by 0.01 +- 0.002 in every seed.
    b = [0.1, 0.5, 0.9, 0.3, 0.7]
    a = [x + d for x, d in zip(b, [0.01, 0.012, 0.008, 0.011, 0.009])]
    summary_a, summary_b = summarize(a), summarize(b)
    assert summary_a.low < summary_b.high  # the arms' own intervals overlap
    difference = paired_difference(a, b)
    assert difference.verdict == "a" and difference.low > 0
    assert paired_difference(b, a).verdict == "b"


def test_overlapping_differences_are_undecided():
    difference = paired_difference([0.5, 0.6, 0.4], [0.55, 0.5, 0.45])
    assert difference.low < 0 < difference.high and difference.verdict == "undecided"


def test_equal_arms_are_undecided_not_an_error():
    difference = paired_difference([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
    assert difference.mean == 0 and difference.verdict == "undecided"


def test_sign_test_counts_signs_and_gives_the_exact_p():
    # 7 seeds stuck with one head only, 1 with two heads only, 12 alike: p = 2 * 9 / 256
    one = [1.0] * 7 + [0.0] * 13
    two = [0.0] * 7 + [1.0] + [0.0] * 12
    result = sign_test(one, two)
    assert (result.a_higher, result.b_higher) == (7, 1)
    assert result.p == pytest.approx(2 * 9 / 256)
    assert sign_test(two, one).p == result.p  # two-sided
    assert sign_test([1, 2, 3], [1, 2, 3]) == (0, 0, 1.0)  # all ties: nothing to test
    assert sign_test([1, 2, 3, 4, 5, 6], [0] * 6).p == pytest.approx(2 / 64)


def test_permutation_test_weighs_sizes_and_gives_the_exact_p():
    # 7 seeds 10 points ahead, 1 seed 1 point behind: only the all-same flip and its mirror
    # reach the observed sum, with the flip of the small one: 4 of 256
    a, b = [0.1] * 7 + [0.0], [0.0] * 7 + [0.01]
    assert permutation_test(a, b) == pytest.approx(4 / 256)
    assert sign_test(a, b).p == pytest.approx(2 * 9 / 256)  # the signs alone: weaker
    assert permutation_test(b, a) == permutation_test(a, b)  # two-sided
    assert permutation_test([1, 2, 3], [1, 2, 3]) == 1.0  # no difference at all
    with pytest.raises(ValueError, match="at most 20 seeds, got 21"):
        permutation_test([1.0] * 21, [0.0] * 21)
    with pytest.raises(ValueError, match="got 3 and 2 values"):
        permutation_test([1, 2, 3], [1, 2])


def test_t_p_value_meets_the_95_point_and_the_known_tails():
    for df in (1, 2, 5, 7, 29, 30, 45):
        assert t_p_value(t_quantile(df), df) == pytest.approx(0.05, abs=2e-4)
    assert t_p_value(0.0, 7) == pytest.approx(1.0)
    assert t_p_value(-2.5, 7) == t_p_value(2.5, 7)  # two-sided
    assert t_p_value(1.0, 1) == pytest.approx(0.5)  # Cauchy: P(|T| >= 1) = 1/2
    assert t_p_value(3.0, 7) < t_p_value(2.0, 7) < t_p_value(1.0, 7)
    assert 0 < t_p_value(50.0, 7) < 1e-9


def test_paired_t_p_agrees_with_the_interval():
    a, b = [0.9, 0.8, 0.85, 0.95, 0.7], [0.7, 0.75, 0.6, 0.8, 0.72]
    p, d = paired_t_p(a, b), paired_difference(a, b)
    assert (p < 0.05) == (d.verdict != "undecided")
    loose = [0.9, 0.5, 0.85, 0.2, 0.7]
    assert (paired_t_p(loose, b) < 0.05) == (paired_difference(loose, b).verdict != "undecided")
    assert paired_t_p(a, a) == 1.0  # no difference at all
    with pytest.raises(ValueError, match="got 3 and 2 values"):
        paired_t_p([1, 2, 3], [1, 2])


def test_pairs_tested():
    assert [pairs_tested(k) for k in (2, 3, 6)] == [1, 3, 15]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: summarize([1.0]), "values needs at least two values"),
        (lambda: paired_difference([1, 2, 3], [1, 2]), "got 3 and 2 values"),
        (lambda: paired_difference([1, float("nan")], [1, 2]), "a must be finite numbers"),
        (lambda: t_quantile(0), "df must be a positive int, got 0"),
        (lambda: t_p_value(1.0, 0), "df must be a positive int"),
        (lambda: t_p_value(float("inf"), 3), "t must be a finite"),
        (lambda: sign_test([1, 2, 3], [1, 2]), "got 3 and 2 values"),
    ],
)
def test_bad_input_gets_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
