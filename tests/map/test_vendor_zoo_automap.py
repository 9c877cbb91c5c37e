"""Acceptance sweep: every architecture of the vendor training repository's `models/`
that builds with ai8x_torch maps automatically, or stops with a diagnostic naming the
layer and the limit (issue 17).

Each architecture is built as the vendor's train.py builds it for the dataset and
device its script uses (tests/map/vendor_zoo.py reads both from the local mirror),
given random quantized weights, exported to ai8x-ONNX and converted without a sidecar.
Expected per architecture (EXPECTED below, one line each, with the reason):

* "maps": the placement passes the checker, every graph output is an output layer and
  marked `output: true` in the written sidecar (when there are several), and the
  written sidecar gives the same placement back (and, converted to a C project, the
  same C files);
* "diagnostic <code>": the converter stops with an Ai8xError of that code whose
  location names a layer (or the network input) — a limit of the device;
* "export <code>", "build": ai8x_torch cannot export the model (an Ai8xError of that
  code naming the module), or the model file does not build with ai8x_torch.

Detector heads and software classifiers end in host-side code (permute/view/cat, a
plain nn.Linear): the accelerator part is exported (vz.accelerator_part), as the
vendor's sidecars describe only it. The full walk is slow (`--golden-all`); a fixed
subset runs by default. `python -m tests.map.test_vendor_zoo_automap [name ...]` prints
the per-architecture table. Where the
vendor's synthesis repository has a hand-written sidecar for the network
(VENDOR_SIDECARS), the automatic mapping's estimated cycles must be no worse than the
same estimate for the vendor's placement of the same exported model (given the fake
pass-through layer the vendor's scripts add to the checkpoint for that sidecar, if any).
"""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
import traceback
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x.errors import Ai8xError
from tests.map import vendor_zoo as vz

pytestmark = pytest.mark.skipif(not vz.available(), reason="the ai8x-training mirror is "
                                "absent (set ONNX2AI8X_TRAINING_MIRROR)")

# What each architecture does today, and why when it does not map. Keys are
# Architecture.id (model file stem : architecture [: dataset of a further variant]).
_AI84 = "build TypeError"  # AI84-era files take no bias_bits (train.py passes it)
_TORCHVISION = "build ModuleNotFoundError"  # plain-torch teachers, need torchvision
EXPECTED: dict[str, str] = {
    "ai84net:ai84net5": _AI84,
    "ai84net:ai84netsmall": _AI84,
    "ai84net:ai84netextrasmall": _AI84,
    "ai84net:ai84net7": _AI84,
    # Once-for-All NAS supernets (ai8x_nas on ai8x_torch: they build and train); their
    # forward() picks a kernel size from tensor values, so they cannot be exported: the
    # vendor's flow searches a sub-network and rebuilds it with ai8x layers
    # (ai85nascifarnet, ai85kws20netnas, which map)
    "ai85nasnet-sequential:ai85nasnet_sequential_cifar100": "export export.unsupported",
    "ai85nasnet-sequential:ai85nasnet_sequential_kws20": "export export.unsupported",
    # a test network sized to the AI85 kernel depth per processor (768 - 60 - 12 output
    # channels of conv3): 476 KiB of 8-bit weights, the kernel memory holds 432 KiB
    "ai85net-test:ai85net6": "diagnostic limit.weight-memory",
    # its plain nn.MaxPool2d layers pool 128/256 channels, which the MAX78000 does only
    # with a convolution in the same layer: exported as the next squeeze convolution's
    # pooling; then its 8-bit weights (657 KiB) exceed the kernel memory (432 KiB)
    "ai85net-test:ai85squeezenet": "diagnostic limit.weight-memory",
    # no script trains it (the vendor ships scripts, checkpoints and sidecars for the
    # 0.75/0.5 widths only, which map): its 1x1 expansion and projection layers carry
    # BatchNorm, whose folding gives each a bias whatever --use-bias says, 8,576 values
    # in all; the MAX78002 holds 4 x 2,048 (izer tornadocnn BIAS_SIZE; seed "Bias")
    "ai87net-mobilenet-v2:ai87netmobilenetv2cifar100": "diagnostic limit.bias-memory",
    # the factory passes `dimensions` itself and train.py passes it again
    "ai87net-mobilenet-v2:ai87netmobilenetv2": "build TypeError",
    # device limits: outputs larger than a data memory instance
    "ai85net-bayer2rgbnet:bayer2rgbnet": "diagnostic limit.data-memory",  # 3x128x128
    "ai85net-unet:ai85unetsmall": "diagnostic limit.data-memory",  # 4x128x128 default
    "ai85net-unet:ai85unetmedium": "diagnostic limit.data-memory",
    **{f"model_irse_drl:{n}": _TORCHVISION for n in (
        "ir_50", "ir_101", "ir_152", "ir_se_50", "ir_se_101", "ir_se_152")},
}

