"""The phase table's unload is the words the written cnn_unload() reads (issue 35 item 4).

The virtual accelerator runs the generated function (ai8xsim/unload.py) and counts
every read, loops and the mlator's priming reads included; the report must state the
same number whatever form the unload takes (word copies, byte unpacking, loops, the
mlator). Before, an unload that read in a loop or unpacked bytes reported 0 words.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ai8xsim.unload import run_unload
from onnx2ai8x import api
from tests.conftest import GOLDEN, golden_params
from tests.golden import pipeline
from tests.legalize.builders import conv2d, network


def _unload_row(project: Path) -> dict:
    phases = json.loads((project / "report.json").read_text())["phases"]["phases"]
    return next(p for p in phases if p["name"] == "unload")


def _check(project: Path) -> None:
    row = _unload_row(project)
    ran = run_unload(project)
    assert ran.words > 0
    assert row["words"] == ran.words
    assert row["cycles"] == ran.words * 27
    mlator = "mlat" in (project / "cnn.c").read_text()
    assert row["how"] == ("mlator" if mlator else "cpu")


def _convert_case(name: str, tmp: Path, *extra: str) -> Path:
    if not (GOLDEN / name).is_dir():
        pytest.skip("golden corpus absent")
    pytest.importorskip("torch")  # import-izer reads the checkpoint
    project, proc = pipeline.convert_case(name, tmp, sidecar=True, extra=extra)
    assert proc.returncode == 0, proc.stderr
    return project


@pytest.mark.parametrize("name", golden_params())
def test_unload_words_are_what_cnn_unload_reads(name: str, tmp_path: Path) -> None:
    _check(_convert_case(name, tmp_path))


@pytest.mark.parametrize("name", ["ai87-suite-snoop2-skip", "ai85-suite-conv1d-abs"])
def test_unload_words_through_the_mlator(name: str, tmp_path: Path) -> None:
    _check(_convert_case(name, tmp_path, "--mlator"))


def test_a_looped_byte_unload_is_counted(tmp_path: Path) -> None:
    """The issue's example: a 16x16x16 8-bit output on MAX78002 (a loop of byte-wise
    reads) printed `unload cpu 0 0`; it reads one word per pixel and group of four
    channels: 16 x 16 x 16 / 4."""
    net = network(conv2d("c0", cin=3, cout=16, dim=16))
    out = tmp_path / "p"
    result = api.convert(net, "MAX78002", out)
    _check(out)
    assert _unload_row(out)["words"] == 16 * 16 * 16 // 4
    line = next(ln for ln in result.summary.splitlines() if ln.split()[:1] == ["unload"])
    assert line.split()[1:3] == ["cpu", "1,024"]
