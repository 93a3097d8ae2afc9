"""HF EnCodec (SEANet) audio autoencoder from a tiny config, trained through its residual vector quantiser with a straight-through estimator: the library's RVQ has no gradient path (codes are an argmax over negative squared distances to codebooks kept as buffers, decoded by an embedding lookup), so build_model wraps EncodecModel's own encoder, quantizer and decoder: the encoder (causal weight-normed convolutions with reflect padding whose amounts are computed from tensor buffers, one residual block per scale with a conv shortcut, downsampling by 2 then 4, a 2-layer nn.LSTM with a residual over time, 4 -> 32 channels, hidden 16) maps a 1x512 waveform to 64 frames; the RVQ (4 quantisers of 32 codes, their codebooks filled once in build_model from a seeded generator and never updated: no EMA, nothing stateful) quantises the residual stage by stage; the decoder (LSTM, transposed convolutions trimmed on the right, residual blocks) reads q_st = z + (q - z).detach(); forward returns (audio, z, q) and loss_fn is the waveform MSE plus 0.25 x the commitment MSE between z and the detached q; no dropout, no batch norm."""
import torch, torch.nn as nn, torch.nn.functional as F
from transformers import EncodecConfig, EncodecModel
BATCH_SIZE = 4
class EncodecST(nn.Module):
    def __init__(self):
        super().__init__()
        cfg = EncodecConfig(target_bandwidths=[1.5, 20.0], sampling_rate=8000, audio_channels=1, hidden_size=16,
                            num_filters=4, num_residual_layers=1, upsampling_ratios=[4, 2], norm_type="weight_norm",
                            kernel_size=7, last_kernel_size=7, residual_kernel_size=3, dilation_growth_rate=2,
                            use_causal_conv=True, pad_mode="reflect", compress=2, num_lstm_layers=2,
                            codebook_size=32, use_conv_shortcut=True)
        m = EncodecModel(cfg)
        self.encoder, self.quantizer, self.decoder = m.encoder, m.quantizer, m.decoder
        g = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for layer in self.quantizer.layers:
                layer.codebook.embed.copy_(torch.randn(layer.codebook.embed.shape, generator=g))
    def forward(self, audio):
        z = self.encoder(audio)
        codes = self.quantizer.encode(z)
        q = self.quantizer.decode(codes)
        out = self.decoder(z + (q - z).detach())
        return out[..., :audio.shape[-1]], z, q
def build_model():
    return EncodecST()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    t = torch.arange(512, dtype=torch.float32) / 8000
    f = 200 + 400 * torch.rand(b, 1, 1, generator=g)
    audio = 0.5 * torch.sin(2 * torch.pi * f * t) + 0.05 * torch.randn(b, 1, 512, generator=g)
    return audio, audio.clone()
def loss_fn(out, y):
    audio, z, q = out
    return F.mse_loss(audio, y) + 0.25 * F.mse_loss(z, q.detach())