# Run by default (the autoencoder, a U-Net, a tinierSSD detector, a ResNet-style network,
# kws20_v3, a MobileNet-style network on the MAX78002); the rest with --golden-all.
DEFAULT = {
    "ai85net-autoencoder:ai85autoencoder",
    "ai85net-unet:ai85unetlarge",
    "ai85net-tinierssd:ai85tinierssd",
    "ai85net-tinierssd-face:ai85tinierssdface",
    "ai85net-res-simplenet:ai85ressimplenet",
    "ai85net-kws20-v3:ai85kws20netv3",
    "ai87net-mobilenet-v2:ai87netmobilenetv2cifar100_m0_75",
    # a frame loop exported as one frame plus a data buffer
    "ai85net-actiontcn:ai85actiontcn",
}

# Hand-written sidecars of the vendor's synthesis repository for the same network
# (its gen-demos scripts pair them with the checkpoints these scripts train).
VENDOR_SIDECARS: dict[str, str] = {
    "ai85net:ai85net5": "mnist-chw-ai85.yaml",
    "ai85net:ai85netextrasmall": "mnist-chw-extrasmall-ai85.yaml",
    "ai85net-nas-cifar:ai85nascifarnet": "cifar10-nas.yaml",
    "ai85net-nas-cifar:ai85nascifarnet:CIFAR100": "cifar100-nas.yaml",
    "ai85net-simplenet:ai85simplenet": "cifar100-simple.yaml",
    "ai85net-simplenet-wide2x:ai85simplenetwide2x": "cifar100-simplewide2x.yaml",
    "ai85net-res-simplenet:ai85ressimplenet": "cifar100-ressimplenet.yaml",
    "ai85net-kws20-v3:ai85kws20netv3": "kws20-v3-hwc.yaml",
    "ai85net-kws20-nas:ai85kws20netnas:KWS_20": "kws20-nas-hwc.yaml",
    "ai85net-kws20-v2:ai85kws20netv2": "kws20-v2-hwc.yaml",
    "ai85net-kws20:ai85kws20net": "kws20-hwc.yaml",
    "ai85net-faceid:ai85faceidnet": "faceid.yaml",
    "ai85net-cd:ai85cdnet": "cats-dogs-hwc.yaml",
    "ai85net-unet:ai85unetlarge:CamVid_s352_c3": "camvid-unet-large.yaml",
    "ai85net-tinierssd:ai85tinierssd": "svhn-tinierssd.yaml",
    "ai85net-tinierssd-face:ai85tinierssdface": "ai85-facedet-tinierssd.yaml",
    "ai85net-tinierssd-kpts-qr:ai85tinierssdqr": "ai85-tinierssd-kpts-qr.yaml",
    "ai85net-faceid_112:ai85faceidnet_112": "ai85-faceid_112.yaml",
    "ai85net-actiontcn:ai85actiontcn": "ai85-kinetics-actiontcn.yaml",
    "ai85net-autoencoder:ai85autoencoder": "ai85-autoencoder.yaml",
    "ai85net-bayer2rgbnet:bayer2rgbnet": "ai85-bayer2rgb.yaml",
    "ai87net-effnetv2:ai87effnetv2": "ai87-cifar100-effnet2.yaml",
    "ai87net-imagenet-effnetv2:ai87imageneteffnetv2": "ai87-imagenet-effnet2.yaml",
    "ai87net-kws20-v3:ai87kws20netv3": "ai87-kws20-v3-hwc.yaml",
    "ai87net-mobilenet-v2:ai87netmobilenetv2cifar100_m0_75":
        "ai87-cifar100-mobilenet-v2-0.75.yaml",
    "ai87net-mobilenet-v2:ai87netmobilenetv2cifar100_m0_5":
        "ai87-cifar100-mobilenet-v2-0.5.yaml",
    "ai87-fpndetector:ai87fpndetector": "ai87-pascalvoc-fpndetector.yaml",
    "ai87net-mobilefacenet_112:ai87netmobilefacenet_112": "ai87-mobilefacenet-112.yaml",
}


