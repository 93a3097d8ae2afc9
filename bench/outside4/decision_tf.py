"""HF Decision Transformer: states, actions and returns-to-go embedded and interleaved into a GPT-2; the loss on predicted actions is the user's (loss_fn)."""
import torch, torch.nn.functional as F
from transformers import DecisionTransformerConfig, DecisionTransformerModel
BATCH_SIZE = 4
def build_model():
    return DecisionTransformerModel(DecisionTransformerConfig(state_dim=6, act_dim=3, hidden_size=32, max_ep_len=64, n_layer=2, n_head=4,
                                                              n_inner=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    t = 10
    inp = {"states": torch.randn(b, t, 6, generator=g), "actions": torch.randn(b, t, 3, generator=g),
           "returns_to_go": torch.randn(b, t, 1, generator=g), "timesteps": torch.arange(t).repeat(b, 1),
           "attention_mask": torch.ones(b, t, dtype=torch.long)}
    return inp, torch.randn(b, t, 3, generator=g)
def loss_fn(out, target):
    return F.mse_loss(out.action_preds, target)
