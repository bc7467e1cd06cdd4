"""Forward + backward time of attnbook's MultiHeadAttention against torch.nn.MultiheadAttention.

    .venv/bin/python benchmarks/mha_speed.py

B=16, T=128, d_model=256, h=8, one thread; PyTorch's layer with need_weights=True and
average_attn_weights=False (so both return per-head weights). Both layers have the same weights and
run in one process, alternating, and each gets the median of many repetitions. Also times PyTorch's
fused scaled_dot_product_attention on the same projections, the speed available when the weights are
not needed. Writes benchmarks/mha_speed.json.
"""

import json
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.attention import MultiHeadAttention, merge_heads, split_heads

B, T, D, H = 16, 128, 256, 8
REPEATS, ROUNDS = 20, 5


def fused(layer: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """The same layer through PyTorch's fused kernel, which does not return the weights."""
    q, k, v = (split_heads(projection(x), H) for projection in (layer.q_proj, layer.k_proj, layer.v_proj))
    return layer.out_proj(merge_heads(F.scaled_dot_product_attention(q, k, v)))


def seconds(step) -> float:
    """The median time of one forward + backward."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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
    for step in steps.values():  # warm up
        step()
    results = {name: [] for name in steps}
    for _ in range(ROUNDS):  # alternate, so that a slow moment of the machine hits all of them
        for name, step in steps.items():
            results[name].append(seconds(step))
    medians = {name: statistics.median(values) for name, values in results.items()}
    ratio = medians["attnbook MultiHeadAttention"] / medians["nn.MultiheadAttention (per-head weights)"]
    fused_gain = medians["attnbook MultiHeadAttention"] / medians["attnbook projections + fused kernel (no weights)"]
    for name, value in medians.items():
        print(f"{name:50} {value * 1000:7.2f} ms")
    print(f"attnbook / nn.MultiheadAttention: {ratio:.2f} (target <= 1.25); fused kernel is {fused_gain:.2f}x faster")
    report = {"setting": dict(B=B, T=T, d_model=D, heads=H, threads=1, step="forward + backward"),
              "milliseconds": {name: round(value * 1000, 3) for name, value in medians.items()},
              "ratio_attnbook_to_torch": round(ratio, 3), "fused_speedup": round(fused_gain, 3),
              "machine": {"python": platform.python_version(), "torch": torch.__version__}}
    (Path(__file__).parent / "mha_speed.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
