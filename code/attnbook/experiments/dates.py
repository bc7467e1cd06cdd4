"""Chapters 1 and 2's recorded experiment on date normalisation, recorded as ``dates``.

Four decoders, one encoder (a bidirectional GRU of 64 units per direction), the same 10 000
training dates: Cho et al.'s decoder, which reads the context vector ``c`` at every step
(Chapter 1's :class:`~attnbook.rnn.Seq2Seq`); a decoder that sees ``c`` only as its first
state, as in Sutskever et al. (:class:`StartOnlyDecoder`), with a state of 64 and with one as
large as ``c`` (128); and Bahdanau attention (Chapter 2).
Each is trained four epochs and measured after every one. For the plain models the run also
probes the context vector before and after training (:func:`year_probe`, :func:`format_probe`):
what a linear read-out finds in an untrained encoder is the baseline for what training put there.
"""

from __future__ import annotations

import datetime
import functools
from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnbook import _checks as checks
from attnbook.bahdanau import BahdanauSeq2Seq
from attnbook.data import Batches, Example, Splits, Vocab, build_vocabs
from attnbook.experiments.lengths import context_vectors
from attnbook.protocol import Output, Step, teacher_forced_weights
from attnbook.records import Experiment, register, split_rate_arm
from attnbook.rnn import DecoderState, Encoder, EncoderDecoder, RNNDecoder, Seq2Seq
from attnbook.tasks import DATE_FORMATS, DATE_PARTS, date_part_spans, date_splits, format_date
from attnbook.training import History, fit

__all__ = [
    "DATE_ARMS",
    "DateData",
    "date_data",
    "date_model",
    "StartOnlyDecoder",
    "DECODER_PART_ARMS",
    "PartlyChoDecoder",
    "date_curve_run",
    "linear_probe",
    "year_probe",
    "format_probe",
    "PartWeight",
    "PART_OUTPUTS",
    "PART_ROWS",
    "weight_on_parts",
    "part_rows",
    "date_run",
    "DATE_RATE_ARMS",
    "DATE_RATES",
    "date_rate_run",
    "values_at_rate",
]

#: The arms: a short name and what it is. All have the same encoder (2 x 64) and embeddings of 32;
#: the decoder state is 64, except in ``start_only_wide``, where it is as large as ``c``.
DATE_ARMS = {
    "cho": "c at every step (Cho et al.)",
    "start_only": "c only as the first state",
    "start_only_wide": "c only as the first state, a state as large as c (128)",
    "attention": "Bahdanau attention",
}

#: ``dates_decoder_parts``' arms: Cho et al.'s decoder differs from the start-only one in two places;
#: each of these has one of them (state 64, as ``cho``).
DECODER_PART_ARMS = {
    "c_in_steps": "c enters every step, as in Cho et al.; the output layer reads the state alone",
    "c_in_output": "c only as the first state; the output layer reads [s_t; c; E y_(t-1)], as in Cho et al.",
}


class DateData(NamedTuple):
    """Chapters 1 and 2's dates: 10 000 / 1 000 / 1 000 (data seed 0) and their vocabularies."""

    splits: Splits
    src_vocab: Vocab
    tgt_vocab: Vocab


@functools.lru_cache(maxsize=1)
def date_data() -> DateData:
    """The same dates for every arm and seed (the vocabularies from the training dates)."""
    splits = date_splits(n_train=10_000, n_valid=1_000, n_test=1_000, seed=0)
    return DateData(splits, *build_vocabs(splits.train))


