"""Recorded experiments: run at full strength outside the notebooks, read by the chapters.

A notebook must run in about a minute, so the experiments inside it are small: one seed, a
short budget. A chapter's *conclusions* rest on records instead: each experiment is a
function ``run(arm, seed, **settings) -> {measure: value}`` registered here, run over many
seeds by ``./course experiments NAME`` and written to ``attnbook/records/NAME.json`` with
every per-seed value, the settings and where the numbers came from. A measure is a number,
or a list with one number per pass over the training data (a curve against budget).

    record = records.load("luong_scores")
    record.values("dot", "exact_match", at=2)     # one value per seed, after 2 passes
    record.compare("dot", "general", "exact_match", at=2)   # attnbook.compare's rule

``tests/test_records.py`` replays each record's cheapest run, so a record cannot go stale
silently: on a CPU that rounds as the recording one did (the same :func:`numerics`) every
stored value comes back to the last digit; on another, training ends a little apart, and the
replay must fall within the spread of the record's seeds (:meth:`Record.within_spread`).
"""

from __future__ import annotations

import datetime
import hashlib
import importlib
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from attnbook import _checks as checks
from attnbook.compare import Difference, Summary, paired_difference, summarize

__all__ = [
    "Experiment",
    "Record",
    "EXPERIMENTS",
    "register",
    "record",
    "extend",
    "load",
    "record_path",
    "provenance",
    "numerics",
]


@dataclass(frozen=True)
class Experiment:
    """An experiment a chapter interprets, defined once.

    Attributes:
        name: the record's file name (``attnbook/records/<name>.json``).
        run: ``run(arm, seed, **settings) -> {measure: float | list[float]}``; a list holds
            one value per pass over the training data.
        arms: the variants compared. seeds: the seeds every arm is run with.
        settings: the full-strength settings passed to ``run``.
        replay: the cheapest run, ``{"arm": ..., "seed": ..., **settings}``, whose values the
            test suite reproduces (a curve's first entries).
        chapter: the notebook that reads the record. description: one sentence.
    """

    name: str
    run: Callable[..., dict]
    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    settings: dict = field(default_factory=dict)
    replay: dict = field(default_factory=dict)
    chapter: str = ""
    description: str = ""


#: Torch threads of every recorded run (:func:`attnbook.setup`'s default).
RUN_THREADS = 1