def _fpn_as_exported(data: dict) -> dict:
    """ai87-pascalvoc-fpndetector.yaml names the layers whose weights a head shares
    between its four scales (`weight_source`), where the exported model stores every
    application's weights, and lists the classification head (its layers 44-79) before
    the regression head (80-115), where the model's forward() runs regression first.
    The placement of every layer is kept; the classification head's first layer, no
    longer right after the FPN's last, says where that layer's output is."""
    layers = [{k: v for k, v in lay.items() if k != "weight_source"}
              for lay in data["layers"]]
    cls, reg = layers[44:80], layers[80:]
    assert cls[0]["in_sequences"] == reg[0]["in_sequences"] == "FPN_out_32_40"
    cls[0] = {**cls[0], "in_offset": reg[0]["in_offset"]}
    return {**data, "layers": layers[:44] + reg + cls}


# How a vendor sidecar must be edited to describe the exported model's layers (order,
# weights stored per layer), placements unchanged.
VENDOR_SIDECAR_EDITS = {"ai87-fpndetector:ai87fpndetector": _fpn_as_exported}


def vendor_cycles(arch: vz.Architecture, path: Path, folder: Path) -> tuple[int | None, str]:
    """Our estimate for the vendor's hand-written sidecar applied to the same exported
    model: (cycles, "") or (None, why it does not apply). Where the vendor's scripts run
    the sidecar with a checkpoint they first give a fake pass-through layer
    (fake_passthrough), the model is given that layer the same way."""
    import yaml

    from onnx2ai8x.convert import plan
    from onnx2ai8x.devices import get_device

    name = VENDOR_SIDECARS.get(arch.id)
    if name is None or not vz.available(vz.SYNTHESIS_MIRROR):
        return None, "no vendor sidecar"
    sidecar = folder / name
    text = vz.show(f"networks/{name}", vz.SYNTHESIS_MIRROR)
    if arch.id in VENDOR_SIDECAR_EDITS:
        text = yaml.safe_dump(VENDOR_SIDECAR_EDITS[arch.id](yaml.safe_load(text)),
                              sort_keys=False)
    sidecar.write_text(text)
    try:
        fake = fake_passthrough(name)
        model = path if fake is None else _with_fake_passthrough(path, arch.device,
                                                                 sidecar, fake)
        # as the vendor's demo scripts build them: with --overlap-data where they overlap
        return sum(plan(model, get_device(arch.device), sidecar,
                        overlap_data=True).cycles), ""
    except Ai8xError as err:
        d = err.diagnostics[0]
        return None, f"{d.code} {d.where}: {d.message}"
    except Exception as exc:  # noqa: BLE001 - recorded: the converter fails on it
        return None, f"converter error {type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class FakePassthrough:
    """A 1x1 identity convolution the vendor's izer/add_fake_passthrough.py adds to a
    quantized checkpoint (a layer the model does not have, which its sidecar places)."""

    name: str  # --layer-name
    channels: int  # --layer-depth
    before: str  # --layer-name-after-pt: the layer it is inserted in front of
    low_memory: bool  # --low-memory-footprint: 2-bit weights (1), else 8-bit (64)


def fake_passthrough(sidecar: str) -> FakePassthrough | None:
    """The fake pass-through layer the vendor's scripts add to the checkpoint they run
    `networks/<sidecar>` with: ai8xize.py is called with this config file and a
    checkpoint that an add_fake_passthrough.py call writes (in any of the scripts)."""
    fakes, runs = _script_calls()
    for config, checkpoint in runs:
        if config == f"networks/{sidecar}" and checkpoint in fakes:
            return fakes[checkpoint]
    return None


