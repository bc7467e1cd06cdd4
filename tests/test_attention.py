"""Tests of attnbook.attention: masked_softmax and AdditiveAttention (chapter 2)."""

import numpy as np
import pytest
import torch

from attnbook.attention import AdditiveAttention, masked_softmax


def length_mask(lengths, width):
    return torch.arange(width) < torch.tensor(lengths).unsqueeze(1)  # (B, width)


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
    attention = AdditiveAttention(query_dim=2, key_dim=3, hidden_dim=2)
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
    attention = AdditiveAttention(query_dim=5, key_dim=7, hidden_dim=4)
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
    attention = AdditiveAttention(query_dim=6, key_dim=10, hidden_dim=8)
    assert attention.query_proj.weight.shape == (8, 6) and attention.query_proj.bias is None
    assert attention.key_proj.weight.shape == (8, 10) and attention.key_proj.bias is None
    assert attention.score_proj.weight.shape == (1, 8) and attention.score_proj.bias is None
    assert "query_dim=6, key_dim=10, hidden_dim=8" in repr(attention)


def test_additive_attention_gradients_reach_every_parameter():
    attention = AdditiveAttention(4, 3, 5)
    context, _ = attention(torch.randn(2, 4), torch.randn(2, 6, 3))
    context.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in attention.parameters())


def test_additive_attention_errors():
    attention = AdditiveAttention(query_dim=32, key_dim=16, hidden_dim=8)
    keys = torch.randn(4, 9, 16)
    with pytest.raises(ValueError, match="query has d_q=64 but AdditiveAttention expects query_dim=32"):
        attention(torch.randn(4, 64), keys)
    with pytest.raises(ValueError, match="keys have batch size 4 but query has 3"):
        attention(torch.randn(3, 32), keys)
    with pytest.raises(ValueError, match="keys have d_k=12 but AdditiveAttention expects key_dim=16"):
        attention(torch.randn(4, 32), torch.randn(4, 9, 12))
    with pytest.raises(ValueError, match=r"query must be 2-D \(B, d_q\), one query per row, got \(4, 1, 32\)"):
        attention(torch.randn(4, 1, 32), keys)
    with pytest.raises(ValueError, match=r"keys must be 3-D \(B, L, d_k\), got \(4, 16\)"):
        attention(torch.randn(4, 32), torch.randn(4, 16))
    with pytest.raises(ValueError, match=r"mask has shape \(4, 7\) but keys have \(B, L\) = \(4, 9\)"):
        attention(torch.randn(4, 32), keys, mask=torch.ones(4, 7, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"mask must be a bool tensor \(True = may attend\), got dtype torch.int64"):
        attention(torch.randn(4, 32), keys, mask=torch.ones(4, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=r"values must have shape \(B, L, d_v\) with \(B, L\) = \(4, 9\)"):
        attention(torch.randn(4, 32), keys, values=torch.randn(4, 8, 5))
    with pytest.raises(ValueError, match=r"projected_keys has shape \(4, 9, 16\) but project_keys\(keys\) gives "
                                         r"\(B, L, hidden_dim\) = \(4, 9, 8\)"):
        attention(torch.randn(4, 32), keys, projected_keys=keys)
    with pytest.raises(ValueError, match="hidden_dim must be a positive int, got 0"):
        AdditiveAttention(4, 4, 0)
