"""The vendor suite's snoop configurations that are not golden cases, against the vendor
tool run here (skipped without it): import-izer then convert with the sidecar is
register-exact with the vendor's project, and the imported model computes the vendor's
known answer, also where the sidecar states a `simulated_sequence` (seed 004).

The suite runs them with its own synthetic weights; a golden case of the same dataset
and the same layers (apart from their sequence keys) holds those weights as a
checkpoint, and its sample, so both tools get the same inputs.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.ai8xsim.differential import (
    SYNTH,
    our_project,
    same_registers,
    vendor_available,
    vendor_project,
)
from tests.conftest import GOLDEN

pytest.importorskip("torch")

SEQUENCE_KEYS = {"name", "next_sequence", "simulated_sequence", "snoop_sequence"}


def _shape(config: dict) -> tuple:
    return (config.get("dataset"), [{k: v for k, v in lay.items() if k not in SEQUENCE_KEYS}
                                    for lay in config["layers"]])


def held_out() -> list[tuple[str, str]]:
    """(suite configuration, golden case holding its weights), for each vendor suite
    snoop configuration without a golden case of its own."""
    suite = SYNTH / "tests"
    if not suite.is_dir() or not GOLDEN.is_dir():
        return []
    golden = {}
    for path in sorted(GOLDEN.glob("ai87-suite-snoop*/network.yaml")):
        golden.setdefault(repr(_shape(yaml.safe_load(path.read_text()))), path.parent.name)
    out = []
    for path in sorted(suite.glob("test-snoop*.yaml")):
        name = path.stem.removeprefix("test-")
        if (GOLDEN / f"ai87-suite-{name}").is_dir():
            continue
        twin = golden.get(repr(_shape(yaml.safe_load(path.read_text()))))
        if twin is not None:
            out.append((name, twin))
    return out


CASES = held_out()


def test_the_held_out_configurations_are_found() -> None:
    if not vendor_available() or not GOLDEN.is_dir():
        pytest.skip("vendor synthesis tool or golden corpus absent")
    assert len(CASES) >= 8
    assert sum("simulated_sequence" in (SYNTH / "tests" / f"test-{name}.yaml").read_text()
               for name, _ in CASES) >= 3


_ABSENT = pytest.param("", "", marks=pytest.mark.skip(
    reason="vendor synthesis tool or golden corpus absent"))


@pytest.mark.parametrize(("name", "twin"), CASES or [_ABSENT])
def test_held_out_snoop_configuration(name: str, twin: str, tmp_path: Path) -> None:
    if not vendor_available():
        pytest.skip("vendor synthesis tool or c2trace absent")
    from onnx2ai8x.devices import MAX78002
    from onnx2ai8x.sidecar.izer import import_project, resolve_project
    from tests.golden.pipeline import trace_of
    from tests.golden.test_golden_import import _compare, checked_layers, layout_output

    sidecar = tmp_path / "network.yaml"
    # the golden checkpoints are saved under the suite's arch `synthetic`
    sidecar.write_text((SYNTH / "tests" / f"test-{name}.yaml").read_text()
                       .replace("arch: test", "arch: synthetic"))
    files = (sidecar, GOLDEN / twin / "checkpoint.pth.tar", GOLDEN / twin / "sample.npy")
    vendor, why = vendor_project(files, "MAX78002", tmp_path / "vendor")
    assert vendor is not None, why
    ours, why = our_project(files, "MAX78002", tmp_path / "ours")
    assert ours is not None, why
    same, diff = same_registers(ours, vendor)
    assert same, diff

    # the imported model's outputs, laid out as the accelerator writes them, are the
    # vendor's known answer
    import custom_ops

    resolved = resolve_project(files[0], files[1], MAX78002, files[2])
    session = custom_ops.session(import_project(files[0], files[1], MAX78002, files[2]))
    x = np.load(files[2])[np.newaxis].astype(np.int8)
    outputs = session.run(None, {session.get_inputs()[0].name: x})
    layers = checked_layers(sidecar, resolved)
    assert len(outputs) == len(layers)
    words: dict[int, int] = {}
    for lay, out in zip(layers, outputs, strict=True):
        values = np.asarray(out, dtype=np.int64).reshape(lay.output_channels,
                                                         *lay.output_dim)
        words.update(layout_output(values, "MAX78002", lay.out_offset,
                                   lay.output_processor_map, lay.output_width,
                                   lay.write_gap))
    expected = trace_of(vendor)["expected_output"]
    assert expected and _compare(expected, words) == []
