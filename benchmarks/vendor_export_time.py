"""Recovering a vendor export vs converting the same network from ai8x-ONNX (issue 24).

Usage: python benchmarks/vendor_export_time.py [--repeat N] [--cases ...]

For each golden zoo case with exports in ../shared/exports: the wall time of the whole
command (`onnx2ai8x MODEL --device D -o OUT --sample-input X --quiet`, a fresh process)
on the case imported into ai8x-ONNX (automatic mapping, like the export) and on each of
the vendor's export forms, runs alternating; the median of N each. The target: every
export form within 0.3 s of the ai8x-ONNX conversion. Exit 1 when one is not. With
--cpu the processes' CPU time is compared instead (for a busy machine).

The processes run as an installed package does: with compiled bytecode (a private
PYTHONPYCACHEPREFIX, filled by one untimed warm-up run of each command), whatever
PYTHONDONTWRITEBYTECODE says; otherwise each run would compile every module it imports
and the larger float path would pay for its size, not for its work.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT.parent / "shared" / "golden"
EXPORTS = ROOT.parent / "shared" / "exports"
FORMS = ("q", "q-sim8", "q-simplified", "qat")
BUDGET_S = 0.3


def _run(model: Path, device: str, sample: Path, out: Path, env: dict,
         cpu: bool) -> float:
    """One conversion, a fresh process: its wall time, or (cpu) its user + system CPU
    time, which a machine shared with other jobs disturbs far less."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "onnx2ai8x.cli", str(model), "--device",
                             device, "-o", str(out), "--sample-input", str(sample),
                             "--quiet", "--overwrite"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=ROOT, env=env)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{model}: {err.decode(errors='replace').strip()}")
    return usage.ru_utime + usage.ru_stime if cpu else time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", nargs="*", default=None)
    parser.add_argument("--cpu", action="store_true",
                        help="compare CPU time (user + system) instead of wall time")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.sidecar.izer import import_project

    cases = args.cases or sorted(p.name for p in EXPORTS.iterdir() if p.is_dir())
    print(f"{'case':<18} {'ai8x-ONNX s':>11} " + " ".join(f"{f:>12}" for f in FORMS))
    worst = -1e9
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(t / "pycache")
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        for name in cases:
            case = GOLDEN / name
            device = json.loads((case / "case.json").read_text())["device"]
            model = t / f"{name}.onnx"
            model.write_bytes(import_project(case / "network.yaml", case / "checkpoint.pth.tar",
                                             get_device(device), case / "sample.npy")
                              .SerializeToString())
            ints = np.load(case / "sample.npy")[np.newaxis]
            samples = {"int": t / "int.npy", "float": t / "float.npy"}
            np.save(samples["int"], ints)
            np.save(samples["float"], ints / 128.0)
            times: dict[str, list[float]] = {k: [] for k in ("onnx", *FORMS)}
            for rep in range(args.repeat + 1):  # the first: warm-up (bytecode)
                took = {"onnx": _run(model, device, samples["int"], t / "out", env,
                                     args.cpu)}
                for form in FORMS:
                    sample = samples["int" if form == "q-sim8" else "float"]
                    took[form] = _run(EXPORTS / name / f"{form}.onnx", device, sample,
                                      t / "out", env, args.cpu)
                for k, v in took.items():
                    if rep:
                        times[k].append(v)
            med = {k: statistics.median(v) for k, v in times.items()}
            worst = max(worst, *(med[f] - med["onnx"] for f in FORMS))
            print(f"{name:<18} {med['onnx']:>11.2f} " +
                  " ".join(f"{med[f]:>6.2f} ({med[f] - med['onnx']:+.2f})" for f in FORMS))
    what = "CPU" if args.cpu else "wall"
    print(f"largest difference ({what} time): {worst:+.2f} s (budget +{BUDGET_S} s)")
    return 0 if worst <= BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
