"""A project that uses the MAX78002's snoop units gets NOT MODELLED, never PASS or FAIL,
unless the layer order its known answer assumes is stated.

The snoop units can stop the inference or branch to another layer on what they see in the
memory traffic; nothing public says what they match, so the layers such a project runs are
unknown. verify refuses it with its own verdict and exit code (3), naming the registers,
whether the project writes the snoop registers, sets their CTRL enable, or both. With
`--layer-order` (and from `convert --verify`, the sidecar's `simulated_sequence` path) it
runs the stated layers in the stated order, checks what the registers fix of that order,
and says the verdict holds for that order only.
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
from ai8xsim.engine import LayerOrderError
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


def test_verify_command_names_the_way_out(project: Path) -> None:
    proc = _cli("verify", str(project))
    assert proc.returncode == 3
    assert "--layer-order" in proc.stdout


SKIP = "ai87-suite-snoop2-skip"  # in the default subset: layer 0 jumps to layer 3


@pytest.fixture(scope="module")
def skip_project(tmp_path_factory) -> Path:
    out, proc = pipeline.convert_case(SKIP, tmp_path_factory.mktemp("skip"), sidecar=True)
    assert proc.returncode == 0, proc.stderr
    return out


def _layer_regs(layer: int, reg: int) -> set[int]:
    return {MAX78002.lreg(g, reg, layer) for g in range(4)}


def test_stated_order_runs_those_layers_only(skip_project: Path, tmp_path: Path) -> None:
    """Along 0 -> 3 layers 1 and 2 never run: a row less for layer 1 changes nothing, a
    row less for layer 3 (the layer the known answer reads) fails the known answer."""
    outcome = execute(skip_project, layer_order=(0, 3))
    assert outcome.verdict == PASS, render(outcome)
    assert [r.regs.index for r in outcome.layers] == [0, 3]
    assert outcome.assumed_order == (0, 3)
    assert "assuming the layer order 0 -> 3" in render(outcome)
    for layer, verdict in ((1, PASS), (3, FAIL)):
        shorter = _edit_stores(skip_project, tmp_path / f"l{layer}",
                               _layer_regs(layer, MAX78002.rcnt), lambda v: v - 1)
        assert execute(shorter, layer_order=(0, 3)).verdict == verdict, layer


def test_the_other_branch_gives_another_answer(skip_project: Path) -> None:
    """The order decides the answer: the sequential path 0-1-2-3 is allowed by the
    registers but is not the path the known answer was computed on."""
    outcome = execute(skip_project, layer_order=(0, 1, 2, 3))
    assert outcome.verdict == FAIL
    assert [r.regs.index for r in outcome.layers] == [0, 1, 2, 3]


@pytest.mark.parametrize(("order", "why"), [
    ((), "must begin with 0"),
    ((1, 2, 3), "must begin with 0"),
    ((0, 2), "layer 2 cannot follow layer 0: the next layer is 1 or 3"),
    ((0, 3, 4), "past the layer count register (last layer 3)"),
    ((0, 1, 3), "layer 3 cannot follow layer 1: the next layer is 2 (it has no"),
    ((0, 1) * 300, "600 layers stated; at most 512 are run"),
])
def test_orders_the_registers_cannot_give_are_refused(skip_project: Path, order,
                                                      why: str) -> None:
    with pytest.raises(LayerOrderError, match=re.escape(why)):
        execute(skip_project, layer_order=order)


def test_a_stop_bit_ends_the_order(skip_project: Path, tmp_path: Path) -> None:
    stopped = _edit_stores(skip_project, tmp_path, _layer_regs(0, MAX78002.nxtlyr),
                           lambda v: 1 << 8)
    with pytest.raises(LayerOrderError, match="layer 0 has its stop bit set"):
        execute(stopped, layer_order=(0, 3))
    assert execute(stopped, layer_order=(0,)).layers[0].regs.index == 0


def test_without_snoop_units_the_order_is_the_registers(project: Path,
                                                        tmp_path: Path) -> None:
    """A project without snoop programming runs its registers' order; a stated order
    must be that one (and then adds no assumption to the verdict)."""
    plain = _edit_stores(project, tmp_path, SNOOP, lambda v: 0)
    plain = _edit_stores(plain, tmp_path / "both", CTL, lambda v: v & ~(1 << 7))
    outcome = execute(plain, layer_order=(0, 1))
    assert outcome.verdict in (PASS, FAIL) and outcome.assumed_order is None
    assert "assuming" not in render(outcome)
    with pytest.raises(LayerOrderError, match=r"registers' \(0, 1\)"):
        execute(plain, layer_order=(0,))


def test_verify_command_with_layer_order(skip_project: Path) -> None:
    proc = _cli("verify", str(skip_project), "--layer-order", "0,3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("PASS: MAX78002, 2 layers")
    assert "assuming the layer order 0 -> 3" in proc.stdout
    data = json.loads(_cli("verify", str(skip_project), "--layer-order", "0, 3",
                           "--json").stdout)
    assert data["assumed_layer_order"] == [0, 3] and data["verdict"] == "PASS"
    proc = _cli("verify", str(skip_project), "--layer-order", "0,1,2,3")
    assert proc.returncode == 1 and "assuming the layer order 0 -> 1 -> 2 -> 3" in proc.stdout
    for bad, message in (("0;3", "expected layer numbers separated by commas"),
                         ("0,,3", "expected layer numbers separated by commas"),
                         ("-1", "expected layer numbers separated by commas"),
                         ("0,2", "layer 2 cannot follow layer 0")):
        proc = _cli("verify", str(skip_project), "--layer-order", bad)
        assert proc.returncode == 2, (bad, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("error[usage.layer-order]") and message in proc.stderr
        assert "Traceback" not in proc.stderr


def test_convert_verify_runs_the_sidecars_path(tmp_path: Path) -> None:
    """convert knows the order the known answer assumes (the sidecar's
    `simulated_sequence`) and verifies along it."""
    out, proc = pipeline.convert_case(SKIP, tmp_path, sidecar=True, extra=("--verify",))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verify assumed the layer order 0 -> 3" in proc.stderr  # even with --quiet
    assert (out / "cnn.c").is_file()
