"""HF Wav2Vec2 for CTC from a tiny config on raw audio: a 3-layer convolutional feature encoder (kernels 10, 3, 3, strides 5, 2, 2, 16 channels, GELU, group norm on the first layer: feat_extract_norm "group"), a feature projection (LayerNorm + linear to d 32 + dropout), a grouped convolutional positional embedding (kernel 16, 4 groups, weight-normed), 2 transformer layers of d 32 (4 heads, FFN 64, post-norm), SpecAugment time masking off in this config (mask_time_prob 0), a CTC head over 12 characters with ctc_loss_reduction "mean"; label sequences of unequal lengths padded with -100."""
import torch
from transformers import Wav2Vec2Config, Wav2Vec2ForCTC
BATCH_SIZE = 4
def build_model():
    return Wav2Vec2ForCTC(Wav2Vec2Config(vocab_size=12, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=64, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2),
                                         conv_kernel=(10, 3, 3), feat_extract_norm="group", num_conv_pos_embeddings=16,
                                         num_conv_pos_embedding_groups=4, do_stable_layer_norm=False,
                                         mask_time_prob=0.0, ctc_loss_reduction="mean", pad_token_id=0,
                                         hidden_dropout=0.1, attention_dropout=0.1, feat_proj_dropout=0.1,
                                         layerdrop=0.0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    audio = torch.randn(b, 1600, generator=g)
    labels = torch.randint(1, 12, (b, 8), generator=g)
    labels[1::2, 5:] = -100
    return {"input_values": audio, "labels": labels}
