"""Chapter 7's recorded experiment: the three families on one small language, over seeds.

The language is Chapter 7's: sentences ``<date in one of twelve formats>=<ISO date>`` (4 000 to
train on, 1 000 held out, data seed 7). Each seed trains one model of each family, as the chapter
does with seed 0:

- ``decoder-only`` (GPT): predict the next character, 4 passes;
- ``encoder-only`` (BERT): restore 15 % chosen characters (80/10/10), one pass over 6 masked copies;
- ``encoder-decoder`` (BART): rebuild the sentence from a text-infilled copy (spans of Poisson(3)
  characters, each replaced by one mask symbol), a fresh corruption every pass, 8 passes.

Measures: for the two single-stack models, the accuracy on one hidden character of the left half
and of the right half of every held-out sentence (:func:`context_accuracy`); the encoder-only
model's fill-in accuracy at 15 %; the encoder-decoder's exact match (and character accuracy) of
its greedy repair of the held-out sentences. The seed draws the initial weights, the batch order
and the masks/corruptions seen in training; the held-out corruptions and hidden positions are the
same for every seed.
"""

from __future__ import annotations

import datetime
import functools
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from attnbook import data, tasks
from attnbook.decoding import greedy_decode
from attnbook.experiments.transformer_training import Task, paper_adam, small_transformer
from attnbook.language_models import DecoderOnly, EncoderOnly, mask_tokens
from attnbook.metrics import exact_match, token_accuracy
from attnbook.protocol import evaluating
from attnbook.records import Experiment, check_arm, register
from attnbook.training import evaluate, fit, train_on_tensors
from attnbook.transformer import Transformer

__all__ = [
    "FamilyData",
    "family_data",
    "encode_texts",
    "is_valid",
    "next_token_loss",
    "masked_loss",
    "decoder_only",
    "encoder_only",
    "train_decoder_only",
    "train_encoder_only",
    "fill_in_accuracy",
    "context_accuracy",
    "MASK_SYMBOL",
    "infill",
    "infilled_examples",
    "train_repairer",
    "repair_measures",
    "FAMILIES",
    "family_run",
    "masked_generation",
]

#: The symbol a text-infilling span is replaced by in the encoder-decoder's source.
MASK_SYMBOL = "▢"


class FamilyData(NamedTuple):
    """Chapter 7's sentences, their vocabulary (characters, ``[MASK]``, ``[CLS]``) and ids."""

    train_texts: list[str]
    test_texts: list[str]
    vocab: data.Vocab
    mask_id: int
    cls_id: int


def encode_texts(texts: list[str], vocab: data.Vocab, first: int) -> Tensor:
    """Rows ``[first, characters..., eos]``, right-padded: ``(N, T)``."""
    rows = [[first] + vocab.encode(text, add_eos=True) for text in texts]
    width = max(map(len, rows))
    return torch.tensor([row + [vocab.pad_id] * (width - len(row)) for row in rows])


@functools.lru_cache(maxsize=1)
def family_data() -> FamilyData:
    """The chapter's data: dates (seed 7), written ``source=target``."""
    splits = tasks.date_splits(n_train=4_000, n_valid=0, n_test=1_000, seed=7)
    train_texts = [f"{e.source}={e.target}" for e in splits.train]
    test_texts = [f"{e.source}={e.target}" for e in splits.test]
    symbols = sorted(set("".join(train_texts + test_texts))) + ["[MASK]", "[CLS]"]
    vocab = data.Vocab(symbols, name="dates")
    return FamilyData(train_texts, test_texts, vocab, vocab.symbol_to_id["[MASK]"], vocab.symbol_to_id["[CLS]"])


def is_valid(text: str) -> tuple[bool, bool]:
    """(the ISO half is a real date of the range, the whole sentence is valid)."""
    left, _, right = text.partition("=")
    try:
        date = datetime.date.fromisoformat(right) if len(right) == 10 else None
    except ValueError:
        date = None
    if date is None or not tasks.FIRST_DATE <= date <= tasks.LAST_DATE:
        return False, False
    return True, any(left == tasks.format_date(date, name) for name in tasks.DATE_FORMATS)


