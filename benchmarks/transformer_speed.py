"""Chapter 6's speed measurements: Bahdanau's model against a small Transformer, and decoding.

    ./course bench transformer_speed    # or: .venv/bin/python benchmarks/transformer_speed.py

One thread (attnbook.setup). Every comparison runs its contestants in one process, in
alternating rounds (attnbook.cost.compare_speeds: ROUNDS rounds, each the median of a few
calls, after one warm-up call each), so a slow moment of the machine hits all of them; the
record keeps each contestant's median round and its fastest and slowest round, in
milliseconds, with the machine's load average before and after. Writes
benchmarks/transformer_speed.json, which chapters/06_transformer/03_experiment.ipynb reads.
The models are the chapter's: Chapter 2's Bahdanau model and the pre-LN Transformer of
2 + 2 layers, d_model 64, on the chapter's dates. It takes about ten minutes. Every round is kept
(``round_ms``), so two contestants can be compared round by round (attnbook.cost.speed_ratio).

Run it on a quiet machine. On a busy one, give it a session of its own with the highest priority,

    setsid bash -c 'echo -20 > /proc/self/autogroup; exec ./course bench transformer_speed'

(Linux's scheduler shares the CPUs between sessions, whatever the nice value); the record keeps the
load average before and after and the session's priority, so a busy run shows.

1. training: each model trained with its own recipe (Chapter 2's Adam with clipping; the
   paper's Adam and warm-up, no clipping) over the same STEPS batches of 32 dates; both optimizers
   use torch's foreach implementation, so the update's implementation is the same for both. A third
   contestant, "Transformer, default Adam", is the Transformer as the duel's records train it:
   the same recipe with torch's default Adam, which on a CPU updates one tensor at a time.
2. lengths: one forward + backward pass of the cross-entropy on a batch of 32 random
   sequences, source length n and target length n + 1, for n in LENGTHS. A third contestant,
   "Bahdanau, unpacked GRU", is Bahdanau's model with its encoder's GRU fed without packing (the same
   logits, checked, since these batches have no padding): how much of Bahdanau's step is the packed
   GRU's backward pass, which zero-fills a full-size gradient at every step (PyTorch issue 1788).
3. decoding: the chapter's Transformer trained as there, with foreach Adam (two passes), decodes the 1 000 test
   dates: greedy decoding that reruns the whole model on the prefix at every step; greedy_decode
   (the encoder once, the decoder's inputs cached); beam_search with beams of 1, 2 and 4. Both greedy
   loops stop once every date has produced eos.
"""

import copy
import itertools
import math
from pathlib import Path

import torch
import torch.nn.functional as F

import attnbook
from attnbook import data, tasks
from attnbook.bahdanau import BahdanauSeq2Seq
from attnbook.cost import compare_speeds, machine_state, write_benchmark
from attnbook.decoding import beam_search, greedy_decode
from attnbook.rnn import Encoded, Encoder
from attnbook.training import fit, train_epoch, warmup_schedule
from attnbook.transformer import Transformer

ROUNDS = 15
STEPS = 32  # training batches per timed call
LENGTHS = [8, 16, 32, 64, 128]
BEAMS = [1, 2, 4]


def bahdanau(vocabs):
    torch.manual_seed(0)
    return BahdanauSeq2Seq.build(len(vocabs[0]), len(vocabs[1]), embed_dim=32, hidden_size=64, attention_dim=64)


def transformer(vocabs):
    torch.manual_seed(0)
    return Transformer(
        len(vocabs[0]),
        len(vocabs[1]),
        d_model=64,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=128,
        dropout=0.0,
        norm_first=True,
    )


def transformer_optimizer(model, foreach=True):
    """The chapter's recipe: the paper's Adam and warm-up schedule, peak 3e-3 after 100 steps.

    ``foreach=True``, as Bahdanau's optimizer here: both models' updates use the same implementation
    (on a CPU torch's default updates one parameter tensor at a time, which costs the Transformer's
    many small tensors more; the update is the same). ``foreach=False`` is that default, which the
    duel's records and the chapter's Transformer train with."""
    optimizer = torch.optim.Adam(
        model.parameters(), lr=3e-3 * math.sqrt(64 * 100), betas=(0.9, 0.98), eps=1e-9, foreach=foreach
    )
    return optimizer, warmup_schedule(optimizer, 64, 100)


def training(splits, vocabs) -> dict:
    """STEPS training steps of each model with its recipe, on the same batches."""
    batches = list(itertools.islice(data.Batches(splits.train, *vocabs, batch_size=32, shuffle=True, seed=0), STEPS))
    rnn, attention_only, as_in_duel = bahdanau(vocabs), transformer(vocabs), transformer(vocabs)
    rnn_optimizer = torch.optim.Adam(rnn.parameters(), lr=5e-3, foreach=True)
    tf_optimizer, tf_scheduler = transformer_optimizer(attention_only)
    duel_optimizer, duel_scheduler = transformer_optimizer(as_in_duel, foreach=False)
    steps = {
        "Bahdanau": lambda: train_epoch(rnn, batches, rnn_optimizer, clip=1.0),
        "Transformer": lambda: train_epoch(attention_only, batches, tf_optimizer, tf_scheduler, clip=None),
        "Transformer, default Adam": lambda: train_epoch(
            as_in_duel, batches, duel_optimizer, duel_scheduler, clip=None
        ),
    }
    return dict(
        steps_per_call=STEPS,
        batch_size=32,
        batches_per_pass=math.ceil(len(splits.train) / 32),
        results=compare_speeds(steps, rounds=ROUNDS, repeat=1),
    )


