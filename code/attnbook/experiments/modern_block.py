"""Chapter 8's recorded experiments: today's block against 2017's, and positions beyond the training length.

The text is Chapter 7's dates language (:func:`~attnbook.experiments.families.family_data`): each pass
shuffles the 4 000 training sentences (``<date>=<ISO date>``, each followed by ``eos``), joins them into
one stream and cuts it into windows; a model learns the next character of every window position. The
held-out stream is the 1 000 held-out sentences in their order, cut the same way.

- ``modern_block``: Chapter 7's decoder-only model (pre-LN, learned positions, ReLU layer, 4 heads with
  their own keys and values) against :class:`~attnbook.modern.ModernDecoder` (RMSNorm, rotary positions,
  SwiGLU, 2 key/value heads for 4 query heads), both 2 layers of width 64 with their feed-forward widths
  set so the parameter counts agree within 1 % (and today's block with 2017's learned positions, to
  separate the rotations from the rest); windows of 64, Adam at 3e-3 (one optimizer for the run), batches
  of 32, the same batches for both. Held-out loss per character after each pass.
- ``rope_lengths``: one :class:`~attnbook.modern.ModernDecoder` shape with each position scheme (learned,
  sinusoidal, rotary), trained on windows of 32 and tested on windows of 64: the held-out loss on
  positions 0–31 (lengths it was trained on) and 32–63 (never seen), and on 32–63 read through a sliding
  window of 32 (so no query meets an offset larger than in training); and the loss at each of the 64
  positions, and at each of 32–63 through the window.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnbook.experiments.families import family_data, next_token_loss
from attnbook.language_models import DecoderOnly
from attnbook.modern import POSITION_SCHEMES, ModernDecoder
from attnbook.records import Experiment, register, split_rate_arm

__all__ = [
    "stream_windows",
    "BLOCKS",
    "block_model",
    "position_losses",
    "window_losses",
    "train_lm",
    "block_run",
    "RATE_ARMS",
    "block_rate_run",
    "lengths_model",
    "lengths_run",
]


def stream_windows(texts: list[str], length: int, seed: int | None = None) -> Tensor:
    """The sentences (shuffled by ``seed``; in order for None) as one stream of ids, cut into windows
    of ``length + 1``: the inputs are a window's first ``length`` ids, the targets its last ``length``.

    Shapes:
        -> ``(N, length + 1)`` long, ``N`` = the whole windows in the stream
    """
    vocab = family_data().vocab
    order = (
        range(len(texts)) if seed is None else torch.randperm(len(texts), generator=torch.Generator().manual_seed(seed))
    )
    stream = [i for k in order for i in vocab.encode(texts[k], add_eos=True)]  # sentence, eos, sentence, ...
    count = len(stream) // (length + 1)
    return torch.tensor(stream[: count * (length + 1)]).view(count, length + 1)


#: The blocks of ``modern_block``: today's also with 2017's learned positions, to see what the rotations do.
BLOCKS = ("2017", "today", "today, learned positions", "today, learned positions, small start")


def block_model(arm: str) -> nn.Module:
    """Chapter 7's decoder-only shape (``"2017"``) or today's, 2 layers of width 64 (seed torch first).
    ``d_ff`` 128 for 2017's ReLU layer, 120 for SwiGLU with 2 key/value heads: 79 424 and 79 168 parameters
    with this vocabulary (83 264 with a table of 64 learned positions)."""
    vocab_size = len(family_data().vocab)
    if arm == "2017":
        return DecoderOnly(vocab_size, d_model=64, num_heads=4, num_layers=2, d_ff=128, max_positions=64)
    if arm == "today":
        return ModernDecoder(vocab_size, d_model=64, num_heads=4, num_kv_heads=2, num_layers=2, d_ff=120)
    if arm.startswith("today, learned positions"):
        model = ModernDecoder(
            vocab_size, d_model=64, num_heads=4, num_kv_heads=2, num_layers=2, d_ff=120, positions="learned"
        )
        if arm.endswith("small start"):  # nanoGPT's / Hugging Face GPT-2's start, not nn.Embedding's N(0, 1)
            nn.init.normal_(model.positions.weight, std=0.02)
        return model
    raise ValueError(f"unknown arm {arm!r}; the arms are {', '.join(BLOCKS)}")


def position_losses(model: nn.Module, windows: Tensor) -> Tensor:
    """Next-character loss at every position of ``windows`` ``(N, T + 1)``, averaged over the windows: ``(T,)``."""
    with torch.no_grad():
        logits = model(windows[:, :-1]).logits  # (N, T, V)
        losses = nn.functional.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none")  # (N, T)
    return losses.mean(dim=0)  # (T,)


def window_losses(model: nn.Module, windows: Tensor, split: int | None = None) -> tuple[float, ...]:
    """Mean next-character loss on ``windows`` ``(N, T + 1)``; with ``split``, on positions ``< split``
    and ``>= split`` separately."""
    losses = position_losses(model, windows)  # (T,): every window has all T positions
    if split is None:
        return (losses.mean().item(),)
    return losses[:split].mean().item(), losses[split:].mean().item()


def train_lm(model: nn.Module, length: int, passes: int, seed: int, each_pass=None, lr: float = 3e-3) -> list:
    """Adam at ``lr``, one optimizer for the whole run, on batches of 32 windows of ``length``; each pass a
    fresh shuffle of the sentences (hence new windows) and of the batches; ``each_pass(model)`` after every
    pass (the list of its results is returned)."""
    texts = family_data().train_texts
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    order = torch.Generator().manual_seed(seed)  # the batch order
    results = []
    for done in range(passes):
        windows = stream_windows(texts, length, seed=1000 * seed + done)  # (N, length + 1)
        model.train()
        for batch in torch.randperm(len(windows), generator=order).split(32):
            logits = model(windows[batch, :-1]).logits  # (32, length, V)
            loss = next_token_loss(logits, windows[batch, 1:])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        results.append(each_pass(model) if each_pass else None)
    return results


def trained_block(arm: str, seed: int, passes: int = 8, lr: float = 3e-3) -> tuple[nn.Module, list[float]]:
    """``arm``'s block trained from ``seed`` at Adam's ``lr``, and its held-out loss per character after
    each pass."""
    torch.manual_seed(seed)
    model = block_model(arm)
    test = stream_windows(family_data().test_texts, 64)
    return model, train_lm(model, 64, passes, seed, lambda m: window_losses(m, test)[0], lr=lr)


def block_run(arm: str, seed: int, passes: int = 8, lr: float = 3e-3) -> dict:
    """:func:`trained_block`'s held-out loss after each pass, and the block's parameter count."""
    model, losses = trained_block(arm, seed, passes, lr)
    return dict(test_loss=losses, parameters=sum(p.numel() for p in model.parameters()))


register(
    Experiment(
        name="modern_block",
        run=block_run,
        arms=BLOCKS,
        seeds=tuple(range(6)),
        settings=dict(passes=8),
        replay=dict(arm="today", seed=0, passes=1),
        chapter="chapters/08_modern_block.ipynb",
        description="Chapter 7's decoder-only block (pre-LN, learned positions, ReLU d_ff 128, 4 heads) against "
        "today's (RMSNorm, rotary positions, SwiGLU d_ff 120, 4 query heads sharing 2 key/value heads), both 2 "
        "layers of width 64 with parameter counts within 1 % (and today's with learned positions), on Chapter "
        "7's dates sentences as one stream cut into windows of 64: Adam 3e-3, batches of 32, the same batches "
        "for every arm; a fourth arm starts today's learned table at N(0, 0.02²) as nanoGPT does "
        "(nn.Embedding: N(0, 1)); held-out loss per character "
        "after each of 8 passes.",
    )
)


#: ``modern_block_rates``: three of ``modern_block``'s arms at a third and at three times its rate (3e-3).
RATE_BLOCKS = ("2017", "today", "today, learned positions")
BLOCK_RATES = (1e-3, 1e-2)
RATE_ARMS = tuple(f"{block}, lr {rate:g}" for rate in BLOCK_RATES for block in RATE_BLOCKS)


#: ``modern_block_more_rates``: past the edge of that grid (the 2017 block did best at its highest rate, 1e-2)
#: and between today's two best rates.
MORE_RATE_ARMS = ("2017, lr 0.02", "2017, lr 0.03", "today, lr 0.005")


def block_rate_run(arm: str, seed: int, passes: int = 8) -> dict:
    """:func:`block_run` for the block and learning rate that ``arm`` names (:data:`RATE_ARMS`,
    :data:`MORE_RATE_ARMS`)."""
    block, rate = split_rate_arm(arm, RATE_ARMS + MORE_RATE_ARMS)
    return block_run(block, seed, passes, lr=rate)


register(
    Experiment(
        name="modern_block_rates",
        run=block_rate_run,
        arms=RATE_ARMS,
        seeds=tuple(range(6)),
        settings=dict(passes=8),
        replay=dict(arm="today, lr 0.01", seed=0, passes=1),
        chapter="chapters/08_modern_block.ipynb",
        description="modern_block's 2017 block, today's, and today's with learned positions (N(0, 1) start), "
        "trained as there (the same seeds and batches) at Adam learning rates 1e-3 and 1e-2 (modern_block: 3e-3): "
        "held-out loss per character after each of 8 passes.",
    )
)

register(
    Experiment(
        name="modern_block_more_rates",
        run=block_rate_run,
        arms=MORE_RATE_ARMS,
        seeds=tuple(range(6)),
        settings=dict(passes=8),
        replay=dict(arm="today, lr 0.005", seed=0, passes=1),
        chapter="chapters/08_modern_block.ipynb",
        description="modern_block_rates continued past its grid: the 2017 block at Adam 2e-2 and 3e-2 (its best of "
        "1e-3, 3e-3 and 1e-2 was the highest) and today's block at 5e-3 (between its 3e-3 and 1e-2), trained as there "
        "(the same seeds and batches): held-out loss per character after each of 8 passes.",
    )
)


def lengths_model(scheme: str) -> ModernDecoder:
    """Today's block with the position scheme ``scheme`` (seed torch first); tables cover 64 positions."""
    vocab_size = len(family_data().vocab)
    return ModernDecoder(vocab_size, d_model=64, num_heads=4, num_kv_heads=2, num_layers=2, positions=scheme)


