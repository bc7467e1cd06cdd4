"""Forward + backward time of attnbook's layers against PyTorch's, and of 1 head against 8 (Chapters 5, 6).

    ./course bench mha_speed      # or: .venv/bin/python benchmarks/mha_speed.py

1. MultiHeadAttention against torch.nn.MultiheadAttention: B=16, T=128, d_model=256, h=8; PyTorch's
   layer with need_weights=True and average_attn_weights=False (so both return per-head weights), the
   same weights. Also PyTorch's fused scaled_dot_product_attention on our projections, the speed
   available when the weights are not needed.
2. ``heads``: our MultiHeadAttention with 1 head and with 8 heads of 256 / 8 = 32 features, the same
   input as in 1 (Chapter 5: the same multiply-adds, not the same time).
3. attnbook's Transformer against torch.nn.Transformer with the same embeddings, positions and output
   layer: 2 + 2 layers, d_model=128, 4 heads, d_ff=256, post-LN, no dropout, sequences of 32, batch 32.

In 1 and 2 the step is a forward pass and the backward pass of the output's sum, with the gradient
reaching the input as well as the weights; in 3 the backward pass of the cross-entropy. One thread.
Within each comparison the contestants alternate over 15 rounds (``attnbook.cost.compare_speeds``),
each round the median of 10 steps, after one warm-up step each. ``timings`` keeps every round
(``round_ms``); ``paired`` reads each comparison by the course's rule with the rounds paired
(``attnbook.cost.speed_ratio``: the 95 % interval of the ratio and which step is decidedly slower).

Writes benchmarks/mha_speed.json. ``milliseconds`` holds each step's median over the rounds (what
the chapters print); ``timings`` holds the median with the lowest and highest round. A ratio is the
ratio of the medians; its ``..._range`` is the most the rounds' extremes allow (the lowest round of
one step against the highest of the other, both ways). Run it on a quiet
machine. On a busy one, give it a session of its own with the highest priority,

    setsid bash -c 'echo -20 > /proc/self/autogroup; exec ./course bench mha_speed'

(Linux's scheduler shares the CPUs between sessions, whatever the nice value). The record keeps
the load average before and after and the session's priority, so a busy run shows.
"""

import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import attnbook
from attnbook.attention import MultiHeadAttention, merge_heads, split_heads
from attnbook.cost import compare_speeds, speed_ratio, write_benchmark
from attnbook.transformer import Transformer, causal_mask

B, T, D, H = 16, 128, 256, 8
ROUNDS, REPEAT = 15, 10


def machine_state() -> dict:
    """The load average and, on Linux, the scheduling priority of this session (its autogroup)."""
    autogroup = Path("/proc/self/autogroup")
    return {
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "autogroup": autogroup.read_text().strip() if autogroup.exists() else None,
    }


