"""Chapter 5's recorded experiment: can one head copy both neighbours of every position?

Every position holds a vector of 8 standard normal numbers; at every inner position the model
must output both neighbours' vectors (16 numbers), scored by the mean squared error. One
attention head delivers one weighted average of its inputs' values; if the values are a
*linear* function of the 8 numbers and the weights do not depend on them, the best read-out
of ``alpha a + (1 - alpha) b`` loses half the variance (error 0.5), whatever alpha. The arms
test that derivation's reach: one head or two, as written (a linear embedding, d_model 16),
trained twice as long, twice as wide, and with a *nonlinear* embedding (8 -> 64 -> d_model,
so the values need not be linear in the inputs) at three widths; and two of them trained three
times as long (18 passes).
Registered as the record ``neighbour_copy``; every seed trains on the same vectors (drawn
from seed 1, as in the chapter), the seed draws the initial weights and the batch order.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnbook.attention import MultiHeadAttention, merge_heads, split_heads
from attnbook.records import Experiment, check_arm, register
from attnbook.training import train_on_tensors

__all__ = [
    "NeighbourReader",
    "copy_vectors",
    "both_neighbours",
    "copy_loss",
    "neighbour_weights",
    "train_copier",
    "copy_run",
    "COPY_ARMS",
    "POSITIONAL_ARMS",
    "PerPositionLinear",
    "frozen_weight_error",
    "FrozenReader",
    "refit_frozen_error",
    "foreign_neighbour_error",
    "frozen_run",
    "FROZEN_ARMS",
]

#: The arms: (heads, d_model, nonlinear embedding, passes).
COPY_ARMS = {
    "1 head": (1, 16, False, 6),
    "2 heads": (2, 16, False, 6),
    "1 head, 12 passes": (1, 16, False, 12),
    "1 head, d_model 32": (1, 32, False, 6),
    "1 head, nonlinear, d_model 16": (1, 16, True, 6),
    "1 head, nonlinear, d_model 32": (1, 32, True, 6),
    "1 head, nonlinear, d_model 64": (1, 64, True, 6),
    "2 heads, nonlinear, d_model 16": (2, 16, True, 6),
    "1 head, 18 passes": (1, 16, False, 18),
    "1 head, nonlinear, d_model 64, 18 passes": (1, 64, True, 18),
}


class NeighbourReader(nn.Module):
    """Chapter 5's neighbour reader: ``embed`` plus a learned vector per position, one multi-head
    attention layer (no residual connection), a small network at every position.

    Shapes:
        inputs: what ``embed`` takes, ``(B, T)`` ids or ``(B, T, m)`` vectors -> (outputs
        ``(B, T, n_outputs)``, weights ``(B, H, T, T)``)
    """

    def __init__(self, num_heads: int, embed: nn.Module, n_outputs: int, length: int = 8, d_model: int = 16) -> None:
        super().__init__()
        self.embed = embed
        self.position = nn.Parameter(0.5 * torch.randn(length, d_model))  # (T, d_model), learned
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.readout = nn.Sequential(nn.Linear(d_model, 64), nn.ReLU(), nn.Linear(64, n_outputs))

    def forward(self, inputs: Tensor) -> tuple[Tensor, Tensor]:
        x = self.embed(inputs) + self.position  # (B, T, d_model)
        z, weights = self.attention(x, x, x)  # (B, T, d_model), (B, H, T, T)
        return self.readout(z), weights


def copy_vectors(n_train: int = 20_000, n_test: int = 2_000, seed: int = 1) -> tuple[Tensor, Tensor]:
    """Training and test sequences of 8 positions, each a vector of 8 standard normal numbers:
    ``(n_train, 8, 8)``, ``(n_test, 8, 8)``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n_train, 8, 8, generator=generator), torch.randn(n_test, 8, 8, generator=generator)


def both_neighbours(u: Tensor) -> Tensor:
    """The target at positions 1 .. T-2: the left neighbour's vector, then the right one's.
    ``(N, T, m)`` -> ``(N, T-2, 2m)``."""
    return torch.cat([u[:, :-2], u[:, 2:]], dim=-1)


def copy_loss(outputs: Tensor, targets: Tensor) -> Tensor:
    """Mean squared error at the inner positions."""
    return F.mse_loss(outputs[:, 1:-1], targets)


def neighbour_weights(weights: Tensor) -> list[tuple[float, float]]:
    """Per head, the mean weight of the inner positions on their left and their right neighbour.
    weights ``(N, H, T, T)``."""
    inner = torch.arange(1, weights.size(-1) - 1)
    mean = weights.mean(dim=0)  # (H, T, T)
    left, right = mean[:, inner, inner - 1].mean(-1), mean[:, inner, inner + 1].mean(-1)  # (H,), (H,)
    return list(zip(left.tolist(), right.tolist()))