def lengths_run(arm: str, seed: int, passes: int = 8, train_length: int = 32) -> dict:
    """Train ``arm``'s scheme on windows of ``train_length``; held-out loss on windows of twice that,
    on the trained positions and on the new ones, after each pass; and on the new ones again with the model
    reading through a sliding window of ``train_length`` (each query sees at most the offsets of training)."""
    torch.manual_seed(seed)
    model = lengths_model(arm)
    test = stream_windows(family_data().test_texts, 2 * train_length)

    def measure(m: ModernDecoder) -> tuple[float, float, float, list, list]:
        full = position_losses(m, test)  # (2 · train_length,)
        m.window = train_length  # the same model read with a sliding window: no offset beyond training's
        windowed = position_losses(m, test)
        m.window = None
        seen, new = full[:train_length].mean().item(), full[train_length:].mean().item()
        tail = windowed[train_length:]  # on 0..train_length - 1 the window hides nothing: the same losses
        return seen, new, tail.mean().item(), full.tolist(), tail.tolist()

    results = train_lm(model, train_length, passes, seed, measure)
    return dict(
        seen_positions=[r[0] for r in results],
        new_positions=[r[1] for r in results],
        new_positions_windowed=[r[2] for r in results],
        each_position=[r[3] for r in results],
        each_new_position_windowed=[r[4] for r in results],
    )


register(
    Experiment(
        name="rope_lengths",
        run=lengths_run,
        arms=POSITION_SCHEMES,
        seeds=tuple(range(6)),
        settings=dict(passes=8, train_length=32),
        replay=dict(arm="rope", seed=0, passes=1),
        chapter="chapters/08_modern_block.ipynb",
        description="Today's block (2 layers, width 64, SwiGLU, 2 key/value heads for 4 query heads) with learned, "
        "sinusoidal or rotary positions, trained on Chapter 7's dates sentences as one stream cut into windows of "
        "32 (Adam 3e-3, batches of 32, the same batches for every scheme) and tested on held-out windows of 64: "
        "loss per character on positions 0-31 and 32-63 after each of 8 passes, and on 32-63 again through a sliding "
        "window of 32; and the loss at each of the 64 positions, and at each of 32-63 through the window.",
    )
)
