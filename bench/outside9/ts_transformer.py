"""HF Time Series Transformer forecaster with a Student-T head: a mean scaler computed in forward over the last context_length steps from past_values and past_observed_mask (a masked mean of absolute values, clamped, falling back for an unobserved series to a mean over the whole batch: a reduction across dimension 0), the past and future windows concatenated, scaled, and sliced at lags 1-3 into stacked lagged copies, joined with the time features and log1p|loc| / log(scale) broadcast over time into each step's input (the decoder teacher-forced on the future window built the same way), an encoder-decoder transformer, a head projecting to the Student-T's df / loc / scale (softplus-constrained) with the series scale re-applied through an affine transform, and the negative log-likelihood of future_values, averaged with observed-mask weights, as the loss inside the model."""
import torch
from transformers import TimeSeriesTransformerConfig, TimeSeriesTransformerForPrediction
BATCH_SIZE = 4
PRED, CTX, LAGS = 4, 8, [1, 2, 3]
def build_model():
    return TimeSeriesTransformerForPrediction(TimeSeriesTransformerConfig(
        prediction_length=PRED, context_length=CTX, lags_sequence=LAGS, num_time_features=2, distribution_output="student_t",
        scaling="mean", d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_layers=2, decoder_layers=2, dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0, attention_dropout=0.0,
        activation_dropout=0.0, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    past = CTX + max(LAGS)
    t = torch.arange(past + PRED, dtype=torch.float32)
    series = 5 + torch.sin(t / 3)[None] + 0.3 * torch.randn(b, past + PRED, generator=g)
    feats = torch.stack([torch.sin(t / 6), t / (past + PRED)], -1)[None].expand(b, -1, -1).contiguous()
    observed = torch.ones(b, past)
    observed[1::2, :3] = 0  # odd series: their first values unobserved
    return {"past_values": series[:, :past], "past_time_features": feats[:, :past], "past_observed_mask": observed,
            "future_values": series[:, past:], "future_time_features": feats[:, past:].contiguous()}
