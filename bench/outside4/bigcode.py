"""HF GPTBigCode (multi-query attention) causal LM."""
import torch
from transformers import GPTBigCodeConfig, GPTBigCodeForCausalLM
BATCH_SIZE = 4
def build_model():
    return GPTBigCodeForCausalLM(GPTBigCodeConfig(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=4, multi_query=True,
                                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
