"""Where greedy decoding's speed-up comes from (Chapter 6.4): the encoder run once, and the decoder's caches.

    .venv/bin/python benchmarks/decoding_split.py

``transformer_speed.json`` times greedy decoding that reruns the whole model on the prefix at every step
against ``greedy_decode``, which runs the encoder once and caches the decoder's keys and values; its ratio
mixes the two savings. This record adds a loop between them: the encoder once, then the decoder rerun on
the whole prefix at every step (its cross-attention projecting the encoder's output again at every step,
as ``Transformer.forward`` does). The model and data are ``transformer_speed``'s decoding part: the
chapter's Transformer after two passes, decoding the 1 000 test dates, every loop stopping once each date
has produced eos, all three giving the same tokens (checked). The three loops take turns in ``ROUNDS``
rounds (``attnbook.cost.compare_speeds``), one call each per round, after a warm-up call each; the record
keeps the median, the fastest and the slowest round and every round's time. One thread. Writes
benchmarks/decoding_split.json, which chapters/06_transformer/04_decoding.ipynb reads.
"""

from pathlib import Path

import torch

import attnbook
from attnbook import cost, data, tasks
from attnbook.decoding import greedy_decode
from attnbook.transformer import causal_mask
from transformer_speed import ROUNDS, greedy_by_recomputing, trained_transformer

MAX_LEN = 12


def greedy_encoder_once(model, src, max_len, bos_id=data.Vocab.bos_id, eos_id=data.Vocab.eos_id):
    """Greedy decoding that runs the encoder once, then the decoder on the whole prefix at every step,
    stopping, as greedy_decode does, once every row has produced eos."""
    prefix = torch.full((src.size(0), 1), bos_id)  # (B, 1)
    done = torch.zeros(src.size(0), dtype=torch.bool)  # (B,)
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src)  # (B, S, d), (B, S): once
        for _ in range(max_len):
            x = model.embed(prefix, model.tgt_embedding)  # (B, t, d)
            future = causal_mask(prefix.size(1))[None, None]  # (1, 1, t, t)
            for layer in model.decoder_layers:  # as Transformer.forward's decoder
                x, _, _ = layer(x, memory, future, src_mask[:, None, None, :])
            logits = model.generator(model.decoder_norm(x[:, -1]))  # (B, V)
            prefix = torch.cat([prefix, logits.argmax(dim=-1, keepdim=True)], dim=1)  # (B, t + 1)
            done = done | (prefix[:, -1] == eos_id)
            if done.all():
                break
    return prefix


def main() -> None:
    attnbook.setup(seed=0)  # one thread
    splits = tasks.date_splits(n_train=10_000, n_valid=1_000, n_test=1_000, seed=0)  # the chapter's data
    vocabs = data.build_vocabs(splits.train + splits.valid + splits.test)
    before = cost.machine_state()
    model = trained_transformer(splits, vocabs)
    model.eval()
    src = data.make_batch(splits.test, *vocabs).src  # (1000, S)
    cached = greedy_decode(model, src, MAX_LEN).tokens
    for loop in (greedy_by_recomputing, greedy_encoder_once):  # the same tokens, up to eos
        rows = loop(model, src, MAX_LEN)[:, 1:].tolist()
        assert [row[: row.index(data.Vocab.eos_id)] if data.Vocab.eos_id in row else row for row in rows] == cached
    loops = {
        "recomputing": lambda: greedy_by_recomputing(model, src, MAX_LEN),
        "encoder once": lambda: greedy_encoder_once(model, src, MAX_LEN),
        "greedy_decode": lambda: greedy_decode(model, src, MAX_LEN),
    }
    timed = cost.compare_speeds(loops, rounds=ROUNDS, repeat=1)
    for name, result in timed.items():
        print(f"{name}: {result['median_ms']:.1f} ms", flush=True)
    results = {
        "setting": dict(dates=len(splits.test), max_len=MAX_LEN, rounds=ROUNDS, threads=torch.get_num_threads()),
        "results": timed,
        "machine_state": {"before": before, "after": cost.machine_state()},
    }
    cost.write_benchmark(Path(__file__).parent / "decoding_split.json", results)


if __name__ == "__main__":
    main()
