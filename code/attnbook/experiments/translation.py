"""Chapter 3's recorded experiment: attention decoders compared on the toy translation task.

:func:`translation_run` trains one arm from one seed and measures it after every pass
(exact match, loss, and where the model looks: :func:`alignment_letters`,
:func:`alignment_measures`). Registered as the record ``luong_scores``
(``./course experiments luong_scores``), which Chapter 3 reads.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from attnbook.attention import LocalPAttention
from attnbook.bahdanau import BahdanauSeq2Seq
from attnbook.data import Batches, Example, Splits, Vocab, build_vocabs, make_batch
from attnbook.decoding import greedy_decode
from attnbook.luong import LuongDecoder, LuongOutput, LuongSeq2Seq, LuongState
from attnbook.protocol import Step, evaluating
from attnbook.records import Experiment, register
from attnbook.rnn import Decoder, Encoder, Seq2Seq
from attnbook.tasks import sequence_splits, translation_alignment, translation_task
from attnbook.training import count_parameters, evaluate, fit

__all__ = [
    "TRANSLATION_ARMS",
    "CONTROL_ARMS",
    "WA_RATE_ARMS",
    "NO_ATTENTION_ARMS",
    "UNIFORM_ARMS",
    "PreviousQueryDecoder",
    "UniformWeightsDecoder",
    "TranslationData",
    "translation_data",
    "translation_model",
    "TranslationRun",
    "translation_run",
    "alignment_letters",
    "alignment_measures",
    "word_slips",
    "SLIP_ARMS",
    "slips_run",
    "FIRST_LETTER_ARMS",
    "on_word_by_letter",
    "first_letters_run",
]

#: Chapter 3's arms: a short name and what it is. Every arm has the same encoder (a bidirectional
#: GRU of 32 units per direction, annotations of 64), embeddings of 32 and a decoder state of 64.
TRANSLATION_ARMS = {
    "bahdanau": "Bahdanau (additive)",
    "dot": "Luong dot",
    "general": "Luong general",
    "concat": "Luong concat",
    "feeding": "Luong general + input feeding",
    "local": "Luong local-p (general + input feeding)",
}

#: Two control arms, recorded beside them: ``general`` with ``W_a`` set to the identity after the usual
#: initialisation, so it starts as ``dot`` with every other weight that of ``general`` from the same seed;
#: and the same with ``W_a`` frozen there, so it scores as ``dot`` throughout, with ``general``'s other
#: initial weights.
CONTROL_ARMS = {
    "identity": "Luong general, W_a starting at I",
    "frozen": "Luong general, W_a fixed at I",
    "previous": "Luong concat, queried by h_{t-1}",
}

#: A baseline recorded apart (``luong_no_attention``): Chapter 1's decoder, which reads one context
#: vector (the encoder's final state) at every step, on the same encoder and data, with the same
#: decoder state size, seeds, batches and settings as the arms of ``luong_scores``.
NO_ATTENTION_ARMS = {"no attention": "Chapter 1's decoder (no attention) on the Luong arms' encoder"}

#: A control recorded apart (``luong_uniform``): dot's decoder with its attention weights replaced by
#: equal weights on every source position, so it reads the mean annotation at every step. Its initial
#: parameters are dot's from the same seed (dot has no scoring weights), so against dot only the looking
#: changes; dot is recorded again beside it, so the two are paired within one record (one CPU).
UNIFORM_ARMS = {
    "dot": "Luong dot (as in luong_scores)",
    "uniform": "Luong dot's decoder, the attention weights fixed at 1/S on every source position",
}

#: A control recorded apart (``luong_wa_rate``): ``general`` from the same seed, with Adam's
#: learning rate for ``W_a`` alone scaled by a factor (every other weight at the usual rate).
WA_RATE_ARMS = {
    "general": "Luong general (as in luong_scores)",
    "W_a at 0.3x": "Luong general, W_a's learning rate 0.3 times the rest's",
    "W_a at 0.1x": "Luong general, W_a's learning rate 0.1 times the rest's",
}
WA_RATE_FACTORS = {"general": 1.0, "W_a at 0.3x": 0.3, "W_a at 0.1x": 0.1}

#: A control recorded apart (``luong_feeding``): input feeding and local-p on dot scores, which have
#: no W_a to lag (``luong_scores`` tries both on general only), beside dot itself.
FEEDING_ARMS = {
    "dot": "Luong dot (as in luong_scores)",
    "dot + feeding": "Luong dot + input feeding",
    "local-p, dot": "Luong local-p with dot scores (and input feeding)",
}


class PreviousQueryDecoder(LuongDecoder):
    """A control for Chapter 3: Luong's decoder with Bahdanau's query, the *previous* state.

    ``c_t, a_t = attention(h_{t-1}, h̄_1..h̄_S)``; the rest as :class:`~attnbook.luong.LuongDecoder`
    (``h_t = GRU(E y_{t-1}, h_{t-1})``, ``h̃_t = tanh(W_c [c_t; h_t])``, logits ``W_s h̃_t``), so
    against ``concat`` only the state that queries changes. Teacher forcing stays one GRU call.
    """

    def attend(self, query: Tensor, hidden: Tensor, state: LuongState) -> tuple[Tensor, Tensor]:
        """``h̃ = tanh(W_c [c; h])`` with ``c`` read by ``query``; one step ``(B, H)`` or all ``(B, T, H)``."""
        context, weights = self.attention(
            query, state.annotations, mask=state.src_mask, projected_keys=state.projected_keys
        )
        return torch.tanh(self.W_c(torch.cat([context, hidden], dim=-1))), weights

    def step(self, state: LuongState, prev: Tensor) -> Step:
        _, hidden = self.rnn(self.embedding(prev).unsqueeze(1), state.hidden.unsqueeze(0))  # (1, B, H)
        hidden = hidden.squeeze(0)  # h_t: (B, H)
        attentional, weights = self.attend(state.hidden, hidden, state)  # queried by h_{t-1}
        return Step(self.out(attentional), state._replace(hidden=hidden, attentional=attentional), weights)

    def forward(self, tgt_in: Tensor, state: LuongState) -> LuongOutput:
        states, _ = self.rnn(self.embedding(tgt_in), state.hidden.unsqueeze(0))  # h_1..h_T: (B, T, H)
        queries = torch.cat([state.hidden.unsqueeze(1), states[:, :-1]], dim=1)  # h_0..h_{T-1}
        attentional, weights = self.attend(queries, states, state)  # (B, T, H), (B, T, S)
        return LuongOutput(self.out(attentional), weights, states)


class UniformWeightsDecoder(LuongDecoder):
    """A control for Chapter 3: Luong's decoder that does not choose where to look.

    ``a_t = 1/S`` on each of the sentence's ``S`` positions (padding gets 0), so ``c_t`` is the mean
    annotation, the same at every step; the rest as :class:`~attnbook.luong.LuongDecoder`. The
    attention module is kept only so the weights load from a dot model; its scores are not used.
    """

    def attentional_state(self, hidden: Tensor, state: LuongState) -> tuple[Tensor, Tensor]:
        """``h̃ = tanh(W_c [c; h])`` with ``c`` the mean annotation; ``hidden`` ``(B, H)`` or ``(B, T, H)``."""
        mask = state.src_mask.to(hidden.dtype)  # (B, S): 1 on the sentence, 0 on padding
        weights = mask / mask.sum(dim=1, keepdim=True)  # a: (B, S), each row sums to 1
        context = torch.bmm(weights.unsqueeze(1), state.annotations).squeeze(1)  # c: (B, A)
        if hidden.dim() == 3:  # all T steps at once: the same c and a at each
            steps = hidden.size(1)
            context = context.unsqueeze(1).expand(-1, steps, -1)  # (B, T, A)
            weights = weights.unsqueeze(1).expand(-1, steps, -1)  # (B, T, S)
        return torch.tanh(self.W_c(torch.cat([context, hidden], dim=-1))), weights


class TranslationData(NamedTuple):
    """Chapter 3's data: 2 000 / 500 / 500 sentences of ``tasks.translation_task`` and their vocabularies."""

    splits: Splits
    src_vocab: Vocab
    tgt_vocab: Vocab


