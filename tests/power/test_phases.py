"""Where the time goes (issue 29): the load counts are the words the generated C writes.

onnx2ai8x.phases counts each phase by following main() through the virtual
accelerator's reader. Here the same numbers are taken from the project's text another
way: the kernel stream's run lengths in weights.h, the byte counts of the bias copies,
the SAMPLE_INPUT_n tables (each word is copied or pushed once), the unload buffer.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from onnx2ai8x.phases import CPU_STORE_CYCLES, FIFO_WORD_CYCLES, count_phase_words
from tests.conftest import GOLDEN
from tests.golden import pipeline


def _numbers(text: str) -> list[int]:
    return [int(v, 0) for v in re.findall(r"-?0x[0-9a-fA-F]+|-?\b\d+\b", text)]


def _macro(text: str, name: str) -> list[int]:
    m = re.search(rf"#define\s+{name}\s*\{{(.*?)\}}", text, re.S)
    assert m, name
    return _numbers(m.group(1).replace("\\", " "))


def _kernel_words(weights_h: str) -> int:
    """Stored words of the KERNELS stream: each run's words plus its express byte store."""
    stream, i, words = _macro(weights_h, "KERNELS"), 0, 0
    while stream[i] != 0:
        words += stream[i + 1] + 1
        i += 2 + stream[i + 1]
    return words


def _convert(name: str, tmp: Path, *extra: str) -> Path:
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus absent")
    tmp.mkdir(parents=True, exist_ok=True)
    project, proc = pipeline.convert_case(name, tmp, sidecar=True, extra=extra)
    assert proc.returncode == 0, proc.stderr
    return project


@pytest.mark.parametrize(("name", "extra"), [("ai85-mnist", ()), ("ai85-cats-dogs", ()),
                                             ("ai87-kws20_v3_1", ("--mlator",))])
def test_load_counts_are_the_words_the_c_writes(name: str, extra: tuple[str, ...],
                                                tmp_path: Path) -> None:
    project = _convert(name, tmp_path, *extra)
    counts = count_phase_words(project)
    text = {p.name: p.read_text() for p in project.iterdir() if p.suffix in (".c", ".h")}
    assert counts["weights"].words == _kernel_words(text["weights.h"])
    bias = sum(int(n) for n in re.findall(r"memcpy_8to32\([^;]*sizeof\(uint8_t\)\s*\*\s*(\d+)",
                                          text["cnn.c"]))
    assert counts.get("bias", None) is None and bias == 0 or counts["bias"].words == bias
    sample = sum(len(_macro(text["sampledata.h"], m))
                 for m in re.findall(r"#define\s+(SAMPLE_INPUT_\d+)", text["sampledata.h"]))
    fifo = "--fifo" in pipeline.cli_options(pipeline.case_json(name)["vendor_args"])
    assert (counts["input"].fifo_words if fifo else counts["input"].words) == sample
    unload = int(re.search(r"ml_data\[(\d+)\]", text["main.c"]).group(1))
    assert counts["unload"].words == unload

    report = json.loads((project / "report.json").read_text())["phases"]
    rows = {p["name"]: p for p in report["phases"]}
    assert rows["weights"]["cycles"] == counts["weights"].words * CPU_STORE_CYCLES
    per_word = FIFO_WORD_CYCLES if fifo else CPU_STORE_CYCLES
    assert rows["input"]["cycles"] == sample * per_word
    assert rows["input"]["how"] == ("fifo" if fifo else "cpu")
    assert rows["unload"]["how"] == ("mlator" if "--mlator" in extra else "cpu")
    timed = [r for r in report["phases"] if r["us"] is not None and r["per_inference"]]
    assert report["dominant"] == max(timed, key=lambda r: r["us"])["name"]
    assert any("Bell Labs" in line for line in report["model"])


def test_inference_time_follows_the_clock_options(tmp_path: Path) -> None:
    """The same inference at the PLL rate (200 MHz) and from the APB clock (60 MHz)."""
    fast = _convert("ai87-kws20_v3_1", tmp_path / "fast")
    slow = _convert("ai87-kws20_v3_1", tmp_path / "slow", "--no-pll")
    rows = []
    for project in (fast, slow):
        phases = json.loads((project / "report.json").read_text())["phases"]["phases"]
        rows.append(next(p for p in phases if p["name"] == "inference"))
    assert rows[0]["cycles"] == rows[1]["cycles"]
    assert (rows[0]["clock_mhz"], rows[1]["clock_mhz"]) == (200, 60)
    assert rows[1]["us"] == pytest.approx(rows[0]["us"] * 200 / 60, rel=1e-3)
