"""A tiny GPT-2 with HF's own gradient checkpointing switched on (the user's model already recomputes)."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel
BATCH_SIZE = 4
def build_model():
    m = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=3, n_head=4, use_cache=False,
                                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})  # (HF 5: also
    # activation_checkpointing_enable; the older name is what most training scripts still call)
    return m
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 128, (b, 16), generator=g)
    return {"input_ids": x, "labels": x.clone()}
