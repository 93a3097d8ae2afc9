"""A tiny Mamba (HF, the sequential-scan path a machine without its CUDA kernels takes)."""
import torch
from transformers import MambaConfig, MambaForCausalLM
BATCH_SIZE = 4
def build_model():
    return MambaForCausalLM(MambaConfig(vocab_size=128, hidden_size=32, state_size=8, num_hidden_layers=2,
                                        expand=2, conv_kernel=4, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 128, (b, 16), generator=g)
    return {"input_ids": x, "labels": x.clone()}
