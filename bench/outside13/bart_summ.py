"""HF BART for conditional generation with labels from a tiny config: 2 encoder and 2 decoder layers of d 32 (4 heads, FFN 64, GELU), learned positional embeddings with BART's offset of 2, layernorm on the embeddings, the shared token embedding tied to the encoder's, the decoder's and the lm_head (plus the final_logits_bias buffer), dropout 0.1 everywhere (attention and activation dropout too); labels shifted right into decoder_input_ids inside the model; a padded source attention_mask (the odd rows' last 6 tokens) and -100 labels past each row's target length."""
import torch
from transformers import BartConfig, BartForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return BartForConditionalGeneration(BartConfig(vocab_size=120, d_model=32, encoder_layers=2, decoder_layers=2,
                                                   encoder_attention_heads=4, decoder_attention_heads=4,
                                                   encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                                                   dropout=0.1, attention_dropout=0.1, activation_dropout=0.1,
                                                   pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                                   decoder_start_token_id=2, forced_eos_token_id=2))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    S, T = 18, 10
    src = torch.randint(3, 120, (b, S), generator=g)
    mask = torch.ones(b, S, dtype=torch.long)
    mask[1::2, S - 6:] = 0
    src[mask == 0] = 1
    labels = torch.randint(3, 120, (b, T), generator=g)
    labels[1::2, T - 3:] = -100
    return {"input_ids": src, "attention_mask": mask, "labels": labels}
