"""A project that uses the MAX78002's snoop units gets NOT MODELLED, never PASS or FAIL.

The snoop units can stop the inference or branch to another layer on what they see in the
memory traffic; nothing public says what they match, so the layers such a project runs are
unknown. verify refuses it with its own verdict and exit code (3), naming the registers,
whether the project writes the snoop registers, sets their CTRL enable, or both.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ai8xsim.device import MAX78002
from ai8xsim.verify import FAIL, NOT_MODELLED, PASS, execute, render
from tests.conftest import GOLDEN
from tests.golden import pipeline

pytestmark = pytest.mark.skipif(not GOLDEN.is_dir(), reason="golden corpus is absent")

CASE = "ai87-suite-snoop2-range"  # in the default subset; programs snoop unit 2


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    out, proc = pipeline.convert_case(CASE, tmp_path_factory.mktemp("snoop"), sidecar=True)
    assert proc.returncode == 0, proc.stderr
    return out


def _edit_stores(project: Path, tmp_path: Path, addresses: set[int], change) -> Path:
    """A copy of `project` whose plain stores to `addresses` store change(value)."""
    target = tmp_path / "changed"
    shutil.copytree(project, target)
    path = target / "cnn.c"
    store = re.compile(r"(\*\(\(volatile uint32_t \*\) (0x[0-9a-f]{8})\) = )(0x[0-9a-f]{8});")
    hits = 0

    def edit(m: re.Match) -> str:
        nonlocal hits
        if int(m.group(2), 16) not in addresses:
            return m.group(0)
        hits += 1
        return f"{m.group(1)}0x{change(int(m.group(3), 16)):08x};"

    path.write_text(store.sub(edit, path.read_text()))
    assert hits, "no store changed"
    return target


CTL = {MAX78002.ctl(g, MAX78002.reg_ctl) for g in range(4)}
SNOOP = {MAX78002.ctl(g, index) for g in range(4) for index, _ in MAX78002.snoop_registers}


def test_snoop_project_is_not_modelled(project: Path) -> None:
    outcome = execute(project)
    assert outcome.verdict == NOT_MODELLED and not outcome.passed
    assert outcome.error is None and outcome.layers == [] and outcome.checked_words == 0
    text = render(outcome)
    assert text.startswith("NOT MODELLED: snoop units (registers SNP2_A1, SNP2_A2, SNP2_D1, "
                           "SNP2_D2, SNP2_C1, SNP2_C2 written; CTRL bit 7 set)")
    assert "the layer order depends on snoop matches" in text
    assert not re.search(r"PASS|FAIL", text)


def test_snoop_registers_without_the_enable_bit(project: Path, tmp_path: Path) -> None:
    changed = _edit_stores(project, tmp_path, CTL, lambda v: v & ~(1 << 7))
    outcome = execute(changed)
    assert outcome.verdict == NOT_MODELLED
    assert "SNP2_A1" in outcome.unmodelled and "CTRL bit 7" not in outcome.unmodelled


def test_enable_bit_without_snoop_registers(project: Path, tmp_path: Path) -> None:
    changed = _edit_stores(project, tmp_path, SNOOP, lambda v: 0)
    outcome = execute(changed)
    assert outcome.verdict == NOT_MODELLED
    assert "CTRL bit 7 set" in outcome.unmodelled and "SNP" not in outcome.unmodelled


def test_without_any_snoop_programming_the_project_runs(project: Path,
                                                        tmp_path: Path) -> None:
    """The refusal keys on the snoop units alone: with their registers and enable cleared,
    the same project runs and is judged."""
    changed = _edit_stores(project, tmp_path, SNOOP, lambda v: 0)
    changed = _edit_stores(changed, tmp_path / "both", CTL, lambda v: v & ~(1 << 7))
    outcome = execute(changed)
    assert outcome.verdict in (PASS, FAIL), render(outcome)
    assert outcome.layers and outcome.checked_words > 0


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", *args],
                          capture_output=True, text=True, timeout=300)


def test_verify_command_exits_3(project: Path, tmp_path: Path) -> None:
    proc = _cli("verify", str(project))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.startswith("NOT MODELLED: snoop units (registers SNP2_A1")
    assert "Traceback" not in proc.stderr
    proc = _cli("verify", str(project), "--json")
    assert proc.returncode == 3
    data = json.loads(proc.stdout)
    assert data["verdict"] == "NOT MODELLED" and data["passed"] is False
    assert data["not_modelled"].startswith("snoop units") and data["error"] is None
    proc = _cli("verify", str(project), "--stop-after", "0", "-o", str(tmp_path / "dump"))
    assert proc.returncode == 3
    assert proc.stderr.startswith("error[verify.not-modelled]")
    assert "not modelled: snoop units" in proc.stderr
    assert not (tmp_path / "dump").exists()


def test_convert_verify_exits_3(tmp_path: Path) -> None:
    out, proc = pipeline.convert_case(CASE, tmp_path, sidecar=True, extra=("--verify",))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "NOT MODELLED: snoop units" in proc.stderr
    assert (out / "cnn.c").is_file()  # the project itself was written