@functools.lru_cache(maxsize=1)
def translation_data() -> TranslationData:
    """The same sentences for every arm and seed (the data's own seed is 0)."""
    splits = sequence_splits(translation_task, n_train=2000, n_valid=500, n_test=500, seed=0)
    return TranslationData(splits, *build_vocabs(splits.train + splits.valid + splits.test))


def translation_model(arm: str, local_window: int = 5) -> torch.nn.Module:
    """A fresh model of one of :data:`TRANSLATION_ARMS` for :func:`translation_data`'s vocabularies."""
    src, tgt = len(translation_data().src_vocab), len(translation_data().tgt_vocab)
    if arm in WA_RATE_FACTORS:  # the same model as general; only its optimizer differs
        arm = "general"
    if arm in ("identity", "frozen"):
        model = translation_model("general")
        W_a = model.decoder.attention.scorer.W_a.weight
        with torch.no_grad():
            nn.init.eye_(W_a)  # W_a = I: h_tᵀ W_a h̄_s = h_tᵀ h̄_s
        W_a.requires_grad_(arm == "identity")  # frozen: no gradient, so Adam never moves it
        return model
    if arm == "previous":  # concat's initial weights from the same seed
        return _with_decoder(translation_model("concat"), PreviousQueryDecoder)
    if arm == "uniform":  # dot's initial weights from the same seed
        return _with_decoder(translation_model("dot"), UniformWeightsDecoder)
    if arm == "no attention":  # the Luong arms' encoder (32 units a direction), a 64-unit decoder
        encoder = Encoder(src, 32, 32, bidirectional=True)
        return Seq2Seq(encoder, Decoder(tgt, 32, 64, encoder.output_size))
    if arm == "bahdanau":
        return BahdanauSeq2Seq.build(src, tgt, embed_dim=32, hidden_size=64, attention_dim=64, encoder_hidden_size=32)
    scores = dict(
        dot=("dot", False, None),
        general=("general", False, None),
        concat=("concat", False, None),
        feeding=("general", True, None),
        local=("general", True, local_window),
        **{"dot + feeding": ("dot", True, None), "local-p, dot": ("dot", True, local_window)},
    )
    if arm not in scores:
        arms = [*TRANSLATION_ARMS, *CONTROL_ARMS, *NO_ATTENTION_ARMS, *UNIFORM_ARMS, *WA_RATE_ARMS, *FEEDING_ARMS]
        raise ValueError(f"unknown arm {arm!r}; the arms are {', '.join(dict.fromkeys(arms))}")
    score, input_feeding, window = scores[arm]
    return LuongSeq2Seq.build(
        src, tgt, embed_dim=32, hidden_size=64, score=score, input_feeding=input_feeding, local_window=window
    )


