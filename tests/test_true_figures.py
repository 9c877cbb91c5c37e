"""Every figure the tool prints is true (issue 35 item 4).

- With --cpu-fallback the Arm core's layers are phases: the phase table has their rows,
  names the dominant phase among them, sums to the report's total per inference, and
  states the one CPU share the banner and the warning state too.
- The quantization table is printed on every path that quantizes (--cpu-fallback
  included).
- Numbers of four digits or more carry thousands separators in every table and line.
(The unload's words: tests/power/test_unload_words.py.)
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLOAT = ROOT / "examples" / "digits_float"
DIGITS = ROOT / "examples" / "digits"

pytestmark = pytest.mark.skipif(not FLOAT.is_dir(), reason="examples absent")


def _convert(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp / "p"
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", *args, "-o", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc, out


@pytest.fixture(scope="module")
def cpu_stem(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    return _convert(tmp_path_factory.mktemp("stem"), str(FLOAT / "digits_cpu_stem.onnx"),
                    "--device", "MAX78000", "--calibration", str(FLOAT / "calibration.npy"),
                    "--cpu-fallback")


def _phase_rows(stdout: str) -> dict[str, list[str]]:
    table = stdout[stdout.index("where the time goes"):]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = line.split()
        if len(cells) >= 6 and cells[0] not in ("total", "model:", "CPU"):
            rows[cells[0]] = cells
    return rows


def test_cpu_segments_are_phases(cpu_stem) -> None:
    proc, out = cpu_stem
    report = json.loads((out / "report.json").read_text())
    phases = report["phases"]
    names = [p["name"] for p in phases["phases"]]
    segments = report["partition"]["segments"]
    assert [s["segment"] for s in segments] == ["cpu-stem"]
    # the stem computes the accelerator's input: it runs before the input load
    assert names.index("configure") < names.index("cpu-stem") < names.index("input")
    stem = phases["phases"][names.index("cpu-stem")]
    assert stem["cycles"] == segments[0]["cycles"]
    assert stem["us"] == pytest.approx(segments[0]["us"], abs=0.05)
    # the CPU's 4 ms dwarf the input load: the dominant phase is the CPU's
    timed = [p for p in phases["phases"] if p["per_inference"] and p["us"] is not None]
    assert phases["dominant"] == max(timed, key=lambda p: p["us"])["name"] == "cpu-stem"
    rows = _phase_rows(proc.stdout)
    assert "cpu-stem" in rows and "<-" in rows["cpu-stem"]
    assert "<-" not in rows["input"]


def test_the_phase_table_sums_to_the_total(cpu_stem) -> None:
    proc, out = cpu_stem
    phases = json.loads((out / "report.json").read_text())["phases"]
    timed = [p["us"] for p in phases["phases"] if p["per_inference"] and p["us"] is not None]
    assert phases["per_inference_us"] == pytest.approx(sum(timed), abs=0.05)
    printed = re.search(r"total per inference\s+([\d,]+\.\d)", proc.stdout).group(1)
    assert float(printed.replace(",", "")) == phases["per_inference_us"]
    partition = json.loads((out / "report.json").read_text())["partition"]
    inference = next(p for p in phases["phases"] if p["name"] == "inference")
    assert inference["us"] == partition["accelerator_us"]


def test_one_cpu_share_everywhere(cpu_stem) -> None:
    proc, out = cpu_stem
    report = json.loads((out / "report.json").read_text())
    share = report["partition"]["cpu_share"]
    assert report["phases"]["cpu_share"] == share
    stated = re.findall(r"CPU share of the compute time[^:]*: ([\d.]+)%", proc.stdout)
    stated += re.findall(r"the CPU takes ([\d.]+)%", proc.stdout + proc.stderr)
    assert len(stated) >= 3  # the banner, its warning, the phase table
    assert set(stated) == {f"{100 * share:.1f}"}


def test_the_quantization_table_with_cpu_fallback(cpu_stem) -> None:
    proc, _ = cpu_stem
    assert re.search(r"^#\s+layer\s+op\s+wbits\s+shift", proc.stdout, re.M)
    assert "calibration: 200 samples" in proc.stdout


# four or more digits in a row, not part of a name, a hex number or a decimal fraction
_BARE = re.compile(r"(?<![\w.,/-])\d{4,}(?![\w,])")


@pytest.mark.parametrize("args", [
    ("cpu-stem",),
    (str(DIGITS / "digits.onnx"), "--device", "MAX78000", "--softmax"),
    (str(FLOAT / "digits_float.onnx"), "--device", "MAX78000", "--calibration",
     str(FLOAT / "calibration.npy")),
])
def test_thousands_separators_everywhere(args, cpu_stem, tmp_path: Path) -> None:
    proc = cpu_stem[0] if args == ("cpu-stem",) else _convert(tmp_path, *args)[0]
    text = proc.stdout + proc.stderr
    bare = [m.group(0) for m in _BARE.finditer(text)]
    assert not bare, f"numbers without thousands separators: {bare[:5]}"
    assert re.search(r"\d,\d{3}", text)  # and some with them
