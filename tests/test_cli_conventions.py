"""The command line's conventions (issue 35, item 5): JSON on stdout for every outcome
under --json, --quiet means errors only, every warning has a code, a mistyped
subcommand is named, --debug shows an internal error's traceback, Ctrl-C says
"interrupted" and exits 130."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onnx2ai8x import cli
from onnx2ai8x.cli import main

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.onnx"


def _main(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- --json: every outcome

@pytest.mark.parametrize("argv,code,error", [
    (("check", "missing.onnx", "--device", "MAX78000"), 2, "usage.missing-file"),
    (("check", str(DIGITS), "--device", "MAX78009"), 2, "usage.device"),
    # (-o: the default output, next to the example, may exist already, e.g. in CI)
    (("convert", str(DIGITS), "-o", "p", "--timer", "99"), 2, "usage.option"),
    (("check", str(DIGITS), "--nonsense"), 2, "usage.command-line"),
    (("verify", "no-such-project"), 2, "usage.missing-file"),
    (("quantize", "missing.onnx", "-o", "q.onnx"), 2, "usage.missing-file"),
])
def test_json_errors_are_documents_on_stdout(capsys, tmp_path, monkeypatch, argv, code,
                                             error):
    monkeypatch.chdir(tmp_path)
    got, out, err = _main(capsys, *argv, "--json")
    assert got == code
    doc = json.loads(out)  # stdout is exactly one JSON document
    assert doc["ok"] is False and doc["exit_code"] == code
    assert doc["errors"][0]["code"] == error, doc
    assert {"where", "message", "hint"} <= set(doc["errors"][0])
    assert "error[" not in err  # not printed twice


def test_json_internal_error_is_a_document(capsys, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli, "_convert", boom)
    code, out, err = _main(capsys, str(DIGITS), "-o", "x", "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["errors"][0]["code"] == "internal"
    assert "a bug" in doc["errors"][0]["message"]
    assert "Traceback" not in err


def test_json_success_is_still_the_report(capsys, tmp_path):
    code, out, _ = _main(capsys, "check", str(DIGITS), "--json")
    assert code == 0
    assert "layers" in json.loads(out)


# ---------------------------------------------------------------- --quiet, warning codes

def test_quiet_means_errors_only_and_warnings_have_codes(capsys, tmp_path):
    argv = (str(DIGITS), "-o", str(tmp_path / "p"), "--timer", "0", "--energy")
    code, out, err = _main(capsys, *argv)
    assert code == 0
    warnings = [ln for ln in err.splitlines() if ln.startswith(("warning", "note"))]
    assert warnings, err
    assert all(ln.startswith(("warning[", "note[")) for ln in warnings), err
    assert "warning[options.timer-ignored]" in err
    code, out, err = _main(capsys, *argv, "--overwrite", "-q")
    assert code == 0 and out == "" and err == ""


# ---------------------------------------------------------------- mistyped subcommands

@pytest.mark.parametrize("word,meant", [("verfy", "verify"), ("version", "--version"),
                                        ("chek", "check"), ("quantise", "quantize"),
                                        ("sidcar", "sidecar")])
def test_mistyped_subcommand_is_named(capsys, tmp_path, monkeypatch, word, meant):
    monkeypatch.chdir(tmp_path)
    code, out, err = _main(capsys, word, "something")
    assert code == 2
    assert f"error[usage.command] {word}" in err
    assert f"did you mean `onnx2ai8x {meant}`" in err
    assert "model" not in err.split("hint")[0] or "not a command" in err


def test_a_file_named_like_a_command_is_still_a_model(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "verfy").write_bytes(DIGITS.read_bytes())
    code, out, err = _main(capsys, "verfy", "--device", "MAX78000", "-o", "out", "-q")
    assert code == 0, err
    assert (tmp_path / "out" / "cnn.c").is_file()


# ---------------------------------------------------------------- --debug

def _bug(*a, **k):
    raise ZeroDivisionError("deliberate")


def test_internal_error_traceback_only_with_debug(capsys, monkeypatch):
    monkeypatch.setattr(cli, "_convert", _bug)
    monkeypatch.delenv("ONNX2AI8X_DEBUG", raising=False)
    code, _, err = _main(capsys, str(DIGITS), "-o", "x")
    assert code == 1 and "internal error: ZeroDivisionError: deliberate" in err
    assert "Traceback" not in err and "--debug" in err
    code, _, err = _main(capsys, str(DIGITS), "-o", "x", "--debug")
    assert code == 1 and "Traceback (most recent call last)" in err and "_bug" in err
    monkeypatch.setenv("ONNX2AI8X_DEBUG", "1")
    code, _, err = _main(capsys, str(DIGITS), "-o", "x")
    assert "Traceback (most recent call last)" in err


# ---------------------------------------------------------------- Ctrl-C

def test_an_interrupt_that_breaks_an_import_is_reported_as_interrupted(capsys,
                                                                       monkeypatch):
    """An interrupt inside a C extension's initialization surfaces as ImportError
    ("initialization failed"); it is the interrupt, not a bug."""
    def interrupted_import(*a, **k):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None

    monkeypatch.setattr(cli, "_convert", interrupted_import)
    code, out, err = _main(capsys, str(DIGITS), "-o", "x")
    assert code == 130
    assert err.strip().splitlines()[-1] == "interrupted"
    assert "internal error" not in err
    # the handler is removed again
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_interrupt_under_json_is_a_document(capsys, monkeypatch):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_convert", interrupted)
    code, out, err = _main(capsys, str(DIGITS), "-o", "x", "--json")
    assert code == 130 and "interrupted" in err
    assert json.loads(out)["errors"][0]["code"] == "interrupted"


@pytest.mark.parametrize("delay", [0.5, 0.7, 0.9, 1.2, 1.6])
def test_sigint_at_any_moment_exits_130_with_interrupted(tmp_path, delay):
    """A real process interrupted while it imports, converts or writes. (An interrupt
    before the interpreter has reached the entry point, its first tens of milliseconds,
    is Python's own: nothing of onnx2ai8x runs yet.)"""
    proc = subprocess.Popen([sys.executable, "-m", "onnx2ai8x", str(DIGITS), "-o",
                             str(tmp_path / "out")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    if proc.returncode == 0:  # finished before the signal: nothing to judge
        return
    assert proc.returncode == 130, (proc.returncode, err)
    assert "interrupted" in err and "internal error" not in err and "Traceback" not in err


# ---------------------------------------------------------------- heartbeat

def test_heartbeat_speaks_only_for_slow_steps(capsys):
    from onnx2ai8x.console import heartbeat

    with heartbeat("fast step", True, after=0.5, every=0.5):
        pass
    assert capsys.readouterr().err == ""
    with heartbeat("slow step", True, after=0.1, every=0.1):
        time.sleep(0.45)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 2 and all(ln.startswith("slow step... (") for ln in lines)
    with heartbeat("silent step", False, after=0.05, every=0.05):
        time.sleep(0.2)
    assert capsys.readouterr().err == ""


def test_build_says_it_is_still_building(capsys, tmp_path, monkeypatch):
    """`--build` runs make for 20-40 s: a line every few seconds, not silence."""
    import onnx2ai8x.emit.build as build
    from onnx2ai8x.errors import Ai8xError

    def slow_build(*a, **k):
        time.sleep(2.6)
        raise Ai8xError("build.failed", "p", "stopped here", "")

    monkeypatch.setattr(cli, "_build_sdk", lambda args: None)
    monkeypatch.setattr(build, "build_project", slow_build)
    code, out, err = _main(capsys, str(DIGITS), "-o", str(tmp_path / "p"), "--build")
    assert code == 1 and "building the firmware with make" in err, err
    code, out, err = _main(capsys, str(DIGITS), "-o", str(tmp_path / "q"), "--build", "-q")
    assert "building the firmware" not in err


# ---------------------------------------------------------------- every command

@pytest.mark.parametrize("command", list(cli.SUBCOMMANDS))
def test_every_command_takes_json_and_quiet(capsys, command):
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "--json" in text and "--quiet" in text


def test_run_and_sidecar_print_json_documents(capsys, tmp_path):
    sample = DIGITS.parent / "sample.npy"
    code, out, _ = _main(capsys, "run", str(DIGITS), "--input", str(sample), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["outputs"]["fc/output"]["shape"] == [1, 10, 1, 1]
    code, out, _ = _main(capsys, "sidecar", str(DIGITS), "--json")
    assert code == 0 and json.loads(out)["sidecar"].startswith("---")
    code, out, err = _main(capsys, "run", str(DIGITS), "--input", str(sample), "-o",
                           str(tmp_path / "y.npy"), "-q")
    assert code == 0 and out == "" and err == "" and (tmp_path / "y.npy").is_file()


def test_convert_verify_failure_under_json_says_so_in_the_document(capsys, tmp_path,
                                                                    monkeypatch):
    from types import SimpleNamespace

    failed = SimpleNamespace(passed=False, exit_code=1, data={"verdict": "FAIL"},
                             text="FAIL: ...")
    monkeypatch.setattr(cli, "_verify_written", lambda result: failed)
    code, out, err = _main(capsys, str(DIGITS), "-o", str(tmp_path / "p"), "--verify",
                           "--json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["exit_code"] == 1
    assert doc["verify"]["verdict"] == "FAIL" and "layers" in doc