def next_token_loss(logits: Tensor, targets: Tensor, pad_id: int = 0) -> Tensor:
    """Cross-entropy of ``(B, T, V)`` logits against ``(B, T)`` targets, padding ignored."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=pad_id)


def masked_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Cross-entropy at the chosen positions only (targets -100 elsewhere)."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)


def decoder_only(vocab: data.Vocab) -> DecoderOnly:
    """The chapter's GPT: 2 pre-LN layers, d_model 64, 4 heads, d_ff 128 (seed torch first)."""
    return DecoderOnly(len(vocab), d_model=64, num_heads=4, num_layers=2, d_ff=128, max_positions=48)


def encoder_only(vocab: data.Vocab) -> EncoderOnly:
    """The chapter's BERT: 2 post-LN layers of the same sizes (seed torch first)."""
    return EncoderOnly(len(vocab), d_model=64, num_heads=4, num_layers=2, d_ff=128, max_positions=48)


def train_decoder_only(seed: int, passes: int = 4) -> DecoderOnly:
    """Next-character prediction on the training sentences: Adam at 3e-3, batches of 32."""
    d = family_data()
    ids = encode_texts(d.train_texts, d.vocab, d.vocab.bos_id)
    torch.manual_seed(seed)
    model = decoder_only(d.vocab)
    train_on_tensors(model, ids[:, :-1], ids[:, 1:], next_token_loss, epochs=passes, lr=3e-3, batch_size=32, seed=seed)
    return model


def _maskable(ids: Tensor, d: FamilyData) -> Tensor:
    return (ids >= 4) & (ids < d.mask_id)  # the characters, not specials, [MASK] or [CLS]


def train_encoder_only(seed: int, copies: int = 6) -> EncoderOnly:
    """Restore 15 % chosen characters (80/10/10) of ``copies`` masked copies of the training
    sentences (their masks drawn from generator seeds 10 + 6·seed onwards), one pass."""
    d = family_data()
    ids = encode_texts(d.train_texts, d.vocab, d.cls_id)
    ordinary = torch.arange(4, d.mask_id)
    masked = [
        mask_tokens(ids, _maskable(ids, d), d.mask_id, ordinary, generator=torch.Generator().manual_seed(s))
        for s in range(10 + copies * seed, 10 + copies * (seed + 1))
    ]
    inputs, targets = torch.cat([m.inputs for m in masked]), torch.cat([m.targets for m in masked])
    torch.manual_seed(seed)
    model = encoder_only(d.vocab)
    train_on_tensors(model, inputs, targets, masked_loss, epochs=1, lr=3e-3, batch_size=32, seed=seed)
    return model


def fill_in_accuracy(model: EncoderOnly) -> float:
    """Hide 15 % of the characters of every held-out sentence (all by ``[MASK]``; generator seed
    1); the share the model restores."""
    d = family_data()
    ids = encode_texts(d.test_texts, d.vocab, d.cls_id)
    ordinary = torch.arange(4, d.mask_id)
    hidden = mask_tokens(ids, _maskable(ids, d), d.mask_id, ordinary, generator=torch.Generator().manual_seed(1)).chosen
    with torch.no_grad():
        filled = model(ids.masked_fill(hidden, d.mask_id)).logits.argmax(dim=-1)  # (N, T)
    return (filled[hidden] == ids[hidden]).float().mean().item()


def hidden_positions(seed: int = 0) -> dict[str, Tensor]:
    """One token position per held-out sentence in its left half and one in its right half
    (positions count ``[bos]``/``[CLS]`` as 0), drawn with ``numpy`` seed ``seed``."""
    d = family_data()
    rng = np.random.default_rng(seed)
    equals = [text.index("=") + 1 for text in d.test_texts]
    lengths = [len(text) for text in d.test_texts]
    return {
        "left": torch.tensor([rng.integers(1, e) for e in equals]),
        "right": torch.tensor([rng.integers(e + 1, n + 1) for e, n in zip(equals, lengths)]),
    }