@cache
def _script_calls() -> tuple[dict[str, FakePassthrough], tuple[tuple[str, str], ...]]:
    """From the vendor's scripts: the checkpoints add_fake_passthrough.py writes, and
    the (config file, checkpoint file) pairs ai8xize.py runs."""
    fakes: dict[str, FakePassthrough] = {}
    runs = []
    for script in vz.listing("scripts", vz.SYNTHESIS_MIRROR):
        if not script.endswith(".sh"):
            continue
        for line in vz.show(script, vz.SYNTHESIS_MIRROR).splitlines():
            words = shlex.split(line) if line.startswith("python ") else []
            opts = dict(zip(words, [*words[1:], ""], strict=False))
            if words[1:2] == ["izer/add_fake_passthrough.py"]:
                fakes[opts["--output-checkpoint-path"]] = FakePassthrough(
                    opts["--layer-name"], int(opts["--layer-depth"]),
                    opts["--layer-name-after-pt"], "--low-memory-footprint" in words)
            elif words[1:2] == ["ai8xize.py"] and "--config-file" in opts:
                runs.append((opts["--config-file"], opts.get("--checkpoint-file", "")))
    return fakes, tuple(runs)


def _with_fake_passthrough(path: Path, device: str, sidecar: Path,
                           fake: FakePassthrough) -> Path:
    """The exported model with `fake` added as the vendor adds it to the checkpoint,
    imported with the vendor's sidecar (import-izer)."""
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.frontend import load_onnx
    from onnx2ai8x.importer.checkpoint import CheckpointLayer
    from onnx2ai8x.importer.onnx_reader import read_model_full
    from onnx2ai8x.sidecar import parse_file
    from onnx2ai8x.sidecar.izer import build_onnx
    from onnx2ai8x.sidecar.resolve import resolve, weights_from_network

    network = read_model_full(load_onnx(path)).network
    layers = weights_from_network(network)
    eye = np.eye(fake.channels, dtype=np.int64)[:, :, None, None]
    bits = 2 if fake.low_memory else 8
    layer = CheckpointLayer(
        name=fake.name, key=f"{fake.name}.op.weight", op="op",
        weight=eye * (1 if fake.low_memory else 64), bias=None, bias_hw=None,
        weight_bits=bits, output_shift=1, has_output_shift=True)
    at = next(k for k, lay in enumerate(layers) if lay.name == fake.before)
    layers.insert(at, layer)
    resolved = resolve(parse_file(sidecar), layers, get_device(device), network.input_shape)
    out = sidecar.with_suffix(".onnx")
    out.write_bytes(build_onnx(resolved).SerializeToString())
    return out


@dataclass(frozen=True)
class Outcome:
    kind: str  # "maps", "diagnostic", "export", "build"
    detail: str  # the error code, or "" when it maps
    where: str = ""
    message: str = ""
    graph_outputs: int = 0
    marked_outputs: int = 0
    cycles: int = 0
    layers: int = 0

    @property
    def label(self) -> str:
        return self.kind if not self.detail else f"{self.kind} {self.detail}"


def _graph_outputs(path: Path) -> int:
    """The model's outputs as the importer reads them: its graph outputs but a data
    buffer's state output (which stays in data memory, docs/design.md section 1)."""
    from onnx2ai8x.importer.onnx_reader import read_model

    return len(read_model(path).outputs)


# Frame-loop models read (N, F, C, H, W): F frames of the dataset's shape. F is what the
# model's temporal layers turn into one output (actiontcn: tcn0..tcn2, kernel 3 with
# dilations 1, 2, 4, span 1 + 2 * (1 + 2 + 4) = 15), the vendor's sidecar's buffer `dim`.
FRAMES: dict[str, int] = {"ai85net-actiontcn:ai85actiontcn": 15}


