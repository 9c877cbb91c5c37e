"""The simulator is an independent second opinion: it must not share the converter's
mapping, emission, sidecar, import or legalization code (issue 14)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ai8xsim

PACKAGE = Path(ai8xsim.__file__).parent
FORBIDDEN = ("onnx2ai8x.map", "onnx2ai8x.emit", "onnx2ai8x.sidecar", "onnx2ai8x.importer",
             "onnx2ai8x.legalize")


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def test_no_module_of_the_simulator_imports_the_converter_stages() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) >= 5
    for path in files:
        for name in _imports(path):
            assert not name.startswith(FORBIDDEN), f"{path.name} imports {name}"
            # stricter than the rule: nothing of the converter at all
            assert not name.startswith("onnx2ai8x"), f"{path.name} imports {name}"


def test_running_the_simulator_loads_no_converter_stage(tmp_path: Path) -> None:
    code = ("import sys, ai8xsim.verify, ai8xsim.engine, ai8xsim.creader\n"
            "from ai8xsim.verify import execute\n"
            f"execute({str(tmp_path)!r})\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith('onnx2ai8x'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"converter modules loaded: {out}"
