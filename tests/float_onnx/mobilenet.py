"""MobileNetV2 (Sandler et al., 2018) written out for the tests: torchvision is not a
dependency. Inverted residual blocks (1x1 expansion, 3x3 depthwise, 1x1 linear
projection; a residual add where the shape is kept), ReLU6, BatchNorm after every
convolution and no convolution bias (the bias of the exported graph is the folded
BatchNorm's), a width multiplier rounding channels to multiples of 8.

For small inputs the strides of the stem and of the first two downsampling stages are
1 (CIFAR-style), so a 16x16 or 32x32 input keeps a spatial extent to the end. The last
1x1 convolution has 1280 x width channels (448 at 0.35): the paper keeps 1280 for widths
below 1, more than one accelerator layer's 1024 output channels.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

# (expansion t, output channels c, repeats n, stride s) of the paper's Table 2
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
            (6, 160, 3, 2), (6, 320, 1, 1))


def divisible(v: float, d: int = 8) -> int:
    """Channels rounded to a multiple of `d`, never more than 10 % below `v`."""
    out = max(d, int(v + d / 2) // d * d)
    return out + d if out < 0.9 * v else out


def mobilenet_v2(width: float = 0.35, classes: int = 10, in_channels: int = 3,
                 small_input: bool = True, last_channels: int = 1280):
    """The torch module (imports torch)."""
    import torch
    from torch import nn

    def cbr(i: int, o: int, k: int = 1, s: int = 1, groups: int = 1, act: bool = True):
        layers = [nn.Conv2d(i, o, k, s, k // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(o)]
        if act:
            layers.append(nn.ReLU6())
        return nn.Sequential(*layers)

    class Inverted(nn.Module):
        def __init__(self, i: int, o: int, stride: int, t: int) -> None:
            super().__init__()
            hidden = i * t
            body = [cbr(i, hidden)] if t != 1 else []
            body += [cbr(hidden, hidden, 3, stride, groups=hidden),
                     cbr(hidden, o, act=False)]
            self.body = nn.Sequential(*body)
            self.residual = stride == 1 and i == o

        def forward(self, x):
            y = self.body(x)
            return x + y if self.residual else y

    class MobileNetV2(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            c = divisible(32 * width)
            feats = [cbr(in_channels, c, 3, 1 if small_input else 2)]
            for k, (t, ch, n, s) in enumerate(SETTINGS):
                o = divisible(ch * width)
                if small_input and k < 2:
                    s = 1
                for r in range(n):
                    feats.append(Inverted(c, o, s if r == 0 else 1, t))
                    c = o
            last = divisible(last_channels * width)
            feats.append(cbr(c, last))
            self.features = nn.Sequential(*feats)
            self.classifier = nn.Linear(last, classes)

        def forward(self, x):
            x = self.features(x)
            return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    return MobileNetV2()


def randomize_bn(model, seed: int = 0) -> None:
    """BatchNorm statistics and affine parameters of a trained-looking network (a fresh
    module's are the identity), seeded."""
    import torch

    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(0.1 * torch.randn(n, generator=g))
            m.running_var.copy_(0.5 + torch.rand(n, generator=g))
            m.weight.data.copy_(0.8 + 0.4 * torch.rand(n, generator=g))
            m.bias.data.copy_(0.1 * torch.randn(n, generator=g))


def export(model, path: Path, shape: tuple[int, ...]) -> Path:
    """torch.onnx.export (TorchScript exporter) of `model` in eval mode, batch dynamic."""
    import torch

    model.eval()
    torch.onnx.export(model, torch.zeros(1, *shape), str(path), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                      opset_version=13, dynamo=False)
    return path


def random_model(path: Path, shape=(3, 32, 32), seed: int = 0) -> Path:
    """A fixed random-weight MobileNetV2 0.35 (seeded), exported to `path`."""
    import torch

    torch.manual_seed(seed)
    model = mobilenet_v2(in_channels=shape[0])
    randomize_bn(model, seed)
    return export(model, path, shape)


def samples(shape=(3, 32, 32), n: int = 32, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 1, (n, *shape)).astype(np.float32)


DIGITS_SEED = 20261126


def digits_split(size: int = 16, seed: int = DIGITS_SEED):
    """scikit-learn's 8x8 digits scaled to [0, 1] and enlarged to `size` x `size`
    (nearest neighbour): training, calibration and held-out (x, y) pairs, seeded."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    k = size // 8
    x = (digits.images / 16.0).astype(np.float32).repeat(k, 1).repeat(k, 2)[:, None]
    y = digits.target.astype(np.int64)
    x_rest, x_test, y_rest, y_test = train_test_split(x, y, test_size=360,
                                                      random_state=seed, stratify=y)
    x_train, x_cal, y_train, y_cal = train_test_split(x_rest, y_rest, test_size=200,
                                                      random_state=seed, stratify=y_rest)
    return (x_train, y_train), (x_cal, y_cal), (x_test, y_test)


def train_digits(path: Path, epochs: int = 12, seed: int = DIGITS_SEED):
    """MobileNetV2 0.35 trained on the digits (1 x 16 x 16), exported to `path`; the
    split. Seeded, single-threaded."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    (xt, yt), cal, test = digits_split(seed=seed)
    model = mobilenet_v2(in_channels=1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 3e-3, total_steps=epochs * (
        (len(xt) + 63) // 64))
    g = torch.Generator().manual_seed(seed)
    x_all, y_all = torch.from_numpy(xt), torch.from_numpy(yt)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(xt), generator=g)
        for k in range(0, len(xt), 64):
            idx = order[k:k + 64]
            loss = torch.nn.functional.cross_entropy(model(x_all[idx]), y_all[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    export(model, path, (1, 16, 16))
    return cal, test
