"""HF BlenderbotSmall encoder-decoder for conditional generation with labels: scaled token embeddings shared between encoder, decoder and the tied LM head, learned positional embeddings, post-LayerNorm encoder layers (LayerNorm on the embeddings), decoder layers with causal self-attention (the causal mask built in forward) and cross-attention over the encoder output, which is read by every decoder layer; the decoder inputs are made inside the model by shifting the labels right (decoder_start_token_id prepended, -100 replaced by the pad id), a final_logits_bias buffer added to the logits, and the LM cross-entropy computed inside the model."""
import torch
from transformers import BlenderbotSmallConfig, BlenderbotSmallForConditionalGeneration
BATCH_SIZE = 4
VOCAB = 128


def build_model():
    return BlenderbotSmallForConditionalGeneration(BlenderbotSmallConfig(
        vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0, use_cache=False, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, decoder_start_token_id=1))


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, VOCAB, (b, 20), generator=g)
    attn = torch.ones(b, 20, dtype=torch.long)
    attn[:, 16:] = 0
    src[:, 16:] = 0
    labels = torch.randint(3, VOCAB, (b, 12), generator=g)
    labels[:, 10:] = -100
    return {"input_ids": src, "attention_mask": attn, "labels": labels}
