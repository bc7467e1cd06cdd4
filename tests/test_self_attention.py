"""Chapter 4: scaled dot-product attention, SelfAttention, the NumPy versions, the word tasks, the checkers."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnbook import numpy_attention, tasks
from attnbook.attention import SelfAttention, scaled_dot_product_attention
from attnbook.exercises import check_scaled_dot_product_attention, check_window_average
from conftest import checker_fails, checker_passes


def operands(*leading, l_q=5, l_k=7, d_k=8, d_v=6, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randn(*leading, l_q, d_k, generator=generator),
        torch.randn(*leading, l_k, d_k, generator=generator),
        torch.randn(*leading, l_k, d_v, generator=generator),
    )


MASKS = {  # name -> mask for scores (2, 3, 5, 7) or (2, 5, 7) (broadcast)
    "none": None,
    "padding (B, 1, L_k)": torch.arange(7) < torch.tensor([7, 3]).view(2, 1, 1),
    "random (L_q, L_k)": torch.rand(5, 7, generator=torch.Generator().manual_seed(1)) > 0.4,
    "causal (L, L) padded": torch.ones(5, 7, dtype=torch.bool).tril(),
    "a fully masked row": torch.ones(5, 7, dtype=torch.bool).index_fill(0, torch.tensor([2]), False),
}


@pytest.mark.parametrize("leading", [(2,), (2, 3)], ids=["3-D", "4-D"])
@pytest.mark.parametrize("mask_name", list(MASKS))
def test_equals_torch_scaled_dot_product_attention(leading, mask_name):
    q, k, v = operands(*leading)
    mask = MASKS[mask_name]
    if mask is not None and mask.dim() == 3 and len(leading) == 2:
        mask = mask.unsqueeze(1)  # (B, 1, 1, L_k) under heads
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == (*leading, 5, 6) and weights.shape == (*leading, 5, 7)
    torch_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(out, torch_out, atol=1e-6)  # fully masked rows: zeros in both (PyTorch 2.13's CPU kernel)
    manual = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8) + (0 if mask is None else (~mask) * -1e9), -1)
    if mask_name != "a fully masked row":
        assert torch.allclose(weights, manual, atol=1e-6)


def test_the_scale_is_the_square_root_of_d_k_not_d_v():
    q, k, v = operands(2, d_k=16, d_v=3)
    _, weights = scaled_dot_product_attention(q, k, v)
    assert torch.allclose(weights, torch.softmax(q @ k.transpose(1, 2) / 4.0, dim=-1), atol=1e-6)


def test_dropout_drops_weights_but_returns_them_undropped():
    q, k, v = operands(2)
    torch.manual_seed(0)
    out, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    plain_out, plain_weights = scaled_dot_product_attention(q, k, v)
    assert torch.equal(weights, plain_weights) and not torch.allclose(out, plain_out)


def test_errors():
    q, k, v = operands(2)
    with pytest.raises(
        ValueError, match=r"k has d_k=32 \(shape \(2, 5, 32\)\) but q has d_k=64 \(shape \(2, 5, 64\)\)"
    ):
        scaled_dot_product_attention(torch.randn(2, 5, 64), torch.randn(2, 5, 32), torch.randn(2, 5, 32))
    with pytest.raises(ValueError, match=r"v has L_k=5 \(shape \(2, 5, 6\)\) but k has L_k=7"):
        scaled_dot_product_attention(q, k, torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 7\) does not broadcast to scores of shape \(2, 5, 7\)"):
        scaled_dot_product_attention(q, k, v, torch.ones(4, 7, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"mask must be a bool tensor \(True = may attend\), got dtype torch.float32"):
        scaled_dot_product_attention(q, k, v, torch.ones(5, 7))
    with pytest.raises(ValueError, match=r"k has leading dimensions \(2, 3\) .* but q has leading dimensions \(2,\)"):
        scaled_dot_product_attention(q, *operands(2, 3)[1:])
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\), got 1.0"):
        scaled_dot_product_attention(q, k, v, dropout_p=1.0)


def test_self_attention_is_scaled_dot_product_attention_of_three_projections():
    torch.manual_seed(0)
    layer = SelfAttention(d_model=12, d_k=4, d_v=3)
    assert [p.shape for p in layer.parameters()] == [(4, 12), (4, 12), (3, 12)]  # W^Q, W^K, W^V, no biases
    x = torch.randn(2, 6, 12)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    out, weights = layer(x, mask)
    W_q, W_k, W_v = (p.detach() for p in layer.parameters())
    expected = F.scaled_dot_product_attention(x @ W_q.T, x @ W_k.T, x @ W_v.T, attn_mask=mask)
    assert out.shape == (2, 6, 3) and weights.shape == (2, 6, 6)
    assert torch.allclose(out, expected, atol=1e-6)
    assert "d_model=12, d_k=4, d_v=3" in repr(layer)
    with pytest.raises(ValueError, match=r"x has d_model=8 \(shape \(2, 6, 8\)\) but SelfAttention expects d_model=12"):
        layer(torch.randn(2, 6, 8))
    with pytest.raises(ValueError, match="d_k must be a positive int, got 0"):
        SelfAttention(4, d_k=0)


@pytest.mark.parametrize("leading", [(), (3,), (2, 2)])
def test_numpy_versions_equal_the_torch_ones(leading):
    q, k, v = (t.double() for t in operands(*leading))
    mask = torch.ones(5, 7, dtype=torch.bool).tril()
    mask[1] = False  # a fully masked row
    for m in (None, mask):
        out, weights = numpy_attention.scaled_dot_product_attention(
            q.numpy(), k.numpy(), v.numpy(), None if m is None else m.numpy()
        )
        torch_out, torch_weights = scaled_dot_product_attention(q, k, v, m)
        np.testing.assert_allclose(out, torch_out.numpy(), atol=1e-12)
        np.testing.assert_allclose(weights, torch_weights.numpy(), atol=1e-12)
    x = np.array([[1000.0, 1001.0], [-5.0, 5.0]])
    np.testing.assert_allclose(numpy_attention.softmax(x), torch.softmax(torch.tensor(x), -1).numpy())


def test_word_tasks():
    senses = tasks.sense_task(200, seed=3)
    assert all(len(e.source.split()) == 6 == len(e.target.split()) for e in senses)
    for example in senses:
        words, tags = example.source.split(), example.target.split()
        sense = "animal" if tags[words.index("bat")] == "A" else "sport"
        assert all(w in tasks.BAT_CONTEXT[sense] for w, t in zip(words, tags) if t != "-" and w != "bat")
    assert {e.target.split()[e.source.split().index("bat")] for e in senses} == {"A", "S"}
    assert tasks.sense_task(5, seed=3) == senses[:5]
    referents = tasks.referent_task(300, seed=1)
    for example in referents:
        words = example.source.split()
        assert words[7] == "it" and len(words) == 11
        assert example.target == (words[1] if words[10] in tasks.ANIMAL_ADJECTIVES else words[5])
    assert {e.target in tasks.ANIMALS for e in referents} == {True, False}


# ================================================================ the checkers


def sdpa_right(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


def sdpa_right_einsum(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1) * (1 if mask is None else mask)
    return torch.einsum("...qk,...kv->...qv", weights, v), weights


def sdpa_right_numpy(q, k, v, mask=None):
    out, weights = numpy_attention.scaled_dot_product_attention(
        q.numpy(), k.numpy(), v.numpy(), None if mask is None else mask.numpy()
    )
    return torch.from_numpy(out), torch.from_numpy(weights)


@pytest.mark.parametrize(
    "solution",
    [
        sdpa_right,
        sdpa_right_einsum,
        sdpa_right_numpy,
        lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask),
        lambda q, k, v, mask=None: (
            F.scaled_dot_product_attention(q, k, v, mask),
            scaled_dot_product_attention(q, k, v, mask)[1],
        ),
    ],
)
def test_scaled_dot_product_attention_checker_passes_right_solutions(solution, capsys):
    out = checker_passes(check_scaled_dot_product_attention, solution, capsys)
    assert "all 5 cases passed" in out


def with_mistake(
    scale=None,
    softmax_dim=-1,
    fill=float("-inf"),
    polarity=True,
    after=False,
    nan_to_num=True,
    transpose=False,
    swap=False,
):
    def attention(q, k, v, mask=None):
        scores = k @ q.transpose(-2, -1) if transpose else q @ k.transpose(-2, -1)
        scores = scores / (math.sqrt(q.size(-1)) if scale is None else scale(q, v))
        if mask is not None and not after:
            scores = scores.masked_fill(~mask if polarity else mask, fill)
        weights = torch.softmax(scores, dim=softmax_dim)
        weights = weights * mask if mask is not None and after else weights
        weights = weights.nan_to_num(0.0) if nan_to_num else weights
        return (weights, weights @ v) if swap else (weights @ v, weights)

    return attention


@pytest.mark.parametrize(
    ("wrong", "fragments"),
    [
        (with_mistake(scale=lambda q, v: 1.0), ["the scores were not scaled: divide q @ kᵀ by √d_k"]),
        (with_mistake(scale=lambda q, v: q.size(-1)), ["divided by d_k; the scale is √d_k"]),
        (with_mistake(scale=lambda q, v: math.sqrt(v.size(-1))), ["it is √d_k, the size of the queries and keys"]),
        (with_mistake(softmax_dim=-2), ["the softmax ran over the queries (dim=-2)"]),
        (with_mistake(polarity=False), ["is masked but got weight", "mask True means *may attend*"]),
        (with_mistake(after=True), ["zeroing the masked weights after the softmax"]),
        (with_mistake(nan_to_num=False), ["contains NaN", "0 / 0 = NaN", "case 5 of 5"]),
        (with_mistake(fill=-1e9, nan_to_num=False), ["row (0, 1) is fully masked but its weights sum to 1"]),
        (with_mistake(transpose=True), ["raised RuntimeError", "check the shapes"]),  # L_q != L_k in case 1
        (with_mistake(swap=True), ["return them in the order (out, weights)"]),
        (lambda q, k, v, mask=None: q @ k, ["raised RuntimeError", "check the shapes: q (..., L_q, d_k)"]),
        (
            lambda q, k, v, mask=None: sdpa_right(q, k, v, mask)[0],
            ["is a tensor of shape (2, 3, 6); expected a tuple of 2 items (out, weights)"],
        ),
    ],
)
def test_scaled_dot_product_attention_checker_explains_typical_mistakes(wrong, fragments, capsys):
    checker_fails(check_scaled_dot_product_attention, wrong, capsys, *fragments)


def window_right(x, window):
    ones = torch.ones(x.size(1), x.size(1))
    band = torch.tril(ones) - torch.tril(ones, diagonal=-window)  # (T, T)
    return band / band.sum(dim=1, keepdim=True) @ x


def window_softmax(x, window):
    t = torch.arange(x.size(1))
    allowed = (t.view(-1, 1) >= t.view(1, -1)) & (t.view(-1, 1) - t.view(1, -1) < window)  # (T, T)
    return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ x


def window_loop(x, window):
    return torch.stack([x[:, max(0, t - window + 1) : t + 1].mean(1) for t in range(x.size(1))], dim=1)


@pytest.mark.parametrize("solution", [window_right, window_softmax, window_loop])
def test_window_average_checker_passes_right_solutions(solution, capsys):
    checker_passes(check_window_average, solution, capsys)


def band(x, window):
    ones = torch.ones(x.size(1), x.size(1))
    return torch.tril(ones) - torch.tril(ones, diagonal=-window)


@pytest.mark.parametrize(
    ("wrong", "fragments"),
    [
        (lambda x, w: band(x, w) / w @ x, ["divide each row by the number of positions it really covers"]),
        (lambda x, w: band(x, w) @ x, ["these are sums, not averages"]),
        (lambda x, w: window_right(x, x.size(1)), ["the average of the whole past"]),
        (lambda x, w: window_right(x, w + 1), ["one position too many"]),
        (lambda x, w: band(x, w).T / band(x, w).T.sum(1, keepdim=True) @ x, ["the band points forward"]),
        (lambda x, w: x.mean(-1), ["has shape (2, 6) but expected (2, 6, 3)"]),
    ],
)
def test_window_average_checker_explains_typical_mistakes(wrong, fragments, capsys):
    checker_fails(check_window_average, wrong, capsys, *fragments)
