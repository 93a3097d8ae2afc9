"""HF ModernBERT masked LM: rotary attention alternating global and local (sliding-window) layers, GeGLU, no biases."""
import torch
from transformers import ModernBertConfig, ModernBertForMaskedLM
BATCH_SIZE = 4
def build_model():
    return ModernBertForMaskedLM(ModernBertConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                                                  global_attn_every_n_layers=2, local_attention=8, max_position_embeddings=64,
                                                  pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2))
def example_batch(b):
    ids = torch.randint(3, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
