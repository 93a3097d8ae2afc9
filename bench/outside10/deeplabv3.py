"""Hand-written DeepLabV3-style semantic segmentation net on 32 x 32 images with 6 classes: a small ResNet-like backbone (3x3 stem conv + BatchNorm + nn.ReLU(inplace=True), a stride-2 basic-block stage and a stride-2 basic-block stage, then a last stage of basic blocks whose 3x3 convs are dilated (atrous, dilation 2 and 4, stride 1) so the output stride stays 4; each basic block adds its identity or a 1x1 projection shortcut and applies an in-place ReLU to the sum), then an ASPP head: parallel 1x1 conv, 3x3 convs dilated 2 and 3, and a global-average-pool branch (adaptive avg pool to 1x1 -> 1x1 conv -> BN -> in-place ReLU, upsampled back to the 8 x 8 feature size with F.interpolate), the five branches concatenated along channels, a 1x1 projection, a 3x3 conv and a 1x1 classifier; the logits bilinearly upsampled (align_corners=False) to the 32 x 32 label map and the per-pixel cross-entropy with ignore_index=255 (int64 labels, about a fifth of the pixels 255) computed inside forward, which returns the scalar loss; BatchNorm running-stat buffers are updated in forward."""
import torch
import torch.nn.functional as F
from torch import nn
BATCH_SIZE = 4
NUM_CLASSES = 6


def conv_bn_relu(cin, cout, k=3, stride=1, dilation=1):
    pad = dilation * (k // 2)
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, dilation=dilation, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1, dilation=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, dilation, dilation=dilation, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, dilation, dilation=dilation, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += idt
        return self.relu(out)


class ASPP(nn.Module):
    def __init__(self, cin, cout, rates=(2, 3)):
        super().__init__()
        self.branches = nn.ModuleList([conv_bn_relu(cin, cout, 1)] + [conv_bn_relu(cin, cout, 3, dilation=r) for r in rates])
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))
        self.project = conv_bn_relu(cout * (len(rates) + 2), cout, 1)

    def forward(self, x):
        outs = [b(x) for b in self.branches]
        p = F.interpolate(self.pool(x), size=x.shape[-2:], mode="bilinear", align_corners=False)
        outs.append(p)
        return self.project(torch.cat(outs, dim=1))


class DeepLabV3(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.stem = conv_bn_relu(3, 16, 3)
        self.layer1 = nn.Sequential(BasicBlock(16, 24, stride=2), BasicBlock(24, 24))
        self.layer2 = nn.Sequential(BasicBlock(24, 32, stride=2), BasicBlock(32, 32))
        self.layer3 = nn.Sequential(BasicBlock(32, 48, dilation=2), BasicBlock(48, 48, dilation=4))
        self.aspp = ASPP(48, 32)
        self.head = nn.Sequential(conv_bn_relu(32, 32, 3), nn.Conv2d(32, num_classes, 1))

    def forward(self, pixel_values, labels):
        x = self.layer3(self.layer2(self.layer1(self.stem(pixel_values))))
        logits = self.head(self.aspp(x))
        logits = F.interpolate(logits, size=labels.shape[-2:], mode="bilinear", align_corners=False)
        return F.cross_entropy(logits, labels, ignore_index=255)


def build_model():
    return DeepLabV3()


def example_batch(b):
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, NUM_CLASSES, (b, 32, 32), generator=g)
    labels[torch.rand(b, 32, 32, generator=g) < 0.2] = 255
    return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g), "labels": labels}
