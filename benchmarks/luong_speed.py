"""What one training step costs for each of Chapter 3's decoders (Chapter 3 reads the record).

    ./course bench luong_speed       # or: .venv/bin/python benchmarks/luong_speed.py

One forward and backward pass (cross-entropy, teacher forced) on the same batch of 32
sentences of Chapter 3's translation task, for every arm of attnbook.experiments.translation
(the same encoder in all). One thread; the arms alternate over 7 rounds, each round the median
of 5 steps. Writes benchmarks/luong_speed.json: per arm the median over the rounds and the
lowest and highest round, in milliseconds. Run it on a quiet machine.
"""

from pathlib import Path

import torch
import torch.nn.functional as F

import attnbook
from attnbook.cost import compare_speeds, write_benchmark
from attnbook.data import make_batch
from attnbook.experiments import TRANSLATION_ARMS, translation_data, translation_model


def main() -> None:
    attnbook.setup(seed=0)  # one thread
    data = translation_data()
    batch = make_batch(data.splits.train[:32], data.src_vocab, data.tgt_vocab)
    models = {arm: translation_model(arm) for arm in TRANSLATION_ARMS}

    def step(model):
        def run():
            model.zero_grad()
            logits = model(batch.src, batch.tgt_in).logits  # (B, T, V)
            F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0).backward()

        return run

    timings = compare_speeds({arm: step(model) for arm, model in models.items()}, rounds=7, repeat=5)
    for arm, timing in timings.items():
        print(
            f"{TRANSLATION_ARMS[arm]:42} {timing['median_ms']:6.1f} ms "
            f"(rounds {timing['low_ms']:.1f} to {timing['high_ms']:.1f})"
        )
    write_benchmark(
        Path(__file__).with_suffix(".json"),
        {
            "setting": dict(
                batch=32,
                step="forward + backward of the cross-entropy, teacher forced",
                threads=torch.get_num_threads(),
                rounds=7,
                repeat=5,
            ),
            "milliseconds": timings,
        },
    )


if __name__ == "__main__":
    main()
