"""What attention and generation cost as sequences grow (Chapter 7), on one thread.

    .venv/bin/python benchmarks/long_inputs.py

1. ``attention_layer``: one ``MultiHeadAttention`` (d_model 128, 4 heads) on one sequence of T tokens,
   forward only, without gradients: our explicit layer (the (B, H, T, T) weights in memory) against the
   same projections with PyTorch's fused ``F.scaled_dot_product_attention``. T from 64 to 4 096. With
   each call's minor page faults (pages the system had to supply fresh), after the timing.
   ``attention_layer_memory_kept`` (and ``cache_step_memory_kept``): the same in a fresh process
   whose C allocator (glibc) keeps freed memory for reuse (``MALLOC_MMAP_MAX_=0``,
   ``MALLOC_TRIM_THRESHOLD_`` huge). By default glibc gives
   a freed block of 32 MiB or more back to the system at once, so the next call of that size gets
   fresh pages and pays for them; with memory kept, only the arithmetic and the memory traffic are left.
2. ``cache_step``: one generation step of Chapter 7's decoder-only model (2 pre-LN layers, d_model 64,
   4 heads, d_ff 128, vocabulary 64, positions up to 1 024, untrained: the time does not depend on the
   weights), 8 sequences, after t tokens: with the key/value cache (the new position only, its keys and
   values appended to the t cached ones: ``KVCache.extend`` concatenates, so it copies the whole cache
   at every step), with a cache written into memory set aside in advance (:class:`SetAsideCache`: the
   same step, the same outputs, no copy of the cache), and without (the model run on all t + 1
   positions). With each call's page faults, and again with memory kept (see 1.).
3. ``generation``: whole generations with and without the cache, as 01_families runs them:
   ``dates`` -- 200 sequences, 46 new tokens, positions up to 48 (02_long_inputs reads
   benchmarks/long_generation.json, 8 sequences of 300 tokens, from long_generation.py).

Every comparison is timed by ``attnbook.cost.compare_speeds``: the contestants -- in 1. and 2. both
ways at every length -- take turns in rounds, each round the median of ``REPEAT`` calls, after one
warm-up call each; so a slow moment of the machine falls on all lengths alike, not on one part of the
curve. The record keeps, per step, the median over the rounds and the fastest and slowest round
(milliseconds), with the machine's load before and after (``cost.machine_state``); the notebooks
compute growth rates (``attnbook.cost.log_slope``) from the medians. Run it on a quiet machine: one
thread, nothing else busy. Writes benchmarks/long_inputs.json.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

import attnbook
from attnbook import cost
from attnbook.attention import KVCache, MultiHeadAttention, merge_heads, split_heads
from attnbook.language_models import DecoderOnly, generate

ROUNDS, REPEAT = 7, 5  # rounds of compare_speeds; calls per round (their median)
LAYER = dict(d_model=128, heads=4, batch=1, lengths=[64, 128, 256, 512, 1024, 2048, 4096])
MODEL = dict(vocab=64, d_model=64, num_heads=4, num_layers=2, d_ff=128)
CACHE = dict(batch=8, max_len=1024, positions=[32, 64, 128, 256, 512, 1000])
GENERATION = {"dates": dict(sequences=200, tokens=46, max_len=48)}


def by_length(timed: dict, names: list[str], lengths: list[int], key: str) -> dict:
    """``{"explicit T=64": {...}, ...}`` -> ``{"explicit": [{"T": 64, ...}, ...], ...}``."""
    return {name: [{key: n, **timed[f"{name} {key}={n}"], "repeat": REPEAT} for n in lengths] for name in names}


def attention_layer() -> dict:
    torch.manual_seed(0)
    d_model, heads = LAYER["d_model"], LAYER["heads"]
    layer = MultiHeadAttention(d_model, heads).eval()

    def fused(x):
        projections = (layer.q_proj, layer.k_proj, layer.v_proj)
        q, k, v = (split_heads(projection(x), heads) for projection in projections)
        return layer.out_proj(merge_heads(F.scaled_dot_product_attention(q, k, v)))

    steps = {}
    for T in LAYER["lengths"]:
        x = torch.randn(LAYER["batch"], T, d_model)
        steps[f"explicit T={T}"] = lambda x=x: layer(x, x, x)[0]
        steps[f"fused T={T}"] = lambda x=x: fused(x)
    with torch.no_grad():
        timed = cost.compare_speeds(steps, rounds=ROUNDS, repeat=REPEAT)  # every length in every round
        faults = {
            name: [page_faults(steps[f"{name} T={T}"]) for T in LAYER["lengths"]] for name in ("explicit", "fused")
        }
    results = by_length(timed, ["explicit", "fused"], LAYER["lengths"], "T")
    for i, T in enumerate(LAYER["lengths"]):
        print(f"T={T:5d} " + "  ".join(f"{n} {r[i]['median_ms']:.2f} ms" for n, r in results.items()), flush=True)
    return {
        "setting": dict(LAYER, threads=torch.get_num_threads(), step="forward, no gradients"),
        "milliseconds": results,
        "page_faults_per_call": faults,
    }


def page_faults(step, calls: int = 3) -> float:
    """Minor page faults per call of ``step`` (the mean of ``calls`` calls): pages supplied fresh."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


#: glibc's settings for a process that keeps freed memory: no block from mmap, no trimming.
MEMORY_KEPT = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