def context_accuracy(
    model: EncoderOnly | DecoderOnly, hide_iso: bool = False, swap_iso: bool = False
) -> dict[str, float]:
    """Accuracy on one hidden character of each held-out sentence's left half and right half
    (:func:`hidden_positions`): the encoder-only model sees the sentence with ``[MASK]`` there
    (with ``hide_iso``, also at every character of the ISO half, after "="; with ``swap_iso``, the
    ISO half of the next held-out sentence in its place, one ``[MASK]`` as usual); the decoder-only
    model predicts it from the characters before it."""
    d = family_data()
    if (hide_iso or swap_iso) and not isinstance(model, EncoderOnly):
        raise ValueError(
            "hide_iso and swap_iso are for the encoder-only model: the decoder-only one sees no right context"
        )
    rows = torch.arange(len(d.test_texts))
    equals = torch.tensor([text.index("=") + 1 for text in d.test_texts])  # token position of "="
    lengths = torch.tensor([len(text) for text in d.test_texts])
    out = {}
    for side, where in hidden_positions().items():
        if isinstance(model, EncoderOnly):
            ids = encode_texts(d.test_texts, d.vocab, d.cls_id)
            masked = ids.clone()
            columns = torch.arange(ids.size(1))
            iso = (columns > equals[:, None]) & (columns <= lengths[:, None])  # (N, T): the ISO half
            if hide_iso:
                masked[iso] = d.mask_id
            if swap_iso:  # every ISO half has 10 characters: the next sentence's drops into place
                donor = torch.roll(rows, -1)
                masked[iso] = ids[donor][iso[donor]]
            masked[rows, where] = d.mask_id
            with torch.no_grad():
                guess = model(masked).logits.argmax(dim=-1)[rows, where]
        else:
            ids = encode_texts(d.test_texts, d.vocab, d.vocab.bos_id)
            with torch.no_grad():
                guess = model(ids[:, :-1]).logits.argmax(dim=-1)[rows, where - 1]  # from 0 .. where - 1
        out[side] = (guess == ids[rows, where]).float().mean().item()
    return out


def infill(text: str, rng: np.random.Generator, mean_span: float = 3.0, rate: float = 0.3) -> str:
    """BART's text infilling: start a span at each character with probability
    ``rate / mean_span``; a span of Poisson(``mean_span``) characters becomes one
    :data:`MASK_SYMBOL` (a span of length 0 inserts one)."""
    pieces, i = [], 0
    while i < len(text):
        if rng.random() < rate / mean_span:
            span = rng.poisson(mean_span)
            pieces.append(MASK_SYMBOL)
            i += span
            if span == 0:  # BART: a span of length 0 inserts a mask
                pieces.append(text[i])
                i += 1
        else:
            pieces.append(text[i])
            i += 1
    return "".join(pieces)


def infilled_examples(texts: list[str], seed: int) -> list[data.Example]:
    """``Example(source=infill(text), target=text)`` for every text (numpy seed ``seed``)."""
    rng = np.random.default_rng(seed)
    return [data.Example(infill(text, rng), text) for text in texts]


@functools.lru_cache(maxsize=1)
def _repair_vocabs() -> tuple[data.Vocab, data.Vocab]:
    d = family_data()
    texts = d.train_texts + d.test_texts
    return data.build_vocabs([data.Example("".join(texts) + MASK_SYMBOL, "".join(texts))])


#: The held-out corruptions: one infilled copy of each test sentence, the same for every seed.
REPAIR_TEST_SEED = 1_000


def train_repairer(seed: int, passes: int = 8, each_pass=None) -> tuple[Transformer, list[dict]]:
    """Chapter 6's Transformer (2 + 2 pre-LN layers, d_model 64; the paper's Adam and schedule,
    peak 3e-3 after 100 steps; no clipping) trained to rebuild each sentence from an infilled copy,
    a fresh corruption every pass (numpy seed 100·seed + pass). Returns the model and, after
    every pass, :func:`repair_measures` (with ``each_pass(model)``'s measures too, if given)."""
    d = family_data()
    src_vocab, tgt_vocab = _repair_vocabs()
    torch.manual_seed(seed)
    model = small_transformer(Task([], [], src_vocab, tgt_vocab), layers=2, norm_first=True)  # Chapter 6's
    optimizer, scheduler = paper_adam(model, 3e-3, "paper", 100)
    measures = []
    for done in range(passes):
        examples = infilled_examples(d.train_texts, 100 * seed + done)
        train = data.Batches(examples, src_vocab, tgt_vocab, batch_size=32, shuffle=True, seed=seed)
        fit(model, train, epochs=1, optimizer=optimizer, scheduler=scheduler, clip=None, progress=False)
        measures.append({**repair_measures(model), **(each_pass(model) if each_pass else {})})
    return model, measures


