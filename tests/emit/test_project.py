"""The C project writer: files, the traced contents, host compile check, atomic writes."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x.emit.project import ProjectData, write_project
from onnx2ai8x.emit.registers import register_program
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.options import EmitOptions
from tests.conftest import GOLDEN
from tests.emit.synthetic import no_bias_memory, one_conv
from tests.golden import pipeline
from tests.lowering import lowered

C2TRACE = GOLDEN.parent / "tools" / "c2trace.py"
STUBS = Path(__file__).parent / "sdk_stubs"

KERNELS = ((0x50180000, (0x01020304, 0x05060708, 0x090A0B0C)), (0x50184000, (0xAABBCCDD,)))
BIAS = ((0x50108000, (1, 2, 255, 128)),)
INPUT = ((0x50400000, tuple(range(64))),)
EXPECTED = ((0x50402000, 0xFFFFFFFF, (7, 8, 9)),)


def _data(placement) -> ProjectData:
    return ProjectData(kernels=KERNELS, bias=BIAS, inputs=INPUT, expected=EXPECTED,
                       memory=no_bias_memory(placement))


def _write(tmp_path: Path, options: EmitOptions | None = None, **kw) -> Path:
    options = options or EmitOptions()
    pl = one_conv(**kw)
    out = tmp_path / "proj"
    sample = np.arange(4 * 8 * 8).reshape(4, 8, 8) % 256 - 128
    write_project(lowered(pl, options), out, options=options, sample=sample, outputs=[],
                  data=_data(pl))
    return out


def _tree(project: Path) -> dict[str, bytes]:
    """Every file of a project (subfolders included) by relative path."""
    return {p.relative_to(project).as_posix(): p.read_bytes()
            for p in sorted(project.rglob("*")) if p.is_file()}


def _trace(project: Path) -> dict:
    if not C2TRACE.is_file():
        pytest.skip("../shared/tools/c2trace.py is absent")
    return pipeline.trace_of(project)


def test_project_files(tmp_path: Path) -> None:
    out = _write(tmp_path)
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {"cnn.c", "cnn.h", "main.c", "weights.h", "sampledata.h", "sampleoutput.h",
            "Makefile", "project.mk", "README.md", ".vscode/settings.json",
            ".vscode/tasks.json", ".vscode/launch.json", ".vscode/flash.gdb"} <= names
    assert "softmax.c" not in names
    assert "CNN_NUM_OUTPUTS 4" in (out / "cnn.h").read_text()
    for f in names:
        assert "ai8xize" not in (out / f).read_text().lower()


def test_softmax_adds_softmax_c(tmp_path: Path) -> None:
    out = _write(tmp_path, EmitOptions(softmax=True))
    assert (out / "softmax.c").is_file()
    assert "softmax_layer" in (out / "main.c").read_text()


def test_trace_holds_what_was_emitted(tmp_path: Path) -> None:
    out = _write(tmp_path)
    trace = _trace(out)
    assert trace["kernels"] == [[a, list(w)] for a, w in KERNELS]
    assert trace["bias"] == [[a, list(b)] for a, b in BIAS]
    assert trace["input"] == [[a, list(w)] for a, w in INPUT]
    assert trace["expected_output"] == [[a, m, list(w)] for a, m, w in EXPECTED]
    pl = one_conv()
    prog = register_program(lowered(pl), no_bias_memory(pl))
    for fn, writes in prog.functions().items():
        assert trace["functions"][fn] == [[w.op, w.address, w.value] for w in writes]
    # 4 channels x 8 x 8 bytes of 8-bit output, read from processors 0-3's memory
    assert trace["unload"][0][0] == 0x50400000 + 0x2000


def test_fifo_project_loads_no_memory(tmp_path: Path) -> None:
    out = _write(tmp_path, EmitOptions(fifo=True), streaming=True)
    trace = _trace(out)
    assert trace["input"] == []
    main = (out / "main.c").read_text()
    assert "0x50000008" in main  # FIFO 0 data register
    assert "cnn_start();\n  load_input();" in main


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.parametrize("options", [EmitOptions(), EmitOptions(softmax=True, timer=0),
                                     EmitOptions(fifo=True, boost="2.5"),
                                     EmitOptions(mlator=True),
                                     EmitOptions(no_unload=True, mlator=True)])
def test_generated_c_compiles(tmp_path: Path, options: EmitOptions) -> None:
    out = _write(tmp_path, options, streaming=options.fifo)
    for source in sorted(out.glob("*.c")):
        # The SDK's build defines the part (-DMAX78000); cnn.h refuses any other.
        proc = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                               "-DMAX78000", "-I", str(STUBS), "-I", str(out), str(source)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_existing_directory_needs_overwrite(tmp_path: Path) -> None:
    out = _write(tmp_path)
    marker = out / "user-file.txt"
    marker.write_text("keep")
    with pytest.raises(Ai8xError, match="already exists"):
        _write(tmp_path)
    assert marker.is_file()
    pl = one_conv()
    write_project(lowered(pl), out, options=EmitOptions(), sample=np.zeros((4, 8, 8)),
                  outputs=[], data=_data(pl), overwrite=True)
    # issue 35: a file the manifest does not list is the user's, and is kept
    assert marker.read_text() == "keep" and (out / "cnn.c").is_file()


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    pl = one_conv()
    # the fast FIFO without the RISC-V core fails while rendering, before anything is written
    with pytest.raises(Ai8xError, match="RISC-V"):
        options = EmitOptions(fast_fifo=True)
        write_project(lowered(pl, options), tmp_path / "proj", options=options,
                      sample=np.zeros((4, 8, 8)), outputs=[], data=_data(pl))
    assert not (tmp_path / "proj").exists()


def test_bad_boost_pin_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(Ai8xError, match="PORT.PIN"):
        _write(tmp_path, EmitOptions(boost="x"))


def test_output_is_deterministic(tmp_path: Path) -> None:
    a = _write(tmp_path / "a")
    b = _write(tmp_path / "b")
    assert _tree(a) == _tree(b)


@pytest.mark.parametrize("mexpress", [True, False])
def test_compact_weights_writes_the_same_project(tmp_path: Path, mexpress: bool) -> None:
    # An SDK project always loads weights from the packed KERNELS table (seed 000,
    # "--compact-weights ... memcpy"); the vendor tool's embedded output is the same
    # with and without the flag.
    a = _write(tmp_path / "a", EmitOptions(mexpress=mexpress))
    b = _write(tmp_path / "b", EmitOptions(mexpress=mexpress, compact_weights=True))
    assert _tree(a) == _tree(b)


@pytest.mark.parametrize("mlator", [False, True])
def test_no_unload_leaves_cnn_unload_out(tmp_path: Path, mlator: bool) -> None:
    # The vendor tool writes cnn_unload() only when something calls it (--no-unload drops
    # it, --softmax keeps it): no mlator register writes, no unload reads in the trace.
    out = _write(tmp_path / "plain", EmitOptions(no_unload=True, mlator=mlator))
    assert "cnn_unload" not in (out / "cnn.c").read_text()
    assert "cnn_unload" not in (out / "cnn.h").read_text()
    assert "cnn_unload" not in (out / "main.c").read_text()
    trace = _trace(out)
    assert trace["unload"] == [] and "cnn_unload" not in trace["functions"]
    kept = _write(tmp_path / "softmax", EmitOptions(no_unload=True, softmax=True,
                                                     mlator=mlator))
    assert "int cnn_unload(" in (kept / "cnn.c").read_text()
    kept_trace = _trace(kept)
    if mlator:  # reads through the mlator, programmed by register writes
        assert kept_trace["functions"]["cnn_unload"]
    else:
        assert kept_trace["unload"] != []
