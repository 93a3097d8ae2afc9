"""CLIP (HF): a vision and a text tower, contrastive loss (a wrapper sets return_loss)."""
import torch
from transformers import CLIPConfig, CLIPModel, CLIPTextConfig, CLIPVisionConfig
BATCH_SIZE = 4
class Wrap(torch.nn.Module):
    def __init__(self, m):
        super().__init__(); self.clip = m
    def forward(self, input_ids, pixel_values):
        return self.clip(input_ids=input_ids, pixel_values=pixel_values, return_loss=True).loss
def build_model():
    t = CLIPTextConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=32)
    v = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=32, patch_size=8)
    return Wrap(CLIPModel(CLIPConfig(text_config=t.to_dict(), vision_config=v.to_dict(), projection_dim=16)))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(0, 128, (b, 12), generator=g), "pixel_values": torch.randn(b, 3, 32, 32, generator=g)}