def repair_measures(model: Transformer) -> dict:
    """On one infilled copy of each held-out sentence (numpy seed :data:`REPAIR_TEST_SEED`):
    ``exact_match`` of the greedy repair, and ``unchanged``, the share of sentences the
    corruption left whole."""
    d = family_data()
    src_vocab, tgt_vocab = _repair_vocabs()
    examples = infilled_examples(d.test_texts, REPAIR_TEST_SEED)
    test = data.Batches(examples, src_vocab, tgt_vocab, batch_size=500)
    exact = evaluate(model, test, max_len=48)["exact_match"]
    unchanged = float(np.mean([e.source == e.target for e in examples]))
    return dict(exact_match=exact, unchanged=unchanged)


def repairs_run(arm: str, seed: int, passes: int = 8, shown: int = 6) -> dict:
    """``families``' encoder-decoder (the same training, so the same ``exact_match_curve``), and after
    every pass its greedy repairs of the held-out infilled sentences read two ways: ``exact_match`` and
    ``char_accuracy`` (:func:`attnbook.metrics.token_accuracy`, the end counted as one more position), over
    all of them and over those the corruption changed (``changed_...``); and ``shown`` repairs of changed
    sentences, the first held-out ones, as text (``examples``: corrupted, repaired, original)."""
    check_arm(arm, ("encoder-decoder",))
    _, measures = train_repairer(seed, passes, each_pass=lambda model: _read_repairs(model, shown))
    names = ("exact_match", "char_accuracy", "changed_exact_match", "changed_char_accuracy", "examples")
    curves = {name: [m[f"repairs_{name}"] for m in measures] for name in names}
    return dict(exact_match_curve=[m["exact_match"] for m in measures], **curves)


def _read_repairs(model: Transformer, shown: int) -> dict:
    src_vocab, tgt_vocab = _repair_vocabs()
    examples = infilled_examples(family_data().test_texts, REPAIR_TEST_SEED)
    outputs = []
    with evaluating(model):  # eval mode, no gradients; training mode again after
        for batch in data.Batches(examples, src_vocab, tgt_vocab, batch_size=500):
            outputs += greedy_decode(model, batch.src, 48).tokens
    targets = [tgt_vocab.encode(example.target) for example in examples]
    changed = [i for i, example in enumerate(examples) if example.source != example.target]

    def pick(rows):
        return [rows[i] for i in changed]

    return dict(
        repairs_exact_match=exact_match(outputs, targets),
        repairs_char_accuracy=token_accuracy(outputs, targets),
        repairs_changed_exact_match=exact_match(pick(outputs), pick(targets)),
        repairs_changed_char_accuracy=token_accuracy(pick(outputs), pick(targets)),
        repairs_examples=[
            [examples[i].source, tgt_vocab.decode(outputs[i]), examples[i].target] for i in changed[:shown]
        ],
    )


register(
    Experiment(
        name="families_repairs",
        run=repairs_run,
        arms=("encoder-decoder",),
        seeds=tuple(range(6)),
        settings=dict(passes=8, shown=6),
        replay=dict(arm="encoder-decoder", seed=0, passes=1),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="families' encoder-decoder again (the same seeds and training: 8 passes rebuilding "
        "text-infilled sentences), its greedy repairs of the held-out infilled sentences after every pass read "
        "as exact match and as character accuracy, over all and over the sentences the corruption changed, with "
        "six repairs of changed sentences kept as text.",
    )
)


#: The arms: one model of each family.
FAMILIES = ("decoder-only", "encoder-only", "encoder-decoder")


def family_run(arm: str, seed: int, passes: int = 4, repair_passes: int = 8) -> dict:
    """Train ``arm``'s model from ``seed`` (the decoder-only model ``passes``, the encoder-decoder
    ``repair_passes``); its measures (see the module's docstring)."""
    if arm == "decoder-only":
        model = train_decoder_only(seed, passes)
        d = family_data()
        ids = encode_texts(d.test_texts, d.vocab, d.vocab.bos_id)
        with torch.no_grad():
            test_loss = next_token_loss(model(ids[:, :-1]).logits, ids[:, 1:]).item()
        sides = context_accuracy(model)
        return dict(left_half=sides["left"], right_half=sides["right"], test_loss=test_loss)
    if arm == "encoder-only":
        model = train_encoder_only(seed)
        sides = context_accuracy(model)
        return dict(left_half=sides["left"], right_half=sides["right"], fill_in=fill_in_accuracy(model))
    if arm == "encoder-decoder":
        _, measures = train_repairer(seed, repair_passes)
        return dict(
            exact_match=[m["exact_match"] for m in measures],
            unchanged=measures[0]["unchanged"],
        )
    raise ValueError(f"unknown arm {arm!r}; the arms are {', '.join(FAMILIES)}")


