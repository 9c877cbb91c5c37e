"""A pooling (or a strided convolution's subsampling) in front of a transposed
convolution: the accelerator's registers cannot state the pooling stride of a
transposed layer (legalize rule convtranspose2d-pool), so the pooling is a layer of its
own. The project passes `verify` and computes the float model within 8-bit noise; a
sidecar that pools in the transposed layer is refused, and the sidecar the hint
describes converts and passes `verify`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml

from onnx2ai8x import api
from onnx2ai8x.errors import Ai8xError

from .helpers import float_run, quantized_float_output, sqnr_db

torch = pytest.importorskip("torch")


def _model(kind: str):
    from torch import nn

    torch.manual_seed(7)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Conv2d(3, 8, 3, padding=1, stride=2 if kind == "strided" else 1)
            self.pool = {"max": nn.MaxPool2d(2), "avg": nn.AvgPool2d(2),
                         "strided": nn.Identity()}[kind]
            self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)

        def forward(self, x):
            return torch.relu(self.up(self.pool(torch.relu(self.a(x)))))

    return Net().eval()


def _export(kind: str, path: Path) -> Path:
    torch.onnx.export(_model(kind), torch.zeros(1, 3, 8, 8), str(path), dynamo=False,
                      input_names=["x"], output_names=["y"])
    return path


@pytest.mark.parametrize("kind", ["max", "avg", "strided"])
def test_pooling_before_a_transposed_convolution_is_its_own_layer(kind: str,
                                                                  tmp_path: Path) -> None:
    model = _export(kind, tmp_path / f"{kind}.onnx")
    x = np.random.default_rng(3).uniform(-1, 1, (32, 3, 8, 8)).astype(np.float32)
    cal = tmp_path / "cal.npy"
    np.save(cal, x)
    done = api.convert(model, "MAX78000", tmp_path / "p", calibration=cal)
    sidecar = yaml.safe_load(next((tmp_path / "p").glob("*.yaml")).read_text())
    ups = [lay for lay in sidecar["layers"] if lay.get("op") == "convtranspose2d"]
    assert len(ups) == 1
    assert not {"max_pool", "avg_pool", "pool_stride"} & set(ups[0])
    # the pooling (or subsampling) is the layer the transposed convolution reads
    before = sidecar["layers"][sidecar["layers"].index(ups[0]) - 1]
    assert before.get("pool_stride") == 2
    assert api.verify(tmp_path / "p").passed
    got = quantized_float_output(onnx.load(str(done.model_file)), x)
    ref = float_run(model, x)
    assert got.shape == np.asarray(ref).shape
    assert sqnr_db(ref, got) >= 20.0


def _vendor_files(tmp: Path, split: bool) -> tuple[Path, Path, Path]:
    """A vendor project (sidecar, checkpoint, sample): 3x8x8 max-pooled 2x2, then a
    transposed 3x3 convolution to 4 channels; pooled in the transposed layer, or (the
    refusal's hint) in a passthrough layer of its own before it."""
    rng = np.random.default_rng(11)
    up = {"processors": 7, "out_offset": 0x2000, "operation": "convtranspose2d",
          "pad": 1, "activate": "ReLU"}
    pool = {"max_pool": 2, "pool_stride": 2}
    layers = ([{"processors": 7, "out_offset": 0x4000, "operation": "passthrough", **pool},
               up] if split else [{**up, **pool}])
    side = tmp / ("split.yaml" if split else "fused.yaml")
    side.write_text(yaml.safe_dump({"arch": "synthetic", "dataset": "pooled_up",
                                    "layers": layers}, sort_keys=False))
    w = rng.integers(-128, 128, (3, 4, 3, 3)).astype(np.float32)
    state = {"l0.op.weight": torch.tensor(w),
             "l0.op.bias": torch.tensor(rng.integers(-2048, 2048, 4).astype(np.float32)),
             "l0.weight_bits": torch.tensor([8.0]), "l0.output_shift": torch.tensor([-1.0])}
    ckpt = tmp / "ckpt.pth.tar"
    torch.save({"arch": "synthetic", "epoch": 0, "state_dict": state}, ckpt)
    sample = tmp / "sample.npy"
    np.save(sample, rng.integers(-128, 128, (3, 8, 8)).astype(np.int64))
    return side, ckpt, sample


def test_a_sidecar_pooling_in_a_transposed_layer_is_refused_and_the_hint_converts(
        tmp_path: Path) -> None:
    side, ckpt, sample = _vendor_files(tmp_path, split=False)
    model = tmp_path / "fused.onnx"
    api.import_izer(side, ckpt, "MAX78000", sample=sample, output=model)
    with pytest.raises(Ai8xError) as info:
        api.convert(model, "MAX78000", tmp_path / "fused", sidecar=side, sample=sample)
    d = info.value.diagnostics[0]
    assert d.code == "limit.convtranspose2d-pool" and d.where == "layer0"
    assert "passthrough layer with the pooling keys" in d.hint
    # following the hint: the pooling in a passthrough layer of its own
    side, ckpt, sample = _vendor_files(tmp_path, split=True)
    model = tmp_path / "split.onnx"
    api.import_izer(side, ckpt, "MAX78000", sample=sample, output=model)
    done = api.convert(model, "MAX78000", tmp_path / "split", sidecar=side, sample=sample)
    assert api.verify(done.output).passed


def test_the_legalizer_refuses_subsampling_in_a_transposed_layer() -> None:
    from onnx2ai8x.devices import MAX78000
    from onnx2ai8x.legalize.rules.pooling import convtranspose2d_pool
    from tests.legalize.builders import convtranspose2d, network

    plain = convtranspose2d("up", dim=4)
    assert convtranspose2d_pool(plain, network(plain), MAX78000) is None
    sub = convtranspose2d("sub", dim=8, pool_stride=(2, 2), pooled_dim=(4, 4),
                          output_dim=(8, 8))
    d = convtranspose2d_pool(sub, network(sub), MAX78000)
    assert d is not None and d.code == "limit.convtranspose2d-pool"
    assert d.message.startswith("subsampling with stride 2x2")
