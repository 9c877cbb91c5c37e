"""The layers are enforced (issue 27): `lint-imports` checks the contracts in
pyproject.toml (the stages' layers, ai8xsim independent of the converter, no import
cycles between sibling modules). Skipped where import-linter is not installed (it is in
the dev extra; CI installs it)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _lint_imports() -> str:
    found = shutil.which("lint-imports") or shutil.which(
        "lint-imports", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("import-linter is not installed (pip install import-linter)")
    return found


def test_import_contracts_are_kept():
    env = dict(os.environ, PYTHONPATH=str(REPO))  # this checkout's packages, not another's
    run = subprocess.run([_lint_imports(), str(REPO / "pyproject.toml"),
                          "--no-cache"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def test_contracts_would_catch_an_upward_import(tmp_path):
    """The contract fails when a lower layer imports a higher one: a copy of the tree in
    which legalize imports the driver."""
    lint = _lint_imports()
    for name in ("onnx2ai8x", "custom_ops", "ai8xsim"):
        shutil.copytree(REPO / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "templates"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    facts = tmp_path / "onnx2ai8x" / "legalize" / "facts.py"
    facts.write_text(facts.read_text() + "\n\ndef _up():\n    from ..convert import plan\n"
                     "    return plan\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    run = subprocess.run([lint, "--no-cache"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode != 0
    assert "onnx2ai8x.legalize.facts -> onnx2ai8x.convert" in run.stdout


def test_design_notes_name_every_layer_of_the_contract():
    """docs/design.md's layer table lists every module the layers contract states, so
    the notes cannot fall behind the contract."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if c["type"] == "layers")
    modules = {m.strip().removeprefix("onnx2ai8x.") for layer in contract["layers"]
               for m in layer.split(":")}
    notes = (REPO / "docs" / "design.md").read_text()
    table = notes[notes.index("| layer | modules |"):]
    table = table[:table.index("\n\n")]
    missing = sorted(m for m in modules if f"`{m}`" not in table)
    assert missing == []
