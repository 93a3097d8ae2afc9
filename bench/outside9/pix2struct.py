"""HF Pix2Struct image-to-text with labels: the encoder reads flattened variable-resolution patches whose first two values are the patch's row and column index (cast to long in forward and looked up in row and column embedding tables added to the projected pixels), padding patches masked out by attention_mask, T5-style RMS norms and gated-GELU MLPs; the decoder shifts the labels right in forward (in-place masked_fill_ of -100 on the shifted copy), builds its own mask from them, and uses T5 relative-position buckets computed in its first layer and reused by every later layer, cross-attending to the encoder output; the LM loss inside the model."""
import torch
from transformers import Pix2StructConfig, Pix2StructForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return Pix2StructForConditionalGeneration(Pix2StructConfig(
        vision_config=dict(hidden_size=64, patch_embed_hidden_size=48, d_ff=128, d_kv=16, num_hidden_layers=2, num_attention_heads=4,
                           seq_len=32, dropout_rate=0.0, attention_dropout=0.0),
        text_config=dict(vocab_size=128, hidden_size=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, dropout_rate=0.0, use_cache=False)))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    seq, grid = 20, 4
    patches = torch.zeros(b, seq, 2 + 48)
    mask = torch.zeros(b, seq)
    rows = torch.arange(grid).repeat_interleave(grid) + 1
    cols = torch.arange(grid).repeat(grid) + 1
    for i in range(b):
        n = grid * grid - grid * (i % 2)  # odd samples: one row of patches fewer, more padding
        patches[i, :n, 0], patches[i, :n, 1] = rows[:n].float(), cols[:n].float()
        patches[i, :n, 2:] = torch.randn(n, 48, generator=g)
        mask[i, :n] = 1
    return {"flattened_patches": patches, "attention_mask": mask, "labels": torch.randint(2, 128, (b, 10), generator=g)}
