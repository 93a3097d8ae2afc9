"""HF RemBERT sequence classification from a tiny config: decoupled embeddings (input token, position and token-type embeddings of width 16, input_embedding_size, LayerNorm'd and projected up to the hidden width 32 by a linear layer; the output_embedding_size 48 used only by the unused MLM head), 3 post-LayerNorm encoder layers (4 heads, FFN 64, GELU), BERT-style pooler (tanh of a linear map of the first token), classifier dropout 0.1 and hidden/attention dropout 0.1 (random draws in forward), a 3-way classifier with the library's cross-entropy on integer labels; token_type_ids with a second segment in the last 6 positions and a padded attention_mask (the odd rows' last 4 tokens)."""
import torch
from transformers import RemBertConfig, RemBertForSequenceClassification
BATCH_SIZE = 4
def build_model():
    return RemBertForSequenceClassification(RemBertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=3,
                                                          num_attention_heads=4, input_embedding_size=16,
                                                          output_embedding_size=48, intermediate_size=64,
                                                          hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                                                          classifier_dropout_prob=0.1, max_position_embeddings=64,
                                                          type_vocab_size=2, num_labels=3, use_cache=False,
                                                          pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                                          attn_implementation="eager"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    T = 16
    ids = torch.randint(3, 128, (b, T), generator=g)
    mask = torch.ones(b, T, dtype=torch.long)
    mask[1::2, T - 4:] = 0
    ids[mask == 0] = 0
    types = torch.zeros(b, T, dtype=torch.long)
    types[:, T - 6:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types,
            "labels": torch.randint(0, 3, (b,), generator=g)}
