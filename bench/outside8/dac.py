"""HF DAC neural audio codec trained on reconstruction: weight-normed Conv1d encoder blocks with Snake activations (x + sin(alpha x)^2 / alpha, a learned alpha per channel), a residual vector quantizer (4 codebooks; factorised low-dimensional codes, L2-normalised lookups, straight-through estimator x + (q - x).detach()) whose commitment and codebook losses come back per sample as the model's loss (averaged), a transposed-conv decoder; loss_fn adds an L1 between the audio and its reconstruction."""
import torch
import torch.nn.functional as F
from transformers import DacConfig, DacModel
BATCH_SIZE = 4
def build_model():
    return DacModel(DacConfig(encoder_hidden_size=8, downsampling_ratios=[2, 4], decoder_hidden_size=32, n_codebooks=4, codebook_size=64,
                              codebook_dim=4, hidden_size=32, sampling_rate=16000))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, 1, 512, generator=g)
    return ({"input_values": x}, x)
def loss_fn(out, audio):
    return out.loss.mean() + F.l1_loss(out.audio_values, audio[:, 0, : out.audio_values.shape[-1]])
