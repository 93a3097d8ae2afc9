"""HF LayoutLM token classification with labels: a BERT encoder whose input embeddings add, besides word, 1-D position and token-type embeddings, four 2-D layout embeddings looked up from the bbox tensor (x0, y0, x1, y1 by slicing the last dim) plus height and width embeddings from box differences (bbox[..., 3] - bbox[..., 1], bbox[..., 2] - bbox[..., 0]); the extended attention mask built in forward from a padded attention_mask; per-token linear classifier with the cross-entropy (labels -100 on padding) computed inside the model."""
import torch
from transformers import LayoutLMConfig, LayoutLMForTokenClassification
BATCH_SIZE = 4
def build_model():
    return LayoutLMForTokenClassification(LayoutLMConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                         intermediate_size=64, max_position_embeddings=64, max_2d_position_embeddings=1024,
                                                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=7))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 20
    a = torch.randint(0, 1001, (b, T, 2), generator=g)
    c = torch.randint(0, 1001, (b, T, 2), generator=g)
    bbox = torch.stack([torch.minimum(a[..., 0], c[..., 0]), torch.minimum(a[..., 1], c[..., 1]),
                        torch.maximum(a[..., 0], c[..., 0]), torch.maximum(a[..., 1], c[..., 1])], -1)
    mask = torch.ones(b, T, dtype=torch.long)
    mask[1::2, 14:] = 0
    ids = torch.randint(1, 200, (b, T), generator=g)
    ids[mask == 0] = 0
    bbox[mask == 0] = 0
    labels = torch.randint(0, 7, (b, T), generator=g)
    labels[mask == 0] = -100
    return {"input_ids": ids, "bbox": bbox, "attention_mask": mask, "labels": labels}
