"""HF BLIP image captioning with labels: a ViT image encoder (class token plus 16 patch tokens from a 32-pixel image) whose output tokens every layer of a BERT-style causal text decoder cross-attends to, so the image tokens are one value read by all decoder layers (and by every layer's backward); the causal and padding masks are built in forward, and the shifted LM loss (label smoothing 0.1 via .contiguous() copies of the shifted logits, padded positions -100) is computed inside the model."""
import torch
from transformers import BlipConfig, BlipForConditionalGeneration
BATCH_SIZE = 4
def build_model():
    return BlipForConditionalGeneration(BlipConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=32, patch_size=8,
                           attention_dropout=0.0),
        text_config=dict(vocab_size=128, hidden_size=64, encoder_hidden_size=32, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                         bos_token_id=1, pad_token_id=0, sep_token_id=2, label_smoothing=0.1, use_cache=False),
        projection_dim=32))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (b, 12), generator=g)
    mask = torch.ones(b, 12, dtype=torch.long)
    ids[:, 10:], mask[:, 10:] = 0, 0
    labels = ids.masked_fill(mask == 0, -100)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "input_ids": ids, "attention_mask": mask, "labels": labels}
