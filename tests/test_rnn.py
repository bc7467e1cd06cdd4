"""attnbook.rnn: the GRU encoder, the shared EncoderDecoder base and Chapter 1's decoder.

What every model shares (protocol, teacher forcing = stepping, padding, training) is in test_protocol.py.
"""

import pytest
import torch

from attnbook.rnn import Decoder, DecoderState, Encoder, Seq2Seq


def padded_src():
    """Two rows, the second padded: (B=2, S=5)."""
    return torch.tensor([[4, 5, 6, 7, 8], [9, 5, 4, 0, 0]]), torch.tensor([5, 3])


@pytest.mark.parametrize("bidirectional, dirs", [(False, 1), (True, 2)])
def test_encoder_shapes(bidirectional, dirs):
    torch.manual_seed(0)
    enc = Encoder(12, 8, 16, bidirectional=bidirectional)
    src, lengths = padded_src()
    outputs, context = enc(src, lengths)
    assert outputs.shape == (2, 5, 16 * dirs)
    assert context.shape == (2, 16 * dirs)
    assert enc.output_size == 16 * dirs


@pytest.mark.parametrize("bidirectional", [False, True])
def test_packed_context_ignores_padding(bidirectional):
    torch.manual_seed(0)
    enc = Encoder(12, 8, 16, bidirectional=bidirectional)
    src, lengths = padded_src()
    _, context = enc(src, lengths)
    _, alone = enc(src[1:, :3], torch.tensor([3]))
    assert torch.allclose(context[1], alone[0], atol=1e-6)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_unpacked_context_is_changed_by_padding(bidirectional):
    """Why the encoder packs: its GRU run over the padded rows as they are (Chapter 1's bug)."""
    torch.manual_seed(0)
    enc = Encoder(12, 8, 16, bidirectional=bidirectional)
    src, _ = padded_src()
    _, h_n = enc.gru(enc.embedding(src))  # reads the pads too
    context = torch.cat(list(h_n), dim=-1)
    _, alone = enc(src[1:, :3], torch.tensor([3]))
    assert not torch.allclose(context[1], alone[0], atol=1e-3)


def test_outputs_are_zero_at_padding_and_match_unpadded_run():
    torch.manual_seed(0)
    enc = Encoder(12, 8, 16, bidirectional=True)
    src, lengths = padded_src()
    outputs, _ = enc(src, lengths)
    assert torch.equal(outputs[1, 3:], torch.zeros(2, 32))
    alone, _ = enc(src[1:, :3], torch.tensor([3]))
    assert torch.allclose(outputs[1, :3], alone[0], atol=1e-6)


def test_bidirectional_context_is_last_forward_and_first_backward_output():
    torch.manual_seed(0)
    enc = Encoder(12, 8, 16, bidirectional=True)
    src, lengths = padded_src()
    outputs, context = enc(src, lengths)
    for row, length in enumerate(lengths.tolist()):
        assert torch.allclose(context[row, :16], outputs[row, length - 1, :16], atol=1e-6)
        assert torch.allclose(context[row, 16:], outputs[row, 0, 16:], atol=1e-6)


def test_decoder_shapes():
    torch.manual_seed(0)
    dec = Decoder(10, 8, 16, encoder_size=32)
    final = torch.randn(3, 32)
    state = dec.start(None, final, None)
    assert isinstance(state, DecoderState) and torch.equal(state.context, final)
    assert torch.allclose(state.hidden, torch.tanh(dec.init(final)))  # s_0 = tanh(W_init c)
    assert dec(torch.randint(0, 10, (3, 7)), state).logits.shape == (3, 7, 10)
    step = dec.step(state, torch.tensor([1, 1, 1]))
    assert step.logits.shape == (3, 10) and step.state.hidden.shape == (3, 16) and step.weights is None


def test_decoder_uses_the_context_at_every_step():
    torch.manual_seed(0)
    dec = Decoder(10, 8, 16, encoder_size=32)
    tgt = torch.randint(3, 10, (1, 4))
    context, h0 = torch.randn(1, 32), torch.zeros(1, 16)  # the same start state: differences come from c
    assert not torch.allclose(
        dec(tgt, DecoderState(context, h0)).logits, dec(tgt, DecoderState(context + 1.0, h0)).logits
    )


