"""Tests of attnbook.attention: masked_softmax and AdditiveAttention (chapter 2), LuongAttention and
local-p attention (chapter 3)."""

import numpy as np
import pytest
import torch

from attnbook.attention import (
    AdditiveAttention,
    ConcatScore,
    DotScore,
    GeneralScore,
    LocalPAttention,
    LuongAttention,
    PredictivePosition,
    local_p_window,
    masked_softmax,
)
from conftest import length_mask


def luong_scores(attention, query, keys):
    """The scores before the softmax: ``(B, d_q) -> (B, L)``, ``(B, T, d_q) -> (B, T, L)``."""
    queries = query.reshape(query.size(0), -1, query.size(-1))
    scores = attention.scorer(queries, attention.scorer.project_keys(keys))  # (B, T, L)
    return scores.reshape(*query.shape[:-1], -1)


# ===================================================================== masked_softmax


def test_masked_softmax_without_mask_is_torch_softmax():
    scores = torch.randn(3, 4, 5)
    assert torch.equal(masked_softmax(scores), torch.softmax(scores, dim=-1))
    assert torch.equal(masked_softmax(scores, dim=1), torch.softmax(scores, dim=1))


def test_masked_softmax_gives_exact_zeros_and_sums_to_one_over_the_rest():
    torch.manual_seed(0)
    scores = torch.randn(3, 6)
    mask = length_mask([6, 4, 1], 6)
    weights = masked_softmax(scores, mask)
    assert torch.equal(weights[~mask], torch.zeros(int((~mask).sum())))
    assert torch.allclose(weights.sum(-1), torch.ones(3))
    assert weights[2, 0] == 1.0
    # Same as the softmax of the unmasked scores alone.
    assert torch.allclose(weights[1, :4], torch.softmax(scores[1, :4], dim=-1))


def test_masked_softmax_fully_masked_row_is_zero_not_nan_and_has_finite_gradients():
    scores = torch.randn(3, 5, requires_grad=True)
    mask = length_mask([5, 0, 2], 5)
    weights = masked_softmax(scores, mask)
    assert not torch.isnan(weights).any()
    assert torch.equal(weights[1], torch.zeros(5))
    assert torch.allclose(weights[[0, 2]].sum(-1), torch.ones(2))
    (weights * torch.randn(3, 5)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert torch.equal(scores.grad[1], torch.zeros(5))
    assert torch.equal(scores.grad[2, 2:], torch.zeros(3))


def test_masked_softmax_broadcasts_padding_and_causal_masks():
    torch.manual_seed(0)
    scores = torch.randn(2, 4, 5)  # (B, T, L)
    padding = length_mask([5, 3], 5).unsqueeze(1)  # (B, 1, L)
    weights = masked_softmax(scores, padding)
    assert weights.shape == (2, 4, 5)
    assert torch.equal(weights[1, :, 3:], torch.zeros(4, 2))
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4))
    causal = torch.ones(4, 4, dtype=torch.bool).tril()  # (T, T), shared by the batch
    weights = masked_softmax(torch.randn(2, 4, 4), causal)
    assert torch.equal(weights.triu(1), torch.zeros(2, 4, 4))
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4))


def test_masked_softmax_is_stable_for_large_scores():
    scores = torch.tensor([[1000.0, 1001.0, 999.0, 5000.0], [-1000.0, -1001.0, -999.0, 0.0]])
    mask = torch.tensor([[True, True, True, False], [True, True, True, False]])
    weights = masked_softmax(scores, mask)
    assert not torch.isnan(weights).any()
    assert torch.allclose(weights[0, :3], torch.softmax(torch.tensor([0.0, 1.0, -1.0]), dim=-1))
    assert torch.allclose(weights[1, :3], torch.softmax(torch.tensor([0.0, -1.0, 1.0]), dim=-1))
    assert weights[0, 3] == 0 and weights[1, 3] == 0


def test_masked_softmax_other_dim():
    scores = torch.randn(4, 3)
    mask = length_mask([4, 2, 0], 4).T  # (4, 3): keys along dim 0
    weights = masked_softmax(scores, mask, dim=0)
    assert torch.allclose(weights.sum(0), torch.tensor([1.0, 1.0, 0.0]))
    assert torch.equal(weights[~mask], torch.zeros(int((~mask).sum())))


