"""A recurrent encoder against one self-attention layer as the sequence grows (Chapter 4).

    ./course bench self_attention_speed     # or: .venv/bin/python benchmarks/self_attention_speed.py

One forward pass, without gradients, on a batch of 4 random sequences of 16 to 2 048 positions:
a bidirectional GRU like Chapter 2's encoder (64 units per direction, reading 128-wide inputs,
so 128 features per position) against one ``attnbook.attention.SelfAttention`` of width 128.
One thread. All sixteen steps (two layers, eight lengths) take turns over 7 rounds
(``attnbook.cost.compare_speeds``), each round the median of 5 calls, after one warm-up call
each: a busy moment of the machine then slows one round of every step, not every round of one.

Writes benchmarks/self_attention_speed.json: for each layer, one entry per length with the
median over the rounds and the lowest and highest round, in milliseconds. The chapter computes
the ratios and the growth rates (``attnbook.cost.log_slope``) from the record. Run it on a
quiet machine. On a busy one, give it a session of its own with the highest priority,

    setsid bash -c 'echo -20 > /proc/self/autogroup; exec ./course bench self_attention_speed'

(Linux's scheduler shares the CPUs between sessions, whatever the nice value). The record keeps
the load average before and after and the session's priority, so a busy run shows.
"""

from pathlib import Path

import torch
from torch import nn

import attnbook
from attnbook.attention import SelfAttention
from attnbook.cost import compare_speeds, machine_state, write_benchmark

BATCH, D_MODEL, ROUNDS, REPEAT = 4, 128, 7, 5
LENGTHS = [16, 32, 64, 128, 256, 512, 1024, 2048]


def main() -> None:
    attnbook.setup(seed=0)  # one thread
    before = machine_state()
    gru = nn.GRU(D_MODEL, D_MODEL // 2, batch_first=True, bidirectional=True)  # 2 x 64 units
    attention = SelfAttention(D_MODEL)
    steps = {}
    for n in LENGTHS:
        x = torch.randn(BATCH, n, D_MODEL)  # (B, n, d_model)
        steps[f"gru {n}"] = lambda x=x: gru(x)
        steps[f"self_attention {n}"] = lambda x=x: attention(x)
    with torch.no_grad():
        timed = compare_speeds(steps, rounds=ROUNDS, repeat=REPEAT)
    timings = {layer: [timed[f"{layer} {n}"] for n in LENGTHS] for layer in ("gru", "self_attention")}
    for n, gru_ms, attention_ms in zip(LENGTHS, *timings.values()):
        print(
            f"n={n:5d}  GRU {gru_ms['median_ms']:8.2f} ms ({gru_ms['low_ms']:.2f} to "
            f"{gru_ms['high_ms']:.2f})  attention {attention_ms['median_ms']:8.2f} ms "
            f"({attention_ms['low_ms']:.2f} to {attention_ms['high_ms']:.2f})"
        )
    write_benchmark(
        Path(__file__).with_suffix(".json"),
        {
            "setting": dict(
                batch=BATCH,
                d_model=D_MODEL,
                gru="bidirectional, 64 units per direction",
                attention="attnbook.attention.SelfAttention(128)",
                step="forward, without gradients",
                threads=torch.get_num_threads(),
                rounds=ROUNDS,
                repeat=REPEAT,
            ),
            "lengths": LENGTHS,
            "milliseconds": timings,
            "machine_state": {"before": before, "after": machine_state()},
        },
    )


if __name__ == "__main__":
    main()
