"""HF WavLM for CTC from a tiny config on a raw 1600-sample waveform, the CTC loss moved out of the model into loss_fn (the library's own loss first checks labels.max() against the vocabulary, reading a tensor's value): a 3-layer convolutional feature encoder (kernels 10, 3, 3, strides 5, 2, 2, 16 channels, GELU, group norm on the first layer: feat_extract_norm "group") giving 79 frames, a feature projection (LayerNorm + linear to d 32 + dropout 0.1), a grouped convolutional positional embedding (kernel 16, 4 groups, weight-normed), 2 post-norm transformer layers of d 32 (4 heads, FFN 64) whose attention adds WavLM's gated relative position bias: bucketed relative distances (32 buckets, max distance 64, log-spaced) looked up in a learned per-head table by the first layer and handed on to the next, each layer gating it per head with a sigmoid of a linear map of the queries (gru_rel_pos); hidden and attention dropout 0.1 and feature-projection dropout 0.1 (random draws in forward), layerdrop 0, SpecAugment off (apply_spec_augment False, mask_time_prob 0); the model gets only input_values and returns logits over 12 characters, and loss_fn log-softmaxes them in fp32 and calls F.ctc_loss (blank 0, mean reduction) with every input length the full frame count and target lengths counted from labels >= 0 (label sequences of unequal lengths padded with -100, clamped to 0)."""
import torch
import torch.nn.functional as F
from transformers import WavLMConfig, WavLMForCTC
BATCH_SIZE = 4
def build_model():
    return WavLMForCTC(WavLMConfig(vocab_size=12, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2),
                                   conv_kernel=(10, 3, 3), feat_extract_norm="group", num_conv_pos_embeddings=16,
                                   num_conv_pos_embedding_groups=4, num_buckets=32, max_bucket_distance=64,
                                   do_stable_layer_norm=False, apply_spec_augment=False, mask_time_prob=0.0,
                                   ctc_loss_reduction="mean", pad_token_id=0, hidden_dropout=0.1,
                                   attention_dropout=0.1, activation_dropout=0.0, feat_proj_dropout=0.1,
                                   final_dropout=0.0, layerdrop=0.0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    audio = torch.randn(b, 1600, generator=g)
    labels = torch.randint(1, 12, (b, 8), generator=g)
    labels[1::2, 5:] = -100
    return {"input_values": audio}, labels
def loss_fn(out, labels):
    logp = F.log_softmax(out.logits, dim=-1, dtype=torch.float32).transpose(0, 1)
    T, B = logp.shape[0], logp.shape[1]
    input_lengths = torch.full((B,), T, dtype=torch.long, device=logp.device)
    target_lengths = (labels >= 0).sum(-1)
    return F.ctc_loss(logp, labels.clamp(min=0), input_lengths, target_lengths, blank=0, reduction="mean")
