"""Execute a project on the functional model and check its own known answer."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .creader import Call, Check, CReadError, Unload, Write, read_project
from .device import DEVICES
from .engine import LayerResult, run
from .machine import Machine, SimError


@dataclass(frozen=True)
class Mismatch:
    address: int
    expected: int
    actual: int
    mask: int


@dataclass
class Outcome:
    """The result of `verify_project`."""

    device: str
    passed: bool
    error: str | None = None
    checked_words: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    layers: list[LayerResult] = field(default_factory=list)
    unloaded: list[int] = field(default_factory=list)
    machine: Machine | None = None
    first_bad_layer: tuple[int, Mismatch] | None = None


def execute(directory: str | Path) -> Outcome:
    """Read the project, run it; the outcome of its known-answer check."""
    try:
        project = read_project(directory)
    except CReadError as exc:
        return Outcome("?", False, error=str(exc))
    dev = DEVICES[project.device]
    m = Machine(dev)
    out = Outcome(project.device, False, machine=m)
    checks = []
    try:
        for op in project.operations:
            if isinstance(op, Write):
                if m.write(op.address, op.value, op.op, op.width):
                    out.layers = run(m)
            elif isinstance(op, Unload):
                for addr, n in op.runs:
                    out.unloaded.extend(m.read(addr + 4 * k) for k in range(n))
            elif isinstance(op, Check):
                checks.append(op)
            elif isinstance(op, Call):
                continue
    except SimError as exc:
        out.error = str(exc)
        return out
    if m.runs == 0:
        out.error = "the project never starts the accelerator (no write sets quadrant 0's " \
                    "enable bit)"
        return out
    if not checks:
        out.error = "the project has no known-answer check (check_output over SAMPLE_OUTPUT)"
        return out
    for chk in checks:
        for addr, mask, words in chk.groups:
            for k, want in enumerate(words):
                a = addr + 4 * k
                got = m.read(a)
                out.checked_words += 1
                if (got & mask) != (want & mask):
                    out.mismatches.append(Mismatch(a, want & mask, got & mask, mask))
    out.passed = not out.mismatches
    return out


def written_by(outcome: Outcome, address: int) -> int | None:
    """The last layer that wrote the word at `address`, or None."""
    m = outcome.machine
    if m is None:
        return None
    loc = m.dev.sram_locate(address)
    if loc is None:
        return None
    for res in reversed(outcome.layers):
        if np.any((res.memory == loc[0]) & (res.word == loc[1])):
            return res.regs.index
    return None
