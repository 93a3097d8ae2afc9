"""HF T5 for conditional generation with tied embeddings (tie_word_embeddings=True: the LM head is the shared token table, the decoder output rescaled by d_model**-0.5 before it), relative position buckets in the first layer's attention reused by the later layers, decoder inputs shifted right from the labels."""
import torch
from transformers import T5Config, T5ForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return T5ForConditionalGeneration(T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
                                               num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=32,
                                               dropout_rate=0.0, tie_word_embeddings=True, decoder_start_token_id=0,
                                               pad_token_id=0, eos_token_id=1, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(2, 128, (b, 24), generator=g), "labels": torch.randint(2, 128, (b, 12), generator=g)}
