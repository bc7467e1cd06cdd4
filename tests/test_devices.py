"""Any model can move to a GPU and train, decode, generate and be timed there.

Every test runs on the CPU, and again on CUDA where a GPU is present (skipped otherwise). On
the CPU they still check that nothing is built on a fixed device: batches follow the model,
random draws come from the generator's device and land on the data's.
"""

import pytest
import torch
import torch.nn.functional as F

from attnbook import cost, data, tasks
from attnbook.decoding import beam_search, greedy_decode
from attnbook.language_models import DecoderOnly, generate, mask_tokens, next_token
from attnbook.training import evaluate, fit, train_on_tensors
from conftest import MODELS

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")),
]


def reversal(n=24):
    examples = tasks.reversal_task(n, 2, 5, seed=0, alphabet="abcdef")
    src_vocab, tgt_vocab = data.build_vocabs(examples)
    return data.Batches(examples, src_vocab, tgt_vocab, batch_size=8), src_vocab, tgt_vocab


@pytest.mark.parametrize("device", DEVICES)
def test_a_batch_moves_with_every_tensor(device):
    batches, _, _ = reversal()
    batch = next(iter(batches)).to(device)
    for name in ("src", "src_lengths", "src_mask", "tgt_in", "tgt_out", "tgt_mask"):
        assert getattr(batch, name).device.type == device, name
    assert len(batch) == 8


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "name", ["rnn", "bahdanau", "luong-general-feed-global", "luong-dot-nofeed-local", "transformer-pre"]
)
def test_every_model_trains_and_decodes_on_the_device(name, device):
    batches, src_vocab, tgt_vocab = reversal()
    torch.manual_seed(0)
    model = MODELS[name](len(src_vocab), len(tgt_vocab)).to(device)
    history = fit(model, batches, epochs=1, lr=1e-2, valid=batches, progress=False)
    assert history["train_loss"][0] > 0
    metrics = evaluate(model, batches)
    assert 0 <= metrics["exact_match"] <= 1
    src = next(iter(batches)).src.to(device)
    greedy, beam = greedy_decode(model, src, 6), beam_search(model, src, 6, beam_size=2)
    assert len(greedy.tokens) == len(beam.tokens) == src.size(0)
    assert greedy.scores.device.type == beam.scores.device.type == device


@pytest.mark.parametrize("device", DEVICES)
def test_language_models_train_mask_and_generate_on_the_device(device):
    ids = torch.randint(4, 12, (16, 9), generator=torch.Generator().manual_seed(0)).to(device)
    torch.manual_seed(0)
    model = DecoderOnly(12, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_positions=24).to(device)

    def loss(logits, targets):
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    train_on_tensors(
        model,
        ids[:, :-1].cpu(),
        ids[:, 1:].cpu(),
        loss,  # logits: the first item
        epochs=1,
        batch_size=8,
    )  # CPU tensors: moved to the model's device
    out = generate(model, ids[:3, :2], 5, generator=torch.Generator().manual_seed(1))
    assert out.device.type == device and out.shape == (3, 7)
    masked = mask_tokens(
        ids, ids > 5, 3, torch.arange(4, 12, device=device), generator=torch.Generator().manual_seed(2)
    )
    assert masked.inputs.device.type == device and masked.chosen.any()
    on_cpu = mask_tokens(ids.cpu(), ids.cpu() > 5, 3, torch.arange(4, 12), generator=torch.Generator().manual_seed(2))
    assert torch.equal(masked.inputs.cpu(), on_cpu.inputs)  # the same draws on any device
    logits = torch.randn(4, 12, device=device)
    token = next_token(logits, 1.0, None, torch.Generator().manual_seed(3))
    assert token.device.type == device


@pytest.mark.parametrize("device", DEVICES)
def test_timing_waits_for_the_device(device):
    x = torch.randn(64, 64, device=device)
    assert cost.seconds(lambda: x @ x, repeat=3) > 0
