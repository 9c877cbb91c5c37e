"""A golden case's Placement (and options) for emission tests.

The case's sidecar (`network.yaml`) and checkpoint go through the project's own resolver,
which reproduces case.json's `layers` field by field (tests/golden/test_golden_resolve.py);
the Placement carries the Network with integer weights and bias.
"""
from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path

from onnx2ai8x.options import EmitOptions
from onnx2ai8x.placement import Placement


@cache
def _resolved(case_dir: str):
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.sidecar.izer import resolve_project

    case = Path(case_dir)
    device = get_device(json.loads((case / "case.json").read_text())["device"])
    return resolve_project(case / "network.yaml", case / "checkpoint.pth.tar", device,
                           case / "sample.npy")


def case_placement(case_dir: Path | str) -> Placement:
    """The case placed as its sidecar says (Network inside, with weights)."""
    from onnx2ai8x.sidecar.resolve import to_placement

    return to_placement(_resolved(str(case_dir)))


def case_options(case_dir: Path | str) -> EmitOptions:
    """The case's vendor_args as EmitOptions, plus the sidecar's global `snoop` values."""
    case = Path(case_dir)
    args = json.loads((case / "case.json").read_text())["vendor_args"]
    options = EmitOptions.from_vendor_args(args)
    snoop = _resolved(str(case)).sidecar.snoop
    if snoop is not None:
        options = dataclasses.replace(options, snoop=tuple(snoop))
    return options
