"""HF Wav2Vec2-Conformer CTC with labels: a conv feature encoder (three strided Conv1d layers with LayerNorm, 3200 samples -> 159 frames) and feature projection, then conformer blocks (macaron half-step feed-forwards, self-attention with Transformer-XL relative positions: a sinusoidal table kept in a non-persistent buffer that forward reassigns (self.pe = extend_pe(...)), sliced once and reused by every layer through a linear_pos projection, learned pos_bias_u / pos_bias_v added to the queries and a pad-concat-view rel-shift of the position scores, and a convolution module: pointwise Conv1d -> GLU -> depthwise Conv1d (kernel 7) -> BatchNorm1d -> SiLU -> pointwise); padded frames are zeroed in place (hidden_states[~mask] = 0) from a frame mask derived in forward from the sample-level attention_mask, and a CTC loss (mean reduction, blank 0, labels padded with -100, target lengths counted in forward) is computed inside the model; the weight-normed pos_conv_embed (built but not called with relative positions) and masked_spec_embed (SpecAugment off) never get gradients."""
import torch
from transformers import Wav2Vec2ConformerConfig, Wav2Vec2ConformerForCTC
BATCH_SIZE = 4
def build_model():
    return Wav2Vec2ConformerForCTC(Wav2Vec2ConformerConfig(
        vocab_size=32, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96, hidden_dropout=0.0,
        activation_dropout=0.0, attention_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0,
        feat_extract_norm="layer", conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), conv_bias=True,
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, apply_spec_augment=False, position_embeddings_type="relative",
        max_source_positions=256, conv_depthwise_kernel_size=7, conformer_conv_dropout=0.0, ctc_loss_reduction="mean",
        pad_token_id=0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    wav = torch.randn(b, 3200, generator=g)
    mask = torch.ones(b, 3200, dtype=torch.long)
    mask[1::2, 2400:] = 0
    wav[mask == 0] = 0.0
    labels = torch.randint(1, 32, (b, 20), generator=g)
    labels[1::2, 14:] = -100
    return {"input_values": wav, "attention_mask": mask, "labels": labels}
