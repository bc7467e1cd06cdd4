"""What a second core buys each of Chapter 6's models (the paper's argument for parallel layers).

    ./course bench thread_speed    # or: .venv/bin/python benchmarks/thread_speed.py

The chapter's two models (``transformer_speed.bahdanau`` and ``transformer_speed.transformer``) take one
training step, forward and backward, on a batch of 32 random sequences of length n (as
``transformer_speed``'s lengths), with torch using 1 thread and with 2. A recurrent model must take its
n steps one after another, each a small product; the Transformer's layers treat all positions in a few
large products, which a second core can share. All four contestants of a length take turns in ROUNDS
rounds (``attnbook.cost.compare_speeds``, each round the median of REPEAT calls after one warm-up call),
so the record can pair 1 thread against 2 round by round (``attnbook.cost.speed_ratio``).

It needs a quiet machine with at least 2 cores: a second thread is only worth measuring when a second
core is free. The record keeps the machine's load average before and after. Writes
benchmarks/thread_speed.json, which chapters/06_transformer/03_experiment.ipynb reads.
"""

from pathlib import Path

import torch

import attnbook
from attnbook import data, tasks
from attnbook.cost import compare_speeds, machine_state, write_benchmark
from transformer_speed import bahdanau, training_step, transformer

ROUNDS, REPEAT = 15, 3
LENGTHS = [32, 128]
THREADS = [1, 2]


def with_threads(step, threads: int):
    """``step`` run with torch using ``threads`` threads (set before every call)."""

    def run():
        torch.set_num_threads(threads)
        step()

    return run


def main() -> None:
    attnbook.setup(seed=0)
    before = machine_state()
    splits = tasks.date_splits(n_train=10_000, n_valid=1_000, n_test=1_000, seed=0)  # the chapter's data
    vocabs = data.build_vocabs(splits.train + splits.valid + splits.test)
    models = {"Bahdanau": bahdanau(vocabs), "Transformer": transformer(vocabs)}
    torch.manual_seed(0)
    results = {}
    for n in LENGTHS:
        steps = {
            f"{name}, {threads} thread{'s' if threads > 1 else ''}": with_threads(
                training_step(model, n, vocabs), threads
            )
            for name, model in models.items()
            for threads in THREADS
        }
        results[str(n)] = compare_speeds(steps, rounds=ROUNDS, repeat=REPEAT)
        print(n, {name: round(r["median_ms"], 2) for name, r in results[str(n)].items()}, flush=True)
    torch.set_num_threads(1)
    write_benchmark(
        Path(__file__).parent / "thread_speed.json",
        dict(
            rounds=ROUNDS,
            repeat=REPEAT,
            batch_size=32,
            lengths=LENGTHS,
            threads=THREADS,
            results=results,
            machine_state={"before": before, "after": machine_state()},
        ),
    )


if __name__ == "__main__":
    main()
