"""attnbook.cost's timing helpers, on a fake clock: no test here depends on how busy the machine is."""

import json

import pytest

from attnbook import cost


class FakeClock:
    """time.perf_counter that advances only when a timed function runs, by a scripted amount."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def step(self, seconds):
        def run():
            self.now += seconds.pop(0) if isinstance(seconds, list) else seconds

        return run


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(cost.time, "perf_counter", fake)
    return fake


def test_seconds_is_the_median_after_the_warmup(clock):
    durations = [9.0, 1.0, 5.0, 2.0]  # the warm-up (9 s) is not timed
    assert cost.seconds(clock.step(durations), repeat=3, warmup=1) == 2.0
    assert durations == []


def test_compare_speeds_reports_median_and_spread_per_step(clock):
    a = [0.5] + [0.010, 0.011, 0.012] * 2 + [0.020, 0.020, 0.020]  # warm-up, then 3 rounds of 3 calls
    b = [0.5] + [0.030] * 9
    result = cost.compare_speeds({"a": clock.step(a), "b": clock.step(b)}, rounds=3, repeat=3)
    assert result["a"] == dict(
        median_ms=11.0, low_ms=11.0, high_ms=20.0, rounds=3, round_ms=[11.0, 11.0, 20.0], round_place=[0, 1, 0]
    )
    assert result["b"]["median_ms"] == pytest.approx(30.0) and result["b"]["rounds"] == 3
    assert a == [] and b == []  # every call was made, the steps alternating
    assert result["b"]["round_place"] == [1, 0, 1]  # the order rotates: b runs first in round 2


def test_compare_speeds_rotates_the_order_of_three_steps(clock):
    calls = []

    def step(name):
        def call():
            calls.append(name)

        return call

    result = cost.compare_speeds({n: step(n) for n in "abc"}, rounds=4, repeat=1)
    assert calls == list("abc") + list("abc") + list("bca") + list("cab") + list("abc")
    assert [result[n]["round_place"] for n in "abc"] == [[0, 2, 1, 0], [1, 0, 2, 1], [2, 1, 0, 2]]


def test_write_benchmark_adds_provenance(tmp_path):
    path = tmp_path / "bench.json"
    cost.write_benchmark(path, {"milliseconds": {"a": {"median_ms": 1.0}}})
    written = json.loads(path.read_text())
    assert written["milliseconds"]["a"]["median_ms"] == 1.0
    assert {"threads", "cpus", "torch", "date", "command"} <= set(written["provenance"])


def test_seconds_waits_for_a_gpu_before_reading_the_clock(clock, monkeypatch):
    """On a GPU a call returns when its kernels are queued; the time counts only after
    torch.cuda.synchronize. Faked here, so the test runs without a GPU."""
    events = []
    monkeypatch.setattr(cost.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cost.torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(cost.torch.cuda, "synchronize", lambda: events.append("sync"))
    step = clock.step(0.5)

    def launch():
        events.append("call")
        step()

    cost.seconds(launch, repeat=3, warmup=1)
    assert events == ["call", "sync"] * 4  # every call, the warm-up included, then a wait


def _rounds(*values):
    return {"round_ms": list(values)}


def test_speed_ratio_pairs_the_rounds_and_names_the_slower_step():
    # b is twice a in every round, however much the machine's speed moves between rounds
    a, b = _rounds(10.0, 30.0, 12.0, 50.0), _rounds(20.0, 60.0, 24.0, 100.0)
    both = cost.speed_ratio(b, a)
    assert both.rounds == 4 and abs(both.ratio - 2.0) < 1e-9 and both.verdict == "a"
    assert cost.speed_ratio(a, b).verdict == "b"
    # unpaired, these rounds overlap; paired, the noise cancels
    assert min(b["round_ms"]) < max(a["round_ms"])


def test_speed_ratio_is_undecided_when_the_rounds_disagree():
    result = cost.speed_ratio(_rounds(10.0, 12.0, 9.0), _rounds(11.0, 10.0, 10.0))
    assert result.verdict == "undecided" and result.low < 1 < result.high


def test_speed_ratio_refuses_unpaired_or_bare_input():
    with pytest.raises(ValueError, match="same rounds: got 2 and 3"):
        cost.speed_ratio(_rounds(1.0, 2.0), _rounds(1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="a must be a compare_speeds entry with 'round_ms'"):
        cost.speed_ratio({"median_ms": 3.0}, _rounds(1.0, 2.0))


def test_benchmark_cpu_names_the_recording_machine():
    assert cost.benchmark_cpu({"provenance": {"cpus": 2}}) == cost.EARLIER_CPU
    named = {"provenance": {"cpus": 2, "numerics": "GenuineIntel 6 167 1 (flags 694479ca), torch kernels AVX2"}}
    assert cost.benchmark_cpu(named).startswith("2-core Intel (GenuineIntel 6 167 1")
