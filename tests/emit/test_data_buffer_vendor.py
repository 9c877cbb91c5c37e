"""Data-buffer projects against the vendor tool (differential; skipped without it).

The small networks of data_buffer_nets.py, and the vendor's kinetics action-recognition
network when its files are at hand (AI8X_KINETICS: a directory with kinetics.yaml,
ckpt.pth.tar and sample.npy), go through the vendor tool and through import-izer +
convert with the options of the vendor's demo script (--overlap-data --softmax
--zero-sram), on both devices. The two C projects must give equal traces
(/work/shared/tools/c2trace.py) and ours must pass `verify`.

The vendor tool: AI8X_SYNTHESIS (a checkout with ai8xize.py; default /tmp/vendor/synth)
run by AI8X_SYNTHESIS_PYTHON (default /tmp/vendor/venv/bin/python).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ai8xsim.verify import PASS, execute
from onnx2ai8x.cli import main
from tests.emit.data_buffer_nets import NETS, import_net, write_net

C2TRACE = Path(__file__).resolve().parents[3] / "shared" / "tools" / "c2trace.py"
OPTIONS = ["--overlap-data", "--softmax", "--zero-sram"]
DEVICES = ("MAX78000", "MAX78002")


def _vendor() -> tuple[str, Path]:
    root = Path(os.environ.get("AI8X_SYNTHESIS", "/tmp/vendor/synth"))
    python = os.environ.get("AI8X_SYNTHESIS_PYTHON", "/tmp/vendor/venv/bin/python")
    if not (root / "ai8xize.py").is_file() or not Path(python).is_file() \
            or not C2TRACE.is_file():
        pytest.skip("vendor tool absent: set AI8X_SYNTHESIS and AI8X_SYNTHESIS_PYTHON")
    return python, root


def _compare(tmp: Path, yaml: Path, ckpt: Path, sample: Path, device: str) -> None:
    python, root = _vendor()
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    done = subprocess.run([python, "ai8xize.py", "--test-dir", str(tmp / "vendor"), "--prefix",
                           "p", "--checkpoint-file", str(ckpt), "--config-file", str(yaml),
                           "--device", device, "--sample-input", str(sample),
                           "--no-version-check", "--overwrite", *OPTIONS], cwd=root, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    model = import_net(yaml, ckpt, sample, tmp / "model.onnx", device)
    ours = tmp / "ours"
    assert main([str(model), "--device", device, "--sidecar", str(yaml), "--sample-input",
                 str(sample), "-o", str(ours), "--quiet", *OPTIONS]) == 0
    cmp = subprocess.run([sys.executable, str(C2TRACE), "compare", str(ours),
                          str(tmp / "vendor" / "p")], capture_output=True, text=True,
                         timeout=600)
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    assert execute(ours).verdict == PASS


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("net", NETS, ids=[n.name for n in NETS])
def test_small_data_buffer_network_matches_the_vendor(net, device, tmp_path):
    _vendor()
    _compare(tmp_path, *write_net(net, tmp_path / "in"), device)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_kernels_are_left_out_as_the_vendor_does(device, tmp_path):
    """--zero-sram: kernels of all zeros are not written (the self-test zeroed them)."""
    _vendor()
    _compare(tmp_path, *write_net(NETS[0], tmp_path / "in", zero_every=3), device)


@pytest.mark.parametrize("device", DEVICES)
def test_kinetics_actiontcn_matches_the_vendor(device, tmp_path):
    _vendor()
    src = Path(os.environ.get("AI8X_KINETICS", "/tmp/tcn"))
    files = [src / n for n in ("kinetics.yaml", "ckpt.pth.tar", "sample.npy")]
    if not all(f.is_file() for f in files):
        pytest.skip("kinetics files absent: set AI8X_KINETICS")
    _compare(tmp_path, *files, device)
