"""Property-based tests (hypothesis) of what every attention must satisfy, on random sizes and masks:

- the weights are >= 0 and sum to 1 over the keys wherever anything may be attended;
- they are exactly 0 where the mask says no, and a row with nothing to attend is all zeros, never NaN;
- permuting the keys together with their values (and the mask) leaves the output unchanged,
  and permutes the weights the same way.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook.attention import (
    AdditiveAttention,
    LuongAttention,
    SelfAttention,
    masked_softmax,
    scaled_dot_product_attention,
)

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None)


@pytest.fixture(autouse=True, scope="module")
def float64():
    """Compute in float64: scores scaled by 30 give near-ties whose float32 weights move by more
    than the 1e-6 the permutation checks allow (about 8 in 100 random draws failed)."""
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


@st.composite
def attention_inputs(draw):
    """Sizes, a seeded generator, a mask with some rows fully masked, and a permutation of the keys."""
    batch, length = draw(st.integers(1, 4)), draw(st.integers(1, 7))
    d_q, d_k, d_v = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 5))
    mask = torch.tensor(
        draw(st.lists(st.lists(st.booleans(), min_size=length, max_size=length), min_size=batch, max_size=batch))
    )  # (B, L)
    permutation = torch.tensor(draw(st.permutations(range(length))))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    scale = draw(st.sampled_from([0.1, 1.0, 30.0]))  # small, ordinary and large scores
    return dict(
        batch=batch,
        length=length,
        d_q=d_q,
        d_k=d_k,
        d_v=d_v,
        mask=mask,
        permutation=permutation,
        generator=generator,
        scale=scale,
    )


def layers(d_q, d_k):
    """Every attention layer of the package that scores one query against keys of any order."""
    yield "additive", AdditiveAttention(d_q, d_k, attention_dim=3)
    yield "luong general", LuongAttention("general", d_q, d_k)
    yield "luong concat", LuongAttention("concat", d_q, d_k)
    yield "luong dot", LuongAttention("dot", d_k, d_k)


def check_weights(weights, mask):
    """The three weight properties, for weights ``(B, ..., L)`` and a mask ``(B, L)``."""
    mask = mask.view(mask.size(0), *[1] * (weights.dim() - 2), mask.size(1)).expand_as(weights)
    assert not torch.isnan(weights).any()
    assert (weights >= 0).all()
    assert torch.equal(weights[~mask], torch.zeros(int((~mask).sum())))
    sums = weights.sum(-1)
    attendable = mask.any(-1)
    assert torch.allclose(sums[attendable], torch.ones(int(attendable.sum())), atol=1e-5)
    assert torch.equal(sums[~attendable], torch.zeros(int((~attendable).sum())))


@PROPERTY_SETTINGS
@given(attention_inputs(), st.integers(1, 3))
def test_masked_softmax_properties(inputs, queries):
    scores = inputs["scale"] * torch.randn(inputs["batch"], queries, inputs["length"], generator=inputs["generator"])
    weights = masked_softmax(scores, inputs["mask"].unsqueeze(1))  # (B, 1, L) for every query
    check_weights(weights, inputs["mask"])
    permutation = inputs["permutation"]
    permuted = masked_softmax(scores[..., permutation], inputs["mask"][:, permutation].unsqueeze(1))
    assert torch.allclose(permuted, weights[..., permutation], atol=1e-6)


@PROPERTY_SETTINGS
@given(attention_inputs())
@pytest.mark.parametrize("name", ["additive", "luong general", "luong concat", "luong dot"])
def test_attention_layer_properties(name, inputs):
    torch.manual_seed(0)
    layer = dict(layers(inputs["d_q"], inputs["d_k"]))[name]
    d_q = layer.query_dim
    g, batch, length = inputs["generator"], inputs["batch"], inputs["length"]
    query = inputs["scale"] * torch.randn(batch, d_q, generator=g)
    keys = torch.randn(batch, length, inputs["d_k"], generator=g)
    values = torch.randn(batch, length, inputs["d_v"], generator=g)
    mask, permutation = inputs["mask"], inputs["permutation"]
    with torch.no_grad():
        output, weights = layer(query, keys, values, mask=mask)
        permuted_output, permuted_weights = layer(
            query, keys[:, permutation], values[:, permutation], mask=mask[:, permutation]
        )
    check_weights(weights, mask)
    assert torch.equal(output[~mask.any(-1)], torch.zeros(int((~mask.any(-1)).sum()), inputs["d_v"]))
    assert torch.allclose(permuted_output, output, atol=1e-5)
    assert torch.allclose(permuted_weights, weights[:, permutation], atol=1e-6)


@PROPERTY_SETTINGS
@given(attention_inputs(), st.integers(1, 3))
def test_scaled_dot_product_attention_properties(inputs, heads):
    """Weights rules on 4-D inputs with a padding mask (B, 1, 1, L); keys and values permuted together."""
    g, batch, length, d_k = inputs["generator"], inputs["batch"], inputs["length"], inputs["d_k"]
    q = inputs["scale"] * torch.randn(batch, heads, 3, d_k, generator=g)
    k = torch.randn(batch, heads, length, d_k, generator=g)
    v = torch.randn(batch, heads, length, inputs["d_v"], generator=g)
    mask, permutation = inputs["mask"][:, None, None, :], inputs["permutation"]  # (B, 1, 1, L)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    check_weights(weights.flatten(1, 2), inputs["mask"])
    permuted_out, permuted_weights = scaled_dot_product_attention(
        q, k[..., permutation, :], v[..., permutation, :], mask[..., permutation]
    )
    assert torch.allclose(permuted_out, out, atol=1e-5)
    assert torch.allclose(permuted_weights, weights[..., permutation], atol=1e-6)


@PROPERTY_SETTINGS
@given(attention_inputs())
def test_self_attention_is_permutation_equivariant_and_causal_outputs_ignore_the_future(inputs):
    torch.manual_seed(0)
    layer = SelfAttention(inputs["d_k"], d_v=inputs["d_v"])
    g, batch, length = inputs["generator"], inputs["batch"], inputs["length"]
    x = inputs["scale"] * torch.randn(batch, length, inputs["d_k"], generator=g)
    permutation = inputs["permutation"]
    with torch.no_grad():
        out, weights = layer(x)
        permuted_out, permuted_weights = layer(x[:, permutation])
        assert torch.allclose(permuted_out, out[:, permutation], atol=1e-5)  # permute inputs = permute outputs
        assert torch.allclose(permuted_weights, weights[:, permutation][:, :, permutation], atol=1e-6)
        causal = causal_mask_of(length)
        causal_out, causal_weights = layer(x, causal)
        check_weights(causal_weights, torch.ones(batch, length, dtype=torch.bool))
        assert torch.equal(causal_weights.triu(1), torch.zeros_like(causal_weights))
        changed = x.clone()
        changed[:, -1] = torch.randn(batch, inputs["d_k"], generator=g)  # only the last position changes
        changed_out, _ = layer(changed, causal)
    assert torch.allclose(changed_out[:, :-1], causal_out[:, :-1], atol=1e-6)
    assert not torch.isnan(changed_out).any()


def causal_mask_of(length):
    return torch.ones(length, length, dtype=torch.bool).tril()  # True on and below the diagonal
