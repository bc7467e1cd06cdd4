"""Chapter 6's recorded experiments: how a Transformer is trained, and against what.

- ``warmup`` (6.2): a six-layer Transformer (6 + 6 layers, d_model 64) on string reversal, post-LN
  or pre-LN, at a low constant rate (2e-3), a high constant rate (1e-2), the high rate reached
  after a warm-up of 50 steps and then kept, and the paper's schedule (the same warm-up, then a
  decay as step^-0.5); the training loss every 10 steps and the held-out exact match after every
  pass of 100 steps.
- ``warmup_decay_only`` (6.2): the same models, measures and seeds with the paper's decay from the
  high rate but no warm-up (1e-2 for the first 50 steps, then the same step^-0.5 decay).
- :func:`first_steps` (6.2's optional page): one seed of that model over its first steps, measured
  inside: gradients, Adam's state, and where the output stops depending on the input.
- ``label_smoothing`` (6.2): a two-layer pre-LN Transformer with and without label smoothing of
  0.1; its confidence, accuracy and perplexity on the held-out strings.
- ``transformer_dates`` (6.3): Chapter 2's Bahdanau model and a small pre-LN Transformer on the
  same 10 000 dates and batches, and the Transformer with the settings a skeptic would try
  instead (one change at a time); validation exact match after every pass.

Every seed trains on the same data; the seed draws the initial weights and the batch order.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from attnbook import data, tasks
from attnbook.bahdanau import BahdanauSeq2Seq
from attnbook.decoding import beam_search
from attnbook.records import Experiment, check_arm, register
from attnbook.training import evaluate, fit, warmup_schedule
from attnbook.transformer import Transformer

__all__ = [
    "Task",
    "reversal_data",
    "dates_data",
    "small_transformer",
    "paper_adam",
    "WARMUP_ARMS",
    "DECAY_ONLY_ARMS",
    "FIRST_STEP_ARMS",
    "LOSS_WINDOW",
    "warmup_training",
    "AdamStep",
    "FirstSteps",
    "first_steps",
    "loss_windows",
    "warmup_run",
    "confidence",
    "smoothing_run",
    "DATES_ARMS",
    "dates_model",
    "dates_run",
    "beam_run",
]


class Task(NamedTuple):
    """Training and held-out examples with their vocabularies."""

    train: list
    test: list
    src_vocab: data.Vocab
    tgt_vocab: data.Vocab


@functools.lru_cache(maxsize=1)
def reversal_data() -> Task:
    """6.2's task: reversing strings of 3 to 12 letters, 3 200 to train on, 500 held out."""
    splits = tasks.sequence_splits(
        tasks.reversal_task, n_train=3200, n_valid=0, n_test=500, seed=0, min_length=3, max_length=12
    )
    return Task(splits.train, splits.test, *data.build_vocabs(splits.train + splits.test))


@functools.lru_cache(maxsize=1)
def dates_data() -> Task:
    """6.3's task: Chapter 2's dates, 10 000 to train on; ``test`` holds the 1 000 validation dates."""
    splits = tasks.date_splits(n_train=10_000, n_valid=1_000, n_test=1_000, seed=0)
    return Task(splits.train, splits.valid, *data.build_vocabs(splits.train + splits.valid + splits.test))


def small_transformer(task: Task, layers: int, norm_first: bool) -> Transformer:
    """The chapter's Transformer: ``layers`` encoder and decoder layers, d_model 64, 4 heads,
    d_ff 128, no dropout (seed torch first)."""
    return Transformer(
        len(task.src_vocab),
        len(task.tgt_vocab),
        d_model=64,
        num_heads=4,
        num_encoder_layers=layers,
        num_decoder_layers=layers,
        d_ff=128,
        dropout=0.0,
        norm_first=norm_first,
    )


def paper_adam(model: nn.Module, peak: float, schedule: str, warmup: int):
    """Adam with the paper's betas and eps, and a learning-rate schedule that reaches ``peak``:

    - ``"constant"``: ``peak`` from the first step;
    - ``"warm-up"``: rises linearly to ``peak`` over ``warmup`` steps, then stays;
    - ``"paper"``: rises the same way, then falls as step^-0.5 (:func:`warmup_schedule`);
    - ``"decay"``: the paper's schedule without its warm-up: ``peak`` for ``warmup`` steps,
      then the same fall, ``peak · (warmup / step)^0.5``;
    - ``"small start"``: ``peak / warmup`` for 5 steps, then ``peak``;
    - :data:`HELD_STEPS` (``"one big step"``, ...): ``peak`` for the first K steps, then a fifth of it.

    Returns (optimizer, scheduler or None).
    """
    if schedule == "paper":
        optimizer = torch.optim.Adam(model.parameters(), lr=peak * math.sqrt(64 * warmup), betas=(0.9, 0.98), eps=1e-9)
        return optimizer, warmup_schedule(optimizer, 64, warmup)
    optimizer = torch.optim.Adam(model.parameters(), lr=peak, betas=(0.9, 0.98), eps=1e-9)
    if schedule == "constant":
        return optimizer, None
    if schedule == "warm-up":
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: min(1.0, (done + 1) / warmup))
    if schedule == "decay":
        return optimizer, torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda done: min(1.0, math.sqrt(warmup / (done + 1)))
        )
    if schedule == "small start":  # the warm-up's first rate, peak / warmup, for 5 steps; then peak
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1 / warmup if done < 5 else 1.0)
    if schedule in HELD_STEPS:  # peak for the first K steps; then a fifth of it
        held = HELD_STEPS[schedule]
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1.0 if done < held else 0.2)
    raise ValueError(
        "schedule must be 'constant', 'warm-up', 'paper', 'decay', 'small start', "
        f"{', '.join(repr(name) for name in HELD_STEPS)}, got {schedule!r}"
    )


#: Schedules that hold the peak for the first K steps, then drop to a fifth of it (the control's rate).
HELD_STEPS = {"one big step": 1, "5 big steps": 5, "20 big steps": 20}