register(
    Experiment(
        name="families",
        run=family_run,
        arms=FAMILIES,
        seeds=tuple(range(6)),
        settings=dict(passes=4, repair_passes=8),
        replay=dict(arm="encoder-only", seed=0),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="Chapter 7's three families on the dates language (4 000 training sentences, 1 000 held out), "
        "each 2 layers, d_model 64: a decoder-only model trained 4 passes on the next character; an encoder-only "
        "model trained one pass over 6 masked copies (15 %, 80/10/10); an encoder-decoder trained 8 passes to "
        "rebuild text-infilled sentences (fresh corruptions each pass). Accuracy on one hidden character of each "
        "held-out sentence's left and right half (single-stack models), fill-in accuracy at 15 % (encoder-only), "
        "exact match of the greedy repair of infilled held-out sentences after each of 8 passes (encoder-decoder).",
    )
)


def iso_hidden_run(arm: str, seed: int) -> dict:
    """The encoder-only model of ``seed`` (as in :func:`family_run`): its accuracy on the hidden
    left-half character as there (``left_half``) and with the ISO half also hidden
    (``left_half_iso_hidden``, :func:`context_accuracy` with ``hide_iso``)."""
    check_arm(arm, ("encoder-only",))
    model = train_encoder_only(seed)
    return dict(
        left_half=context_accuracy(model)["left"],
        left_half_iso_hidden=context_accuracy(model, hide_iso=True)["left"],
    )


#: The masked model's training budget: the chapter's 6 masked copies of the training sentences, and 24
#: (about as many targets as the causal model's, which predicts every character).
MASKED_COPIES = {"6 copies": 6, "24 copies": 24}


def masked_budget_run(arm: str, seed: int) -> dict:
    """The encoder-only model of ``seed`` trained on ``arm``'s number of masked copies: its accuracy on
    one hidden character of the left and right halves (``left_half``, ``right_half``) and its fill-in
    accuracy (``fill_in``), as in ``families``."""
    check_arm(arm, MASKED_COPIES)
    model = train_encoder_only(seed, copies=MASKED_COPIES[arm])
    sides = context_accuracy(model)
    return dict(left_half=sides["left"], right_half=sides["right"], fill_in=fill_in_accuracy(model))


register(
    Experiment(
        name="families_masked_budget",
        run=masked_budget_run,
        arms=tuple(MASKED_COPIES),
        seeds=tuple(range(6)),
        replay=dict(arm="6 copies", seed=0),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="The masked model of families (6 masked copies, one pass) beside one trained on 24 copies, "
        "about as many targets as the causal model's: left- and right-half accuracy and fill-in accuracy, 6 seeds.",
    )
)


def iso_swapped_run(arm: str, seed: int) -> dict:
    """The encoder-only model of ``seed``: its accuracy on the hidden left-half character as in
    ``families`` (``left_half``), and with the next held-out sentence's ISO half in place of the
    sentence's own (``left_half_iso_swapped``): the right context still there, with one [MASK] as in
    training, but telling of another date."""
    check_arm(arm, ("encoder-only",))
    model = train_encoder_only(seed)
    return dict(
        left_half=context_accuracy(model)["left"],
        left_half_iso_swapped=context_accuracy(model, swap_iso=True)["left"],
    )


register(
    Experiment(
        name="families_iso_swapped",
        run=iso_swapped_run,
        arms=("encoder-only",),
        seeds=tuple(range(6)),
        replay=dict(arm="encoder-only", seed=0),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="The control families_iso_hidden lacks: the same encoder-only models, the hidden left-half "
        "character read with the next held-out sentence's ISO half in place of the sentence's own (one [MASK], "
        "as in training, and a right context that tells of another date).",
    )
)


register(
    Experiment(
        name="families_iso_hidden",
        run=iso_hidden_run,
        arms=("encoder-only",),
        seeds=tuple(range(6)),
        replay=dict(arm="encoder-only", seed=0),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="The families record's encoder-only models (the same seeds): accuracy on one hidden character "
        "of each held-out sentence's left half, as in families, and with every character of the ISO half (after "
        "'=') also replaced by [MASK], so that the right context no longer repeats the date.",
    )
)