def test_build_sizes_and_pad_embedding():
    model = Seq2Seq.build(12, 10, embed_dim=8, hidden_size=16, bidirectional=True)
    assert model.decoder.encoder_size == 32
    assert model.pad_id == 0
    assert torch.equal(model.encoder.embedding.weight[0], torch.zeros(8))


# ---- errors -------------------------------------------------------------------------


def test_error_context_size_mismatch():
    enc = Encoder(12, 32, 128, bidirectional=True)
    dec = Decoder(10, 32, 128, encoder_size=128)
    with pytest.raises(
        ValueError,
        match=r"decoder expects encoder outputs of size encoder_size=128 but the encoder "
        r"gives 256 \(bidirectional, hidden_size=128\)",
    ):
        Seq2Seq(enc, dec)


def test_error_pad_id_mismatch():
    enc = Encoder(12, 8, 16, pad_id=0)
    dec = Decoder(10, 8, 16, 16)
    with pytest.raises(ValueError, match="pad_id=5 but the encoder's pad_id=0"):
        Seq2Seq(enc, dec, pad_id=5)
    with pytest.raises(ValueError, match="pad_id=12 is not an id of a vocabulary of size 12"):
        Encoder(12, 8, 16, pad_id=12)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(vocab_size=0, embed_dim=8, hidden_size=16), "vocab_size"),
        (dict(vocab_size=12, embed_dim=-1, hidden_size=16), "embed_dim"),
        (dict(vocab_size=12, embed_dim=8, hidden_size=0), "hidden_size"),
    ],
)
def test_error_non_positive_sizes(kwargs, name):
    with pytest.raises(ValueError, match=f"{name} must be a positive int"):
        Encoder(**kwargs)
    with pytest.raises(ValueError, match=f"{name} must be a positive int"):
        Decoder(encoder_size=16, **kwargs)


def test_error_bad_src():
    model = Seq2Seq.build(12, 10, embed_dim=8, hidden_size=16)
    tgt_in = torch.tensor([[1, 4]])
    with pytest.raises(ValueError, match=r"src must be 2-D \(B, S\), got shape \(3,\)"):
        model(torch.tensor([4, 5, 6]), tgt_in)
    with pytest.raises(TypeError, match="src must hold token ids as torch.long, got dtype torch.float32"):
        model(torch.ones(1, 3), tgt_in)


def test_error_batch_sizes_differ():
    model = Seq2Seq.build(12, 10, embed_dim=8, hidden_size=16)
    with pytest.raises(ValueError, match=r"tgt_in has B=3 \(shape \(3, 2\)\) but src has B=2 \(shape \(2, 3\)\)"):
        model(torch.full((2, 3), 4), torch.ones(3, 2, dtype=torch.long))


def test_error_row_all_padding():
    model = Seq2Seq.build(12, 10, embed_dim=8, hidden_size=16)
    src = torch.tensor([[4, 5], [6, 0], [0, 0]])
    with pytest.raises(ValueError, match=r"src rows \[2\] are all padding \(pad_id=0\)"):
        model(src, torch.ones(3, 2, dtype=torch.long))


def test_error_left_padding():
    model = Seq2Seq.build(12, 10, embed_dim=8, hidden_size=16)
    with pytest.raises(ValueError, match="padded on the right only"):
        model.start(torch.tensor([[0, 4, 5]]))
    with pytest.raises(ValueError, match="padded on the right only"):
        model.start(torch.tensor([[4, 0, 5]]))


def test_error_bad_lengths():
    enc = Encoder(12, 8, 16)
    src, _ = padded_src()
    with pytest.raises(ValueError, match=r"every length must be in 1..S=5, got \[6, 3\]"):
        enc(src, torch.tensor([6, 3]))
    with pytest.raises(ValueError, match=r"lengths has B=1 \(shape \(1,\)\) but src has B=2"):
        enc(src, torch.tensor([5]))
