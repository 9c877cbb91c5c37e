"""Where the time goes for the zoo networks: the README's phase table (issue 29).

Converts each golden zoo case (its sidecar, sample and options) and prints the phases of
report.json as a Markdown table: cycles and microseconds per phase at the clocks the
options select. Needs ../shared/golden. Usage: python benchmarks/phase_table.py
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.golden import pipeline  # noqa: E402

ZOO = ("ai85-mnist", "ai85-cifar-10", "ai85-kws20_v3", "ai85-cats-dogs", "ai87-cats-dogs",
       "ai87-kws20_v3_1")
ORDER = ("weights", "bias", "configure", "input", "inference", "unload", "softmax")


def _cell(phase: dict | None) -> str:
    if phase is None:
        return "-"
    if phase["cycles"] is None:
        return "not modelled"
    return f"{phase['cycles']:,} / {phase['us']:,.1f}"


def main() -> None:
    print("| network | device | " + " | ".join(ORDER) + " | dominant (per inference) |")
    print("|---|---|" + "---|" * len(ORDER) + "---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ZOO:
            work = Path(tmp) / name
            work.mkdir()
            project, proc = pipeline.convert_case(name, work, sidecar=True)
            if proc.returncode != 0:
                raise SystemExit(proc.stderr)
            report = json.loads((project / "report.json").read_text())
            phases = {p["name"]: p for p in report["phases"]["phases"]}
            cells = [_cell(phases.get(k)) for k in ORDER]
            how = phases["input"]["how"]
            cells[ORDER.index("input")] += f" ({how})"
            print(f"| {name} | {report['device']} | " + " | ".join(cells)
                  + f" | {report['phases']['dominant']} |")


if __name__ == "__main__":
    main()
