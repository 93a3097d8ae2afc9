"""HF Autoformer time-series forecaster: series decomposition by a moving average (AvgPool1d on padded series), auto-correlation attention by rfft/irfft with the top-k delays picked by torch.topk and rolled in, lagged inputs and mean scaling, a Student-t likelihood (NLL loss)."""
import torch
from transformers import AutoformerConfig, AutoformerForPrediction
BATCH_SIZE = 4
CTX, PRED, LAGS = 24, 8, [1, 2, 3, 7]
def build_model():
    return AutoformerForPrediction(AutoformerConfig(prediction_length=PRED, context_length=CTX, lags_sequence=LAGS, num_time_features=1,
                                                    d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=2,
                                                    decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, moving_average=5,
                                                    autocorrelation_factor=2, dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                                                    attention_dropout=0.0, activation_dropout=0.0, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    past_len = CTX + max(LAGS)
    t = torch.arange(past_len + PRED, dtype=torch.float32)
    series = 5 + torch.sin(t / 4).expand(b, -1) + 0.1 * torch.randn(b, past_len + PRED, generator=g)
    feats = (t / (past_len + PRED)).expand(b, -1).unsqueeze(-1).contiguous()
    return {"past_values": series[:, :past_len].contiguous(), "past_time_features": feats[:, :past_len].contiguous(),
            "past_observed_mask": torch.ones(b, past_len), "future_values": series[:, past_len:].contiguous(),
            "future_time_features": feats[:, past_len:].contiguous()}
