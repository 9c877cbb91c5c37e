"""Conversion wall time per zoo golden case: ONNX in -> C project written, whole process.

Usage: python benchmarks/convert_time.py [--repeat N] [--vendor DIR [--vendor-python PY]]

With --vendor (a checkout of ai8x-synthesis) the vendor tool runs each case too, side by
side with the converter (alternating runs, same machine, same moment), with the case's
recorded vendor arguments; the speed-up column is then measured, not the table below.

The vendor tool takes (median wall on the 2-core dev machine) 5.5 s for MNIST, 8.3 s for
KWS20 v3, 9.8 s for CIFAR-10 NAS and 5.4 s for cats-dogs; the target is 10x faster. The
ONNX is imported once beforehand (import-izer needs torch; the convert path must not).
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
GOLDEN = ROOT.parent / "shared" / "golden"
ZOO = ["ai85-mnist", "ai85-kws20_v3", "ai85-cifar-10", "ai85-cats-dogs",
       "ai87-kws20_v3_1", "ai87-cats-dogs"]
VENDOR_SECONDS = {"ai85-mnist": 5.5, "ai85-kws20_v3": 8.3, "ai85-cifar-10": 9.8,
                  "ai85-cats-dogs": 5.4}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--vendor", type=Path, default=None,
                        help="ai8x-synthesis checkout to time side by side")
    parser.add_argument("--vendor-python", default=sys.executable,
                        help="the Python that runs the vendor tool")
    parser.add_argument("--cases", nargs="*", default=ZOO)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import json

    from onnx2ai8x.devices import get_device
    from onnx2ai8x.sidecar.izer import import_project

    print(f"{'case':<18} {'median s':>9} {'min s':>7} {'vendor s':>9} {'speed-up':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases:
            case = GOLDEN / name
            info = json.loads((case / "case.json").read_text())
            device = info["device"]
            model = Path(tmp) / f"{name}.onnx"
            imported = import_project(case / "network.yaml", case / "checkpoint.pth.tar",
                                      get_device(device), case / "sample.npy")
            model.write_bytes(imported.SerializeToString())
            times, vendor_times = [], []
            for _ in range(args.repeat):
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(model), "--device",
                                device, "--sidecar", str(case / "network.yaml"),
                                "--sample-input", str(case / "sample.npy"),
                                "-o", str(Path(tmp) / name), "--overwrite", "--quiet"],
                               check=True)
                times.append(time.perf_counter() - start)
                if args.vendor is not None:
                    start = time.perf_counter()
                    subprocess.run([args.vendor_python, "ai8xize.py", "--test-dir",
                                    str(Path(tmp) / "vendor"), "--prefix", name,
                                    "--checkpoint-file", str(case / "checkpoint.pth.tar"),
                                    "--config-file", str(case / "network.yaml"),
                                    "--sample-input", str(case / "sample.npy"),
                                    "--device", device, "--overwrite",
                                    *[a for a in info.get("vendor_args", ())
                                      if a != "--verbose"]],
                                   cwd=args.vendor, check=True, capture_output=True)
                    vendor_times.append(time.perf_counter() - start)
            med = statistics.median(times)
            vendor = statistics.median(vendor_times) if vendor_times \
                else VENDOR_SECONDS.get(name)
            ratio = f"{vendor / med:8.1f}x" if vendor else "       -"
            shown = f"{vendor:9.3f}" if vendor else f"{'-':>9}"
            print(f"{name:<18} {med:9.3f} {min(times):7.3f} {shown} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
