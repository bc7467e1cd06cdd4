"""Chapter 5: split_heads, merge_heads, MultiHeadAttention (equal to nn.MultiheadAttention), the checkers."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnbook.attention import MultiHeadAttention, merge_heads, scaled_dot_product_attention, split_heads
from attnbook.exercises import check_merge_heads, check_split_heads
from conftest import checker_fails, checker_passes


def copied_pair(d_model=16, num_heads=4, bias=True, seed=0):
    """PyTorch's layer and ours with the same weights."""
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True)
    return MultiHeadAttention.from_torch(theirs), theirs


@pytest.mark.parametrize("kind", ["self", "cross"])
@pytest.mark.parametrize("masking", ["none", "padding", "causal", "padding and causal"])
@pytest.mark.parametrize("bias", [True, False])
def test_equals_nn_multihead_attention(kind, masking, bias):
    ours, theirs = copied_pair(bias=bias)
    query = torch.randn(3, 5, 16)
    key = query if kind == "self" else torch.randn(3, 7, 16)  # cross: keys and values of another length
    length = key.size(1)
    may_attend = torch.arange(length) < torch.tensor([length, 3, 1]).view(3, 1)  # (B, L_k) padding, True = real
    causal = torch.ones(5, length, dtype=torch.bool).tril()  # (L_q, L_k)
    ours_mask, key_padding_mask, attn_mask = None, None, None
    if "padding" in masking:
        ours_mask, key_padding_mask = may_attend[:, None, None, :], ~may_attend  # PyTorch: True = ignore
    if "causal" in masking:
        ours_mask = causal if ours_mask is None else ours_mask & causal
        attn_mask = ~causal  # PyTorch's boolean attn_mask: True = not allowed
    out, weights = ours(query, key, key, ours_mask)
    torch_out, torch_weights = theirs(
        query, key, key, key_padding_mask=key_padding_mask, attn_mask=attn_mask, average_attn_weights=False
    )
    assert out.shape == (3, 5, 16) and weights.shape == (3, 4, 5, length)
    assert torch.allclose(out, torch_out, atol=1e-6)
    assert torch.allclose(weights, torch_weights, atol=1e-6)


def test_split_and_merge_heads_move_features_not_positions():
    x = torch.arange(2 * 3 * 8).float().view(2, 3, 8)  # (B, T, d_model)
    heads = split_heads(x, 2)  # (B, H, T, d_head)
    assert heads.shape == (2, 2, 3, 4)
    for h in range(2):
        assert torch.equal(heads[:, h], x[..., 4 * h : 4 * (h + 1)])  # head h: a block of features, every position
    assert torch.equal(merge_heads(heads), x)
    wrong = x.reshape(2, 2, 3, 4)  # the classic bug: no transpose
    assert not torch.equal(wrong, heads) and torch.equal(wrong[0, 0, 1], x[0, 0, 4:])  # position 0 leaks into row 1


def test_one_head_is_single_head_attention_and_heads_attend_separately():
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 1, bias=False)
    x = torch.randn(2, 4, 8)
    out, weights = layer(x, x, x)
    expected, expected_weights = scaled_dot_product_attention(layer.q_proj(x), layer.k_proj(x), layer.v_proj(x))
    assert torch.allclose(out, layer.out_proj(expected), atol=1e-6)
    assert torch.allclose(weights[:, 0], expected_weights, atol=1e-6)
    four = MultiHeadAttention(8, 4)
    _, weights = four(x, x, x)
    assert weights.shape == (2, 4, 4, 4) and torch.allclose(weights.sum(-1), torch.ones(2, 4, 4))
    assert not torch.allclose(weights[:, 0], weights[:, 1])  # each head has its own weights


def test_dropout_only_while_training():
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2, dropout=0.5)
    x = torch.randn(2, 4, 8)
    layer.eval()
    assert torch.equal(layer(x, x, x)[0], layer(x, x, x)[0])
    layer.train()
    assert not torch.allclose(layer(x, x, x)[0], layer(x, x, x)[0])