#: Every registered experiment by name (``attnbook.experiments`` registers the course's).
EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to :data:`EXPERIMENTS` (a name may be registered once)."""
    if experiment.name in EXPERIMENTS:
        raise ValueError(f"an experiment named {experiment.name!r} is already registered")
    EXPERIMENTS[experiment.name] = experiment
    return experiment


def check_arm(arm: str, arms) -> None:
    """Raise a ValueError naming ``arm`` and the allowed ``arms`` unless it is one of them."""
    if arm not in arms:
        if len(arms) == 1:
            raise ValueError(f"unknown arm {arm!r}; the only arm is {next(iter(arms))!r}")
        raise ValueError(f"unknown arm {arm!r}; the arms are {', '.join(arms)}")


def split_rate_arm(arm: str, arms) -> tuple[str, float]:
    """The model and the learning rate that an arm named ``"<model>, lr <rate>"`` names, after
    :func:`check_arm`: ``split_rate_arm("plain, lr 0.014", arms) == ("plain", 0.014)``."""
    check_arm(arm, arms)
    model, rate = arm.rsplit(", lr ", 1)
    return model, float(rate)


def record_path(name: str) -> Path:
    """Where the record ``name`` is stored: ``attnbook/records/<name>.json``."""
    return Path(str(resources.files("attnbook"))) / "records" / f"{name}.json"


class Record:
    """A stored record: per-seed values of every arm, with the comparison rule on top.

    ``at`` counts passes from 1 (``at=2``: after two passes); ``at=None`` takes a number
    as it is, or a curve's last entry.
    """

    def __init__(self, data: dict) -> None:
        self.data = data
        self.name: str = data["name"]
        self.arms: list[str] = data["arms"]
        self.seeds: list[int] = data["seeds"]
        self.settings: dict = data["settings"]

    def values(self, arm: str, measure: str, at: int | None = None) -> list[float]:
        """One value per seed of ``measure`` for ``arm`` (after ``at`` passes for a curve)."""
        if arm not in self.arms:
            raise KeyError(f"record {self.name!r} has no arm {arm!r}; its arms are {', '.join(self.arms)}")
        per_seed = [self.data["values"][arm][str(seed)] for seed in self.seeds]
        if measure not in per_seed[0]:
            raise KeyError(f"record {self.name!r} has no measure {measure!r}; it has {', '.join(sorted(per_seed[0]))}")
        return [_at(values[measure], at, measure) for values in per_seed]

    def summary(self, arm: str, measure: str, at: int | None = None) -> Summary:
        """Mean, sample standard deviation and 95 % interval over the seeds."""
        return summarize(self.values(arm, measure, at))

    def compare(self, a: str, b: str, measure: str, at: int | None = None) -> Difference:
        """``a`` minus ``b``, paired by seed, with the verdict of :func:`attnbook.compare.paired_difference`."""
        return paired_difference(self.values(a, measure, at), self.values(b, measure, at))

    def within_spread(
        self, arm: str, measure: str, value, at: int | None = None, widen: float = 3.0, margin: float = 0.0
    ) -> bool:
        """Whether a new run's ``value`` of ``measure`` lies within ``arm``'s seeds: between their
        smallest and largest, widened by ``widen`` standard deviations and ``margin`` on each side.
        ``value`` is one number (after ``at`` passes for a curve) or a curve's first passes; text is
        not compared. How a run on another CPU, which ends a little apart, is checked against a record."""
        if isinstance(value, list):  # a curve: each pass against the seeds at that pass
            return all(
                self.within_spread(arm, measure, v, pass_, widen, margin)
                for pass_, v in enumerate(value, start=1)
                if _is_number(v)
            )
        if not _is_number(value):
            return True
        per_seed = [v for v in self.values(arm, measure, at) if _is_number(v)]
        if len(per_seed) < 2:  # no spread to speak of (e.g. a measure a seed may lack): the same value
            return value in per_seed
        slack = widen * summarize(per_seed).sd + margin + 1e-6
        return min(per_seed) - slack <= value <= max(per_seed) + slack

    def passes(self, arm: str | None = None) -> int:
        """How many passes the record's curves span (those of ``arm``, default the first arm)."""
        measures = self.data["values"][arm or self.arms[0]][str(self.seeds[0])]
        return max((len(value) for value in measures.values() if isinstance(value, list)), default=0)

    def __repr__(self) -> str:
        return (
            f"Record({self.name!r}: {len(self.arms)} arms x {len(self.seeds)} seeds, "
            f"recorded {self.data['provenance']['date']})"
        )


def _at(value, at: int | None, measure: str) -> float:
    if not isinstance(value, list):
        if at is not None:
            raise ValueError(f"measure {measure!r} is one number per run, not a curve: leave out at=")
        return value
    if at is None:
        return value[-1]
    if not 1 <= at <= len(value):
        raise ValueError(f"at={at} is outside the curve of {measure!r}, which has passes 1 to {len(value)}")
    return value[at - 1]


def load(name: str) -> Record:
    """The stored record ``name``.

    Raises:
        FileNotFoundError: naming the command that makes it, if it has not been recorded.
    """
    path = record_path(name)
    if not path.exists():
        raise FileNotFoundError(f"no record {name!r} at {path}; make it with ./course experiments {name}")
    return Record(json.loads(path.read_text()))


def record(
    name: str, seeds: tuple[int, ...] | None = None, progress: bool = True, write: bool = True, jobs: int = 1
) -> Record:
    """Run experiment ``name`` for every arm and seed, and write its record.

    Each run starts from :func:`attnbook.setup` with its seed (so one thread). With ``jobs`` > 1
    the runs are shared among that many worker processes, each still one thread; a run's
    numbers do not depend on which process made it. The record holds the settings, the
    seeds, every per-seed value, a summary (mean, sd, 95 % interval of every number), the
    wall time and the provenance (commit, versions, CPUs, threads, jobs, date, command).
    """
    experiment = _experiment(name)
    checks.positive_int(jobs=jobs)
    seeds = tuple(experiment.seeds if seeds is None else seeds)
    # the code as it is when the runs start; each run's threads are setup's, not this process's
    made_by = {**provenance(), "threads": RUN_THREADS, "jobs": jobs}
    started = time.perf_counter()
    values = _run_all(name, seeds, jobs, progress)
    data = dict(
        name=name,
        description=experiment.description,
        chapter=experiment.chapter,
        settings=experiment.settings,
        arms=list(experiment.arms),
        seeds=list(seeds),
        values=values,
        summary=_summaries(values, seeds),
        replay=experiment.replay,
        wall_seconds=round(time.perf_counter() - started, 1),
        provenance=made_by,
    )
    if write:
        path = record_path(name)
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n")
    return Record(data)


