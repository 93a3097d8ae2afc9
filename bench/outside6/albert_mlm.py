"""HF ALBERT masked LM: a factorised embedding (32-dim tokens projected to 64), one transformer layer's weights shared by all six layers (num_hidden_groups=1: the same module called six times), the MLM decoder tied to the embeddings; labels -100 except at masked positions."""
import torch
from transformers import AlbertConfig, AlbertForMaskedLM
BATCH_SIZE = 4
def build_model():
    return AlbertForMaskedLM(AlbertConfig(vocab_size=256, embedding_size=32, hidden_size=64, num_hidden_layers=6, num_hidden_groups=1,
                                          num_attention_heads=4, intermediate_size=128, max_position_embeddings=64,
                                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 256, (b, 32), generator=g)
    masked = torch.rand(b, 32, generator=g) < 0.15
    masked[:, 0] = True
    return {"input_ids": torch.where(masked, torch.full_like(ids, 4), ids), "labels": torch.where(masked, ids, torch.full_like(ids, -100))}
