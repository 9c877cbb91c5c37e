"""Issue 34 item 3: TFLite full-integer models with int8 input and output, through
`tf2onnx --tflite` (tflite/make_fixtures.py wrote them with the TFLite interpreter's
outputs; these tests need neither TensorFlow nor tf2onnx).

* An int8 input whose zero point is 0 is the accelerator's own input, and so is one
  whose zero point the first (unpadded) convolution folds into its integer bias: the
  converted model's input mapping is the identity on the file's codes (only the layout
  changes),
  `run`, the sample input and `verify` take the file's int8 samples, and the output
  codes (dequantized on the file's output grid, quantized back) agree with the TFLite
  interpreter's within the requantization's error: TFLite's scales are not powers of
  two, so each layer is requantized to the accelerator's power-of-two shifts (a code or
  a few, not bit-exact; the same holds for the model with float I/O).
* An int8 input with another zero point (TFLite's [0, 1) or [-1, 1] inputs: -128, -1) is
  refused naming the converter setting for float I/O, and that setting applied (the same
  Keras model converted with float I/O) converts and verifies.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ..float_onnx.helpers import cli

HERE = Path(__file__).resolve().parent / "tflite"


def _source(name: str):
    data = np.load(HERE / f"{name}_source.npz")
    return HERE / f"{name}.onnx", data["x"], data["y"]


def _output_grid(path: Path) -> tuple[float, int]:
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(path))
    consts = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    node = next(n for n in m.graph.node if m.graph.output[0].name in n.output)
    assert node.op_type == "QuantizeLinear"
    return float(consts[node.input[1]]), int(consts[node.input[2]])


@pytest.mark.parametrize("name, zero", [("int8_io", -128), ("int8_io_symmetric", -1)])
def test_int8_input_off_zero_is_refused_with_the_float_io_setting(
        name: str, zero: int, tmp_path: Path) -> None:
    path, _, _ = _source(name)
    code, _, stderr = cli([path, "--device", "MAX78000", "-o", tmp_path / "p"])
    assert code != 0 and not (tmp_path / "p").exists()
    assert "float.input-type" in stderr and f"zero point {zero}" in stderr
    # the first convolution pads ('same'): why the zero point cannot fold into its bias
    assert "pads its input with zeros" in stderr
    assert "inference_input_type" in stderr and "Traceback" not in stderr


def test_the_hint_applied_float_io_converts_and_verifies(tmp_path: Path) -> None:
    """The same Keras model converted with TFLite's default float I/O."""
    path, x, _ = _source("float_io")
    data = np.load(HERE / "float_io_source.npz")
    sample = tmp_path / "sample.npy"
    np.save(sample, data["float_x"][:1])
    project = tmp_path / "p"
    code, _, stderr = cli([path, "--device", "MAX78000", "-o", project,
                           "--sample-input", sample])
    assert code == 0, stderr
    rc, stdout, _ = cli(["verify", project])
    assert rc == 0 and stdout.startswith("PASS"), stdout


@pytest.mark.parametrize("name", ["int8_io_zero", "int8_io_valid"])
def test_the_rewrite_computes_the_source_exactly(name: str) -> None:
    """The float form of the file (its int8 input taken as float codes; for
    `int8_io_valid` the zero point -1 folded into the first, unpadded, convolution's
    integer bias) gives the TFLite interpreter's output codes, every one."""
    import onnx

    from onnx2ai8x import onnxpb
    from onnx2ai8x.importer.dialects.integer_io import float_input, float_outputs

    from .helpers import run_source

    path, x, y = _source(name)
    model = onnxpb.load(path)
    float_input(model, model.graph.input[0], "input")
    (grid,) = float_outputs(model).values()
    assert grid == _output_grid(path)
    out = run_source(onnx.load_from_string(model.SerializeToString()),
                     x.astype(np.float32))
    assert np.array_equal(np.rint(out / grid[0]) + grid[1], y)


@pytest.mark.parametrize("name", ["int8_io_zero", "int8_io_valid"])
def test_int8_input_taken_as_the_codes(name: str) -> None:
    from onnx2ai8x.importer.dialects.integer_io import quantized_output
    from onnx2ai8x.quantize import quantize_file

    from .helpers import run_converted

    path, x, y = _source(name)
    result = quantize_file(path, None)
    m = result.mapping
    assert (m.scale, m.offset) == (1.0, ())
    # the accelerator's input is the file's codes, channels-first
    assert np.array_equal(m.quantize(x), np.transpose(x, (0, 3, 1, 2)))
    codes = quantized_output(run_converted(result, x.astype(np.float64)),
                             _output_grid(path))
    want = y.reshape(len(y), -1)
    diff = np.abs(codes.astype(np.int64) - want)
    # requantized to power-of-two shifts: a few codes, never more than 4 of 256
    assert diff.max() <= 4, diff.max()
    assert np.mean(codes.argmax(1) == want.argmax(1)) >= 15 / 16


def test_run_sample_and_verify_take_int8_samples(tmp_path: Path) -> None:
    """`convert --sample-input` and `run` with the file's own int8 samples (its NHWC
    layout), and `verify` of the project."""
    from onnx2ai8x.quantize import quantize_file

    path, x, _ = _source("int8_io_zero")
    sample = tmp_path / "sample.npy"
    np.save(sample, x[:1])
    assert x.dtype == np.int8
    project = tmp_path / "p"
    code, _, stderr = cli([path, "--device", "MAX78000", "-o", project,
                           "--sample-input", sample])
    assert code == 0, stderr
    rc, stdout, _ = cli(["verify", project])
    assert rc == 0 and stdout.startswith("PASS"), stdout
    out = tmp_path / "out.npy"
    converted = next(project.glob("*.onnx"))
    rc, _, stderr = cli(["run", converted, "--input", sample, "-o", out])
    assert rc == 0, stderr
    import custom_ops

    result = quantize_file(path, None)
    want = custom_ops.run(custom_ops.session(result.model),
                          np.transpose(x[:1], (0, 3, 1, 2)).astype(np.int8))[0]
    assert np.array_equal(np.load(out).reshape(-1), np.asarray(want).reshape(-1))
