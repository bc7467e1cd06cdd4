"""What one training step costs for each of Chapter 3's decoders (Chapter 3 reads the record).

    ./course bench luong_speed       # or: .venv/bin/python benchmarks/luong_speed.py

One forward and backward pass (cross-entropy, teacher forced) on the same batch of 32
sentences of Chapter 3's translation task, for every arm of attnbook.experiments.translation
(the same encoder in all), and one more contestant: ``general_step_by_step``, the general arm's
own model run through its decoder one step at a time (``start`` and ``step``, teacher forced), which
computes the same logits as its one-call ``forward``: the loop alone, without input feeding's other
changes. One thread; the contestants alternate over 7 rounds, each round the median of 5 steps.
Writes benchmarks/luong_speed.json: per contestant the median over the rounds, the lowest and highest
round and every round, in milliseconds, and the machine's load before and after. Run it on a quiet
machine.
"""

from pathlib import Path

import torch
import torch.nn.functional as F

import attnbook
from attnbook.cost import compare_speeds, machine_state, write_benchmark
from attnbook.data import make_batch
from attnbook.experiments import TRANSLATION_ARMS, translation_data, translation_model

#: The extra contestant: the general arm's model, its decoder run one step at a time.
STEP_BY_STEP = "general_step_by_step"


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

    def step_by_step(model):
        def logits():
            state, steps = model.start(batch.src), []
            for prev in batch.tgt_in.unbind(dim=1):  # T x (B,): teacher forced
                out = model.step(state, prev)
                state = out.state
                steps.append(out.logits)
            return torch.stack(steps, dim=1)  # (B, T, V)

        with torch.no_grad():  # the same logits as the one-call forward
            assert torch.allclose(logits(), model(batch.src, batch.tgt_in).logits, atol=1e-5)

        def run():
            model.zero_grad()
            F.cross_entropy(logits().flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0).backward()

        return run

    steps = {arm: step(model) for arm, model in models.items()}
    steps[STEP_BY_STEP] = step_by_step(models["general"])
    before = machine_state()
    timings = compare_speeds(steps, rounds=7, repeat=5)
    after = machine_state()
    names = {**TRANSLATION_ARMS, STEP_BY_STEP: "Luong general, decoder run step by step"}
    for arm, timing in timings.items():
        print(
            f"{names[arm]:42} {timing['median_ms']:6.1f} ms (rounds {timing['low_ms']:.1f} to {timing['high_ms']:.1f})"
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
            "machine_state": {"before": before, "after": after},
        },
    )


if __name__ == "__main__":
    main()
