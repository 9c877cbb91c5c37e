"""Where the time goes (issue 29): the load counts are the words the generated C writes.

The report takes each phase's words from the values the emitter laid out
(emit/project.PhaseWords). Here the same numbers are taken from the project's text:
the kernel stream's run lengths in weights.h, the byte counts of the bias copies, the
register stores of cnn_configure, the SAMPLE_INPUT_n tables (each word is copied or
pushed once), and the words the written cnn_unload() reads when the virtual
accelerator runs it (ai8xsim/unload.py).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ai8xsim.unload import run_unload
from onnx2ai8x.phases import CPU_STORE_CYCLES, FIFO_WORD_CYCLES
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
    report = json.loads((project / "report.json").read_text())["phases"]
    rows = {p["name"]: p for p in report["phases"]}
    text = {p.name: p.read_text() for p in project.iterdir() if p.suffix in (".c", ".h")}
    assert rows["weights"]["words"] == _kernel_words(text["weights.h"])
    bias = sum(int(n) for n in re.findall(r"memcpy_8to32\([^;]*sizeof\(uint8_t\)\s*\*\s*(\d+)",
                                          text["cnn.c"]))
    assert rows["bias"]["words"] == bias
    configure = re.search(r"int cnn_configure\(void\)\n\{(.*?)\n\}", text["cnn.c"], re.S)
    assert rows["configure"]["words"] == len(re.findall(r"\) (?:=|\|=|&=) 0x",
                                                        configure.group(1)))
    sample = sum(len(_macro(text["sampledata.h"], m))
                 for m in re.findall(r"#define\s+(SAMPLE_INPUT_\d+)", text["sampledata.h"]))
    fifo = "--fifo" in pipeline.cli_options(pipeline.case_json(name)["vendor_args"])
    assert rows["input"]["words"] == sample
    assert rows["unload"]["words"] == run_unload(project).words
    assert rows["weights"]["cycles"] == rows["weights"]["words"] * CPU_STORE_CYCLES
    per_word = FIFO_WORD_CYCLES if fifo else CPU_STORE_CYCLES
    assert rows["input"]["cycles"] == sample * per_word
    assert rows["input"]["how"] == ("fifo" if fifo else "cpu")
    # the mlator only where cnn_unload uses it (a 32-bit output is read word by word)
    assert rows["unload"]["how"] == ("mlator" if "mlat" in text["cnn.c"] else "cpu")
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
