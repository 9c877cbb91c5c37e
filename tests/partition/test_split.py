"""The split's decisions and refusals (issue 28): opt-in, nothing moves where the
accelerator runs the layer, one clear error where a split cannot be made, deterministic
output."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.float_onnx.helpers import cli

RNG = np.random.default_rng(28)
DIGITS_FLOAT = Path(__file__).resolve().parents[2] / "examples" / "digits_float"


def _w(name: str, *shape: int):
    return numpy_helper.from_array(RNG.uniform(-0.3, 0.3, shape).astype(np.float32), name)


def _conv(x: str, y: str, name: str, cin: int, cout: int, k: int = 3, stride: int = 1):
    node = helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [y], name=name,
                            kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride] * 2)
    return node, [_w(f"{name}.w", cout, cin, k, k), _w(f"{name}.b", cout)]


def _save(nodes, inits, tmp: Path, name: str, shape=(3, 8, 8)) -> tuple[Path, Path]:
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
        inits)
    path = tmp / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    cal = tmp / f"{name}_cal.npy"
    np.save(cal, RNG.uniform(0, 1, (8, *shape)).astype(np.float32))
    return path, cal


def _files(project: Path) -> dict[str, bytes]:
    return {str(p.relative_to(project)): p.read_bytes() for p in sorted(project.rglob("*"))
            if p.is_file()}


def test_a_model_the_accelerator_runs_converts_as_without_the_flag(tmp_path: Path) -> None:
    model, cal = DIGITS_FLOAT / "digits_float.onnx", DIGITS_FLOAT / "calibration.npy"
    code, _, err = cli([model, "--device", "MAX78000", "--calibration", cal, "-o",
                        tmp_path / "plain"])
    assert code == 0, err
    code, out, err = cli([model, "--device", "MAX78000", "--calibration", cal, "-o",
                          tmp_path / "flag", "--cpu-fallback"])
    assert code == 0, err
    assert "SPLIT" not in out
    assert _files(tmp_path / "plain") == _files(tmp_path / "flag")


def test_refusal_hints_at_the_flag_and_the_split_is_deterministic(tmp_path: Path) -> None:
    c0, i0 = _conv("x", "a", "stem5", 3, 8, k=5)
    r0 = helper.make_node("Relu", ["a"], ["b"], name="relu0")
    c1, i1 = _conv("b", "y", "conv1", 8, 8)
    model, cal = _save([c0, r0, c1], i0 + i1, tmp_path, "stem")
    code, _, err = cli([model, "--device", "MAX78000", "--calibration", cal, "-o",
                        tmp_path / "no"])
    assert code == 1 and "--cpu-fallback" in err and not (tmp_path / "no").exists()
    runs = []
    for k in range(2):
        code, out, err = cli([model, "--device", "MAX78000", "--calibration", cal, "-o",
                              tmp_path / f"p{k}", "--cpu-fallback"])
        assert code == 0, err
        runs.append(_files(tmp_path / f"p{k}"))
    assert runs[0] == runs[1]
    assert "CPU stem:" in out and "warning[cpu.share] the CPU takes" in out and "stem5" in out


def test_between_segment_must_keep_the_shape(tmp_path: Path) -> None:
    c0, i0 = _conv("x", "a", "conv0", 3, 8)
    c1, i1 = _conv("a", "b", "big_stride", 8, 8, k=5, stride=2)
    c2, i2 = _conv("b", "y", "conv2", 8, 8)
    model, cal = _save([c0, c1, c2], i0 + i1 + i2, tmp_path, "between")
    code, _, err = cli([model, "--device", "MAX78002", "--calibration", cal, "-o",
                        tmp_path / "p", "--cpu-fallback"])
    assert code == 1, err
    assert err.startswith("error[partition.between-shape]") and "big_stride" in err
    assert "Traceback" not in err and not (tmp_path / "p").exists()


def test_residual_over_cpu_layers_is_refused(tmp_path: Path) -> None:
    c0, i0 = _conv("x", "a", "conv0", 3, 8)
    leaky = helper.make_node("LeakyRelu", ["a"], ["b"], name="leaky", alpha=0.1)
    c1, i1 = _conv("b", "c", "conv1", 8, 8)
    add = helper.make_node("Add", ["a", "c"], ["y"], name="residual")
    model, cal = _save([c0, leaky, c1, add], i0 + i1, tmp_path, "residual")
    code, _, err = cli([model, "--device", "MAX78000", "--calibration", cal, "-o",
                        tmp_path / "p", "--cpu-fallback"])
    assert code == 1, err
    assert err.startswith("error[partition.skip]") and "leaky" in err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("argv", [["--cpu-fallback"], ["--cpu-fallback", "--riscv"]])
def test_usage_errors(argv: list[str], tmp_path: Path) -> None:
    model, cal = DIGITS_FLOAT / "digits_float.onnx", DIGITS_FLOAT / "calibration.npy"
    extra = [] if "--riscv" not in argv else ["--calibration", cal]
    code, _, err = cli([model, "--device", "MAX78000", "-o", tmp_path / "p", *argv, *extra])
    assert code == 2 and err.startswith("error[usage.cpu-fallback]"), err


def test_padded_average_head_over_real_positions(tmp_path: Path) -> None:
    """An AveragePool with padding that averages the real positions only (ONNX's
    count_include_pad = 0, the accelerator has no padded pooling) runs on the CPU."""
    c0, i0 = _conv("x", "a", "conv0", 3, 8)
    c1, i1 = _conv("a", "b", "conv1", 8, 8)
    pool = helper.make_node("AveragePool", ["b"], ["y"], name="padded_avg",
                            kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    model, cal = _save([c0, c1, pool], i0 + i1, tmp_path, "avg")
    code, out, err = cli([model, "--device", "MAX78000", "--calibration", cal, "-o",
                          tmp_path / "p", "--cpu-fallback"])
    assert code == 0, err
    assert "CPU head:" in out and "avgpool" in out
    rc, vout, verr = cli(["verify", tmp_path / "p"])
    assert rc == 0 and vout.startswith("PASS: accelerator, CPU head"), vout + verr
