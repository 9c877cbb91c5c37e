"""Conversion wall time per zoo golden case: ONNX in -> C project written, whole process.

Usage: python benchmarks/convert_time.py [--repeat N] [--cases ...]
           [--vendor DIR [--vendor-python PY]]

Each case is converted as a user converts it: its sidecar, its sample and the options
its vendor arguments name (--softmax, --timer 0, --fifo), one process per conversion.
The interpreter floor, `python -c "import numpy, onnx, onnxruntime"` (what any
ONNX tool in Python pays before it does anything), runs alternately with it, so the
`/floor` column compares the two at the same moment of a shared machine.

With --vendor (a checkout of ai8x-synthesis, run by --vendor-python) the vendor tool
runs each case too, alternately with the converter, with the case's recorded vendor
arguments and the same checkpoint, sidecar and sample: `speed-up` is the vendor's
median over ours, `memory` our peak resident memory over the vendor's (the largest
process of each run, from the kernel's accounting of the finished child). Without it
those columns show the figures measured on the development machine (README).

Times are medians of --repeat runs after one warm-up run of each command (which also
writes Python's bytecode caches, as any installed program has them). The ONNX is
imported once beforehand (import-izer needs torch; the convert path does not).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO = ["ai85-mnist", "ai85-kws20_v3", "ai85-cifar-10", "ai85-cats-dogs"]
FLOOR = [sys.executable, "-c", "import numpy, onnx, onnxruntime"]


def timed(command: list[str], env: dict[str, str], cwd: Path | None = None
          ) -> tuple[float, float]:
    """(wall seconds, peak resident MiB) of one run of `command`, which must succeed."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                                stderr=err)
        # wait4, not wait: the finished child's own resource use (its peak memory)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            text = err.read().decode(errors="replace")
            raise SystemExit(f"{' '.join(command[:4])} ... failed:\n{text[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # a user's installed program has its bytecode caches; a run that may not write
    # them would recompile every module each time
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    return env


def _vendor_environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # the vendor's checkpoints hold pickled training state that torch >= 2.6 no longer
    # loads by default; the vendor tool predates that
    env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    return env


def _prepare(names: list[str], tmp: Path) -> None:
    """(Run in a child process, so that this one stays small: a child's peak memory
    counts what it was forked from.) Import each case into ai8x-ONNX in `tmp` and print
    per case its device, converter options and vendor arguments as JSON."""
    import json

    from tests.golden import pipeline

    out = {}
    for name in names:
        info = pipeline.case_json(name)
        pipeline.imported_model(name, tmp)
        out[name] = {"device": info["device"], "vendor_args": info["vendor_args"],
                     "options": pipeline.cli_options(info["vendor_args"]),
                     "case": str(pipeline.GOLDEN / name)}
    print(json.dumps(out))


def _commands(name: str, info: dict, tmp: Path, args
              ) -> tuple[list[str], list[str] | None]:
    case = Path(info["case"])
    ours = [sys.executable, "-m", "onnx2ai8x.cli", str(tmp / f"{name}.onnx"), "--device",
            info["device"], "--sidecar", str(case / "network.yaml"), "--sample-input",
            str(case / "sample.npy"), "-o", str(tmp / name), "--overwrite", "--quiet",
            *info["options"]]
    if args.vendor is None:
        return ours, None
    vendor = [args.vendor_python, "ai8xize.py", "--test-dir", str(tmp / "vendor"),
              "--prefix", name, "--checkpoint-file", str(case / "checkpoint.pth.tar"),
              "--config-file", str(case / "network.yaml"), "--sample-input",
              str(case / "sample.npy"), "--device", info["device"], "--overwrite",
              *[a for a in info["vendor_args"] if a != "--verbose"]]
    return ours, vendor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--vendor", type=Path, default=None,
                        help="ai8x-synthesis checkout to time side by side")
    parser.add_argument("--vendor-python", default=sys.executable,
                        help="the Python that runs the vendor tool")
    parser.add_argument("--cases", nargs="*", default=ZOO)
    parser.add_argument("--prepare", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.prepare is not None:
        _prepare(args.cases, args.prepare)
        return 0
    import json

    env, vendor_env = _environment(), _vendor_environment()
    print(f"{'case':<16} {'ours s':>7} {'floor s':>8} {'/floor':>7} {'vendor s':>9} "
          f"{'speed-up':>9} {'ours MiB':>9} {'vendor MiB':>11} {'memory':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        prepared = json.loads(subprocess.run(
            [sys.executable, __file__, "--prepare", tmp, "--cases", *args.cases],
            env=env, check=True, capture_output=True, text=True).stdout)
        for name in args.cases:
            ours, vendor = _commands(name, prepared[name], Path(tmp), args)
            runs: dict[str, list[tuple[float, float]]] = {"ours": [], "floor": [],
                                                          "vendor": []}
            for k in range(args.repeat + 1):  # the first round warms up, not counted
                got = {"ours": timed(ours, env), "floor": timed(FLOOR, env)}
                if vendor is not None:
                    got["vendor"] = timed(vendor, vendor_env, cwd=args.vendor)
                if k:
                    for key, value in got.items():
                        runs[key].append(value)
            med = {k: statistics.median(w for w, _ in v) for k, v in runs.items() if v}
            peak = {k: max(m for _, m in v) for k, v in runs.items() if v}
            line = (f"{name:<16} {med['ours']:7.3f} {med['floor']:8.3f} "
                    f"{med['ours'] / med['floor']:6.2f}x")
            if vendor is not None:
                line += (f" {med['vendor']:9.3f} {med['vendor'] / med['ours']:8.1f}x "
                         f"{peak['ours']:9.1f} {peak['vendor']:11.1f} "
                         f"{peak['ours'] / peak['vendor']:7.2f}")
            else:
                line += f" {'-':>9} {'-':>9} {peak['ours']:9.1f} {'-':>11} {'-':>7}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
