"""The layer count register's start field (issue 36 item 3): a project that programs
start = s runs layers s..last on the model, as the MAX78002 does; on the MAX78000, which
has no start field (the vendor tool refuses --start-layer there), a non-zero start is
not modelled rather than silently run from layer 0.

Built from a real generated project (three convolutions converted by onnx2ai8x) whose
layer count stores are changed by hand in cnn.c.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ai8xsim.device import DEVICES
from ai8xsim.verify import NOT_MODELLED, PASS, execute

torch = pytest.importorskip("torch")

_STORE = re.compile(r"(\*\(\(volatile uint32_t \*\) 0x([0-9a-f]{8})\) = )0x([0-9a-f]{8});")


def _network(device: str):
    """Three 3x3 convolutions on a 4x8x8 input, quantized, as an onnx2ai8x Network."""
    from torch import nn

    import ai8x_torch as ai8x
    from ai8x_torch.export import to_network

    ai8x.set_device(87 if device == "MAX78002" else 85, simulate=False, round_avg=False,
                    verbose=False)
    torch.manual_seed(3)
    model = nn.Sequential(ai8x.FusedConv2dReLU(4, 8, 3, padding=1),
                          ai8x.FusedConv2dReLU(8, 8, 3, padding=1),
                          ai8x.Conv2d(8, 4, 3, padding=1))
    ai8x.quantize_model(model)
    network, _ = to_network(model, torch.zeros(1, 4, 8, 8), device=device)
    return network


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """The generated project of each device, converted once for the module."""
    import onnx2ai8x.api as api

    made: dict[str, Path] = {}

    def get(device: str) -> Path:
        if device not in made:
            made[device] = tmp_path_factory.mktemp(device) / "proj"
            api.convert(_network(device), device, made[device])
        return made[device]

    return get


def _with_start(project: Path, tmp_path: Path, start: int) -> Path:
    """A copy of `project` whose layer count stores (every quadrant) start at `start`."""
    dev = DEVICES[_device_of(project)]
    lcnt = {dev.ctl(g, dev.reg_lcnt_max) for g in range(4)}
    target = tmp_path / f"start{start}"
    shutil.copytree(project, target)
    path = target / "cnn.c"
    changed = 0

    def edit(m: re.Match) -> str:
        nonlocal changed
        if int(m.group(2), 16) not in lcnt:
            return m.group(0)
        changed += 1
        value = int(m.group(3), 16) & ~0xFF00 | start << 8
        return f"{m.group(1)}0x{value:08x};"

    path.write_text(_STORE.sub(edit, path.read_text()))
    assert changed >= 1, "no layer count store in cnn.c"
    return target


def _device_of(project: Path) -> str:
    return "MAX78002" if "MAX78002" in (project / "cnn.c").read_text() else "MAX78000"


@pytest.mark.parametrize("device", ["MAX78002", "MAX78000"])
def test_unchanged_project_runs_every_layer(projects, device) -> None:
    path = projects(device)
    outcome = execute(path)
    assert outcome.verdict == PASS, outcome.error
    assert [r.regs.index for r in outcome.layers] == [0, 1, 2]


@pytest.mark.parametrize("start", [1, 2])
def test_start_field_chooses_the_first_layer(projects, tmp_path, start) -> None:
    path = projects("MAX78002")
    base = execute(path)
    moved = execute(_with_start(path, tmp_path, start))
    assert moved.error is None and not moved.unmodelled
    assert [r.regs.index for r in moved.layers] == list(range(start, 3))
    # the skipped layers did not write: the last layer now reads whatever its input
    # memory held, so the known answer (computed from layer 0 on) no longer holds
    assert not moved.passed
    assert moved.mismatches
    last_base, last_moved = base.layers[-1], moved.layers[-1]
    assert (last_base.value != last_moved.value).any()


def test_max78000_refuses_a_start_field(projects, tmp_path) -> None:
    path = projects("MAX78000")
    outcome = execute(_with_start(path, tmp_path, 1))
    assert outcome.verdict == NOT_MODELLED
    assert "starts the run at layer 1" in outcome.unmodelled
    assert "MAX78000" in outcome.unmodelled
