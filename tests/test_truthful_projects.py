"""Issue 35: what the user asked for is not ignored, and the generated files tell the
truth.

A final Sigmoid (or Softmax, LogSoftmax), which the accelerator does not compute, was
dropped with exit 0; now it is refused, and every way out the refusal's hint names is
taken here and works. The project README named the network's class (`DigitsNet.onnx`)
as its source, left out files of the project (the CPU fallback's) and described the
plain known-answer test when `--energy` had rewritten main.c.
"""
from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest
from onnx import helper

from onnx2ai8x.cli import main

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.onnx"
FLOAT = ROOT / "examples" / "digits_float"


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _with_head(tmp_path: Path, op: str, **attrs) -> Path:
    """digits_float with `op` appended after its logits."""
    model = onnx.load(str(FLOAT / "digits_float.onnx"))
    out = model.graph.output[0]
    model.graph.node.append(helper.make_node(op, [out.name], ["head"], name="head", **attrs))
    out.name = "head"
    path = tmp_path / f"{op.lower()}_head.onnx"
    onnx.save(model, str(path))
    return path


def _convert(capsys, model: Path, out: Path, *extra) -> tuple[int, str, str]:
    return _cli(capsys, model, "--device", "MAX78000", "--calibration",
                FLOAT / "calibration.npy", "-o", out, "-q", *extra)


@pytest.mark.parametrize("op, attrs", [("Sigmoid", {}), ("Softmax", {"axis": 1}),
                                       ("LogSoftmax", {"axis": 1})])
def test_a_head_the_accelerator_does_not_compute_is_refused_and_each_hint_works(
        tmp_path, capsys, op, attrs):
    model = _with_head(tmp_path, op, **attrs)
    code, _, err = _convert(capsys, model, tmp_path / "refused")
    assert code == 1 and "float.cpu-tail" in err and f"ends in {op}" in err, err
    assert not (tmp_path / "refused").exists()
    for command in ("check", "quantize"):  # the other commands agree
        extra = ["-o", tmp_path / "q.onnx"] if command == "quantize" else []
        code, _, err2 = _cli(capsys, command, model, "--device", "MAX78000",
                             "--calibration", FLOAT / "calibration.npy", *extra)
        assert code == 1 and "float.cpu-tail" in err2, err2
    hint = err[err.index("hint:"):]
    flags = sorted(set(re.findall(r"--[a-z][a-z-]+", hint)) - {"--calibration"})
    assert "--cpu-tail" in flags
    assert ("--cpu-fallback" in flags) == (op != "LogSoftmax")  # the CPU head has none
    assert ("--softmax" in flags) == (op == "Softmax")
    for flag in flags:  # every way out the hint names
        out = tmp_path / flag.strip("-")
        code, _, err = _convert(capsys, model, out, flag)
        assert code == 0, (flag, err)
        readme, main_c = (out / "README.md").read_text(), (out / "main.c").read_text()
        told = "What your application must add" in readme
        assert told == (flag == "--cpu-tail"), flag
        if flag == "--cpu-tail":
            assert f"The model ends in {op}" in readme
            assert f"application must apply {op}" in " ".join(main_c.split())
        if flag == "--cpu-fallback":
            assert (out / "cpu_layers.c").is_file()
            assert f"must apply {op}" not in " ".join(main_c.split())


def _listed(readme: str) -> set[str]:
    """The names the README's file table gives (in backticks)."""
    table = [line for line in readme.splitlines() if line.startswith("| `")]
    return {name for line in table for name in re.findall(r"`([^`]+)`", line.split("|")[1])}


def _entries(project: Path) -> set[str]:
    return {p.name + ("/" if p.is_dir() else "") for p in project.iterdir()}


@pytest.mark.parametrize("extra", [(), ("--softmax",), ("--riscv",), ("--energy",),
                                   ("--no-kat", "--forever")])
def test_the_readme_names_the_model_file_and_every_file(tmp_path, capsys, extra):
    out = tmp_path / "p"
    code, _, err = _cli(capsys, DIGITS, "--device", "MAX78000", "-o", out, "-q", *extra)
    assert code == 0, err
    readme = (out / "README.md").read_text()
    intro = readme.split("| file |")[0]
    assert "`digits.onnx`" in intro and "`DigitsNet.onnx`" not in readme
    assert _entries(out) <= _listed(readme), _entries(out) - _listed(readme)
    energy = "Weight loading (100x)" in readme and "--energy" in readme
    assert energy == ("--energy" in extra)
    assert ("Weight loading (100x)" in (out / "main.c").read_text()) == energy
    assert ("--forever" in readme) == ("--forever" in extra)
    assert ("--no-kat" in readme) == ("--no-kat" in extra)


def test_the_cpu_fallback_readme_names_the_cpu_files(tmp_path, capsys):
    out = tmp_path / "p"
    code, _, err = _convert(capsys, FLOAT / "digits_cpu_stem.onnx", out, "--cpu-fallback")
    assert code == 0, err
    assert (out / "cpu_layers.c").is_file() and (out / "digits_cpu_stem_with_cpu.onnx").is_file()
    readme = (out / "README.md").read_text()
    assert _entries(out) <= _listed(readme), _entries(out) - _listed(readme)
