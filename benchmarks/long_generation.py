"""A whole generation with and without the key/value cache, at the batch of ``long_inputs``' steps (Chapter 7).

    .venv/bin/python benchmarks/long_generation.py

``long_inputs.json`` times single generation steps for 8 sequences after t tokens. This record times the
whole generation that 02_long_inputs runs, with the same 8 sequences: 300 new tokens from a one-token
prompt, Chapter 7's decoder-only model (``long_inputs.new_model``, untrained: the time does not depend on
the weights), positions up to 1 024, with the cache and without, both ways giving the same tokens. The two
ways take turns in ``ROUNDS`` rounds (``attnbook.cost.compare_speeds``), one generation per round, after a
warm-up call each; the record keeps the median, the fastest and the slowest round and every round's time.
One thread. Writes benchmarks/long_generation.json.
"""

from pathlib import Path

import torch

import attnbook
from attnbook import cost
from attnbook.language_models import generate
from long_inputs import MODEL, new_model

ROUNDS = 7
SETTING = dict(sequences=8, tokens=300, max_len=1024)


def main() -> None:
    attnbook.setup(seed=0)  # one thread
    before = cost.machine_state()
    model = new_model(SETTING["max_len"])
    prompt = torch.full((SETTING["sequences"], 1), 1)  # (B, 1)

    def run(use_cache):
        generator = torch.Generator().manual_seed(0)
        return generate(model, prompt, SETTING["tokens"], 1.0, None, generator, use_cache=use_cache)

    with torch.no_grad():
        assert torch.equal(run(True), run(False))
        timed = cost.compare_speeds(
            {"with the cache": lambda: run(True), "without": lambda: run(False)}, rounds=ROUNDS, repeat=1
        )
    for way, result in timed.items():
        print(f"{way}: {result['median_ms']:.1f} ms", flush=True)
    results = {
        "rounds": ROUNDS,
        "setting": dict(SETTING, **MODEL, threads=torch.get_num_threads()),
        **{way: {**result, "repeat": 1} for way, result in timed.items()},
        "machine_state": {"before": before, "after": cost.machine_state()},
    }
    cost.write_benchmark(Path(__file__).parent / "long_generation.json", results)


if __name__ == "__main__":
    main()