# ------------------------------------------------------------------- what each model is used for

#: The sampling rules of Chapter 7: (temperature, top-k); temperature 0 is greedy.
SAMPLING_RULES = {
    "greedy": (0.0, None),
    "temperature 1": (1.0, None),
    "temperature 0.7": (0.7, None),
    "top-k 5": (1.0, 5),
    "temperature 2": (2.0, None),
}


def sampling_measures(model: DecoderOnly, count: int = 1000) -> dict:
    """For each of :data:`SAMPLING_RULES`, ``count`` sentences generated from ``[bos]`` (generator
    seed 1): the share with a real ISO date (``iso_<rule>``), valid (``valid_<rule>``), distinct
    (``distinct_<rule>``), and of the valid ones not in the training data (``new_<rule>``)."""
    from attnbook.language_models import generate

    d = family_data()
    train_set = set(d.train_texts)
    out = {}
    for name, (temperature, top_k) in SAMPLING_RULES.items():
        key = name.replace(" ", "_").replace("-", "").replace(".", "")
        bos = torch.full((count, 1), d.vocab.bos_id)
        rows = generate(model, bos, 46, temperature, top_k, torch.Generator().manual_seed(1), eos_id=d.vocab.eos_id)
        texts = [d.vocab.decode(row) for row in rows[:, 1:].tolist()]
        checks = [is_valid(text) for text in texts]
        valid = [text for text, (_, ok) in zip(texts, checks) if ok]
        out[f"iso_{key}"] = float(np.mean([iso for iso, _ in checks]))
        out[f"valid_{key}"] = len(valid) / count
        out[f"distinct_{key}"] = len(set(texts)) / count
        out[f"new_{key}"] = float(np.mean([text not in train_set for text in valid])) if valid else float("nan")
    return out


def masked_generation(model: EncoderOnly, lengths: list[int], generator: torch.Generator) -> list[str]:
    """Chapter 7's masked model writing left to right: fill ``[CLS] + [MASK] * n + [eos]`` one position at
    a time, sampling each character at temperature 1; one sentence per length ``n``."""
    from attnbook.language_models import next_token

    d = family_data()
    ordinary = torch.arange(4, d.mask_id)  # characters only
    rows = torch.full((len(lengths), max(lengths) + 2), d.vocab.pad_id)  # (N, T)
    for row, n in zip(rows, lengths):
        row[0], row[1 : n + 1], row[n + 1] = d.cls_id, d.mask_id, d.vocab.eos_id
    for t in range(1, max(lengths) + 1):
        with torch.no_grad():
            logits = model(rows).logits[:, t, ordinary]  # (N, characters)
        picked = ordinary[next_token(logits, 1.0, None, generator)]  # (N,)
        rows[:, t] = torch.where(torch.tensor(lengths) >= t, picked, rows[:, t])
    return ["".join(d.vocab.id_to_symbol[i] for i in row[1 : n + 1]) for row, n in zip(rows.tolist(), lengths)]


#: The masked models asked to write: the chapter's (6 masked copies) and one trained four times as long.
GENERATION_COPIES = {"encoder-only": 6, "encoder-only, 24 copies": 24}


def masked_generation_run(arm: str, seed: int, count: int = 100) -> dict:
    """The encoder-only model of ``seed`` (as in ``families``; with ``"encoder-only, 24 copies"`` trained on
    24 masked copies, as in ``families_masked_budget``, retrained) writing ``count`` sentences left to right
    (:func:`masked_generation`; lengths drawn from the training sentences' with numpy seed 2, sampling
    generator seed 2, as the chapter does): the share with a real ISO date (``iso``) and valid (``valid``)."""
    check_arm(arm, GENERATION_COPIES)
    model = train_encoder_only(seed, copies=GENERATION_COPIES[arm])
    sizes = np.random.default_rng(2).choice([len(t) for t in family_data().train_texts], count)
    texts = masked_generation(model, sizes.tolist(), torch.Generator().manual_seed(2))
    checks = np.array([is_valid(text) for text in texts])  # (count, 2)
    return dict(iso=float(checks[:, 0].mean()), valid=float(checks[:, 1].mean()))


register(
    Experiment(
        name="families_masked_generation",
        run=masked_generation_run,
        arms=("encoder-only",),
        seeds=tuple(range(6)),
        settings=dict(count=100),
        replay=dict(arm="encoder-only", seed=0),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="The families record's encoder-only models (the same seeds) asked to write left to right: "
        "[CLS], as many [MASK] as a training sentence's length, [eos]; each position filled in turn by sampling at "
        "temperature 1. 100 sentences per seed: the share with a real ISO date and the share valid.",
    )
)