def extend(name: str, progress: bool = True, jobs: int = 1) -> Record:
    """Run the seeds of experiment ``name`` that its stored record lacks, and add them to it.

    The record must come from this CPU (the same :func:`numerics`), and its cheapest run (its
    ``replay``) is made again and must give the stored values (to 1e-6, as the test suite asks),
    so the new seeds come from the code and the arithmetic that made the old ones.
    The record keeps the provenance of its first runs and lists each addition under ``added``.
    """
    experiment, stored = _experiment(name), load(name)
    checks.positive_int(jobs=jobs)
    if stored.settings != experiment.settings or stored.arms != list(experiment.arms):
        raise ValueError(
            f"record {name!r} was made with arms {stored.arms} and settings {stored.settings}; the experiment "
            f"now has {list(experiment.arms)} and {experiment.settings}: re-record it whole"
        )
    new = tuple(seed for seed in experiment.seeds if seed not in stored.seeds)
    if not new:
        return stored
    made_on = stored.data["provenance"].get("numerics")
    if made_on != numerics():
        raise ValueError(
            f"record {name!r} was made on another CPU ({made_on or 'one it does not name'}); this one "
            f"({numerics()}) trains a seed to other numbers, so the record could no longer be replayed "
            "exactly: re-record it whole here"
        )
    settings = dict(experiment.replay)
    arm, seed = settings.pop("arm"), settings.pop("seed")
    from attnbook import setup

    setup(seed, threads=RUN_THREADS)
    replayed = _plain(experiment.run(arm, seed, **{**experiment.settings, **settings}))
    if not _same(replayed, stored.data["values"][arm][str(seed)]):
        raise ValueError(f"record {name!r} no longer replays (its {arm}, seed {seed}): re-record it whole")
    made_by = {**provenance(), "threads": RUN_THREADS, "jobs": jobs, "seeds": list(new)}
    started = time.perf_counter()
    values = _run_all(name, new, jobs, progress)
    data = dict(stored.data)
    seeds = tuple(sorted((*stored.seeds, *new)))
    data["values"] = {arm: {**data["values"][arm], **values[arm]} for arm in experiment.arms}
    data["values"] = {arm: {str(s): data["values"][arm][str(s)] for s in seeds} for arm in experiment.arms}
    data["seeds"] = list(seeds)
    data["summary"] = _summaries(data["values"], seeds)
    data["wall_seconds"] = round(data["wall_seconds"] + time.perf_counter() - started, 1)
    data["added"] = [*data.get("added", []), made_by]
    record_path(name).write_text(json.dumps(data, indent=1) + "\n")
    return Record(data)


def _same(replayed, stored) -> bool:
    """The replay's values equal the stored ones: a curve's first entries, floats to 1e-6."""
    if isinstance(replayed, dict):
        return set(replayed) == set(stored) and all(_same(replayed[key], stored[key]) for key in replayed)
    if isinstance(replayed, list):
        return isinstance(stored, list) and all(_same(r, s) for r, s in zip(replayed, stored[: len(replayed)]))
    if replayed is None or stored is None or isinstance(replayed, (bool, str)):
        return replayed == stored
    return abs(replayed - stored) <= 1e-6


def _run_all(name: str, seeds: tuple[int, ...], jobs: int, progress: bool) -> dict:
    """Every arm of ``name`` with every seed in ``seeds``: ``{arm: {str(seed): values}}``."""
    experiment = _experiment(name)
    runs = [(arm, seed) for arm in experiment.arms for seed in seeds]
    values: dict[str, dict[str, dict]] = {arm: {} for arm in experiment.arms}
    bar = _progress(len(runs), name) if progress else None
    if jobs == 1:
        finished = (((arm, seed), _run_one(name, "", arm, seed)) for arm, seed in runs)
    else:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
        module = experiment.run.__module__  # where a worker finds the experiment registered
        futures = {pool.submit(_run_one, name, module, arm, seed): (arm, seed) for arm, seed in runs}
        finished = ((futures[future], future.result()) for future in as_completed(futures))
    for (arm, seed), found in finished:
        values[arm][str(seed)] = found
        if bar is not None:
            bar.set_postfix_str(f"{arm}, seed {seed}")
            bar.update()
    if jobs > 1:
        pool.shutdown()
    if bar is not None:
        bar.close()
    return {arm: {str(seed): values[arm][str(seed)] for seed in seeds} for arm in experiment.arms}


