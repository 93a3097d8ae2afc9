"""HF Mamba-2 causal LM on its pure-PyTorch path (no kernels): the chunked state-space duality scan (segment sums by cumsum, exp of decays, einsum within and between chunks), a grouped RMSNorm gate."""
import torch
from transformers import Mamba2Config, Mamba2ForCausalLM
BATCH_SIZE = 4
def build_model():
    return Mamba2ForCausalLM(Mamba2Config(vocab_size=128, hidden_size=32, num_hidden_layers=2, state_size=16, expand=2, head_dim=8,
                                          num_heads=8, n_groups=1, conv_kernel=4, chunk_size=8, use_cache=False))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 24), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
