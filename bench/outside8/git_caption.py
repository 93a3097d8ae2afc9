"""HF GIT image captioning with labels: a CLIP-style vision encoder whose patch tokens, projected, are prepended to the text tokens of a BERT-style decoder that attends to them bidirectionally and to the text causally (one combined mask built in forward), the LM loss over the text positions only."""
import torch
from transformers import GitConfig, GitForCausalLM
BATCH_SIZE = 4
def build_model():
    return GitForCausalLM(GitConfig(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                       image_size=32, patch_size=8, num_channels=3),
                                    vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                    max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                    num_image_with_embedding=None, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 128, (b, 12), generator=g)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "input_ids": ids, "labels": ids}