def _run_one(name: str, module: str, arm: str, seed: int) -> dict:
    """One run of a registered experiment from :func:`attnbook.setup`'s state for ``seed``;
    a worker process first imports ``module``, which registers it."""
    from attnbook import setup

    if module:
        importlib.import_module(module)
    experiment = _experiment(name)
    setup(seed, threads=RUN_THREADS)
    return _plain(experiment.run(arm, seed, **experiment.settings))


def _experiment(name: str) -> Experiment:
    import attnbook.experiments  # noqa: F401  (registers the course's experiments)

    if name not in EXPERIMENTS:
        raise KeyError(f"no experiment named {name!r}; the experiments are {', '.join(sorted(EXPERIMENTS))}")
    return EXPERIMENTS[name]


def _summaries(values: dict, seeds: tuple[int, ...]) -> dict:
    """Mean, sd and 95 % interval of every number (of every pass of a curve), per arm and measure."""
    out = {}
    for arm, per_seed in values.items():
        out[arm] = {}
        for measure in per_seed[str(seeds[0])]:
            runs = [per_seed[str(seed)][measure] for seed in seeds]
            flat = np.ravel(np.array(runs, dtype=object))
            nested = isinstance(runs[0], list) and any(isinstance(value, list) for value in runs[0])
            if len(seeds) < 2 or nested or any(value is None or isinstance(value, str) for value in flat):
                continue  # no summary of a missing value, of text (a record may keep examples) or of a profile
            columns = zip(*runs) if isinstance(runs[0], list) else [runs]
            out[arm][measure] = [
                {key: round(number, 6) for key, number in summarize(column)._asdict().items()} for column in columns
            ]
    return out


def _plain(values: dict) -> dict:
    """JSON-ready copies: Python floats and ints, lists of them."""

    def plain(value):
        if isinstance(value, (list, tuple)):
            return [plain(item) for item in value]
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, np.integer)):
            return int(value)
        return float(value)

    return {key: plain(value) for key, value in values.items()}


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def numerics() -> str:
    """The CPU that does a run's floating-point work, as far as rounding goes: its vendor,
    family, model and stepping, a digest of its feature flags (Linux's ``/proc/cpuinfo``;
    ``platform.processor()`` elsewhere) and the level of torch's CPU kernels. Two machines
    with the same string train a seed to the same numbers; on others a training run ends a
    little apart (different kernels round differently, and training amplifies it)."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("vendor_id", "cpu family", "model", "stepping", "flags") and key not in fields:
                fields[key] = value.strip()
    except OSError:
        pass
    flags = hashlib.sha1(fields.get("flags", "").encode()).hexdigest()[:8]
    cpu = " ".join(fields.get(k, "?") for k in ("vendor_id", "cpu family", "model", "stepping"))
    if not fields:
        cpu, flags = platform.processor() or platform.machine(), "-"
    return f"{cpu} (flags {flags}), torch kernels {torch.backends.cpu.get_cpu_capability()}"


def provenance() -> dict:
    """Where numbers were made: commit, versions, CPUs and :func:`numerics`, torch's thread
    count, date, command."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        # the package's code, not the records it writes (a run of several records changes those)
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--", "code", ":(exclude)code/attnbook/records"],
                cwd=root,
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = None, None
    return dict(
        commit=commit,
        code_changed_since_commit=dirty,
        torch=torch.__version__,
        numpy=np.__version__,
        python=platform.python_version(),
        cpus=os.cpu_count(),
        numerics=numerics(),
        threads=torch.get_num_threads(),
        date=datetime.date.today().isoformat(),
        command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    )


def _progress(total: int, name: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=name, unit="run", file=sys.stderr, dynamic_ncols=True)
