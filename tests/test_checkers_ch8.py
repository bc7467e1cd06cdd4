"""Chapter 8's checkers: correct solutions written several ways pass, typical mistakes get their hint."""

import math

import numpy as np
import pytest
import torch

from attnbook.exercises import check_apply_rope, check_expand_kv_heads, check_rms_norm
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


@pytest.mark.parametrize(
    "wrong, fragment",
    [
        (rope_wrong_sign, "turns the wrong way"),
        (rope_halves, "rotate half"),
        (rope_concatenated, "interleave them"),
        (rope_base_1000, "the base is 10000"),
        (rope_exponent_i, "−2i/d"),
        (lambda x, p: rope_stack(x, p + 1), "rotate by positions"),
        (lambda x, p: x.clone(), "nothing was rotated"),
        (lambda x, p: rope_stack(x, p)[..., :-1], "shape"),
        (lambda x, p: None, "None"),
        (lambda x, p: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_apply_rope_rejects_wrong_solutions(wrong, fragment, capsys):
    checker_fails(check_apply_rope, wrong, capsys, fragment)


# ============================================================ rms_norm


@pytest.mark.parametrize(
    "solution",
    [
        lambda x: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6),
        lambda x: x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6),
        lambda x: torch.nn.functional.rms_norm(x, (x.shape[-1],), eps=1e-6),
        lambda x: x / ((x**2).sum(-1, keepdim=True) / x.shape[-1] + 1e-6) ** 0.5,
        lambda x: torch.from_numpy(x.numpy() / np.sqrt((x.numpy() ** 2).mean(-1, keepdims=True) + 1e-6)),
    ],
)
def test_rms_norm_accepts_correct_solutions(solution, capsys):
    checker_passes(check_rms_norm, solution, capsys)


@pytest.mark.parametrize(
    "wrong, fragment",
    [
        (lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],), eps=1e-6), "this is LayerNorm"),
        (lambda x: x / torch.sqrt(x.mean(-1, keepdim=True) ** 2 + 1e-6), "not the square of the mean"),
        (lambda x: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6), "not their sum"),
        (lambda x: x / x.pow(2).mean(-1, keepdim=True), "square root"),
        (lambda x: x / x.norm(dim=-1, keepdim=True), "not their sum"),
        (lambda x: x / torch.sqrt(x.pow(2).mean(0, keepdim=True) + 1e-6), "the last axis"),
        (lambda x: x.pow(2).mean(-1).sqrt(), "shape"),
    ],
)
def test_rms_norm_rejects_wrong_solutions(wrong, fragment, capsys):
    checker_fails(check_rms_norm, wrong, capsys, fragment)


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