def _with_decoder(model: nn.Module, decoder_class: type[LuongDecoder]) -> nn.Module:
    """``model`` with its Luong decoder replaced by a ``decoder_class`` holding the same weights."""
    old = model.decoder
    decoder = decoder_class(len(translation_data().tgt_vocab), 32, 64, old.attention, old.pad_id)
    decoder.load_state_dict(old.state_dict())
    model.decoder = decoder
    return model


class TranslationRun(NamedTuple):
    """A trained model and its measures: each a list with one value per pass, ``parameters`` a count."""

    model: torch.nn.Module
    measures: dict


def translation_run(
    arm: str,
    seed: int,
    passes: int = 2,
    lr: float = 1e-2,
    batch_size: int = 32,
    on_pass: Callable[[torch.nn.Module, int], dict] | None = None,
) -> TranslationRun:
    """Train ``arm`` from ``seed`` (initial weights and batch order) and measure it after every pass.

    Adam with a fixed learning rate and gradient clipping at 1 (:func:`attnbook.training.fit`),
    batches of 32. After each pass: :func:`attnbook.training.evaluate` on the 500 validation
    sentences (``exact_match``, ``valid_loss``, ``teacher_forced_accuracy``) and
    :func:`alignment_measures` on the 500 test sentences. Training stops and resumes with the same
    optimizer, so the values after pass ``k`` are those of a run of ``k`` passes. ``on_pass(model, k)``,
    if given, is called after pass ``k``; its dict joins that pass's measures.
    """
    data = translation_data()
    torch.manual_seed(seed)
    model = translation_model(arm)
    train = Batches(data.splits.train, data.src_vocab, data.tgt_vocab, batch_size, shuffle=True, seed=seed)
    valid = Batches(data.splits.valid, data.src_vocab, data.tgt_vocab, batch_size=500)
    optimizer = torch.optim.Adam(_parameter_groups(model, arm, lr), lr=lr, foreach=True)  # what fit would make
    measures: dict = {}
    for done in range(1, passes + 1):
        fit(model, train, optimizer=optimizer, epochs=1)
        found = evaluate(model, valid)
        if hasattr(model.decoder, "attention"):  # the no-attention baseline has no weights to read
            found.update(alignment_measures(alignment_letters(model, data.splits.test)))
        if on_pass is not None:
            found.update(on_pass(model, done))
        for key, value in found.items():
            measures.setdefault(key, []).append(value)
    measures["parameters"] = count_parameters(model)
    return TranslationRun(model, measures)