class PerPositionLinear(nn.Module):
    """A separate ``nn.Linear(m, d)`` at each of ``length`` positions: values still linear in the
    inputs, but no longer one map shared by every position. ``(B, T, m)`` -> ``(B, T, d)``."""

    def __init__(self, m: int, d: int, length: int = 8) -> None:
        super().__init__()
        self.maps = nn.ModuleList(nn.Linear(m, d) for _ in range(length))

    def forward(self, x: Tensor) -> Tensor:
        return torch.stack([linear(x[:, t]) for t, linear in enumerate(self.maps)], dim=1)


#: A control recorded apart (``neighbour_copy_positional``): one head whose embedding is a
#: separate linear map at each position; and one head as written again, to check the records agree.
POSITIONAL_ARMS = {"1 head": (1, 16, False, 6), "1 head, per-position embedding": (1, 16, "positional", 6)}

#: A control recorded apart (``neighbour_copy_long``): the nonlinear embedding alone (width 16) at 18 passes,
#: beside one head as written at 18 passes (as in ``neighbour_copy``).
LONG_ARMS = {"1 head, 18 passes": (1, 16, False, 18), "1 head, nonlinear, d_model 16, 18 passes": (1, 16, True, 18)}


def train_copier(
    heads: int,
    d_model: int = 16,
    embedding: bool | str = False,
    passes: int = 6,
    seed: int = 0,
    lr: float = 5e-3,
    batch_size: int = 128,
) -> tuple[NeighbourReader, float, list[tuple[float, float]]]:
    """Build a :class:`NeighbourReader` from ``seed`` and train it to copy both neighbours of
    :func:`copy_vectors`. ``embedding``: ``False`` a shared ``nn.Linear(8, d_model)``, ``True``
    8 -> 64 -> ReLU -> ``d_model``, ``"positional"`` a :class:`PerPositionLinear`.

    Returns the model, its held-out error and :func:`neighbour_weights`."""
    train, test = copy_vectors()
    torch.manual_seed(seed)
    if embedding == "positional":
        embed = PerPositionLinear(8, d_model)
    elif embedding:  # nonlinear
        embed = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, d_model))
    else:
        embed = nn.Linear(8, d_model)
    model = NeighbourReader(heads, embed, 16, d_model=d_model)
    train_on_tensors(model, train, both_neighbours(train), copy_loss, passes, lr=lr, batch_size=batch_size, seed=seed)
    with torch.no_grad():
        outputs, weights = model(test)
    return model, copy_loss(outputs, both_neighbours(test)).item(), neighbour_weights(weights)


def _mixed(model: NeighbourReader, x: Tensor, weights: Tensor) -> Tensor:
    """The attention layer's output with its weights replaced by ``weights``: the trained values, mixed by
    ``weights`` and projected by ``W^O``. x ``(N, T, d_model)``, weights ``(1 or N, H, T, T)`` -> ``(N, T, d_model)``.
    """
    attention = model.attention
    values = split_heads(attention.v_proj(x), attention.num_heads)  # (N, H, T, d_head)
    return attention.out_proj(merge_heads(weights @ values))  # (N, T, d_model)


def frozen_weight_error(model: NeighbourReader, test: Tensor) -> float:
    """The held-out error of a trained reader whose attention weights are replaced by their mean over
    the test sequences (one fixed map per head, the same for every input); nothing is retrained.

    What is left is what the values and the read-out can do with weights that ignore the inputs.
    test ``(N, T, m)``."""
    with torch.no_grad():
        x = model.embed(test) + model.position  # (N, T, d_model)
        _, weights = model.attention(x, x, x)  # (N, H, T, T)
        fixed = weights.mean(dim=0, keepdim=True)  # (1, H, T, T): input-independent
        return copy_loss(model.readout(_mixed(model, x, fixed)), both_neighbours(test)).item()


def _foreign_weights(model: NeighbourReader, x: Tensor) -> Tensor:
    """The reader's attention weights with each position's two neighbours scored by the keys of *another*
    sequence (the previous one in ``x``) at those positions: weights that may still move with the query's
    own numbers and with every other position, but not with the two neighbours' numbers.
    x ``(N, T, d_model)`` -> ``(N, H, T, T)``."""
    attention = model.attention
    q = split_heads(attention.q_proj(x), attention.num_heads)  # (N, H, T, d_head)
    k = split_heads(attention.k_proj(x), attention.num_heads)
    k_other = split_heads(attention.k_proj(x.roll(1, dims=0)), attention.num_heads)  # sequence n - 1's keys
    t = torch.arange(x.size(1))
    neighbour = (t[:, None] - t[None, :]).abs() == 1  # (T, T): key s is query t's neighbour
    scores = torch.where(neighbour, q @ k_other.transpose(-2, -1), q @ k.transpose(-2, -1))  # (N, H, T, T)
    return torch.softmax(scores / q.size(-1) ** 0.5, dim=-1)


