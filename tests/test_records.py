"""Recorded experiments: every record is complete, and its cheapest run is reproduced.

A record that no longer matches the code (a model, the data or the training loop changed)
fails here, with the command that re-records it.
"""

import json
import math
from pathlib import Path

import pytest
import torch

import attnbook
from attnbook import (
    experiments,  # noqa: F401  (registers the experiments)
    records,
)
from attnbook.records import (
    EXPERIMENTS,
    Record,
    check_arm,
    extend,
    load,
    record,
    record_path,
    split_rate_arm,
)

NAMES = sorted(EXPERIMENTS)


def test_every_experiment_has_a_record():
    missing = [name for name in NAMES if not record_path(name).exists()]
    assert not missing, f"no record for {missing}: run ./course experiments {' '.join(missing)}"


def test_records_are_package_data():
    pyproject = (Path(attnbook.__file__).parents[1] / "pyproject.toml").read_text()
    assert '"records/*.json"' in pyproject


@pytest.mark.parametrize("name", NAMES)
def test_record_is_complete(name):
    record, experiment = load(name), EXPERIMENTS[name]
    assert record.arms == list(experiment.arms)
    assert len(record.seeds) >= 5, f"{name}: a record needs at least 5 seeds"
    assert record.settings == experiment.settings, (
        f"{name}: the record was made with {record.settings}, the experiment now says {experiment.settings}; "
        f"re-record it: ./course experiments {name}"
    )
    assert record.data["description"] == experiment.description, (
        f"{name}: the record's description differs from the experiment's; re-record it: ./course experiments {name}"
    )
    for arm in record.arms:
        assert sorted(record.data["values"][arm], key=int) == [str(seed) for seed in record.seeds]
    provenance = record.data["provenance"]
    for key in ("commit", "torch", "numpy", "cpus", "threads", "date", "command"):
        assert key in provenance, key
    assert record.data["wall_seconds"] > 0


@pytest.mark.parametrize("name", NAMES)
def test_record_replays(name):
    """The cheapest (arm, seed) comes back: on the recording CPU (the same ``numerics``) to the
    last digit (counts exactly, floats to 1e-6); on another CPU, where training ends a little
    apart, within the spread of the record's seeds for that arm (3 sd and 0.01 wider)."""
    experiment, stored_record = EXPERIMENTS[name], load(name)
    settings = dict(experiment.replay)
    arm, seed = settings.pop("arm"), settings.pop("seed")
    attnbook.setup(seed)
    replayed = experiment.run(arm, seed, **{**experiment.settings, **settings})
    stored = stored_record.data["values"][arm][str(seed)]
    rerecord = f"the record is stale: re-record it with ./course experiments {name}"
    assert set(replayed) == set(stored), f"{name}: measures {sorted(replayed)} vs stored {sorted(stored)}; {rerecord}"
    made_on = stored_record.data["provenance"].get("numerics")
    if made_on == records.numerics():
        for measure, value in replayed.items():
            expected = stored[measure][: len(value)] if isinstance(value, list) else stored[measure]
            assert _close(value, expected), (
                f"{name}, {arm}, seed {seed}, {measure}: {value} vs stored {expected}; {rerecord}"
            )
        return
    # margin: where every seed agreed (sd 0), another CPU may still differ by a sentence or two
    for measure, value in replayed.items():
        assert stored_record.within_spread(arm, measure, value, margin=0.01), (
            f"{name}, {arm}, seed {seed}, {measure}: {value} is outside the record's seeds "
            f"{stored_record.values(arm, measure) if not isinstance(value, list) else '(a curve)'} "
            f"(recorded on {made_on or 'an unnamed CPU'}, replayed on {records.numerics()}); {rerecord}"
        )


