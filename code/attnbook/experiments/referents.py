"""Chapters 4 and 5's recorded experiments on word-level sentences.

- ``senses`` (Chapter 4, Experiment 1): one self-attention layer tags "bat" as an animal or a
  piece of sport equipment from its context. The held-out sentences use triples of sense words
  that no training sentence uses (:func:`sense_splits`): the tag of "bat" depends on those three
  words alone, and an order-blind model reads a reordering exactly as the original.
- ``referents`` (Chapter 4, Experiment 2): one- and two-layer models name what "it" refers to
  in "the <animal> didn't cross the <place> because it was too <adjective>"; where the last
  layer's weight from "it" goes, and what explains it.
- ``referent_heads`` (Chapter 5): the same sentences read by one multi-head attention layer
  with one head or two; which head reads what, and what the answers lose when one head's
  output is removed.

Every seed trains on the same split (the data's seed is 0); the seed draws the initial
weights and the order of the batches.
"""

from __future__ import annotations

import itertools
import random
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnbook import tasks
from attnbook.attention import MultiHeadAttention, SelfAttention, split_heads
from attnbook.data import Example, Splits, Vocab
from attnbook.records import Experiment, check_arm, register, split_rate_arm
from attnbook.training import train_on_tensors

__all__ = [
    "TinySelfAttention",
    "Reader",
    "sense_splits",
    "sense_triple",
    "sense_vocab",
    "encode_senses",
    "sense_model",
    "sense_run",
    "referent_split",
    "referent_vocab",
    "encode_referents",
    "it_weights",
    "weight_explained",
    "ReferentData",
    "referent_model",
    "referent_run",
    "without_head",
    "head_outputs",
    "averaged_head",
    "noun_head",
    "heads_model",
    "heads_run",
    "averaged_run",
    "RATE_ARMS",
    "heads_rate_run",
    "IT",
    "ANIMAL",
    "PLACE",
    "ADJECTIVE",
    "TAGS",
]

#: Positions in every referent sentence: "the <animal> didn't cross the <place> because it was too <adjective>".
IT, ANIMAL, PLACE, ADJECTIVE = 7, 1, 5, 10
#: The sense task's tags: neither, animal, sport.
TAGS = {"-": 0, "A": 1, "S": 2}


