"""Quantize + convert wall time for examples/digits_float, whole process.

Usage: python benchmarks/float_quantize_time.py [--repeat N]

`onnx2ai8x digits_float.onnx --device MAX78000 --calibration calibration.npy` reads the
float model, calibrates on 200 digits with onnxruntime, quantizes, and converts the
result into the C project; `quantize` alone writes the ai8x-ONNX file. Target: under 2 s
for both steps on the 2-core dev machine. Measured as a user runs it (the converter's
template cache on, as after any first run).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "digits_float"


def _time(cmd: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    model, cal = str(EXAMPLE / "digits_float.onnx"), str(EXAMPLE / "calibration.npy")
    exe = [sys.executable, "-m", "onnx2ai8x.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            "quantize + convert": exe + [model, "--device", "MAX78000", "--calibration",
                                         cal, "-o", f"{tmp}/proj", "--overwrite", "-q"],
            "quantize only": exe + ["quantize", model, "-d", "MAX78000", "--calibration",
                                    cal, "-o",
                                    f"{tmp}/q.onnx", "--overwrite", "-q"],
        }
        print(f"{'digits_float':<20} {'median s':>9} {'min s':>7}")
        for label, cmd in runs.items():
            t = _time(cmd, args.repeat)
            print(f"{label:<20} {statistics.median(t):>9.2f} {min(t):>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
