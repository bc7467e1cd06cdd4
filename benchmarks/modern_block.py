"""What today's block saves (Chapter 8), on one thread.

    .venv/bin/python benchmarks/modern_block.py

1. ``window_attention``: causal sliding-window attention (window 128) over T tokens, 4 heads of 32
   features, one sequence, forward only: the band as a mask on the full T × T scores
   (``attention.scaled_dot_product_attention`` with ``sliding_window_mask``) against the band computed
   block by block (``modern.banded_attention``, 2·T·128 scores). T from 256 to 4 096.
2. ``decode_step``: one generation step of a ``ModernDecoder`` (2 layers, d_model 256, 8 query heads,
   SwiGLU, untrained: the time does not depend on the weights) for 8 sequences after t tokens, with its
   key/value cache, for 8, 2 and 1 key/value heads, and for 2 key/value heads with a rolling cache of
   128 positions (a sliding window). Beside each time, the bytes the caches hold per token of each
   sequence, measured from the cache tensors. The same three decoders again "no copy": the same weights,
   but each layer's attention reads its ``G`` cached heads in place (the query heads of a group share one
   batched product, as Exercise 8's copy-free ``grouped_attention``) and the cache writes each new position
   into memory allocated once (no ``torch.cat`` copy of the whole cache). Their logits are checked equal to
   the package decoder's. Together they test whether ``expand_kv_heads``'s copy and ``KVCache``'s
   ``torch.cat`` are what keep the package decoder's step from speeding up with fewer key/value heads.

Timed by ``attnbook.cost.compare_speeds`` (all contestants take turns in rounds, each round the median
of ``REPEAT`` calls), as ``benchmarks/long_inputs.py``. Writes benchmarks/modern_block.json.
"""

from pathlib import Path

import torch

import attnbook
from attnbook import cost
from attnbook.attention import KVCache, merge_heads, scaled_dot_product_attention, split_heads
from attnbook.modern import ModernDecoder, apply_rope, banded_attention, sliding_window_mask

ROUNDS, REPEAT = 15, 5
WINDOW = dict(heads=4, d_head=32, window=128, lengths=[256, 512, 1024, 2048, 4096])
DECODE = dict(vocab=64, d_model=256, num_heads=8, num_layers=2, batch=8, positions=[256, 1024, 4096], window=128)
#: The decoders compared: name -> (key/value heads, window, copy-free attention and cache).
DECODERS = {
    "8 kv heads": (8, None, False),
    "2 kv heads": (2, None, False),
    "1 kv head": (1, None, False),
    "2 kv heads, window": (2, 128, False),
    "8 kv heads, no copy": (8, None, True),
    "2 kv heads, no copy": (2, None, True),
    "1 kv head, no copy": (1, None, True),
}


