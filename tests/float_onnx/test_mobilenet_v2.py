"""torch MobileNetV2 0.35 on the MAX78002 (issue 24, part 6: one front end, one phase
order).

Every residual add of MobileNetV2 follows a projection convolution whose bias is the
folded BatchNorm's; the MAX78002 cannot run an element-wise operation fused with a
biased convolution, and the `split_multipass_eltwise` rewrite makes it a pass-through
layer. The quantize path used to check the device's limits before the rewrites ran and
refused the model; now `quantize`, `convert --calibration`, `check` and `verify --model`
run the one front end (read, rewrite, legalize) and agree.

The architecture is written out in tests/float_onnx/mobilenet.py (no torchvision). A
fixed random-weight network tests the phase order; one trained on the digits (about a
minute on two cores) tests the whole path: convert, verify, accuracy.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from .helpers import cli, float_run, quantized_float_output


@pytest.fixture(scope="module")
def random_net(tmp_path_factory) -> tuple[Path, Path]:
    pytest.importorskip("torch")
    from .mobilenet import random_model, samples

    tmp = tmp_path_factory.mktemp("mnv2")
    path = random_model(tmp / "mobilenet_v2.onnx", (3, 32, 32))
    cal = tmp / "cal.npy"
    np.save(cal, samples((3, 32, 32), 32))
    return path, cal


def test_the_rewrite_runs_before_the_device_check(random_net) -> None:
    from onnx2ai8x.devices import MAX78002
    from onnx2ai8x.frontend import legal_network
    from onnx2ai8x.legalize import diagnose
    from onnx2ai8x.quantize import quantize_file

    path, cal = random_net
    result = quantize_file(path, cal)
    # as read, the network breaks the MAX78002's element-wise limit (the old refusal) ...
    codes = {d.code for d in diagnose(result.network, MAX78002)}
    assert "limit.eltwise-multipass" in codes
    # ... and the front end's order makes it legal: one pass-through add per residual
    network, notes = legal_network(result.network, MAX78002)
    adds = [n for n in notes if "element-wise pass-through" in n]
    assert len(adds) == 5 and not diagnose(network, MAX78002)


def test_quantize_check_and_convert_agree(random_net, tmp_path: Path) -> None:
    path, cal = random_net
    code, _, stderr = cli(["quantize", "-d", "MAX78000",
                           path, "--calibration", cal, "--device", "MAX78002",
                           "-o", tmp_path / "q.onnx"])
    assert code == 0, stderr
    code, check_json, stderr = cli(["check", path, "--device", "MAX78002", "--calibration",
                                    cal, "--json"])
    assert code == 0, stderr
    proj = tmp_path / "proj"
    code, _, stderr = cli([path, "--device", "MAX78002", "--calibration", cal, "-o", proj,
                           "-q"])
    assert code == 0, stderr
    report = json.loads((proj / "report.json").read_text())
    assert "quantization" in report and "phases" in report
    # (check writes no project: the quantization report and the phases counted from the
    # written C are the project's only)
    del report["quantization"], report["phases"]
    assert json.loads(check_json) == report
    # the quantized model the project holds checks the same, and verify runs it
    code, again, stderr = cli(["check", proj / "mobilenet_v2.onnx", "--device", "MAX78002",
                               "--json"])
    assert code == 0, stderr
    assert json.loads(again)["layers"] == report["layers"]
    code, out, stderr = cli(["verify", proj, "--model", proj / "mobilenet_v2.onnx"])
    assert code == 0 and out.startswith("PASS"), out + stderr
    # a float model given to verify: it says which model to pass instead
    code, _, stderr = cli(["verify", proj, "--model", path])
    assert code == 2 and "mobilenet_v2.onnx" in stderr and "Traceback" not in stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    from .mobilenet import train_digits

    tmp = tmp_path_factory.mktemp("mnv2_digits")
    path = tmp / "mobilenet_v2_digits.onnx"
    (x_cal, y_cal), test = train_digits(path)
    cal, labels = tmp / "cal.npy", tmp / "labels.npy"
    np.save(cal, x_cal)
    np.save(labels, y_cal)
    return path, cal, labels, test


def test_trained_mobilenet_v2_converts_verifies_and_keeps_accuracy(trained, tmp_path):
    path, cal, labels, (x_test, y_test) = trained
    proj = tmp_path / "proj"
    code, stdout, stderr = cli([path, "--device", "MAX78002", "--calibration", cal,
                                "--labels", labels, "-o", proj, "--verify"])
    assert code == 0, stderr
    assert "PASS" in stdout and "quantize.loss" not in stderr
    quantized = onnx.load(str(proj / "mobilenet_v2_digits.onnx"))
    f_acc = float(np.mean(float_run(path, x_test).argmax(1) == y_test))
    q_out = quantized_float_output(quantized, x_test).reshape(len(x_test), -1)
    q_acc = float(np.mean(q_out.argmax(1) == y_test))
    assert f_acc >= 0.9, f_acc  # the network learnt the digits
    assert q_acc >= f_acc - 0.02, (f_acc, q_acc)


def test_a_pass_through_its_reader_cannot_follow_is_explained(tmp_path: Path) -> None:
    """An element-wise add the rewrite leaves as a pass-through layer writes where it
    reads; when its reader (here a flattening linear layer of 143 kernel columns per
    processor) cannot fit its kernels on those processors, the message names the reader
    and the kernel memory, not an internal `map.passthrough` ("write a sidecar")."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from .mobilenet import export, randomize_bn

    class Block(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.a = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False),
                                   nn.BatchNorm2d(c), nn.ReLU())
            self.b = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False),
                                   nn.BatchNorm2d(c))

        def forward(self, x):
            return x + self.b(self.a(x))  # no activation after the add

    class Res(nn.Module):
        def __init__(self, c: int = 80) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU())
            self.blocks = nn.Sequential(Block(c), Block(c), Block(c))
            self.fc = nn.Linear(c * 8 * 8, 10)

        def forward(self, x):
            return self.fc(torch.flatten(self.blocks(self.stem(x)), 1))

    torch.manual_seed(0)
    model = Res()
    randomize_bn(model)
    path = export(model, tmp_path / "res80.onnx", (1, 8, 8))
    cal = tmp_path / "cal.npy"
    np.save(cal, np.random.default_rng(0).uniform(0, 1, (32, 1, 8, 8)).astype(np.float32))
    code, _, stderr = cli([path, "--device", "MAX78000", "--calibration", cal, "-o",
                           tmp_path / "proj", "--accept-loss", "-q"])
    if code == 0:  # a mapper that finds room maps it: then the project must exist
        assert (tmp_path / "proj" / "cnn.c").is_file()
        return
    assert code == 1 and "internal error" not in stderr, stderr
    assert "error[map.passthrough]" in stderr
    assert "layer `fc` reads it" in stderr, stderr
    assert "columns per processor) do not fit" in stderr
    assert "give `fc` fewer kernel columns" in stderr


