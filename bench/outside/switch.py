"""Switch Transformers (HF): encoder-decoder with top-1 routed experts. Its experts pick their tokens by value
(``nonzero`` over the routing, a loop over the experts hit), which torch.export cannot capture: kept here for
the one-line capture error a user gets (its router's cast of its classifier in forward, which failed the
export first, is now seen through; the attention mask is passed: without it, HF's encoder indexes ``None``
while exporting)."""
import torch
from transformers import SwitchTransformersConfig, SwitchTransformersForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    cfg = SwitchTransformersConfig(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                   num_heads=4, num_experts=4, expert_capacity=64, encoder_sparse_step=1,
                                   decoder_sparse_step=1, dropout_rate=0.0, use_cache=False,
                                   decoder_start_token_id=0)  # (transformers 5 no longer defaults it)
    return SwitchTransformersForConditionalGeneration(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(3, 128, (b, 16), generator=g), "attention_mask": torch.ones(b, 16), "labels": torch.randint(3, 128, (b, 12), generator=g)}
