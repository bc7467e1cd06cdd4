"""Chapter 6: the whole pre-LN Transformer equals PyTorch's nn.Transformer with the same weights.

``nn.Transformer`` is the two stacks alone, each ending with a LayerNorm (the pre-LN design): with
``norm_first=True``, every layer copied with ``from_torch`` and the two final norms copied, it gives
our model's logits between our embeddings and our output layer.
"""

import warnings

import pytest
import torch
from torch import nn

from attnbook.transformer import DecoderLayer, EncoderLayer, Transformer, causal_mask


def _pair(num_encoder_layers, num_decoder_layers, share_embeddings=False):
    """PyTorch's pre-LN nn.Transformer and our Transformer(norm_first=True) with its weights."""
    with warnings.catch_warnings():  # the nested-tensor fast path is off for norm_first=True
        warnings.simplefilter("ignore", UserWarning)
        theirs = nn.Transformer(
            16, 4, num_encoder_layers, num_decoder_layers, 32, dropout=0.1, batch_first=True, norm_first=True
        ).eval()
    vocab = 11
    ours = Transformer(
        vocab,
        vocab if share_embeddings else 9,
        d_model=16,
        num_heads=4,
        num_encoder_layers=num_encoder_layers,
        num_decoder_layers=num_decoder_layers,
        d_ff=32,
        share_embeddings=share_embeddings,
        norm_first=True,
    ).eval()
    for mine, layer in zip(ours.encoder_layers, theirs.encoder.layers, strict=True):
        mine.load_state_dict(EncoderLayer.from_torch(layer).state_dict())
    for mine, layer in zip(ours.decoder_layers, theirs.decoder.layers, strict=True):
        mine.load_state_dict(DecoderLayer.from_torch(layer).state_dict())
    ours.encoder_norm.load_state_dict(theirs.encoder.norm.state_dict())
    ours.decoder_norm.load_state_dict(theirs.decoder.norm.state_dict())
    return theirs, ours


def _torch_logits(theirs, ours, src, tgt_in):
    """Our embeddings and output layer around PyTorch's stacks."""
    real = src != ours.pad_id  # (B, S): True = a real token; PyTorch's masks: True = hidden
    hidden = theirs(
        ours.embed(src, ours.src_embedding),
        ours.embed(tgt_in, ours.tgt_embedding),
        tgt_mask=~causal_mask(tgt_in.size(1)),
        src_key_padding_mask=~real,
        memory_key_padding_mask=~real,
    )  # (B, T, d)
    return ours.generator(hidden)  # (B, T, V)


@pytest.mark.parametrize("layers", [(1, 1), (2, 3), (3, 2)])
@pytest.mark.parametrize("share_embeddings", [False, True])
def test_pre_ln_transformer_equals_nn_transformer(layers, share_embeddings):
    torch.manual_seed(0)
    theirs, ours = _pair(*layers, share_embeddings=share_embeddings)
    tgt_vocab = ours.generator.out_features
    src = torch.randint(3, 11, (4, 7))
    src[1, 5:], src[2, 3:] = 0, 0  # right-padded sources
    tgt_in = torch.randint(3, tgt_vocab, (4, 6))
    tgt_in[:, 0] = 1  # <bos>
    with torch.no_grad():
        expected = _torch_logits(theirs, ours, src, tgt_in)
        got = ours(src, tgt_in).logits  # (B, T, V)
    assert got.shape == (4, 6, tgt_vocab)
    assert (got - expected).abs().max() < 1e-5


def test_the_comparison_can_fail():
    """Without the final norms (the post-LN model's stacks) the logits are no longer PyTorch's."""
    torch.manual_seed(0)
    theirs, ours = _pair(2, 2)
    with torch.no_grad():
        ours.decoder_norm.weight.mul_(2.0)  # a final norm that is not PyTorch's
        src = torch.randint(3, 11, (2, 5))
        tgt_in = torch.randint(3, 9, (2, 4))
        assert (ours(src, tgt_in).logits - _torch_logits(theirs, ours, src, tgt_in)).abs().max() > 1e-3


def test_pytorchs_stacks_always_end_with_a_norm_and_the_papers_post_ln_model_does_not():
    theirs = nn.Transformer(16, 4, 1, 1, 32, batch_first=True, norm_first=False)
    assert isinstance(theirs.encoder.norm, nn.LayerNorm) and isinstance(theirs.decoder.norm, nn.LayerNorm)
    ours = Transformer(11, 9, d_model=16, num_heads=4, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)
    assert isinstance(ours.encoder_norm, nn.Identity) and isinstance(ours.decoder_norm, nn.Identity)
