"""HF Data2VecAudio for CTC on a raw 3200-sample waveform, the CTC loss moved out of the model into loss_fn (the library's own loss reads the labels' values to find the target lengths): a tiny conv feature extractor (3 conv layers with layer-norm, kernels 10/3/3, strides 5/2/2 -> 159 frames), a feature projection, a positional conv embedding made of 2 stacked grouped 1-D convs with layer norms (padding trimmed), a 2-layer transformer encoder, mask_time_prob 0 (no SpecAugment); the model gets only input_values and returns logits, and loss_fn log-softmaxes them in fp32 and calls F.ctc_loss (blank 0, mean reduction) with the padded 2-D labels (-100 padding clamped to 0 and ignored past each target length), every input length the full 159 frames and the target lengths counted from labels >= 0."""
import torch
import torch.nn.functional as F
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
    return {"input_values": torch.randn(b, 3200, generator=g)}, labels
def loss_fn(out, labels):
    logp = F.log_softmax(out.logits, dim=-1, dtype=torch.float32).transpose(0, 1)
    T, B = logp.shape[0], logp.shape[1]
    input_lengths = torch.full((B,), T, dtype=torch.long, device=logp.device)
    target_lengths = (labels >= 0).sum(-1)
    return F.ctc_loss(logp, labels.clamp(min=0), input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False)
