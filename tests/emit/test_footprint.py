"""A project whose firmware would not fit the part is refused before it is written
(issue 27 item 7), with the known-answer options as the fix, unless --allow-oversize."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from onnx2ai8x import api
from onnx2ai8x.devices import MAX78000
from onnx2ai8x.emit.footprint import estimate, project_files
from onnx2ai8x.errors import EXIT_INVALID, Ai8xError

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "examples" / "digits" / "digits.onnx"
pytestmark = pytest.mark.skipif(not DIGITS.is_file(), reason="examples absent")


def test_the_estimate_counts_the_arrays_by_their_element_size():
    files = {
        "weights.h": b"#define KERNELS { \\\n 0x1, 0x2, 0x3, \\\n 0x4 }\n"
                     b"#define BIAS_0 { 0x01, 0x02 }\n",
        "sampledata.h": b"#define SAMPLE_INPUT_0 { 1, 2, 3 }\n",
        "cnn.c": b"static const uint32_t kernels[] = KERNELS;\n"
                 b"static const uint8_t bias_0[] = BIAS_0;\nint f(void) { return 0; }\n",
        "main.c": b"static const uint32_t input_0[] = SAMPLE_INPUT_0;\n"
                  b"static uint32_t ml_data[10];\n",
    }
    fp = estimate(files, MAX78000)
    assert (fp.weights, fp.known_answer, fp.other_flash) == (4 * 4 + 2, 3 * 4, 0)
    assert fp.sram == MAX78000.firmware_sram_bytes + 40
    assert fp.code == MAX78000.firmware_code_bytes + 9 * 5 // 2  # five statements


def test_a_project_that_does_not_fit_is_refused_unless_asked(tmp_path):
    fits = api.convert(DIGITS, MAX78000, tmp_path / "fits")
    need = estimate(project_files(fits.output), MAX78000)
    slim = api.convert(DIGITS, MAX78000, tmp_path / "slim", no_kat=True)
    without_kat = estimate(project_files(slim.output), MAX78000)
    # (the sample input stays: main still runs one inference on it)
    assert without_kat.known_answer < need.known_answer
    assert without_kat.flash < need.flash
    # a part just too small for the known answer
    small = dataclasses.replace(MAX78000, flash_bytes=need.flash - 1)
    with pytest.raises(Ai8xError) as err:
        api.convert(DIGITS, small, tmp_path / "over")
    assert err.value.code == "emit.firmware-size" and err.value.exit_code == EXIT_INVALID
    text = err.value.diagnostics[0].render()
    assert "--max-checklines" in text and "--no-kat" in text and "--allow-oversize" in text
    assert f"{need.flash:,}" in text
    assert not (tmp_path / "over").exists()  # nothing written
    # the fix the message names works, and so does writing it anyway
    api.convert(DIGITS, small, tmp_path / "no-kat", no_kat=True)
    api.convert(DIGITS, small, tmp_path / "anyway", allow_oversize=True)
    assert (tmp_path / "anyway" / "cnn.c").is_file()
