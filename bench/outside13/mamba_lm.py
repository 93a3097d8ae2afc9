"""HF Mamba (v1) causal LM with labels from a tiny config, on the slow (pure PyTorch) path: 3 residual blocks of d 32 (RMSNorm, an input projection to 2 x 64 split into the SSM branch and a SiLU gate, a causal depthwise 1-D conv of kernel 4 on the SSM branch, the selective scan's input-dependent dt, B and C projections with dt through softplus, a sequential scan over 16 tokens with state size 8 (A from A_log, D skip), the gated output projected back), the embeddings tied to the lm_head; labels the inputs (shifted inside)."""
import torch
from transformers import MambaConfig, MambaForCausalLM
BATCH_SIZE = 4
def build_model():
    return MambaForCausalLM(MambaConfig(vocab_size=96, hidden_size=32, state_size=8, num_hidden_layers=3, expand=2,
                                        conv_kernel=4, time_step_rank=4, use_mambapy=False, tie_word_embeddings=True,
                                        pad_token_id=0, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 96, (b, 16), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}
