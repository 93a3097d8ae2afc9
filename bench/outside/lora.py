"""LoRA fine-tuning of a HF GPT-2: the base weights frozen, low-rank adapters on the attention's c_attn, hand-written."""
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch, torch.nn as nn
from transformers import GPT2Config, GPT2LMHeadModel
BATCH_SIZE = 4
class LoRA(nn.Module):
    def __init__(self, base, r=4):
        super().__init__()
        self.base = base
        nin, nout = base.weight.shape  # Conv1D: (in, out)
        self.a = nn.Parameter(torch.randn(nin, r) * 0.01)
        self.b = nn.Parameter(torch.zeros(r, nout))
    def forward(self, x):
        return self.base(x) + (x @ self.a) @ self.b
def build_model():
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(n_layer=3, n_embd=64, n_head=4, vocab_size=500, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    for p in m.parameters():
        p.requires_grad_(False)
    for blk in m.transformer.h:
        blk.attn.c_attn = LoRA(blk.attn.c_attn)
    return m
def example_batch(b):
    ids = torch.randint(0, 500, (b, 32), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
