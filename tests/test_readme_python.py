"""The README's Python examples run as written (issue 27, "Python API").

Every ```python block of README.md runs as its own script, in order, in a temporary copy
of the README and the examples (the way a reader pastes it into a file at the top of the
checkout), with this checkout's packages. A block that imports torch is skipped where
torch is not installed; the others must run without it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_python_blocks(text: str) -> list[str]:
    """The code of every ```python block (indented blocks dedented)."""
    found = re.finditer(r"^( *)```python\n(.*?)^\1```[ \t]*$", text, re.M | re.S)
    return [textwrap.dedent(m.group(2)) for m in found]


def test_the_extractor_finds_the_api_examples() -> None:
    blocks = readme_python_blocks(README.read_text())
    api = [b for b in blocks if "onnx2ai8x" in b]
    assert len(api) >= 3
    assert any("for width in" in b and "onnx2ai8x.check(" in b for b in api)
    assert any("ProcessPoolExecutor" in b for b in api)


def _has_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


@pytest.mark.skipif(not (ROOT / "examples" / "digits" / "digits.onnx").is_file(),
                    reason="examples absent")
@pytest.mark.parametrize("index", range(len(readme_python_blocks(README.read_text()))))
def test_readme_python_runs_as_written(index: int, tmp_path: Path) -> None:
    code = readme_python_blocks(README.read_text())[index]
    if re.search(r"^\s*(import torch|from torch|import ai8x_torch)", code, re.M) and \
            not _has_torch():
        pytest.skip("torch is not installed")
    shutil.copy(README, tmp_path / "README.md")
    shutil.copytree(ROOT / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns("__pycache__", "digits", "digits_float"))
    shutil.copytree(ROOT / "examples" / "digits", tmp_path / "examples" / "digits",
                    ignore=shutil.ignore_patterns("__pycache__", "digits"),
                    dirs_exist_ok=True)
    shutil.copytree(ROOT / "examples" / "digits_float",
                    tmp_path / "examples" / "digits_float",
                    ignore=shutil.ignore_patterns("__pycache__", "digits_float"),
                    dirs_exist_ok=True)
    script = tmp_path / f"readme_example_{index}.py"
    script.write_text(code)
    before = {p for p in tmp_path.rglob("*")}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{code}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    if "onnx2ai8x.check(" in code and "convert(" not in code:
        # checking writes nothing
        assert {p for p in tmp_path.rglob("*")} == before
        assert "cycles" in proc.stdout
    if "api.verify(" in code:
        assert proc.stdout.strip().endswith("PASS")
