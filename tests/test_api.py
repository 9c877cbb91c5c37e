"""The public Python API (onnx2ai8x.api, issue 27 item 6): each function with paths and
with models in memory (bytes, onnx.ModelProto, Network), errors as exceptions with the
command line's exit codes, nothing written by `check`, and `check` from several
processes at once."""
from __future__ import annotations

import filecmp
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import onnx2ai8x
from onnx2ai8x import api
from onnx2ai8x.devices import get_device
from onnx2ai8x.frontend import front_end
from tests.legalize.builders import conv2d, network

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.onnx"
SAMPLE = ROOT / "examples" / "digits" / "sample.npy"
FLOAT = ROOT / "examples" / "digits_float" / "digits_float.onnx"
CALIBRATION = ROOT / "examples" / "digits_float" / "calibration.npy"

pytestmark = pytest.mark.skipif(not DIGITS.is_file(), reason="examples absent")


def _files(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*")}


def candidate(width: int, depth: int = 3, dim: int = 16):
    """A chain of `depth` 3x3 convolutions of `width` channels (a search candidate)."""
    layers = [conv2d("conv0", cin=3, cout=width, dim=dim)]
    layers += [conv2d(f"conv{k}", cin=width, cout=width, dim=dim) for k in range(1, depth)]
    return network(*layers)


def test_top_level_names_are_the_api_and_load_lazily():
    assert onnx2ai8x.check is api.check and onnx2ai8x.verify is api.verify
    assert onnx2ai8x.run is api.run
    assert onnx2ai8x.Ai8xError is api.Ai8xError
    with pytest.raises(AttributeError):
        onnx2ai8x.no_such_function  # noqa: B018


def test_importing_the_package_loads_nothing_else():
    """`import onnx2ai8x` stays cheap (the command line's start-up): the API and numpy
    load on first use, and `check` does not import torch or the onnx package."""
    import subprocess
    import sys

    code = ("import sys, onnx2ai8x; "
            "assert [m for m in sys.modules if m.startswith(('onnx2ai8x.', 'numpy'))] == []; "
            f"onnx2ai8x.check({str(DIGITS)!r}, 'MAX78000'); "
            "assert 'onnx2ai8x.api' in sys.modules; "
            "assert 'torch' not in sys.modules and 'onnx' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300,
                   cwd=ROOT)


def test_check_takes_a_path_bytes_a_model_or_a_network(tmp_path, monkeypatch):
    import onnx

    monkeypatch.chdir(tmp_path)
    by_path = api.check(DIGITS, "MAX78000")
    assert by_path.cycles > 0 and len(by_path.layers) == 4
    assert all(lay.processors > 0 and lay.cycles > 0 for lay in by_path.layers)
    assert sum(lay.weight_bytes for lay in by_path.layers) == by_path.report.weight_bytes
    assert api.check(str(DIGITS), "MAX78000").report == by_path.report
    assert api.check(DIGITS.read_bytes(), "MAX78000").report == by_path.report
    assert api.check(onnx.load(DIGITS), "MAX78000").report == by_path.report
    read = front_end(DIGITS, get_device("MAX78000")).read
    assert api.check(read, get_device("MAX78000")).report == by_path.report
    assert by_path.summary.startswith(by_path.summary.splitlines()[0])
    assert "layers:" in by_path.sidecar
    assert list(tmp_path.iterdir()) == []  # check writes nothing


def test_the_device_is_stated_or_the_models_never_a_default():
    import onnx

    # digits.onnx names its device (ai8x.device: MAX78000)
    assert api.check(DIGITS).report.device == "MAX78000"
    assert api.check(DIGITS, "MAX78002").report.device == "MAX78002"
    with pytest.raises(onnx2ai8x.Ai8xError) as err:
        api.check(DIGITS, "MAX78009")
    assert err.value.exit_code == 2
    model = onnx.load(DIGITS)
    named = [p for p in model.metadata_props if p.key == "ai8x.device"]
    assert len(named) == 1
    model.metadata_props.remove(named[0])
    with pytest.raises(onnx2ai8x.Ai8xError) as err:
        api.check(model)
    assert err.value.code == "usage.device" and err.value.exit_code == 2
    assert "MAX78000 or MAX78002" in str(err.value)
    assert api.check(model, "MAX78000").report.device == "MAX78000"
    model.metadata_props.add(key="ai8x.device", value="MAX99999")
    with pytest.raises(onnx2ai8x.Ai8xError) as err:
        api.check(model)
    assert err.value.code == "usage.device" and "MAX99999" in str(err.value)


def test_errors_carry_the_diagnostics_and_the_command_line_exit_code(tmp_path, capsys):
    from custom_ops.builder import build_proto
    from onnx2ai8x.cli import main

    too_wide = candidate(2048, depth=2)
    with pytest.raises(onnx2ai8x.Ai8xError) as err:
        api.check(too_wide, "MAX78000")
    assert err.value.diagnostics and err.value.exit_code == 1
    path = tmp_path / "wide.onnx"
    path.write_bytes(build_proto(too_wide).SerializeToString())
    with pytest.raises(onnx2ai8x.Ai8xError) as by_bytes:
        api.check(path.read_bytes(), "MAX78000")
    assert [d.code for d in by_bytes.value.diagnostics] == \
        [d.code for d in err.value.diagnostics]
    assert main(["check", str(path), "--device", "MAX78000"]) == err.value.exit_code
    assert err.value.diagnostics[0].code in capsys.readouterr().err


def test_convert_from_a_path_and_from_memory_write_the_same_project(tmp_path):
    import onnx

    by_path = api.convert(DIGITS, "MAX78000", tmp_path / "a", sample=SAMPLE)
    in_memory = api.convert(onnx.load(DIGITS), "MAX78000", tmp_path / "b", sample=SAMPLE)
    assert by_path.report == in_memory.report and by_path.board == in_memory.board
    same = filecmp.dircmp(tmp_path / "a", tmp_path / "b")
    # the sources are the same; the side files are named after the file or the network
    # (and the manifest holds the README's digest)
    assert same.diff_files in ([], ["README.md", "onnx2ai8x-manifest.txt"])
    lines = [{line.split("  ", 1)[1]: line for line in (tmp_path / side /
              "onnx2ai8x-manifest.txt").read_text().splitlines() if "  " in line}
             for side in ("a", "b")]
    assert all(lines[0][name] == lines[1][name] for name in same.same_files)
    assert {"cnn.c", "main.c", "weights.h"} <= set(same.same_files)
    with pytest.raises(onnx2ai8x.Ai8xError) as err:  # never replaced without overwrite
        api.convert(DIGITS, "MAX78000", tmp_path / "a")
    assert err.value.exit_code == 2
    with pytest.raises(onnx2ai8x.Ai8xError) as err:
        api.convert(DIGITS, "MAX78000", tmp_path / "c", no_such_option=True)
    assert err.value.exit_code == 2 and not (tmp_path / "c").exists()


def test_convert_a_network_then_verify_with_the_model_in_memory(tmp_path):
    net = candidate(8)
    converted = api.convert(net, "MAX78002", tmp_path / "p")
    assert (tmp_path / "p" / "cnn.c").is_file()
    assert _files(tmp_path) == {"p", *(f"p/{f}" for f in _files(tmp_path / "p"))}
    by_path = api.verify(converted.output)
    with_model = api.verify(converted.output, model=net)
    assert by_path.passed and with_model.passed and with_model.verdict == "PASS"
    assert onnx2ai8x.verify(str(converted.output)).passed


def test_quantize_from_a_path_and_from_memory(tmp_path, monkeypatch):
    import onnx

    monkeypatch.chdir(tmp_path)
    calibration = np.load(CALIBRATION)
    written = api.quantize(FLOAT, "MAX78000", calibration=CALIBRATION,
                           output=tmp_path / "q.onnx")
    assert written.output == tmp_path / "q.onnx"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.onnx", "q.report.json"]
    in_memory = api.quantize(onnx.load(FLOAT), "MAX78000", calibration=calibration)
    assert in_memory.output is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.onnx", "q.report.json"]
    assert in_memory.model.SerializeToString() == (tmp_path / "q.onnx").read_bytes()
    # the quantized model converts as any ai8x-ONNX model
    assert api.check(in_memory.model, "MAX78000").cycles > 0
    with pytest.raises(onnx2ai8x.Ai8xError) as err:
        api.quantize(FLOAT.read_bytes(), "MAX78000")
    assert err.value.code == "usage.calibration" and err.value.exit_code == 2
    # a float model is checked through the same quantization
    checked = api.check(FLOAT, "MAX78000", calibration=calibration).report
    again = api.check(in_memory.model, "MAX78000").report
    # (named after the file, and "model" in memory: the exporter's graph name says none)
    assert (checked.network, again.network) == ("digits_float", "model")
    assert checked.layers == again.layers and checked.total_cycles == again.total_cycles


def test_run_from_a_path_and_from_memory():
    import onnx

    by_path = api.run(DIGITS, SAMPLE)
    sample = np.load(SAMPLE)
    for model in (DIGITS.read_bytes(), onnx.load(DIGITS)):
        in_memory = api.run(model, sample)
        assert list(in_memory) == list(by_path)
        assert all(np.array_equal(in_memory[k], by_path[k]) for k in by_path)
    with pytest.raises(onnx2ai8x.Ai8xError) as err:
        api.run(DIGITS.read_bytes(), sample + 0.5)
    assert err.value.exit_code == 2


def _check_cycles(net) -> int | str:
    try:
        return api.check(net, "MAX78000").cycles
    except onnx2ai8x.Ai8xError as err:
        return err.diagnostics[0].code


def test_check_from_four_processes_at_once():
    """20 candidate networks checked from 4 processes give what one process gives."""
    nets = [candidate(width, depth) for width in (4, 8, 16, 32, 64)
            for depth in (1, 2, 3, 4)]
    serial = [_check_cycles(n) for n in nets]
    assert len(set(serial)) > 10  # different candidates, different answers
    with ProcessPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(_check_cycles, nets))
    assert parallel == serial


