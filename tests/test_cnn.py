"""gpudoctor's own ResNet (used where torchvision does not import) has torchvision's shape: the same parameter and
buffer names, shapes and initialisation statistics, and the same output shape."""

from __future__ import annotations

import pytest
import torch
import torchvision

from gpudoctor.checks.ranks import cnn
from gpudoctor.judging.ddp import RESNETS


@pytest.mark.parametrize("name", ["resnet18", "resnet50"])
def test_the_same_layers_as_torchvisions(name: str) -> None:
    ours = cnn.ResNet(*RESNETS[name], 10)
    theirs = torchvision.models.get_model(name, weights=None, num_classes=10)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in theirs.state_dict().items()}
    image = torch.randn(2, 3, 64, 64)
    assert ours.eval()(image).shape == theirs.eval()(image).shape == (2, 10)


def test_the_same_initialisation() -> None:
    """He (fan out) for the convolutions: the standard deviation of a layer's weights within a few percent."""
    torch.manual_seed(0)
    ours = dict(cnn.ResNet(*RESNETS["resnet50"], 10).named_parameters())
    torch.manual_seed(0)
    theirs = dict(torchvision.models.resnet50(num_classes=10).named_parameters())
    for name in ("conv1.weight", "layer3.0.conv2.weight", "layer4.2.conv3.weight", "layer2.0.bn1.weight"):
        assert ours[name].std().item() == pytest.approx(theirs[name].std().item(), rel=0.05), name


def test_every_depth_builds() -> None:
    for name, (kind, depths) in RESNETS.items():
        model = cnn.ResNet(kind, depths, 10)
        blocks = sum(len(getattr(model, f"layer{i}")) for i in range(1, 5))
        assert blocks == sum(depths), name


def test_torchvision_is_used_where_it_imports() -> None:
    model, source = cnn.build("resnet18", 10)
    assert source == "torchvision" and isinstance(model, torchvision.models.ResNet)
