"""HF Data2VecAudio for CTC with labels on a raw 3200-sample waveform: a tiny conv feature extractor (3 conv layers with layer-norm, kernels 10/3/3, strides 5/2/2 -> 159 frames), a feature projection, a positional conv embedding made of 2 stacked grouped 1-D convs with layer norms (padding trimmed), a 2-layer transformer encoder, mask_time_prob 0 (no SpecAugment), and the CTC loss (ctc_loss_reduction mean) computed inside the model from log-softmaxed logits, where the library derives the target lengths from the labels' values (labels >= 0, padded with -100) and the input lengths from the conv arithmetic."""
import torch
from transformers import Data2VecAudioConfig, Data2VecAudioForCTC
BATCH_SIZE = 4
def build_model():
    return Data2VecAudioForCTC(Data2VecAudioConfig(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                                   conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                                                   num_conv_pos_embeddings=2, num_conv_pos_embedding_groups=4, conv_pos_kernel_size=5,
                                                   hidden_dropout=0.0, activation_dropout=0.0, attention_dropout=0.0, feat_proj_dropout=0.0,
                                                   final_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0, ctc_loss_reduction="mean",
                                                   pad_token_id=0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(1, 32, (b, 12), generator=g)
    labels[1::2, 8:] = -100
    return {"input_values": torch.randn(b, 3200, generator=g), "labels": labels}