def test_import_izer_in_memory_and_written(tmp_path, monkeypatch):
    """A vendor project imported without an output writes nothing and converts as the
    file the command line writes does; with an output, the same bytes."""
    pytest.importorskip("torch")
    from onnx2ai8x.cli import main
    from tests.fuzz.test_fuzz import TINY_YAML, _tiny_checkpoint

    monkeypatch.chdir(tmp_path)
    ckpt, npy = _tiny_checkpoint()
    for name, data in (("net.yaml", TINY_YAML), ("net.pth.tar", ckpt), ("x.npy", npy)):
        (tmp_path / name).write_bytes(data)
    before = sorted(p.name for p in tmp_path.iterdir())
    imported = api.import_izer("net.yaml", "net.pth.tar", "MAX78000", sample="x.npy")
    assert imported.output is None and sorted(p.name for p in tmp_path.iterdir()) == before
    written = api.import_izer("net.yaml", "net.pth.tar", "MAX78000", sample="x.npy",
                              output="api.onnx")
    assert written.output == Path("api.onnx")
    assert main(["import-izer", "--config-file", "net.yaml", "--checkpoint-file",
                 "net.pth.tar", "--sample", "x.npy", "--device", "MAX78000", "-o",
                 "cli.onnx"]) == 0
    assert (tmp_path / "api.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes() \
        == imported.model.SerializeToString()
    assert api.check(imported.model, "MAX78000").report == \
        api.check(tmp_path / "cli.onnx", "MAX78000").report
    with pytest.raises(onnx2ai8x.Ai8xError) as err:  # an existing output is kept
        api.import_izer("net.yaml", "net.pth.tar", "MAX78000", output="api.onnx")
    assert err.value.exit_code == 2
    with pytest.raises(onnx2ai8x.Ai8xError) as err:
        api.import_izer("nope.yaml", "net.pth.tar", "MAX78000")
    assert err.value.code == "usage.missing-file" and err.value.exit_code == 2


def _convert_into(output: str) -> str:
    return str(api.convert(DIGITS, "MAX78000", output, sample=SAMPLE).output)


def test_convert_from_several_processes_at_once(tmp_path):
    """Conversions running at the same time in separate processes write the same
    project, each into its own output and nowhere else."""
    outputs = [str(tmp_path / f"p{k}") for k in range(4)]
    with ProcessPoolExecutor(max_workers=2) as pool:
        assert list(pool.map(_convert_into, outputs)) == outputs
    first = {p.relative_to(outputs[0]): p.read_bytes()
             for p in sorted(Path(outputs[0]).rglob("*")) if p.is_file()}
    assert "cnn.c" in {str(k) for k in first}
    for out in outputs[1:]:
        assert {p.relative_to(out): p.read_bytes()
                for p in sorted(Path(out).rglob("*")) if p.is_file()} == first
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"p{k}" for k in range(4)]
