"""Hostile input through every subcommand: no tracebacks, crashes, hangs or lost files.

Seeded and bounded: by default a fixed number of cases per input kind (a few minutes on
two cores); `--fuzz-cases N` runs N per kind and `--fuzz-seed S` another seed. Each
failure names its kind, index and problem, and its case directory is kept for
reproduction. The counts and the longest run are printed in the terminal summary.
"""
from __future__ import annotations

import io
import random
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x.devices import MAX78000

from .cases import GENERATORS, KINDS, PROJECT_FILES, combo_models
from .runner import run_case

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "examples" / "digits"
DEFAULT_CASES = {"onnx": 60, "sidecar": 40, "sample": 30, "checkpoint": 25,
                 "output": 31, "options": 40, "project": 80, "float": 40, "cpu": 30,
                 "targets": 30, "toplevel": 30, "combos": 40, "json": 50}

TINY_YAML = b"""arch: tiny
dataset: fuzz
layers:
  - processors: 0x0000000000000001
    in_offset: 0x0000
    out_offset: 0x2000
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
  - processors: 0x00000000000000ff
    out_offset: 0x0000
    operation: conv2d
    kernel_size: 1x1
    pad: 0
    activate: None
"""


def _tiny_checkpoint() -> tuple[bytes, bytes]:
    """A two-layer quantized checkpoint (8-bit, integer weights and biases) and a sample."""
    import torch

    gen = torch.Generator().manual_seed(15)
    sd = {
        "conv1.op.weight": torch.randint(-128, 128, (8, 1, 3, 3), generator=gen).float(),
        "conv1.op.bias": torch.randint(-512, 512, (8,), generator=gen).float(),
        "conv1.weight_bits": torch.tensor(8.0),
        "conv1.output_shift": torch.tensor(-1.0),
        "conv2.op.weight": torch.randint(-128, 128, (4, 8, 1, 1), generator=gen).float(),
        "conv2.weight_bits": torch.tensor(8.0),
        "conv2.output_shift": torch.tensor(-1.0),
    }
    buf = io.BytesIO()
    torch.save({"arch": "tiny", "epoch": 0, "state_dict": sd}, buf)
    sample = io.BytesIO()
    np.save(sample, np.random.default_rng(15).integers(-128, 128, (1, 8, 8)))
    return buf.getvalue(), sample.getvalue()


def _project(out: Path, *options: str, model: Path = DIGITS / "digits.onnx",
             sample: Path = DIGITS / "sample.npy") -> dict:
    """A generated project (its files `verify` reads, and the model): by default the
    digits example's."""
    from onnx2ai8x.cli import main

    code = main([str(model), "--device", "MAX78000", "--sample-input", str(sample),
                 "-o", str(out), "--quiet", *options])
    assert code == 0
    files = {name: (out / name).read_bytes() for name in PROJECT_FILES}
    files.update({name: (out / name).read_bytes() for name in ("Makefile", "project.mk")})
    files["model.onnx"] = (out / f"{model.stem}.onnx").read_bytes()
    return files


def _tree(project: Path) -> dict:
    """Every file of a written project (subfolders and the manifest too), by path."""
    return {p.relative_to(project).as_posix(): p.read_bytes()
            for p in sorted(project.rglob("*")) if p.is_file()}


def _upsampling_project(tmp: Path) -> dict:
    """A float model of one 2x transposed convolution, quantized and fed through the
    FIFO: the transposed and FIFO paths of the accelerator model."""
    import onnx
    from onnx import TensorProto, helper

    w = np.random.default_rng(15).uniform(-0.5, 0.5, (4, 4, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 3],
                          strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])],
        "up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1).tolist())])
    model = tmp / "up.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    rng = np.random.default_rng(15)
    np.save(tmp / "cal.npy", rng.uniform(-1, 1, (8, 4, 8, 8)).astype(np.float32))
    np.save(tmp / "x.npy", rng.integers(-128, 128, (4, 8, 8)))
    return _project(tmp / "up", "--fifo", "--calibration", str(tmp / "cal.npy"),
                    model=model, sample=tmp / "x.npy")


