"""A tiny wav2vec2 (HF, random weights): a convolutional feature encoder, then a transformer; classification."""
import torch
from transformers import Wav2Vec2Config, Wav2Vec2ForSequenceClassification
BATCH_SIZE = 4
def build_model():
    cfg = Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                         conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                         num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, num_labels=3,
                         hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
                         mask_time_prob=0.0, layerdrop=0.0, classifier_proj_size=16)
    return Wav2Vec2ForSequenceClassification(cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_values": torch.randn(b, 1600, generator=g), "labels": torch.randint(0, 3, (b,), generator=g)}