#: The warm-up grid's arms: (pre-LN?, peak rate, schedule); warm-ups are 50 steps.
WARMUP_ARMS = {
    "post-LN, 2e-3": (False, 2e-3, "constant"),
    "post-LN, 1e-2": (False, 1e-2, "constant"),
    "post-LN, warm-up to 1e-2": (False, 1e-2, "warm-up"),
    "post-LN, paper's schedule": (False, 1e-2, "paper"),
    "pre-LN, 2e-3": (True, 2e-3, "constant"),
    "pre-LN, 1e-2": (True, 1e-2, "constant"),
    "pre-LN, warm-up to 1e-2": (True, 1e-2, "warm-up"),
    "pre-LN, paper's schedule": (True, 1e-2, "paper"),
}

#: The ``warmup_decay_only`` record's arms: the paper's decay from 1e-2 without the warm-up.
DECAY_ONLY_ARMS = {
    "post-LN, decay only": (False, 1e-2, "decay"),
    "pre-LN, decay only": (True, 1e-2, "decay"),
}

#: The ``warmup_first_steps`` record's arms: is it Adam's first step at the full rate that starts post-LN's
#: collapse? Five steps at the warm-up's first rate (2e-4) and then 1e-2; or one step at 1e-2 and then 2e-3.
FIRST_STEP_ARMS = {
    "post-LN, 5 steps at 2e-4, then 1e-2": (False, 1e-2, "small start"),
    "post-LN, 1 step at 1e-2, then 2e-3": (False, 1e-2, "one big step"),
}

#: The ``warmup_held_steps`` record's arms: between one step at 1e-2 (``warmup_first_steps``) and the whole
#: run, how many steps at the high rate does post-LN survive? 1e-2 for 5 or 20 steps, then 2e-3.
HELD_STEP_ARMS = {
    "post-LN, 5 steps at 1e-2, then 2e-3": (False, 1e-2, "5 big steps"),
    "post-LN, 20 steps at 1e-2, then 2e-3": (False, 1e-2, "20 big steps"),
}

#: The warm-up record's loss measures average this many steps: ``loss_10`` is steps 1-10.
LOSS_WINDOW = 10


def warmup_training(arm: str, seed: int, passes: int = 4, warmup: int = 50, layers: int = 6):
    """Train one of :data:`WARMUP_ARMS`, :data:`DECAY_ONLY_ARMS`, :data:`FIRST_STEP_ARMS` or
    :data:`HELD_STEP_ARMS` from ``seed`` on 6.2's reversal task: batches of 32 (100 steps a pass), the paper's
    Adam, no clipping, evaluated on the 500 held-out strings after every pass. Returns (model,
    :class:`~attnbook.training.History`; its ``step_losses`` hold every step's training loss)."""
    arms = {**WARMUP_ARMS, **DECAY_ONLY_ARMS, **FIRST_STEP_ARMS, **HELD_STEP_ARMS}
    check_arm(arm, arms)
    norm_first, peak, schedule = arms[arm]
    task = reversal_data()
    torch.manual_seed(seed)
    model = small_transformer(task, layers, norm_first)
    optimizer, scheduler = paper_adam(model, peak, schedule, warmup)
    train = data.Batches(task.train, task.src_vocab, task.tgt_vocab, batch_size=32, shuffle=True, seed=seed)
    test = data.Batches(task.test, task.src_vocab, task.tgt_vocab, batch_size=500)
    recipe = dict(optimizer=optimizer, scheduler=scheduler, clip=None, progress=False)
    return model, fit(model, train, test, epochs=passes, **recipe)


def loss_windows(step_losses: list[float]) -> dict[str, float]:
    """``loss_<k>``: the mean training loss of steps k-9..k, for k = 10, 20, ..."""
    return {
        f"loss_{end}": sum(step_losses[end - LOSS_WINDOW : end]) / LOSS_WINDOW
        for end in range(LOSS_WINDOW, len(step_losses) + 1, LOSS_WINDOW)
    }


def warmup_run(arm: str, seed: int, passes: int = 4, warmup: int = 50, layers: int = 6) -> dict:
    """:func:`warmup_training`'s measures: :func:`loss_windows` of its training loss and, one
    value per pass, ``exact_match`` (greedy) and ``teacher_forced_accuracy`` on the held-out
    strings."""
    _, history = warmup_training(arm, seed, passes, warmup, layers)
    measures = loss_windows(history.step_losses)
    measures.update(exact_match=history["exact_match"], teacher_forced_accuracy=history["teacher_forced_accuracy"])
    return measures


register(
    Experiment(
        name="warmup",
        run=warmup_run,
        arms=tuple(WARMUP_ARMS),
        seeds=tuple(range(8)),
        settings=dict(passes=4, warmup=50, layers=6),
        replay=dict(arm="post-LN, 1e-2", seed=0),  # all 4 passes: the loss windows name their steps
        chapter="chapters/06_transformer/02_training.ipynb",
        description="A Transformer of 6 encoder and 6 decoder layers (d_model 64, 4 heads, d_ff 128, no dropout) "
        "on reversing strings of 3 to 12 letters (3 200 to train on, batches of 32, 100 steps a pass), post-LN or "
        "pre-LN, with the paper's Adam and no clipping, at a constant 2e-3, a constant 1e-2, 1e-2 reached after a "
        "warm-up of 50 steps and kept, and the paper's schedule (the same warm-up, then a decay as step^-0.5), "
        "4 passes: the training loss averaged over every 10 steps, and exact match and teacher-forced accuracy on "
        "500 held-out strings after every pass.",
    )
)

