"""Chapters 4-5's recorded experiments: the split, the measures, removing a head."""

import pytest
import torch

from attnbook import tasks
from attnbook.experiments import neighbours, referents


def test_sense_splits_hold_out_whole_triples_of_context_words():
    splits = referents.sense_splits(n_train=2000, n_test=500, seed=0)
    assert (len(splits.train), len(splits.test)) == (2000, 500)
    seen = {referents.sense_triple(e.source) for e in splits.train}
    held = {referents.sense_triple(e.source) for e in splits.test}
    assert not seen & held
    assert len(held) == round(0.2 * 112) and len(seen) == 112 - len(held)
    assert referents.sense_triple("cave bat the night flew a") == ("cave", "flew", "night")


def test_it_weights_counts_where_the_largest_weight_falls():
    weights = torch.zeros(4, 11, 11)
    weights[0, referents.IT, referents.ANIMAL] = 1.0  # "it" is the animal: right
    weights[1, referents.IT, referents.ANIMAL] = 1.0  # "it" is the place: wrong
    weights[2, referents.IT, referents.ADJECTIVE] = 1.0
    weights[3, referents.IT, 0] = 1.0
    found = referents.it_weights(weights, torch.tensor([True, False, True, False]))
    assert found["top_right"] == found["top_wrong"] == found["top_adjective"] == found["top_other"] == 0.25
    assert found["right"] == 0.25 and found["wrong"] == 0.25 and found["adjective"] == 0.25


def test_weight_explained_by_the_referent_alone():
    examples = tasks.referent_sentences()
    weights = torch.zeros(len(examples), 11, 11)
    for i, e in enumerate(examples):  # on the right noun: 0.9 for the animal, 0.2 for the place
        at = referents.ANIMAL if e.target in tasks.ANIMALS else referents.PLACE
        weights[i, referents.IT, at] = 0.9 if at == referents.ANIMAL else 0.2
    found = referents.weight_explained(weights, examples)
    assert found["r2_referent"] == pytest.approx(1.0)
    assert found["r2_both"] == pytest.approx(1.0)
    assert found["r2_nouns"] == pytest.approx(0.0, abs=1e-9)  # every noun pair is balanced


def test_without_head_zeroes_one_head_and_restores_the_weights():
    torch.manual_seed(0)
    model = referents.Reader(20, num_heads=2)
    ids = torch.randint(0, 20, (3, 11))
    before = model.attention.out_proj.weight.detach().clone()
    removed = referents.without_head(model, 1, ids)
    assert torch.equal(model.attention.out_proj.weight, before)
    with torch.no_grad():
        model.attention.out_proj.weight[:, 8:] = 0.0
        expected, _ = model(ids)
    assert torch.allclose(removed, expected)


def test_averaged_head_replaces_one_head_output():
    torch.manual_seed(0)
    model = referents.Reader(20, num_heads=2)
    ids = torch.randint(0, 20, (3, 11))
    with torch.no_grad():
        full, _ = model(ids)
        outputs = referents.head_outputs(model, ids)  # (3, 2, 11, 8)
        # the heads' outputs through W^O, plus its bias, are the layer's output
        z, _ = model.attention(model.embedding(ids), model.embedding(ids), model.embedding(ids))
        merged = outputs.transpose(1, 2).reshape(3, 11, 16)
        assert torch.allclose(model.attention.out_proj(merged), z, atol=1e-6)
        # its own output changes nothing; zero is without_head; any other output changes it
        assert torch.allclose(referents.averaged_head(model, 1, ids, outputs[:, 1]), full)
        zero = torch.zeros(11, 8)
        zeroed = referents.without_head(model, 1, ids)
        assert torch.allclose(referents.averaged_head(model, 1, ids, zero), zeroed, atol=1e-5)
        mean = outputs[:, 1].mean(dim=0)  # (11, 8)
        assert not torch.allclose(referents.averaged_head(model, 1, ids, mean), full)


def test_noun_head_is_the_head_that_stays_on_one_noun():
    weights = torch.zeros(2, 2, 11, 11)
    weights[:, 1, referents.IT, referents.PLACE] = 0.9  # head 2 reads the place in both sentences
    weights[0, 0, referents.IT, referents.ADJECTIVE] = 1.0
    weights[1, 0, referents.IT, referents.ANIMAL] = 1.0
    assert referents.noun_head(weights, torch.tensor([True, False])) == (1, referents.PLACE)


@pytest.mark.parametrize(
    "run, arms",
    [
        (referents.sense_run, "'tagger'"),
        (referents.referent_run, "one layer, two layers, one layer, 180 passes"),
        (referents.heads_run, "one head, two heads, one head, 180 passes, two heads, 180 passes"),
        (neighbours.copy_run, "1 head, 2 heads"),
        (neighbours.frozen_run, "1 head, 1 head, d_model 32, 1 head, nonlinear, d_model 64, 1 head, per-position"),
    ],
)
def test_runs_name_their_arms(run, arms):
    with pytest.raises(ValueError, match=f"unknown arm 'three'; the (only arm is|arms are) {arms}"):
        run("three", 0)


def test_both_neighbours_puts_left_then_right():
    u = torch.arange(2 * 4 * 1.0).reshape(2, 4, 1)  # (N, T, 1)
    assert both_neighbours_rows(u) == [[[0.0, 2.0], [1.0, 3.0]], [[4.0, 6.0], [5.0, 7.0]]]