class StartOnlyDecoder(RNNDecoder):
    """A decoder that sees the context vector only as its first state (Sutskever et al.'s way)::

        s_0 = tanh(W_init c + b_init),   s_t = GRU(E y_{t-1}, s_{t-1}),   logits_t = W_o s_t + b_o

    Shapes: as :class:`attnbook.rnn.Decoder` (its state is a :class:`~attnbook.rnn.DecoderState`).
    """

    State = DecoderState

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, encoder_size: int, pad_id: int = 0) -> None:
        super().__init__(vocab_size, embed_dim, hidden_size, encoder_size, pad_id)
        self.init = nn.Linear(encoder_size, hidden_size)  # W_init
        self.gru = nn.GRU(embed_dim, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, vocab_size)  # W_o

    def start(self, annotations: Tensor, final: Tensor, src_mask: Tensor) -> DecoderState:
        checks.shapes("StartOnlyDecoder", dict(C=self.encoder_size), final=(final, "B C"))
        return DecoderState(context=final, hidden=torch.tanh(self.init(final)))  # s_0 = tanh(W_init c + b_init)

    def step(self, state: DecoderState, prev: Tensor) -> Step:
        embedded = self.embedding(prev)  # (B, E)
        _, hidden = self.gru(embedded.unsqueeze(1), state.hidden.unsqueeze(0))  # (1, B, H)
        hidden = hidden.squeeze(0)  # (B, H)
        return Step(self.out(hidden), state._replace(hidden=hidden), None)  # (B, V)

    def forward(self, tgt_in: Tensor, state: DecoderState) -> Output:
        states, _ = self.gru(self.embedding(tgt_in), state.hidden.unsqueeze(0))  # (B, T, H)
        return Output(self.out(states), None)  # (B, T, V)


class PartlyChoDecoder(RNNDecoder):
    """A start-only decoder with one of the two places where Cho et al.'s reads ``c``::

        where="steps":   s_t = GRU([E y_{t-1}; c], s_{t-1}),   logits_t = W_o s_t + b_o
        where="output":  s_t = GRU(E y_{t-1}, s_{t-1}),         logits_t = W_o [s_t; c; E y_{t-1}] + b_o

    Both start from ``s_0 = tanh(W_init c + b_init)``. Shapes: as :class:`StartOnlyDecoder`.
    """

    State = DecoderState

    def __init__(
        self, vocab_size: int, embed_dim: int, hidden_size: int, encoder_size: int, where: str, pad_id: int = 0
    ) -> None:
        super().__init__(vocab_size, embed_dim, hidden_size, encoder_size, pad_id)
        if where not in ("steps", "output"):
            raise ValueError(f"PartlyChoDecoder: where must be 'steps' or 'output', got {where!r}")
        self.where = where
        self.init = nn.Linear(encoder_size, hidden_size)  # W_init
        in_steps, in_output = (encoder_size, 0) if where == "steps" else (0, encoder_size + embed_dim)
        self.gru = nn.GRU(embed_dim + in_steps, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size + in_output, vocab_size)  # W_o

    def start(self, annotations: Tensor, final: Tensor, src_mask: Tensor) -> DecoderState:
        checks.shapes("PartlyChoDecoder", dict(C=self.encoder_size), final=(final, "B C"))
        return DecoderState(context=final, hidden=torch.tanh(self.init(final)))

    def _run(self, embedded: Tensor, context: Tensor, hidden: Tensor) -> tuple[Tensor, Tensor]:
        """``embedded (B, T, E)``, ``context (B, T, C)``, ``hidden (1, B, H)`` -> logits (B, T, V), hidden."""
        inputs = torch.cat([embedded, context], dim=-1) if self.where == "steps" else embedded
        states, hidden = self.gru(inputs, hidden)  # (B, T, H)
        read = states if self.where == "steps" else torch.cat([states, context, embedded], dim=-1)
        return self.out(read), hidden

    def step(self, state: DecoderState, prev: Tensor) -> Step:
        embedded = self.embedding(prev).unsqueeze(1)  # (B, 1, E)
        logits, hidden = self._run(embedded, state.context.unsqueeze(1), state.hidden.unsqueeze(0))
        return Step(logits.squeeze(1), state._replace(hidden=hidden.squeeze(0)), None)  # (B, V)

    def forward(self, tgt_in: Tensor, state: DecoderState) -> Output:
        context = state.context.unsqueeze(1).expand(-1, tgt_in.size(1), -1)  # (B, T, C)
        logits, _ = self._run(self.embedding(tgt_in), context, state.hidden.unsqueeze(0))
        return Output(logits, None)  # (B, T, V)


