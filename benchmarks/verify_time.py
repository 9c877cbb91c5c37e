"""`onnx2ai8x verify` wall time (whole process) on the MNIST and cats-dogs projects.

Usage: python benchmarks/verify_time.py [--repeat N]

Each case's project is generated once from its golden sidecar (import with the vendor
checkpoint, then convert); the timed command is `onnx2ai8x verify PROJECT`, which reads
the C, runs every layer on the functional accelerator model and checks the known answer.
Targets on the 2-core development machine: MNIST <= 2 s, cats-dogs <= 20 s.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT.parent / "shared" / "golden"
CASES = {"ai85-mnist": 2.0, "ai85-cats-dogs": 20.0, "ai87-cats-dogs": 20.0}


def _project(name: str, tmp: Path) -> Path:
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.sidecar.izer import import_project

    case = GOLDEN / name
    meta = json.loads((case / "case.json").read_text())
    model = tmp / f"{name}.onnx"
    imported = import_project(case / "network.yaml", case / "checkpoint.pth.tar",
                              get_device(meta["device"]), case / "sample.npy")
    model.write_bytes(imported.SerializeToString())
    out = tmp / name
    args = [a for a in meta["vendor_args"] if a in ("--fifo", "--softmax", "--mlator")]
    subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(model), "--device",
                    meta["device"], "--sidecar", str(case / "network.yaml"),
                    "--sample-input", str(case / "sample.npy"), "-o", str(out), "--quiet",
                    *args], check=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if not GOLDEN.is_dir():
        print(f"golden corpus not found at {GOLDEN}")
        return 2
    print(f"{'case':<16} {'median s':>9} {'min s':>7} {'target s':>9}  result")
    with tempfile.TemporaryDirectory() as tmp:
        for name, target in CASES.items():
            project = _project(name, Path(tmp))
            times, line = [], ""
            for _ in range(args.repeat):
                start = time.perf_counter()
                proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", "verify",
                                       str(project)], capture_output=True, text=True)
                times.append(time.perf_counter() - start)
                line = (proc.stdout or proc.stderr).strip().splitlines()[0]
            med = statistics.median(times)
            print(f"{name:<16} {med:9.3f} {min(times):7.3f} {target:9.1f}  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