class AllocatedCache(KVCache):
    """A key/value cache that writes new positions into tensors allocated once for ``capacity`` positions."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity, self.key_store, self.value_store = capacity, None, None

    def extend(self, keys, values):
        if self.key_store is None:  # (B, G, capacity, d_head), once
            B, G, _, d = keys.shape
            self.key_store, self.value_store = (keys.new_empty(B, G, self.capacity, d) for _ in range(2))
        end = self.seen + keys.size(2)
        self.key_store[:, :, self.seen : end] = keys  # written in place: nothing earlier is copied
        self.value_store[:, :, self.seen : end] = values
        self.seen = end
        self.keys, self.values = self.key_store[:, :, :end], self.value_store[:, :, :end]  # views
        return self.keys, self.values


def copy_free_forward(self, x, mask=None, positions=None, cache=None):
    """``GroupedQueryAttention.forward`` without ``expand_kv_heads``: the ``H / G`` query heads of a group
    are stacked as rows of one product with the group's ``G``-th key/value head."""
    q = split_heads(self.q_proj(x), self.num_heads)  # (B, H, T, d_head)
    k = split_heads(self.k_proj(x), self.num_kv_heads)  # (B, G, T, d_head)
    v = split_heads(self.v_proj(x), self.num_kv_heads)
    if positions is not None:
        q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)
    if cache is not None:
        k, v = cache.extend(k, v)  # (B, G, L, d_head)
    B, H, T, d = q.shape
    G, L = self.num_kv_heads, k.size(2)
    rows = q.reshape(B, G, H // G * T, d)  # group g: its query heads' rows, in head order
    row_mask = mask.expand(1, 1, T, L).repeat(1, 1, H // G, 1)  # (1, 1, H/G·T, L), mask (1, 1, T, L)
    heads, weights = scaled_dot_product_attention(rows, k, v, row_mask)  # (B, G, H/G·T, d_head)
    return self.out_proj(merge_heads(heads.reshape(B, H, T, d))), weights.reshape(B, H, T, L)


def by_length(timed: dict, names, lengths, key: str) -> dict:
    return {name: [{key: n, **timed[f"{name} {key}={n}"], "repeat": REPEAT} for n in lengths] for name in names}


def window_attention() -> dict:
    torch.manual_seed(0)
    steps = {}
    for T in WINDOW["lengths"]:
        q, k, v = (torch.randn(1, WINDOW["heads"], T, WINDOW["d_head"]) for _ in range(3))
        band = sliding_window_mask(torch.arange(T), torch.arange(T), WINDOW["window"])  # (T, T)
        steps[f"masked full T={T}"] = lambda q=q, k=k, v=v, band=band: scaled_dot_product_attention(q, k, v, band)
        steps[f"banded T={T}"] = lambda q=q, k=k, v=v: banded_attention(q, k, v, WINDOW["window"])
    with torch.no_grad():
        timed = cost.compare_speeds(steps, rounds=ROUNDS, repeat=REPEAT)
    results = by_length(timed, ["masked full", "banded"], WINDOW["lengths"], "T")
    for i, T in enumerate(WINDOW["lengths"]):
        print(f"T={T:5d} " + "  ".join(f"{n} {r[i]['median_ms']:.2f} ms" for n, r in results.items()), flush=True)
    return {"setting": dict(WINDOW, threads=torch.get_num_threads()), "milliseconds": results}


def decode_step() -> dict:
    steps, cache_bytes, logits = {}, {}, {}
    with torch.no_grad():
        for name, (kv_heads, window, copy_free) in DECODERS.items():
            torch.manual_seed(0)
            model = ModernDecoder(
                DECODE["vocab"],
                d_model=DECODE["d_model"],
                num_heads=DECODE["num_heads"],
                num_kv_heads=kv_heads,
                num_layers=DECODE["num_layers"],
                window=window,
            ).eval()
            if copy_free:
                for layer in model.layers:
                    layer.attention.forward = copy_free_forward.__get__(layer.attention)
            cache_bytes[name] = {}
            for t in DECODE["positions"]:
                ids = torch.randint(4, DECODE["vocab"], (DECODE["batch"], t + 1))
                caches = [AllocatedCache(t + 1) for _ in model.layers] if copy_free else model.new_caches()
                for start in range(0, t, 256):  # the t earlier positions, in chunks (not timed)
                    model(ids[:, start : min(t, start + 256)], caches)
                held = sum(c.keys.numel() + c.values.numel() for c in caches) * caches[0].keys.element_size()
                cache_bytes[name][str(t)] = held / (DECODE["batch"] * t)  # per token of each sequence
                stored = [(c.keys, c.values, c.seen) for c in caches]

                def step(model=model, ids=ids, t=t, caches=caches, stored=stored):
                    for cache, (keys, values, seen) in zip(caches, stored):  # back to t positions
                        cache.keys, cache.values, cache.seen = keys, values, seen
                    return model(ids[:, t:], caches)

                steps[f"{name} t={t}"] = step
                logits[name, t] = step().logits
        for name, (kv_heads, _, copy_free) in DECODERS.items():
            for t in DECODE["positions"]:
                if copy_free:  # the same weights (seed 0) and the same tokens: the same step
                    same = logits[f"{kv_heads} kv head{'s' * (kv_heads > 1)}", t]
                    torch.testing.assert_close(logits[name, t], same, rtol=1e-4, atol=1e-5)
        timed = cost.compare_speeds(steps, rounds=ROUNDS, repeat=REPEAT)
    results = by_length(timed, list(DECODERS), DECODE["positions"], "t")
    for i, t in enumerate(DECODE["positions"]):
        print(f"t={t:5d} " + "  ".join(f"{n} {r[i]['median_ms']:.2f} ms" for n, r in results.items()), flush=True)
    return {
        "setting": dict(DECODE, decoders=DECODERS, threads=torch.get_num_threads(), dtype="float32"),
        "milliseconds": results,
        "cache_bytes_per_token": cache_bytes,
    }


def main() -> None:
    attnbook.setup(seed=0)  # one thread
    before = cost.machine_state()
    results = {
        "rounds": ROUNDS,
        "window_attention": window_attention(),
        "decode_step": decode_step(),
        "machine_state": {"before": before, "after": cost.machine_state()},
    }
    cost.write_benchmark(Path(__file__).parent / "modern_block.json", results)


if __name__ == "__main__":
    main()