def test_within_spread_compares_a_new_run_with_the_seeds():
    data = dict(
        name="toy",
        arms=["a"],
        seeds=[0, 1, 2],
        settings={},
        provenance=dict(date="today"),
        values={
            "a": {
                "0": dict(em=[0.1, 0.5], n=3, text="x"),
                "1": dict(em=[0.2, 0.6], n=4, text="y"),
                "2": dict(em=[0.3, 0.7], n=5, text="z"),
            }
        },
    )
    record = Record(json.loads(json.dumps(data)))
    assert record.within_spread("a", "n", 4) and record.within_spread("a", "n", 5 + 2.9)  # sd 1: 3 sd out
    assert not record.within_spread("a", "n", 5 + 3.1) and not record.within_spread("a", "n", 3 - 3.1)
    assert record.within_spread("a", "em", [0.25, 0.65]) and record.within_spread("a", "em", [0.3])
    assert not record.within_spread("a", "em", [0.2, 1.05])  # pass 2: 0.7 + 3 sd is 1.0
    assert record.within_spread("a", "text", "anything")  # text is not compared
    assert record.within_spread("a", "em", 0.25, at=1) and not record.within_spread("a", "em", 0.4, at=1, widen=0)
    assert record.within_spread("a", "em", 0.4, at=1, widen=0, margin=0.15)  # 0.3 + 0.15


def _close(value, expected) -> bool:
    if isinstance(value, list):
        return len(value) == len(expected) and all(_close(v, e) for v, e in zip(value, expected))
    if value is None or expected is None or isinstance(value, str):  # a record may keep text (examples)
        return value == expected
    if isinstance(value, (bool, int)) and isinstance(expected, int):
        return value == expected
    return math.isclose(value, expected, rel_tol=0, abs_tol=1e-6)


def test_record_reads_values_and_compares(tmp_path):
    data = dict(
        name="toy",
        arms=["a", "b"],
        seeds=[0, 1, 2],
        settings={},
        provenance=dict(date="today"),
        values={
            "a": {"0": dict(em=[0.1, 0.9], n=3), "1": dict(em=[0.2, 0.8], n=3), "2": dict(em=[0.3, 0.7], n=3)},
            "b": {"0": dict(em=[0.1, 0.5], n=4), "1": dict(em=[0.2, 0.45], n=4), "2": dict(em=[0.3, 0.3], n=4)},
        },
    )
    record = Record(json.loads(json.dumps(data)))
    assert record.values("a", "em", at=1) == [0.1, 0.2, 0.3]
    assert record.values("a", "em") == [0.9, 0.8, 0.7]  # a curve's last pass
    assert record.values("b", "n") == [4, 4, 4]
    assert record.passes() == 2
    assert record.compare("a", "b", "em", at=1).verdict == "undecided"  # equal at pass 1
    assert record.compare("a", "b", "em").verdict == "a"
    with pytest.raises(KeyError, match="has no arm 'c'; its arms are a, b"):
        record.values("c", "em")
    with pytest.raises(KeyError, match="has no measure 'loss'; it has em, n"):
        record.values("a", "loss")
    with pytest.raises(ValueError, match="at=3 is outside the curve of 'em', which has passes 1 to 2"):
        record.values("a", "em", at=3)
    with pytest.raises(ValueError, match="'n' is one number per run, not a curve"):
        record.values("a", "n", at=1)


def test_load_names_the_command_for_a_missing_record():
    with pytest.raises(FileNotFoundError, match="./course experiments no_such_record"):
        load("no_such_record")


def test_worker_processes_give_the_same_record():
    """``jobs=2`` spreads the runs over two processes; every number is the one ``jobs=1`` makes."""
    import record_fixture

    try:
        one = record("tiny", progress=False, write=False)
        two = record("tiny", progress=False, write=False, jobs=2)
    finally:
        EXPERIMENTS.pop("tiny")
    assert record_fixture.tiny_run.__module__ == "record_fixture"
    assert two.data["values"] == one.data["values"]
    assert list(two.data["values"]["wide"]) == [str(seed) for seed in range(5)]
    assert two.data["provenance"]["jobs"] == 2 and two.data["provenance"]["threads"] == 1
    # the CPU as far as rounding goes: what decides whether a replay must be exact
    assert two.data["provenance"]["numerics"] == records.numerics()
    assert records.numerics().endswith(f"torch kernels {torch.backends.cpu.get_cpu_capability()}")
    with pytest.raises(ValueError, match="jobs must be a positive int, got 0"):
        record("luong_scores", jobs=0, write=False)


