"""Chapter 8's checkers: correct solutions written several ways pass, typical mistakes get their hint."""

import math

import numpy as np
import pytest
import torch

from attnbook.exercises import check_apply_rope, check_expand_kv_heads, check_grouped_attention, check_rms_norm
from conftest import checker_fails, checker_passes

# ============================================================ apply_rope


def rope_stack(x, positions):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2).float() / d)
    angle = positions.float()[:, None] * theta  # (T, d/2)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1).flatten(-2)


def rope_assign(x, positions):
    out = torch.empty_like(x)
    d = x.shape[-1]
    for i in range(d // 2):
        angle = positions.double() * 10000 ** (-2 * i / d)
        c, s = torch.cos(angle).to(x.dtype)[:, None], torch.sin(angle).to(x.dtype)[:, None]
        a, b = x[..., 2 * i : 2 * i + 1], x[..., 2 * i + 1 : 2 * i + 2]
        out[..., 2 * i : 2 * i + 1] = a * c - b * s
        out[..., 2 * i + 1 : 2 * i + 2] = a * s + b * c
    return out


def rope_complex(x, positions):
    d = x.shape[-1]
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    freqs = torch.tensor([10000 ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    turn = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64), positions.double()[:, None] * freqs)
    return torch.view_as_real(pairs * turn).flatten(-2).float()


def rope_numpy(x, positions):
    x, p = x.numpy(), positions.numpy()
    d = x.shape[-1]
    angle = p[:, None] / 10000 ** (np.arange(0, d, 2) / d)
    out = x.copy()
    out[..., 0::2] = x[..., 0::2] * np.cos(angle) - x[..., 1::2] * np.sin(angle)
    out[..., 1::2] = x[..., 0::2] * np.sin(angle) + x[..., 1::2] * np.cos(angle)
    return out


@pytest.mark.parametrize("solution", [rope_stack, rope_assign, rope_complex, rope_numpy])
def test_apply_rope_accepts_correct_solutions(solution, capsys):
    checker_passes(check_apply_rope, solution, capsys)


def rope_wrong_sign(x, p):
    return rope_stack(x, -p)


def rope_halves(x, p):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2).float() / d)
    angle = p.float()[:, None] * theta
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1)


def rope_concatenated(x, p):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2).float() / d)
    angle = p.float()[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1)


def rope_base_1000(x, p):
    d = x.shape[-1]
    theta = 1000.0 ** (-torch.arange(0, d, 2).float() / d)
    angle = p.float()[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1).flatten(-2)


def rope_exponent_i(x, p):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(d // 2).float() / d)
    angle = p.float()[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1).flatten(-2)


def rope_exponent_4i(x, p):  # the 2 of 2i counted twice: arange(0, d, 2) already holds it
    d = x.shape[-1]
    theta = 10000.0 ** (-2 * torch.arange(0, d, 2).float() / d)
    angle = p.float()[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1).flatten(-2)


def rope_no_new_axis(x, p):  # angle = positions * theta: (T,) times (d/2,), no [:, None]
    d = x.shape[-1]
    angle = p.float() * 10000.0 ** (-torch.arange(0, d, 2).float() / d)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1).flatten(-2)