def _parameter_groups(model: nn.Module, arm: str, lr: float) -> list[dict]:
    """One group at ``lr``; for the arms of :data:`WA_RATE_FACTORS` but ``general``, ``W_a`` in a
    group of its own at the arm's factor times ``lr``."""
    factor = WA_RATE_FACTORS.get(arm, 1.0)
    if factor == 1.0:
        return [{"params": list(model.parameters())}]
    W_a = model.decoder.attention.scorer.W_a.weight
    rest = [parameter for parameter in model.parameters() if parameter is not W_a]
    return [{"params": rest}, {"params": [W_a], "lr": factor * lr}]


def alignment_letters(model: nn.Module, examples: list[Example]) -> list[dict]:
    """Where a Chapter 3 model looks: one dict per target letter (spaces left out), teacher forced.

    Keys: ``on_word`` (weight on the source word the letter translates, from
    :func:`attnbook.tasks.translation_alignment`), ``total`` (the row's sum), ``argmax``, ``verb``,
    ``begin``/``end`` (the word's characters), ``t``, ``T``, ``S``, and for local-p ``centre``
    (its predicted ``p_t``) and ``D`` (its half-width).
    """
    data = translation_data()
    batch = make_batch(examples, data.src_vocab, data.tgt_vocab)
    attention = model.decoder.attention
    local = isinstance(attention, LocalPAttention)
    with torch.no_grad():
        out = model.eval()(batch.src, batch.tgt_in)  # weights: (B, T, S)
        centres = attention.centres(out.states, batch.src_mask) if local else None  # (B, T)
    letters = []
    for row, example in enumerate(examples):
        for t, aligned in enumerate(translation_alignment(example)):
            if aligned is None:  # a space
                continue
            begin, end, verb = aligned
            weights = out.weights[row, t]  # (S,)
            letter = dict(
                on_word=weights[begin:end].sum().item(),
                total=weights.sum().item(),
                verb=verb,
                begin=begin,
                end=end,
                argmax=weights.argmax().item(),
                t=t,
                T=len(example.target),
                S=len(example.source),
            )
            if local:
                letter.update(centre=centres[row, t].item(), D=attention.D)
            letters.append(letter)
    return letters


def alignment_measures(letters: list[dict]) -> dict[str, float]:
    """Means over letters: ``on_word``, ``share`` (on_word / total), ``total``; for local-p also
    ``reached`` (the window overlaps the right word), ``reached_verb``, ``random`` (the chance a
    centre drawn uniformly from (0, S) would), ``diagonal`` (a centre at t/T·S would),
    ``median_offset``/``mean_offset`` (argmax − p_t) and ``far_offset`` (|argmax − p_t| ≥ 3).
    """

    def mean(key, where=lambda r: True) -> float:
        values = [r[key] for r in letters if where(r)]
        return float(np.mean(values)) if values else float("nan")  # nan: no such letters

    for r in letters:
        r["share"] = r["on_word"] / r["total"]
    measures = dict(on_word=mean("on_word"), share=mean("share"), total=mean("total"))
    if "centre" not in letters[0]:
        return measures
    for r in letters:
        D = r["D"]
        reaches = lambda centre: r["begin"] - D <= centre <= r["end"] - 1 + D  # noqa: E731
        low, high = max(0.0, r["begin"] - D), min(float(r["S"]), r["end"] - 1 + D)
        r.update(
            reached=reaches(r["centre"]),
            random=max(0.0, high - low) / r["S"],
            diagonal=reaches(r["t"] / r["T"] * r["S"]),
            offset=r["argmax"] - r["centre"],
        )
    offsets = np.array([r["offset"] for r in letters])
    return {
        **measures,
        "reached": mean("reached"),
        "reached_verb": mean("reached", lambda r: r["verb"]),
        "random": mean("random"),
        "diagonal": mean("diagonal"),
        "median_offset": float(np.median(np.abs(offsets))),
        "mean_offset": float(offsets.mean()),
        "far_offset": float(np.mean(np.abs(offsets) >= 3)),
    }


