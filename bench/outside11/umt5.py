"""HF UMT5 encoder-decoder (T5 v1.1 layout: gated-GELU feed-forward, RMS-style T5 layer norms without bias, no bias in any linear) for seq2seq with labels: unlike T5, every attention layer (encoder self, decoder self and cross are separate) owns its own relative-position bucket embedding and builds its own position bias in forward instead of sharing the first layer's, the decoder's causal mask and the encoder padding mask (from a padded attention_mask) added to those biases, decoder_input_ids made inside the model by shifting the labels right (labels -100 on target padding replaced by the pad id), the lm_head untied from the shared embedding (tie_word_embeddings False, so no d_model**-0.5 rescale), 2 encoder and 2 decoder layers, d_model 32, 4 heads of 8, and the cross-entropy (ignore -100) computed inside the model."""
import torch
from transformers import UMT5Config, UMT5ForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return UMT5ForConditionalGeneration(UMT5Config(vocab_size=160, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                                                   relative_attention_num_buckets=16, relative_attention_max_distance=32, dropout_rate=0.0,
                                                   feed_forward_proj="gated-gelu", tie_word_embeddings=False, pad_token_id=0, eos_token_id=1,
                                                   decoder_start_token_id=0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    S, T = 18, 12
    ids = torch.randint(2, 160, (b, S), generator=g)
    mask = torch.ones(b, S, dtype=torch.long)
    mask[1::2, 13:] = 0
    ids[mask == 0] = 0
    labels = torch.randint(2, 160, (b, T), generator=g)
    labels[::2, 9:] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
