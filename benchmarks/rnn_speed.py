"""What one training epoch costs for Chapters 1 and 2's models (Chapter 2 reads the record).

    ./course bench rnn_speed       # or: .venv/bin/python benchmarks/rnn_speed.py

One pass of attnbook.training.fit (no validation) over the training data of the two recorded
experiments the chapters compare: the reversal benchmark (5 000 strings of 3 to 30 letters,
batches of 64; attnbook.experiments.reversal's arms) and the dates (10 000 dates, batches of
128; attnbook.experiments.dates's arms). One thread; the models alternate over 5 rounds.
Writes benchmarks/rnn_speed.json: per model the median epoch over the rounds and the lowest and
highest round, in seconds. Run it on a quiet machine.
"""

from pathlib import Path

import torch

import attnbook
from attnbook.cost import compare_speeds, write_benchmark
from attnbook.data import Batches, build_vocabs
from attnbook.experiments import REVERSAL_BENCHMARK
from attnbook.experiments.dates import DATE_ARMS, date_data, date_model
from attnbook.experiments.reversal import FACTORIES, REVERSAL_ARMS
from attnbook.tasks import reversal_task, sequence_splits
from attnbook.training import fit

ROUNDS = 5


def main() -> None:
    attnbook.setup(seed=0)  # one thread
    setting = REVERSAL_BENCHMARK
    splits = sequence_splits(
        reversal_task, setting["n_train"], 0, setting["n_test"], seed=0,
        min_length=setting["min_length"], max_length=setting["max_length"],
    )  # fmt: skip
    src_vocab, tgt_vocab = build_vocabs(splits.train + splits.test)
    reversal = Batches(splits.train, src_vocab, tgt_vocab, 64, shuffle=True, seed=0)
    dates = date_data()
    date_batches = Batches(dates.splits.train, dates.src_vocab, dates.tgt_vocab, 128, shuffle=True, seed=0)

    def epoch(model, batches):
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        return lambda: fit(model, batches, epochs=1, optimizer=optimizer, progress=False)

    steps = {
        f"reversal/{arm}": epoch(FACTORIES[arm](len(src_vocab), len(tgt_vocab)), reversal) for arm in REVERSAL_ARMS
    }
    steps |= {f"dates/{arm}": epoch(date_model(arm), date_batches) for arm in DATE_ARMS}
    timings = compare_speeds(steps, rounds=ROUNDS, repeat=1)
    seconds = {
        name: {key.replace("_ms", "_s"): round(timing[key] / 1000, 3) for key in ("median_ms", "low_ms", "high_ms")}
        for name, timing in timings.items()
    }
    for name, timing in seconds.items():
        low, high = timing["low_s"], timing["high_s"]
        print(f"{name:22} {timing['median_s']:6.2f} s per epoch (rounds {low:.2f} to {high:.2f})")
    write_benchmark(
        Path(__file__).with_suffix(".json"),
        {
            "setting": dict(
                epoch="one pass of fit over the training data, no validation",
                reversal="5 000 strings of 3 to 30 letters, batches of 64",
                dates="10 000 dates, batches of 128",
                threads=torch.get_num_threads(),
                rounds=ROUNDS,
            ),
            "seconds_per_epoch": seconds,
        },
    )


if __name__ == "__main__":
    main()
