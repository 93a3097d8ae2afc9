"""HF RecurrentGemma (Griffin): RG-LRU recurrent blocks (a gated linear recurrence stepped in a Python loop over time, a causal Conv1d) alternating with local sliding-window attention, logits soft-capped."""
import torch
from transformers import RecurrentGemmaConfig, RecurrentGemmaForCausalLM
BATCH_SIZE = 4
def build_model():
    return RecurrentGemmaForCausalLM(RecurrentGemmaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                                          num_attention_heads=4, num_key_value_heads=1, lru_width=32, attention_window_size=8,
                                                          conv1d_width=4, block_types=["recurrent", "recurrent", "attention"],
                                                          use_cache=False))
def example_batch(b):
    ids = torch.randint(0, 128, (b, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
