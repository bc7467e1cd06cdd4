"""Chapter 6's Transformer on Chapter 2's dates, with other settings than the chapter's.

    ./course bench transformer_dates    # or: .venv/bin/python benchmarks/transformer_dates.py

The chapter trains a small pre-LN Transformer (2 + 2 layers, d_model 64, 4 heads, d_ff 128, no dropout)
on 10 000 dates for three passes, batches of 32, with the paper's Adam and warm-up schedule (peak 3e-3
after 100 steps). This script trains the same model on the same data with the other settings a skeptic
would try — one layer, batches of 128, post-LN, a constant rate after the warm-up, a lower or higher peak
rate, a shorter warm-up, label smoothing 0.1 (Chapter 6.2), and Chapter 2's recipe (Adam at 5e-3 from the
first step with PyTorch's betas, clipping at 1, no schedule) — and records the validation exact match after
each pass. As the reference,
it also trains Chapter 2's Bahdanau model with its recipe (Adam at 5e-3, clipping at 1) on the same
batches for three passes. It takes several minutes, so the chapter reads its result from
benchmarks/transformer_dates.json instead of rerunning it. One seed per setting, one thread.
Re-run it (and re-execute chapters/06_transformer/03_experiment.ipynb) after any change to the
models, the data or the training code: the chapter checks that the record's first setting and its
Bahdanau run are the runs it trains itself (the Transformer's first two passes, Bahdanau's first).
"""

import math
from pathlib import Path

import torch

import attnbook
from attnbook import data, tasks
from attnbook.bahdanau import BahdanauSeq2Seq
from attnbook.cost import write_benchmark
from attnbook.training import fit, warmup_schedule
from attnbook.transformer import Transformer

#: (layers, batch size, pre-LN?, schedule, peak learning rate, warm-up steps[, label smoothing]): the chapter's
#: setting first, then one change at a time. Schedule "chapter 2" is Bahdanau's recipe: Adam at ``peak`` from the
#: first step (PyTorch's betas), clipping at 1, no warm-up.
SETTINGS = [
    (2, 32, True, "paper", 3e-3, 100),
    (1, 32, True, "paper", 3e-3, 100),
    (2, 128, True, "paper", 3e-3, 100),
    (2, 32, False, "paper", 3e-3, 100),
    (2, 32, True, "constant", 3e-3, 100),
    (2, 32, True, "paper", 1e-3, 100),
    (2, 32, True, "paper", 1e-2, 100),
    (2, 32, True, "paper", 3e-3, 30),
    (2, 32, True, "paper", 3e-3, 100, 0.1),
    (2, 32, True, "chapter 2", 5e-3, 0),
]


def run(
    layers: int,
    batch_size: int,
    norm_first: bool,
    schedule: str,
    peak: float,
    warmup: int,
    smoothing: float = 0.0,
    *,
    splits,
    vocabs,
) -> dict:
    torch.manual_seed(0)
    model = Transformer(
        len(vocabs[0]),
        len(vocabs[1]),
        d_model=64,
        num_heads=4,
        num_encoder_layers=layers,
        num_decoder_layers=layers,
        d_ff=128,
        dropout=0.0,
        norm_first=norm_first,
    )
    clip = None
    if schedule == "chapter 2":  # Bahdanau's recipe: a constant rate from the first step, clipping
        optimizer, scheduler, clip = torch.optim.Adam(model.parameters(), lr=peak), None, 1.0
    elif schedule == "paper":  # rises for `warmup` steps to `peak`, then falls as step^-0.5
        optimizer = torch.optim.Adam(model.parameters(), lr=peak * math.sqrt(64 * warmup), betas=(0.9, 0.98), eps=1e-9)
        scheduler = warmup_schedule(optimizer, 64, warmup)
    else:  # rises for `warmup` steps to `peak`, then stays
        optimizer = torch.optim.Adam(model.parameters(), lr=peak, betas=(0.9, 0.98), eps=1e-9)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    batches = data.Batches(splits.train, *vocabs, batch_size=batch_size, shuffle=True, seed=0)
    valid = data.Batches(splits.valid, *vocabs, batch_size=500)
    history = fit(
        model,
        batches,
        valid,
        epochs=3,
        optimizer=optimizer,
        scheduler=scheduler,
        clip=clip,
        label_smoothing=smoothing,
        progress=False,
    )
    return dict(
        layers=layers,
        batch_size=batch_size,
        norm="pre-LN" if norm_first else "post-LN",
        schedule=schedule,
        peak_lr=peak,
        warmup=warmup,
        label_smoothing=smoothing,
        clip=clip,
        exact_match=[round(value, 4) for value in history["exact_match"]],
    )


def bahdanau_run(splits, vocabs) -> dict:
    """Chapter 2's model and recipe on the same batches, for three passes: the chapter's reference."""
    torch.manual_seed(0)
    model = BahdanauSeq2Seq.build(len(vocabs[0]), len(vocabs[1]), embed_dim=32, hidden_size=64, attention_dim=64)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, foreach=True)
    batches = data.Batches(splits.train, *vocabs, batch_size=32, shuffle=True, seed=0)
    valid = data.Batches(splits.valid, *vocabs, batch_size=500)
    history = fit(model, batches, valid, epochs=3, optimizer=optimizer, clip=1.0, progress=False)
    return dict(
        model="Bahdanau (Chapter 2)",
        batch_size=32,
        lr=5e-3,
        clip=1.0,
        exact_match=[round(value, 4) for value in history["exact_match"]],
    )


def main() -> None:
    attnbook.setup(seed=0)
    splits = tasks.date_splits(n_train=10_000, n_valid=1_000, n_test=1_000, seed=0)  # the chapter's data
    vocabs = data.build_vocabs(splits.train + splits.valid + splits.test)
    bahdanau = bahdanau_run(splits, vocabs)
    print(bahdanau, flush=True)
    runs = []
    for setting in SETTINGS:
        runs.append(run(*setting, splits=splits, vocabs=vocabs))
        print(runs[-1], flush=True)
    write_benchmark(
        Path(__file__).parent / "transformer_dates.json",
        {
            "task": "dates, 10 000 to train, validation exact match after each of 3 passes",
            "seed": 0,
            "bahdanau": bahdanau,
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
