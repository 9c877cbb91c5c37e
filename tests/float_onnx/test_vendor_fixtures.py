"""Differential tests on exports the vendor training repository's own code wrote for our
small model (vendor_fixtures/make_fixtures.py): the model exported without
`ai8x.fuse_bn_layers` (a BatchNormalization with default statistics and a Div 4 after
each convolution), the plain `q` form, and the `-8` form. All three recover to the same
integers, and the recovered network's reference run equals the vendor training code's
own `-8` forward (its integer simulation of the hardware) on a random sample."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent / "vendor_fixtures"
# What the generator put into the model (make_fixtures.py BITS and SHIFTS), in order.
BITS = [8, 4, 8, 2, 8]


def _recover(name: str, warnings: list | None = None):
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.quantize import quantize_file

    result = quantize_file(HERE / name, None, device=get_device("MAX78000"))
    assert result.summary["exact"] is True and result.summary["calibration_samples"] == 0
    if warnings is not None:
        warnings.extend(result.warnings)
    return result


def _weights(result) -> list:
    return [lay for lay in result.network.layers if lay.weights is not None]


def test_unfused_batchnorm_is_dropped_with_a_warning() -> None:
    warnings: list[str] = []
    unfused = _weights(_recover("unfused-bn.onnx", warnings))
    plain = _weights(_recover("plain.onnx"))
    assert [lay.quantization for lay in plain] == BITS
    assert len(unfused) == len(plain)
    for a, b in zip(unfused, plain, strict=True):
        np.testing.assert_array_equal(a.weights, b.weights)
        assert (a.output_shift, a.output_width, a.activation) == \
            (b.output_shift, b.output_width, b.activation)
        np.testing.assert_array_equal(np.asarray(a.bias_hw), np.asarray(b.bias_hw))
    # one warning naming the nodes, the four layers and the reason
    assert len(warnings) == 1
    w = warnings[0]
    assert w.startswith("warning[float.vendor-unfused-bn]") and "fuse_bn_layers" in w
    assert "/conv1/bn/BatchNormalization, /conv1/Div and 3 more" in w
    assert "4 layer(s)" in w and "/conv4/Conv" in w


@pytest.mark.parametrize("name", ["unfused-bn.onnx", "plain.onnx", "sim8.onnx"])
def test_recovered_network_equals_the_vendor_simulation(name: str) -> None:
    import custom_ops

    ref = np.load(HERE / "reference.npz")
    result = _recover(name)
    assert [lay.quantization for lay in _weights(result)] == BITS
    units = 1.0 if name == "sim8.onnx" else 128.0
    q = result.mapping.quantize(ref["sample"] / units)
    np.testing.assert_array_equal(q, ref["sample"])
    got = custom_ops.run(custom_ops.session(result.model), q)[0]
    np.testing.assert_array_equal(np.asarray(got).reshape(ref["output"].shape),
                                  ref["output"])


def test_a_recovery_that_is_not_exact_is_an_error(monkeypatch) -> None:
    """The recovered network is checked against the export layer by layer: a recovery
    off by one output shift in the second layer stops the conversion naming it."""
    from dataclasses import replace

    from onnx2ai8x.errors import Ai8xError
    from onnx2ai8x.quantize import exact

    right = exact.recover_or_why

    def off_by_one(fm):
        (layers, scale, units), why = right(fm)
        layers = list(layers)
        layers[1] = replace(layers[1], output_shift=layers[1].output_shift + 1)
        return (tuple(layers), scale, units), why

    monkeypatch.setattr(exact, "recover_or_why", off_by_one)
    with pytest.raises(Ai8xError) as err:
        _recover("plain.onnx")
    d = err.value.diagnostics[0]
    assert d.code == "float.vendor-not-exact" and "layer conv2 " in d.where


def test_float_vendor_export_asks_for_the_quantized_export_or_calibration(
        tmp_path: Path) -> None:
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.errors import Ai8xError
    from onnx2ai8x.quantize import quantize_file

    with pytest.raises(Ai8xError) as err:
        quantize_file(HERE / "float.onnx", None, device=get_device("MAX78000"))
    d = err.value.diagnostics[0]
    assert d.code == "usage.calibration" and "vendor" in d.message
    assert "quantize.py" in d.hint and "--calibration" in d.hint
    # with calibration data in the export's units it is an ordinary float model
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(1).integers(-128, 128, (16, 1, 12, 12)) / 128.0)
    result = quantize_file(HERE / "float.onnx", x, device=get_device("MAX78000"))
    assert result.summary["exact"] is False and result.summary["calibration_samples"] == 16


def test_detector_heads_and_concat_1d() -> None:
    """A 1-D model with a channel concatenation and two heads that its forward permutes,
    flattens and concatenates: the heads become the outputs (with a warning) and the
    host's rearrangement of them equals the vendor code's `-8` forward."""
    import custom_ops

    warnings: list[str] = []
    result = _recover("heads-q.onnx", warnings)
    assert [lay.quantization for lay in _weights(result)] == [8, 2, 4, 8, 8]
    assert len(warnings) == 1 and warnings[0].startswith("warning[float.vendor-host-tail]")
    ref = np.load(HERE / "heads-reference.npz")
    assert np.array_equal(result.mapping.quantize(ref["sample"] / 128.0), ref["sample"])
    h1, h2 = (np.asarray(o) for o in custom_ops.run(custom_ops.session(result.model),
                                                      ref["sample"]))
    n = h1.shape[0]
    host = np.concatenate([h1.transpose(0, 2, 1).reshape(n, -1, 2),
                           h2.transpose(0, 2, 1).reshape(n, -1, 2)], axis=1)
    np.testing.assert_array_equal(host, ref["output"])