def date_model(arm: str) -> nn.Module:
    """A fresh model of one of :data:`DATE_ARMS` or :data:`DECODER_PART_ARMS` for :func:`date_data`'s vocabularies."""
    data = date_data()
    src, tgt = len(data.src_vocab), len(data.tgt_vocab)
    if arm == "cho":
        return Seq2Seq.build(src, tgt, embed_dim=32, hidden_size=64, bidirectional=True)
    if arm in ("start_only", "start_only_wide"):
        encoder = Encoder(src, 32, 64, bidirectional=True)
        hidden_size = encoder.output_size if arm == "start_only_wide" else 64
        return EncoderDecoder(encoder, StartOnlyDecoder(tgt, 32, hidden_size, encoder.output_size))
    if arm == "attention":
        return BahdanauSeq2Seq.build(src, tgt, embed_dim=32, hidden_size=64, attention_dim=64)
    if arm in DECODER_PART_ARMS:
        encoder = Encoder(src, 32, 64, bidirectional=True)
        where = arm.removeprefix("c_in_")
        return EncoderDecoder(encoder, PartlyChoDecoder(tgt, 32, 64, encoder.output_size, where))
    raise ValueError(f"unknown arm {arm!r}; the arms are {', '.join([*DATE_ARMS, *DECODER_PART_ARMS])}")


def linear_probe(train_features: Tensor, train_targets: Tensor, test_features: Tensor) -> Tensor:
    """Least squares ``targets ≈ [features, 1] @ w`` on the training rows; the test rows' read-out.

    In float64 with an SVD-based solver (``gelsd``, the minimum-norm solution): the features of a
    saturated or untrained encoder can be nearly collinear, and a float32 QR solve then gives
    read-outs that change with the last bits of the input.

    Shapes:
        train_features ``(N, C)``, train_targets ``(N, K)``, test_features ``(M, C)`` -> ``(M, K)``
    """

    def with_ones(rows: Tensor) -> Tensor:
        return torch.cat([rows.double(), torch.ones(len(rows), 1, dtype=torch.float64)], 1)  # (N, C + 1)

    weights = torch.linalg.lstsq(with_ones(train_features), train_targets.double(), driver="gelsd").solution
    return with_ones(test_features) @ weights  # (M, C + 1) @ (C + 1, K)


def _dates(examples) -> list[datetime.date]:
    return [datetime.date.fromisoformat(example.target) for example in examples]


def year_probe(model: nn.Module, n_train: int = 3000) -> float:
    """R² of a linear read-out of the year from the context vector: fitted on the first ``n_train``
    training dates as written, tested on the 1 000 test dates as written."""
    data = date_data()
    train, test = data.splits.train[:n_train], data.splits.test
    features = [context_vectors(model, [e.source for e in split], data.src_vocab) for split in (train, test)]
    years = [torch.tensor([[d.year] for d in _dates(split)], dtype=torch.float32) for split in (train, test)]
    predicted = linear_probe(features[0], years[0], features[1]).squeeze(1)  # (M,)
    actual = years[1].squeeze(1)
    return float(1 - (predicted - actual).square().sum() / (actual - actual.mean()).square().sum())


