"""The user's path through the CLI on a small model: convert, check, sidecar, the
annotated ONNX for Netron, partial sidecars, and each error path (one message, the
documented exit code, no traceback, no half-written output)."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml

from custom_ops.builder import build_model
from onnx2ai8x.cli import main
from onnx2ai8x.network import ACT_RELU
from tests.legalize.builders import conv2d, linear, network

PROJECT_FILES = {"cnn.c", "cnn.h", "weights.h", "main.c", "sampledata.h", "sampleoutput.h",
                 "Makefile", "project.mk", "report.json"}


def _small_network():
    rng = np.random.default_rng(3)
    c1 = conv2d("conv1", cin=3, cout=8, dim=8, activation=ACT_RELU, output_shift=-1,
                weights=rng.integers(-60, 60, (8, 3, 3, 3)), bias=rng.integers(-900, 900, 8))
    c2 = conv2d("conv2", cin=8, cout=16, dim=8, activation=ACT_RELU, output_shift=-2,
                weights=rng.integers(-30, 30, (16, 8, 3, 3)))
    fc = linear("fc", cin=16, cout=5, input_dim=(8, 8), pooled_dim=(8, 8), flatten=True,
                output_width=32, weights=rng.integers(-20, 20, (5, 16 * 64)))
    return network(c1, c2, fc, device="MAX78000")


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    path = tmp_path / "small.onnx"
    onnx.save(build_model(_small_network()), str(path))
    return path


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_convert_writes_the_project_next_to_the_model(model: Path, capsys) -> None:
    code, out, err = cli(capsys, str(model), "--device", "MAX78000")
    assert code == 0, err
    project = model.with_suffix("")
    names = {p.name for p in project.iterdir()}
    assert PROJECT_FILES | {"small.yaml", "small.onnx"} <= names
    assert "softmax.c" not in names
    assert "conv1" in out and f"wrote {project}" in out
    report = json.loads((project / "report.json").read_text())
    assert [row["name"] for row in report["layers"]] == ["conv1", "conv2", "fc"]
    assert report["total_cycles"] > 0 and report["total_macs"] == (
        8 * 3 * 9 * 64 + 16 * 8 * 9 * 64 + 5 * 16 * 64)
    # the C API of the seeds' "Overview of the Generated API Functions"
    header = (project / "cnn.h").read_text()
    for name in ("cnn_enable", "cnn_disable", "cnn_init", "cnn_configure", "cnn_load_weights",
                 "cnn_verify_weights", "cnn_load_bias", "cnn_start", "cnn_stop",
                 "cnn_continue", "cnn_unload", "cnn_boost_enable", "cnn_boost_disable",
                 "CNN_OK", "CNN_FAIL", "CNN_NUM_OUTPUTS"):
        assert name in header, name


def test_softmax_quiet_and_json(model: Path, tmp_path: Path, capsys) -> None:
    code, out, _ = cli(capsys, str(model), "-d", "MAX78000", "-o", str(tmp_path / "q"),
                       "--softmax", "--quiet")
    assert code == 0 and out == ""
    assert (tmp_path / "q" / "softmax.c").is_file()
    code, out, _ = cli(capsys, str(model), "-o", str(tmp_path / "j"), "--json")
    assert code == 0
    assert json.loads(out)["device"] == "MAX78000"


def test_annotated_onnx_carries_the_mapping_for_netron(model: Path, tmp_path: Path,
                                                       capsys) -> None:
    code, _, err = cli(capsys, str(model), "-o", str(tmp_path / "p"))
    assert code == 0, err
    annotated = onnx.load(str(tmp_path / "p" / "small.onnx"))
    onnx.checker.check_model(annotated, full_check=True)
    report = json.loads((tmp_path / "p" / "report.json").read_text())
    nodes = {n.name: {p.key: p.value for p in n.metadata_props} for n in annotated.graph.node}
    for row in report["layers"]:
        meta = nodes[row["name"]]
        assert meta["ai8x.hw_layer"] == str(row["index"])
        assert int(meta["ai8x.processors"], 16) == int(row["processor_map"], 16)
        assert int(meta["ai8x.in_offset"], 16) == row["in_offset"]
        assert int(meta["ai8x.out_offset"], 16) == row["out_offset"]
        assert meta["ai8x.kernel_columns"] == str(row["kernel_columns"])
        assert meta["ai8x.estimated_cycles"] == str(row["cycles"])
    assert "MAX78000" in annotated.doc_string
    assert str(report["total_cycles"]) in annotated.doc_string
    props = {p.key: p.value for p in annotated.metadata_props}
    assert props["ai8x.device"] == "MAX78000"
    # a 3-channel input spreads over 3 processors; 16 channels over 16
    assert bin(int(nodes["conv2"]["ai8x.processors"], 16)).count("1") == 8


def test_check_prints_the_summary_and_writes_nothing(model: Path, capsys) -> None:
    code, out, _ = cli(capsys, "check", str(model), "--device", "MAX78002")
    assert code == 0
    assert "ok: the model fits the device" in out and "fc" in out
    assert not model.with_suffix("").exists()
    code, out, _ = cli(capsys, "check", str(model), "--json")
    assert code == 0 and len(json.loads(out)["layers"]) == 3


def test_written_sidecar_fed_back_reproduces_the_project(model: Path, tmp_path: Path,
                                                         capsys) -> None:
    side = tmp_path / "side.yaml"
    assert cli(capsys, "sidecar", str(model), "-o", str(side))[0] == 0
    text = side.read_text()
    assert "processors:" in text and "#" in text  # choices come with their reasons
    assert cli(capsys, str(model), "-o", str(tmp_path / "a"))[0] == 0
    assert cli(capsys, str(model), "-o", str(tmp_path / "b"), "--sidecar", str(side))[0] == 0
    for name in sorted(PROJECT_FILES):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_partial_sidecar_pins_only_what_it_states(model: Path, tmp_path: Path,
                                                  capsys) -> None:
    pins = {"arch": "small", "dataset": "x",
            "layers": [{"name": "conv2", "processors": 0x0000_0000_0000_ff00,
                        "out_offset": 0x4000}]}
    side = tmp_path / "pins.yaml"
    side.write_text(yaml.safe_dump(pins))
    code, _, err = cli(capsys, str(model), "-o", str(tmp_path / "p"), "--sidecar", str(side))
    assert code == 0, err
    rows = json.loads((tmp_path / "p" / "report.json").read_text())["layers"]
    assert int(rows[1]["processor_map"], 16) == 0xff00
    assert rows[1]["out_offset"] == 0x4000
    # a key that needs the whole mapping is refused with the way out
    pins["layers"][0]["streaming"] = True
    side.write_text(yaml.safe_dump(pins))
    code, _, err = cli(capsys, str(model), "-o", str(tmp_path / "r"), "--sidecar", str(side))
    assert code == 1 and "`streaming`" in err and "onnx2ai8x sidecar" in err
    assert not (tmp_path / "r").exists()
    pins["layers"][0] = {"name": "nope", "processors": 1}
    side.write_text(yaml.safe_dump(pins))
    code, _, err = cli(capsys, str(model), "-o", str(tmp_path / "r"), "--sidecar", str(side))
    assert code == 1 and "nope" in err and "conv1" in err


def test_limit_violation_names_the_node_and_leaves_nothing(tmp_path: Path, capsys) -> None:
    net = _small_network()
    bad = replace(net.layers[0], kernel_size=(5, 5), padding=(2, 2),
                  weights=np.ones((8, 3, 5, 5), dtype=np.int64))
    path = tmp_path / "bad.onnx"
    onnx.save(build_model(replace(net, layers=(bad, *net.layers[1:]))), str(path))
    out_dir = tmp_path / "out"
    code, _, err = cli(capsys, str(path), "-o", str(out_dir))
    assert code == 1
    assert "conv1" in err and "hint:" in err
    assert not out_dir.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.onnx"]  # no temporary left over


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["{model}", "--device", "MAX99999"], 2, "MAX99999"),
    (["{model}", "--sample-input", "{tmp}/none.npy"], 2, "none.npy"),
    (["{model}", "--sidecar", "{tmp}/none.yaml"], 2, "none.yaml"),
    (["{model}", "--sample-input", "{tmp}/wrong.npy"], 2, "shape"),
    (["{model}", "--sidecar", "{tmp}/typo.yaml"], 1, "procesors"),
    (["{model}", "--fast-fifo", "-o", "{tmp}/rv"], 2, "--riscv"),
    (["run", "{model}", "--input", "{tmp}/none.npy"], 2, "none.npy"),
    (["import-izer", "--config-file", "{tmp}/none.yaml", "--checkpoint-file", "{tmp}/c.pth",
      "--device", "MAX78000", "-o", "{tmp}/m.onnx"], 2, "none.yaml"),
    (["import-izer", "--config-file", "{tmp}/none.yaml", "--checkpoint-file", "{tmp}/c.pth",
      "-o", "{tmp}/m.onnx"], 2, "--device"),
])
def test_error_paths(model: Path, tmp_path: Path, capsys, args, code, needle) -> None:
    np.save(tmp_path / "wrong.npy", np.zeros((3, 5, 5), dtype=np.int64))
    full = yaml.safe_load(_written_sidecar(model, tmp_path, capsys))
    full["layers"][0]["procesors"] = full["layers"][0].pop("processors")
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(full))
    argv = [a.format(model=model, tmp=tmp_path) for a in args]
    got, out, err = cli(capsys, *argv)
    assert got == code, (out, err)
    assert needle.lower() in (out + err).lower()
    assert err.startswith("error[") or "Usage" in err or "Error" in err
    assert not model.with_suffix("").exists()


def test_existing_output_needs_overwrite(model: Path, tmp_path: Path, capsys) -> None:
    out_dir = tmp_path / "o"
    code, _, err = cli(capsys, str(model), "-o", str(out_dir))
    assert code == 0, err
    code, _, err = cli(capsys, str(model), "-o", str(out_dir))
    assert code == 2 and "--overwrite" in err
    (out_dir / "keep.txt").write_text("mine")
    assert cli(capsys, str(model), "-o", str(out_dir), "--overwrite")[0] == 0
    assert (out_dir / "keep.txt").read_text() == "mine" and (out_dir / "cnn.c").is_file()


def test_a_directory_onnx2ai8x_did_not_write_is_never_replaced(model: Path, tmp_path: Path,
                                                               capsys) -> None:
    """Issue 35: `--overwrite` on a folder of the user's deleted its files."""
    out_dir = tmp_path / "o"
    out_dir.mkdir()
    (out_dir / "keep.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):
        code, _, err = cli(capsys, str(model), "-o", str(out_dir), *extra)
        assert code == 2 and "did not write (keep.txt)" in err, err
        assert "pass --overwrite" not in err
    assert [p.name for p in out_dir.iterdir()] == ["keep.txt"]
    assert (out_dir / "keep.txt").read_text() == "mine"


def _written_sidecar(model: Path, tmp_path: Path, capsys) -> str:
    side = tmp_path / "w.yaml"
    assert cli(capsys, "sidecar", str(model), "-o", str(side))[0] == 0
    return side.read_text()


def _avg_pool_model(tmp_path: Path, rounding: bool) -> Path:
    rng = np.random.default_rng(5)
    conv = conv2d("pooled", cin=4, cout=4, dim=8, pool=(2, 2), pool_stride=(2, 2),
                  pool_average=True, input_dim=(8, 8), pooled_dim=(4, 4),
                  output_dim=(4, 4), weights=rng.integers(-50, 50, (4, 4, 3, 3)))
    path = tmp_path / f"avg{int(rounding)}.onnx"
    onnx.save(build_model(network(conv, device="MAX78000"), avg_pool_rounding=rounding),
              str(path))
    return path


def test_avg_pool_rounding_follows_the_model(tmp_path: Path, capsys) -> None:
    """The model's ai8x.PoolRound mode switches the accelerator's rounding (the control
    register bit the vendor sets for --avg-pool-rounding); the flag cannot contradict it."""
    rounding, truncating = _avg_pool_model(tmp_path, True), _avg_pool_model(tmp_path, False)
    assert cli(capsys, str(rounding), "-o", str(tmp_path / "r"))[0] == 0
    assert cli(capsys, str(rounding), "-o", str(tmp_path / "rf"), "--avg-pool-rounding")[0] == 0
    assert cli(capsys, str(truncating), "-o", str(tmp_path / "t"))[0] == 0
    auto = (tmp_path / "r" / "cnn.c").read_text()
    assert auto == (tmp_path / "rf" / "cnn.c").read_text()
    assert auto != (tmp_path / "t" / "cnn.c").read_text()
    code, _, err = cli(capsys, str(truncating), "-o", str(tmp_path / "x"),
                       "--avg-pool-rounding")
    assert code == 2 and "truncates" in err and not (tmp_path / "x").exists()


def test_conversion_does_not_import_torch_or_onnx(model: Path, tmp_path: Path) -> None:
    """The convert path stays light (issue 5): torch is only for ai8x_torch/import-izer,
    and the onnx package (0.15 s to import) only for `check` and foreign graphs."""
    import subprocess
    import sys

    code = ("import sys; from onnx2ai8x.cli import main; "
            f"rc = main([{str(model)!r}, '-o', {str(tmp_path / 'p')!r}, '--quiet']); "
            "heavy = [m for m in ('torch', 'onnx', 'onnxsim') if m in sys.modules]; "
            "print(heavy); sys.exit(rc or (3 if heavy else 0))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p" / "cnn.c").is_file()


def test_command_flushes_its_output_before_the_fast_exit(model: Path, tmp_path: Path) -> None:
    """`onnx2ai8x` ends with os._exit (no interpreter teardown, issue 5): what it printed
    must still arrive whole, and the exit code must be main()'s."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(model), "-o",
                           str(tmp_path / "p"), "--json"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["layers"]
    assert (tmp_path / "p" / "cnn.c").is_file()
    again = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(model), "-o",
                            str(tmp_path / "p")], capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "--overwrite" in again.stderr


def test_plan_takes_a_device_not_a_name(tmp_path) -> None:
    """The stages take the resolved Device; a name passed to the Python API is refused at
    the entry with the fix, not deep inside with an AttributeError."""
    import pytest

    from onnx2ai8x.convert import plan

    with pytest.raises(TypeError, match=r"get_device\(name\)"):
        plan(tmp_path / "model.onnx", "MAX78000", None)