register(
    Experiment(
        name="warmup_decay_only",
        run=warmup_run,
        arms=tuple(DECAY_ONLY_ARMS),
        seeds=tuple(range(8)),
        settings=dict(passes=4, warmup=50, layers=6),
        replay=dict(arm="post-LN, decay only", seed=0),  # all 4 passes, as for ``warmup``
        chapter="chapters/06_transformer/02_training.ipynb",
        description="The ``warmup`` record's Transformer, task, Adam, seeds and measures, post-LN and pre-LN, with "
        "the paper's decay from 1e-2 but no warm-up: 1e-2 for the first 50 steps, then 1e-2 * (50 / step)^0.5, "
        "4 passes (the missing half of the paper's schedule: the ``warmup`` record has the warm-up without the "
        "decay).",
    )
)

register(
    Experiment(
        name="warmup_first_steps",
        run=warmup_run,
        arms=tuple(FIRST_STEP_ARMS),
        seeds=tuple(range(8)),
        settings=dict(passes=4, warmup=50, layers=6),
        replay=dict(arm="post-LN, 1 step at 1e-2, then 2e-3", seed=0),  # every pass
        chapter="chapters/06_transformer/02_training.ipynb",
        description="The ``warmup`` record's post-LN Transformer, task, Adam, seeds and measures, 4 passes "
        "(as the grid): five steps at 2e-4 (the warm-up's first rate) and then a constant 1e-2; and one step "
        "at 1e-2, then a constant 2e-3 (the control's rate). Does Adam's first step at the full rate start "
        "post-LN's collapse, or the high rate held over the first steps?",
    )
)


register(
    Experiment(
        name="warmup_held_steps",
        run=warmup_run,
        arms=tuple(HELD_STEP_ARMS),
        seeds=tuple(range(8)),
        settings=dict(passes=4, warmup=50, layers=6),
        replay=dict(arm="post-LN, 5 steps at 1e-2, then 2e-3", seed=0),  # every pass
        chapter="chapters/06_transformer/02_training.ipynb",
        description="The ``warmup`` record's post-LN Transformer, task, Adam, seeds and measures, 4 passes "
        "(as the grid): 1e-2 for the first 5 or the first 20 steps, then a constant 2e-3 (the control's rate). "
        "Between one step at the high rate (``warmup_first_steps``, which post-LN survives) and the whole run "
        "(``warmup``, which it does not): does holding the high rate for a few steps near the start stop post-LN?",
    )
)


class AdamStep(NamedTuple):
    """One optimiser step on the lowest decoder layer's weights: medians over its n weights, and the
    per-weight values.

    Attributes:
        weight: the median |weight| before the step.
        grad: the median |gradient|.
        move: the median |move|.
        root_v: the median sqrt(v_hat): Adam's divisor, less eps.
        below_eps: ``(n,)`` bool: the weights whose sqrt(v_hat) is below eps = 1e-9.
        grads: ``(n,)``: each weight's gradient.
        moves: ``(n,)``: each weight's move.
    """

    weight: float
    grad: float
    move: float
    root_v: float
    below_eps: torch.Tensor
    grads: torch.Tensor
    moves: torch.Tensor


class FirstSteps(NamedTuple):
    """What :func:`first_steps` measured in one run. *The lowest layer* is the lowest decoder layer (the
    one farthest from the output); *watched* means before step 1 and after steps 1, 5 and 20.

    Attributes:
        losses: every step: the training loss.
        grad_norms: every step: the norm of the lowest layer's gradient.
        top_over_lowest: step 1: the top decoder layer's gradient norm over the lowest's.
        logit_grads: every step: the norm of dL/dz, z the logits.
        h1_grads: every step: the norm of dL/dh_1, h_1 the lowest layer's output.
        spreads: watched: the prediction's spread (0: one prediction everywhere).
        varying: watched: the varying fraction of the encoder's output, then each decoder layer's.
        sums: watched: each residual sum's (f's shared, x's varying, x's shared).
        adam: steps 1, 2, 20 and the last: an :class:`AdamStep`.
        travel: steps 1, 5, 20 and the last: the median distance of the weights from their start.
        top_travel: the same for the top decoder layer's weights (the one nearest the output).
        moved_5_20: the share of weights that moved by more than the peak rate from step 5 to step 20,
            of the lowest layer, the top layer and the whole model (``"lowest"``, ``"top"``, ``"all"``).
        ln_gains: steps 1, 5 and 20: the product, over the LayerNorms on the residual path above the
            lowest layer (post-LN: the 15 of decoder layers 2-6; pre-LN: the final one), of each one's
            backward gain, the root mean square of its weight over the size of its input (the input's
            standard deviation), a geometric mean over the batch's real target positions.
        frozen_grads: steps 6 to 20: the lowest layer's gradient norm on that step's batch with the
            weights as they were after step 5 (the change since then: the weights', not the batch's).
        key_biases: ``(n,)`` bool: which of the lowest layer's weights are attention key biases.
        bias_moved: after step 5: the largest distance of any bias vector from its start.
    """

    losses: list[float]
    grad_norms: list[float]
    top_over_lowest: float
    logit_grads: list[float]
    h1_grads: list[float]
    spreads: list[float]
    varying: list[list[float]]
    sums: list[list[tuple[float, float, float]]]
    adam: dict[int, AdamStep]
    travel: dict[int, float]
    top_travel: dict[int, float]
    moved_5_20: dict[str, float]
    ln_gains: dict[int, float]
    frozen_grads: dict[int, float]
    key_biases: torch.Tensor
    bias_moved: float


def _varying_share(x: torch.Tensor, where: torch.Tensor) -> float:
    """The share of each vector's size that varies across the positions ``where``, each vector scaled
    to mean square 1 first: at most 1; 0 if every position gets the same vector."""
    x = x[where]  # (M, d)
    x = x / x.pow(2).mean(dim=-1, keepdim=True).sqrt()
    return float(x.var(dim=0).mean())