def foreign_neighbour_error(model: NeighbourReader, test: Tensor) -> float:
    """The held-out error of a trained reader whose weights are :func:`_foreign_weights` (each position's two
    neighbours scored with another sequence's keys); the values are the true ones and nothing is retrained.

    A head whose output uses weights that move with the neighbours' numbers (the floor's assumption 2)
    loses that here, and its old read-out is also misled by weights that follow the wrong numbers.
    test ``(N, T, m)``."""
    with torch.no_grad():
        x = model.embed(test) + model.position  # (N, T, d_model)
        outputs = model.readout(_mixed(model, x, _foreign_weights(model, x)))  # (N, T, 16)
        return copy_loss(outputs, both_neighbours(test)).item()


class FrozenReader(nn.Module):
    """A trained reader with its attention weights fixed at ``weights`` (one map per head, the same for
    every input) or, with ``weights=None``, computed with foreign neighbours (:func:`_foreign_weights`),
    and a fresh read-out; only the read-out has parameters to train.

    Shapes: inputs ``(B, T, m)`` -> (outputs ``(B, T, n_outputs)``, weights ``(B, H, T, T)``)"""

    def __init__(self, trained: NeighbourReader, weights: Tensor | None, n_outputs: int = 16) -> None:
        super().__init__()
        self.trained, self.weights = [trained], weights  # in a list: not a submodule, not trained
        d_model = trained.position.size(-1)
        self.readout = nn.Sequential(nn.Linear(d_model, 64), nn.ReLU(), nn.Linear(64, n_outputs))

    def forward(self, inputs: Tensor) -> tuple[Tensor, Tensor]:
        model = self.trained[0]
        with torch.no_grad():
            x = model.embed(inputs) + model.position  # (B, T, d_model)
            weights = _foreign_weights(model, x) if self.weights is None else self.weights
            z = _mixed(model, x, weights)  # (B, T, d_model)
        return self.readout(z), weights.expand(len(inputs), -1, -1, -1)


def refit_frozen_error(
    model: NeighbourReader, seed: int, passes: int = 6, lr: float = 5e-3, foreign: bool = False
) -> float:
    """:func:`frozen_weight_error` with the read-out trained afresh for the frozen weights: the held-out
    error of a new read-out (``passes`` over the training vectors) on the trained reader's values, mixed by
    its attention weights fixed at their mean over the training sequences. Unlike the plain frozen error,
    it does not charge the old read-out for inputs it never saw. With ``foreign=True`` the weights are
    :func:`_foreign_weights` instead (within each batch of 128, the previous sequence's keys): what a fresh
    read-out gets from weights that no longer move with the neighbours' numbers but still with the rest."""
    train, test = copy_vectors()
    weights = None
    if not foreign:
        with torch.no_grad():
            x = model.embed(train) + model.position  # (N, T, d_model)
            weights = model.attention(x, x, x)[1].mean(dim=0, keepdim=True)  # (1, H, T, T)
    torch.manual_seed(seed)
    frozen = FrozenReader(model, weights)
    train_on_tensors(frozen, train, both_neighbours(train), copy_loss, passes, lr=lr, batch_size=128, seed=seed)
    with torch.no_grad():
        outputs, _ = frozen(test)
    return copy_loss(outputs, both_neighbours(test)).item()


#: A control recorded apart (``neighbour_copy_frozen``): which assumption of the floor a head below
#: 0.5 breaks. Each arm is trained as in :data:`COPY_ARMS`, then measured with its weights frozen.
FROZEN_ARMS = {
    "1 head": (1, 16, False, 6),
    "1 head, d_model 32": (1, 32, False, 6),
    "1 head, nonlinear, d_model 64": (1, 64, True, 6),
    "1 head, per-position embedding": (1, 16, "positional", 6),
}


def frozen_run(arm: str, seed: int, lr: float = 5e-3, batch_size: int = 128) -> dict:
    """Train one of :data:`FROZEN_ARMS` from ``seed``: its held-out ``error``, ``frozen_error``
    (:func:`frozen_weight_error`), ``refit_error`` (:func:`refit_frozen_error`), ``foreign_error``
    (:func:`foreign_neighbour_error`), ``foreign_refit_error`` (:func:`refit_frozen_error` with
    ``foreign=True``), head 1's mean weights on the left and right neighbour (``left_1``,
    ``right_1``) and the largest gap between them at one inner position (``position_gap_1``)."""
    check_arm(arm, FROZEN_ARMS)
    model, error, sides = train_copier(*FROZEN_ARMS[arm], seed=seed, lr=lr, batch_size=batch_size)
    left, right = sides[0]  # head 1's mean weights on the two neighbours
    test = copy_vectors()[1]
    with torch.no_grad():
        mean = model(test)[1].mean(dim=0)[0]  # (T, T): head 1's mean weights
    inner = torch.arange(1, mean.size(-1) - 1)
    gap = (mean[inner, inner - 1] - mean[inner, inner + 1]).abs().max().item()
    return dict(
        error=error,
        frozen_error=frozen_weight_error(model, test),
        refit_error=refit_frozen_error(model, seed),
        foreign_error=foreign_neighbour_error(model, test),
        foreign_refit_error=refit_frozen_error(model, seed, foreign=True),
        left_1=left,
        right_1=right,
        position_gap_1=gap,
    )


