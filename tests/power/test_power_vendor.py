"""Each power, clock and run-mode option does what the vendor tool's does (issue 29).

For a golden case with its sidecar, checkpoint, sample and options, the vendor tool (a
local installation; nothing it writes is kept, its projects live in pytest's temporary
directory) and the converter each write the project without and with the option. Then:

- c2trace: our project with the option equals the vendor's with the option (register
  writes, kernels, bias, input, known answer, unload);
- structure (cstructure): the statements the option adds to and removes from main(),
  fail(), the interrupt handler and cnn_start() are the vendor's, in order; with
  --energy the power monitor's hook macros are the vendor's;
- the project passes its known-answer test on the virtual accelerator.

Opt-in and slow like tests/ai8xsim/test_vendor_projects.py (--golden-all or
ONNX2AI8X_VENDOR_PROJECTS); skipped when the vendor tool is absent.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ai8xsim.verify import execute, render
from tests.ai8xsim.test_vendor_projects import vendor_project, vendor_tool  # noqa: F401
from tests.golden import pipeline
from tests.power.cstructure import changes, hooks, structure

ZOO = ("ai85-mnist", "ai85-cifar-10", "ai85-kws20_v3", "ai85-cats-dogs", "ai87-cats-dogs",
       "ai87-kws20_v3_1")
AI87_ZOO = ("ai87-cats-dogs", "ai87-kws20_v3_1")

# (case, option, the options of the project it is compared against)
OPTION_CASES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    *[(c, ("--energy",), ()) for c in ZOO],
    *[(c, ("--no-wfi",), ()) for c in ZOO],
    *[(c, ("--forever",), ()) for c in ZOO],
    *[(c, ("--powerdown",), ()) for c in ZOO],
    *[(c, ("--clock-divider", "2"), ()) for c in ("ai85-mnist", "ai85-cats-dogs")],
    *[(c, opt, ()) for c in AI87_ZOO for opt in (
        ("--pipeline",), ("--no-pipeline",), ("--pll",), ("--no-pll",), ("--max-speed",),
        ("--balance-speed",), ("--clock-divider", "2"), ("--no-pll", "--no-pipeline"),
        ("--no-pipeline", "--clock-divider", "8"))],
    ("ai85-cats-dogs", ("--no-fifo-wait",), ()),
    ("ai85-suite-fifostream-pool-stride-hwc", ("--no-fifo-wait",), ()),
    ("ai87-suite-fifostream-hd8-chw", ("--fifo-go",), ()),
    ("ai87-suite-fifostream-hd8-tall-hwc", ("--fifo-go",), ()),
    ("ai87-suite-multipass5m8", ("--one-shot",), ()),
    ("ai85-mnist", ("--energy", "--fifo"), ("--fifo",)),
    ("ai85-mnist", ("--riscv", "--riscv-debug"), ("--riscv",)),
    ("ai85-mnist", ("--riscv", "--riscv-exclusive"), ("--riscv",)),
    ("ai85-mnist", ("--riscv", "--riscv-cache"), ("--riscv",)),
    ("ai85-mnist", ("--riscv", "--riscv-flash"), ("--riscv",)),
    ("ai85-mnist", ("--riscv", "--deepsleep"), ("--riscv",)),
    ("ai85-mnist", ("--riscv", "--no-wfi"), ("--riscv",)),
    # quad fan-out against the single fan-out: the zoo networks whose input the fast FIFO
    # takes (at most 4 channels HWC, 1 CHW; the kws20 networks' 128 are refused by both
    # tools), and a streaming suite case
    *[(c, ("--riscv", "--fast-fifo-quad"), ("--riscv", "--fast-fifo")) for c in (
        "ai85-mnist", "ai85-cifar-10", "ai85-cats-dogs", "ai87-cats-dogs",
        "ai85-suite-fifostream-32-hwc")],
]

# Our dual-core Arm half waits for the RISC-V core in a loop on its done flag
# (`while (!riscv_done) <sleep>`); the vendor's sleeps once, or spins on the flag with
# --no-wfi. Both are brought to one form: the sleep call, or `spin`.
def _arm_half(statement: str, ours: bool) -> str | None:
    if ours and statement.startswith("while(!riscv_done)"):
        return statement[len("while(!riscv_done)"):] or "spin"
    if not ours and statement == "while(riscv_done==0)":
        return "spin"
    if not ours and statement == "riscv_done=0":
        return None
    return statement


def _normalized(change: dict, ours: bool) -> dict:
    out = {}
    for name, (removed, added) in change.items():
        if name == "main":
            removed = tuple(x for x in (_arm_half(s, ours) for s in removed) if x)
            added = tuple(x for x in (_arm_half(s, ours) for s in added) if x)
        out[name] = (removed, added)
    return out


# the projects without the option, shared by the options compared on the same case
_BASES: dict[tuple[str, tuple[str, ...]], tuple[Path, Path]] = {}


def _bases(name: str, base: tuple[str, ...], factory: pytest.TempPathFactory
           ) -> tuple[Path, Path]:
    key = (name, base)
    if key not in _BASES:
        tmp = factory.mktemp("base")
        theirs, log = vendor_project(name, tmp / "v", base)
        assert theirs is not None, log
        _BASES[key] = (theirs, _ours(name, tmp / "o", base))
    return _BASES[key]


def _ours(name: str, tmp: Path, extra: tuple[str, ...]) -> Path:
    work = tmp / "work"
    work.mkdir(parents=True, exist_ok=True)
    project, proc = pipeline.convert_case(name, work, sidecar=True, extra=extra,
                                          out=tmp / "project")
    assert proc.returncode == 0, proc.stderr
    return project


@pytest.mark.parametrize(("name", "option", "base"), OPTION_CASES,
                         ids=[f"{n}[{' '.join(o)}]" for n, o, _ in OPTION_CASES])
def test_option_equals_the_vendors(name: str, option: tuple[str, ...], base: tuple[str, ...],
                                   tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                                   vendor_tool) -> None:  # noqa: F811
    theirs0, ours0 = _bases(name, base, tmp_path_factory)
    theirs1, log = vendor_project(name, tmp_path / "v1", option)
    assert theirs1 is not None, log
    ours1 = _ours(name, tmp_path / "o1", option)
    compare = subprocess.run([sys.executable, str(pipeline.C2TRACE), "compare", str(ours1),
                              str(theirs1)], capture_output=True, text=True, timeout=300)
    assert compare.returncode == 0, compare.stdout[-2000:]
    vendor_change = changes(structure(theirs0), structure(theirs1))
    our_change = changes(structure(ours0), structure(ours1))
    if "--riscv" in option:
        vendor_change, our_change = _normalized(vendor_change, False), \
            _normalized(our_change, True)
    assert our_change == vendor_change
    if "--energy" in option:
        assert hooks(ours1) == hooks(theirs1)
    outcome = execute(ours1)
    assert outcome.passed, render(outcome)