def _shared_and_varying(x: torch.Tensor, f: torch.Tensor, where: torch.Tensor) -> tuple[float, float, float]:
    """In a residual sum x + f: the size of f's part shared by every position (its mean over the
    positions ``where``), the rms size of what varies in x, and the size of x's own shared part."""
    x, f = x[where], f[where]  # (M, d) each
    varying = (x - x.mean(dim=0)).pow(2).sum(dim=-1).mean().sqrt()
    return float(f.mean(dim=0).norm()), float(varying), float(x.mean(dim=0).norm())


def _probe(model: Transformer, batch: data.Batch, symbols: list[int]) -> tuple:
    """Run ``model`` on ``batch``, teacher-forced, and return the prediction's spread (the largest sd
    of a symbol's probability across the real target positions), the varying fraction of the
    encoder's output and of each decoder layer's, and the parts of each residual sum (2 per encoder
    layer, then 3 per decoder layer)."""
    real = batch.tgt_out != 0  # (B, T): the real target positions
    outputs = []  # the encoder's output (B, S, d), then each decoder layer's (B, T, d)
    xs, fs = [], []  # each sub-layer's residual input x and output f, in order

    def keep(module, inputs, out):  # a decoder layer returns (x, weights, weights)
        outputs.append(out[0] if isinstance(out, tuple) else out)

    def keep_x(module, inputs):  # post-LN: the sub-layer's input; pre-LN: its LayerNorm's
        xs.append(inputs[0])

    def keep_f(module, inputs, out):  # attention returns (output, weights)
        fs.append(out[0] if isinstance(out, tuple) else out)

    hooks = [layer.register_forward_hook(keep) for layer in [model.encoder_norm, *model.decoder_layers]]
    for layer in [*model.encoder_layers, *model.decoder_layers]:
        subs = [getattr(layer, name) for name in ("self_attn", "cross_attn", "feed_forward") if hasattr(layer, name)]
        norms = [layer.norm1, layer.norm2, getattr(layer, "norm3", None)][: len(subs)]
        for sub, norm in zip(subs, norms):
            hooks.append((norm if model.norm_first else sub).register_forward_pre_hook(keep_x))
            hooks.append(sub.register_forward_hook(keep_f))
    with torch.no_grad():
        probabilities = model(batch.src, batch.tgt_in).logits.softmax(dim=-1)  # (B, T, V)
    for hook in hooks:
        hook.remove()
    source = batch.src != 0  # (B, S): the real source positions
    shares = [_varying_share(x, w) for x, w in zip(outputs, [source] + [real] * len(model.decoder_layers))]
    n_encoder = 2 * len(model.encoder_layers)  # 2 sums per encoder layer, then 3 per decoder layer
    sums = [_shared_and_varying(x, f, source if k < n_encoder else real) for k, (x, f) in enumerate(zip(xs, fs))]
    spread = float(probabilities[real][:, symbols].std(dim=0).max())  # over (M, symbols)
    return spread, shares, sums


