"""HF DistilBERT for sequence classification with labels (the loss returned from forward): a tiny config (vocab 200, dim 32, 2 layers of 4 heads, hidden_dim 64, learned position embeddings), dropout left on as a user trains it (dropout 0.1 in the embeddings and feed-forward, attention_dropout 0.1, seq_classif_dropout 0.2 before the classifier), the [CLS] token's state through pre_classifier + ReLU + dropout + classifier to 3 labels; a padded attention_mask (rows padded from positions 18, 14, 22 and none) with pad ids 0 there."""
import torch
from transformers import DistilBertConfig, DistilBertForSequenceClassification
BATCH_SIZE = 4
def build_model():
    return DistilBertForSequenceClassification(DistilBertConfig(vocab_size=200, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                                                max_position_embeddings=64, dropout=0.1, attention_dropout=0.1,
                                                                seq_classif_dropout=0.2, num_labels=3, pad_token_id=0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 24
    ids = torch.randint(1, 200, (b, T), generator=g)
    lens = torch.tensor([18, 14, 22, 24] * ((b + 3) // 4))[:b]
    mask = (torch.arange(T)[None, :] < lens[:, None]).long()
    ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.randint(0, 3, (b,), generator=g)}