def test_extend_adds_the_missing_seeds_and_refuses_a_stale_record(tmp_path, monkeypatch):
    """``extend`` runs only the seeds a record lacks; the result equals a record made whole."""
    import importlib

    import record_fixture

    if "tiny" not in EXPERIMENTS:  # an earlier test took it out again
        importlib.reload(record_fixture)
    monkeypatch.setattr(records, "record_path", lambda name: tmp_path / f"{name}.json")
    try:
        whole = record("tiny", progress=False, write=False)
        record("tiny", seeds=(0, 1, 2), progress=False)
        extended = extend("tiny", progress=False)
        assert extended.seeds == [0, 1, 2, 3, 4]
        assert extended.data["values"] == whole.data["values"]
        assert extended.data["summary"] == whole.data["summary"]
        assert extended.data["added"][0]["seeds"] == [3, 4]
        assert load("tiny").seeds == [0, 1, 2, 3, 4]
        data = json.loads((tmp_path / "tiny.json").read_text())
        data["seeds"] = [0, 1, 2]
        data["values"] = {arm: {s: data["values"][arm][s] for s in "012"} for arm in data["values"]}
        data["values"]["narrow"]["0"]["loss"][0] += 0.5  # as if the code had changed since
        (tmp_path / "tiny.json").write_text(json.dumps(data))
        with pytest.raises(ValueError, match="no longer replays .*narrow, seed 0.*re-record it whole"):
            extend("tiny", progress=False)
        data["provenance"]["numerics"] = "another CPU"  # seeds made here would not replay there
        (tmp_path / "tiny.json").write_text(json.dumps(data))
        with pytest.raises(ValueError, match=r"made on another CPU \(another CPU\).*re-record it whole here"):
            extend("tiny", progress=False)
    finally:
        EXPERIMENTS.pop("tiny")


def test_summaries_skip_profiles_and_summarise_curves():
    from attnbook.records import _summaries

    values = {"arm": {str(s): {"curve": [1.0 + s, 2.0], "profile": [[1.0, s], [2.0, s]]} for s in (0, 1, 2)}}
    summary = _summaries(values, (0, 1, 2))["arm"]
    assert set(summary) == {"curve"}  # a list of lists per seed (a profile per pass) has no summary
    assert summary["curve"][0]["mean"] == 2.0 and len(summary["curve"]) == 2


def test_an_arm_outside_its_experiment_is_named_with_the_arms():
    check_arm("a", ("a", "b"))  # no error
    with pytest.raises(ValueError, match="unknown arm 'c'; the arms are a, b$"):
        check_arm("c", ("a", "b"))
    with pytest.raises(ValueError, match="unknown arm 'c'; the only arm is 'a'$"):
        check_arm("c", ("a",))


def test_a_rate_arm_splits_into_its_model_and_its_rate():
    arms = ("plain, lr 0.014", "one head, lr 3e-05")
    assert split_rate_arm("plain, lr 0.014", arms) == ("plain", 0.014)
    assert split_rate_arm("one head, lr 3e-05", arms) == ("one head", 3e-5)
    with pytest.raises(ValueError, match="unknown arm 'plain, lr 0.01'; the arms are plain, lr 0.014, one"):
        split_rate_arm("plain, lr 0.01", arms)


def test_dates_decoder_parts_pairs_exactly_with_dates():
    """Chapter 1 pairs ``dates_decoder_parts`` with ``dates`` seed by seed, two records made on
    different machines. On the CPU that made ``dates_decoder_parts``, ``dates``' Cho decoder comes
    back to the last digit, so the pairs are as tight as within one record."""
    parts = load("dates_decoder_parts")
    if parts.data["provenance"].get("numerics") != records.numerics():
        pytest.skip("only on the CPU that made dates_decoder_parts")
    experiment = EXPERIMENTS["dates"]
    attnbook.setup(0)
    replayed = experiment.run("cho", 0, **experiment.settings)
    assert replayed == load("dates").data["values"]["cho"]["0"]