def first_steps(
    norm_first: bool,
    schedule: str,
    steps: int = 20,
    peak: float = 1e-2,
    warmup: int = 50,
    layers: int = 6,
    seed: int = 0,
    forget_momentum_after: int | None = None,
) -> FirstSteps:
    """Train the ``warmup`` record's model (:func:`small_transformer`, post-LN or pre-LN) from ``seed``
    for ``steps`` steps (at least 5) with :func:`paper_adam` (``schedule`` to ``peak``), as
    :func:`warmup_training` does, and measure the first steps: the gradient at the lowest decoder
    layer and the chain rule's factors above it, Adam's state on that layer, and, on the held-out
    strings, the prediction's spread, where each layer's output stops varying across positions, and
    each residual sum's shared and varying parts. Returns a :class:`FirstSteps`.

    ``forget_momentum_after``: after that step ``k``, set Adam's first moment (``exp_avg``) of every
    weight to 0 once, keeping its second moment: the moves after it hold no echo of the steps before.
    The first moment's bias correction restarts with it (at step ``t > k``, ``m / (1 - b1^(t - k))``
    instead of ``m / (1 - b1^t)``, done by scaling that step's rate), so the new gradients count in
    full, as in a fresh Adam's first steps; the second moment keeps its history and its correction."""
    if steps < 5:
        raise ValueError(f"steps must be at least 5 (the biases are measured after step 5), got {steps}")
    task = reversal_data()
    src_vocab, tgt_vocab = task.src_vocab, task.tgt_vocab
    held_out = data.make_batch(task.test, src_vocab, tgt_vocab)
    specials = ("<pad>", "<bos>", "<unk>")  # never the right answer
    symbols = [i for i, symbol in enumerate(tgt_vocab.id_to_symbol) if symbol not in specials]
    torch.manual_seed(seed)
    model = small_transformer(task, layers, norm_first)
    optimizer, scheduler = paper_adam(model, peak, schedule, warmup)
    train = data.Batches(task.train, src_vocab, tgt_vocab, batch_size=32, shuffle=True, seed=seed)
    lowest, top = model.decoder_layers[0], model.decoder_layers[-1]

    def layer_grad(layer):  # all of a layer's parameter gradients, as one vector
        return torch.cat([p.grad.flatten() for p in layer.parameters()])

    def weights(layer=lowest):  # a layer's weights, as one vector
        return nn.utils.parameters_to_vector(layer.parameters()).detach()

    start, top_start = weights(), weights(top)  # (n,), (n,)
    at_5, moved_5_20 = {}, {}  # the weights after step 5; the shares that moved by 20
    biases = {name: p.detach().clone() for name, p in model.named_parameters() if "bias" in name}
    spread, shares, sums = _probe(model, held_out, symbols)
    spreads, varying, parts = [spread], [shares], [sums]
    losses, norms, logit_grads, h1_grads, adam, travel, top_travel = [], [], [], [], {}, {}, {}
    h1 = []  # this step's h_1, (B, T, d)

    def keep_h1(module, inputs, out):  # the lowest layer's output, h_1
        if torch.is_grad_enabled():  # training steps only, not _probe's
            out[0].retain_grad()
            h1[:] = [out[0]]

    h1_hook = lowest.register_forward_hook(keep_h1)
    gains = {}  # this step's LayerNorms above h_1: name -> (B, T) gains

    def keep_gain(name):
        def hook(norm, inputs):
            if torch.is_grad_enabled():  # training steps only, not _probe's
                size = (inputs[0].detach().var(dim=-1, unbiased=False) + norm.eps).sqrt()  # (B, T)
                gains[name] = norm.weight.detach().pow(2).mean().sqrt() / size

        return hook

    above = [  # the LayerNorms on the residual path above h_1
        (f"{i}.{name}", getattr(layer, name))
        for i, layer in enumerate(model.decoder_layers)
        if i > 0
        for name in ("norm1", "norm2", "norm3")
    ]
    if norm_first:  # pre-LN: only the final one; the others sit on the sub-layers' branches
        above = [("decoder_norm", model.decoder_norm)]
    gain_hooks = [norm.register_forward_pre_hook(keep_gain(name)) for name, norm in above]
    ln_gains, frozen, frozen_grads = {}, None, {}
    for step, batch in zip(range(1, steps + 1), train):
        if frozen is not None and step <= 20:  # the weights after step 5, on this batch
            frozen.zero_grad()
            out = frozen(batch.src, batch.tgt_in).logits  # (B, T, V)
            F.cross_entropy(out.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0).backward()
            frozen_grads[step] = float(layer_grad(frozen.decoder_layers[0]).norm())
        logits = model(batch.src, batch.tgt_in).logits  # (B, T, V)
        logits.retain_grad()  # the first factor of the chain rule
        loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        losses.append(loss.item())
        grad = layer_grad(lowest)  # (n,)
        norms.append(float(grad.norm()))
        logit_grads.append(float(logits.grad.norm()))
        h1_grads.append(float(h1[0].grad.norm()))  # the first two factors' product
        if step == 1:
            top_over_lowest = float(layer_grad(top).norm() / grad.norm())
        if step in (1, 5, 20):  # the product of the gains, a geometric mean over real positions
            real = batch.tgt_out != 0  # (B, T)
            ln_gains[step] = math.exp(sum(float(g[real].log().mean()) for g in gains.values()))
        before = weights()  # (n,)
        rates = [group["lr"] for group in optimizer.param_groups]
        if forget_momentum_after is not None and step > forget_momentum_after:
            beta1 = optimizer.param_groups[0]["betas"][0]  # m's correction restarted at k
            restart = (1 - beta1**step) / (1 - beta1 ** (step - forget_momentum_after))
            for group in optimizer.param_groups:
                group["lr"] *= restart
        optimizer.step()
        for group, rate in zip(optimizer.param_groups, rates):
            group["lr"] = rate
        after = weights()  # (n,)
        if step in (1, 5, 20, steps):
            travel[step] = float((after - start).abs().median())
            top_travel[step] = float((weights(top) - top_start).abs().median())
        if step in (5, 20):
            now = {"lowest": after, "top": weights(top), "all": weights(model)}
            if step == 5:
                at_5 = now
            else:
                moved_5_20 = {key: float(((now[key] - at_5[key]).abs() > peak).float().mean()) for key in now}
        if step in (1, 2, 20, steps):
            beta2 = optimizer.param_groups[0]["betas"][1]
            v = torch.cat([optimizer.state[p]["exp_avg_sq"].flatten() for p in lowest.parameters()])  # (n,)
            root_v = (v / (1 - beta2**step)).sqrt()  # (n,)
            move = after - before  # (n,)
            adam[step] = AdamStep(
                weight=float(before.abs().median()),
                grad=float(grad.abs().median()),
                move=float(move.abs().median()),
                root_v=float(root_v.median()),
                below_eps=root_v < 1e-9,
                grads=grad,
                moves=move,
            )
        if scheduler is not None:  # None: a constant rate
            scheduler.step()
        if step == forget_momentum_after:  # the echo removed: m restarts from the new gradients
            for state in optimizer.state.values():
                state["exp_avg"].zero_()
        if step == 5:
            with torch.random.fork_rng():  # a copy; the run's random state untouched
                frozen = small_transformer(task, layers, norm_first)
            frozen.load_state_dict(model.state_dict())
            bias_moved = max(
                float((p.detach() - biases[name]).norm()) for name, p in model.named_parameters() if name in biases
            )
        if step in (1, 5, 20):
            spread, shares, sums = _probe(model, held_out, symbols)
            spreads.append(spread)
            varying.append(shares)
            parts.append(sums)
    h1_hook.remove()
    for hook in gain_hooks:
        hook.remove()
    # the attention key biases: each adds one number to every key's score, which the softmax ignores
    keys = torch.cat([torch.full((p.numel(),), "k_proj.bias" in name) for name, p in lowest.named_parameters()])
    return FirstSteps(
        losses=losses,
        grad_norms=norms,
        top_over_lowest=top_over_lowest,
        logit_grads=logit_grads,
        h1_grads=h1_grads,
        spreads=spreads,
        varying=varying,
        sums=parts,
        adam=adam,
        travel=travel,
        top_travel=top_travel,
        moved_5_20=moved_5_20,
        ln_gains=ln_gains,
        frozen_grads=frozen_grads,
        key_biases=keys,
        bias_moved=bias_moved,
    )


#: The arms of ``first_steps_seeds``: (norm_first, forget_momentum_after), 100 steps at a constant 1e-2.
FIRST_STEPS_ARMS = {
    "post-LN, 1e-2": (False, None),
    "pre-LN, 1e-2": (True, None),
    "post-LN, 1e-2, echo removed after step 5": (False, 5),
}