def format_probe(model: nn.Module, n_train: int = 3000) -> float:
    """Accuracy of a linear read-out of the *format* from the context vector: the ``i``-th date
    written in format ``i mod 12``; least squares onto one-hot labels, fitted on ``n_train``
    training dates, the largest output taken as the answer on the 1 000 test dates."""
    data = date_data()
    formats = list(DATE_FORMATS)
    splits = (_dates(data.splits.train[:n_train]), _dates(data.splits.test))
    texts = [[format_date(d, formats[i % len(formats)]) for i, d in enumerate(dates)] for dates in splits]
    labels = [torch.arange(len(dates)) % len(formats) for dates in splits]
    features = [context_vectors(model, split, data.src_vocab) for split in texts]
    one_hot = nn.functional.one_hot(labels[0], len(formats)).float()  # (N, 12)
    predicted = linear_probe(features[0], one_hot, features[1]).argmax(dim=1)  # (M,)
    return float((predicted == labels[1]).float().mean())


#: For each part of a date, the output characters (of ``yyyy-mm-dd``) whose attention weights are
#: measured on it; the weekday is not in the output, so all ten characters are.
PART_OUTPUTS = {"year": slice(0, 4), "month": slice(5, 7), "day": slice(8, 10), "weekday": slice(0, 10)}

#: The formats that write the month in digits; the others write it in letters.
MONTH_IN_DIGITS = tuple(fmt for fmt in DATE_FORMATS if "{m}" in DATE_FORMATS[fmt] or "{mm}" in DATE_FORMATS[fmt])

#: The rows of :func:`part_rows`: ``{row: (part, the formats it averages over)}``.
PART_ROWS = {
    "year": ("year", tuple(DATE_FORMATS)),
    "month_digits": ("month", MONTH_IN_DIGITS),
    "month_letters": ("month", tuple(fmt for fmt in DATE_FORMATS if fmt not in MONTH_IN_DIGITS)),
    "day": ("day", tuple(DATE_FORMATS)),
    "weekday": ("weekday", tuple(DATE_FORMATS)),
}


class PartWeight(NamedTuple):
    """Where the output characters of one part of a date put their attention weight (means)."""

    on: float  # on the part in the source
    near: float  # on the part and one character each side of it
    even: float  # what an even spread over the source would put on the part
    even_near: float  # ... on the part and one character each side

    @property
    def focus(self) -> float:
        """How many times its even share the part gets: ``on / even``."""
        return self.on / self.even


def weight_on_parts(model: nn.Module, fmt: str, dates: list[datetime.date] | None = None) -> dict[str, PartWeight]:
    """``{part: PartWeight}`` for the parts that format ``fmt`` writes, over ``dates`` (default: the
    1 000 test dates), teacher-forced: the model is fed the correct previous output characters.

    Shapes: the weights ``(B, T, S)``, one row per output character of ``yyyy-mm-dd<eos>``.
    """
    data = date_data()
    dates = _dates(data.splits.test) if dates is None else dates
    sources = [format_date(date, fmt) for date in dates]
    examples = [Example(source, date.isoformat()) for source, date in zip(sources, dates)]
    weights = teacher_forced_weights(model, examples, data.src_vocab, data.tgt_vocab)  # (B, T, S)
    positions = torch.arange(weights.size(-1))  # (S,)
    lengths = torch.tensor([len(source) for source in sources]).unsqueeze(1)  # (B, 1)
    in_source = positions < lengths  # (B, S)
    spans = [date_part_spans(date, fmt) for date in dates]
    found = {}
    for part in DATE_PARTS:
        if part not in spans[0]:  # this format does not write the part
            continue
        start, end = torch.tensor([span[part] for span in spans]).T.unsqueeze(-1)  # (B, 1) each
        measures = []
        for margin in (0, 1):
            inside = (positions >= start - margin) & (positions < end + margin) & in_source  # (B, S)
            on = (weights[:, PART_OUTPUTS[part]] * inside.unsqueeze(1)).sum(-1).mean()  # over outputs and dates
            measures.append((float(on), float((inside.sum(1, keepdim=True) / lengths).mean())))
        (on, even), (near, even_near) = measures
        found[part] = PartWeight(on, near, even, even_near)
    return found