class TinySelfAttention(nn.Module):
    """Chapter 4's model: embedding, then ``layers`` times ``x <- x + SelfAttention(x)``, then a
    linear read-out at every position.

    Shapes:
        ids ``(B, T)`` -> (logits ``(B, T, n_outputs)``, outputs ``(B, T, d_model)``,
        one weights tensor ``(B, T, T)`` per layer)
    """

    def __init__(self, vocab_size: int, d_model: int, layers: int, n_outputs: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(SelfAttention(d_model) for _ in range(layers))
        self.out = nn.Linear(d_model, n_outputs)

    def forward(self, ids: Tensor) -> tuple[Tensor, Tensor, list[Tensor]]:
        x = self.embedding(ids)  # (B, T, d_model)
        weights = []
        for layer in self.layers:
            z, w = layer(x)  # (B, T, d_model), (B, T, T)
            x = x + z
            weights.append(w)
        return self.out(x), x, weights


class Reader(nn.Module):
    """Chapter 5's model: embedding, one :class:`~attnbook.attention.MultiHeadAttention` layer
    with a residual connection, a linear read-out at every position.

    Shapes:
        ids ``(B, T)`` -> (logits ``(B, T, vocab_size)``, weights ``(B, H, T, T)``)
    """

    def __init__(self, vocab_size: int, num_heads: int, d_model: int = 16) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.out = nn.Linear(d_model, vocab_size)

    def forward(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        x = self.embedding(ids)  # (B, T, d_model)
        z, weights = self.attention(x, x, x)  # (B, T, d_model), (B, H, T, T)
        return self.out(x + z), weights


# ---------------------------------------------------------------------------------- senses


def sense_triple(source: str) -> tuple[str, ...]:
    """The three context words of a sense-task sentence, sorted: what decides the tag of "bat"."""
    context = {*tasks.BAT_CONTEXT["animal"], *tasks.BAT_CONTEXT["sport"]}
    return tuple(sorted(word for word in source.split() if word in context))


#: The share of each sense's context triples (C(8, 3) = 56 per sense) held out for testing.
HELD_OUT_TRIPLES = 0.2


def sense_splits(n_train: int = 2000, n_test: int = 500, seed: int = 0) -> Splits:
    """Sense-task sentences split by their context words: a fifth of each sense's 56 possible
    triples of sense words (11 per sense, drawn with ``seed``) occur only in the test sentences,
    so no held-out sentence can be tagged by having seen its context words together with "bat"
    in training."""
    rng, held_out = random.Random(seed), set()
    for sense in sorted(tasks.BAT_CONTEXT):  # the same number of held-out triples for each sense
        triples = sorted(tuple(sorted(words)) for words in itertools.combinations(tasks.BAT_CONTEXT[sense], 3))
        held_out.update(rng.sample(triples, round(HELD_OUT_TRIPLES * len(triples))))
    train: list[Example] = []
    test: list[Example] = []
    draw = 0
    while len(train) < n_train or len(test) < n_test:
        for example in tasks.sense_task(1000, seed=seed * 1000 + draw):
            split = test if sense_triple(example.source) in held_out else train
            if len(split) < (n_test if split is test else n_train):
                split.append(example)
        draw += 1
    return Splits(train, [], test)


def sense_vocab() -> Vocab:
    """The sense task's words: "bat", its two senses' context words and the neutral words."""
    words = {"bat", *tasks.NEUTRAL_WORDS, *tasks.BAT_CONTEXT["animal"], *tasks.BAT_CONTEXT["sport"]}
    return Vocab(sorted(words), name="words")


def encode_senses(examples: list[Example], vocab: Vocab) -> tuple[Tensor, Tensor]:
    """Word ids ``(N, 6)`` and tag ids ``(N, 6)`` (:data:`TAGS`)."""
    words = torch.tensor([vocab.encode(e.source.split()) for e in examples])
    tags = torch.tensor([[TAGS[t] for t in e.target.split()] for e in examples])
    return words, tags


def sense_model(seed: int, epochs: int = 30, d_model: int = 16) -> TinySelfAttention:
    """Chapter 4's one-layer tagger trained from ``seed`` on :func:`sense_splits`' training
    sentences, as :func:`sense_run` trains it (the ``senses`` record's models)."""
    vocab = sense_vocab()
    x_train, y_train = encode_senses(sense_splits().train, vocab)
    torch.manual_seed(seed)
    model = TinySelfAttention(len(vocab), d_model=d_model, layers=1, n_outputs=len(TAGS))
    train_on_tensors(
        model, x_train, y_train, lambda logits, y: F.cross_entropy(logits.flatten(0, 1), y.flatten()), epochs, seed=seed
    )
    return model


def sense_run(arm: str, seed: int, epochs: int = 30, d_model: int = 16) -> dict:
    """Train Chapter 4's one-layer tagger from ``seed`` on :func:`sense_splits`; measure it on
    the held-out sentences.

    Returns ``bat_accuracy`` (the sense of "bat" right), ``tag_accuracy`` (every tag),
    ``context_weight`` (the mean weight from "bat" on the three words of its sense),
    ``self_weight`` (on itself), ``cosine_same`` and ``cosine_different`` (the mean cosine
    similarity of two outputs at "bat" from sentences of the same and of different senses), and
    the context and self weights separately over the sentences of each sense
    (``context_weight_animal``, ``self_weight_sport``, ...).
    """
    check_arm(arm, ("tagger",))
    vocab = sense_vocab()
    x_test, y_test = encode_senses(sense_splits().test, vocab)
    model = sense_model(seed, epochs, d_model)
    with torch.no_grad():
        logits, outputs, (weights,) = model(x_test)  # (N, 6, 3), (N, 6, d), (N, 6, 6)
    is_bat = x_test == vocab.encode(["bat"])[0]  # (N, 6), one True per row
    bat_row = weights[is_bat]  # (N, 6): the weights from "bat"
    sense_words = (y_test != TAGS["-"]) & ~is_bat  # (N, 6): the three words of its sense
    unit = F.normalize(outputs[is_bat], dim=-1)  # (N, d)
    cosine = unit @ unit.T
    senses = y_test[is_bat]
    same = senses[:, None] == senses[None, :]
    others = ~torch.eye(len(unit), dtype=torch.bool)
    by_sense = {}
    for sense, tag in (("animal", TAGS["A"]), ("sport", TAGS["S"])):
        chosen = senses == tag  # (N,): the sentences of this sense
        by_sense[f"context_weight_{sense}"] = (bat_row * sense_words)[chosen].sum(-1).mean().item()
        by_sense[f"self_weight_{sense}"] = weights[is_bat.unsqueeze(-1) & is_bat.unsqueeze(-2)][chosen].mean().item()
    return dict(
        **by_sense,
        bat_accuracy=(logits.argmax(-1)[is_bat] == y_test[is_bat]).float().mean().item(),
        tag_accuracy=(logits.argmax(-1) == y_test).float().mean().item(),
        context_weight=(bat_row * sense_words).sum(-1).mean().item(),
        self_weight=weights[is_bat.unsqueeze(-1) & is_bat.unsqueeze(-2)].mean().item(),
        cosine_same=cosine[same & others].mean().item(),
        cosine_different=cosine[~same].mean().item(),
    )


register(
    Experiment(
        name="senses",
        run=sense_run,
        arms=("tagger",),
        seeds=tuple(range(10)),
        settings=dict(epochs=30, d_model=16),
        replay=dict(arm="tagger", seed=0),
        chapter="chapters/04_self_attention.ipynb",
        description="Chapter 4's one-layer self-attention tagger on the 'bat' sentences (2 000 to train on, 500 "
        "held out, whose triples of sense words no training sentence uses), 30 passes: how often the sense of 'bat' is "
        "right, where its weight goes, and how alike its outputs are within and across senses.",
    )
)


# ------------------------------------------------------------------------------ referents


class ReferentData(NamedTuple):
    """The referent sentences, encoded: ``train`` and ``test`` as (ids ``(N, 11)``, referent ids
    ``(N,)``), ``is_animal`` ``(N_test,)`` and the same for ``every`` sentence (all 768)."""

    train: tuple[Tensor, Tensor]
    test: tuple[Tensor, Tensor]
    test_is_animal: Tensor
    every: tuple[Tensor, Tensor]
    every_examples: list[Example]


def referent_split(seed: int = 0) -> tuple[list[Example], list[Example]]:
    """Chapters 4 and 5's split of the 768 referent sentences: 576 to train on, 192 held out."""
    sentences = tasks.referent_sentences()
    random.Random(seed).shuffle(sentences)
    return sentences[192:], sentences[:192]


def referent_vocab() -> Vocab:
    """The referent sentences' words."""
    words = {
        *"the didn't cross because it was too".split(),
        *tasks.ANIMALS,
        *tasks.PLACES,
        *tasks.ANIMAL_ADJECTIVES,
        *tasks.PLACE_ADJECTIVES,
    }
    return Vocab(sorted(words), name="words")


def encode_referents(examples: list[Example], vocab: Vocab) -> tuple[Tensor, Tensor]:
    """Word ids ``(N, 11)`` and the referent's id ``(N,)``."""
    words = torch.tensor([vocab.encode(e.source.split()) for e in examples])
    return words, torch.tensor(vocab.encode([e.target for e in examples]))


def _referent_data(vocab: Vocab, split: int = 0) -> ReferentData:
    train, test = referent_split(split)
    every = tasks.referent_sentences()
    return ReferentData(
        encode_referents(train, vocab),
        encode_referents(test, vocab),
        torch.tensor([e.target in tasks.ANIMALS for e in test]),
        encode_referents(every, vocab),
        every,
    )


def it_weights(weights: Tensor, is_animal: Tensor) -> dict:
    """Where the weight from "it" goes, for weights ``(N, T, T)`` and ``is_animal`` ``(N,)``.

    Returns the mean weight on the ``right`` noun, the ``wrong`` noun and the ``adjective``, and
    the share of sentences whose largest weight falls on each of them (``top_right``,
    ``top_wrong``, ``top_adjective``) or elsewhere (``top_other``), and the first and third of
    these separately over the sentences about the animal and about the place
    (``top_right_animal``, ``top_adjective_place``, ...).
    """
    rows = weights[:, IT]  # (N, T)
    every = torch.arange(len(rows))
    right_at = torch.where(is_animal, ANIMAL, PLACE)
    wrong_at = torch.where(is_animal, PLACE, ANIMAL)
    top = rows.argmax(-1)
    top_right, top_wrong, top_adjective = (top == right_at), (top == wrong_at), (top == ADJECTIVE)
    by_kind = {}
    for kind, chosen in (("animal", is_animal), ("place", ~is_animal)):
        by_kind[f"top_right_{kind}"] = top_right[chosen].float().mean().item()
        by_kind[f"top_adjective_{kind}"] = top_adjective[chosen].float().mean().item()
    return dict(
        right=rows[every, right_at].mean().item(),
        wrong=rows[every, wrong_at].mean().item(),
        adjective=rows[:, ADJECTIVE].mean().item(),
        top_right=top_right.float().mean().item(),
        top_wrong=top_wrong.float().mean().item(),
        top_adjective=top_adjective.float().mean().item(),
        top_other=(~(top_right | top_wrong | top_adjective)).float().mean().item(),
        **by_kind,
    )


def _r_squared(y: Tensor, columns: list[Tensor]) -> float:
    """R² of the least-squares fit of ``y (N,)`` on an intercept and ``columns`` (each ``(N,)``)."""
    design = torch.stack([torch.ones_like(y), *columns], dim=1).double()
    solution = torch.linalg.lstsq(design, y.double().unsqueeze(1)).solution
    residual = y.double() - (design @ solution).squeeze(1)
    return 1.0 - (residual.pow(2).sum() / (y.double() - y.double().mean()).pow(2).sum()).item()


def _one_hot(examples: list[Example], slot: int, words: tuple[str, ...]) -> list[Tensor]:
    """Indicator columns for the word at ``slot``, one per word but the first."""
    at = [e.source.split()[slot] for e in examples]
    return [torch.tensor([w == word for w in at], dtype=torch.float64) for word in words[1:]]


def weight_explained(weights: Tensor, examples: list[Example]) -> dict:
    """How much of the weight from "it" on the right noun the sentence's words explain.

    ``weights (N, T, T)`` over ``examples``. Returns R² of a least-squares fit on: ``r2_nouns``, the
    animal and the place (one indicator per word, 14 columns); ``r2_referent``, whether "it" is
    the animal (one column); ``r2_both``, all of them.
    """
    is_animal = torch.tensor([e.target in tasks.ANIMALS for e in examples])
    right_at = torch.where(is_animal, ANIMAL, PLACE)
    y = weights[torch.arange(len(weights)), IT, right_at]
    nouns = _one_hot(examples, ANIMAL, tasks.ANIMALS) + _one_hot(examples, PLACE, tasks.PLACES)
    referent = [is_animal.double()]
    return dict(
        r2_nouns=_r_squared(y, nouns), r2_referent=_r_squared(y, referent), r2_both=_r_squared(y, nouns + referent)
    )


def _it_loss(logits: Tensor, referents: Tensor) -> Tensor:
    return F.cross_entropy(logits[:, IT], referents)


#: The arms: (layers, a multiple of the record's passes).
REFERENT_ARMS = {
    "one layer": (1, 1),
    "two layers": (2, 1),
    "one layer, 180 passes": (1, 3),
    "two layers, 180 passes": (2, 3),
}


def referent_model(layers: int, seed: int, epochs: int = 60, d_model: int = 16, split: int = 0) -> TinySelfAttention:
    """Chapter 4's model with ``layers`` layers trained from ``seed`` for ``epochs`` passes on the
    split :func:`referent_split` draws from ``split``, as :func:`referent_run` trains it (the
    ``referents`` record's models)."""
    vocab = referent_vocab()
    data = _referent_data(vocab, split)
    torch.manual_seed(seed)
    model = TinySelfAttention(len(vocab), d_model=d_model, layers=layers, n_outputs=len(vocab))
    train_on_tensors(model, *data.train, _it_loss, epochs=epochs, seed=seed)
    return model


def referent_run(arm: str, seed: int, epochs: int = 60, d_model: int = 16, split: int = 0) -> dict:
    """Train Chapter 4's model with one or two layers from ``seed`` (:data:`REFERENT_ARMS`: the
    arms "..., 180 passes" train three times ``epochs``) on the split :func:`referent_split`
    draws from ``split``; measure it.

    Returns the held-out ``accuracy`` and the ``train_accuracy`` on the training sentences;
    :func:`it_weights` of the last layer on the held-out sentences; :func:`weight_explained` of
    the last layer over all 768 sentences.
    """
    check_arm(arm, REFERENT_ARMS)
    layers, times = REFERENT_ARMS[arm]
    data = _referent_data(referent_vocab(), split)
    model = referent_model(layers, seed, epochs * times, d_model, split)
    with torch.no_grad():
        logits, _, weights = model(data.test[0])
        train_logits, _, _ = model(data.train[0])
        _, _, every_weights = model(data.every[0])
    return dict(
        accuracy=(logits[:, IT].argmax(-1) == data.test[1]).float().mean().item(),
        train_accuracy=(train_logits[:, IT].argmax(-1) == data.train[1]).float().mean().item(),
        **it_weights(weights[-1], data.test_is_animal),
        **weight_explained(every_weights[-1], data.every_examples),
    )


register(
    Experiment(
        name="referents",
        run=referent_run,
        arms=tuple(REFERENT_ARMS),
        seeds=tuple(range(10)),
        settings=dict(epochs=60, d_model=16),
        replay=dict(arm="one layer", seed=0),
        chapter="chapters/04_self_attention.ipynb",
        description="Chapter 4's self-attention model with one and two layers on the 'it' sentences (576 to train "
        "on, 192 held out), 60 passes (and 180, to check the budget): held-out and training accuracy; where the "
        "last layer's weight from 'it' goes, on average "
        "and as the largest weight of each sentence; and how much of the weight on the right noun the two nouns "
        "and the referent explain (R² over all 768 sentences).",
    )
)


register(
    Experiment(
        name="referents_second_split",
        run=referent_run,
        arms=tuple(REFERENT_ARMS),
        seeds=tuple(range(10)),
        settings=dict(epochs=60, d_model=16, split=1),
        replay=dict(arm="two layers", seed=0, split=1),
        chapter="chapters/04_self_attention.ipynb",
        description="The record referents on another draw of the 192 held-out sentences (split seed 1): one and "
        "two layers, 60 and 180 passes, the same measures.",
    )
)


register(
    Experiment(
        name="referents_more_seeds",
        run=referent_run,
        arms=("one layer", "two layers"),
        seeds=tuple(range(10, 20)),
        settings=dict(epochs=60, d_model=16),
        replay=dict(arm="one layer", seed=10),
        chapter="chapters/04_self_attention.ipynb",
        description="The record referents' two 60-pass arms (one and two layers, the same draw of held-out "
        "sentences) with ten more seeds, 10 to 19: the same measures.",
    )
)


def adjective_term(model: TinySelfAttention, data: ReferentData) -> dict:
    """Chapter 4's check of a one-layer model, over all 768 sentences: its answers at "it" with and
    without the adjective's term ``alpha_adj v_adj`` of the attention sum.

    Returns ``right_with`` and ``right_without`` (shares answered right); ``split_pairs``, how many
    of the 64 pairs of nouns get more than one answer over their 12 adjectives without the term;
    ``without_a_noun``, the share whose answer without the term is one of the sentence's two nouns;
    and ``term_ranks``, the share in which the term alone (through the read-out) scores every noun of
    the referent's kind above every noun of the other kind.
    """
    ids, referents = data.every  # (768, T), (768,)
    layer = model.layers[0]
    with torch.no_grad():
        embedded = model.embedding(ids)  # (768, T, d_model)
        mixed, alphas = layer(embedded)  # (768, T, d_model), (768, T, T)
        values = layer.v_proj(embedded)  # (768, T, d_model)
        term = alphas[:, IT, ADJECTIVE, None] * values[:, ADJECTIVE]  # (768, d_model)
        at_it = embedded[:, IT] + mixed[:, IT]  # (768, d_model)
        kept = model.out(at_it).argmax(-1)  # (768,)
        dropped = model.out(at_it - term).argmax(-1)
        pushed = term @ model.out.weight.T  # (768, vocabulary): the term alone, no biases
    vocab = referent_vocab()
    animals = torch.tensor(vocab.encode(list(tasks.ANIMALS)))
    places = torch.tensor(vocab.encode(list(tasks.PLACES)))
    animals_up = pushed[:, animals].min(-1).values > pushed[:, places].max(-1).values
    places_up = pushed[:, places].min(-1).values > pushed[:, animals].max(-1).values
    about_animal = torch.tensor([e.target in tasks.ANIMALS for e in data.every_examples])
    by_pair = dropped.view(64, 12)  # (pairs of nouns, adjectives), the order of referent_sentences
    two_nouns = torch.stack([ids[:, ANIMAL], ids[:, PLACE]], dim=-1)  # (768, 2)
    return dict(
        right_with=(kept == referents).float().mean().item(),
        right_without=(dropped == referents).float().mean().item(),
        split_pairs=int((~(by_pair == by_pair[:, :1]).all(dim=1)).sum()),
        without_a_noun=(dropped[:, None] == two_nouns).any(-1).float().mean().item(),
        term_ranks=torch.where(about_animal, animals_up, places_up).float().mean().item(),
    )


def adjective_term_run(arm: str, seed: int, epochs: int = 60, d_model: int = 16) -> dict:
    """The ``referents`` record's one-layer model from ``seed`` (the same training), with its
    ``train_accuracy`` and :func:`adjective_term`."""
    check_arm(arm, ("one layer",))
    data = _referent_data(referent_vocab())
    model = referent_model(1, seed, epochs, d_model)
    with torch.no_grad():
        train_logits, _, _ = model(data.train[0])
    train_accuracy = (train_logits[:, IT].argmax(-1) == data.train[1]).float().mean().item()
    return dict(train_accuracy=train_accuracy, **adjective_term(model, data))


register(
    Experiment(
        name="referents_adjective_term",
        run=adjective_term_run,
        arms=("one layer",),
        seeds=tuple(range(20)),
        settings=dict(epochs=60, d_model=16),
        replay=dict(arm="one layer", seed=0),
        chapter="chapters/04_self_attention.ipynb",
        description="Chapter 4's step 2 over the seeds: the one-layer model of the records referents and "
        "referents_more_seeds (seeds 0 to 19, 60 passes), its answers at 'it' over all 768 sentences with and "
        "without the adjective's term of the attention sum: shares right, pairs of nouns split over their "
        "adjectives, answers that are one of the two nouns, and whether the term alone ranks the referent's kind "
        "above the other.",
    )
)


# ------------------------------------------------------------------------- referent heads


def without_head(model: Reader, head: int, ids: Tensor) -> Tensor:
    """``model``'s logits with one head's output removed: the columns of ``W^O`` that read it
    set to zero (restored afterwards). ids ``(B, T)`` -> logits ``(B, T, V)``."""
    attention = model.attention
    d_head = attention.d_model // attention.num_heads
    kept = attention.out_proj.weight.detach().clone()
    try:
        with torch.no_grad():
            attention.out_proj.weight[:, head * d_head : (head + 1) * d_head] = 0.0
            logits, _ = model(ids)
    finally:
        with torch.no_grad():
            attention.out_proj.weight.copy_(kept)
    return logits


def head_outputs(model: Reader, ids: Tensor) -> Tensor:
    """Each head's output before ``W^O``, its weights times its values.
    ids ``(B, T)`` -> ``(B, H, T, d_head)``."""
    attention = model.attention
    x = model.embedding(ids)  # (B, T, d_model)
    _, weights = attention(x, x, x)  # (B, H, T, T)
    values = split_heads(attention.v_proj(x), attention.num_heads)  # (B, H, T, d_head)
    return weights @ values


def averaged_head(model: Reader, head: int, ids: Tensor, average: Tensor) -> Tensor:
    """``model``'s logits with one head's output replaced by ``average`` ``(T, d_head)`` (its mean
    over other sentences, position by position) instead of set to zero (:func:`without_head`).
    ids ``(B, T)`` -> logits ``(B, T, V)``."""
    attention = model.attention
    d_head = attention.d_model // attention.num_heads
    x = model.embedding(ids)  # (B, T, d_model)
    z, _ = attention(x, x, x)  # (B, T, d_model)
    w_o = attention.out_proj.weight[:, head * d_head : (head + 1) * d_head]  # (d_model, d_head)
    change = average - head_outputs(model, ids)[:, head]  # (B, T, d_head)
    return model.out(x + z + change @ w_o.T)


def noun_head(weights: Tensor, is_animal: Tensor) -> tuple[int, int]:
    """(head, noun position): the head whose weight from "it" stays most on one noun in both kinds
    of sentence (its smaller mean over the two kinds is the largest). weights ``(N, H, T, T)``."""
    from_it = weights[:, :, IT]  # (N, H, T)
    animal_kind, place_kind = from_it[is_animal].mean(0), from_it[~is_animal].mean(0)  # (H, T)
    steady = torch.minimum(animal_kind, place_kind)[:, [ANIMAL, PLACE]]  # (H, 2)
    best = steady.flatten().argmax().item()
    return best // 2, (ANIMAL, PLACE)[best % 2]


#: Chapter 5's readers: one head or two at the record's budget, and one head trained three times as long.
HEAD_ARMS = ("one head", "two heads", "one head, 180 passes")


def heads_model(num_heads: int, seed: int, epochs: int = 60, d_model: int = 16, lr: float = 1e-2) -> Reader:
    """Chapter 5's reader with ``num_heads`` heads trained from ``seed`` on :func:`referent_split`'s
    training sentences, as :func:`heads_run` trains it (the ``referent_heads`` record's models)."""
    vocab = referent_vocab()
    data = _referent_data(vocab)
    torch.manual_seed(seed)
    model = Reader(len(vocab), num_heads=num_heads, d_model=d_model)
    train_on_tensors(model, *data.train, _it_loss, epochs=epochs, lr=lr, seed=seed)
    return model


def heads_run(arm: str, seed: int, epochs: int = 60, d_model: int = 16, lr: float = 1e-2) -> dict:
    """Train Chapter 5's reader with one head or two from ``seed`` (Adam at ``lr``, batches of 50);
    measure it on the held-out sentences.

    Returns ``accuracy``, ``train_accuracy`` (on the training sentences), and the accuracy on sentences
    about the animal and about the place,
    with every head (``animal``, ``place``) and with one head removed (:func:`without_head`):
    for one head, ``animal_without``/``place_without``. For two, ``noun_is_animal`` (whether the
    :func:`noun_head`, found on the training sentences, reads the animal); the mean weight from
    "it" of the noun head on its noun and of the other head on the adjective, in the held-out
    sentences whose referent is that noun (``noun_on_noun_own``, ``other_on_adjective_own``) and
    in the others (``..._other``); and the accuracy on the sentences whose referent is that
    head's noun (``own``) and on the others (``other``), with the noun head removed
    (``own_without_noun``, ``other_without_noun``) or the other head removed
    (``own_without_other``, ``other_without_other``). So that either head can be read on either
    noun, also the noun head's weight on the second noun (the one it does not read:
    ``noun_on_second_own``, ``noun_on_second_other``) and the other head's weight on the noun
    head's noun and on the second noun (``other_on_noun_...``, ``other_on_second_...``), and the
    noun head's weight on the adjective (``noun_on_adjective_...``), over the same two halves of
    the held-out sentences.
    """
    arms = {"one head": 1, "two heads": 2, "one head, 180 passes": 1, "two heads, 180 passes": 2}
    heads = arms.get(arm)
    if heads is None:
        raise ValueError(f"unknown arm {arm!r}; the arms are {', '.join(arms)}")
    epochs = 180 if arm.endswith("180 passes") else epochs
    data = _referent_data(referent_vocab())
    model = heads_model(heads, seed, epochs, d_model, lr)
    (ids, referents), is_animal = data.test, data.test_is_animal
    with torch.no_grad():
        logits, weights = model(ids)
        train_logits, _ = model(data.train[0])

    def right(logits: Tensor, chosen: Tensor) -> float:
        return (logits[chosen, IT].argmax(-1) == referents[chosen]).float().mean().item()

    train_right = (train_logits[:, IT].argmax(-1) == data.train[1]).float().mean().item()
    out = dict(accuracy=right(logits, torch.ones_like(is_animal)), animal=right(logits, is_animal))
    out.update(place=right(logits, ~is_animal), train_accuracy=train_right)
    if heads == 1:
        removed = without_head(model, 0, ids)
        return dict(out, animal_without=right(removed, is_animal), place_without=right(removed, ~is_animal))
    train_ids, train_referents = data.train
    with torch.no_grad():
        _, train_weights = model(train_ids)
    # the heads' roles are found on the training sentences, the removals scored on the held-out ones
    noun, noun_at = noun_head(train_weights, train_referents == train_ids[:, ANIMAL])
    other = 1 - noun
    second_at = PLACE if noun_at == ANIMAL else ANIMAL  # the noun the noun head does not read
    own = is_animal if noun_at == ANIMAL else ~is_animal  # (N,): "it" is the noun head's noun
    from_it = weights[:, :, IT]  # (N, H, T)
    without_noun, without_other = without_head(model, noun, ids), without_head(model, other, ids)
    return dict(
        out,
        noun_is_animal=float(noun_at == ANIMAL),
        noun_on_noun_own=from_it[own, noun, noun_at].mean().item(),
        noun_on_noun_other=from_it[~own, noun, noun_at].mean().item(),
        other_on_adjective_own=from_it[own, other, ADJECTIVE].mean().item(),
        other_on_adjective_other=from_it[~own, other, ADJECTIVE].mean().item(),
        noun_on_second_own=from_it[own, noun, second_at].mean().item(),
        noun_on_second_other=from_it[~own, noun, second_at].mean().item(),
        other_on_noun_own=from_it[own, other, noun_at].mean().item(),
        other_on_noun_other=from_it[~own, other, noun_at].mean().item(),
        other_on_second_own=from_it[own, other, second_at].mean().item(),
        other_on_second_other=from_it[~own, other, second_at].mean().item(),
        noun_on_adjective_own=from_it[own, noun, ADJECTIVE].mean().item(),
        noun_on_adjective_other=from_it[~own, noun, ADJECTIVE].mean().item(),
        own_without_noun=right(without_noun, own),
        other_without_noun=right(without_noun, ~own),
        own_without_other=right(without_other, own),
        other_without_other=right(without_other, ~own),
    )


register(
    Experiment(
        name="referent_heads",
        run=heads_run,
        arms=HEAD_ARMS,
        seeds=tuple(range(100)),
        settings=dict(epochs=60, d_model=16),
        replay=dict(arm="one head", seed=0),
        chapter="chapters/05_multi_head.ipynb",
        description="Chapter 5's reader (one multi-head attention layer with a residual connection, d_model 16) "
        "with one head and with two on the 'it' sentences, 60 passes (and one head for 180): held-out accuracy (and "
        "accuracy on the training sentences) on sentences about the "
        "animal and about the place, with every head and with one head's output removed from W^O's input (for two "
        "heads: on the sentences about the noun that one head reads, and on the others).",
    )
)


def averaged_run(arm: str, seed: int, epochs: int = 60, d_model: int = 16) -> dict:
    """``referent_heads``' two-head reader from ``seed``, each head removed two ways: its output set
    to zero (:func:`without_head`, as ``referent_heads``) and replaced by its mean over the training
    sentences, position by position (:func:`averaged_head`). Returns, on the held-out sentences about
    the noun head's noun (``own``) and the others (``other``): ``own_without_noun``, ...,
    ``other_without_other`` (zeroed, as ``referent_heads``) and ``own_averaged_noun``, ...,
    ``other_averaged_other`` (averaged)."""
    check_arm(arm, ("two heads",))
    data = _referent_data(referent_vocab())
    model = heads_model(2, seed, epochs, d_model)
    (ids, referents), is_animal = data.test, data.test_is_animal
    train_ids, train_referents = data.train
    with torch.no_grad():
        _, train_weights = model(train_ids)
        averages = head_outputs(model, train_ids).mean(dim=0)  # (H, T, d_head)
        noun, noun_at = noun_head(train_weights, train_referents == train_ids[:, ANIMAL])
        own = is_animal if noun_at == ANIMAL else ~is_animal  # (N,): "it" is the noun head's noun
        out = {}
        for name, head in (("noun", noun), ("other", 1 - noun)):
            for how, logits in (
                ("without", without_head(model, head, ids)),
                ("averaged", averaged_head(model, head, ids, averages[head])),
            ):
                answers = logits[:, IT].argmax(-1) == referents  # (N,)
                out[f"own_{how}_{name}"] = answers[own].float().mean().item()
                out[f"other_{how}_{name}"] = answers[~own].float().mean().item()
    return out


register(
    Experiment(
        name="referent_heads_averaged",
        run=averaged_run,
        arms=("two heads",),
        seeds=tuple(range(100)),
        settings=dict(epochs=60, d_model=16),
        replay=dict(arm="two heads", seed=0),
        chapter="chapters/05_multi_head.ipynb",
        description="referent_heads' two-head reader (the same seeds, training and heads), each head removed "
        "two ways: its output set to zero, as in referent_heads, and replaced by its mean output over the "
        "training sentences, position by position: accuracy on the held-out sentences about the noun head's "
        "noun and on the others.",
    )
)

register(
    Experiment(
        name="referent_heads_long",
        run=heads_run,
        arms=("two heads, 180 passes",),
        seeds=tuple(range(100)),
        settings=dict(epochs=60, d_model=16),
        replay=dict(arm="two heads, 180 passes", seed=0),
        chapter="chapters/05_multi_head.ipynb",
        description="referent_heads' two-head reader trained three times as long (180 passes, lr 0.01, the same "
        "seeds), as referent_heads trains one head for 180: the same measures.",
    )
)

#: The reader's learning rate: ``referent_heads`` trains at Adam's 1e-2; these arms at a third and at three times it.
RATE_ARMS = ("one head, lr 0.003", "two heads, lr 0.003", "one head, lr 0.03", "two heads, lr 0.03")


def heads_rate_run(arm: str, seed: int, epochs: int = 60, d_model: int = 16) -> dict:
    """:func:`heads_run` for one head or two at the learning rate ``arm`` names (:data:`RATE_ARMS`)."""
    heads, rate = split_rate_arm(arm, RATE_ARMS)
    return heads_run(heads, seed, epochs, d_model, lr=rate)


register(
    Experiment(
        name="referent_heads_rates",
        run=heads_rate_run,
        arms=RATE_ARMS,
        seeds=tuple(range(100)),
        settings=dict(epochs=60, d_model=16),
        replay=dict(arm="one head, lr 0.03", seed=0),
        chapter="chapters/05_multi_head.ipynb",
        description="referent_heads' one- and two-head readers (60 passes, batches of 50, the same seeds) at Adam "
        "learning rates 0.003 and 0.03 (referent_heads: 0.01): the same measures.",
    )
)