def test_quantizing_again_gives_the_same_network(random_net) -> None:
    """The float reader keyed values by id(): once a value was freed, a new one could
    take its id and read another value's layer (a depthwise layer then read a 16-channel
    source; about one conversion in six failed in the builder, depending on the heap).
    Quantized repeatedly in one process, the layers and their sources stay the same.
    (The failure depended on the heap: this test caught it in some runs, not all.)"""
    from onnx2ai8x.quantize import quantize_file

    path, cal = random_net

    def shape(result):
        return [(lay.name, lay.in_sequences, np.shape(lay.weights))
                for lay in result.network.layers]

    first = shape(quantize_file(path, cal))
    for _ in range(2):
        assert shape(quantize_file(path, cal)) == first


def test_a_freed_value_does_not_lend_its_layer_to_a_new_one() -> None:
    """The mechanism of the bug above, made certain: drafts written one after another,
    each freed once written (CPython hands a freed object's id to the next object of its
    size). Each must get a layer of its own."""
    from onnx2ai8x.importer.float_onnx import _Draft, _Walker
    from onnx2ai8x.network import Op

    walker = _Walker.__new__(_Walker)  # only the layer-writing state, no graph
    walker.materialized, walker.keyed, walker.layers, walker.infos = {}, [], [], []
    walker.names, walker.parent = set(), {}
    written, draft = [], None
    for k in range(20):
        fields = dict(name=f"l{k}", operator=Op.CONV2D, input_channels=1,
                      output_channels=1, input_dim=(2, 2), pooled_dim=(2, 2),
                      output_dim=(2, 2), sources=(-1,))
        w, b, nodes = np.ones((1, 1, 1, 1)), np.zeros(1), [f"n{k}"]
        del draft  # freed right before the next draft is made: it may take the same id
        draft = _Draft(fields, w, b, 0, (1, 2, 2), f"t{k}", nodes)
        written.append(walker.act(draft, f"n{k}").src)
    assert written == list(range(20))