def untrained_spread(norm_first: bool, seed: int, layers: int = 6) -> float:
    """The prediction's spread on the held-out strings before any step: the model that
    :func:`first_steps` builds from ``seed`` (its ``spreads[0]``), without training it."""
    task = reversal_data()
    held_out = data.make_batch(task.test, task.src_vocab, task.tgt_vocab)
    specials = ("<pad>", "<bos>", "<unk>")  # never the right answer, as in first_steps
    symbols = [i for i, symbol in enumerate(task.tgt_vocab.id_to_symbol) if symbol not in specials]
    torch.manual_seed(seed)
    model = small_transformer(task, layers, norm_first)
    return _probe(model, held_out, symbols)[0]


def first_steps_run(arm: str, seed: int) -> dict:
    """6.2b's probe (:func:`first_steps`, a constant 1e-2) from ``seed``, summed up in numbers.

    Returns, after step 5: the prediction's ``spread_5``; the falls of the lowest decoder layer's
    gradient and of dL/dh_1 from step 1 (``grad_fall_5``, ``h1_fall_5``) and dL/dz's size against
    step 1's (``logit_grad_5``); the medians over the 30 residual sums (the mean of the middle two)
    of x's shared over varying part (``ratio_5``), of f's shared part (``f_shared_5``, and
    ``f_shared_0`` before step 1) and of x's varying part against its start (``x_varying_kept_5``).
    Then the lowest layer's gradient at steps 5 and 20, its median over steps 40-80 and at step 100, and
    the mean loss over steps 91-100; and that layer's median move at step 20 (``move_20``) and its
    weights' median distance from their start after steps 5 and 20 (``travel_5``, ``travel_20``), and
    the top decoder layer's (``top_travel_5``, ``top_travel_20``); the share of the lowest layer's, the
    top layer's and the whole model's weights that moved by more than the rate from step 5 to step 20
    (``moved_lowest``, ``moved_top``, ``moved_all``); how far the product of the gains of the LayerNorms
    on the residual path above the lowest layer (post-LN's 15, pre-LN's final one) fell from step 1 to
    step 5 (``ln_gain_fall_5``); and the lowest layer's gradient at step 6, the first after step 5's
    move (``grad_6``), and on step 20's batch with the weights as they were after step 5
    (``frozen_grad_20``), and how far that frozen gradient ranged over the batches of steps 6-20
    (``frozen_grad_range``, its largest over its smallest).
    """
    check_arm(arm, FIRST_STEPS_ARMS)
    norm_first, forget = FIRST_STEPS_ARMS[arm]
    run = first_steps(norm_first, "constant", 100, seed=seed, forget_momentum_after=forget)
    parts = torch.tensor(run.sums)  # (4, 30, 3): before, after steps 1, 5, 20; f's shared, x's varying, x's shared
    median = lambda values: float(values.quantile(0.5))  # noqa: E731 - over the 30 sums
    grads = run.grad_norms
    return dict(
        spread_5=run.spreads[2],
        grad_fall_5=grads[0] / grads[4],
        h1_fall_5=run.h1_grads[0] / run.h1_grads[4],
        logit_grad_5=run.logit_grads[4] / run.logit_grads[0],
        ratio_5=median(parts[2, :, 2] / parts[2, :, 1]),
        f_shared_0=median(parts[0, :, 0]),
        f_shared_5=median(parts[2, :, 0]),
        x_varying_kept_5=median(parts[2, :, 1] / parts[0, :, 1]),
        grad_5=grads[4],
        grad_20=grads[19],
        grad_40_80=float(torch.tensor(grads[39:80]).median()),
        grad_100=grads[99],
        loss_91_100=sum(run.losses[90:100]) / 10,
        move_20=run.adam[20].move,
        travel_5=run.travel[5],
        travel_20=run.travel[20],
        top_travel_5=run.top_travel[5],
        top_travel_20=run.top_travel[20],
        moved_lowest=run.moved_5_20["lowest"],
        moved_top=run.moved_5_20["top"],
        moved_all=run.moved_5_20["all"],
        ln_gain_fall_5=run.ln_gains[1] / run.ln_gains[5],
        grad_6=grads[5],
        frozen_grad_20=run.frozen_grads[20],
        frozen_grad_range=max(run.frozen_grads.values()) / min(run.frozen_grads.values()),
    )


register(
    Experiment(
        name="first_steps_seeds",
        run=first_steps_run,
        arms=tuple(FIRST_STEPS_ARMS),
        seeds=tuple(range(8)),
        settings={},
        replay=dict(arm="pre-LN, 1e-2", seed=0),
        chapter="chapters/06_transformer/02b_first_steps.ipynb",
        description="6.2b's first-steps probe over the warmup record's 8 seeds, 100 steps at a constant 1e-2: "
        "post-LN and pre-LN, and post-LN with Adam's first moment set to 0 once after step 5 and its bias "
        "correction restarted (the echo of the first steps removed, the second moment kept): the spread, the "
        "gradient's fall, dL/dz and dL/dh_1, the residual sums' medians after step 5, the gradient and "
        "loss later on, the lowest and top decoder layers' moves and distances from their start, and the "
        "share of weights that moved by more than the rate from step 5 to step 20, the fall of the "
        "product of the gains of the LayerNorms on the residual path above the lowest decoder layer, and "
        "the gradient at step 6 and, with the weights as they were after step 5, on the batches of steps "
        "6 to 20.",
    )
)


def confidence(model: nn.Module, examples: list, src_vocab: data.Vocab, tgt_vocab: data.Vocab) -> dict:
    """A model's confidence on ``examples``, teacher-forced, over the real target positions.

    Returns ``accuracy`` (token accuracy); ``right`` and ``wrong``, the mean probability of the
    predicted token when it is right and when it is wrong (nan if none is wrong); ``wrong_count``
    and ``tokens``; ``loss``, the cross-entropy without smoothing, and ``perplexity``, its exp.
    """
    batch = data.make_batch(examples, src_vocab, tgt_vocab)
    real = batch.tgt_out != 0  # (N, T): the real target positions
    model.eval()
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in).logits[real]  # (M, V)
    targets = batch.tgt_out[real]  # (M,)
    confident, predicted = logits.softmax(dim=-1).max(dim=-1)  # (M,), (M,)
    right = predicted == targets
    loss = F.cross_entropy(logits, targets).item()
    return dict(
        accuracy=right.float().mean().item(),
        right=confident[right].mean().item(),
        wrong=confident[~right].mean().item() if (~right).any() else float("nan"),
        wrong_count=int((~right).sum()),
        tokens=len(targets),
        loss=loss,
        perplexity=math.exp(loss),
    )