def copy_run(arm: str, seed: int, lr: float = 5e-3, batch_size: int = 128) -> dict:
    """Train one of :data:`COPY_ARMS` (or :data:`POSITIONAL_ARMS`, :data:`LONG_ARMS`) from ``seed``
    (:func:`train_copier`); its held-out ``error`` and, per head ``i``, ``left_i`` and
    ``right_i`` (:func:`neighbour_weights`)."""
    arms = {**COPY_ARMS, **POSITIONAL_ARMS, **LONG_ARMS}
    check_arm(arm, arms)
    heads, d_model, embedding, passes = arms[arm]
    _, error, sides = train_copier(heads, d_model, embedding, passes, seed, lr, batch_size)
    out = dict(error=error)
    for head, (left, right) in enumerate(sides, start=1):
        out[f"left_{head}"], out[f"right_{head}"] = left, right
    return out


register(
    Experiment(
        name="neighbour_copy",
        run=copy_run,
        arms=tuple(COPY_ARMS),
        seeds=tuple(range(10)),
        settings=dict(lr=5e-3, batch_size=128),
        replay=dict(arm="1 head", seed=0),
        chapter="chapters/05_multi_head.ipynb",
        description="Chapter 5's neighbour reader on copying both neighbours' 8-number vectors (20 000 sequences "
        "of 8 to train on, 2 000 held out), 6 passes: one head or two, with a linear embedding as in the chapter, "
        "one head trained 12 passes or twice as wide, and with a nonlinear embedding (8 -> 64 -> d_model) at "
        "widths 16, 32 and 64; one head as written and nonlinear at width 64 also after 18 passes; the held-out mean "
        "squared error and each head's weight on the two neighbours.",
    )
)


register(
    Experiment(
        name="neighbour_copy_positional",
        run=copy_run,
        arms=tuple(POSITIONAL_ARMS),
        seeds=tuple(range(10)),
        settings=dict(lr=5e-3, batch_size=128),
        replay=dict(arm="1 head, per-position embedding", seed=0),
        chapter="chapters/05_multi_head.ipynb",
        description="A control for Chapter 5's floor: one head whose embedding is a separate linear map at each "
        "position (values linear in the inputs, but not one map shared by every position), and one head as written "
        "(as in neighbour_copy, to check the records agree); 6 passes, the same data and seeds.",
    )
)


register(
    Experiment(
        name="neighbour_copy_long",
        run=copy_run,
        arms=tuple(LONG_ARMS),
        seeds=tuple(range(10)),
        settings=dict(lr=5e-3, batch_size=128),
        replay=dict(arm="1 head, nonlinear, d_model 16, 18 passes", seed=0),
        chapter="chapters/05_multi_head.ipynb",
        description="A control for Chapter 5's floor: one head with the nonlinear embedding at width 16 (the only "
        "change from the chapter's head) trained 18 passes, beside one head as written at 18 passes (as in "
        "neighbour_copy, to check the records agree); the same data and seeds.",
    )
)


register(
    Experiment(
        name="neighbour_copy_frozen",
        run=frozen_run,
        arms=tuple(FROZEN_ARMS),
        seeds=tuple(range(10)),
        settings=dict(lr=5e-3, batch_size=128),
        replay=dict(arm="1 head, nonlinear, d_model 64", seed=0),
        chapter="chapters/05_multi_head.ipynb",
        description="Which assumption of Chapter 5's floor a single head below 0.5 breaks: one head as written, "
        "twice as wide, with the nonlinear embedding at width 64, and with a per-position embedding, each trained "
        "6 passes as in neighbour_copy, then measured again with its attention weights replaced by their mean over "
        "the held-out sequences (weights that ignore the inputs; nothing retrained), and with those weights fixed "
        "at their mean over the training sequences and a fresh read-out trained for them (6 passes), and with each "
        "position's two neighbours scored with another sequence's keys (weights that may still move with "
        "the query and the other positions, but not with the neighbours' numbers), first with the trained read-out, "
        "then with a fresh one (6 passes); and head 1's "
        "largest gap, over the inner positions, between its mean weights on the left and the right neighbour.",
    )
)