@pytest.mark.parametrize(
    "wrong, fragment",
    [
        (rope_wrong_sign, "turns the wrong way"),
        (rope_exponent_4i, "already counts 2i; don't multiply by 2 again"),
        (rope_no_new_axis, "angle must be (T, d/2)"),  # d = 2: output (..., T, T·d), no error
        (rope_halves, "rotate half"),
        (rope_concatenated, "interleave them"),
        (rope_base_1000, "the base is 10000"),
        (rope_exponent_i, "−2i/d"),
        (lambda x, p: rope_stack(x, p + 1), "rotate by positions"),
        (lambda x, p: rope_stack(x, torch.arange(x.shape[-2])), "use the positions given"),
        (lambda x, p: x.clone(), "nothing was rotated"),
        (lambda x, p: rope_stack(x, p)[..., :-1], "shape"),
        (lambda x, p: None, "None"),
        (lambda x, p: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_apply_rope_rejects_wrong_solutions(wrong, fragment, capsys):
    checker_fails(check_apply_rope, wrong, capsys, fragment)


def test_apply_rope_hints_the_missing_new_axis_on_a_broadcast_error(capsys):
    def no_new_axis_past_d_2(x, p):  # d = 2 right, so that case 2 raises: (5,) times (4,)
        return rope_stack(x, p) if x.shape[-1] == 2 else rope_no_new_axis(x, p)

    checker_fails(check_apply_rope, no_new_axis_past_d_2, capsys, "RuntimeError", "positions[:, None] * theta")


# ============================================================ rms_norm


@pytest.mark.parametrize(
    "solution",
    [
        lambda x: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6),
        lambda x: x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6),
        lambda x: torch.nn.functional.rms_norm(x, (x.shape[-1],), eps=1e-6),
        lambda x: x / ((x**2).sum(-1, keepdim=True) / x.shape[-1] + 1e-6) ** 0.5,
        lambda x: torch.from_numpy(x.numpy() / np.sqrt((x.numpy() ** 2).mean(-1, keepdims=True) + 1e-6)),
        lambda x: x / torch.sqrt(torch.mean(x * x, dim=x.dim() - 1).unsqueeze(-1) + 1e-6),  # keepdim by hand
    ],
)
def test_rms_norm_accepts_correct_solutions(solution, capsys):
    checker_passes(check_rms_norm, solution, capsys)


@pytest.mark.parametrize(
    "wrong, fragment",
    [
        (lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],), eps=1e-6), "this is LayerNorm"),
        (lambda x: x / torch.sqrt(x.mean(-1, keepdim=True) ** 2 + 1e-6), "not the square of the mean"),
        (lambda x: x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-6), "do not subtract the mean"),
        (lambda x: x / torch.sqrt(x.var(-1, keepdim=True) + 1e-6), "do not subtract the mean"),
        (lambda x: x / x.std(dim=-1, keepdim=True), "do not subtract the mean"),
        (lambda x: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6), "not their sum"),
        (lambda x: x / x.pow(2).mean(-1, keepdim=True), "square root"),
        (lambda x: x / x.norm(dim=-1, keepdim=True), "not their sum"),
        (lambda x: x / torch.sqrt(x.pow(2).mean(0, keepdim=True) + 1e-6), "the last axis"),
        (lambda x: x / torch.sqrt(x.pow(2).mean(1, keepdim=True) + 1e-6), "runs over axis 1"),  # 3 axes
        (lambda x: x / torch.sqrt(x.pow(2).mean(-2, keepdim=True) + 1e-6), "the last axis (dim=-1)"),
        (lambda x: x.pow(2).mean(-1).sqrt(), "shape"),
        (lambda x: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + 1e-6), "eps goes inside the root"),
        (lambda x: x / x.pow(2).mean(-1, keepdim=True).sqrt(), "add eps = 1e-6 inside the root"),
        (lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5), "eps is 1e-6"),
        (lambda x: torch.nn.RMSNorm(x.shape[-1])(x), "machine epsilon"),  # its default eps
        (lambda x: torch.nn.functional.rms_norm(x, (x.shape[-1],)), "pass eps=1e-6"),
        (lambda x: x / torch.sqrt(x.pow(2).mean(-1) + 1e-6), "keepdim=True"),  # fails to broadcast
    ],
)
def test_rms_norm_rejects_wrong_solutions(wrong, fragment, capsys):
    checker_fails(check_rms_norm, wrong, capsys, fragment)


def test_rms_norm_catches_a_missing_keepdim_where_the_shapes_happen_to_fit(capsys):
    def no_keepdim_when_square(x):  # square x: (..., T) broadcasts as a row, no error
        if x.size(-1) == x.size(-2):
            return x / torch.sqrt(x.pow(2).mean(-1) + 1e-6)
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    checker_fails(check_rms_norm, no_keepdim_when_square, capsys, "keepdim=True", "happen to fit", "T = d")


# ============================================================ expand_kv_heads


