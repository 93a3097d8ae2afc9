"""HF Reformer causal LM with labels: local and LSH (locality-sensitive hashing) attention layers alternating, axial position embeddings (an 8 x 8 grid whose product is the sequence length), and reversible residual layers whose backward recomputes each layer's input from its output inside a custom autograd Function instead of keeping the activations; the LSH rotations are seeded (hash_seed) so forward is deterministic."""
import torch
from transformers import ReformerConfig, ReformerModelWithLMHead
BATCH_SIZE = 4
def build_model():
    return ReformerModelWithLMHead(ReformerConfig(vocab_size=128, hidden_size=32, attention_head_size=16, num_attention_heads=2,
                                                  feed_forward_size=64, attn_layers=["local", "lsh", "local", "lsh"],
                                                  axial_pos_embds=True, axial_pos_shape=[8, 8], axial_pos_embds_dim=[16, 16],
                                                  max_position_embeddings=64, local_attn_chunk_length=16, lsh_attn_chunk_length=16,
                                                  num_buckets=4, num_hashes=1, hash_seed=0, is_decoder=True,
                                                  hidden_dropout_prob=0.0, local_attention_probs_dropout_prob=0.0,
                                                  lsh_attention_probs_dropout_prob=0.0, use_cache=False))
def example_batch(b):
    ids = torch.randint(3, 128, (b, 64), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