def test_masked_softmax_keeps_dtype():
    scores = torch.randn(2, 3, dtype=torch.float64)
    assert masked_softmax(scores, torch.ones(2, 3, dtype=torch.bool)).dtype == torch.float64


def test_masked_softmax_errors():
    scores = torch.randn(4, 9)
    with pytest.raises(TypeError, match=r"mask must be a bool tensor \(True = may attend\), got dtype torch.int64"):
        masked_softmax(scores, torch.ones(4, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 7\) does not broadcast to scores of shape \(4, 9\)"):
        masked_softmax(scores, torch.ones(4, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 4, 9\) does not broadcast"):
        masked_softmax(scores, torch.ones(2, 4, 9, dtype=torch.bool))  # would enlarge the scores
    with pytest.raises(TypeError, match="scores must be a floating-point tensor, got dtype torch.int64"):
        masked_softmax(torch.ones(2, 3, dtype=torch.long))


# ================================================================== AdditiveAttention


def small_attention():
    """d_q=2, d_k=3, h=2 with explicit weights, for a hand computation."""
    attention = AdditiveAttention(query_dim=2, key_dim=3, attention_dim=2)
    with torch.no_grad():
        attention.query_proj.weight.copy_(torch.tensor([[0.5, -1.0], [0.25, 0.75]]))  # W_q (h, d_q)
        attention.key_proj.weight.copy_(torch.tensor([[1.0, 0.0, -0.5], [0.5, 0.5, 1.0]]))  # W_k (h, d_k)
        attention.score_proj.weight.copy_(torch.tensor([[2.0, -1.0]]))  # v as (1, h)
    return attention


def test_additive_attention_matches_a_hand_computation():
    attention = small_attention()
    q = np.array([1.0, 2.0])
    K = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [-1.0, 0.5, 2.0]])  # L=4 keys
    W_q = np.array([[0.5, -1.0], [0.25, 0.75]])
    W_k = np.array([[1.0, 0.0, -0.5], [0.5, 0.5, 1.0]])
    v = np.array([2.0, -1.0])
    e = np.array([v @ np.tanh(W_q @ q + W_k @ k) for k in K])  # e_j = vᵀ tanh(W_q q + W_k k_j)
    alpha = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
    c = alpha @ K  # Σ_j α_j k_j

    context, weights = attention(torch.tensor(q, dtype=torch.float32)[None], torch.tensor(K, dtype=torch.float32)[None])
    assert weights.shape == (1, 4) and context.shape == (1, 3)
    np.testing.assert_allclose(weights[0].detach().numpy(), alpha, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(context[0].detach().numpy(), c, rtol=1e-5, atol=1e-6)


def test_additive_attention_shapes_context_and_values():
    torch.manual_seed(0)
    attention = AdditiveAttention(query_dim=5, key_dim=7, attention_dim=4)
    query, keys, values = torch.randn(3, 5), torch.randn(3, 6, 7), torch.randn(3, 6, 2)
    context, weights = attention(query, keys)
    assert context.shape == (3, 7) and weights.shape == (3, 6)
    assert torch.allclose(context, (weights.unsqueeze(1) @ keys).squeeze(1), atol=1e-6)
    context_v, weights_v = attention(query, keys, values)
    assert context_v.shape == (3, 2)
    assert torch.equal(weights_v, weights)  # the scores depend on the keys only
    assert torch.allclose(context_v, (weights.unsqueeze(1) @ values).squeeze(1), atol=1e-6)


def test_additive_attention_masks_padding_exactly_and_fully_masked_rows_are_zero():
    torch.manual_seed(0)
    attention = AdditiveAttention(4, 3, 5)
    query, keys = torch.randn(3, 4), torch.randn(3, 6, 3)
    mask = length_mask([6, 2, 0], 6)
    context, weights = attention(query, keys, mask=mask)
    assert torch.equal(weights[~mask], torch.zeros(int((~mask).sum())))
    assert torch.allclose(weights[:2].sum(-1), torch.ones(2))
    assert torch.equal(weights[2], torch.zeros(6)) and torch.equal(context[2], torch.zeros(3))
    # The padded keys do not matter at all: change them, nothing changes.
    keys_changed = keys.clone()
    keys_changed[1, 2:] = 100.0
    context_changed, weights_changed = attention(query, keys_changed, mask=mask)
    assert torch.equal(weights_changed[1], weights[1]) and torch.allclose(context_changed[1], context[1])


def test_additive_attention_projected_keys_path_equals_plain_path():
    torch.manual_seed(0)
    attention = AdditiveAttention(4, 3, 5)
    query, keys = torch.randn(2, 4), torch.randn(2, 7, 3)
    mask = length_mask([7, 4], 7)
    projected = attention.project_keys(keys)
    assert projected.shape == (2, 7, 5)
    plain = attention(query, keys, mask=mask)
    fast = attention(query, keys, mask=mask, projected_keys=projected)
    assert torch.allclose(plain[0], fast[0]) and torch.allclose(plain[1], fast[1])


def test_additive_attention_has_the_papers_parameters():
    attention = AdditiveAttention(query_dim=6, key_dim=10, attention_dim=8)
    assert attention.query_proj.weight.shape == (8, 6) and attention.query_proj.bias is None
    assert attention.key_proj.weight.shape == (8, 10) and attention.key_proj.bias is None
    assert attention.score_proj.weight.shape == (1, 8) and attention.score_proj.bias is None
    assert "query_dim=6, key_dim=10, attention_dim=8" in repr(attention)


def test_additive_attention_gradients_reach_every_parameter():
    attention = AdditiveAttention(4, 3, 5)
    context, _ = attention(torch.randn(2, 4), torch.randn(2, 6, 3))
    context.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in attention.parameters())


