"""HF Perceiver masked LM over bytes: a learned latent array cross-attends to the input, self-attention on latents, a decoder cross-attending back to positions."""
import torch
from transformers import PerceiverConfig, PerceiverForMaskedLM
BATCH_SIZE = 2
def build_model():
    return PerceiverForMaskedLM(PerceiverConfig(num_latents=16, d_latents=32, d_model=32, num_blocks=1, num_self_attends_per_block=2,
                                                num_self_attention_heads=4, num_cross_attention_heads=4, vocab_size=262, max_position_embeddings=64,
                                                attention_probs_dropout_prob=0.0, qk_channels=32, v_channels=32))
def example_batch(b):
    ids = torch.randint(0, 262, (b, 64), generator=torch.Generator().manual_seed(0))
    return {"inputs": ids, "labels": ids}
