"""Measuring what a computation costs on this machine: wall time, peak memory, growth rate.

Live timings in a notebook only print: a busy machine can make anything slow. Claims about
speed read benchmark records (``benchmarks/*.json``), made on a quiet machine by
:func:`compare_speeds` (several rounds, median and spread) and written by
:func:`write_benchmark` with the thread count and versions.
"""

from __future__ import annotations

import ctypes
import json
import math
import re
import statistics
import time
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

import numpy as np
import torch

__all__ = [
    "seconds",
    "compare_speeds",
    "speed_ratio",
    "machine_state",
    "write_benchmark",
    "benchmark_cpu",
    "peak_memory",
    "log_slope",
]

#: What made the benchmarks written before their provenance named the CPU (all of them up to
#: 2026-11-29): the course's 2-core AMD EPYC machines. Later ones carry ``numerics``.
EARLIER_CPU = "a 2-core AMD EPYC (AVX2), the course's machine until 2026-11-29"


def seconds(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> float:
    """The median wall time of ``repeat`` calls of ``fn()``, after ``warmup`` calls that are not timed."""
    for _ in range(warmup):
        fn()
        _wait_for_gpu()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        _wait_for_gpu()  # a GPU runs asynchronously: without this we would time the launch only
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _wait_for_gpu() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def compare_speeds(steps: dict[str, Callable[[], object]], rounds: int = 7, repeat: int = 5) -> dict[str, dict]:
    """Time several computations in alternating rounds, so a slow moment of the machine hits all of them.

    Every step is called once to warm up; then, ``rounds`` times, each step gets the median of
    ``repeat`` calls (:func:`seconds`). Round ``r`` starts ``r`` steps further down the list (the order
    rotates), so no step always runs first; each still runs after the same neighbour in the list (a
    rotation keeps the cyclic order), so an effect of what ran just before is not paired away. Returns,
    per step, the median over the rounds, the lowest and highest round, every round in order, in
    milliseconds, and its place in each round (0 = first):
    ``{"median_ms", "low_ms", "high_ms", "rounds", "round_ms", "round_place"}``;
    two steps' ``round_ms`` pair up by round (the same moment of the machine), so a ratio can be read
    round by round.
    """
    for step in steps.values():
        step()
    names = list(steps)
    per_round: dict[str, list[float]] = {name: [] for name in names}
    places: dict[str, list[int]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for place, name in enumerate(names[shift:] + names[:shift]):
            per_round[name].append(1000 * seconds(steps[name], repeat=repeat, warmup=0))
            places[name].append(place)
    return {
        name: dict(
            median_ms=round(statistics.median(values), 4),
            low_ms=round(min(values), 4),
            high_ms=round(max(values), 4),
            rounds=rounds,
            round_ms=[round(value, 4) for value in values],
            round_place=places[name],
        )
        for name, values in per_round.items()
    }


class SpeedRatio(NamedTuple):
    """Step ``a``'s time over step ``b``'s, paired by round: the geometric mean of the rounds' ratios,
    its 95 % interval, and the verdict (``"a"`` slower, ``"b"`` slower, or ``"undecided"``)."""

    rounds: int
    ratio: float
    low: float
    high: float
    verdict: str


def speed_ratio(a: dict, b: dict) -> SpeedRatio:
    """The course's comparison rule for two steps timed by :func:`compare_speeds` in the same rounds.

    Each round times both steps at the same moment of the machine, so the rounds pair up as seeds do:
    the paired t-interval of ``log(a) - log(b)`` (:func:`attnbook.compare.paired_difference`), turned
    back into a ratio. The verdict names the step that is decidedly slower, if either.
    """
    from attnbook.compare import paired_difference

    for name, step in (("a", a), ("b", b)):
        if not isinstance(step, dict) or "round_ms" not in step:
            raise ValueError(f"{name} must be a compare_speeds entry with 'round_ms', got {type(step).__name__}")
    logs = [[math.log(ms) for ms in step["round_ms"]] for step in (a, b)]
    if len(logs[0]) != len(logs[1]):
        raise ValueError(f"a and b must come from the same rounds: got {len(logs[0])} and {len(logs[1])} rounds")
    d = paired_difference(*logs)
    return SpeedRatio(d.n, math.exp(d.mean), math.exp(d.low), math.exp(d.high), d.verdict)


def machine_state() -> dict:
    """The load average and, on Linux, this session's scheduling group and its priority (autogroup)."""
    import os

    autogroup = Path("/proc/self/autogroup")
    return {
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "autogroup": autogroup.read_text().strip() if autogroup.exists() else None,
    }


def write_benchmark(path: str | Path, results: dict) -> dict:
    """Write a benchmark record: ``results`` plus where it was measured (threads, CPUs, versions, date, command)."""
    from attnbook.records import provenance

    report = {**results, "provenance": provenance()}
    Path(path).write_text(json.dumps(report, indent=2) + "\n")
    return report


def benchmark_cpu(report: dict) -> str:
    """The CPU a benchmark record was measured on, in words: its ``numerics`` (see
    :func:`attnbook.records.numerics`) when the record names it, else :data:`EARLIER_CPU`."""
    named = report.get("provenance", {}).get("numerics")
    if named is None:
        return EARLIER_CPU
    vendor = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}.get(named.split()[0], named.split()[0])
    return f"{report['provenance'].get('cpus', '?')}-core {vendor} ({named})"


def peak_memory(fn: Callable[[], object], repeat: int = 1) -> int | None:
    """The most memory ``fn()`` held at once beyond what the process held before the call, in bytes.

    Read from Linux's peak resident set size (``VmHWM`` in ``/proc/self/status``), which writing ``5`` to
    ``/proc/self/clear_refs`` resets. glibc's ``M_MMAP_THRESHOLD`` is fixed at 1 MiB (by default it moves), so
    most large blocks come fresh from the system and count; but glibc may still carve a request from memory
    the process already holds (freed earlier), which the counter does not see. So the result is a lower
    bound on what the call's tensors needed at once, close to it for large arrays; small readings (about
    a MiB or less) say little. Readings of the same call can also differ by a block now and then (the
    cause was not found), so with ``repeat`` > 1 the call runs that many times and the largest is
    returned. None where Linux's counters are missing.
    """
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"peak_memory: repeat must be a positive int, got {repeat!r}")
    _fix_mmap_threshold()
    peaks = []
    for _ in range(repeat):
        try:
            with open("/proc/self/clear_refs", "w") as reset:
                reset.write("5")
            before = _status_bytes("VmRSS")
        except OSError:
            return None
        result = fn()
        peaks.append(max(_status_bytes("VmHWM") - before, 0))
        del result
    return max(peaks)


def _fix_mmap_threshold() -> None:
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD = -3: blocks >= 1 MiB are mapped
    except (OSError, AttributeError):
        pass  # not glibc: the peak may miss reused memory


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        return int(re.search(rf"{field}:\s+(\d+) kB", status.read()).group(1)) * 1024


def log_slope(lengths: Sequence[float], values: Sequence[float]) -> float:
    """The slope of ``log(values)`` against ``log(lengths)`` by least squares: ``values ∝ lengths^slope``."""
    x, y = np.log(np.asarray(lengths, dtype=float)), np.log(np.asarray(values, dtype=float))
    if len(x) < 2 or np.any(~np.isfinite(x)) or np.any(~np.isfinite(y)):
        raise ValueError(
            f"log_slope needs at least two positive lengths and values, got {list(lengths)} and {list(values)}"
        )
    dx = x - x.mean()
    # the least-squares slope in closed form: np.polyfit goes through LAPACK, whose last digits
    # can change with the BLAS build and its threads, and the notebooks store these numbers
    return float((dx * (y - y.mean())).sum() / (dx * dx).sum())