@pytest.mark.parametrize(
    "solution",
    [
        lambda x, h: x.repeat_interleave(h // x.shape[1], dim=1),
        lambda x, h: x[:, :, None].expand(-1, -1, h // x.shape[1], -1, -1).reshape(x.shape[0], h, *x.shape[2:]),
        lambda x, h: torch.cat([x[:, g : g + 1] for g in range(x.shape[1]) for _ in range(h // x.shape[1])], 1),
        lambda x, h: x[:, [k // (h // x.shape[1]) for k in range(h)]],
        lambda x, h: x[:, torch.arange(h) // math.ceil(h / x.shape[1])],
    ],
)
def test_expand_kv_heads_accepts_correct_solutions(solution, capsys):
    checker_passes(check_expand_kv_heads, solution, capsys)


@pytest.mark.parametrize(
    "wrong, fragment",
    [
        (lambda x, h: x.repeat(1, h // x.shape[1], 1, 1), "repeat_interleave, not repeat"),
        (lambda x, h: x.repeat_interleave(h // x.shape[1], dim=2), "shape"),
        (lambda x, h: x, "shape"),
        (lambda x, h: x.expand(-1, h, -1, -1), "shape"),
    ],
)
def test_expand_kv_heads_rejects_wrong_solutions(wrong, fragment, capsys):
    checker_fails(check_expand_kv_heads, wrong, capsys, fragment)


# ============================================================ grouped_attention


def ga_broadcast(q, k, v):
    B, H, T, d = q.shape
    G = k.shape[1]
    q = q.reshape(B, G, H // G, T, d)  # query heads g·H/G .. (g+1)·H/G - 1 share key/value head g
    k, v = k.unsqueeze(2), v.unsqueeze(2)  # (B, G, 1, S, d)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)  # (B, G, H/G, T, S)
    return (weights @ v).reshape(B, H, T, d)


def ga_einsum(q, k, v):
    B, H, T, d = q.shape
    G = k.shape[1]
    q = q.view(B, G, H // G, T, d)
    weights = torch.einsum("bgrtd,bgsd->bgrts", q, k).mul(d**-0.5).softmax(-1)
    return torch.einsum("bgrts,bgsd->bgrtd", weights, v).flatten(1, 2)


def ga_copies(q, k, v):
    r = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)  # copying is allowed
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1) @ v


def ga_loops(q, k, v):
    B, H, T, d = q.shape
    G = k.shape[1]
    out = torch.zeros_like(q)
    for b in range(B):
        for h in range(H):
            g = h // (H // G)
            for t in range(T):
                scores = torch.stack([q[b, h, t] @ k[b, g, s] for s in range(k.shape[2])]) / math.sqrt(d)
                out[b, h, t] = torch.softmax(scores, 0) @ v[b, g]
    return out


def ga_numpy(q, k, v):
    B, H, T, d = q.shape
    G = k.shape[1]
    q, k, v = q.numpy().reshape(B, G, H // G, T, d), k.numpy()[:, :, None], v.numpy()[:, :, None]
    scores = q @ k.swapaxes(-2, -1) / np.sqrt(d)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True) @ v).reshape(B, H, T, d)


def ga_rows(q, k, v):  # the chapter's solution: each group's query heads as the rows of one matrix
    B, H, T, d = q.shape
    G = k.size(1)
    q = q.reshape(B, G, H // G * T, d)
    out = torch.softmax(q @ k.transpose(-2, -1) / d**0.5, dim=-1) @ v  # (B, G, H/G·T, d)
    return out.reshape(B, H, T, d)


def ga_head_loop(q, k, v):  # one query head at a time, reading its key/value head as a view
    H, G = q.shape[1], k.shape[1]
    heads = [
        torch.softmax(q[:, h] @ k[:, h // (H // G)].transpose(-2, -1) / q.shape[-1] ** 0.5, -1) @ v[:, h // (H // G)]
        for h in range(H)
    ]
    return torch.stack(heads, dim=1)


@pytest.mark.parametrize("solution", [ga_rows, ga_einsum, ga_loops, ga_head_loop, ga_numpy])
def test_grouped_attention_accepts_correct_solutions_without_copies(solution, capsys):
    checker_passes(check_grouped_attention, solution, capsys)


def ga_indexed(q, k, v):
    kv_head = torch.arange(q.shape[1]) // (q.shape[1] // k.shape[1])
    k, v = k[:, kv_head], v[:, kv_head]  # (B, H, S, d): a copy
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1) @ v


def ga_cat(q, k, v):
    r = q.shape[1] // k.shape[1]
    k, v = (torch.cat([x[:, g : g + 1] for g in range(x.shape[1]) for _ in range(r)], dim=1) for x in (k, v))
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1) @ v


def ga_expanded(q, k, v):
    B, H, T, d = q.shape
    G, S = k.shape[1:3]
    k, v = (x[:, :, None].expand(B, G, H // G, S, d).reshape(B, H, S, d) for x in (k, v))
    return torch.softmax(q @ k.transpose(-2, -1) / d**0.5, dim=-1) @ v


def ga_group_loop(q, k, v):  # one group at a time, its key/value head broadcast against its query heads
    H, G = q.shape[1], k.shape[1]
    r = H // G
    outs = []
    for g in range(G):
        weights = torch.softmax(q[:, g * r : (g + 1) * r] @ k[:, g : g + 1].transpose(-2, -1) / q.shape[-1] ** 0.5, -1)
        outs.append(weights @ v[:, g : g + 1])
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize(
    "copying, op",
    [
        (ga_broadcast, "clone"),
        (ga_copies, "clone"),
        (ga_indexed, "index"),
        (ga_cat, "cat"),
        (ga_expanded, "clone"),
        (ga_group_loop, "clone"),
    ],
)
def test_grouped_attention_names_a_copy_of_the_key_value_heads(copying, op, capsys):
    checker_fails(
        check_grouped_attention,
        copying,
        capsys,
        "the values are right, but k or v was copied out to the H query heads: new tensors shaped like keys",
        "times what k and v hold, (B, G, S, d) = (2, 2, 6, 16) each",
        f"made inside PyTorch by `{op}`: repeat_interleave",
        "reshape q to (B, G, (H // G) * T, d)",
        "case 5 of 7",
    )


def ga_keys_copied(q, k, v):  # k out to the H query heads, v read in place by the groups
    B, H, T, d = q.shape
    G = k.shape[1]
    k = k.repeat_interleave(H // G, dim=1)  # (B, H, S, d): a copy of k only
    weights = torch.softmax(q @ k.transpose(-2, -1) / d**0.5, dim=-1)  # (B, H, T, S)
    return (weights.reshape(B, G, H // G * T, -1) @ v).reshape(B, H, T, d)


def test_grouped_attention_copy_check_catches_a_copy_of_the_keys_alone(capsys):
    from attnbook.exercises.modern import _compare_grouped_without_copies, _grouped_cases, _Watched

    checker_fails(check_grouped_attention, ga_keys_copied, capsys, "k or v was copied out", "case 5 of 7")
    caught = []
    for case in _grouped_cases():
        watched = _Watched(ga_keys_copied)
        caught.append(_compare_grouped_without_copies(watched, watched(*case.args), case) is not None)
    # H / G = 4 (case 5) and 3 (case 7) catch it; H / G = 2 (case 6) cannot: k copied twice is k and v's count
    assert caught == [False, False, False, False, True, False, True]


def test_grouped_attention_asks_for_the_attention_written_out(capsys):
    def built_in(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    checker_fails(
        check_grouped_attention, built_in, capsys, "came from torch's scaled_dot_product_attention", "write the"
    )


def test_grouped_attention_prints_one_pass_line(capsys):
    out = checker_passes(check_grouped_attention, ga_rows, capsys)
    assert max(len(line) for line in out.splitlines()) <= 88, out  # the site's code column
    expected = (
        "✓ grouped-query attention without copies: all 7 cases passed (G = 1, 2, 3 key/value heads for 3 to 9 "
        "query heads, G = H, S != T, one query (T = 1), d from 2 to 16; no copy of k or v for the query heads)."
    )
    assert " ".join(out.split()) == expected


def ga_mistaken(q, k, v, order="//", scale="sqrt", softmax_dim=-1, merge="direct", causal=False):
    """Reshape and broadcast, with one mistake."""
    B, H, T, d = q.shape
    G, S = k.shape[1:3]
    if order == "//":
        q = q.reshape(B, G, H // G, T, d)
        k, v = k[:, :, None], v[:, :, None]  # (B, G, 1, S, d)
    else:  # (B, H/G, G, T, d): query head h meets key/value head h % G
        q = q.reshape(B, H // G, G, T, d)
        k, v = k[:, None], v[:, None]  # (B, 1, G, S, d)
    scores = q @ k.transpose(-2, -1) / {"sqrt": math.sqrt(d), "none": 1, "d": d}[scale]
    if causal:
        scores = scores.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(), float("-inf"))
    out = scores.softmax(softmax_dim) @ v
    if merge == "none":
        return out
    if merge == "transposed":
        out = out.transpose(1, 2)
    return out.reshape(B, H, T, d)


@pytest.mark.parametrize(
    "options, fragment",
    [
        (dict(order="%"), "key/value head h % G"),
        (dict(scale="none"), "not scaled: divide q @ kᵀ by √d"),
        (dict(scale="d"), "divided by d; the scale is √d"),
        (dict(softmax_dim=-2), "the softmax ran over the queries"),
        (dict(softmax_dim=2), "the softmax ran over the query heads of a group"),
        (dict(merge="none"), "the groups were not merged back"),
        (dict(merge="transposed"), "merged back in another order"),
        (dict(causal=True), "there is no mask"),
    ],
)
def test_grouped_attention_names_typical_mistakes(options, fragment, capsys):
    checker_fails(check_grouped_attention, lambda q, k, v: ga_mistaken(q, k, v, **options), capsys, fragment)


def test_grouped_attention_names_a_softmax_over_the_rows_of_a_group(capsys):
    def rows_softmax(q, k, v):  # the reshape of the solution, softmax over dim -2
        B, H, T, d = q.shape
        G = k.size(1)
        q = q.reshape(B, G, H // G * T, d)
        return (torch.softmax(q @ k.transpose(-2, -1) / d**0.5, -2) @ v).reshape(B, H, T, d)

    checker_fails(check_grouped_attention, rows_softmax, capsys, "softmax ran over dim -2", "dim=-1")


def test_grouped_attention_names_a_missing_last_reshape(capsys):
    def not_reshaped_back(q, k, v):  # the solution without its last reshape
        B, H, T, d = q.shape
        G = k.size(1)
        q = q.reshape(B, G, H // G * T, d)
        return torch.softmax(q @ k.transpose(-2, -1) / d**0.5, dim=-1) @ v  # (B, G, H/G·T, d)

    checker_fails(check_grouped_attention, not_reshaped_back, capsys, "last reshape is missing", "(B, H, T, d)")


def test_grouped_attention_names_the_order_of_repeat(capsys):
    def copied_with_repeat(q, k, v):
        r = q.shape[1] // k.shape[1]
        k, v = k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1)  # heads 0, 1, 0, 1, ...
        return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1) @ v

    checker_fails(check_grouped_attention, copied_with_repeat, capsys, "key/value head h % G", "repeat_interleave")


@pytest.mark.parametrize(
    "wrong, fragment",
    [
        (
            lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v,
            "reshape q to (B, G, (H // G) * T, d)",
        ),
        (lambda q, k, v: ga_broadcast(q, k, v).transpose(1, 2).view(*q.shape), "view needs"),
        (lambda q, k, v: (ga_broadcast(q, k, v), None), "return only the tensor"),
        (lambda q, k, v: ga_broadcast(q, k, v)[..., :-1], "shape"),
        (lambda q, k, v: ga_broadcast(q, k, v).tolist(), "a list"),
        (lambda q, k, v: None, "None"),
        (lambda q, k, v: 1 / 0, "ZeroDivisionError"),
        (lambda q, k: q, "TypeError"),
    ],
)
def test_grouped_attention_rejects_wrong_answers_without_raising(wrong, fragment, capsys):
    checker_fails(check_grouped_attention, wrong, capsys, fragment)


def test_grouped_attention_leaves_the_inputs_alone(capsys):
    def in_place(q, k, v):
        q /= math.sqrt(q.shape[-1])
        return ga_broadcast(q * math.sqrt(q.shape[-1]), k, v)

    checker_fails(check_grouped_attention, in_place, capsys, "in place")


def test_apply_rope_in_place_hint_names_stack_or_clone(capsys):
    def rotated_in_place(x, positions):
        d = x.shape[-1]
        theta = 10000.0 ** (-torch.arange(0, d, 2) / d)  # (d/2,)
        angle = positions[:, None] * theta  # (T, d/2)
        even, odd = x[..., 0::2].clone(), x[..., 1::2].clone()
        x[..., 0::2] = even * torch.cos(angle) - odd * torch.sin(angle)  # written into the input
        x[..., 1::2] = even * torch.sin(angle) + odd * torch.cos(angle)
        return x

    checker_fails(check_apply_rope, rotated_in_place, capsys, "changed its input `x` in place", "torch.stack")


def test_grouped_attention_names_heads_out_of_order(capsys):
    def grouped_wrong_way_and_not_undone(q, k, v):  # split as (H // G, G), merged as (G, H // G)
        B, H, T, d = q.shape
        G = k.size(1)
        q = q.reshape(B, H // G, G, T, d).transpose(1, 2).reshape(B, G, H // G * T, d)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(d)).softmax(dim=-1)
        return (weights @ v).reshape(B, H, T, d)

    checker_fails(check_grouped_attention, grouped_wrong_way_and_not_undone, capsys, "in another order")