def test_errors():
    with pytest.raises(ValueError, match="d_model=100 is not divisible by num_heads=8"):
        MultiHeadAttention(100, 8)
    with pytest.raises(ValueError, match="num_heads must be a positive int, got 0"):
        MultiHeadAttention(8, 0)
    with pytest.raises(ValueError, match="from_torch needs an nn.MultiheadAttention with batch_first=True"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2))
    layer = MultiHeadAttention(8, 2)
    with pytest.raises(
        ValueError,
        match=r"query has d_model=6 \(shape \(2, 3, 6\)\) but MultiHeadAttention "
        r"expects d_model=8",
    ):
        layer(torch.randn(2, 3, 6), torch.randn(2, 3, 8), torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match=r"value has L_k=4 \(shape \(2, 4, 8\)\) but key has L_k=5"):
        layer(torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match=r"key has B=1 \(shape \(1, 5, 8\)\) but query has B=2"):
        layer(torch.randn(2, 3, 8), torch.randn(1, 5, 8), torch.randn(1, 5, 8))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 4\): a 2-D mask is \(L_q, L_k\) with L_q=3"):
        layer(torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(
        ValueError,
        match=r"mask of shape \(2, 1, 1, 4\) does not broadcast to the scores of "
        r"shape \(2, 2, 3, 5\)",
    ):
        layer(
            torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.ones(2, 1, 1, 4, dtype=torch.bool)
        )


def test_a_padding_mask_is_never_read_as_a_pattern_over_queries():
    """With B = L_q a (B, L_k) mask could mean either; it is refused, and the 4-D form masks keys."""
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2)
    x = torch.randn(3, 3, 8)  # B = L_q = L_k = 3
    real = torch.tensor([[True, True, True], [True, True, False], [True, False, False]])  # (B, L_k)
    with pytest.raises(
        ValueError,
        match=r"mask of shape \(3, 3\) is ambiguous when B = L_q = 3.*"
        r"mask\[:, None, None, :\] \(B, 1, 1, L_k\) for padding",
    ):
        layer(x, x, x, real)
    with pytest.raises(ValueError, match=r"mask must be 2-D \(L_q, L_k\) or 4-D .* got shape \(3, 1, 3\)"):
        layer(x, x, x, real[:, None, :])
    _, weights = layer(x, x, x, real[:, None, None, :])  # (B, H, L_q, L_k)
    assert torch.equal(weights > 0, real[:, None, None, :].expand(3, 2, 3, 3))  # per key, every query
    _, weights = layer(x[:1], x[:1], x[:1], real)  # B = 1: a 2-D mask is a pattern over queries
    assert torch.equal(weights[0, 0] > 0, real)
    _, weights = layer(torch.randn(2, 3, 8), x[:2], x[:2], real)  # B = 2, L_q = 3: the same
    assert torch.equal(weights[1, 1] > 0, real)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 6),
    st.sampled_from([(8, 1), (8, 2), (12, 3), (16, 4)]),
    st.permutations(range(6)),
    st.integers(0, 2**31 - 1),
)
def test_multi_head_properties(batch, length, sizes, order, seed):
    """Self-attention permutes with its input; causal outputs ignore later inputs; weights are a distribution."""
    d_model, num_heads = sizes
    permutation = torch.tensor([i for i in order if i < length])
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(0)
    layer = MultiHeadAttention(d_model, num_heads)
    x = torch.randn(batch, length, d_model, generator=generator)
    causal = torch.ones(length, length, dtype=torch.bool).tril()[None, None]  # (1, 1, T, T)
    with torch.no_grad():
        out, weights = layer(x, x, x)
        permuted_out, _ = layer(x[:, permutation], x[:, permutation], x[:, permutation])
        causal_out, causal_weights = layer(x, x, x, causal)
        changed = x.clone()
        changed[:, -1] += 1.0
        changed_out, _ = layer(changed, changed, changed, causal)
    assert torch.allclose(permuted_out, out[:, permutation], atol=1e-5)
    assert torch.allclose(weights.sum(-1), torch.ones(batch, num_heads, length), atol=1e-5)
    assert torch.equal(causal_weights.triu(1), torch.zeros_like(causal_weights))
    assert torch.allclose(changed_out[:, :-1], causal_out[:, :-1], atol=1e-5)
    assert not torch.isnan(changed_out).any()


# ================================================================ the checkers


@pytest.mark.parametrize(
    "solution",
    [
        split_heads,
        lambda x, h: x.view(x.size(0), x.size(1), h, -1).permute(0, 2, 1, 3),
        lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
        lambda x, h: x.unflatten(-1, (h, -1)).transpose(1, 2),
    ],
)
def test_split_heads_checker_passes_right_solutions(solution, capsys):
    checker_passes(check_split_heads, solution, capsys)


@pytest.mark.parametrize(
    ("wrong", "fragments"),
    [
        (
            lambda x, h: x.reshape(x.size(0), h, x.size(1), -1),
            ["a reshape straight to (B, H, T, d_head) mixes positions"],
        ),
        (lambda x, h: x.view(x.size(0), x.size(1), h, -1), ["that is (B, T, H, d_head): transpose(1, 2)"]),
        (lambda x, h: x.view(x.size(0), x.size(1), -1, h).permute(0, 3, 1, 2), ["head i got every H-th feature"]),
        (
            lambda x, h: x.view(x.size(0), x.size(1), h, -1).transpose(1, 3).transpose(2, 3),
            ["the axes are in the wrong order"],
        ),
        (lambda x, h: x, ["has shape (5, 3, 8) but expected (5, 2, 3, 4)", "that is x unchanged"]),
    ],
)
def test_split_heads_checker_explains_typical_mistakes(wrong, fragments, capsys):
    checker_fails(check_split_heads, wrong, capsys, *fragments)


@pytest.mark.parametrize(
    "solution",
    [
        merge_heads,
        lambda x: torch.cat(x.unbind(1), dim=-1),
        lambda x: x.transpose(1, 2).contiguous().view(x.size(0), x.size(2), -1),
    ],
)
def test_merge_heads_checker_passes_right_solutions(solution, capsys):
    checker_passes(check_merge_heads, solution, capsys)


def test_merge_heads_checker_explains_the_missing_transpose(capsys):
    checker_fails(
        check_merge_heads,
        lambda x: x.reshape(x.size(0), x.size(2), -1),
        capsys,
        "a reshape straight from (B, H, T, d_head) to (B, T, d_model) mixes heads and positions",
    )
