"""HF ViLT masked LM with labels: one single-stream transformer over text tokens and image patches concatenated; the patch embedding's mask is built in forward by nearest-interpolating pixel_mask to the patch grid, each image's valid height / width read from it as Python values to bilinearly interpolate and pad its own copy of the position table (a per-sample loop), and the patches gathered by index (nonzero over the mask, unique, per-sample lists: data-dependent shapes) with max_image_length=-1, which keeps every valid patch but still draws them through torch.multinomial, a random permutation of a full image's patches and random padding patches (masked out) for the odd samples whose right half is padding; text and image masks concatenated into one attention mask, modality-type embeddings added, the MLM head (tied to the word embeddings) over the text positions only and the loss inside the model on the masked tokens (labels -100 elsewhere); the base model's pooler is built and run but its output unused, so its two parameters get no gradient."""
import torch
from transformers import ViltConfig, ViltForMaskedLM
BATCH_SIZE = 4
def build_model():
    return ViltForMaskedLM(ViltConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                      max_position_embeddings=16, image_size=32, patch_size=8, max_image_length=-1,
                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 128, (b, 12), generator=g)
    mask = torch.ones(b, 12, dtype=torch.long)
    mask[:, 10:] = 0
    labels = torch.full((b, 12), -100)
    labels[:, 2:8:2] = ids[:, 2:8:2]
    ids = ids.clone()
    ids[:, 2:8:2] = 4  # the [MASK] token
    pixel_mask = torch.ones(b, 32, 32, dtype=torch.long)
    pixel_mask[1::2, :, 16:] = 0
    return {"input_ids": ids, "attention_mask": mask, "pixel_values": torch.randn(b, 3, 32, 32, generator=g), "pixel_mask": pixel_mask,
            "labels": labels}
