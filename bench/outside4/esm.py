"""HF ESM protein masked LM: rotary positions, token dropout scaling by the mask ratio, a tied LM head."""
import torch
from transformers import EsmConfig, EsmForMaskedLM
BATCH_SIZE = 4
def build_model():
    return EsmForMaskedLM(EsmConfig(vocab_size=33, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                    max_position_embeddings=64, position_embedding_type="rotary", token_dropout=True, mask_token_id=32, pad_token_id=1,
                                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 30, (b, 20), generator=g)
    labels = ids.clone()
    ids[:, ::5] = 32
    return {"input_ids": ids, "labels": labels}
