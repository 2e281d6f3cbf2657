"""The seed WideResNet of NVIDIA's DDP course, module for module, so state_dict names match.

Names come out as input_block.cbr.0.weight, input_block.cbr.1.running_mean, block1.scale.weight,
block1.layer1.cbr.0.weight, ..., fc.weight, fc.bias. ddpipe's gpud/models/wideresnet must load
exactly these names. Import from elsewhere with:

    sys.path.insert(0, os.path.join(REPO, "scripts")); from seed_models import WideResNet
"""

import torch.nn as nn

DEFAULT_CHANNELS = (16, 160, 320, 640)


class cbrblock(nn.Module):
    """Conv3x3 (same padding, no bias) -> BatchNorm -> ReLU."""

    def __init__(self, input_channels, output_channels):
        super().__init__()
        self.cbr = nn.Sequential(
            nn.Conv2d(input_channels, output_channels, kernel_size=3, stride=(1, 1),
                      padding='same', bias=False),
            nn.BatchNorm2d(output_channels),
            nn.ReLU(),
        )

    def forward(self, x):
        return self.cbr(x)


class conv_block(nn.Module):
    """Two cbrblocks with a residual; a 1x1 conv (with bias) projects the residual when scale_input."""

    def __init__(self, input_channels, output_channels, scale_input):
        super().__init__()
        self.scale_input = scale_input
        if self.scale_input:
            self.scale = nn.Conv2d(input_channels, output_channels, kernel_size=1, stride=(1, 1),
                                   padding='same')
        self.layer1 = cbrblock(input_channels, output_channels)
        self.dropout = nn.Dropout(p=0.01)
        self.layer2 = cbrblock(output_channels, output_channels)

    def forward(self, x):
        residual = x
        out = self.layer1(x)
        out = self.dropout(out)
        out = self.layer2(out)
        if self.scale_input:
            residual = self.scale(residual)
        out = out + residual
        return out


class WideResNet(nn.Module):
    """28x28 input: 3 stages at 28, 14, 7 pixels, AvgPool2d(7), Linear."""

    def __init__(self, num_classes, channels=DEFAULT_CHANNELS, in_channels=1):
        super().__init__()
        nChannels = [in_channels, *channels]
        if len(nChannels) != 5:
            raise ValueError(f"channels must have 4 entries, got {tuple(channels)!r}")
        self.input_block = cbrblock(nChannels[0], nChannels[1])
        self.block1 = conv_block(nChannels[1], nChannels[2], 1)
        self.block2 = conv_block(nChannels[2], nChannels[2], 0)
        self.pool1 = nn.MaxPool2d(2)
        self.block3 = conv_block(nChannels[2], nChannels[3], 1)
        self.block4 = conv_block(nChannels[3], nChannels[3], 0)
        self.pool2 = nn.MaxPool2d(2)
        self.block5 = conv_block(nChannels[3], nChannels[4], 1)
        self.block6 = conv_block(nChannels[4], nChannels[4], 0)
        self.pool = nn.AvgPool2d(7)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(nChannels[4], num_classes)

    def forward(self, x):
        out = self.input_block(x)
        out = self.block1(out)
        out = self.block2(out)
        out = self.pool1(out)
        out = self.block3(out)
        out = self.block4(out)
        out = self.pool2(out)
        out = self.block5(out)
        out = self.block6(out)
        out = self.pool(out)
        out = self.flat(out)
        out = self.fc(out)
        return out


def parse_channels(text):
    """'16,32,64,128' -> (16, 32, 64, 128)."""
    try:
        chans = tuple(int(c) for c in text.split(","))
    except ValueError:
        raise ValueError(f"--channels expects 4 comma-separated integers, got {text!r}") from None
    if len(chans) != 4 or min(chans) <= 0:
        raise ValueError(f"--channels expects 4 positive integers, got {text!r}")
    return chans


def build(arch, channels=None, num_classes=10, in_channels=1):
    """Build 'wideresnet' (seed) or any torchvision.models name (random init, no download)."""
    if arch == "wideresnet":
        return WideResNet(num_classes, channels or DEFAULT_CHANNELS, in_channels)
    import torchvision.models as tvm
    if not hasattr(tvm, arch):
        raise ValueError(f"unknown arch {arch!r}: use 'wideresnet' or a torchvision.models name (resnet18, ...)")
    return getattr(tvm, arch)(weights=None, num_classes=num_classes)
