"""Train small PyTorch models on the digits and export them with both of torch's
exporters, as a user would (issue 34: rank changes and upsampling).

Not run by the tests (they need only the committed files): it wrote the `torch_*.onnx`
files and `fixtures_torch.json`. Run it in the project's environment (torch 2.13.0,
onnxscript for the default exporter):

    python tests/float_onnx/rank/make_torch.py [NAME ...]

(`NAME ...`: remake only those models).

Each model is exported twice: `torch.onnx.export(..., dynamo=True)` (torch's default
exporter; it writes `AdaptiveAvgPool1d(1)` as `Unsqueeze -> ReduceMean -> Squeeze` and
`nn.Upsample` as `Resize`) and `dynamo=False` (the TorchScript exporter), each with its
default opset, the weights inside the file. The digits are the Keras fixtures' split
(`../keras/held_out.npz`, `../keras/cal_*.npy`): 8x8 images as (1, 8, 8), and the rows of
each image as 8 features x 8 steps (1-D data, channels first).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "keras"))
from digits import SEED  # noqa: E402

sys.path.insert(0, str(HERE))
from layouts import torch_layout  # noqa: E402


def split():
    """The Keras fixtures' training split (the held-out and calibration digits are the
    files those fixtures committed)."""
    from digits import CALIBRATION, HELD_OUT
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)
    x_rest, _, y_rest, _ = train_test_split(x, d.target, test_size=HELD_OUT,
                                            random_state=SEED, stratify=d.target)
    x_train, _, y_train, _ = train_test_split(x_rest, y_rest, test_size=CALIBRATION,
                                              random_state=SEED, stratify=y_rest)
    return x_train, y_train


def models(nn):
    """name -> (input kind, builder)."""

    class Kws1d(nn.Module):
        """A keyword-spotting-style 1-D network: Conv1d stack, max and average pooling,
        global average pooling, a linear classifier."""

        def __init__(self, global_pool) -> None:
            super().__init__()
            self.c1 = nn.Conv1d(8, 16, 3, padding=1)
            self.c2 = nn.Conv1d(16, 16, 3, padding=1)
            self.p1 = nn.MaxPool1d(2)
            self.c3 = nn.Conv1d(16, 32, 3, padding=1)
            self.p2 = nn.AvgPool1d(2)
            self.c4 = nn.Conv1d(32, 32, 3, padding=1)
            self.g = global_pool
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            x = self.c2(self.c1(x).relu()).relu()
            x = self.c3(self.p1(x)).relu()
            x = self.c4(self.p2(x)).relu()
            return self.fc(self.g(x).flatten(1))

    class Upsample(nn.Module):
        """Down by pooling, up by nearest 2x upsampling, a classifier."""

        def __init__(self, up) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(1, 16, 3, padding=1)
            self.p = nn.MaxPool2d(2)
            self.up = up
            self.c2 = nn.Conv2d(16, 16, 3, padding=1)
            self.p2 = nn.MaxPool2d(2)
            self.fc = nn.Linear(16 * 4 * 4, 10)

        def forward(self, x):
            x = self.up(self.p(self.c1(x).relu()))
            return self.fc(self.p2(self.c2(x).relu()).flatten(1))

    class Upsample1d(nn.Module):
        """1-D: down by pooling, up by nearest 2x upsampling, global pooling."""

        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv1d(8, 16, 3, padding=1)
            self.p = nn.MaxPool1d(2)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.c2 = nn.Conv1d(16, 16, 3, padding=1)
            self.g = nn.AdaptiveAvgPool1d(1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = self.up(self.p(self.c1(x).relu()))
            return self.fc(self.g(self.c2(x).relu()).flatten(1))

    class RepeatShuffle(nn.Module):
        """Nearest upsampling written as channels repeated, then DepthToSpace."""

        def forward(self, x):
            return nn.functional.pixel_shuffle(x.repeat_interleave(4, dim=1), 2)

    return {
        "kws1d": ("rows_ncl", lambda: Kws1d(nn.AdaptiveAvgPool1d(1))),
        "kws1d_maxglobal": ("rows_ncl", lambda: Kws1d(nn.AdaptiveMaxPool1d(1))),
        "upsample": ("gray_nchw", lambda: Upsample(nn.Upsample(scale_factor=2,
                                                               mode="nearest"))),
        "depth_to_space": ("gray_nchw", lambda: Upsample(RepeatShuffle())),
        "upsample1d": ("rows_ncl", Upsample1d),
    }


def main(only: list[str]) -> None:
    """Make the models named in `only` (all when empty), keeping the others' entries."""
    import torch
    from torch import nn

    torch.set_num_threads(1)
    x_train, y_train = split()
    path = HERE / "fixtures_torch.json"
    facts = json.loads(path.read_text()) if only and path.exists() else {}
    for n, (name, (kind, build)) in enumerate(models(nn).items()):
        if only and name not in only:
            continue
        torch.manual_seed(SEED + n)
        model = build()
        xt = torch.from_numpy(torch_layout(x_train, kind))
        yt = torch.from_numpy(y_train.astype(np.int64))
        opt = torch.optim.Adam(model.parameters(), 3e-3)
        for _ in range(40):
            for k in range(0, len(xt), 32):
                opt.zero_grad()
                nn.functional.cross_entropy(model(xt[k:k + 32]), yt[k:k + 32]).backward()
                opt.step()
        model.eval()
        example = (xt[:1],)
        for exporter, dynamo in (("dynamo", True), ("script", False)):
            onnx_path = HERE / f"torch_{name}_{exporter}.onnx"
            onnx_program = torch.onnx.export(model, example, str(onnx_path), dynamo=dynamo,
                                             input_names=["x"], output_names=["logits"],
                                             external_data=False)
            del onnx_program
            facts[f"torch_{name}_{exporter}"] = {"input": kind, "device": "MAX78000"}
        print(name, flush=True)
    path.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