def smoothing_run(arm: str, seed: int, passes: int = 8) -> dict:
    """Train 6.2's two-layer pre-LN Transformer from ``seed`` with label smoothing ``arm`` ("0.0"
    or "0.1"), the paper's schedule peaking at 3e-3 after 100 steps, no clipping; after every pass,
    its :func:`confidence` on the 500 held-out strings (with ``wrong_sum``, the summed confidence
    of the wrong tokens, instead of their mean ``wrong``, which a model with no wrong token lacks)
    and the ``exact_match`` of greedy decoding (each measure a list, one value per pass)."""
    if arm not in ("0.0", "0.1"):
        raise ValueError(f"arm must be the label smoothing '0.0' or '0.1', got {arm!r}")
    task = reversal_data()
    torch.manual_seed(seed)
    model = small_transformer(task, 2, norm_first=True)
    optimizer, scheduler = paper_adam(model, 3e-3, "paper", 100)
    train = data.Batches(task.train, task.src_vocab, task.tgt_vocab, batch_size=32, shuffle=True, seed=seed)
    test = data.Batches(task.test, task.src_vocab, task.tgt_vocab, batch_size=500)
    recipe = dict(optimizer=optimizer, scheduler=scheduler, clip=None, label_smoothing=float(arm), progress=False)
    curves: dict[str, list] = {}
    for _ in range(passes):  # the same training as fit(..., epochs=passes), measured between passes
        fit(model, train, epochs=1, **recipe)
        found = confidence(model, task.test, task.src_vocab, task.tgt_vocab)
        # a mean over no wrong token is undefined: record the sum (wrong = wrong_sum / wrong_count)
        wrong = found.pop("wrong")
        found["wrong_sum"] = wrong * found["wrong_count"] if found["wrong_count"] else 0.0
        found["exact_match"] = evaluate(model, test)["exact_match"]
        for name, value in found.items():
            curves.setdefault(name, []).append(value)
    return curves


register(
    Experiment(
        name="label_smoothing",
        run=smoothing_run,
        arms=("0.0", "0.1"),
        seeds=tuple(range(10)),
        settings=dict(passes=8),
        replay=dict(arm="0.1", seed=0, passes=1),
        chapter="chapters/06_transformer/02_training.ipynb",
        description="A pre-LN Transformer of 2 + 2 layers (d_model 64) on reversing strings of 3 to 12 letters, "
        "8 passes with the paper's Adam and schedule (peak 3e-3 after 100 steps), without and with label "
        "smoothing of 0.1: after every pass, on 500 held-out strings, teacher-forced, token accuracy, the mean "
        "probability of the predicted token when right and when wrong, the cross-entropy without smoothing and "
        "its perplexity; exact match of greedy decoding.",
    )
)


#: 6.3's models: Bahdanau's (Chapter 2's recipe), then the Transformer as the chapter trains it
#: (layers, batch size, pre-LN?, schedule, peak rate, warm-up steps) and with one change at a time
#: (the settings of ``benchmarks/transformer_dates.py``; the record runs the first two).
DATES_ARMS = {
    "Bahdanau": None,
    "Transformer": (2, 32, True, "paper", 3e-3, 100),
    "one layer": (1, 32, True, "paper", 3e-3, 100),
    "batches of 128": (2, 128, True, "paper", 3e-3, 100),
    "post-LN": (2, 32, False, "paper", 3e-3, 100),
    "no decay": (2, 32, True, "warm-up", 3e-3, 100),
    "peak 1e-3": (2, 32, True, "paper", 1e-3, 100),
    "peak 1e-2": (2, 32, True, "paper", 1e-2, 100),
    "warm-up 30": (2, 32, True, "paper", 3e-3, 30),
}


def dates_model(arm: str) -> nn.Module:
    """The model of a :data:`DATES_ARMS` arm, untrained (seed torch first)."""
    task = dates_data()
    if arm == "Bahdanau":
        return BahdanauSeq2Seq.build(
            len(task.src_vocab), len(task.tgt_vocab), embed_dim=32, hidden_size=64, attention_dim=64
        )
    layers, _, norm_first, *_ = DATES_ARMS[arm]
    return small_transformer(task, layers, norm_first)


def dates_run(arm: str, seed: int, passes: int = 3) -> dict:
    """Train a :data:`DATES_ARMS` arm from ``seed`` on the 10 000 dates; Bahdanau's model with
    Adam at 5e-3 and clipping at 1 (Chapter 2), the Transformers with the paper's Adam, their
    schedule and no clipping. Returns ``exact_match`` and ``valid_loss`` on the 1 000
    validation dates after every pass."""
    check_arm(arm, DATES_ARMS)
    task = dates_data()
    torch.manual_seed(seed)
    model = dates_model(arm)
    if arm == "Bahdanau":
        batch_size, clip = 32, 1.0
        optimizer, scheduler = torch.optim.Adam(model.parameters(), lr=5e-3, foreach=True), None
    else:
        _, batch_size, _, schedule, peak, warmup = DATES_ARMS[arm]
        (optimizer, scheduler), clip = paper_adam(model, peak, schedule, warmup), None
    train = data.Batches(task.train, task.src_vocab, task.tgt_vocab, batch_size=batch_size, shuffle=True, seed=seed)
    valid = data.Batches(task.test, task.src_vocab, task.tgt_vocab, batch_size=500)
    recipe = dict(optimizer=optimizer, scheduler=scheduler, clip=clip, progress=False)
    history = fit(model, train, valid, epochs=passes, **recipe)
    return dict(exact_match=history["exact_match"], valid_loss=history["valid_loss"])