def part_rows(by_format: dict[str, dict[str, PartWeight]]) -> dict[str, PartWeight]:
    """The rows of :data:`PART_ROWS` from ``{format: weight_on_parts(model, format)}``: each row the
    mean over the formats it averages over that write its part."""
    rows = {}
    for row, (part, formats) in PART_ROWS.items():
        found = [by_format[fmt][part] for fmt in formats if part in by_format[fmt]]
        rows[row] = PartWeight(*(sum(values) / len(found) for values in zip(*found)))
    return rows


def _part_measures(model: nn.Module) -> dict[str, float]:
    """What the record keeps of :func:`weight_on_parts`, over every format of :data:`DATE_FORMATS`:
    each row's ``on`` (``year_on``, ``month_digits_on``, ...) and the month's in ``d.m.yy``."""
    by_format = {fmt: weight_on_parts(model, fmt) for fmt in DATE_FORMATS}
    measures = {f"{row}_on": weight.on for row, weight in part_rows(by_format).items()}
    measures["dmy_month_on"] = by_format["d.m.yy"]["month"].on
    measures["dmy_month_near"] = by_format["d.m.yy"]["month"].near
    return measures


def date_run(arm: str, seed: int, epochs: int = 4, lr: float = 5e-3, batch_size: int = 128) -> dict:
    """Train ``arm`` from ``seed`` (initial weights and batch order); measure after every epoch.

    Returns ``exact_match`` and ``valid_loss`` on the 1 000 validation dates, one value per
    epoch; for the attention model, where its weights fall on the parts of the 1 000 test dates
    after every epoch (:func:`_part_measures`: ``year_on``, ``dmy_month_on``, ...); for the plain
    models ``year_r2``/``format_accuracy`` after training and
    ``year_r2_untrained``/``format_accuracy_untrained`` before it, from the same weights.
    """
    data = date_data()
    torch.manual_seed(seed)
    model = date_model(arm)
    probes = arm != "attention"
    measures = {}
    if probes:  # the same weights, before training
        measures.update(year_r2_untrained=year_probe(model), format_accuracy_untrained=format_probe(model))
    train = Batches(data.splits.train, data.src_vocab, data.tgt_vocab, batch_size, shuffle=True, seed=seed)
    valid = Batches(data.splits.valid, data.src_vocab, data.tgt_vocab, batch_size=500)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)  # what fit would make
    history, parts = History(), []
    for _ in range(epochs):  # the same training as fit(..., epochs=epochs), measured between epochs
        history.records += fit(model, train, valid, epochs=1, optimizer=optimizer).records
        if not probes:
            parts.append(_part_measures(model))
    measures.update(exact_match=history["exact_match"], valid_loss=history["valid_loss"])
    for name in parts[0] if parts else ():
        measures[name] = [epoch[name] for epoch in parts]
    if probes:
        measures.update(year_r2=year_probe(model), format_accuracy=format_probe(model))
    return measures


register(
    Experiment(
        name="dates",
        run=date_run,
        arms=tuple(DATE_ARMS),
        seeds=tuple(range(8)),
        settings=dict(epochs=4, lr=5e-3, batch_size=128),
        replay=dict(arm="attention", seed=0, epochs=1),
        chapter="chapters/01_seq2seq.ipynb",
        description=(
            "Date normalisation with one bidirectional GRU encoder and four decoders (c at every step, c only "
            "as the first state with a state of 64 or of 128, Bahdanau attention): validation exact match and "
            "loss after every epoch; for the attention model, the attention weight on each part of the test "
            "dates after every epoch; for the plain models, linear probes of the year and the format in the "
            "context vector before and after training."
        ),
    )
)


def date_curve_run(arm: str, seed: int, **settings) -> dict:
    """:func:`date_run`'s curves alone (exact match and loss after every epoch), without the probes'
    single values."""
    return {name: value for name, value in date_run(arm, seed, **settings).items() if isinstance(value, list)}


