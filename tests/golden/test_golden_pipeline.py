"""Whole pipeline on the golden corpus, as a user runs it.

vendor project --import-izer--> ai8x-ONNX --onnx2ai8x (separate process)--> C project.

- With the case's network.yaml as --sidecar and its vendor_args, the project's trace
  equals the vendor tool's (c2trace "traces are equal").
- Without a sidecar (automatic mapping), the known-answer values equal the golden values.
"""
from __future__ import annotations

import filecmp
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import GOLDEN, golden_params
from tests.golden import pipeline

pytestmark = pytest.mark.skipif(not GOLDEN.is_dir(), reason="golden corpus absent")

# Cases whose trace is known to differ, with the reason. Keep this list short and honest.
REGISTER_EXCEPTIONS: dict[str, str] = {}


@pytest.mark.parametrize("name", golden_params())
def test_sidecar_conversion_is_register_exact(name: str, tmp_path: Path) -> None:
    case = pipeline.case_json(name)
    model = pipeline.imported_model(name, tmp_path)
    out = tmp_path / "project"
    proc = pipeline.convert(model, case["device"], out,
                            "--sidecar", str(GOLDEN / name / "network.yaml"),
                            "--sample-input", str(GOLDEN / name / "sample.npy"),
                            *pipeline.cli_options(case["vendor_args"]))
    assert proc.returncode == 0, proc.stderr
    cmp = pipeline.c2trace_compare(out, pipeline.expected_trace(name), tmp_path)
    if name in REGISTER_EXCEPTIONS:
        pytest.xfail(REGISTER_EXCEPTIONS[name])
    assert "traces are equal" in cmp.stdout, cmp.stdout + cmp.stderr


def _output_values(trace: dict) -> np.ndarray:
    """All known-answer words, in order (values, independent of where they live)."""
    words = [w for _, _, group in trace["expected_output"] for w in group]
    return np.array(words, dtype=np.uint32)


@pytest.mark.parametrize("name", golden_params())
def test_auto_mapping_keeps_the_known_answer(name: str, tmp_path: Path) -> None:
    case = pipeline.case_json(name)
    model = pipeline.imported_model(name, tmp_path)
    out = tmp_path / "project"
    proc = pipeline.convert(model, case["device"], out,
                            "--sample-input", str(GOLDEN / name / "sample.npy"))
    assert proc.returncode == 0, proc.stderr
    ours = pipeline.trace_of(out)
    golden = pipeline.expected_trace(name)
    # The mapping may differ, so compare the multiset of output bytes/words: the same
    # values must come out of the accelerator whatever memory they were placed in.
    assert sorted(_output_values(ours).tolist()) == sorted(_output_values(golden).tolist())


def test_output_is_deterministic_and_overwrite_guarded(tmp_path: Path) -> None:
    name = "ai85-mnist"
    case = pipeline.case_json(name)
    model = pipeline.imported_model(name, tmp_path)
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        proc = pipeline.convert(model, case["device"], out,
                                "--sample-input", str(GOLDEN / name / "sample.npy"))
        assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    match, mismatch, errors = filecmp.cmpfiles(first, second, names, shallow=False)
    assert mismatch == [] and errors == []
    # an existing directory is not replaced without --overwrite
    proc = pipeline.convert(model, case["device"], first)
    assert proc.returncode == 2 and "--overwrite" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = pipeline.convert(model, case["device"], first, "--overwrite")
    assert proc.returncode == 0, proc.stderr


def test_failed_conversion_leaves_no_directory(tmp_path: Path) -> None:
    name = "ai85-mnist"
    model = pipeline.imported_model(name, tmp_path)
    bad = tmp_path / "bad.yaml"
    text = (GOLDEN / name / "network.yaml").read_text()
    bad.write_text(text.replace("processors: 0x0000000000000001",
                                "processors: 0x0000000000000001\n    bogus_key: 1", 1))
    out = tmp_path / "project"
    proc = pipeline.convert(model, "MAX78000", out, "--sidecar", str(bad))
    assert proc.returncode == 1, proc.stderr
    assert "bogus_key" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".project")] == []
