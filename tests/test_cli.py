"""CLI error paths: one clear message, the documented exit code, never a traceback."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x import __version__
from onnx2ai8x.cli import _argv_with_default_command, main


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def assert_clean_failure(proc: subprocess.CompletedProcess, code: int, *needles: str):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text
    for needle in needles:
        assert needle in text, text


def test_version() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert __version__ in proc.stdout


def test_default_command_is_convert() -> None:
    assert _argv_with_default_command(["m.onnx", "--device", "MAX78000"])[0] == "convert"
    assert _argv_with_default_command(["--device", "MAX78000", "m.onnx"])[0] == "convert"
    assert _argv_with_default_command(["run", "m.onnx"])[0] == "run"
    assert _argv_with_default_command(["--help"]) == ["--help"]


def test_help_lists_examples() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0
    assert "onnx2ai8x model.onnx --device MAX78000" in proc.stdout
    # the root help lists every subcommand (a run builds only the one it names)
    for command in ("convert", "check", "sidecar", "run", "import-izer"):
        assert command in proc.stdout


def test_missing_model_is_usage_error(tmp_path: Path) -> None:
    proc = run_cli(str(tmp_path / "nope.onnx"), "--device", "MAX78000")
    assert_clean_failure(proc, 2, "model not found")


def test_unknown_option_is_usage_error(tmp_path: Path) -> None:
    proc = run_cli("run", "--no-such-option")
    assert_clean_failure(proc, 2)


def test_garbage_onnx_is_invalid_model(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a protobuf \x00\xff\x12")
    proc = run_cli("run", str(bad), "--input", str(_sample(tmp_path)))
    assert_clean_failure(proc, 1, str(bad))
    assert not (tmp_path / "bad").exists()


def test_run_rejects_out_of_range_sample(tmp_path: Path) -> None:
    x = tmp_path / "x.npy"
    np.save(x, np.full((1, 8, 8), 300))
    # (an empty model file is named as such first, issue 35: the sample is judged on
    # the real model)
    model = Path(__file__).resolve().parents[1] / "examples" / "digits" / "digits.onnx"
    proc = run_cli("run", str(model), "--input", str(x))
    assert_clean_failure(proc, 2, "[-128, 127]")


def test_main_returns_exit_code_without_raising(tmp_path: Path, capsys) -> None:
    code = main(["check", str(tmp_path / "missing.onnx")])
    assert code == 2
    assert "missing.onnx" in capsys.readouterr().err


def _sample(tmp_path: Path) -> Path:
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 4, 4), dtype=np.int64))
    return x


@pytest.mark.parametrize("flag", ["--quiet", "--json"])
def test_script_flags_are_accepted(tmp_path: Path, flag: str) -> None:
    proc = run_cli("check", str(tmp_path / "missing.onnx"), flag)
    assert_clean_failure(proc, 2, "not found")


@pytest.mark.parametrize("command", ["convert", "check", "sidecar", "run", "import-izer"])
def test_every_subcommand_help_has_an_example(command: str, capsys) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Example: onnx2ai8x" in out
    assert "--device" in out or command == "run"