def both_neighbours_rows(u):
    return neighbours.both_neighbours(u).tolist()


def test_sense_splits_hold_out_as_many_triples_of_each_sense():
    test = referents.sense_splits().test
    held = {referents.sense_triple(e.source) for e in test}
    animal = {triple for triple in held if triple[0] in tasks.BAT_CONTEXT["animal"]}
    assert len(animal) == len(held) - len(animal) == 11


def test_per_position_linear_applies_its_own_map_at_each_position():
    torch.manual_seed(0)
    layer = neighbours.PerPositionLinear(3, 4, length=5)
    x = torch.randn(2, 5, 3)
    out = layer(x)
    assert out.shape == (2, 5, 4)
    assert torch.allclose(out[:, 2], layer.maps[2](x[:, 2]))
    assert not torch.allclose(layer.maps[0](x[:, 2]), out[:, 2])


def test_frozen_weights_change_nothing_when_the_weights_ignore_the_inputs():
    torch.manual_seed(0)
    embed = torch.nn.Linear(8, 16)
    model = neighbours.NeighbourReader(1, embed, 16, d_model=16)
    test = torch.randn(50, 8, 8)
    with torch.no_grad():  # zero queries and keys: every score 0, the same even weights always
        for proj in (model.attention.q_proj, model.attention.k_proj):
            proj.weight.zero_()
            proj.bias.zero_()
        outputs, _ = model(test)
    error = neighbours.copy_loss(outputs, neighbours.both_neighbours(test)).item()
    assert neighbours.frozen_weight_error(model, test) == pytest.approx(error, abs=1e-6)


def test_frozen_weights_cost_a_reader_whose_weights_move():
    torch.manual_seed(0)
    model = neighbours.NeighbourReader(1, torch.nn.Linear(8, 16), 16, d_model=16)
    test = torch.randn(50, 8, 8)
    with torch.no_grad():
        outputs, _ = model(test)
    error = neighbours.copy_loss(outputs, neighbours.both_neighbours(test)).item()
    assert neighbours.frozen_weight_error(model, test) != pytest.approx(error, abs=1e-4)


def test_foreign_neighbours_change_nothing_when_every_sequence_is_the_same():
    torch.manual_seed(0)
    model = neighbours.NeighbourReader(2, torch.nn.Linear(8, 16), 16, d_model=16)
    test = torch.randn(1, 8, 8).expand(20, -1, -1)  # the "next sequence" is the same one
    with torch.no_grad():
        outputs, _ = model(test)
    error = neighbours.copy_loss(outputs, neighbours.both_neighbours(test)).item()
    assert neighbours.foreign_neighbour_error(model, test) == pytest.approx(error, abs=1e-6)


def test_foreign_neighbours_cost_a_reader_whose_weights_follow_the_neighbours():
    torch.manual_seed(0)
    model = neighbours.NeighbourReader(1, torch.nn.Linear(8, 16), 16, d_model=16)
    test = torch.randn(50, 8, 8)
    with torch.no_grad():
        model.attention.q_proj.weight.mul_(20)  # sharp weights, moved by every key
        outputs, _ = model(test)
        error = neighbours.copy_loss(outputs, neighbours.both_neighbours(test)).item()
        assert neighbours.foreign_neighbour_error(model, test) != pytest.approx(error, abs=1e-5)
        model.attention.k_proj.weight.zero_()  # keys that ignore the inputs: the neighbours' keys do not matter
        outputs, _ = model(test)
    error = neighbours.copy_loss(outputs, neighbours.both_neighbours(test)).item()
    assert neighbours.foreign_neighbour_error(model, test) == pytest.approx(error, abs=1e-6)


def test_frozen_reader_trains_only_its_read_out():
    torch.manual_seed(0)
    model = neighbours.NeighbourReader(1, torch.nn.Linear(8, 16), 16, d_model=16)
    weights = torch.full((1, 1, 8, 8), 1 / 8)
    frozen = neighbours.FrozenReader(model, weights)
    trained = {name for name, _ in frozen.named_parameters()}
    assert trained == {"readout.0.weight", "readout.0.bias", "readout.2.weight", "readout.2.bias"}
    outputs, shown = frozen(torch.randn(3, 8, 8))
    assert outputs.shape == (3, 8, 16) and shown.shape == (3, 1, 8, 8)


def test_frozen_reader_with_foreign_neighbours_moves_its_weights_with_the_rest():
    torch.manual_seed(0)
    model = neighbours.NeighbourReader(1, torch.nn.Linear(8, 16), 16, d_model=16)
    inputs = torch.randn(3, 8, 8)
    _, shown = neighbours.FrozenReader(model, None)(inputs)  # (3, 1, 8, 8)
    with torch.no_grad():
        _, trained = model(inputs)
        changed = inputs.clone()
        changed[1, 2] = torch.randn(8)  # sequence 1's position 2: a neighbour of queries 1 and 3
        _, again = neighbours.FrozenReader(model, None)(changed)
    assert shown.shape == (3, 1, 8, 8) and not torch.allclose(shown, trained)
    assert torch.allclose(again[1, :, [1, 3]], shown[1, :, [1, 3]])  # not with its neighbours' numbers
    assert not torch.allclose(again[1, :, 5], shown[1, :, 5])  # but with the other positions'
    assert not torch.allclose(again[2, :, [1, 3]], shown[2, :, [1, 3]])  # the next sequence borrows them
