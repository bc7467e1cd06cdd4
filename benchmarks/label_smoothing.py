"""Chapter 6's label-smoothing comparison, over several seeds.

    ./course bench label_smoothing    # or: .venv/bin/python benchmarks/label_smoothing.py

chapters/06_transformer/02_training.ipynb trains a small pre-LN Transformer (2 + 2 layers, d_model 64,
4 heads, d_ff 128, no dropout) on its string-reversal task (3 200 strings of 3 to 12 letters, batches
of 32) for four passes, with the paper's Adam and warm-up schedule (peak 3e-3 after 100 steps) and
label smoothing of 0.1, and measures its confidence on the 500 held-out strings. This script trains
that model without and with label smoothing from each of SEEDS (the seed sets the initial weights
and the order of the batches) and records, per run, what the chapter reports: exact match of greedy
decoding; token accuracy, the mean confidence (probability of the predicted token) when right and
when wrong, and the number of wrong tokens, teacher-forced; the held-out cross-entropy without
smoothing and its perplexity. One thread, about two minutes. The chapter trains seed 0's smoothed
run itself and checks that it matches the record.
"""

import math
from pathlib import Path

import torch
import torch.nn.functional as F

import attnbook
from attnbook import data, tasks
from attnbook.cost import write_benchmark
from attnbook.training import evaluate, fit, warmup_schedule
from attnbook.transformer import Transformer

SEEDS = (0, 1, 2, 3, 4)
EPSILONS = (0.0, 0.1)


def task():
    """The chapter's data: reversal, 3 200 to train, 500 held out, and the vocabularies."""
    splits = tasks.sequence_splits(
        tasks.reversal_task, n_train=3200, n_valid=0, n_test=500, seed=0, min_length=3, max_length=12
    )
    return splits, *data.build_vocabs(splits.train + splits.test)


def confidence(model, examples, src_vocab, tgt_vocab) -> dict:
    """The chapter's measures on ``examples``, teacher-forced (as the chapter's ``confidence``)."""
    batch = data.make_batch(examples, src_vocab, tgt_vocab)
    real = batch.tgt_out != 0  # (N, T)
    model.eval()
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in).logits[real]  # (M, V)
    targets = batch.tgt_out[real]  # (M,)
    confident, predicted = logits.softmax(dim=-1).max(dim=-1)
    right = predicted == targets
    loss = F.cross_entropy(logits, targets).item()
    wrong = confident[~right].mean().item() if (~right).any() else float("nan")
    return dict(
        accuracy=right.float().mean().item(),
        wrong=wrong,
        right=confident[right].mean().item(),
        wrong_count=int((~right).sum()),
        tokens=len(targets),
        loss=loss,
        perplexity=math.exp(loss),
    )


def run(epsilon: float, seed: int, splits, src_vocab, tgt_vocab) -> dict:
    torch.manual_seed(seed)
    model = Transformer(
        len(src_vocab),
        len(tgt_vocab),
        d_model=64,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=128,
        dropout=0.0,
        norm_first=True,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3 * math.sqrt(64 * 100), betas=(0.9, 0.98), eps=1e-9)
    batches = data.Batches(splits.train, src_vocab, tgt_vocab, batch_size=32, shuffle=True, seed=seed)
    fit(
        model,
        batches,
        epochs=4,
        optimizer=optimizer,
        clip=None,
        scheduler=warmup_schedule(optimizer, 64, 100),
        label_smoothing=epsilon,
        progress=False,
    )
    test = data.Batches(splits.test, src_vocab, tgt_vocab, batch_size=500)
    exact = evaluate(model, test)["exact_match"]
    measures = dict(confidence(model, splits.test, src_vocab, tgt_vocab), exact_match=exact)
    return {name: round(value, 6) if isinstance(value, float) else value for name, value in measures.items()}


def main() -> None:
    attnbook.setup(seed=0)  # one thread
    splits, src_vocab, tgt_vocab = task()
    runs = {}
    for epsilon in EPSILONS:
        runs[str(epsilon)] = {}
        for seed in SEEDS:
            runs[str(epsilon)][str(seed)] = run(epsilon, seed, splits, src_vocab, tgt_vocab)
            print(epsilon, seed, runs[str(epsilon)][str(seed)], flush=True)
    write_benchmark(
        Path(__file__).with_suffix(".json"),
        {
            "task": "string reversal, 3 200 to train, 500 held out; 2 + 2 pre-LN layers, 4 passes",
            "ceiling": 1 - 0.1 + 0.1 / len(tgt_vocab),
            "seeds": list(SEEDS),
            "label_smoothing": list(EPSILONS),
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