def example_shape(arch: vz.Architecture) -> tuple[int, ...]:
    """The example input's shape, with the batch (and a frame axis for frame loops)."""
    frames = FRAMES.get(arch.id)
    return (1, *arch.input_shape) if frames is None else (1, frames, *arch.input_shape)


def export(arch: vz.Architecture, folder: Path) -> Path:
    """Build, give random quantized weights, export. Raises what those raise."""
    import torch

    import ai8x_torch
    from tests.ai8x_torch.helpers import fill_layer, randomize

    with vz.vendor_imports(), ai8x_torch.using_device(arch.device_code):
        model = vz.build(arch)
        rng = np.random.default_rng(sum(map(ord, arch.id)))
        randomize(model, rng)
        default, overrides = arch.weight_bits
        if (default, overrides) != (8, ()):
            # the weight widths the script's QAT policy trains with
            bits = dict(overrides)
            for name, layer in model.named_modules():
                if isinstance(layer, ai8x_torch.QuantizationAwareModule):
                    fill_layer(layer, rng, bits=bits.get(name, default))
        model.eval()
        try:
            model, _ = vz.accelerator_part(model, example_shape(arch))
        except Ai8xError:
            raise
        except Exception:  # noqa: BLE001, S110 - not traceable: export says why
            pass
        path = folder / f"{re.sub(r'[^A-Za-z0-9_]+', '_', arch.name)}.onnx"
        ai8x_torch.export_onnx(model, torch.zeros(example_shape(arch)), path,
                               device=arch.device)
    return path


def evaluate(arch: vz.Architecture, folder: Path) -> tuple[Outcome, Path | None]:
    """What the converter does with the architecture (see the module doc string)."""
    from onnx2ai8x.convert import plan
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.map.memory_check import check_placement

    try:
        path = export(arch, folder)
    except Ai8xError as err:
        d = err.diagnostics[0]
        return Outcome("export", d.code, d.where, d.message), None
    except Exception as exc:  # noqa: BLE001 - recorded: the model file does not build
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return Outcome("build", type(exc).__name__, f"{Path(last.filename).name}:"
                       f"{last.lineno}", str(exc).splitlines()[0][:200] if str(exc)
                       else ""), None
    try:
        result = plan(path, get_device(arch.device), None)
    except Ai8xError as err:
        d = err.diagnostics[0]
        return Outcome("diagnostic", d.code, d.where, d.message,
                       graph_outputs=_graph_outputs(path)), path
    problems = check_placement(result.placement)
    if problems:
        d = problems[0]
        return Outcome("checker", d.code, d.where, d.message), path
    return Outcome("maps", "", graph_outputs=_graph_outputs(path),
                   marked_outputs=result.sidecar_text.count("output: true"),
                   cycles=sum(result.cycles), layers=len(result.network.layers)), path


# Where our estimate for the automatic mapping is above our estimate for the vendor's
# hand-written placement of the same model, and why.
# (Empty: ai85tinierssd streamed its first layers, 889,961 cycles against 702,877, until
# the automatic mapping learned to write layers over their own input as the vendor does.)
CYCLES_WORSE: dict[str, str] = {}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """evaluate(), once per architecture for this module's tests."""
    done: dict[str, tuple[Outcome, Path | None]] = {}

    def get(arch: vz.Architecture) -> tuple[Outcome, Path | None]:
        if arch.id not in done:
            folder = tmp_path_factory.mktemp(re.sub(r"[^A-Za-z0-9]+", "_", arch.id))
            done[arch.id] = evaluate(arch, folder)
        return done[arch.id]

    return get


def _params() -> list:
    if not vz.available():
        return []
    out = []
    for arch in vz.architectures():
        marks = [] if arch.id in DEFAULT else [pytest.mark.slow]
        out.append(pytest.param(arch, marks=marks, id=arch.id))
    return out


@pytest.mark.parametrize("arch", _params())
def test_vendor_architecture_maps_or_says_why(arch: vz.Architecture, tmp_path: Path,
                                              evaluated) -> None:
    outcome, path = evaluated(arch)
    expected = EXPECTED.get(arch.id, "maps")
    assert outcome.label == expected, outcome
    if outcome.kind in ("diagnostic", "export"):
        # the message names where it stopped and the limit, not a traceback
        assert outcome.where and outcome.message, outcome
    if outcome.kind != "maps":
        return
    assert path is not None
    if outcome.graph_outputs > 1:
        assert outcome.marked_outputs == outcome.graph_outputs, outcome
    else:
        assert outcome.marked_outputs == 0, outcome
    _sidecar_round_trip(arch, path, tmp_path)


