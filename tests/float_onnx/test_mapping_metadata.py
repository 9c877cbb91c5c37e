"""The float -> int8 input mapping a quantized model records (quantize/mapping.py): read
back exactly, and refused with a message when damaged (never guessed, never a
traceback: a wrong scale or layout would quantize every sample wrongly)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.quantize.mapping import InputMapping

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits" / "digits.onnx"
GOOD = {"ai8x.input_scale": "0.25", "ai8x.input_perm": "[0, 3, 1, 2]",
        "ai8x.input_shape": "[3, 4, 5]", "ai8x.input_offset": "[0.5, -1, 2]"}


def test_the_recorded_mapping_reads_back() -> None:
    mapping = InputMapping(0.25, (0, 3, 1, 2), (3, 4, 5), (0.5, -1.0, 2.0))
    assert InputMapping.from_metadata(mapping.metadata()) == mapping
    assert InputMapping.from_metadata(GOOD) == mapping
    assert InputMapping.from_metadata({}) is None


@pytest.mark.parametrize(("key", "value"), [
    ("ai8x.input_scale", "x"), ("ai8x.input_scale", "0"), ("ai8x.input_scale", "-1"),
    ("ai8x.input_scale", "nan"), ("ai8x.input_scale", "inf"),
    ("ai8x.input_perm", "{"), ("ai8x.input_perm", "[0, 5, 1]"),
    ("ai8x.input_perm", "[1, 0, 2, 3]"), ("ai8x.input_perm", "[[0]]"),
    ("ai8x.input_perm", "[]"), ("ai8x.input_perm", "[0, true, 2, 3]"),
    ("ai8x.input_shape", "[3, \"a\", 5]"), ("ai8x.input_shape", "[3, 0, 5]"),
    ("ai8x.input_shape", "[60]"), ("ai8x.input_shape", "[" * 5000),
    ("ai8x.input_offset", "[1, 2]"), ("ai8x.input_offset", "[1, 2, \"c\"]"),
    ("ai8x.input_offset", "[1, 2, NaN]"), ("ai8x.input_offset", "7"),
])
def test_damaged_values_are_refused(key: str, value: str) -> None:
    with pytest.raises(Ai8xError) as err:
        InputMapping.from_metadata({**GOOD, key: value})
    assert err.value.code == "model.metadata" and key in str(err.value)


def test_run_says_a_damaged_mapping(tmp_path: Path, capsys) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx2ai8x.cli import main

    model = onnx.load(DIGITS)
    for key, value in {**GOOD, "ai8x.input_scale": "0"}.items():
        model.metadata_props.add(key=key, value=value)
    path = tmp_path / "damaged.onnx"
    onnx.save(model, path)
    sample = tmp_path / "x.npy"
    np.save(sample, np.zeros((1, 5, 3, 4), np.float32))
    assert main(["run", str(path), "-i", str(sample)]) == 1
    err = capsys.readouterr().err
    assert "error[model.metadata]" in err and "Traceback" not in err