register(
    Experiment(
        name="luong_scores",
        run=lambda arm, seed, **settings: translation_run(arm, seed, **settings).measures,
        arms=(*TRANSLATION_ARMS, *CONTROL_ARMS),
        seeds=tuple(range(20)),
        settings=dict(passes=12, lr=1e-2, batch_size=32),
        replay=dict(arm="dot", seed=0, passes=1),
        chapter="chapters/03_luong.ipynb",
        description="Bahdanau's decoder and Luong's (dot, general, concat, general with input feeding, local-p; "
        "controls: general with W_a starting at or fixed at the identity, concat queried by h_{t-1}) with one "
        "encoder on the toy translation task; exact "
        "match, loss and where the models look, after every pass.",
    )
)


register(
    Experiment(
        name="luong_scores_slow",
        run=lambda arm, seed, **settings: translation_run(arm, seed, **settings).measures,
        arms=("bahdanau", "dot", "general", "concat"),
        seeds=tuple(range(10)),
        settings=dict(passes=12, lr=3e-3, batch_size=32),
        replay=dict(arm="dot", seed=0, passes=1),
        chapter="chapters/03_luong.ipynb",
        description="luong_scores' four plain scores (Bahdanau, dot, general, concat; the same seeds, batches "
        "and data) at Adam learning rate 0.003 instead of 0.01: exact match, loss and where the models look, "
        "after every pass.",
    )
)


register(
    Experiment(
        name="luong_no_attention",
        run=lambda arm, seed, **settings: translation_run(arm, seed, **settings).measures,
        arms=tuple(NO_ATTENTION_ARMS),
        seeds=tuple(range(20)),
        settings=dict(passes=12, lr=1e-2, batch_size=32),
        replay=dict(arm="no attention", seed=0, passes=1),
        chapter="chapters/03_luong.ipynb",
        description="A baseline for Chapter 3: Chapter 1's decoder (one context vector, no attention) on the "
        "encoder of luong_scores' Luong arms, with their seeds, batches and settings; exact match, loss and "
        "teacher-forced accuracy after every pass.",
    )
)


register(
    Experiment(
        name="luong_uniform",
        run=lambda arm, seed, **settings: translation_run(arm, seed, **settings).measures,
        arms=tuple(UNIFORM_ARMS),
        seeds=tuple(range(20)),
        settings=dict(passes=12, lr=1e-2, batch_size=32),
        replay=dict(arm="uniform", seed=0, passes=1),
        chapter="chapters/03_luong.ipynb",
        description="A control for Chapter 3's question whether choosing where to look matters: dot's decoder "
        "with equal attention weights on every source position (the mean annotation at every step), from dot's "
        "initial parameters, beside dot itself (recorded again here, so the two pair within one record), with "
        "luong_scores' seeds, batches and settings; the same measures after every pass.",
    )
)


register(
    Experiment(
        name="luong_wa_rate",
        run=lambda arm, seed, **settings: translation_run(arm, seed, **settings).measures,
        arms=tuple(WA_RATE_ARMS),
        seeds=tuple(range(8)),
        settings=dict(passes=12, lr=1e-2, batch_size=32),
        replay=dict(arm="W_a at 0.1x", seed=0, passes=1),
        chapter="chapters/03_luong.ipynb",
        description="A control for Chapter 3's general score: the same model, seeds, batches and settings as "
        "luong_scores' general (recorded again here, so the two records can be checked equal), with W_a's "
        "learning rate alone at 0.3 and 0.1 times the rest's; the same measures after every pass.",
    )
)


