"""A tiny T5 encoder-decoder (HF transformers, random weights): relative attention bias, cross
attention, the loss from ``labels``."""
import torch
from torch import nn
from transformers import T5Config, T5ForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    cfg = T5Config(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                   dropout_rate=0.0, use_cache=False, decoder_start_token_id=0, pad_token_id=0)
    return T5ForConditionalGeneration(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    src = torch.randint(0, 128, (b, 16), generator=g); tgt = torch.randint(0, 128, (b, 12), generator=g)
    return {"input_ids": src, "labels": tgt}
