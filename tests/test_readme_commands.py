"""The README's `onnx2ai8x` command blocks run as written (issue 25).

The commands are read from README.md itself (indented or fenced blocks whose line starts
with `onnx2ai8x`, backslash continuations joined), so the README cannot drift from what
the tool accepts. They run in order, in a temporary copy of the README and the examples,
the way a reader pastes them into a shell at the top of the checkout. Inline mentions
with placeholder files (`model.onnx`, `x.npy`) are descriptions, not commands to paste,
and are not run.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_commands(text: str) -> list[str]:
    """Every `onnx2ai8x ...` line of a code block (indented by four or more spaces, or
    inside a ``` fence), with its continuation lines."""
    out: list[str] = []
    fenced = False
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("```"):
            fenced = not fenced
            i += 1
            continue
        indent = len(line) - len(line.lstrip(" "))
        in_block = fenced or (indent >= 4 and not line.lstrip().startswith(("-", "*")))
        if in_block and line.strip().startswith("onnx2ai8x "):
            command = line.strip()
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1].rstrip() + " " + lines[i].strip()
            out.append(command)
        i += 1
    return out


def test_the_extractor_finds_the_readme_commands() -> None:
    commands = readme_commands(README.read_text())
    assert "onnx2ai8x examples/digits/digits.onnx --device MAX78000" in commands
    assert any(c.startswith("onnx2ai8x sidecar ") for c in commands)
    assert any("--sidecar tuned.yaml" in c for c in commands)
    assert any(c.startswith("onnx2ai8x quantize ") for c in commands)
    assert all("\\" not in c for c in commands)


@pytest.mark.skipif(not (ROOT / "examples" / "digits" / "digits.onnx").is_file(),
                    reason="examples absent")
def test_readme_commands_run_as_written(tmp_path: Path) -> None:
    shutil.copy(README, tmp_path / "README.md")
    shutil.copytree(ROOT / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # generated projects from an earlier run in the checkout are not part of the copy
    for generated in (tmp_path / "examples" / "digits" / "digits",
                      tmp_path / "examples" / "digits_float" / "digits_float"):
        shutil.rmtree(generated, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    commands = readme_commands(README.read_text())
    assert len(commands) >= 4
    for command in commands:
        args = shlex.split(command)
        assert args[0] == "onnx2ai8x"
        proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", *args[1:]],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, command
        if " -o " in f" {command} ":
            target = args[args.index("-o") + 1]
            assert (tmp_path / target).exists(), command
            assert f"wrote {target}" in proc.stdout, (command, proc.stdout)