def memory_kept() -> dict:
    """``attention_layer`` and ``cache_step`` again, in a fresh process with :data:`MEMORY_KEPT` in
    its environment."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "kept.json"
        env = {**os.environ, **MEMORY_KEPT}
        subprocess.run([sys.executable, __file__, "--memory-kept", str(out)], env=env, check=True)
        results = json.loads(out.read_text())
    for result in results.values():
        result["setting"]["allocator"] = " ".join(f"{key}={value}" for key, value in MEMORY_KEPT.items())
    return results


def new_model(max_len: int) -> DecoderOnly:
    torch.manual_seed(0)
    return DecoderOnly(
        MODEL["vocab"],
        d_model=MODEL["d_model"],
        num_heads=MODEL["num_heads"],
        num_layers=MODEL["num_layers"],
        d_ff=MODEL["d_ff"],
        max_positions=max_len,
    ).eval()


class SetAsideCache(KVCache):
    """A key/value cache written into memory set aside for ``capacity`` positions: the new positions' keys
    and values are copied into place, the cache itself is not copied (``KVCache.extend`` concatenates)."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.buffers: tuple[torch.Tensor, torch.Tensor] | None = None  # keys, values (B, H, capacity, d_head)

    def extend(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.buffers is None:
            b, h, _, d = keys.shape
            self.buffers = (keys.new_empty(b, h, self.capacity, d), values.new_empty(b, h, self.capacity, d))
        start, end = self.seen, self.seen + keys.size(2)
        self.buffers[0][:, :, start:end] = keys
        self.buffers[1][:, :, start:end] = values
        self.rewind(end)
        return self.keys, self.values

    def rewind(self, positions: int) -> None:
        """Keep the first ``positions`` positions (the later ones are overwritten by the next extend)."""
        self.seen = positions
        self.keys, self.values = (buffer[:, :, :positions] for buffer in self.buffers)


CACHE_WAYS = ["with the cache", "set-aside cache", "without"]


def cache_step() -> dict:
    model = new_model(CACHE["max_len"])
    steps = {}
    with torch.no_grad():
        for t in CACHE["positions"]:
            ids = torch.randint(4, MODEL["vocab"], (CACHE["batch"], t + 1))  # t tokens so far, and the new one
            caches = model.new_caches()
            model(ids[:, :t], caches)  # the t earlier positions, cached once (not timed)
            stored = [(cache.keys, cache.values) for cache in caches]
            set_aside = [SetAsideCache(t + 1) for _ in caches]
            model(ids[:, :t], set_aside)  # the same t positions, in the set-aside memory

            def cached(ids=ids, t=t, caches=caches, stored=stored):
                for cache, (keys, values) in zip(caches, stored):  # back to t positions: no copy
                    cache.keys, cache.values = keys, values
                return model(ids[:, t:], caches)  # the new position only

            def cached_set_aside(ids=ids, t=t, caches=set_aside):
                for cache in caches:
                    cache.rewind(t)  # back to t positions: no copy
                return model(ids[:, t:], caches)  # the new position only

            assert torch.allclose(cached().logits, cached_set_aside().logits, atol=1e-5)  # the same step
            steps[f"with the cache t={t}"] = cached
            steps[f"set-aside cache t={t}"] = cached_set_aside
            steps[f"without t={t}"] = lambda ids=ids: model(ids)  # all t + 1 positions
        timed = cost.compare_speeds(steps, rounds=ROUNDS, repeat=REPEAT)
        faults = {way: [page_faults(steps[f"{way} t={t}"]) for t in CACHE["positions"]] for way in CACHE_WAYS}
    results = by_length(timed, CACHE_WAYS, CACHE["positions"], "t")
    for i, t in enumerate(CACHE["positions"]):
        print(f"t={t:5d} " + "  ".join(f"{n} {r[i]['median_ms']:.2f} ms" for n, r in results.items()), flush=True)
    return {
        "setting": dict(
            MODEL, **CACHE, threads=torch.get_num_threads(), step="one new token for every sequence, no gradients"
        ),
        "milliseconds": results,
        "page_faults_per_call": faults,
    }


def generation() -> dict:
    results = {}
    for name, setting in GENERATION.items():
        model = new_model(setting["max_len"])
        prompt = torch.full((setting["sequences"], 1), 1)

        def run(use_cache):
            generator = torch.Generator().manual_seed(0)
            return generate(model, prompt, setting["tokens"], 1.0, None, generator, use_cache=use_cache)

        assert torch.equal(run(True), run(False))
        timed = cost.compare_speeds(
            {"with the cache": lambda: run(True), "without": lambda: run(False)}, rounds=ROUNDS, repeat=1
        )  # one generation per round
        timed = {way: {**result, "repeat": 1} for way, result in timed.items()}
        results[name] = {"setting": dict(setting, **MODEL, threads=torch.get_num_threads()), **timed}
        print(name, "  ".join(f"{n} {r['median_ms']:.1f} ms" for n, r in timed.items()), flush=True)
    return results


def main() -> None:
    attnbook.setup(seed=0)  # one thread
    if sys.argv[1:2] == ["--memory-kept"]:  # the memory-kept process
        kept = {"attention_layer": attention_layer(), "cache_step": cache_step()}
        Path(sys.argv[2]).write_text(json.dumps(kept))
        return
    before = cost.machine_state()
    layer = attention_layer()
    kept = memory_kept()
    results = {
        "rounds": ROUNDS,
        "attention_layer": layer,
        "attention_layer_memory_kept": kept["attention_layer"],
        "cache_step": cache_step(),
        "cache_step_memory_kept": kept["cache_step"],
        "generation": generation(),
        "machine_state": {"before": before, "after": cost.machine_state()},
    }
    cost.write_benchmark(Path(__file__).parent / "long_inputs.json", results)


if __name__ == "__main__":
    main()
