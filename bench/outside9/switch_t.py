"""HF Switch Transformers encoder-decoder with labels and the router losses on: every second layer of encoder and decoder is a top-1 switch MoE (4 experts, capacity 6 tokens per expert per sequence, so overflow tokens are dropped and pass through on the residual only), the router multiplies its input by uniform jitter noise in place in training (the same tensor the experts then read), routes via argmax / one_hot / cumsum, and the experts pick their tokens by value (nonzero over the hit experts, torch.where, index_add_ into a zero buffer: data-dependent shapes); the router logits of all sparse layers are recorded by hooks and concatenated after the stack for the z-loss and load-balancing loss added to the LM loss; T5 relative-position buckets computed in the first layer and reused; a thin wrapper calls the model with output_router_logits=True (a forward argument: the config cannot turn it on)."""
import torch, torch.nn as nn
from transformers import SwitchTransformersConfig, SwitchTransformersForConditionalGeneration
BATCH_SIZE = 4
class WithRouterLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
    def forward(self, input_ids, attention_mask, labels):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, output_router_logits=True)
def build_model():
    cfg = SwitchTransformersConfig(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=4, num_sparse_encoder_layers=2,
                                   num_decoder_layers=4, num_sparse_decoder_layers=2, num_heads=4, num_experts=4, expert_capacity=6,
                                   router_z_loss_coef=0.001, router_aux_loss_coef=0.01, dropout_rate=0.0, decoder_start_token_id=0, use_cache=False)
    return WithRouterLoss(SwitchTransformersForConditionalGeneration(cfg))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    mask = torch.ones(b, 16)
    mask[1::2, 12:] = 0
    return {"input_ids": torch.randint(3, 128, (b, 16), generator=g), "attention_mask": mask, "labels": torch.randint(3, 128, (b, 12), generator=g)}