def _cycle_params() -> list:
    if not vz.available():
        return []
    return [pytest.param(arch, marks=[] if arch.id in DEFAULT else [pytest.mark.slow],
                         id=arch.id) for arch in vz.architectures()
            if arch.id in VENDOR_SIDECARS and EXPECTED.get(arch.id, "maps") == "maps"]


@pytest.mark.skipif(not vz.available(vz.SYNTHESIS_MIRROR),
                    reason="the ai8x-synthesis mirror is absent")
@pytest.mark.parametrize("arch", _cycle_params())
def test_cycles_no_worse_than_the_vendor_sidecar(arch: vz.Architecture, tmp_path: Path,
                                                 evaluated) -> None:
    """Estimated cycles of the automatic mapping vs the vendor's sidecar on the same
    exported model (with the fake pass-through layer the vendor's scripts add to its
    checkpoint, where they do: faceid_112). A vendor sidecar that does not describe the
    exported layers otherwise (it adds pass-through layers the model fuses) is reported,
    not compared."""
    outcome, path = evaluated(arch)
    assert outcome.kind == "maps" and path is not None, outcome
    ours = outcome.cycles
    theirs, why = vendor_cycles(arch, path, tmp_path)
    if theirs is None:
        # a different layer structure: more entries than the model's layers, or fewer
        # (read as a partial sidecar whose `name` labels are not the model's), or as many
        # entries describing other layers (a geometry the model's layer does not have)
        assert why.startswith(("sidecar.layers", "sidecar.partial",
                               "sidecar.contradicts-model")), why
        return
    if arch.id in CYCLES_WORSE:
        assert ours > theirs, f"now {ours} <= {theirs}: drop it from CYCLES_WORSE"
    else:
        assert ours <= theirs, (ours, theirs)


# Converted to a full C project (and again from the written sidecar) by default; every
# other architecture that maps with --golden-all.
CONVERT_DEFAULT = {
    "ai85net-tinierssd:ai85tinierssd",
    "ai85net-res-simplenet:ai85ressimplenet",
    "ai85net-kws20-v3:ai85kws20netv3",
}


def _convert_params() -> list:
    if not vz.available():
        return []
    return [pytest.param(arch, marks=[] if arch.id in CONVERT_DEFAULT else [pytest.mark.slow],
                         id=arch.id) for arch in vz.architectures()
            if EXPECTED.get(arch.id, "maps") == "maps"]


