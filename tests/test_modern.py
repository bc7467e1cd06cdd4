"""Chapter 8: RMSNorm, rotary positions, SwiGLU, grouped-query attention, sliding windows, ModernDecoder."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.attention import KVCache, MultiHeadAttention, merge_heads, scaled_dot_product_attention, split_heads
from attnbook.language_models import generate
from attnbook.modern import (
    POSITION_SCHEMES,
    GroupedQueryAttention,
    ModernDecoder,
    RMSNorm,
    SwiGLU,
    apply_rope,
    apply_rope_halves,
    banded_attention,
    decoder_parameters,
    expand_kv_heads,
    kv_cache_bytes,
    sliding_window_mask,
    swiglu_width,
)


def test_rms_norm_equals_torch_and_differs_from_layer_norm():
    torch.manual_seed(0)
    ours, theirs = RMSNorm(12, eps=1e-5), nn.RMSNorm(12, eps=1e-5)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
        theirs.weight.copy_(ours.weight)
    x = torch.randn(3, 5, 12) + 2.0  # a mean far from 0: LayerNorm would remove it, RMSNorm keeps it
    torch.testing.assert_close(ours(x), theirs(x))
    assert (ours(x) - nn.functional.layer_norm(x, (12,)) * ours.weight).abs().max() > 0.1
    rms = ours(x).div(ours.weight).pow(2).mean(-1).sqrt()  # (3, 5): 1 after the gain is divided out
    torch.testing.assert_close(rms, torch.ones(3, 5), atol=1e-4, rtol=0)


def test_rope_rotates_pairs_by_position_times_theta():
    x = torch.zeros(1, 4)  # one position, d = 4: pairs (0, 1) and (2, 3)
    x[0, 0], x[0, 2] = 1.0, 1.0
    out = apply_rope(x, torch.tensor([3]), base=100.0)  # θ_0 = 1, θ_1 = 100^(-2/4) = 0.1
    expected = torch.tensor([[torch.cos(torch.tensor(3.0)), torch.sin(torch.tensor(3.0)), 0, 0]])
    expected[0, 2:] = torch.tensor([torch.cos(torch.tensor(0.3)), torch.sin(torch.tensor(0.3))])
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(apply_rope(x, torch.tensor([0])), x)  # position 0: no rotation


def test_rope_keeps_lengths_and_makes_scores_depend_on_the_difference_only():
    torch.manual_seed(0)
    q, k = torch.randn(1, 16), torch.randn(1, 16)

    def score(i, j):
        return (apply_rope(q, torch.tensor([i])) @ apply_rope(k, torch.tensor([j])).T).item()

    same_gap = [score(i + 3, i) for i in (0, 7, 50, 400)]
    assert max(same_gap) - min(same_gap) < 1e-3
    assert abs(score(3, 0) - score(5, 0)) > 1e-2  # a different gap gives a different score
    x = torch.randn(2, 9, 16)
    torch.testing.assert_close(apply_rope(x, torch.arange(9)).norm(dim=-1), x.norm(dim=-1))


def test_rotate_half_is_the_same_map_up_to_a_permutation():
    torch.manual_seed(0)
    x, positions = torch.randn(2, 3, 7, 10), torch.arange(7)
    order = torch.cat([torch.arange(0, 10, 2), torch.arange(1, 10, 2)])  # even features first, then odd
    torch.testing.assert_close(apply_rope(x, positions)[..., order], apply_rope_halves(x[..., order], positions))
    assert (apply_rope(x, positions) - apply_rope_halves(x, positions)).abs().max() > 0.1  # not the same layout


def test_rope_takes_positions_per_row_and_rejects_bad_input():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    rows = torch.stack([torch.arange(5), torch.arange(5) + 10])  # (2, 5): the second row starts at 10
    torch.testing.assert_close(apply_rope(x, rows)[1], apply_rope(x[1:], torch.arange(10, 15))[0])
    with pytest.raises(ValueError, match="d=7 features.*even"):
        apply_rope(torch.randn(2, 5, 7), torch.arange(5))
    with pytest.raises(ValueError, match=r"positions of shape \(4,\) must end in T=5"):
        apply_rope(x, torch.arange(4))


def test_swiglu_computes_the_gated_product_and_matches_a_relu_layers_size():
    torch.manual_seed(0)
    layer, x = SwiGLU(6, 16), torch.randn(4, 6)
    expected = (F.silu(x @ layer.w1.weight.T) * (x @ layer.w3.weight.T)) @ layer.w2.weight.T
    torch.testing.assert_close(layer(x), expected)
    assert swiglu_width(4096, multiple_of=256) == 11008  # LLaMA 7B's width
    d = 96
    swiglu = sum(p.numel() for p in SwiGLU(d, swiglu_width(d)).parameters())
    relu = 2 * d * 4 * d  # two matrices of d x 4d
    assert swiglu == relu


def test_expand_kv_heads_follows_repeat_interleave_order():
    x = torch.arange(2).view(1, 2, 1, 1).float()  # G = 2 heads holding 0 and 1
    assert expand_kv_heads(x, 6).flatten().tolist() == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_equals_torch_sdpa(num_kv_heads, causal):
    torch.manual_seed(num_kv_heads)
    layer, x = GroupedQueryAttention(16, 4, num_kv_heads), torch.randn(3, 6, 16)
    mask = torch.ones(6, 6, dtype=torch.bool).tril() if causal else None
    out, weights = layer(x, mask)
    q = split_heads(layer.q_proj(x), 4)  # (B, 4, T, d_head)
    k, v = split_heads(layer.k_proj(x), num_kv_heads), split_heads(layer.v_proj(x), num_kv_heads)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(out, layer.out_proj(merge_heads(heads)))
    assert weights.shape == (3, 4, 6, 6)


def test_grouped_query_attention_with_every_head_is_chapter_5s_layer():
    torch.manual_seed(0)
    ours, chapter5 = GroupedQueryAttention(16, 4, 4), MultiHeadAttention(16, 4, bias=False)
    chapter5.load_state_dict(ours.state_dict())
    x, mask = torch.randn(2, 5, 16), torch.ones(5, 5, dtype=torch.bool).tril()
    torch.testing.assert_close(ours(x, mask)[0], chapter5(x, x, x, mask)[0])


def test_grouped_query_attention_caches_only_its_kv_heads_and_rejects_bad_sizes():
    layer, cache = GroupedQueryAttention(32, 8, 2), KVCache()
    layer(torch.randn(1, 5, 32), cache=cache)
    assert cache.keys.shape == (1, 2, 5, 4)  # G = 2 heads of d_head = 4
    with pytest.raises(ValueError, match="num_heads=8 is not divisible by num_kv_heads=3"):
        GroupedQueryAttention(32, 8, 3)
    with pytest.raises(ValueError, match="d_model=30 is not divisible by num_heads=8"):
        GroupedQueryAttention(30, 8, 2)
    with pytest.raises(ValueError, match="d_model"):
        layer(torch.randn(1, 5, 16))


def test_sliding_window_mask_is_a_causal_band():
    mask = sliding_window_mask(torch.arange(5), torch.arange(5), window=2)
    assert mask.int().tolist() == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [0, 1, 1, 0, 0],
        [0, 0, 1, 1, 0],
        [0, 0, 0, 1, 1],
    ]
    causal = sliding_window_mask(torch.arange(4), torch.arange(4))
    assert torch.equal(causal, torch.ones(4, 4, dtype=torch.bool).tril())


def test_rolling_cache_keeps_the_last_window_positions():
    cache = KVCache(window=3)
    for t in range(5):
        keys, _ = cache.extend(torch.full((1, 1, 1, 2), float(t)), torch.zeros(1, 1, 1, 2))
        assert keys.size(2) == min(t, 3) + 1  # what the new query may read: the kept ones and itself
    assert len(cache) == 3 and cache.seen == 5
    assert cache.keys[0, 0, :, 0].tolist() == [2.0, 3.0, 4.0]
    assert cache.copy().seen == 5 and cache.select_rows(torch.tensor([0])).window == 3


@pytest.mark.parametrize("scheme", POSITION_SCHEMES)
@pytest.mark.parametrize("window", [None, 3])
def test_modern_decoder_cached_steps_equal_the_full_forward(scheme, window):
    torch.manual_seed(0)
    model = ModernDecoder(20, d_model=32, num_heads=4, num_kv_heads=2, positions=scheme, window=window)
    ids = torch.randint(1, 20, (2, 9))
    full = model(ids).logits  # (2, 9, 20)
    caches = model.new_caches()
    steps = [model(ids[:, :4], caches).logits] + [model(ids[:, t : t + 1], caches).logits for t in range(4, 9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert len(caches[0]) == (9 if window is None else window)
    assert torch.equal(
        generate(model, ids[:, :2], 6, temperature=0), generate(model, ids[:, :2], 6, temperature=0, use_cache=False)
    )


def test_modern_decoder_is_causal_and_its_window_limits_what_it_reads():
    torch.manual_seed(0)
    model = ModernDecoder(20, d_model=32, num_heads=4, num_kv_heads=1, num_layers=1, window=3)
    ids = torch.randint(1, 20, (1, 8))
    changed = ids.clone()
    changed[0, 2] = (ids[0, 2] % 19) + 1  # another token at position 2
    moved = (model(ids).logits - model(changed).logits).abs().amax(dim=-1)[0]  # (8,)
    assert moved[:2].max() == 0  # earlier positions cannot see it
    assert moved[2:5].min() > 0  # positions 2, 3, 4 read it (window 3, one layer)
    assert moved[5:].max() == 0  # later ones are past the window


def test_modern_decoder_counts_and_position_limits():
    model = ModernDecoder(50, d_model=64, num_heads=8, num_kv_heads=2, num_layers=3)
    counted = sum(p.numel() for p in model.parameters())
    assert counted == decoder_parameters(50, 64, 3, 8, 2, swiglu_width(64))
    llama3_8b = decoder_parameters(128_256, 4096, 32, 32, 8, 14_336)
    assert round(llama3_8b / 1e9, 2) == 8.03
    assert kv_cache_bytes(32, 8, 128) == 131_072  # 128 KiB per token at 16 bits
    learned = ModernDecoder(20, positions="learned", max_positions=8)
    with pytest.raises(ValueError, match="position 8 is beyond max_positions=8 of learned positions"):
        learned(torch.ones(1, 9, dtype=torch.long))
    ModernDecoder(20, positions="rope", max_positions=8)(torch.ones(1, 9, dtype=torch.long))  # no table
    with pytest.raises(ValueError, match="positions"):
        ModernDecoder(20, positions="alibi")


@pytest.mark.parametrize("length, window", [(12, 4), (10, 4), (3, 5), (16, 1), (7, 7)])
def test_banded_attention_equals_masked_full_attention(length, window):
    torch.manual_seed(length)
    q, k, v = torch.randn(2, 3, length, 8), torch.randn(2, 3, length, 8), torch.randn(2, 3, length, 5)
    positions = torch.arange(length)
    expected, _ = scaled_dot_product_attention(q, k, v, sliding_window_mask(positions, positions, window))
    torch.testing.assert_close(banded_attention(q, k, v, window), expected)


@pytest.mark.parametrize("window", [0, -3, 2.5, True])
def test_sliding_window_mask_rejects_a_window_that_is_not_a_positive_int(window):
    with pytest.raises(ValueError, match=f"window must be a positive int, got {window!r}"):
        sliding_window_mask(torch.arange(4), torch.arange(4), window=window)
