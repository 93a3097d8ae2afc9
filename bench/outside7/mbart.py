"""HF mBART sequence-to-sequence with labels: a pre-LN transformer encoder-decoder with a final LayerNorm on each stack and a LayerNorm over the embeddings, learned positions offset by 2, decoder inputs made from the labels by mBART's own shift (the last non-pad token, the language/eos id, wrapped to the front), tied embeddings; the source batch is padded (attention_mask has zeros)."""
import torch
from transformers import MBartConfig, MBartForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return MBartForConditionalGeneration(MBartConfig(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2,
                                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                                     decoder_ffn_dim=64, max_position_embeddings=64, dropout=0.0,
                                                     attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0,
                                                     decoder_layerdrop=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                                     use_cache=False))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (b, 24), generator=g)
    lengths = torch.randint(12, 25, (b,), generator=g)
    lengths[0] = 24
    mask = (torch.arange(24).unsqueeze(0) < lengths.unsqueeze(1)).long()
    ids[:, -1] = 2
    ids = torch.where(mask.bool(), ids, torch.ones_like(ids))
    ids[torch.arange(b), lengths - 1] = 2
    labels = torch.randint(3, 128, (b, 16), generator=g)
    labels[:, -1] = 2
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