register(
    Experiment(
        name="families_masked_generation_long",
        run=masked_generation_run,
        arms=("encoder-only, 24 copies",),
        seeds=tuple(range(6)),
        settings=dict(count=100),
        replay=dict(arm="encoder-only, 24 copies", seed=0),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="As families_masked_generation, with the masked models trained four times as long (24 masked "
        "copies, one pass; retrained from the same seeds and code as families_masked_budget's '24 copies' arm, "
        "which was made on another CPU): the share of 100 sentences written left to right with a real ISO date "
        "and the share valid.",
    )
)


class MonthClassifier(torch.nn.Module):
    """A linear layer on the ``[CLS]`` output of an encoder-only model: the month, 12 classes."""

    def __init__(self, encoder: EncoderOnly) -> None:
        super().__init__()
        self.encoder, self.linear = encoder, torch.nn.Linear(encoder.embedding.embedding_dim, 12)

    def forward(self, ids: Tensor) -> Tensor:
        return self.linear(self.encoder(ids).hidden[:, 0])  # (B, d) at [CLS] -> (B, 12)


#: What the month classifier reads of each sentence "left=ISO": all of it, one half, or the halves swapped
#: (the same characters with the ISO month at a fixed place).
VIEWS = {
    "whole sentence": lambda text: text,
    "left half": lambda text: text.split("=")[0],
    "ISO half": lambda text: text.split("=")[1],
    "ISO half first": lambda text: "=".join(text.split("=")[::-1]),
}


def month_accuracy(
    pretrained: EncoderOnly | None, seed: int, left_only: bool, n_train: int = 1500, passes: int = 1, view: str = ""
) -> float:
    """Fine-tune a :class:`MonthClassifier` ``passes`` passes over the first ``n_train`` training
    sentences (batches of 24, Adam at 2e-3, order from ``seed``), starting from ``pretrained``'s weights or,
    if None, from a fresh encoder (seed ``seed``); its accuracy on the held-out sentences. With
    ``left_only`` the model sees only the part before "=" (the month must be read from the format,
    not from the ISO digits); ``view`` names another part from :data:`VIEWS`."""
    d = family_data()
    shown = VIEWS[view or ("left half" if left_only else "whole sentence")]

    def ids(texts: list[str]) -> Tensor:
        return encode_texts([shown(t) for t in texts], d.vocab, d.cls_id)

    months = torch.tensor([int(t.split("=")[1][5:7]) - 1 for t in d.train_texts])
    test_months = torch.tensor([int(t.split("=")[1][5:7]) - 1 for t in d.test_texts])
    torch.manual_seed(seed)
    encoder = encoder_only(d.vocab)
    if pretrained is not None:
        encoder.load_state_dict(pretrained.state_dict())
    classifier = MonthClassifier(encoder)
    train_on_tensors(
        classifier,
        ids(d.train_texts)[:n_train],
        months[:n_train],
        F.cross_entropy,
        epochs=passes,
        lr=2e-3,
        batch_size=24,
        seed=seed,
    )
    with torch.no_grad():
        guess = classifier(ids(d.test_texts)).argmax(dim=-1)  # (N,)
    return (guess == test_months).float().mean().item()


def uses_run(arm: str, seed: int, passes: int = 4) -> dict:
    """What the chapter does with each single-stack model, for ``seed``'s model: the decoder-only
    model's :func:`sampling_measures`; the encoder-only model's month classification after
    fine-tuning, from it and from a fresh encoder, on the whole sentence and on its left half
    (``month_pretrained``, ``month_fresh``, ``month_pretrained_left``, ``month_fresh_left``)."""
    if arm == "decoder-only":
        return sampling_measures(train_decoder_only(seed, passes))
    if arm == "encoder-only":
        return month_measures(train_encoder_only(seed), seed)
    raise ValueError(f"unknown arm {arm!r}; the arms are 'decoder-only', 'encoder-only'")


