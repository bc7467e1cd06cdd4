"""Forward + backward time of attnbook's layers against PyTorch's (Chapters 5 and 6).

    .venv/bin/python benchmarks/mha_speed.py

1. MultiHeadAttention against torch.nn.MultiheadAttention: B=16, T=128, d_model=256, h=8; PyTorch's
   layer with need_weights=True and average_attn_weights=False (so both return per-head weights), the
   same weights. Also PyTorch's fused scaled_dot_product_attention on our projections, the speed
   available when the weights are not needed.
2. attnbook's Transformer against torch.nn.Transformer with the same embeddings, positions and output
   layer: 2 + 2 layers, d_model=128, 4 heads, d_ff=256, post-LN, no dropout, sequences of 32, batch 32.

One thread; the contestants run in one process, alternating, and each gets the median of many
repetitions. Writes benchmarks/mha_speed.json.
"""

import json
import platform
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.attention import MultiHeadAttention, merge_heads, split_heads
from attnbook.cost import seconds
from attnbook.transformer import Transformer, causal_mask

B, T, D, H = 16, 128, 256, 8
REPEATS, ROUNDS = 20, 5


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
        out = self.core(self.ours.embed(src, self.ours.src_embedding), self.ours.embed(tgt, self.ours.tgt_embedding),
                        tgt_mask=~causal_mask(tgt.size(1)), src_key_padding_mask=padding,
                        memory_key_padding_mask=padding)
        return self.ours.generator(out)


def transformer_times() -> dict:
    """Forward + backward of a small Transformer, ours against PyTorch's, in milliseconds."""
    torch.manual_seed(0)
    vocab, length, batch = 100, 32, 32
    ours = Transformer(vocab, vocab, d_model=128, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=256,
                       dropout=0.0)
    theirs = TorchTransformer(ours, layers=2, num_heads=4, d_ff=256)
    src, tgt = torch.randint(4, vocab, (batch, length)), torch.randint(4, vocab, (batch, length))
    src[:, -4:] = 0  # a little padding
    steps = {
        "attnbook Transformer": lambda: F.cross_entropy(ours(src, tgt).logits.flatten(0, 1), tgt.flatten()).backward(),
        "nn.Transformer (same embeddings and output layer)":
            lambda: F.cross_entropy(theirs(src, tgt).flatten(0, 1), tgt.flatten()).backward(),
    }
    return _alternate(steps)


def _alternate(steps: dict) -> dict:
    """Median seconds of each step, measured in rounds that alternate between the steps."""
    for step in steps.values():  # warm up
        step()
    results = {name: [] for name in steps}
    for _ in range(ROUNDS):  # alternate, so that a slow moment of the machine hits all of them
        for name, step in steps.items():
            results[name].append(seconds(step, repeat=REPEATS, warmup=0))  # warmed up above
    return {name: statistics.median(values) for name, values in results.items()}


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(D, H, batch_first=True)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(B, T, D, requires_grad=True)
    steps = {
        "attnbook MultiHeadAttention": lambda: ours(x, x, x)[0].sum().backward(),
        "nn.MultiheadAttention (per-head weights)": lambda: theirs(x, x, x, average_attn_weights=False)[0]
        .sum().backward(),
        "attnbook projections + fused kernel (no weights)": lambda: fused(ours, x).sum().backward(),
    }
    medians = _alternate(steps)
    ratio = medians["attnbook MultiHeadAttention"] / medians["nn.MultiheadAttention (per-head weights)"]
    fused_gain = medians["attnbook MultiHeadAttention"] / medians["attnbook projections + fused kernel (no weights)"]
    for name, value in medians.items():
        print(f"{name:50} {value * 1000:7.2f} ms")
    print(f"attnbook / nn.MultiheadAttention: {ratio:.2f} (target <= 1.25); fused kernel is {fused_gain:.2f}x faster")
    models = transformer_times()
    model_ratio = models["attnbook Transformer"] / models["nn.Transformer (same embeddings and output layer)"]
    for name, value in models.items():
        print(f"{name:50} {value * 1000:7.2f} ms")
    print(f"attnbook Transformer / nn.Transformer: {model_ratio:.2f} (target <= 1.3)")
    report = {"setting": dict(B=B, T=T, d_model=D, heads=H, threads=1, step="forward + backward"),
              "milliseconds": {name: round(value * 1000, 3) for name, value in medians.items()},
              "ratio_attnbook_to_torch": round(ratio, 3), "fused_speedup": round(fused_gain, 3),
              "transformer": {"setting": dict(B=32, T=32, d_model=128, heads=4, d_ff=256, layers="2 + 2",
                                              threads=1, step="forward + backward of the cross-entropy"),
                              "milliseconds": {name: round(value * 1000, 3) for name, value in models.items()},
                              "ratio_attnbook_to_torch": round(model_ratio, 3)},
              "machine": {"python": platform.python_version(), "torch": torch.__version__}}
    (Path(__file__).parent / "mha_speed.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