def fused(layer: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """The same layer through PyTorch's fused kernel, which does not return the weights."""
    q, k, v = (split_heads(projection(x), H) for projection in (layer.q_proj, layer.k_proj, layer.v_proj))
    return layer.out_proj(merge_heads(F.scaled_dot_product_attention(q, k, v)))


class TorchTransformer(nn.Module):
    """nn.Transformer between the embeddings, positions and output layer of one of our models."""

    def __init__(self, ours: Transformer, layers: int, num_heads: int, d_ff: int) -> None:
        super().__init__()
        self.ours = ours  # only its embeddings, positions and generator are used
        self.core = nn.Transformer(ours.d_model, num_heads, layers, layers, d_ff, dropout=0.0, batch_first=True)

    def forward(self, src, tgt):
        padding = src == self.ours.pad_id  # PyTorch's polarity: True = ignore
        out = self.core(
            self.ours.embed(src, self.ours.src_embedding),
            self.ours.embed(tgt, self.ours.tgt_embedding),
            tgt_mask=~causal_mask(tgt.size(1)),
            src_key_padding_mask=padding,
            memory_key_padding_mask=padding,
        )
        return self.ours.generator(out)


def timed(steps: dict) -> dict:
    """compare_speeds over the module's rounds, printed."""
    timings = compare_speeds(steps, rounds=ROUNDS, repeat=REPEAT)
    for name, timing in timings.items():
        print(
            f"{name:50} {timing['median_ms']:7.2f} ms (rounds {timing['low_ms']:.2f} to {timing['high_ms']:.2f})",
            flush=True,
        )
    return timings


def ratio(timings: dict, a: str, b: str) -> tuple[float, list[float]]:
    """Median of a / median of b, and the range its rounds' extremes allow."""
    a, b = timings[a], timings[b]
    return round(a["median_ms"] / b["median_ms"], 3), [
        round(a["low_ms"] / b["high_ms"], 3),
        round(a["high_ms"] / b["low_ms"], 3),
    ]


def paired(timings: dict, a: str, b: str) -> dict:
    """a's time over b's by the comparison rule, the rounds paired (attnbook.cost.speed_ratio)."""
    result = speed_ratio(timings[a], timings[b])
    print(f"{a} / {b}, paired by round: {result.ratio:.3f} [{result.low:.3f}, {result.high:.3f}] {result.verdict}")
    return {**result._asdict(), "a": a, "b": b}


def medians(timings: dict) -> dict:
    return {name: round(timing["median_ms"], 3) for name, timing in timings.items()}


def layer_times() -> dict:
    """Our layer against PyTorch's and against our projections with the fused kernel."""
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(D, H, batch_first=True)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(B, T, D, requires_grad=True)  # (B, T, d_model)
    timings = timed(
        {
            "attnbook MultiHeadAttention": lambda: ours(x, x, x)[0].sum().backward(),
            "nn.MultiheadAttention (per-head weights)": lambda: (
                theirs(x, x, x, average_attn_weights=False)[0].sum().backward()
            ),
            "attnbook projections + fused kernel (no weights)": lambda: fused(ours, x).sum().backward(),
        }
    )
    to_torch, to_torch_range = ratio(timings, "attnbook MultiHeadAttention", "nn.MultiheadAttention (per-head weights)")
    fused_gain, fused_range = ratio(
        timings, "attnbook MultiHeadAttention", "attnbook projections + fused kernel (no weights)"
    )
    print(
        f"attnbook / nn.MultiheadAttention: {to_torch:.2f} (target <= 1.25); fused kernel is {fused_gain:.2f}x faster"
    )
    return {
        "milliseconds": medians(timings),
        "timings": timings,
        "ratio_attnbook_to_torch": to_torch,
        "ratio_attnbook_to_torch_range": to_torch_range,
        "fused_speedup": fused_gain,
        "fused_speedup_range": fused_range,
        "paired": {
            "attnbook_to_torch": paired(
                timings, "attnbook MultiHeadAttention", "nn.MultiheadAttention (per-head weights)"
            ),
            "attnbook_to_fused": paired(
                timings, "attnbook MultiHeadAttention", "attnbook projections + fused kernel (no weights)"
            ),
        },
    }


def head_times() -> dict:
    """Our layer with 1 head and with 8, the same width and input."""
    torch.manual_seed(0)
    layers = {heads: MultiHeadAttention(D, heads) for heads in (1, H)}
    x = torch.randn(B, T, D, requires_grad=True)  # (B, T, d_model)
    timings = timed(
        {
            f"{heads} head{'s' if heads > 1 else ''}": lambda layer=layer: layer(x, x, x)[0].sum().backward()
            for heads, layer in layers.items()
        }
    )
    eight_to_one, eight_to_one_range = ratio(timings, f"{H} heads", "1 head")
    print(f"{H} heads / 1 head: {eight_to_one:.2f}")
    return {
        "setting": dict(
            B=B,
            T=T,
            d_model=D,
            heads=[1, H],
            threads=torch.get_num_threads(),
            step="forward + backward (gradients of the weights and the input)",
        ),
        "milliseconds": medians(timings),
        "timings": timings,
        "ratio_8_heads_to_1": eight_to_one,
        "ratio_8_heads_to_1_range": eight_to_one_range,
        "paired": {"8_heads_to_1": paired(timings, f"{H} heads", "1 head")},
    }


def transformer_times() -> dict:
    """Forward + backward of a small Transformer, ours against PyTorch's."""
    torch.manual_seed(0)
    vocab, length, batch = 100, 32, 32
    ours = Transformer(
        vocab, vocab, d_model=128, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=256, dropout=0.0
    )
    theirs = TorchTransformer(ours, layers=2, num_heads=4, d_ff=256)
    src, tgt = torch.randint(4, vocab, (batch, length)), torch.randint(4, vocab, (batch, length))
    src[:, -4:] = 0  # a little padding
    timings = timed(
        {
            "attnbook Transformer": lambda: F.cross_entropy(
                ours(src, tgt).logits.flatten(0, 1), tgt.flatten()
            ).backward(),
            "nn.Transformer (same embeddings and output layer)": lambda: F.cross_entropy(
                theirs(src, tgt).flatten(0, 1), tgt.flatten()
            ).backward(),
        }
    )
    to_torch, to_torch_range = ratio(
        timings, "attnbook Transformer", "nn.Transformer (same embeddings and output layer)"
    )
    print(f"attnbook Transformer / nn.Transformer: {to_torch:.2f} (target <= 1.3)")
    return {
        "setting": dict(
            B=32,
            T=32,
            d_model=128,
            heads=4,
            d_ff=256,
            layers="2 + 2",
            threads=torch.get_num_threads(),
            step="forward + backward of the cross-entropy",
        ),
        "milliseconds": medians(timings),
        "timings": timings,
        "ratio_attnbook_to_torch": to_torch,
        "ratio_attnbook_to_torch_range": to_torch_range,
        "paired": {
            "attnbook_to_torch": paired(
                timings, "attnbook Transformer", "nn.Transformer (same embeddings and output layer)"
            )
        },
    }


def main() -> None:
    attnbook.setup(seed=0)  # one thread
    before = machine_state()
    layers = layer_times()
    heads = head_times()
    transformer = transformer_times()
    write_benchmark(
        Path(__file__).with_suffix(".json"),
        {
            "setting": dict(
                B=B,
                T=T,
                d_model=D,
                heads=H,
                threads=torch.get_num_threads(),
                step="forward + backward (gradients of the weights and the input)",
                rounds=ROUNDS,
                repeat=REPEAT,
            ),
            **layers,
            "heads": heads,
            "transformer": transformer,
            "machine_state": {"before": before, "after": machine_state()},
        },
    )


if __name__ == "__main__":
    main()
