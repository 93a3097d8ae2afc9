"""HF Phi causal LM: partial rotary embeddings (a fraction of each head's dimensions rotated), the attention and MLP run in parallel off one LayerNorm, a biased LM head."""
import torch
from transformers import PhiConfig, PhiForCausalLM
BATCH_SIZE = 4
def build_model():
    return PhiForCausalLM(PhiConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                    partial_rotary_factor=0.5, max_position_embeddings=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                    attention_dropout=0.0, use_cache=False))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