register(
    Experiment(
        name="luong_feeding",
        run=lambda arm, seed, **settings: translation_run(arm, seed, **settings).measures,
        arms=tuple(FEEDING_ARMS),
        seeds=tuple(range(20)),
        settings=dict(passes=12, lr=1e-2, batch_size=32),
        replay=dict(arm="dot + feeding", seed=0, passes=1),
        chapter="chapters/03_luong.ipynb",
        description="A control for Chapter 3's input feeding and local-p, which luong_scores tries on general "
        "scores only: both on dot scores, beside dot (recorded again here, so the records can be checked equal); "
        "the same seeds, batches, settings and measures as luong_scores.",
    )
)


def word_slips(model: nn.Module, examples: list[Example]) -> dict[str, float]:
    """Greedy translations of ``examples`` read word by word against their targets: the share of
    sentences with a word written more often than the target has it (``repeated``), with a target
    word written fewer times than the target has it (``dropped``), and exact (``exact``). A repeat is
    the slip coverage is meant to prevent: the decoder forgets that a source word was already used."""
    data = translation_data()
    batch = make_batch(examples, data.src_vocab, data.tgt_vocab)
    longest = max(len(example.target) for example in examples)
    decoded = greedy_decode(model, batch.src, max_len=longest + 5)
    texts = [data.tgt_vocab.decode(tokens) for tokens in decoded.tokens]
    repeated = dropped = exact = 0
    for text, example in zip(texts, examples):
        written, wanted = Counter(text.split()), Counter(example.target.split())
        repeated += any(count > wanted[word] for word, count in written.items())
        dropped += any(count > written[word] for word, count in wanted.items())
        exact += text == example.target
    n = len(examples)
    return dict(repeated=repeated / n, dropped=dropped / n, exact=exact / n)


#: ``luong_slips``: dot and dot + input feeding from luong_feeding (the same seeds and training).
SLIP_ARMS = ("dot", "dot + feeding")


def slips_run(arm: str, seed: int, passes: int = 12) -> dict:
    """``arm`` trained as in ``luong_feeding``; after every pass, :func:`word_slips` on the 500 test
    sentences (``repeated``, ``dropped``, ``exact``) beside the record's own ``exact_match``."""
    if arm not in SLIP_ARMS:
        raise ValueError(f"unknown arm {arm!r}; the arms are {', '.join(SLIP_ARMS)}")
    test = translation_data().splits.test
    measures = translation_run(arm, seed, passes, on_pass=lambda model, done: word_slips(model, test)).measures
    return {key: measures[key] for key in ("exact_match", "repeated", "dropped", "exact")}


register(
    Experiment(
        name="luong_slips",
        run=slips_run,
        arms=SLIP_ARMS,
        seeds=tuple(range(10)),
        settings=dict(passes=12),
        replay=dict(arm="dot + feeding", seed=0, passes=1),
        chapter="chapters/03_luong.ipynb",
        description="Does input feeding prevent the slip it is meant to prevent? Dot and dot + input feeding, "
        "trained as in luong_feeding (the same seeds, batches and settings); after every pass the greedy "
        "translations of the 500 test sentences read word by word: the share with a word written more often "
        "than the target has it (repeated), with a target word missing (dropped), and exact.",
    )
)


#: The arms whose heatmaps Chapter 3 draws, and the passes after which ``luong_maps`` keeps them.
MAP_ARMS = ("dot", "feeding", "local")
MAP_PASSES = (2, 12)


def map_example() -> Example:
    """Chapter 3's heatmap sentence: the first test sentence of five words (two adjectives)."""
    return next(example for example in translation_data().splits.test if len(example.source.split()) == 5)