register(
    Experiment(
        name="transformer_dates",
        run=dates_run,
        arms=("Bahdanau", "Transformer"),
        seeds=tuple(range(6)),
        settings=dict(passes=3),
        replay=dict(arm="Transformer", seed=0, passes=1),
        chapter="chapters/06_transformer/03_experiment.ipynb",
        description="Chapter 2's Bahdanau model (Adam at 5e-3, clipping at 1) and a pre-LN Transformer of 2 + 2 "
        "layers (d_model 64, the paper's Adam and schedule peaking at 3e-3 after 100 steps, no clipping) on the "
        "same 10 000 dates in batches of 32: validation exact match and loss after each of 3 passes.",
    )
)

register(
    Experiment(
        name="transformer_dates_longer",
        run=dates_run,
        arms=("Transformer",),
        seeds=tuple(range(6)),
        settings=dict(passes=8),
        replay=dict(arm="Transformer", seed=0, passes=1),
        chapter="chapters/06_transformer/03_experiment.ipynb",
        description="transformer_dates' Transformer (the same seeds, batches, schedule and model) trained on for 8 "
        "passes instead of 3 (its schedule does not depend on the length of the run, so the first 3 passes are the "
        "record's): validation exact match and loss after each pass.",
    )
)

register(
    Experiment(
        name="bahdanau_dates_longer",
        run=dates_run,
        arms=("Bahdanau",),
        seeds=tuple(range(6)),
        settings=dict(passes=8),
        replay=dict(arm="Bahdanau", seed=0, passes=1),
        chapter="chapters/06_transformer/03_experiment.ipynb",
        description="transformer_dates' Bahdanau model (the same seeds, batches, constant Adam rate and clipping) "
        "trained on for 8 passes instead of 3, to match transformer_dates_longer (the first 3 passes are the "
        "record's): validation exact match and loss after each pass.",
    )
)


def _beam_counts(model: nn.Module, batch: data.Batch, targets: list, beam_size: int) -> dict:
    """Decode ``batch`` with a beam; count the outputs that are wrong, and among them the search
    errors: those whose right answer the model scores above the output found."""
    decoded = beam_search(model, batch.src, max_len=12, beam_size=beam_size)
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in).logits  # (N, T, V)
    log_probs = logits.log_softmax(dim=-1).gather(2, batch.tgt_out.unsqueeze(2)).squeeze(2)
    right_answer = log_probs.masked_fill(~batch.tgt_mask, 0.0).sum(1)  # (N,)
    wrong = [i for i, (p, t) in enumerate(zip(decoded.tokens, targets)) if p != t]
    search = [i for i in wrong if right_answer[i] > decoded.scores[i]]
    return dict(wrong=wrong, search=search, log_prob=decoded.scores.mean().item())


def beam_run(arm: str, seed: int, passes: int = 2) -> dict:
    """6.4's experiment: train :data:`DATES_ARMS`' Transformer from ``seed`` as :func:`dates_run`
    does, and after each pass decode the 1 000 *test* dates (not the validation dates training
    reports on) with a beam of 1 and a beam of 4. Per pass: exact match, the wrong outputs and
    the search errors among them (see :func:`_beam_counts`) for each beam, the dates the beam of
    4 fixes (greedy wrong, the beam right) and breaks, and the mean log-probability found."""
    check_arm(arm, ("Transformer",))
    task = dates_data()
    test = tasks.date_splits(n_train=10_000, n_valid=1_000, n_test=1_000, seed=0).test
    batch = data.make_batch(test, task.src_vocab, task.tgt_vocab)
    targets = [task.tgt_vocab.encode(e.target) for e in test]
    torch.manual_seed(seed)
    model = dates_model(arm)
    _, batch_size, _, schedule, peak, warmup = DATES_ARMS[arm]
    optimizer, scheduler = paper_adam(model, peak, schedule, warmup)
    train = data.Batches(task.train, task.src_vocab, task.tgt_vocab, batch_size=batch_size, shuffle=True, seed=seed)
    valid = data.Batches(task.test, task.src_vocab, task.tgt_vocab, batch_size=500)
    recipe = dict(optimizer=optimizer, scheduler=scheduler, clip=None, progress=False)
    out: dict[str, list] = {}
    for _ in range(passes):
        fit(model, train, valid, epochs=1, **recipe)
        model.eval()
        one, four = (_beam_counts(model, batch, targets, k) for k in (1, 4))
        for k, counts in ((1, one), (4, four)):
            out.setdefault(f"exact_beam{k}", []).append(1 - len(counts["wrong"]) / len(test))
            out.setdefault(f"wrong_beam{k}", []).append(len(counts["wrong"]))
            out.setdefault(f"search_beam{k}", []).append(len(counts["search"]))
            out.setdefault(f"log_prob_beam{k}", []).append(counts["log_prob"])
        out.setdefault("fixed", []).append(len(set(one["wrong"]) - set(four["wrong"])))
        out.setdefault("broken", []).append(len(set(four["wrong"]) - set(one["wrong"])))
    return out


register(
    Experiment(
        name="transformer_beam",
        run=beam_run,
        arms=("Transformer",),
        seeds=tuple(range(8)),
        settings=dict(passes=2),
        replay=dict(arm="Transformer", seed=0, passes=1),
        chapter="chapters/06_transformer/04_decoding.ipynb",
        description="transformer_dates' Transformer (the same seeds, batches and recipe) after each of 2 passes, "
        "decoding the 1 000 test dates with a beam of 1 and a beam of 4 (no length penalty, at most 12 tokens): "
        "exact match, wrong outputs, search errors among them (the right answer scored above the output found), "
        "the dates the beam of 4 fixes and breaks, and the mean log-probability found.",
    )
)
