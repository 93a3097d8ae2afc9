"""HF SEW-D speech recogniser trained with CTC (loss_fn: HF's own CTC loss reads the label lengths from the labels to decide what to run, which export refuses, so the labels stay outside and every sample's lengths are fixed): a strided Conv1d feature extractor, a squeeze (pooling the frame sequence by 2) before DeBERTa-v2 layers with disentangled relative-position attention (content-to-position and position-to-content terms gathered by relative bucket), an upsample back to the frame rate, CTC loss over the characters."""
import torch
import torch.nn.functional as F
from transformers import SEWDConfig, SEWDForCTC
BATCH_SIZE = 4
def build_model():
    return SEWDForCTC(SEWDConfig(vocab_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                 squeeze_factor=2, max_position_embeddings=64, position_buckets=16, conv_dim=(32, 32, 32),
                                 conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                                 hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
                                 final_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0, pad_token_id=0, ctc_loss_reduction="mean"))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"input_values": torch.randn(b, 2000, generator=g)}, torch.randint(1, 32, (b, 10), generator=g)
def loss_fn(out, labels):
    logp = out.logits.log_softmax(-1).transpose(0, 1)  # (frames, batch, vocab)
    frames = torch.full((logp.shape[1],), logp.shape[0], dtype=torch.long)
    return F.ctc_loss(logp, labels, frames, torch.full((labels.shape[0],), labels.shape[1], dtype=torch.long), blank=0)