def map_run(arm: str, seed: int, passes: int = 12, keep: tuple[int, ...] = MAP_PASSES) -> dict:
    """:func:`translation_run` of ``arm``, keeping its teacher-forced weights on :func:`map_example`.

    Curves, one entry per pass: ``weights`` (a ``(T, S)`` list of lists after the passes in
    ``keep``, ``None`` after the others), for local-p also ``centres`` (its ``p_t``, ``T`` numbers),
    and ``exact_match``. Rounded to 4 decimals: a picture, not a measurement.
    """
    data = translation_data()
    example = map_example()
    batch = make_batch([example], data.src_vocab, data.tgt_vocab)

    def on_pass(model: nn.Module, done: int) -> dict:
        if done not in keep:
            return {"weights": None, **({"centres": None} if arm == "local" else {})}
        with evaluating(model), torch.no_grad():
            out = model(batch.src, batch.tgt_in)  # weights: (1, T, S)
            found = {"weights": out.weights[0].round(decimals=4).tolist()}  # (T, S)
            if arm == "local":
                centres = model.decoder.attention.centres(out.states, batch.src_mask)[0]  # (T,)
                found["centres"] = centres.round(decimals=4).tolist()
        return found

    measures = translation_run(arm, seed, passes, on_pass=on_pass).measures
    return {key: measures[key] for key in ("weights", "centres", "exact_match") if key in measures}


register(
    Experiment(
        name="luong_maps",
        run=map_run,
        arms=MAP_ARMS,
        seeds=tuple(range(8)),
        settings=dict(passes=12),
        replay=dict(arm="dot", seed=0, passes=2),
        chapter="chapters/03_luong.ipynb",
        description="The heatmaps of Chapter 3's sentence (map_example) for dot, general with input feeding and "
        "local-p, after 2 and 12 passes (luong_scores' runs), every seed; the chapter draws seed 0's.",
    )
)


#: The arms whose weight on the right word ``luong_first_letters`` splits by letter.
FIRST_LETTER_ARMS = ("bahdanau", "dot", "general", "concat")


def on_word_by_letter(model: nn.Module, examples: list[Example]) -> dict[str, float]:
    """The mean weight on the right source word (``on_word`` of :func:`alignment_letters`), split
    into each target word's first letter (``on_word_first``: the letter that needs the source)
    and its other letters (``on_word_later``: the task's shortcut lets the decoder write them from
    the letters before, once it knows the kind of word). In the test sentences about one later
    letter in seven still needs the source: the letters before it, and the word order, still fit
    two words of different kinds, as "v" fits "ves" and "vid"."""
    letters = alignment_letters(model, examples)
    targets = [example.target for example in examples for t, c in enumerate(example.target) if c != " "]
    firsts = [letter["t"] == 0 or target[letter["t"] - 1] == " " for letter, target in zip(letters, targets)]
    first = [letter["on_word"] for letter, is_first in zip(letters, firsts) if is_first]
    later = [letter["on_word"] for letter, is_first in zip(letters, firsts) if not is_first]
    return dict(on_word_first=float(np.mean(first)), on_word_later=float(np.mean(later)))


def first_letters_run(arm: str, seed: int, passes: int = 2) -> dict:
    """:func:`translation_run` of ``arm`` (as in ``luong_scores``), measured after every pass with
    :func:`on_word_by_letter` on the 500 test sentences; also ``exact_match`` and ``on_word``."""
    if arm not in FIRST_LETTER_ARMS:
        raise ValueError(f"unknown arm {arm!r}; the arms are {', '.join(FIRST_LETTER_ARMS)}")
    test = translation_data().splits.test

    def on_pass(model: nn.Module, done: int) -> dict:
        with evaluating(model):
            return on_word_by_letter(model, test)

    measures = translation_run(arm, seed, passes, on_pass=on_pass).measures
    keep = ("exact_match", "on_word", "on_word_first", "on_word_later")
    return {key: measures[key] for key in keep}


register(
    Experiment(
        name="luong_first_letters",
        run=first_letters_run,
        arms=FIRST_LETTER_ARMS,
        seeds=tuple(range(10)),
        settings=dict(passes=2),
        replay=dict(arm="dot", seed=0, passes=1),
        chapter="chapters/03_luong.ipynb",
        description="Where Chapter 3's decoders look, letter by letter: the weight on the right source word "
        "(teacher forced, the 500 test sentences) split into each target word's first letter, which needs the "
        "source, and its other letters, which the task's shortcut lets the decoder write from the letters before; "
        "Bahdanau, dot, general and concat as in luong_scores, 2 passes.",
    )
)
