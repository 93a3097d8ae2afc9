"""HF DeiT with a distillation token (DeiTForImageClassificationWithTeacher) on 32 x 32 images: a 4 x 4 patch embedding conv (64 patches), a CLS token and a distillation token both expanded over the batch and concatenated in front of the patches, learned position embeddings over the 66 tokens, 3 ViT encoder layers (d 32, 4 heads, MLP 64, no dropout), a final layer norm, and two separate linear heads, one on the CLS token's state and one on the distillation token's state; the model is called on pixel_values alone and returns both logits (its own output object, no loss), and loss_fn implements DeiT's hard-label distillation: half the cross-entropy of the CLS head against the true labels plus half the cross-entropy of the distillation head against a teacher's hard labels, the two label columns carried together in one (b, 2) labels tensor."""
import torch
import torch.nn.functional as F
from transformers import DeiTConfig, DeiTForImageClassificationWithTeacher
BATCH_SIZE = 4
def build_model():
    return DeiTForImageClassificationWithTeacher(DeiTConfig(image_size=32, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=3,
                                                            num_attention_heads=4, intermediate_size=64, hidden_dropout_prob=0.0,
                                                            attention_probs_dropout_prob=0.0, num_labels=10))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (b,), generator=g)
    teacher = torch.randint(0, 10, (b,), generator=g)
    return {"pixel_values": x}, torch.stack([y, teacher], 1)
def loss_fn(out, labels):
    return 0.5 * F.cross_entropy(out.cls_logits, labels[:, 0]) + 0.5 * F.cross_entropy(out.distillation_logits, labels[:, 1])