def training_step(model, n, vocabs):
    """One forward + backward pass of the cross-entropy on 32 random sequences of length n."""
    src = torch.randint(4, len(vocabs[0]), (32, n))  # (32, n)
    tgt = torch.randint(4, len(vocabs[1]), (32, n + 1))  # (32, n + 1)

    def step():
        model.zero_grad()
        F.cross_entropy(model(src, tgt).logits.flatten(0, 1), tgt.flatten()).backward()

    return step


class UnpackedEncoder(Encoder):
    """The package's encoder with its GRU fed the padded batch as it is, not packed: the same numbers when no
    row has padding (as in the synthetic batches), without the packed GRU's backward pass, which on a CPU
    creates and zero-fills a full-size gradient at every step."""

    def forward(self, src, lengths):
        self.check(src, lengths)
        outputs, h_n = self.gru(self.embedding(src))  # (B, S, A), (D, B, H)
        return Encoded(outputs, torch.cat(list(h_n), dim=-1))


def unpacked(rnn):
    """A copy of Bahdanau's model whose encoder does not pack (the same weights)."""
    twin = copy.deepcopy(rnn)
    twin.encoder.__class__ = UnpackedEncoder
    return twin


def lengths(vocabs) -> dict:
    rnn, attention_only = bahdanau(vocabs), transformer(vocabs)
    rnn_unpacked = unpacked(rnn)
    torch.manual_seed(0)
    results = {}
    for n in LENGTHS:
        src = torch.randint(4, len(vocabs[0]), (32, n))  # (32, n): no padding
        tgt = torch.randint(4, len(vocabs[1]), (32, n + 1))
        with torch.no_grad():  # the same logits, packed or not
            assert torch.allclose(rnn(src, tgt).logits, rnn_unpacked(src, tgt).logits, atol=1e-5)
        steps = {
            "Bahdanau": training_step(rnn, n, vocabs),
            "Transformer": training_step(attention_only, n, vocabs),
            "Bahdanau, unpacked GRU": training_step(rnn_unpacked, n, vocabs),
        }
        results[str(n)] = compare_speeds(steps, rounds=ROUNDS, repeat=3)
        print(n, results[str(n)], flush=True)
    return dict(batch_size=32, lengths=LENGTHS, results=results)


def greedy_by_recomputing(model, src, max_len, bos_id=data.Vocab.bos_id, eos_id=data.Vocab.eos_id):
    """Greedy decoding that reruns the encoder and the decoder on the whole prefix at every step (as the chapter),
    stopping, as greedy_decode does, once every row has produced eos."""
    prefix = torch.full((src.size(0), 1), bos_id)  # (B, 1)
    done = torch.zeros(src.size(0), dtype=torch.bool)  # (B,)
    with torch.no_grad():
        for _ in range(max_len):
            logits = model(src, prefix).logits[:, -1]  # (B, V)
            prefix = torch.cat([prefix, logits.argmax(dim=-1, keepdim=True)], dim=1)  # (B, t + 1)
            done = done | (prefix[:, -1] == eos_id)
            if done.all():
                break
    return prefix


def trained_transformer(splits, vocabs):
    """The chapter's Transformer after its two passes (the same batches, recipe and order)."""
    model = transformer(vocabs)
    optimizer, scheduler = transformer_optimizer(model)
    batches = data.Batches(splits.train, *vocabs, batch_size=32, shuffle=True, seed=0)
    for _ in range(2):
        fit(model, batches, epochs=1, optimizer=optimizer, scheduler=scheduler, clip=None, progress=False)
    return model


def decoding(splits, vocabs) -> dict:
    model = trained_transformer(splits, vocabs)
    model.eval()
    src = data.make_batch(splits.test, *vocabs).src  # (1000, S)
    steps = {
        "recomputing": lambda: greedy_by_recomputing(model, src, 12),
        "greedy_decode": lambda: greedy_decode(model, src, 12),
    }
    for beam_size in BEAMS:
        steps[f"beam {beam_size}"] = lambda beam_size=beam_size: beam_search(model, src, 12, beam_size)
    return dict(dates=len(splits.test), max_len=12, results=compare_speeds(steps, rounds=ROUNDS, repeat=1))


def main() -> None:
    attnbook.setup(seed=0)  # one thread
    splits = tasks.date_splits(n_train=10_000, n_valid=1_000, n_test=1_000, seed=0)  # the chapter's data
    vocabs = data.build_vocabs(splits.train + splits.valid + splits.test)
    before = machine_state()
    report = {
        "setting": dict(
            threads=torch.get_num_threads(),
            rounds=ROUNDS,
            unit="milliseconds per call: median round, fastest and slowest round",
        )
    }
    report["training"] = training(splits, vocabs)
    print(report["training"], flush=True)
    report["lengths"] = lengths(vocabs)
    report["decoding"] = decoding(splits, vocabs)
    print(report["decoding"], flush=True)
    report["machine_state"] = {"before": before, "after": machine_state()}
    write_benchmark(Path(__file__).with_suffix(".json"), report)


if __name__ == "__main__":
    main()
