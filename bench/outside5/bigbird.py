"""HF BigBird masked LM with block-sparse attention: sliding, global and random key blocks (the random blocks drawn with numpy, seeded, inside forward), the blocks gathered and multiplied block by block."""
import torch
from transformers import BigBirdConfig, BigBirdForMaskedLM
BATCH_SIZE = 2
def build_model():
    return BigBirdForMaskedLM(BigBirdConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                            max_position_embeddings=128, attention_type="block_sparse", block_size=4, num_random_blocks=2,
                                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 128, (b, 64), generator=g)
    labels = torch.where(torch.rand(b, 64, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    return {"input_ids": ids, "labels": labels}