def month_measures(
    model: EncoderOnly, seed: int, n_train: int = 1500, passes: int = 1, halves: tuple[bool, ...] = (False, True)
) -> dict:
    """:func:`month_accuracy` from ``model`` and from a fresh encoder, on the whole sentence and
    (if ``True`` is in ``halves``) on its left half (``month_pretrained``, ``month_fresh``,
    ``month_pretrained_left``, ``month_fresh_left``)."""
    return {
        f"month_{start}{'_left' if left else ''}": month_accuracy(
            model if start == "pretrained" else None, seed, left, n_train, passes
        )
        for start in ("pretrained", "fresh")
        for left in halves
    }


register(
    Experiment(
        name="families_uses",
        run=uses_run,
        arms=("decoder-only", "encoder-only"),
        seeds=tuple(range(6)),
        settings=dict(passes=4),
        replay=dict(arm="encoder-only", seed=0),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="The families record's decoder-only and encoder-only models (the same seeds) put to Chapter 7's "
        "uses: 1 000 sentences sampled with each of five rules (valid, distinct, new), and the month classified "
        "from [CLS] after one pass of fine-tuning over 1 500 sentences, from the pretrained model and from a fresh "
        "one, on the whole sentence and on its left half only.",
    )
)


def month_view_run(arm: str, seed: int, n_train: int = 1500, passes: int = 1) -> dict:
    """A fresh encoder's month accuracy after :func:`month_accuracy`'s fine-tuning, reading the part of
    each sentence that ``arm`` (a key of :data:`VIEWS`) names."""
    check_arm(arm, VIEWS)
    return dict(month_fresh=month_accuracy(None, seed, False, n_train, passes, view=arm))


register(
    Experiment(
        name="families_month_view",
        run=month_view_run,
        arms=tuple(VIEWS),
        seeds=tuple(range(6)),
        settings=dict(n_train=1500, passes=1),
        replay=dict(arm="ISO half first", seed=0),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="Why a fresh encoder reads the month worse from the whole sentence: families_uses' fresh "
        "fine-tuning (one pass over 1 500 sentences, 63 steps) on the whole sentence, on its left half, on its ISO "
        "half alone, and on the whole sentence with its halves swapped (the same characters and length, the ISO "
        "month at a fixed place).",
    )
)


#: The views :func:`month_view_pretrained_run` fine-tunes a pretrained encoder on (keys of :data:`VIEWS`).
PRETRAINED_VIEWS = ("ISO half first", "ISO half")


def month_view_pretrained_run(arm: str, seed: int, n_train: int = 1500, passes: int = 1) -> dict:
    """:func:`month_view_run` started from ``seed``'s pretrained encoder (:func:`train_encoder_only`)
    instead of a fresh one: its month accuracy, reading the part of each sentence ``arm`` names."""
    check_arm(arm, PRETRAINED_VIEWS)
    pretrained = train_encoder_only(seed)
    return dict(month_pretrained=month_accuracy(pretrained, seed, False, n_train, passes, view=arm))


register(
    Experiment(
        name="families_month_view_pretrained",
        run=month_view_pretrained_run,
        arms=PRETRAINED_VIEWS,
        seeds=tuple(range(6)),
        settings=dict(n_train=1500, passes=1),
        replay=dict(arm="ISO half first", seed=0),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="families_month_view's swapped and ISO-only views, fine-tuned from each seed's pretrained "
        "encoder (families_uses' masked model, six copies, one pass) instead of a fresh one: does the pretrained "
        "start's head start on whole sentences survive when the ISO month sits at a fixed place?",
    )
)


def finetune_budget_run(arm: str, seed: int, n_train: int = 4000, passes: int = 3) -> dict:
    """:func:`month_measures` of ``seed``'s encoder-only model on whole sentences at a larger
    fine-tuning budget: ``passes`` passes over the first ``n_train`` training sentences."""
    check_arm(arm, ("encoder-only",))
    return month_measures(train_encoder_only(seed), seed, n_train, passes, halves=(False,))


register(
    Experiment(
        name="families_finetune_budget",
        run=finetune_budget_run,
        arms=("encoder-only",),
        seeds=tuple(range(6)),
        settings=dict(n_train=4000, passes=3),
        replay=dict(arm="encoder-only", seed=0),
        chapter="chapters/07_beyond/01_families.ipynb",
        description="families_uses' month classification on whole sentences at a larger fine-tuning budget: 3 "
        "passes over all 4 000 training sentences (501 steps) instead of one pass over 1 500 (63 steps), from each "
        "seed's pretrained encoder-only model and from a fresh one.",
    )
)
