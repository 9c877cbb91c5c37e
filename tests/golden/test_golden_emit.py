"""Golden emission tests: register functions, then whole C projects, against the vendor's
recorded traces (golden `expected.json.gz`, compared like ../shared/tools/c2trace.py)."""
from __future__ import annotations

import gzip
import json

import pytest

from onnx2ai8x.emit.registers import register_program
from tests.conftest import GOLDEN, golden_params
from tests.golden.case_placement import case_options, case_placement
from tests.lowering import lowered

ORDERED = {"cnn_start", "cnn_stop", "cnn_continue", "CNN_ISR"}


def _expected(name: str) -> dict:
    with gzip.open(GOLDEN / name / "expected.json.gz", "rt") as handle:
        return json.load(handle)


def _final(writes: list) -> dict[int, int]:
    """Final value per address (c2trace's rule for unordered functions)."""
    state: dict[int, int] = {}
    for op, addr, val in writes:
        cur = state.get(addr, 0)
        state[addr] = val if op == "=" else (cur | val if op == "|=" else cur & val)
    return state


@pytest.mark.parametrize("name", golden_params())
def test_register_functions(name: str, golden_dir) -> None:
    case = golden_dir / name
    placement = case_placement(case)
    options = case_options(case)
    expected = _expected(name)["functions"]
    program = register_program(lowered(placement, options))
    for fn, writes in program.functions().items():
        mine = [[w.op, w.address, w.value] for w in writes]
        gold = expected.get(fn, [])
        if fn in ORDERED:
            assert mine == gold, f"{fn}: write sequence differs"
            continue
        a, b = _final(mine), _final(gold)
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        assert not diff, f"{fn}: " + ", ".join(
            f"0x{k:08x}: {a.get(k, 'absent')!s} != {b.get(k, 'absent')!s}" for k in diff[:8])


def _c2trace():
    import importlib.util

    path = GOLDEN.parent / "tools" / "c2trace.py"
    if not path.is_file():
        pytest.skip("../shared/tools/c2trace.py is absent")
    spec = importlib.util.spec_from_file_location("c2trace", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", golden_params())
def test_unload_code(name: str, golden_dir, tmp_path) -> None:
    """cnn_unload() reads the same addresses, in the same blocks, as the vendor's."""
    from onnx2ai8x.emit.project import unload_text
    from onnx2ai8x.emit.unload import plan_unload

    c2trace = _c2trace()
    case = golden_dir / name
    placement = case_placement(case)
    text = unload_text(plan_unload(placement, case_options(case)))
    (tmp_path / "cnn.c").write_text(text)
    assert c2trace.trace(tmp_path)["unload"] == _expected(name)["unload"]


def _reference_outputs(case, tmp_path) -> list:
    """The imported ONNX run on the sample (the project's reference numerics)."""
    pytest.importorskip("torch")
    import numpy as np

    import custom_ops
    from onnx2ai8x.runner import fit_to_input
    from tests.golden.pipeline import imported_model

    session = custom_ops.session(str(imported_model(case.name, tmp_path)))
    inp = session.get_inputs()[0]
    x = fit_to_input(np.load(case / "sample.npy"), len(inp.shape), case.name)
    return [np.asarray(o)[0] for o in session.run(None, {inp.name: x})]


@pytest.mark.parametrize("name", golden_params())
def test_project_trace(name: str, golden_dir, tmp_path) -> None:
    """The whole C project is register-exact with the vendor's (c2trace compare)."""
    import numpy as np

    from onnx2ai8x.emit.project import project_data, write_project

    c2trace = _c2trace()
    case = golden_dir / name
    placement = case_placement(case)
    sample = np.load(case / "sample.npy")
    outputs = _reference_outputs(case, tmp_path)
    options = case_options(case)
    hw = lowered(placement, options)
    data = project_data(hw, sample, outputs, options)
    out = tmp_path / "project"
    write_project(hw, out, options=options,
                  sample=sample, outputs=outputs, data=data)
    trace, expected = c2trace.trace(out), _expected(name)
    diffs = c2trace.compare(trace, expected)
    assert not diffs, "\n".join(diffs)
