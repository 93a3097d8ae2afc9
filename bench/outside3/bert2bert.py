"""HF EncoderDecoderModel: a BERT encoder and a BERT decoder with cross-attention (bert2bert), tied word embeddings between encoder and decoder."""
import torch
from transformers import BertConfig, EncoderDecoderConfig, EncoderDecoderModel
BATCH_SIZE = 4
def build_model():
    enc = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    dec = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, is_decoder=True, add_cross_attention=True)
    cfg = EncoderDecoderConfig.from_encoder_decoder_configs(enc, dec)
    cfg.decoder_start_token_id, cfg.pad_token_id, cfg.tie_encoder_decoder = 2, 0, True
    return EncoderDecoderModel(config=cfg)
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(3, 128, (b, 16), generator=g), "labels": torch.randint(3, 128, (b, 12), generator=g)}
