"""Where one conversion's time goes: the imports by package, then the work by stage.

Usage: python benchmarks/profile_convert.py [--case ai85-mnist] [--repeat 5]

The golden case is converted as convert_time.py converts it (sidecar, sample, its
options), each run in a fresh process:

1. imports: `python -X importtime` over the whole conversion, each module's own time
   summed by package (numpy, onnxruntime, jinja2, ..., onnx2ai8x by subpackage), the
   median over the runs;
2. work: the same conversion with every module it needs imported first and the
   stages' functions timed in place (wall and CPU, inclusive, nested as they call each
   other), the median over the runs.

The machine is shared: CPU seconds are the steadier figure, wall the one a user sees.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (module, function or Class.method, label): the stages, in the order they run
STAGES = [
    ("onnx2ai8x.cli", "_device", "device named or read from the model"),
    ("onnx2ai8x.convert", "plan", "plan"),
    ("onnx2ai8x.frontend", "load_onnx", "read: decode the ONNX file"),
    ("onnx2ai8x.frontend", "_read", "read: the network"),
    ("onnx2ai8x.legalize.legal", "legal_network", "legalize"),
    ("onnx2ai8x.convert", "_place", "map (sidecar, placement, checks)"),
    ("onnx2ai8x.map.latency", "estimate_cycles", "cycle estimate"),
    ("onnx2ai8x.report", "summarize", "report"),
    ("onnx2ai8x.sidecar.write", "write_sidecar", "sidecar text"),
    ("onnx2ai8x.convert", "_sample_for", "sample"),
    ("onnx2ai8x.convert", "reference_outputs", "reference (onnxruntime)"),
    ("onnx2ai8x.emit.annotate", "annotate_model", "annotated ONNX"),
    ("onnx2ai8x.emit.project", "write_project", "emit"),
    ("onnx2ai8x.emit.project", "project_data", "emit: memory contents"),
    ("onnx2ai8x.emit.registers", "register_program", "emit: register program"),
    ("onnx2ai8x.emit.project", "_rendered", "emit: templates"),
    ("onnx2ai8x.fsutil", "write_dir_atomic", "write (atomic directory)"),
    ("onnx2ai8x.convert", "_check_footprint", "firmware size check"),
    ("onnx2ai8x.convert", "_PhaseTiming.files", "phase table"),
]


def _command(case: str, tmp: Path) -> list[str]:
    from tests.golden import pipeline

    info = pipeline.case_json(case)
    model = pipeline.imported_model(case, tmp)
    golden = pipeline.GOLDEN / case
    return [str(model), "--device", info["device"], "--sidecar",
            str(golden / "network.yaml"), "--sample-input", str(golden / "sample.npy"),
            "-o", str(tmp / "project"), "--overwrite", "--quiet",
            *pipeline.cli_options(info["vendor_args"])]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(ROOT)
    return env


def _group(module: str) -> str:
    parts = module.split(".")
    if parts[0] in ("onnx2ai8x", "custom_ops", "ai8xsim"):
        return ".".join(parts[:2])
    if parts[0] == "google":
        return "protobuf"
    return parts[0]


def imports(argv: list[str], repeat: int) -> tuple[dict[str, list[float]], list[float]]:
    """Per package, each run's own import time in ms; and each run's total."""
    per: dict[str, list[float]] = defaultdict(list)
    totals = []
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "onnx2ai8x.cli",
                               *argv], capture_output=True, text=True, env=_environment())
        run: dict[str, float] = defaultdict(float)
        for m in re.finditer(r"import time:\s+(\d+) \|\s+\d+ \| +(\S+)", proc.stderr):
            run[_group(m.group(2))] += int(m.group(1)) / 1000
        for key, value in run.items():
            per[key].append(value)
        totals.append(sum(run.values()))
    return per, totals


def _wrap(label: str, func, record: list, stack: list):
    def timed(*args, **kwargs):
        depth = len(stack)
        stack.append(label)
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            record.append((label, depth, time.perf_counter() - wall,
                           time.thread_time() - cpu))
            stack.pop()
    return timed


def _instrument(record: list, stack: list) -> None:
    for module_name, attr, label in STAGES:
        module = importlib.import_module(module_name)
        owner, name = module, attr
        if "." in attr:
            cls, name = attr.split(".")
            owner = getattr(module, cls)
        original = getattr(owner, name)
        wrapped = _wrap(label, original, record, stack)
        setattr(owner, name, wrapped)
        # names imported with `from x import f` are bound in other modules too
        for other in list(sys.modules.values()):
            if other is not None and other is not module and \
                    getattr(other, name, None) is original:
                setattr(other, name, wrapped)


def work_child(argv: list[str]) -> None:
    """(In a child process.) One conversion with the stages timed; prints JSON."""
    from onnx2ai8x import api, cli, convert, phases  # noqa: F401 - import before timing
    from onnx2ai8x.emit import footprint, project  # noqa: F401

    record: list = []
    _instrument(record, [])
    wall, cpu = time.perf_counter(), time.thread_time()
    code = cli.main(argv)
    total = (time.perf_counter() - wall, time.thread_time() - cpu)
    print(json.dumps({"code": code, "total": total, "stages": record}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="ai85-mnist")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work-child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.work_child is not None:
        work_child(args.work_child)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        argv = _command(args.case, Path(tmp))
        subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", *argv], check=True,
                       env=_environment())  # warm-up: bytecode and template caches
        per, totals = imports(argv, args.repeat)
        print(f"{args.case}: imports, own time by package (median of {args.repeat} runs, "
              f"ms; total {statistics.median(totals):.0f} ms)")
        for key, values in sorted(per.items(), key=lambda kv: -statistics.median(kv[1])):
            if statistics.median(values) >= 1:
                print(f"  {statistics.median(values):7.1f}  {key}")
        runs = []
        for _ in range(args.repeat):
            proc = subprocess.run([sys.executable, __file__, "--work-child", *argv],
                                  capture_output=True, text=True, env=_environment(),
                                  check=True)
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"\n{args.case}: work by stage, modules imported first (median of "
          f"{args.repeat} runs; wall ms / CPU ms, inclusive)")
    wall = statistics.median(r["total"][0] for r in runs) * 1000
    cpu = statistics.median(r["total"][1] for r in runs) * 1000
    print(f"  {wall:7.1f} {cpu:7.1f}  the command (cli.main)")
    order: dict[str, int] = {}
    for label, depth, _, _ in sorted(runs[0]["stages"], key=lambda s: s[1]):
        order.setdefault(label, depth)
    for _, _, label in STAGES:
        if label not in order:
            continue
        walls = [sum(s[2] for s in r["stages"] if s[0] == label) for r in runs]
        cpus = [sum(s[3] for s in r["stages"] if s[0] == label) for r in runs]
        print(f"  {statistics.median(walls) * 1000:7.1f} {statistics.median(cpus) * 1000:7.1f}"
              f"  {'  ' * order[label]}{label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
