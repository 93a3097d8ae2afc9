"""HF PatchTST forecaster: a multivariate series cut into patches, channel-independent transformer, MSE against future values."""
import torch
from transformers import PatchTSTConfig, PatchTSTForPrediction
BATCH_SIZE = 4
def build_model():
    return PatchTSTForPrediction(PatchTSTConfig(num_input_channels=3, context_length=32, prediction_length=8, patch_length=8, patch_stride=8,
                                                d_model=32, num_attention_heads=4, num_hidden_layers=2, ffn_dim=64, dropout=0.0,
                                                attention_dropout=0.0, ff_dropout=0.0, head_dropout=0.0, positional_dropout=0.0, path_dropout=0.0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"past_values": torch.randn(b, 32, 3, generator=g), "future_values": torch.randn(b, 8, 3, generator=g)}
