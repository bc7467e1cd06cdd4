"""The course's one rule for comparing runs: mean, spread, a 95 % interval, paired by seed.

Every arm of an experiment is trained from the same seeds on the same data. For each arm:
the mean, the sample standard deviation and a 95 % t-interval of the mean. For two arms:
the per-seed differences ``a[i] - b[i]`` and their 95 % t-interval. A difference is
claimed only when that interval excludes zero; otherwise the comparison is *undecided*.

Pairing by seed removes what the two runs of one seed share (the data order, the luck of
the initial weights where the arms have the same shapes), so it decides more often than
comparing two unpaired means -- but never more than the seeds allow.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from typing import NamedTuple

__all__ = [
    "Summary",
    "Difference",
    "SignTest",
    "summarize",
    "paired_difference",
    "sign_test",
    "permutation_test",
    "t_quantile",
    "pairs_tested",
]

# t_{0.975} for 1..30 degrees of freedom (two-sided 95 %), from the t distribution's tables.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


class Summary(NamedTuple):
    """One arm: ``n`` values, their mean, sample standard deviation and 95 % interval of the mean."""

    n: int
    mean: float
    sd: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.mean:.3f} ± {self.sd:.3f} (95 % interval {self.low:.3f} to {self.high:.3f}, n={self.n})"


class Difference(NamedTuple):
    """Arm ``a`` minus arm ``b``, paired by seed: mean difference, its 95 % interval, the verdict.

    ``verdict`` is ``"a"`` when the interval lies above zero, ``"b"`` when below (for a
    measure where higher is better, that arm is ahead), and ``"undecided"`` otherwise.
    """

    n: int
    mean: float
    low: float
    high: float
    verdict: str


class SignTest(NamedTuple):
    """Arm ``a`` against arm ``b``, paired by seed, counting signs only: in how many seeds ``a`` was
    higher, in how many ``b`` (ties dropped), and the exact two-sided p of a split at least that
    uneven if each way were equally likely."""

    a_higher: int
    b_higher: int
    p: float


def t_quantile(df: int) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (a 95 % two-sided interval).

    Tabled up to 30; above, the Cornish-Fisher expansion around the normal quantile (error < 1e-3).
    """
    if not isinstance(df, int) or df < 1:
        raise ValueError(f"df must be a positive int, got {df!r}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def summarize(values: Sequence[float]) -> Summary:
    """Mean, sample standard deviation and 95 % t-interval of the mean of ``values`` (>= 2 of them)."""
    values = _floats("values", values)
    n, mean, sd = len(values), statistics.fmean(values), statistics.stdev(values)
    half = t_quantile(n - 1) * sd / math.sqrt(n)
    return Summary(n, mean, sd, mean - half, mean + half)


def paired_difference(a: Sequence[float], b: Sequence[float]) -> Difference:
    """The 95 % interval of the mean of ``a[i] - b[i]`` (the same seed ``i`` in both arms), and the verdict.

    Raises:
        ValueError: if ``a`` and ``b`` differ in length or hold fewer than two values.
    """
    differences = summarize(_paired("a", a, "b", b))
    verdict = "a" if differences.low > 0 else "b" if differences.high < 0 else "undecided"
    return Difference(differences.n, differences.mean, differences.low, differences.high, verdict)


def sign_test(a: Sequence[float], b: Sequence[float]) -> SignTest:
    """The exact sign test beside :func:`paired_difference`, for few seeds or values that are
    0 or 1 (stuck or not): it uses only which of ``a[i]``, ``b[i]`` is higher.

    Raises:
        ValueError: if ``a`` and ``b`` differ in length or hold fewer than two values.
    """
    a, b = _floats("a", a), _floats("b", b)
    if len(a) != len(b):
        raise ValueError(f"a and b must hold one value per seed, paired: got {len(a)} and {len(b)} values")
    a_higher = sum(x > y for x, y in zip(a, b))
    b_higher = sum(y > x for x, y in zip(a, b))
    n = a_higher + b_higher
    tail = sum(math.comb(n, k) for k in range(min(a_higher, b_higher) + 1)) / 2**n
    return SignTest(a_higher, b_higher, min(1.0, 2 * tail))


def permutation_test(a: Sequence[float], b: Sequence[float]) -> float:
    """The exact paired permutation test beside :func:`sign_test`: unlike it, it weighs the
    differences' sizes. Each seed's difference ``a[i] - b[i]`` may have either sign when the two
    are alike; the p-value is the share of the ``2^n`` sign flips whose sum is at least as far
    from 0 as the observed one (two-sided). Meant for few seeds (``2^n`` sums).

    Raises:
        ValueError: if ``a`` and ``b`` differ in length, hold fewer than two values or more than 20.
    """
    a, b = _floats("a", a), _floats("b", b)
    if len(a) != len(b):
        raise ValueError(f"a and b must hold one value per seed, paired: got {len(a)} and {len(b)} values")
    if len(a) > 20:
        raise ValueError(f"permutation_test enumerates 2^n sign flips: at most 20 seeds, got {len(a)}")
    d = [x - y for x, y in zip(a, b)]
    observed = abs(sum(d))
    sums = (abs(sum(s * v for s, v in zip(signs, d))) for signs in itertools.product((1, -1), repeat=len(d)))
    return sum(total >= observed - 1e-12 for total in sums) / 2 ** len(d)


def t_p_value(t: float, df: int) -> float:
    """The two-sided p of Student's t: the chance that ``|T| >= |t|`` with ``df`` degrees of
    freedom, from the regularised incomplete beta function, ``I_x(df/2, 1/2)`` at
    ``x = df / (df + t^2)``. For a p-value at any level (a Bonferroni correction, say), where
    :func:`t_quantile` gives only the 95 % point.

    Raises:
        ValueError: if ``t`` is not finite or ``df`` is not a positive int.
    """
    if not isinstance(df, int) or df < 1:
        raise ValueError(f"df must be a positive int, got {df!r}")
    if not math.isfinite(t):
        raise ValueError(f"t must be a finite number, got {t!r}")
    return _incomplete_beta(df / 2, 0.5, df / (df + t * t))


def paired_t_p(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sided p of the paired t-test behind :func:`paired_difference` (the same
    differences, mean over standard error): below 0.05 when its 95 % interval excludes 0 (up to the
    rounding of the t table behind that interval).
    1.0 when every difference is 0.

    Raises:
        ValueError: if ``a`` and ``b`` differ in length or hold fewer than two values.
    """
    d = summarize(_paired("a", a, "b", b))
    if d.sd == 0:
        return 1.0 if d.mean == 0 else 0.0
    return t_p_value(d.mean / (d.sd / math.sqrt(d.n)), d.n - 1)


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), by its continued fraction (Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast only below this point
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * fraction / a


def pairs_tested(k: int) -> int:
    """How many pairs a table of ``k`` arms compares when every arm meets every other: k(k-1)/2."""
    return k * (k - 1) // 2


def _paired(name_a: str, a: Sequence[float], name_b: str, b: Sequence[float]) -> list[float]:
    """``a[i] - b[i]`` for each seed, after checking both hold finite values, paired."""
    a, b = _floats(name_a, a), _floats(name_b, b)
    if len(a) != len(b):
        raise ValueError(f"a and b must hold one value per seed, paired: got {len(a)} and {len(b)} values")
    return [x - y for x, y in zip(a, b)]


def _floats(name: str, values: Sequence[float]) -> list[float]:
    values = [float(value) for value in values]
    if len(values) < 2:
        raise ValueError(f"{name} needs at least two values (seeds) for a spread, got {len(values)}")
    if not all(math.isfinite(value) for value in values):
        raise ValueError(f"{name} must be finite numbers, got {values}")
    return values
