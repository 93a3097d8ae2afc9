"""HF Persimmon causal LM with labels from a tiny config: 3 decoder layers of d 32 (4 heads of 8), a fused query-key-value projection with biases split per head, query-key LayerNorm (qk_layernorm: a LayerNorm over each head's 8 dimensions applied to queries and keys before the rotary embedding), partial rotary embeddings (partial_rotary_factor 0.5: only the first 4 of each head's 8 dimensions rotated, the rest concatenated back unrotated), a squared-ReLU (relu2) MLP of width 96, LayerNorm with bias before attention and MLP, untied embeddings and dropout 0.1 on hidden states; labels the inputs (shifted inside); use_cache off, eager attention."""
import torch
from transformers import PersimmonConfig, PersimmonForCausalLM
BATCH_SIZE = 4
def build_model():
    return PersimmonForCausalLM(PersimmonConfig(vocab_size=128, hidden_size=32, intermediate_size=96, num_hidden_layers=3,
                                                num_attention_heads=4, hidden_act="relu2", max_position_embeddings=64,
                                                qk_layernorm=True, hidden_dropout=0.1, attention_dropout=0.0,
                                                rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                                                                 "rope_type": "default"},
                                                tie_word_embeddings=False, use_cache=False, pad_token_id=0,
                                                attn_implementation="eager"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 128, (b, 16), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}
