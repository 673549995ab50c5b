"""PyTorch definition of nostrum's CIFAR-style ResNets (He et al. 6n+2: 3x3 stem, no max-pool, three
stages of widths w, 2w, 4w) with torchvision's BasicBlock, projection shortcuts and state_dict keys,
plus build_model(), which also returns torchvision's ImageNet ResNets under nostrum's names."""
import torch
import torch.nn as nn
import torchvision
from torchvision.models.resnet import BasicBlock, conv1x1

CIFAR_BLOCKS = {"resnet8": 1, "resnet14": 2, "resnet20": 3, "resnet32": 5, "resnet44": 7,
                "resnet56": 9, "resnet110": 18}
IMAGENET = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")


class CifarResNet(nn.Module):
    def __init__(self, blocks_per_stage, num_classes=10, in_channels=3, width=16,
                 zero_init_residual=False):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(in_channels, width, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(width, blocks_per_stage, 1)
        self.layer2 = self._make_layer(2 * width, blocks_per_stage, 2)
        self.layer3 = self._make_layer(4 * width, blocks_per_stage, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(4 * width, num_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes, stride), nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def model_names():
    return list(IMAGENET) + list(CIFAR_BLOCKS)


def build_model(name, num_classes=1000, in_channels=3, width=0, zero_init_residual=False):
    """The PyTorch model nostrum calls `name` (same state_dict keys and shapes)."""
    if name in CIFAR_BLOCKS:
        return CifarResNet(CIFAR_BLOCKS[name], num_classes, in_channels, width or 16,
                           zero_init_residual)
    if name in IMAGENET:
        if width not in (0, 64):
            raise ValueError(f"{name}: torchvision's ResNets have width 64, not {width}")
        model = getattr(torchvision.models, name)(num_classes=num_classes,
                                                  zero_init_residual=zero_init_residual)
        if in_channels != 3:
            model.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
            nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
        return model
    raise ValueError(f"unknown model '{name}'; valid: {', '.join(model_names())}")
