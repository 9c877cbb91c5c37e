"""A 1x1 convolution that streams runs on the 3x3 kernel hardware (issue 15).

Streaming has no 1x1 path, so the vendor rewrites such a layer before anything else:
3x3 weights holding the 1x1 weight in the centre, padding 1. The test builds that
rewrite by hand as a second project (a 3x3, pad-1 layer with centre-only weights) and
requires the converter to write the same project for both: same kernels, same
registers. With the vendor tool available locally (AI8X_SYNTHESIS: a checkout of
ai8x-synthesis; AI8X_SYNTHESIS_PYTHON: a Python that runs it) the projects are also
compared with the vendor's by /work/shared/tools/c2trace.py.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x.cli import main
from onnx2ai8x.devices import MAX78000

torch = pytest.importorskip("torch")

C2TRACE = Path(__file__).resolve().parents[3] / "shared" / "tools" / "c2trace.py"

SIDECAR = """arch: s
dataset: s
layers:
  - processors: 0x0000000000000001
    in_offset: 0x7000
    out_offset: 0x4000
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    streaming: true
  - processors: 0x00000000000000ff
    out_offset: 0x0000
    operation: {op}
    kernel_size: {kernel}
    pad: {pad}
    activate: None
    streaming: true
"""


def _project(root: Path, name: str, op: str, second: torch.Tensor, kernel: str,
             pad: int, first: torch.Tensor) -> Path:
    one = torch.tensor([8.0]), torch.tensor([-1.0])
    sd = {"conv1.op.weight": first, "conv1.weight_bits": one[0],
          "conv1.output_shift": one[1], "conv2.op.weight": second,
          "conv2.weight_bits": one[0], "conv2.output_shift": one[1]}
    torch.save({"arch": "s", "epoch": 0, "state_dict": sd, "extras": {}},
               root / f"{name}.pth.tar")
    (root / f"{name}.yaml").write_text(SIDECAR.format(op=op, kernel=kernel, pad=pad))
    return root / name


def _convert(root: Path, name: str) -> Path:
    base = str(root / name)
    assert main(["import-izer", "--config-file", f"{base}.yaml", "--checkpoint-file",
                 f"{base}.pth.tar", "--sample", str(root / "x.npy"), "--device", "MAX78000",
                 "-o",
                 f"{base}.onnx"]) == 0
    assert main([f"{base}.onnx", "--sidecar", f"{base}.yaml", "--sample-input",
                 str(root / "x.npy"), "--fifo", "-o", f"{base}-out", "--quiet"]) == 0
    return Path(f"{base}-out")


@pytest.fixture
def pair(tmp_path):
    """The 1x1 streaming project and its hand-made 3x3 rewrite."""
    gen = torch.Generator().manual_seed(11)
    first = torch.randint(-128, 128, (8, 1, 3, 3), generator=gen).float()
    w1 = torch.randint(-128, 128, (4, 8, 1, 1), generator=gen).float()
    w3 = torch.zeros(4, 8, 3, 3)
    w3[:, :, 1, 1] = w1[:, :, 0, 0]  # the vendor's rewrite: the weight in the centre
    np.save(tmp_path / "x.npy", np.random.default_rng(1).integers(-128, 128, (1, 32, 32)))
    _project(tmp_path, "one", "conv2d", w1, "1x1", 0, first)
    _project(tmp_path, "three", "conv2d", w3, "3x3", 1, first)
    return tmp_path


def test_streaming_1x1_is_packed_as_the_vendor_rewrites_it(pair):
    one, three = _convert(pair, "one"), _convert(pair, "three")
    for name in ("cnn.c", "weights.h", "cnn.h", "main.c"):
        assert (one / name).read_text() == (three / name).read_text(), name


def test_kernel_columns_hold_the_weight_in_the_centre(pair):
    from onnx2ai8x.convert import plan

    _convert(pair, "one")
    result = plan(pair / "one.onnx", MAX78000, pair / "one.yaml")
    k = result.hw.weights.kernels  # allocated once, in plan
    stored = k.image[k.owners == 1]  # layer 1's kernels, 9 bytes each
    weights = np.asarray(result.network.layers[1].weights).reshape(-1)
    assert stored.shape == (weights.size, 9)
    assert not stored[:, [0, 1, 2, 3, 5, 6, 7, 8]].any()
    assert sorted(stored[:, 4].astype(np.int8).tolist()) == sorted(weights.tolist())


def _vendor() -> tuple[str, Path] | None:
    root = os.environ.get("AI8X_SYNTHESIS")
    if not root or not (Path(root) / "ai8xize.py").is_file() or not C2TRACE.is_file():
        return None
    return os.environ.get("AI8X_SYNTHESIS_PYTHON", sys.executable), Path(root)


def test_streaming_1x1_matches_the_vendor_tool(pair):
    vendor = _vendor()
    if vendor is None:
        pytest.skip("vendor tool absent: set AI8X_SYNTHESIS (and AI8X_SYNTHESIS_PYTHON)")
    python, root = vendor
    ours = _convert(pair, "one")
    subprocess.run([python, "ai8xize.py", "--test-dir", str(pair / "vendor"), "--prefix",
                    "one", "--checkpoint-file", str(pair / "one.pth.tar"), "--config-file",
                    str(pair / "one.yaml"), "--device", "MAX78000", "--fifo",
                    "--compact-data", "--mexpress", "--overwrite", "--sample-input",
                    str(pair / "x.npy")], cwd=root, check=True, capture_output=True,
                   timeout=600)
    done = subprocess.run([sys.executable, str(C2TRACE), "compare",
                           str(pair / "vendor" / "one"), str(ours)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