@pytest.mark.parametrize("arch", _convert_params())
def test_project_round_trips_through_the_written_sidecar(arch: vz.Architecture,
                                                         tmp_path: Path, evaluated) -> None:
    """Convert without a sidecar, then with the sidecar it wrote: the same C files; the
    written sidecar marks every graph output."""
    outcome, path = evaluated(arch)
    assert outcome.kind == "maps" and path is not None, outcome
    cli = [sys.executable, "-m", "onnx2ai8x.cli", str(path), "--device", arch.device, "-q"]
    first = tmp_path / "auto"
    proc = subprocess.run([*cli, "-o", str(first)], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr
    written = first / f"{path.stem}.yaml"
    marked = written.read_text().count("output: true")
    assert marked == (outcome.graph_outputs if outcome.graph_outputs > 1 else 0)
    again = tmp_path / "again"
    flag = ["--overlap-data"] if "--overlap-data" in written.read_text() else []
    proc = subprocess.run([*cli, "-o", str(again), "--sidecar", str(written), *flag],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    c_files = sorted(f.name for f in first.iterdir() if f.suffix in (".c", ".h"))
    assert "cnn.c" in c_files and "weights.h" in c_files
    for name in c_files:
        assert (again / name).read_bytes() == (first / name).read_bytes(), name


# Run on the virtual accelerator (`convert --verify`): the networks whose mapping needs
# a rewrite (the large U-Net: a pass-through copy of its skip part), or whose layers read
# their input with other dimensions than it was written with. Slow (a full conversion
# and simulation each): with --golden-all only.
VERIFY = {
    "ai85net-unet:ai85unetlarge",
    "ai85net-unet:ai85unetlarge:CamVid_s352_c3",
    # reshapes between layers (in_dim) and of the output
    "ai85net-autoencoder:ai85autoencoder",
    "ai85net-kws20:ai85kws20net",
    "ai85net-audio:ai85audionet",
    # its input-shape condition decided at export; unfused element-wise layers
    "ai87net-mobilefacenet_112:ai87netmobilefacenet_112",
    # residual inputs read in place with read_gap, two 128-channel ones copied
    "ai87-fpndetector:ai87fpndetector",
    # the data buffer: shift, insert, temporal layers reading it; --zero-sram implied
    "ai85net-actiontcn:ai85actiontcn",
    # two streaming layers, then a 1x1 convolution on the 3x3 hardware (its kernels
    # stored as 3x3 ones, padding 1)
    "ai85net-faceid_112:ai85faceidnet_112",
}


def _verify_params() -> list:
    if not vz.available():
        return []
    return [pytest.param(arch, marks=[pytest.mark.slow], id=arch.id)
            for arch in vz.architectures() if arch.id in VERIFY]


@pytest.mark.parametrize("arch", _verify_params())
def test_project_passes_the_virtual_accelerator(arch: vz.Architecture, tmp_path: Path,
                                                evaluated) -> None:
    """The generated project's known answer (the onnxruntime reference) is what the
    virtual accelerator computes from its registers and memories."""
    outcome, path = evaluated(arch)
    assert outcome.kind == "maps" and path is not None, outcome
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(path), "--device",
                           arch.device, "-o", str(tmp_path / "p"), "--verify"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout + proc.stderr


def _sidecar_round_trip(arch: vz.Architecture, path: Path, folder: Path) -> None:
    """The written sidecar, fed back, gives the same placement and the same sidecar."""
    from onnx2ai8x.convert import plan
    from onnx2ai8x.devices import get_device

    first = plan(path, get_device(arch.device), None)
    written = folder / "written.yaml"
    written.write_text(first.sidecar_text)
    # a mapping that writes layers over their own input says so in the sidecar, which
    # then comes back with --overlap-data (refused without it, as by the vendor's tool)
    again = plan(path, get_device(arch.device), written,
                 overlap_data="--overlap-data" in first.sidecar_text)
    assert again.placement.layers == first.placement.layers
    # the same, but for the header saying where the mapping keys came from (issue 25)
    assert again.sidecar_text == first.sidecar_text.replace(
        "# Every mapping key below was chosen by onnx2ai8x; edit and pass back with "
        "--sidecar.", "# Mapping keys given in written.yaml are kept (checked by "
        "onnx2ai8x), the rest were chosen by onnx2ai8x; edit and pass back with --sidecar.")
    assert again.cycles == first.cycles


def main() -> None:
    """Print the per-architecture table (python -m tests.map.test_vendor_zoo_automap)."""
    import tempfile

    only = sys.argv[1:]
    for arch in vz.architectures():
        if only and not any(o in arch.id for o in only):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            outcome, path = evaluate(arch, Path(tmp))
            vendor = vendor_cycles(arch, path, Path(tmp)) if path is not None \
                and arch.id in VENDOR_SIDECARS else (None, "")
        extra = f"{outcome.cycles} cycles, {outcome.layers} layers, outputs " \
            f"{outcome.marked_outputs}/{outcome.graph_outputs}" if outcome.kind == "maps" \
            else f"{outcome.where}: {outcome.message}"
        if arch.id in VENDOR_SIDECARS:
            extra += f" | vendor {VENDOR_SIDECARS[arch.id]}: {vendor[0] or vendor[1]}"
        print(f"{arch.id:58} {arch.device} {str(arch.input_shape):15} {arch.dataset:22} "
              f"{outcome.label:28} {extra}", flush=True)


if __name__ == "__main__":
    main()
