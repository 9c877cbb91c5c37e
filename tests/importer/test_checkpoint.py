"""The vendor checkpoint reader: conventions, safety and error messages."""
from __future__ import annotations

import argparse
import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest

from onnx2ai8x.errors import Ai8xError
from tests.conftest import GOLDEN

torch = pytest.importorskip("torch")

from onnx2ai8x.importer.checkpoint import load_checkpoint, read_checkpoint  # noqa: E402


def _save(tmp_path, obj, name="ck.pth.tar"):
    path = tmp_path / name
    torch.save(obj, path)
    return path


def _ckpt(state, arch="net"):
    return {"arch": arch, "epoch": 3, "state_dict": OrderedDict(state)}


def test_conventions_low_bit_bias_and_prefix(tmp_path):
    w2 = torch.tensor([[[[1.0, -2.0], [0.0, 1.0]]]])  # 2-bit weights, (1, 1, 2, 2)
    state = [
        ("module.c1.output_shift", torch.tensor([-1.0])),
        ("module.c1.weight_bits", torch.tensor([2])),
        ("module.c1.op.weight", w2),
        # integer bias 5 and -3 stored times 2**(2-1)
        ("module.c1.op.bias", torch.tensor([10.0])),
        ("module.fc.op.weight", torch.ones(3, 4) * 7),
        ("module.fc.op.bias", torch.tensor([128.0 * 3, -129.0, 0.0])),
        # the same layers again without the data-parallel prefix: ignored
        ("c1.op.weight", w2 * 0),
        ("fc.op.weight", torch.zeros(3, 4)),
        ("c1.bias_bits", torch.tensor([8.0])),
    ]
    ck = read_checkpoint(_save(tmp_path, _ckpt(state)))
    assert ck.arch == "net" and ck.epoch == 3
    assert [layer.name for layer in ck.layers] == ["c1", "fc"]
    c1, fc = ck.layers
    assert c1.weight.dtype == np.int64 and c1.weight.shape == (1, 1, 2, 2)
    np.testing.assert_array_equal(c1.weight, np.array([[[[1, -2], [0, 1]]]]))
    assert c1.weight_bits == 2 and c1.output_shift == -1 and c1.has_output_shift
    np.testing.assert_array_equal(c1.bias, [10])
    np.testing.assert_array_equal(c1.bias_hw, [5])
    np.testing.assert_array_equal(c1.accumulator_bias, [5 * 128])
    assert fc.weight_bits == 8 and fc.output_shift == 0 and not fc.has_output_shift
    assert fc.weight_layout == "linear"
    # floor division, as the vendor tool does for files not exactly quantized
    np.testing.assert_array_equal(fc.bias_hw, [3, -2, 0])


def test_binary_and_zero_flags(tmp_path):
    state = [("a.op.weight", torch.tensor([[[1.0, -1.0, 1.0]]])),
             ("a.weight_bits", torch.tensor([1])),
             ("b.weight", torch.zeros(2, 2, 1)),
             ("b.weight_bits", torch.tensor([0]))]
    a, b = load_checkpoint(_save(tmp_path, _ckpt(state)))
    assert a.binary and not a.all_zero and a.weight_layout == "conv1d"
    assert b.op is None and b.all_zero and not b.binary
    assert b.weight_bits == 8  # stored 0 means 8


def test_trained_checkpoint_with_optimizer_class_loads(tmp_path):
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    obj = _ckpt([("fc.op.weight", torch.ones(2, 2))])
    obj["optimizer_type"] = type(opt)
    obj["optimizer_state_dict"] = opt.state_dict()
    (layer,) = load_checkpoint(_save(tmp_path, obj))
    assert layer.name == "fc"


@pytest.mark.parametrize("payload, code, words", [
    (None, "usage.missing-file", "not found"),
    (b"hello, not a pickle", "checkpoint.unreadable", "not a PyTorch checkpoint"),
    ([1, 2, 3], "checkpoint.invalid", "not a checkpoint dict"),
    ({"arch": "x", "epoch": 0}, "checkpoint.invalid", "no `state_dict`"),
    (argparse.Namespace(a=1), "checkpoint.unsafe", "argparse.Namespace"),
    (_ckpt([("c.bn.weight", torch.ones(4))]), "checkpoint.unfolded-batchnorm", "c.bn.weight"),
    (_ckpt([("c.op.weight", torch.full((1, 1, 1, 1), 0.5))]), "checkpoint.not-quantized",
     "non-integer"),
    (_ckpt([("c.op.weight", torch.ones(1, 1)), ("c.weight_bits", torch.tensor([16]))]),
     "checkpoint.invalid", "weight_bits"),
])
def test_errors(tmp_path, payload, code, words):
    path = tmp_path / "bad.pth.tar"
    if isinstance(payload, bytes):
        path.write_bytes(payload)
    elif payload is not None:
        torch.save(payload, path)
    with pytest.raises(Ai8xError) as err:
        read_checkpoint(path)
    assert err.value.code == code
    assert words in err.value.render()
    assert str(path) in err.value.render()


def test_module_import_does_not_import_torch():
    code = ("import sys, onnx2ai8x.importer.checkpoint; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("case", ["ai85-mnist", "ai85-kws20_v3", "ai87-suite-wideout-binary"])
def test_golden_checkpoint_matches_raw_state_dict(case):
    path = GOLDEN / case / "checkpoint.pth.tar"
    if not path.is_file():
        pytest.skip("golden corpus absent")
    layers = load_checkpoint(path)
    # independent reading: plain torch.load with the optimizer classes allowed
    with torch.serialization.safe_globals([torch.optim.SGD, torch.optim.Adam]):
        raw = torch.load(path, weights_only=True)["state_dict"]
    weight_keys = [k for k in raw if k.endswith(".weight")]
    names = [k.removeprefix("module.").rsplit(".", 2)[0] for k in weight_keys]
    unique = list(dict.fromkeys(names))
    assert [layer.name for layer in layers] == unique
    for layer in layers:
        np.testing.assert_array_equal(layer.weight, raw[layer.key].numpy())
        prefix = layer.key.rsplit(".", 2)[0]
        wb = int(raw[f"{prefix}.weight_bits"].item()) if f"{prefix}.weight_bits" in raw else 8
        assert layer.weight_bits == (wb or 8)
        bkey = layer.key[:-len("weight")] + "bias"
        if bkey in raw:
            expect = np.floor(raw[bkey].numpy() / 2.0 ** ((wb or 8) - 1))
            np.testing.assert_array_equal(layer.bias_hw, expect)
            assert layer.bias_hw.min() >= -128 and layer.bias_hw.max() <= 127
        else:
            assert layer.bias is None