def _split_base(tmp: Path) -> dict:
    """A float model with a CPU stem (a 5x5 convolution), a CPU segment between
    accelerator layers (LeakyReLU) and a CPU head (Sigmoid), its calibration data, and
    its project converted with --cpu-fallback (issue 28)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from onnx2ai8x.cli import main

    rng = np.random.default_rng(28)

    def w(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.3, 0.3, shape).astype(np.float32),
                                       name)

    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="stem5",
                              kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
             helper.make_node("Relu", ["c0"], ["r0"], name="stem_relu"),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], name="conv1",
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("LeakyRelu", ["c1"], ["l1"], name="leaky", alpha=0.1),
             helper.make_node("Conv", ["l1", "w2", "b2"], ["c2"], name="conv2",
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("Flatten", ["r2"], ["f"], name="flatten", axis=1),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["g"], name="fc", transB=1),
             helper.make_node("Sigmoid", ["g"], ["y"], name="labels")]
    inits = [w("w0", 8, 3, 5, 5), w("b0", 8), w("w1", 8, 8, 3, 3), w("b1", 8),
             w("w2", 8, 8, 3, 3), w("b2", 8), w("w3", 4, 512), w("b3", 4)]
    graph = helper.make_graph(
        nodes, "split", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                       ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], inits)
    model = tmp / "split.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    np.save(tmp / "split-cal.npy", rng.uniform(0, 1, (8, 3, 8, 8)).astype(np.float32))
    out = tmp / "split-project"
    # MAX78002: only it resumes the accelerator after a CPU segment between its layers
    # (partition.start-layer)
    code = main([str(model), "--device", "MAX78002", "--calibration",
                 str(tmp / "split-cal.npy"), "-o", str(out), "--quiet", "--cpu-fallback"])
    assert code == 0
    project = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".c", ".h")}
    return {"split.onnx": model.read_bytes(),
            "split-cal.npy": (tmp / "split-cal.npy").read_bytes(), "split-project": project}


def _float_base() -> dict:
    """The float models the float kind damages: the float digits example with 16 of its
    calibration samples, one linear layer 256 -> 1024 (as wide as a layer gets, larger
    than the MAX78000's kernel memory), and one model per exporter dialect, each with
    calibration data."""
    from onnx import TensorProto, helper

    def npy(arr: np.ndarray) -> bytes:
        buf = io.BytesIO()
        np.save(buf, arr)
        return buf.getvalue()

    rng = np.random.default_rng(24)
    w = rng.uniform(-0.1, 0.1, (1024, 256)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["f"], axis=1),
         helper.make_node("Gemm", ["f", "w"], ["y"], transB=1)], "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1).tolist())])
    wide = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    floats = ROOT / "examples" / "digits_float"
    base = {"float.onnx": (floats / "digits_float.onnx").read_bytes(),
            "float-cal.npy": npy(np.load(floats / "calibration.npy")[:16]),
            "float-wide.onnx": wide.SerializeToString(),
            "float-wide-cal.npy": npy(rng.uniform(-1, 1, (8, 1, 16, 16)).astype(np.float32))}
    # One file each exporter dialect reads (importer/dialects), written by the real tool:
    # the damage then reaches each recognizer's own reading of its exporter's idioms.
    dialects = {
        "keras": (ROOT / "tests" / "float_onnx" / "keras" / "gray_cnn.onnx", (8, 8, 1)),
        "vendor": (ROOT / "tests" / "float_onnx" / "vendor_fixtures" / "unfused-bn.onnx",
                   (1, 12, 12)),
        "vendor8": (ROOT / "tests" / "float_onnx" / "vendor_fixtures" / "sim8.onnx",
                    (1, 12, 12)),
        "qdq": (ROOT / "tests" / "quantized_sources" / "fixtures" / "ort_resnet_qdq.onnx",
                (1, 8, 8)),
        "qop": (ROOT / "tests" / "quantized_sources" / "fixtures" / "ort_cnn_qoperator.onnx",
                (1, 8, 8)),
        "qonnx": (ROOT / "tests" / "quantized_sources" / "fixtures" /
                  "brevitas_residual_qonnx.onnx", (1, 8, 8))}
    for name, (path, shape) in dialects.items():
        base[f"float-{name}.onnx"] = path.read_bytes()
        base[f"float-{name}-cal.npy"] = npy(rng.uniform(-1, 1, (8, *shape))
                                            .astype(np.float32))
    return base


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict:
    pytest.importorskip("torch")
    from onnx2ai8x.convert import plan

    model = DIGITS / "digits.onnx"
    ckpt, npy = _tiny_checkpoint()
    tmp = tmp_path_factory.mktemp("projects")
    return {"model.onnx": model.read_bytes(),
            "sample.npy": (DIGITS / "sample.npy").read_bytes(),
            "model.yaml": plan(model, MAX78000, None).sidecar_text.encode(),
            "net.yaml": TINY_YAML, "net.pth.tar": ckpt, "net.npy": npy,
            "project": _project(tmp / "p"), "project-fifo": _project(tmp / "f", "--fifo"),
            "project-tree": _tree(tmp / "p"),
            "project-up": _upsampling_project(tmp), **_float_base(), **_split_base(tmp),
            **{f"combo-{name}.{ext}": data for name, pair in combo_models().items()
               for ext, data in zip(("onnx", "npy"), pair, strict=True)}}


_STATS: dict[str, list[float]] = {}  # per kind: seconds per case (tests/fuzz/conftest.py)


@pytest.mark.parametrize("kind", KINDS)
def test_fuzz(kind, base, tmp_path, request):
    import onnxruntime  # noqa: F401

    import custom_ops  # noqa: F401 - imported once here, not in every forked case
    import onnx2ai8x.sidecar.izer  # noqa: F401

    count = request.config.getoption("--fuzz-cases") or DEFAULT_CASES[kind]
    seed = request.config.getoption("--fuzz-seed")
    rng = random.Random(f"{seed}-{kind}")
    cases = GENERATORS[kind](rng, base, count)
    failures = []
    times = _STATS.setdefault(kind, [])
    for case in cases:
        outcome = run_case(case, tmp_path)
        times.append(outcome.seconds)
        if outcome.problems:
            failures.append(f"{kind}-{case.name} {' '.join(case.argv)[:200]}: "
                            + "; ".join(outcome.problems))
    assert not failures, f"{len(failures)} of {len(cases)} cases failed (seed {seed}):\n" \
        + "\n".join(failures[:40])


def test_well_formed_bases_convert(base, tmp_path):
    """The fuzz bases themselves convert: the cases mutate working inputs."""
    from .runner import Case

    files = {"model.onnx": base["model.onnx"], "sample.npy": base["sample.npy"],
             "net.yaml": base["model.yaml"], "p.yaml": base["net.yaml"],
             "p.pth.tar": base["net.pth.tar"], "p.npy": base["net.npy"],
             "f.onnx": base["float.onnx"], "f.npy": base["float-cal.npy"]}
    for argv in (("convert", "model.onnx", "--sidecar", "net.yaml", "--sample-input",
                  "sample.npy", "-o", "out"),
                 ("quantize", "f.onnx", "-d", "MAX78000", "--calibration", "f.npy", "-o",
                  "q.onnx"),
                 ("run", "model.onnx", "--input", "sample.npy", "-o", "y.npy"),
                 ("import-izer", "--config-file", "p.yaml", "--checkpoint-file",
                  "p.pth.tar", "--sample", "p.npy", "-d", "MAX78000", "-o", "p.onnx")):
        outcome = run_case(Case("base", argv[0], argv, files, outputs=(
            "out", "y.npy", "p.onnx", "q.onnx", "q.report.json")), tmp_path)
        assert outcome.code == 0 and not outcome.problems, outcome.stderr
