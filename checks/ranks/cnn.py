"""The reference run's CNN: torchvision's model where torchvision imports, else a ResNet of the same shape built
here (the same layers, parameter names and shapes, and initialisation as torchvision's `resnet18` ... `resnet152`:
He et al., "Deep Residual Learning for Image Recognition", 2015, with the stride on the 3x3 convolution of each
bottleneck, the layout torchvision calls ResNet V1.5). Training environments without torchvision (most LLM ones)
still train the same work.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gpudoctor.judging.ddp import RESNETS

WIDTHS = (64, 128, 256, 512)


def build(name: str, classes: int) -> tuple[nn.Module, str]:
    """The model and who built it: "torchvision", or "gpudoctor" where torchvision does not import (not installed,
    or built for another torch) and the model is one of RESNETS."""
    try:
        import torchvision
    except Exception:
        if name not in RESNETS:
            raise
        return ResNet(*RESNETS[name], classes), "gpudoctor"
    return torchvision.models.get_model(name, weights=None, num_classes=classes), "torchvision"


def conv(inputs: int, outputs: int, size: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(inputs, outputs, size, stride=stride, padding=size // 2, bias=False)


class Basic(nn.Module):
    expansion = 1

    def __init__(self, inputs: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = conv(inputs, width, 3, stride), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = conv(width, width, 3), nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = shortcut(inputs, width * self.expansion, stride)

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(self.residual(x) + identity)


class Bottleneck(Basic):
    expansion = 4

    def __init__(self, inputs: int, width: int, stride: int) -> None:
        nn.Module.__init__(self)
        self.conv1, self.bn1 = conv(inputs, width, 1), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = conv(width, width, 3, stride), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = conv(width, width * self.expansion, 1), nn.BatchNorm2d(width * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = shortcut(inputs, width * self.expansion, stride)

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.relu(self.bn2(self.conv2(x)))
        return self.bn3(self.conv3(x))


def shortcut(inputs: int, outputs: int, stride: int) -> nn.Sequential | None:
    """A 1x1 projection where the block changes the shape, else the identity (None)."""
    if stride == 1 and inputs == outputs:
        return None
    return nn.Sequential(conv(inputs, outputs, 1, stride), nn.BatchNorm2d(outputs))


class ResNet(nn.Module):
    def __init__(self, kind: str, depths: tuple[int, ...], classes: int) -> None:
        super().__init__()
        block = Bottleneck if kind == "bottleneck" else Basic
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        inputs = 64
        for stage, (width, count) in enumerate(zip(WIDTHS, depths, strict=True), start=1):
            blocks = []
            for index in range(count):
                blocks.append(block(inputs, width, 2 if index == 0 and stage > 1 else 1))
                inputs = width * block.expansion
            setattr(self, f"layer{stage}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(inputs, classes)
        self._initialise()

    def _initialise(self) -> None:
        """He initialisation for the convolutions (fan out), BatchNorm at weight 1 and bias 0, as torchvision."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: Any) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))
