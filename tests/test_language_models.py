"""Chapter 7: masking for the masked-token objective, the encoder-only and decoder-only stacks, generation,
the key/value cache, the running softmax and the cost helpers."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attnbook import cost, numpy_attention
from attnbook.attention import KVCache, MultiHeadAttention
from attnbook.language_models import DecoderOnly, EncoderOnly, generate, mask_tokens, next_token

MASK_ID = 30
ORDINARY = torch.arange(4, 30)


def random_ids(batch=64, length=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 30, (batch, length), generator=g)
    lengths = torch.randint(5, length + 1, (batch,), generator=g)
    ids[torch.arange(length) >= lengths.unsqueeze(1)] = 0  # right padding
    return ids


def test_mask_tokens_follows_the_80_10_10_rule():
    ids = random_ids(batch=400)
    maskable = ids != 0
    masked = mask_tokens(ids, maskable, MASK_ID, ORDINARY, generator=torch.Generator().manual_seed(1))
    counts = masked.chosen.sum(dim=1)
    expected = (maskable.sum(dim=1).float() * 0.15).round().clamp(min=1).long()
    assert torch.equal(counts, expected)
    assert not (masked.chosen & ~maskable).any()
    chosen = masked.chosen
    as_mask = (masked.inputs == MASK_ID) & chosen
    changed = (masked.inputs != ids) & (masked.inputs != MASK_ID) & chosen
    kept = (masked.inputs == ids) & chosen
    n = chosen.sum().item()
    assert abs(as_mask.sum().item() / n - 0.8) < 0.03
    assert abs((changed | kept).sum().item() / n - 0.2) < 0.03
    assert kept.sum().item() / n > 0.08  # 10 % kept, plus the random ids that happen to equal the original
    assert torch.equal(masked.inputs[~chosen], ids[~chosen])
    assert torch.equal(masked.targets[chosen], ids[chosen])
    assert (masked.targets[~chosen] == -100).all()
    assert ((masked.inputs[changed] >= 4) & (masked.inputs[changed] < 30)).all()


def test_mask_tokens_differs_between_draws_and_repeats_with_a_seed():
    ids = random_ids()
    one = mask_tokens(ids, ids != 0, MASK_ID, ORDINARY, generator=torch.Generator().manual_seed(3))
    two = mask_tokens(ids, ids != 0, MASK_ID, ORDINARY, generator=torch.Generator().manual_seed(3))
    other = mask_tokens(ids, ids != 0, MASK_ID, ORDINARY, generator=torch.Generator().manual_seed(4))
    assert torch.equal(one.inputs, two.inputs)
    assert not torch.equal(one.chosen, other.chosen)


def test_mask_tokens_rejects_bad_input():
    ids = random_ids()
    with pytest.raises(ValueError, match="maskable"):
        mask_tokens(ids, (ids != 0)[:, :5], MASK_ID, ORDINARY)
    with pytest.raises(ValueError, match="rate"):
        mask_tokens(ids, ids != 0, MASK_ID, ORDINARY, rate=1.5)


def small(cls, **kwargs):
    torch.manual_seed(0)
    return cls(40, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_positions=64, **kwargs).eval()


def test_decoder_only_is_causal_and_encoder_only_is_not():
    ids = random_ids(batch=3, length=12)
    ids[ids == 0] = 5
    changed = ids.clone()
    changed[:, 8] = (changed[:, 8] - 3) % 26 + 4  # another token at position 8
    for cls, causal in ((DecoderOnly, True), (EncoderOnly, False)):
        model = small(cls)
        with torch.no_grad():
            before, after = model(ids).logits, model(changed).logits
        assert torch.allclose(before[:, :8], after[:, :8]) == causal, cls.__name__
        assert not torch.allclose(before[:, 8:], after[:, 8:])


def test_encoder_only_ignores_padding():
    model = small(EncoderOnly)
    ids = torch.tensor([[31, 5, 6, 7, 0, 0]])
    with torch.no_grad():
        padded = model(ids)
        short = model(ids[:, :4])
    assert torch.allclose(padded.logits[:, :4], short.logits, atol=1e-5)
    assert padded.weights.shape == (1, 2, 2, 6, 6)
    assert torch.all(padded.weights[..., 4:] == 0)


def test_cached_forward_equals_the_full_forward():
    model = small(DecoderOnly)
    ids = random_ids(batch=2, length=10)
    ids[ids == 0] = 7
    caches = model.new_caches()
    with torch.no_grad():
        full = model(ids)
        first = model(ids[:, :6], caches)
        steps = [model(ids[:, t : t + 1], caches) for t in range(6, 10)]
    assert all(len(cache) == 10 for cache in caches)
    assert torch.allclose(first.logits, full.logits[:, :6], atol=1e-5)
    for t, step in zip(range(6, 10), steps):
        assert torch.allclose(step.logits[:, 0], full.logits[:, t], atol=1e-5)
        assert step.weights.shape == (2, 2, 2, 1, t + 1)
        assert torch.allclose(step.weights[..., 0, :], full.weights[..., t, : t + 1], atol=1e-6)


@pytest.mark.parametrize("temperature, top_k", [(0.0, None), (1.0, None), (0.8, 5)])
def test_generation_with_and_without_the_cache_gives_the_same_tokens(temperature, top_k):
    model = small(DecoderOnly)
    prompt = torch.tensor([[1, 5], [1, 9], [1, 12]])
    runs = [
        generate(model, prompt, 30, temperature, top_k, torch.Generator().manual_seed(2), use_cache=use)
        for use in (True, False)
    ]
    assert runs[0].shape == (3, 32)
    assert torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0][:, :2], prompt)


def test_generation_stops_rows_at_eos_and_pads_after():
    model = small(DecoderOnly).train()
    with torch.no_grad():
        model.head.bias.fill_(0.0)
        model.head.bias[2] = 50.0  # eos is always the likeliest
    out = generate(model, torch.tensor([[1], [1]]), 10, temperature=0.0, eos_id=2)
    assert out.tolist() == [[1, 2], [1, 2]]
    assert model.training is True  # generate ran in eval mode and restored the mode


def test_next_token_greedy_top_k_and_temperature():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]]).repeat(2000, 1)
    assert next_token(logits, 0.0).eq(1).all()
    drawn = next_token(logits, 1.0, top_k=2, generator=torch.Generator().manual_seed(0))
    assert set(drawn.tolist()) == {1, 3}
    share = (drawn == 1).float().mean().item()
    assert abs(share - 1 / (1 + np.exp(-1))) < 0.04  # softmax of (3, 2)
    cold = next_token(logits, 0.1, generator=torch.Generator().manual_seed(0))
    assert (cold == 1).float().mean().item() > 0.99
    with pytest.raises(ValueError, match="temperature"):
        next_token(logits, -1.0)
    with pytest.raises(ValueError, match="top_k"):
        next_token(logits, 1.0, top_k=0)


def test_decoder_only_rejects_too_many_positions_and_wrong_caches():
    model = small(DecoderOnly)
    with pytest.raises(ValueError, match="max_positions=64"):
        model(torch.ones(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="2 layers"):
        model(torch.ones(1, 3, dtype=torch.long), [KVCache()])


def test_kv_cache_grows_and_rejects_another_batch():
    cache = KVCache()
    assert len(cache) == 0 and "empty" in repr(cache)
    keys, values = cache.extend(torch.zeros(2, 4, 3, 8), torch.ones(2, 4, 3, 8))
    keys, values = cache.extend(torch.zeros(2, 4, 1, 8), torch.ones(2, 4, 1, 8))
    assert keys.shape == values.shape == (2, 4, 4, 8) and len(cache) == 4
    with pytest.raises(ValueError, match=r"\(B, H, d_head\)=\(3, 4, 8\) but the cache holds \(2, 4, 8\)"):
        cache.extend(torch.zeros(3, 4, 1, 8), torch.zeros(3, 4, 1, 8))


def test_multi_head_attention_with_a_cache_equals_attention_to_everything():
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 7, 16)
    cache = KVCache()
    with torch.no_grad():
        attention(x[:, :5], x[:, :5], x[:, :5], cache=cache)
        out, weights = attention(x[:, 5:], x[:, 5:], x[:, 5:], cache=cache)
        expected, expected_weights = attention(x[:, 5:], x, x)
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.allclose(weights, expected_weights, atol=1e-6)


@pytest.mark.parametrize("block_size", [1, 3, 7, 100])
def test_running_softmax_equals_the_plain_softmax(block_size):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 11, 4)), rng.normal(size=(2, 11, 3))
    expected, _ = numpy_attention.scaled_dot_product_attention(q, k, v)
    assert np.allclose(numpy_attention.running_softmax_attention(q, k, v, block_size), expected)
    big = 400 * q  # scores of thousands: exp would overflow without the running maximum
    expected, _ = numpy_attention.scaled_dot_product_attention(big, k, v)
    assert np.allclose(numpy_attention.running_softmax_attention(big, k, v, block_size), expected)


def test_running_softmax_rejects_a_bad_block_size():
    with pytest.raises(ValueError, match="block_size"):
        numpy_attention.running_softmax_attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 3)), 0)


def test_peak_memory_sees_a_large_allocation_and_log_slope_finds_powers():
    size = 64 * 2**20
    peak = cost.peak_memory(lambda: torch.ones(size // 4))
    if peak is not None:  # Linux
        assert 0.9 * size < peak < 1.5 * size
    assert cost.log_slope([10, 20, 40, 80], [3 * n**2 for n in (10, 20, 40, 80)]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="two positive"):
        cost.log_slope([10], [1.0])


def test_peak_memory_repeats_the_call_and_keeps_the_largest_reading():
    sizes = iter([1, 64 * 2**20, 1])  # bytes: only the second call holds a large block
    calls = []

    def call():
        calls.append(1)
        return torch.ones(next(sizes) // 4)

    peak = cost.peak_memory(call, repeat=3)
    assert len(calls) == 3
    if peak is not None:  # Linux
        assert 0.9 * 64 * 2**20 < peak < 1.5 * 64 * 2**20
    for bad in (0, 2.0, "3"):
        with pytest.raises(ValueError, match="repeat must be a positive int, got"):
            cost.peak_memory(call, repeat=bad)


def fake_clock(monkeypatch, durations):
    """Make ``attnbook.cost`` read a clock the test controls: ``step(name)()`` advances it by the next
    of ``durations[name]`` and logs the call. No test times anything live: a busy machine slows any call."""
    clock, calls = {"now": 0.0}, []
    durations = {name: iter(values) for name, values in durations.items()}
    monkeypatch.setattr(cost, "time", SimpleNamespace(perf_counter=lambda: clock["now"]))

    def step(name):
        def call():
            calls.append(name)
            clock["now"] += next(durations[name])

        return call

    return step, calls


def test_seconds_takes_the_median_after_the_warmup(monkeypatch):
    step, _ = fake_clock(monkeypatch, {"a": [9.0, 0.03, 0.01, 0.02]})  # a warm-up call, then three timed
    assert cost.seconds(step("a"), repeat=3, warmup=1) == pytest.approx(0.02)


def test_compare_speeds_alternates_and_reports_median_and_spread(monkeypatch):
    step, calls = fake_clock(
        monkeypatch,
        {
            "a": [9.0, 0.010, 0.012, 0.011, 0.030, 0.010],  # warm-up, 5 rounds
            "b": [9.0, 0.002, 0.002, 0.003, 0.002, 0.004],
        },
    )
    result = cost.compare_speeds({"a": step("a"), "b": step("b")}, rounds=5, repeat=1)
    # one warm-up call each, then rounds whose order rotates: a first, then b first, ...
    assert calls == ["a", "b"] + ["a", "b", "b", "a"] * 2 + ["a", "b"]
    assert result["a"] == {
        "median_ms": 11.0,
        "low_ms": 10.0,
        "high_ms": 30.0,
        "rounds": 5,
        "round_ms": [10.0, 12.0, 11.0, 30.0, 10.0],
        "round_place": [0, 1, 0, 1, 0],
    }
    assert result["b"] == {
        "median_ms": 2.0,
        "low_ms": 2.0,
        "high_ms": 4.0,
        "rounds": 5,
        "round_ms": [2.0, 2.0, 3.0, 2.0, 4.0],
        "round_place": [1, 0, 1, 0, 1],
    }


# ============================================================ the exercise checkers of Chapter 7

from attnbook.exercises import check_mask_tokens, check_running_softmax  # noqa: E402
from conftest import checker_fails, checker_passes  # noqa: E402


def package_masking(ids, maskable, mask_id, replacement_ids):
    masked = mask_tokens(ids, maskable, mask_id, replacement_ids)
    return masked.inputs, masked.targets


def bernoulli_masking(
    ids,
    maskable,
    mask_id,
    replacement_ids,
    mask_share=0.8,
    random_share=0.1,
    rate=0.15,
    targets_everywhere=False,
    targets_only_masked=False,
    any_id=False,
    choose_all=False,
):
    """A correct solution written another way (each position chosen with probability 0.15), or a typical mistake."""
    chosen = (torch.rand(ids.shape) < rate) & (maskable | choose_all)
    u = torch.rand(ids.shape)
    pool = torch.arange(0, 42) if any_id else replacement_ids
    random = pool[torch.randint(len(pool), ids.shape)]
    inputs = ids.clone()
    inputs[chosen & (u < mask_share)] = mask_id
    swap = chosen & (u >= mask_share) & (u < mask_share + random_share)
    inputs[swap] = random[swap]
    if targets_only_masked:
        chosen = chosen & (u < mask_share)
    targets = ids.clone() if targets_everywhere else torch.where(chosen, ids, -100)
    return inputs, targets


def test_check_mask_tokens_accepts_correct_solutions(capsys):
    checker_passes(check_mask_tokens, package_masking, capsys)
    checker_passes(check_mask_tokens, bernoulli_masking, capsys)
    checker_passes(check_mask_tokens, lambda *a: tuple(x.numpy() for x in bernoulli_masking(*a)), capsys)


@pytest.mark.parametrize(
    "options, fragment",
    [
        (dict(mask_share=1.0), "hint: draw one uniform number"),
        (dict(mask_share=0.8, random_share=0.2), "expected about 80 %, 10 % and 10 %"),
        (dict(rate=0.3), "of the maskable positions were chosen; expected 15 %"),
        (dict(targets_everywhere=True), "not maskable"),
        (dict(targets_only_masked=True), "the positions given a random id have none"),
        (dict(any_id=True), "not in replacement_ids"),
        (dict(choose_all=True), "not maskable"),
    ],
)
def test_check_mask_tokens_explains_typical_mistakes(capsys, options, fragment):
    checker_fails(check_mask_tokens, lambda *a: bernoulli_masking(*a, **options), capsys, fragment)


def test_check_mask_tokens_survives_odd_answers_and_leaves_the_random_state_alone(capsys):
    state = torch.random.get_rng_state()
    checker_fails(check_mask_tokens, lambda *a: a[0], capsys, "return a pair (inputs, targets)")
    checker_fails(check_mask_tokens, lambda ids, *a: (ids, torch.full_like(ids, -100)), capsys, "-100 everywhere")
    checker_fails(check_mask_tokens, lambda ids, *a: (ids, ids[:, :3]), capsys, "targets is a tensor of shape")
    assert torch.equal(state, torch.random.get_rng_state())


def learner_running_softmax(q, k, v, block_size):
    """Written the way a learner might: torch, explicit loops over blocks."""
    q, k, v = (torch.as_tensor(x) for x in (q, k, v))
    m = torch.full((q.shape[0], 1), -float("inf"), dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(q.shape[0], v.shape[1], dtype=q.dtype)
    for kb, vb in zip(k.split(block_size), v.split(block_size)):
        s = q @ kb.T / q.shape[1] ** 0.5
        m_new = torch.maximum(m, s.amax(dim=1, keepdim=True))
        p = torch.exp(s - m_new)
        total = total * torch.exp(m - m_new) + p.sum(dim=1, keepdim=True)
        acc = acc * torch.exp(m - m_new) + p @ vb
        m = m_new
    return acc / total


def test_check_running_softmax_accepts_correct_solutions(capsys):
    checker_passes(check_running_softmax, numpy_attention.running_softmax_attention, capsys)
    checker_passes(check_running_softmax, learner_running_softmax, capsys)


def no_maximum(q, k, v, block_size):
    np.seterr(over="ignore", invalid="ignore")  # restored after the test by the fixture below
    total, acc = 0.0, 0.0
    for start in range(0, len(k), block_size):
        p = np.exp(q @ k[start : start + block_size].T / np.sqrt(q.shape[1]))
        total, acc = total + p.sum(axis=1, keepdims=True), acc + p @ v[start : start + block_size]
    return acc / total


@pytest.fixture(autouse=True)
def numpy_errors():
    saved = np.geterr()
    yield
    np.seterr(**saved)


def last_block_only(q, k, v, block_size):
    start = (len(k) - 1) // block_size * block_size
    return numpy_attention.scaled_dot_product_attention(q, k[start:], v[start:])[0]


@pytest.mark.parametrize(
    "fn, fragment",
    [
        (no_maximum, "exp overflowed"),
        (
            lambda q, k, v, b: __import__("attnbook.exercises.beyond", fromlist=["_"])._blockwise(
                q, k, v, b, "a not rescaled"
            ),
            "multiply a by exp(m - m') too",
        ),
        (
            lambda q, k, v, b: __import__("attnbook.exercises.beyond", fromlist=["_"])._blockwise(
                q, k, v, b, "not divided"
            ),
            "divide the weighted sum of values a by ell",
        ),
        (last_block_only, "attention to the last block only"),
        (lambda q, k, v, b: numpy_attention.scaled_dot_product_attention(q * np.sqrt(q.shape[1]), k, v)[0], "√d_k"),
        (lambda q, k, v, b: None, "returned None"),
        (lambda q, k, v, b: q, "shape"),
    ],
)
def test_check_running_softmax_explains_typical_mistakes(capsys, fn, fragment):
    checker_fails(check_running_softmax, fn, capsys, fragment)
