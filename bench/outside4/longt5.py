"""HF LongT5 with transient-global attention (local blocks plus global tokens), an encoder-decoder."""
import torch
from transformers import LongT5Config, LongT5ForConditionalGeneration
BATCH_SIZE = 2
def build_model():
    return LongT5ForConditionalGeneration(LongT5Config(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                                                       local_radius=4, global_block_size=4, encoder_attention_type="transient-global",
                                                       dropout_rate=0.0, use_cache=False, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(2, 128, (b, 32), generator=g), "labels": torch.randint(2, 128, (b, 8), generator=g)}
