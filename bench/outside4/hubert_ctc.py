"""HF HuBERT fine-tuned with CTC, the loss outside the model (HF's own reads the labels' values): a conv feature extractor over raw audio, a positional conv with weight norm, a transformer; padded labels (-100) and F.ctc_loss in loss_fn."""
import torch, torch.nn.functional as F
from transformers import HubertConfig, HubertForCTC
BATCH_SIZE = 2
def build_model():
    cfg = HubertConfig(vocab_size=12, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                       conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                       hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0,
                       mask_time_prob=0.0, final_dropout=0.0, pad_token_id=0)
    return HubertForCTC(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(1, 12, (b, 5), generator=g)
    labels[0, 4] = -100
    return {"input_values": torch.randn(b, 800, generator=g)}, labels
def loss_fn(out, labels):
    logp = out.logits.log_softmax(-1).transpose(0, 1)
    in_len = torch.full((logp.shape[1],), logp.shape[0], dtype=torch.long)
    return F.ctc_loss(logp, labels.clamp(min=0), in_len, (labels >= 0).sum(-1), zero_infinity=True)
