"""HF Informer probabilistic forecaster with future values: ProbSparse self-attention (a random sample of keys, drawn with torch.randint in every forward, picks the top queries by a sparsity measure; the rest take the mean of the values), distilling Conv1d + max-pool layers halving the encoder sequence, lagged and scaled inputs with time features, a Student-t distribution head and its negative log-likelihood as the loss."""
import torch
from transformers import InformerConfig, InformerForPrediction
BATCH_SIZE = 4
def build_model():
    return InformerForPrediction(InformerConfig(prediction_length=8, context_length=16, input_size=1, lags_sequence=[1, 2, 3], num_time_features=2,
                                                d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
                                                encoder_ffn_dim=64, decoder_ffn_dim=64, attention_type="prob", sampling_factor=2, distil=True,
                                                dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0,
                                                decoder_layerdrop=0.0, use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    past = 16 + 3
    return {"past_values": torch.randn(b, past, generator=g), "past_time_features": torch.randn(b, past, 2, generator=g),
            "past_observed_mask": torch.ones(b, past), "future_values": torch.randn(b, 8, generator=g),
            "future_time_features": torch.randn(b, 8, 2, generator=g)}