def test_additive_attention_errors():
    attention = AdditiveAttention(query_dim=32, key_dim=16, attention_dim=8)
    keys = torch.randn(4, 9, 16)
    with pytest.raises(ValueError, match=r"query has d_q=64 \(shape \(4, 64\)\) but AdditiveAttention expects d_q=32"):
        attention(torch.randn(4, 64), keys)
    with pytest.raises(ValueError, match=r"keys has B=4 \(shape \(4, 9, 16\)\) but query has B=3 \(shape \(3, 32\)\)"):
        attention(torch.randn(3, 32), keys)
    with pytest.raises(
        ValueError, match=r"keys has d_k=12 \(shape \(4, 9, 12\)\) but AdditiveAttention expects d_k=16"
    ):
        attention(torch.randn(4, 32), torch.randn(4, 9, 12))
    with pytest.raises(ValueError, match=r"query must be 2-D \(B, d_q\), got shape \(4, 1, 32\)"):
        attention(torch.randn(4, 1, 32), keys)
    with pytest.raises(ValueError, match=r"keys must be 3-D \(B, L, d_k\), got shape \(4, 16\)"):
        attention(torch.randn(4, 32), torch.randn(4, 16))
    with pytest.raises(TypeError, match=r"keys must be a tensor, 3-D \(B, L, d_k\), got list"):
        attention(torch.randn(4, 32), [[1.0]])
    with pytest.raises(ValueError, match=r"mask has L=7 \(shape \(4, 7\)\) but keys has L=9 \(shape \(4, 9, 16\)\)"):
        attention(torch.randn(4, 32), keys, mask=torch.ones(4, 7, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"mask must be a bool tensor \(True = may attend\), got dtype torch.int64"):
        attention(torch.randn(4, 32), keys, mask=torch.ones(4, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=r"values has L=8 \(shape \(4, 8, 5\)\) but keys has L=9"):
        attention(torch.randn(4, 32), keys, values=torch.randn(4, 8, 5))
    with pytest.raises(
        ValueError,
        match=r"projected_keys has k=16 \(shape \(4, 9, 16\)\) but AdditiveAttention "
        r"expects k=8",
    ):
        attention(torch.randn(4, 32), keys, projected_keys=keys)
    with pytest.raises(ValueError, match="attention_dim must be a positive int, got 0"):
        AdditiveAttention(4, 4, 0)
    with pytest.raises(ValueError, match="query_dim must be a positive int, got True"):
        AdditiveAttention(True, 4, 4)


# ===================================================================== LuongAttention


def integer_valued(*shape, generator=None):
    """Small whole numbers as floats: sums of their products are exact in any order."""
    return torch.randint(-3, 4, shape, generator=generator).float()


def test_luong_dot_scores_are_exactly_the_dot_products():
    generator = torch.Generator().manual_seed(0)
    attention = LuongAttention("dot", query_dim=6, key_dim=6)
    query, keys = integer_valued(3, 6, generator=generator), integer_valued(3, 5, 6, generator=generator)
    reference = (query.unsqueeze(1) * keys).sum(-1)  # (B, 1, d) * (B, L, d) -> (B, L): h_tᵀ h̄_s, no matmul
    assert torch.equal(luong_scores(attention, query, keys), reference)
    _, weights = attention(query, keys)
    assert torch.equal(weights, torch.softmax(reference, dim=-1))
    assert list(attention.parameters()) == []  # dot has nothing to learn


def test_luong_general_with_identity_W_a_is_dot_and_uses_W_a_the_papers_way_round():
    generator = torch.Generator().manual_seed(1)
    query, keys = integer_valued(2, 4, generator=generator), integer_valued(2, 7, 4, generator=generator)
    general = LuongAttention("general", 4, 4)
    with torch.no_grad():
        general.scorer.W_a.weight.copy_(torch.eye(4))
    assert torch.equal(luong_scores(general, query, keys), luong_scores(LuongAttention("dot", 4, 4), query, keys))
    # score = h_tᵀ W_a h̄_s with W_a = W_a.weight (d_q, d_k), here d_q=3 != d_k=5
    general = LuongAttention("general", query_dim=3, key_dim=5)
    assert general.scorer.W_a.weight.shape == (3, 5) and general.scorer.W_a.bias is None
    with torch.no_grad():
        general.scorer.W_a.weight.copy_(integer_valued(3, 5, generator=generator))
    W_a = general.scorer.W_a.weight.detach()
    query, keys = integer_valued(2, 3, generator=generator), integer_valued(2, 4, 5, generator=generator)
    expected = torch.tensor([[float(query[b] @ W_a @ keys[b, s]) for s in range(4)] for b in range(2)])
    assert torch.equal(luong_scores(general, query, keys), expected)  # (W_a.T would not even fit: (5, 3))


def test_luong_concat_matches_a_hand_computation():
    attention = LuongAttention("concat", query_dim=2, key_dim=3, attention_dim=2)
    W_a = np.array([[0.5, -1.0, 1.0, 0.0, -0.5], [0.25, 0.75, 0.5, 0.5, 1.0]])  # (h, d_q + d_k)
    v_a = np.array([2.0, -1.0])
    with torch.no_grad():
        attention.scorer.W_a.weight.copy_(torch.tensor(W_a))
        attention.scorer.v_a.weight.copy_(torch.tensor(v_a)[None])
    h_t = np.array([1.0, 2.0])
    H_s = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [-1.0, 0.5, 2.0]])  # L=4 annotations
    e = np.array([v_a @ np.tanh(W_a @ np.concatenate([h_t, h_s])) for h_s in H_s])  # v_aᵀ tanh(W_a [h_t; h̄_s])
    alpha = np.exp(e - e.max()) / np.exp(e - e.max()).sum()

    query, keys = torch.tensor(h_t, dtype=torch.float32)[None], torch.tensor(H_s, dtype=torch.float32)[None]
    np.testing.assert_allclose(luong_scores(attention, query, keys)[0].detach().numpy(), e, rtol=1e-5, atol=1e-6)
    context, weights = attention(query, keys)
    np.testing.assert_allclose(weights[0].detach().numpy(), alpha, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(context[0].detach().numpy(), alpha @ H_s, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_luong_shapes_values_and_many_queries_at_once(score):
    torch.manual_seed(0)
    key_dim = 5 if score == "dot" else 7
    attention = LuongAttention(score, query_dim=5, key_dim=key_dim)
    query, keys, values = torch.randn(3, 5), torch.randn(3, 6, key_dim), torch.randn(3, 6, 2)
    context, weights = attention(query, keys)
    assert context.shape == (3, key_dim) and weights.shape == (3, 6)
    assert torch.allclose(weights.sum(-1), torch.ones(3))
    assert torch.allclose(context, (weights.unsqueeze(1) @ keys).squeeze(1), atol=1e-6)
    context_v, weights_v = attention(query, keys, values)
    assert context_v.shape == (3, 2) and torch.equal(weights_v, weights)
    # T queries against the same keys in one call = T calls with one query each.
    queries, mask = torch.randn(3, 4, 5), length_mask([6, 2, 4], 6)
    contexts, all_weights = attention(queries, keys, mask=mask)
    assert contexts.shape == (3, 4, key_dim) and all_weights.shape == (3, 4, 6)
    assert luong_scores(attention, queries, keys).shape == (3, 4, 6)
    for t in range(4):
        one_context, one_weights = attention(queries[:, t], keys, mask=mask)
        assert torch.allclose(all_weights[:, t], one_weights, atol=1e-6)
        assert torch.allclose(contexts[:, t], one_context, atol=1e-6)
    # The projected-keys path is the plain path.
    projected = attention.project_keys(keys)
    assert projected.shape == (3, 6, attention.projected_size)
    fast = attention(query, keys, mask=mask, projected_keys=projected)
    plain = attention(query, keys, mask=mask)
    assert torch.allclose(fast[0], plain[0]) and torch.allclose(fast[1], plain[1])


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_luong_masks_give_exactly_zero_weight(score):
    torch.manual_seed(0)
    attention = LuongAttention(score, 4, 4)
    query, keys = torch.randn(3, 4), torch.randn(3, 6, 4)
    mask = length_mask([6, 2, 0], 6)
    context, weights = attention(query, keys, mask=mask)
    assert torch.equal(weights[~mask], torch.zeros(int((~mask).sum())))
    assert torch.allclose(weights[:2].sum(-1), torch.ones(2))
    assert torch.equal(weights[2], torch.zeros(6)) and torch.equal(context[2], torch.zeros(4))
    _, many = attention(torch.randn(3, 5, 4), keys, mask=mask)  # the mask is shared by the 5 queries
    assert torch.equal(many[~mask.unsqueeze(1).expand(3, 5, 6)], torch.zeros(int((~mask).sum()) * 5))


def test_luong_parameters_and_gradients():
    general = LuongAttention("general", query_dim=6, key_dim=10)
    assert isinstance(general.scorer, GeneralScore) and general.scorer.W_a.weight.shape == (6, 10)
    assert general.projected_size == 6
    concat = LuongAttention("concat", query_dim=6, key_dim=10)
    assert isinstance(concat.scorer, ConcatScore)
    assert concat.scorer.W_a.weight.shape == (6, 16) and concat.scorer.W_a.bias is None  # hidden = query_dim
    assert concat.scorer.v_a.weight.shape == (1, 6) and concat.scorer.v_a.bias is None
    assert LuongAttention("concat", 6, 10, attention_dim=3).scorer.W_a.weight.shape == (3, 16)
    assert isinstance(LuongAttention("dot", 6, 6).scorer, DotScore)
    assert "score='concat', query_dim=6, key_dim=10" in repr(concat)
    for attention in (general, concat):
        context, _ = attention(torch.randn(2, 6), torch.randn(2, 5, 10))
        context.sum().backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in attention.parameters())


def test_luong_errors():
    with pytest.raises(ValueError, match=r"unknown score 'additive'; choose one of 'dot', 'general', 'concat'"):
        LuongAttention("additive", 4, 4)
    with pytest.raises(
        ValueError,
        match=r"score='dot' compares the query with each key directly, so it needs "
        r"query_dim == key_dim, got query_dim=64 and key_dim=128; "
        r"use score='general'",
    ):
        LuongAttention("dot", 64, 128)
    with pytest.raises(ValueError, match="attention_dim is only used by score='concat'"):
        LuongAttention("general", 4, 4, attention_dim=8)
    with pytest.raises(ValueError, match="key_dim must be a positive int, got 0"):
        LuongAttention("general", 4, 0)
    attention = LuongAttention("general", query_dim=32, key_dim=16)
    keys = torch.randn(4, 9, 16)
    with pytest.raises(ValueError, match=r"query has d_q=64 \(shape \(4, 64\)\) but LuongAttention expects d_q=32"):
        attention(torch.randn(4, 64), keys)
    with pytest.raises(ValueError, match=r"query must be 2-D \(B, d_q\) or 3-D \(B, T, d_q\), got shape \(32,\)"):
        attention(torch.randn(32), keys)
    with pytest.raises(
        ValueError,
        match=r"projected_keys has k=16 \(shape \(4, 9, 16\)\) but LuongAttention "
        r"expects k=32",
    ):
        attention(torch.randn(4, 32), keys, projected_keys=keys)


def test_local_p_window_is_gaussian_inside_and_exactly_zero_outside():
    D = 2
    centres = torch.tensor([3.0, 0.4, 7.5])
    factors = local_p_window(centres, length=9, D=D)
    assert factors.shape == (3, 9)
    positions = torch.arange(9).float()
    for row, p in enumerate(centres.tolist()):
        inside = (positions - p).abs() <= D  # [p_t - D, p_t + D]
        assert torch.equal(factors[row][~inside], torch.zeros(int((~inside).sum())))
        sigma = D / 2
        gaussian = torch.exp(-((positions - p) ** 2) / (2 * sigma**2))
        assert torch.allclose(factors[row][inside], gaussian[inside])
    assert factors[0, 3] == 1.0  # at s = p_t the factor is exactly 1
    assert torch.allclose(factors[0, [1, 5]], torch.full((2,), np.exp(-2.0), dtype=torch.float32))  # edges: e^-2
    assert torch.equal(factors[0, [0, 6, 7, 8]], torch.zeros(4))
    assert local_p_window(torch.rand(2, 4) * 5, 6, 1).shape == (2, 4, 6)  # (B, T) centres -> (B, T, L)


def test_local_p_attention_weights_vanish_outside_the_window_and_are_not_renormalised():
    torch.manual_seed(0)
    attention = LocalPAttention("general", 4, 4, D=2)
    query, keys = torch.randn(2, 4), torch.randn(2, 10, 4)
    mask = length_mask([10, 7], 10)
    context, weights = attention(query, keys, mask=mask)
    centres = attention.centres(query, mask)  # (B,) in [0, S]
    assert ((centres >= 0) & (centres <= mask.sum(-1))).all()
    window = local_p_window(centres, 10, D=2)
    outside = window == 0
    assert torch.equal(weights[outside], torch.zeros(int(outside.sum())))
    assert torch.equal(weights[~mask], torch.zeros(int((~mask).sum())))
    scores = luong_scores(attention, query, keys)  # inside: the softmax over the window's real positions × Gaussian
    for row in range(2):
        allowed = mask[row] & ~outside[row]
        align = torch.softmax(scores[row][allowed], dim=-1)
        assert torch.allclose(weights[row][allowed], align * window[row][allowed], atol=1e-6)
    assert (weights.sum(-1) <= 1 + 1e-6).all()  # as in the paper, not renormalised after the Gaussian
    assert torch.allclose(context, (weights.unsqueeze(1) @ keys).squeeze(1), atol=1e-6)
    many_context, many = attention(torch.stack([query, query], dim=1), keys, mask=mask)  # (B, T=2, ...)
    assert torch.allclose(many[:, 1], weights, atol=1e-6) and torch.allclose(many_context[:, 0], context, atol=1e-6)
    assert torch.allclose(
        attention(query, keys)[1], attention(query, keys, mask=torch.ones(2, 10, dtype=torch.bool))[1]
    )


def test_predictive_position_lies_in_0_to_S_per_sentence_and_learns():
    torch.manual_seed(0)
    predict = PredictivePosition(query_dim=5)
    assert predict.W_p.weight.shape == (5, 5) and predict.v_p.weight.shape == (1, 5)
    states, lengths = torch.randn(3, 5) * 10, torch.tensor([9, 4, 1])
    positions = predict(states, lengths)
    assert positions.shape == (3,)
    assert ((positions >= 0) & (positions <= lengths)).all()
    h = torch.randn(3, 5)
    fraction = torch.sigmoid(predict.v_p(torch.tanh(predict.W_p(h)))).squeeze(-1)
    assert torch.allclose(predict(h, lengths), fraction * lengths)  # p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))
    assert predict(torch.randn(3, 4, 5), lengths).shape == (3, 4)
    # p_t gets gradients through the Gaussian window.
    window = local_p_window(predict(h, lengths), 9, D=3)
    window.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in predict.parameters())


def test_local_window_errors():
    with pytest.raises(TypeError, match="position must be a floating-point tensor, got dtype torch.int64"):
        local_p_window(torch.tensor([1, 2]), 5, 2)
    with pytest.raises(ValueError, match="D must be a positive int, got 0"):
        local_p_window(torch.tensor([1.0]), 5, 0)
    with pytest.raises(ValueError, match=r"lengths has B=2 \(shape \(2,\)\) but query has B=3"):
        PredictivePosition(4)(torch.randn(3, 4), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="D must be a positive int, got 0"):
        LocalPAttention("dot", 4, 4, D=0)
