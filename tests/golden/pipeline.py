"""Helpers for whole-pipeline golden tests: vendor project -> ONNX -> C project."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import yaml

from tests.conftest import GOLDEN

C2TRACE = GOLDEN.parent / "tools" / "c2trace.py"

# vendor_args that only add timing, logging or power-measurement code (golden README)
DISPLAY_ONLY = {"--verbose", "--display-checkpoint", "--energy"}
WITH_VALUE = {"--timer", "--boost", "--max-checklines"}


def cli_options(vendor_args: list[str]) -> list[str]:
    """The converter's options for a case's vendor_args (same spelling as the vendor's)."""
    out: list[str] = []
    i = 0
    while i < len(vendor_args):
        arg = vendor_args[i]
        if arg in WITH_VALUE:
            out += [arg, vendor_args[i + 1]]
            i += 2
            continue
        if arg not in DISPLAY_ONLY:
            out.append(arg)
        i += 1
    return out


def case_json(name: str) -> dict:
    return json.loads((GOLDEN / name / "case.json").read_text())


def expected_trace(name: str) -> dict:
    with gzip.open(GOLDEN / name / "expected.json.gz", "rt") as handle:
        return json.load(handle)


@cache
def _imported_bytes(name: str) -> bytes:
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.sidecar.izer import import_project

    case = GOLDEN / name
    model = import_project(case / "network.yaml", case / "checkpoint.pth.tar",
                           get_device(case_json(name)["device"]), case / "sample.npy")
    return model.SerializeToString()


def imported_model(name: str, directory: Path) -> Path:
    """The case imported into ai8x-ONNX (sidecar + checkpoint), written to `directory`."""
    path = directory / f"{name}.onnx"
    path.write_bytes(_imported_bytes(name))
    return path


def convert(model: Path, device: str, out: Path, *extra: str,
            quiet: bool = True) -> subprocess.CompletedProcess:
    """Run the converter as a user does: a separate process, the main command form.
    --allow-oversize: the golden cases are the vendor's simulation tests, written whether
    or not their firmware fits the part (two burn-in cases need about 115 % of the
    MAX78000's flash for their known answer). `quiet`: errors only (--quiet); without
    it, warnings too."""
    return subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(model),
                           "--device", device, "-o", str(out),
                           *(("--quiet",) if quiet else ()), "--allow-oversize", *extra],
                          capture_output=True, text=True, timeout=600)


def convert_case(name: str, tmp: Path, *, sidecar: bool, options: bool = True,
                 extra: tuple[str, ...] = (), out: Path | None = None,
                 quiet: bool = True) -> tuple[Path, subprocess.CompletedProcess]:
    """Import golden case `name` and convert it as a user does: with the case's
    network.yaml (`sidecar`) or mapped automatically, its sample, and (`options`) its
    vendor_args as converter options. Returns the project directory and the process."""
    case = case_json(name)
    model = imported_model(name, tmp)
    out = out if out is not None else tmp / "project"
    args = ["--sample-input", str(GOLDEN / name / "sample.npy")]
    if sidecar:
        args += ["--sidecar", str(GOLDEN / name / "network.yaml")]
    if options:
        args += cli_options(case["vendor_args"])
    return out, convert(model, case["device"], out, *args, *extra, quiet=quiet)


def c2trace_compare(project: Path, expected: dict, tmp: Path) -> subprocess.CompletedProcess:
    ref = tmp / "expected.json"
    ref.write_text(json.dumps(expected))
    return subprocess.run([sys.executable, str(C2TRACE), "compare", str(project), str(ref)],
                          capture_output=True, text=True, timeout=300)


def trace_of(project: Path) -> dict:
    proc = subprocess.run([sys.executable, str(C2TRACE), str(project)], capture_output=True,
                          text=True, timeout=300, check=True)
    return json.loads(proc.stdout)


def copy_case_file(name: str, file: str, tmp: Path) -> Path:
    target = tmp / file
    shutil.copy(GOLDEN / name / file, target)
    return target


def stated_order(name: str) -> tuple[int, ...]:
    """The layer order a case's sidecar states for its known answer: from layer 0, each
    layer's `simulated_sequence` (a layer number or `stop`), else `next_sequence`, else
    the next layer (seed 004). The snoop cases insert no hardware layers, so sidecar and
    hardware layer numbers agree."""
    return stated_order_of(GOLDEN / name / "network.yaml")


def stated_order_of(sidecar: Path) -> tuple[int, ...]:
    """`stated_order` of a sidecar file."""
    layers = yaml.safe_load(sidecar.read_text())["layers"]
    order: list[int] = []
    ll = 0
    while ll < len(layers) and ll not in order:
        order.append(ll)
        nxt = layers[ll].get("simulated_sequence", layers[ll].get("next_sequence", ll + 1))
        if nxt in ("stop", -1):
            break
        ll = int(nxt)
    return tuple(order)
