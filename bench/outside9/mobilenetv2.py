"""HF MobileNetV2 image classification with labels, depth multiplier 0.35 on 32 x 32 images: a stem (3x3 conv, depthwise conv, projection) then 16 inverted residual blocks (1x1 expansion by 6 -> 3x3 depthwise conv, groups = channels -> linear 1x1 projection, each conv followed by BatchNorm2d with running-stat buffers updated in forward, ReLU6 after the first two), residual adds only where stride is 1 and channels match; TensorFlow-style SAME padding computed from the input shape and applied by F.pad before every conv (an extra padded copy of each activation), the spatial size shrinking 32 -> 1, a final 1x1 conv to 1280 channels, global average pool, an in-place nn.Dropout(inplace=True) (p 0) on the pooled features, a linear classifier and the cross-entropy computed inside the model."""
import torch
from transformers import MobileNetV2Config, MobileNetV2ForImageClassification
BATCH_SIZE = 4
def build_model():
    return MobileNetV2ForImageClassification(MobileNetV2Config(num_channels=3, image_size=32, depth_multiplier=0.35, min_depth=8,
                                                               expand_ratio=6.0, tf_padding=True, classifier_dropout_prob=0.0,
                                                               num_labels=10))
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": torch.randint(0, 10, (b,), generator=g)}
