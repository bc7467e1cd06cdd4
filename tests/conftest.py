"""Shared test settings and helpers.

Settings: a headless plot backend and one torch thread (fast, repeatable). The backend is
chosen with matplotlib.use, not the MPLBACKEND environment variable: nbval's notebook kernels
inherit the environment, and MPLBACKEND=Agg would stop them from showing figures inline (so
their outputs would no longer match the stored ones).

Helpers (import them with ``from conftest import ...``): a small padded batch, masks, tiny
reversal data, and one factory per model of the course, so protocol-wide tests run on all.
"""

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from attnbook import data, tasks  # noqa: E402
from attnbook.bahdanau import BahdanauSeq2Seq  # noqa: E402
from attnbook.experiments.dates import PartlyChoDecoder, StartOnlyDecoder  # noqa: E402
from attnbook.luong import LuongSeq2Seq  # noqa: E402
from attnbook.rnn import Encoder, EncoderDecoder, Seq2Seq  # noqa: E402
from attnbook.transformer import Transformer  # noqa: E402

torch.set_num_threads(1)

# Hypothesis draws the same examples on every run (no example database, no random seed), so a
# property test cannot pass on one run and fail on the next.
from hypothesis import settings  # noqa: E402

settings.register_profile("course", derandomize=True, database=None)
settings.load_profile("course")

#: Vocabulary sizes of the tiny models.
SRC_VOCAB, TGT_VOCAB = 12, 11

#: ``name -> factory(src_vocab_size, tgt_vocab_size, **sizes)``: every model of the course, small.
MODELS = {
    "rnn": lambda s, t, e=8, h=12: Seq2Seq.build(s, t, embed_dim=e, hidden_size=h),
    "bahdanau": lambda s, t, e=8, h=12: BahdanauSeq2Seq.build(s, t, embed_dim=e, hidden_size=h, attention_dim=10),
    # Chapter 1's two halves of Cho et al.'s decoder (the record dates_decoder_parts) and the start-only one
    **{
        f"rnn-c-in-{where}": (
            lambda s, t, e=8, h=12, where=where: EncoderDecoder(
                Encoder(s, e, h, bidirectional=True), PartlyChoDecoder(t, e, h, 2 * h, where)
            )
        )
        for where in ("steps", "output")
    },
    "rnn-start-only": lambda s, t, e=8, h=12: EncoderDecoder(
        Encoder(s, e, h, bidirectional=True), StartOnlyDecoder(t, e, h, 2 * h)
    ),
    **{
        f"luong-{score}-{'feed' if feed else 'nofeed'}-{'local' if local else 'global'}": (
            lambda s, t, e=8, h=12, score=score, feed=feed, local=local: LuongSeq2Seq.build(
                s, t, embed_dim=e, hidden_size=h, score=score, input_feeding=feed, local_window=local
            )
        )
        for score in ("dot", "general", "concat")
        for feed in (True, False)
        for local in (None, 2)
    },
    **{
        f"transformer-{'pre' if norm_first else 'post'}": (
            lambda s, t, e=8, h=12, norm_first=norm_first: Transformer(
                s,
                t,
                d_model=h,
                num_heads=2,
                num_encoder_layers=2,
                num_decoder_layers=2,
                d_ff=2 * h,
                dropout=0.0,
                norm_first=norm_first,
            )
        )
        for norm_first in (False, True)
    },
}


def tiny(name: str, seed: int = 0):
    """The model ``name`` of :data:`MODELS` on the tiny vocabularies, seeded."""
    torch.manual_seed(seed)
    return MODELS[name](SRC_VOCAB, TGT_VOCAB)


def padded_batch():
    """src ``(B=3, S=5)`` right-padded with 0; tgt_in ``(B=3, T=4)`` starting with bos=1."""
    src = torch.tensor([[4, 5, 6, 7, 8], [9, 5, 4, 0, 0], [6, 6, 0, 0, 0]])
    tgt_in = torch.tensor([[1, 8, 7, 6], [1, 4, 5, 0], [1, 6, 0, 0]])
    return src, tgt_in


def length_mask(lengths, width: int) -> torch.Tensor:
    """``(len(lengths), width)`` bool: True at the first ``length`` positions of each row."""
    return torch.arange(width) < torch.tensor(lengths).unsqueeze(1)


def reversal_examples(n: int, seed: int, max_length: int = 6):
    return tasks.reversal_task(n, 2, max_length, seed=seed, alphabet="abcdef")


def overfit(model, examples, vocabs, steps: int = 150, lr: float = 1e-2) -> float:
    """Train on one batch for ``steps`` Adam steps; return the last loss."""
    batch = data.make_batch(examples, *vocabs)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        logits = model(batch.src, batch.tgt_in).logits
        loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=model.pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def checker_passes(checker, fn, capsys) -> str:
    """Assert an exercise checker accepts ``fn`` with one ✓ line; return what it printed."""
    assert checker(fn) is True
    out = capsys.readouterr().out
    assert out.startswith("✓ ") and "✗" not in out
    return out


def checker_fails(checker, fn, capsys, *fragments) -> str:
    """Assert an exercise checker rejects ``fn`` with one ✗ message containing every fragment."""
    assert checker(fn) is False
    out = capsys.readouterr().out
    assert out.count("✗") == 1 and "✓" not in out, out
    flat = " ".join(out.split())  # the message is wrapped at 88 characters
    for fragment in fragments:
        assert " ".join(fragment.split()) in flat, f"{fragment!r} not in:\n{out}"
    return out
