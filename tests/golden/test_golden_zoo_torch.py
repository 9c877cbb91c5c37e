"""Zoo networks written with ai8x_torch reproduce the vendor tool's known answers.

For each zoo case: the model from zoo_models.py loads the case's quantized checkpoint
strictly; (1) exported to ai8x-ONNX and run through the onnxruntime reference, and
(2) run in ai8x_torch simulate mode, its output laid out in data memory as the case's
placement puts it equals every word of the golden `expected_output`. The export, read
back by the converter's importer, is the vendor's resolved configuration layer for
layer (same layer count and every hardware field, weights and biases included); only the
names differ (module names here, `layer<N>` in case.json).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx2ai8x.network import Network
from tests.conftest import GOLDEN
from tests.golden.case_network import (
    case_network,
    case_outputs,
    case_words,
    compare_words,
    expected_output,
)

torch = pytest.importorskip("torch")

ZOO_CASES = ["ai85-mnist", "ai85-kws20_v3", "ai85-cifar-10", "ai85-cats-dogs",
             "ai87-kws20_v3_1", "ai87-cats-dogs"]

pytestmark = pytest.mark.skipif(not GOLDEN.is_dir(), reason="golden corpus absent")


def _setup(name: str):
    from tests.golden.zoo_models import ZOO, load_zoo

    case_dir = GOLDEN / name
    net = case_network(case_dir)
    outs = case_outputs(case_dir)
    assert outs == [len(net.layers) - 1], "zoo cases check their final layer only"
    sample = np.load(case_dir / "sample.npy").reshape(net.input_shape)
    return case_dir, net, outs, sample, load_zoo(name, GOLDEN), ZOO[name][0]


def _check(case_dir: Path, net, outs, values: np.ndarray) -> None:
    final = np.asarray(values).reshape(net.layers[-1].output_channels, -1)
    words = case_words(case_dir, net, [final], outs)
    problems = compare_words(expected_output(case_dir), words)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ZOO_CASES)
def test_exported_zoo_model_gives_the_known_answer(name: str, tmp_path: Path) -> None:
    import ai8x_torch as ai8x
    import custom_ops

    case_dir, net, outs, sample, model, device = _setup(name)
    path = tmp_path / f"{name}.onnx"
    with ai8x.using_device(device):
        ai8x.export_onnx(model, torch.zeros(1, *sample.shape), path)
    onnx.checker.check_model(onnx.load(path), full_check=True)
    result = custom_ops.run(custom_ops.session(path), sample)
    assert len(result) == 1
    _check(case_dir, net, outs, result[0][0])

    from onnx2ai8x.importer.onnx_reader import read_model
    from tests.ai8x_torch.test_export import layer_differences  # imports torch

    back = read_model(path)
    assert back.device == {85: "MAX78000", 87: "MAX78002"}[device]
    modules = dict(model.named_modules())
    assert all(type(modules[lay.name]).__module__.startswith("ai8x_torch")
               for lay in back.layers), "layer names are the model's module names"
    renamed = [replace(lay, name=want.name) for lay, want in
               zip(back.layers, net.layers, strict=False)]
    assert layer_differences(net, Network(tuple(renamed), back.input_shape)) == []


@pytest.mark.parametrize("name", ZOO_CASES)
def test_simulate_mode_gives_the_known_answer(name: str) -> None:
    import ai8x_torch as ai8x

    case_dir, net, outs, sample, model, device = _setup(name)
    with ai8x.using_device(device, simulate=True), torch.no_grad():
        y = model(torch.from_numpy(sample[np.newaxis].astype(np.float64)))
    _check(case_dir, net, outs, y.numpy()[0])
