"""HF XLNet LM head (relative positional attention, two-stream off), labels in the batch."""
import torch
from transformers import XLNetConfig, XLNetLMHeadModel
BATCH_SIZE = 4
def build_model():
    return XLNetLMHeadModel(XLNetConfig(vocab_size=128, d_model=32, n_layer=2, n_head=4, d_inner=64, dropout=0.0, use_mems_train=False))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
