"""What a newcomer hit following the README (issue 25), each checked as fixed.

Every test runs the command line as a user does (a separate process) on the committed
examples.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.onnx"
FLOAT = ROOT / "examples" / "digits_float"

pytestmark = pytest.mark.skipif(not DIGITS.is_file() or not FLOAT.is_dir(),
                                reason="examples absent")


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


def test_quantize_keeps_an_existing_report_and_writes_ordinary_modes(tmp_path: Path) -> None:
    # the report is named after the output (issue 35); a file of the user's by that
    # name is never replaced, not even with --overwrite
    mine = tmp_path / "report.json"
    mine.write_text("mine\n")
    report = tmp_path / "q.report.json"
    report.write_text("mine too\n")
    args = ("quantize", FLOAT / "digits_float.onnx", "-d", "MAX78000", "--calibration",
            FLOAT / "calibration.npy", "-o", tmp_path / "q.onnx")
    for extra in ((), ("--overwrite",)):
        refused = cli(*args, *extra)
        assert refused.returncode == 2, refused.stderr
        assert "q.report.json" in refused.stderr and "not a quantization report" in \
            refused.stderr
        assert report.read_text() == "mine too\n" and not (tmp_path / "q.onnx").exists()
    report.unlink()
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    refused = cli(*args)
    assert refused.returncode == 2 and "--overwrite" in refused.stderr
    done = cli(*args, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path / 'q.onnx'} and {report}" in done.stdout
    assert mine.read_text() == "mine\n"
    umask = os.umask(0o022)
    os.umask(umask)
    for path in (tmp_path / "q.onnx", report):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path
    data = json.loads(cli(*args, "--overwrite", "--json").stdout)
    assert data["output"] == str(tmp_path / "q.onnx") and data["report"] == str(report)


def test_convert_verify_json_is_one_json_document_naming_the_project(tmp_path: Path) -> None:
    out = tmp_path / "p"
    proc = cli(DIGITS, "-o", out, "--verify", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # nothing else on stdout
    assert data["project"] == str(out)
    assert data["verify"]["verdict"] == "PASS"


def test_misspelt_weight_bits_layer_is_refused(tmp_path: Path) -> None:
    bits = tmp_path / "bits.yaml"
    layers = json.loads(cli("quantize", FLOAT / "digits_float.onnx", "-d", "MAX78000",
                            "--calibration",
                            FLOAT / "calibration.npy", "-o", tmp_path / "a.onnx",
                            "--json").stdout)
    names = [row["name"] for row in layers["layers"]]
    wrong = names[-1][:-1] + "x" + names[-1][-1]  # one letter off
    bits.write_text(f"{wrong}: 4\n")
    other = tmp_path / "b"
    other.mkdir()
    proc = cli("quantize", FLOAT / "digits_float.onnx", "-d", "MAX78000", "--calibration",
               FLOAT / "calibration.npy", "-o", other / "b.onnx", "--weight-bits", bits)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"no layer or node named `{wrong}`" in proc.stderr
    assert f"did you mean `{names[-1]}`?" in proc.stderr
    assert not (other / "b.onnx").exists()


@pytest.mark.parametrize("command", ["check", "sidecar"])
def test_check_and_sidecar_on_a_float_model(tmp_path: Path, command: str) -> None:
    model = FLOAT / "digits_float.onnx"
    # a float model names no device: it must be given, and said so first
    assert "error[usage.device]" in cli(command, model).stderr
    bare = cli(command, model, "-d", "MAX78000")
    assert bare.returncode == 2
    assert "--calibration" in bare.stderr and "export_onnx" not in bare.stderr
    calibrated = cli(command, model, "-d", "MAX78000", "--calibration",
                     FLOAT / "calibration.npy")
    assert calibrated.returncode == 0, calibrated.stderr
    if command == "sidecar":
        # named after the file, not the exporter's `main_graph`
        assert "arch: digits_float" in calibrated.stdout
        assert "main_graph" not in calibrated.stdout


def test_project_readme_names_the_files_it_has(tmp_path: Path) -> None:
    out = tmp_path / "p"
    proc = cli(FLOAT / "digits_float.onnx", "-d", "MAX78000", "--calibration",
               FLOAT / "calibration.npy", "-o", out)
    assert proc.returncode == 0, proc.stderr
    readme = (out / "README.md").read_text()
    assert "`digits_float.yaml`, `digits_float.onnx`" in readme
    assert (out / "digits_float.yaml").is_file() and (out / "digits_float.onnx").is_file()
    for name in ("README.md", "main.c", "digits_float.yaml"):
        assert "main_graph" not in (out / name).read_text(), name
    # the default board is not offered as another board
    assert "Other boards: `make BOARD=FTHR_RevA`" in readme
    assert "Other boards: `make BOARD=EvKit_V1" not in readme


def test_annotated_model_declares_the_ir_of_its_node_metadata(tmp_path: Path) -> None:
    import onnx

    out = tmp_path / "p"
    assert cli(DIGITS, "-o", out).returncode == 0
    model = onnx.load(out / "digits.onnx")
    assert any(len(node.metadata_props) for node in model.graph.node)
    assert model.ir_version >= 10  # NodeProto.metadata_props is IR 10
    onnx.checker.check_model(model)


def test_outputs_are_announced(tmp_path: Path) -> None:
    yaml_out = tmp_path / "s.yaml"
    proc = cli("sidecar", DIGITS, "-o", yaml_out)
    assert proc.returncode == 0 and proc.stdout.strip() == f"wrote {yaml_out}"
    sample = ROOT / "examples" / "digits" / "sample.npy"
    npy = tmp_path / "y.npy"
    proc = cli("run", DIGITS, "--input", sample, "-o", npy)
    assert proc.returncode == 0 and proc.stdout.startswith(f"wrote {npy}"), proc.stdout


def test_hand_tuned_sidecar_header_says_where_the_keys_came_from(tmp_path: Path) -> None:
    written = tmp_path / "tuned.yaml"
    assert cli("sidecar", DIGITS, "-o", written).returncode == 0
    text = written.read_text()
    assert "Every mapping key below was chosen by onnx2ai8x" in text
    # narrow weights: the header explains the shift that differs from the annotated one
    assert "`output_shift` excludes the implicit 8 - |quantization|" in text
    again = cli("sidecar", DIGITS, "--sidecar", written)
    assert again.returncode == 0
    assert "Every mapping key below was chosen" not in again.stdout
    assert "Mapping keys given in tuned.yaml are kept" in again.stdout


def test_help_lines_read_plainly() -> None:
    top = cli("--help").stdout
    listed = top[top.index("Commands:"):].splitlines()[1:]
    assert len([ln for ln in listed if ln.startswith("  ") and not ln.startswith(" " * 4)]) \
        == 7
    for line in listed:
        assert not line.rstrip().endswith("..."), line  # command list not cut off
    for command in ("convert", "check", "sidecar", "run", "quantize", "verify"):
        usage = cli(command, "--help").stdout
        assert "{" not in usage.splitlines()[0], usage.splitlines()[0]
        assert "<int range>" not in usage and "INTEGER RANGE" not in usage, command


def test_generated_example_folders_are_ignored_by_git() -> None:
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "/examples/digits/digits/" in ignored
    assert "/examples/digits_float/digits_float/" in ignored