register(
    Experiment(
        name="dates_longer",
        run=date_curve_run,
        arms=("cho", "start_only", "start_only_wide"),
        seeds=tuple(range(8)),
        settings=dict(epochs=8, lr=5e-3, batch_size=128),
        replay=dict(arm="cho", seed=0, epochs=1),
        chapter="chapters/01_seq2seq.ipynb",
        description="The dates record's three plain decoders (c at every step; c only as the first state, with a "
        "state of 64 or of 128) trained on for 8 epochs instead of 4, the same seeds and batches (its first 4 "
        "epochs are the dates record's): validation exact match and loss after every epoch.",
    )
)


register(
    Experiment(
        name="dates_decoder_parts",
        run=date_curve_run,
        arms=tuple(DECODER_PART_ARMS),
        seeds=tuple(range(8)),
        settings=dict(epochs=4, lr=5e-3, batch_size=128),
        replay=dict(arm="c_in_steps", seed=0, epochs=1),
        chapter="chapters/01_seq2seq.ipynb",
        description="Where Cho et al.'s decoder needs c: a start-only decoder (state 64) that reads c at every "
        "step but not in its output layer, and one that reads c (and the previous symbol) in its output layer "
        "but not in its steps; the dates record's data, seeds, batches and rate: validation exact match and loss "
        "after every epoch.",
    )
)


#: Every learning rate the date decoders were recorded at, as written in arm names: ``dates``' own
#: (0.005) and ``dates_rates``' three.
DATE_RATES = ("0.0025", "0.005", "0.01", "0.02")

#: ``dates_rates``' arms: three of :data:`DATE_ARMS` at three more Adam learning rates (``dates``: 0.005).
DATE_RATE_ARMS = tuple(
    f"{arm}, lr {rate}" for rate in DATE_RATES if rate != "0.005" for arm in ("cho", "start_only", "attention")
)


def date_rate_run(arm: str, seed: int, epochs: int = 4, batch_size: int = 128) -> dict:
    """:func:`date_run` for the decoder and learning rate ``arm`` names (:data:`DATE_RATE_ARMS`):
    its exact match and loss after every epoch."""
    decoder, rate = split_rate_arm(arm, DATE_RATE_ARMS)
    found = date_run(decoder, seed, epochs=epochs, lr=rate, batch_size=batch_size)
    return {name: found[name] for name in ("exact_match", "valid_loss")}


register(
    Experiment(
        name="dates_rates",
        run=date_rate_run,
        arms=DATE_RATE_ARMS,
        seeds=tuple(range(8)),
        settings=dict(epochs=4, batch_size=128),
        replay=dict(arm="attention, lr 0.02", seed=0, epochs=1),
        chapter="chapters/02_bahdanau.ipynb",
        description="The dates record's Cho et al. decoder, start-only decoder (state 64) and attention model "
        "(the same seeds, batches and data) at Adam learning rates 0.0025, 0.01 and 0.02 (dates: 0.005): "
        "validation exact match and loss after every epoch.",
    )
)


def values_at_rate(arm: str, rate: str, measure: str = "exact_match", at: int | None = None) -> list[float]:
    """One value per seed of ``measure`` for decoder ``arm`` (``cho``, ``start_only`` or ``attention``)
    trained at learning rate ``rate`` (one of :data:`DATE_RATES`): from the record ``dates`` at its own
    rate, 0.005, and from ``dates_rates`` at the others. The same seeds, batches and dates in both."""
    if rate not in DATE_RATES:
        raise ValueError(f"rate must be one of {', '.join(DATE_RATES)} (a string, as in the arm names), got {rate!r}")
    from attnbook import records

    if rate == "0.005":
        return records.load("dates").values(arm, measure, at)
    return records.load("dates_rates").values(f"{arm}, lr {rate}", measure, at)
