"""The layer x exporter matrix (issue 34, item 6): every layer kind the accelerator runs,
written by every exporter a user has (models committed under models/, made by
make_torch.py, make_keras.py and make_brevitas.py in their own environments; no
framework is needed here), converted as a user converts it, verified, and compared with
the source's own outputs (cells.py says how, and what each outcome means).

Each cell's outcome is recorded in expected.json; a cell whose outcome changes, for the
better or the worse, fails here, so that a change of the converter shows up as a diff of
that file. Re-record every cell (and README.md's table) with

    python -m tests.matrix.record -j 2

By default a fixed representative subset runs (every row and every column at least
once, and the forms issue 34 names); `pytest tests/matrix --matrix-all` runs every cell.
"""
from __future__ import annotations

import json

import pytest

from . import catalogue as cat
from . import cells, table

pytest.importorskip("onnxruntime")
EXPECTED = json.loads(cat.EXPECTED.read_text())
RECORD = "python -m tests.matrix.record --column {c} --row {r}"

# issue 34's named forms: 1-D models and upsampling from torch's default exporter and
# Keras, TFLite int8 I/O, a strided Keras Conv1D, Keras Conv2DTranspose
NAMED = {("torch_dynamo", "global_avgpool1d"), ("keras", "maxpool1d"),
         ("keras", "conv1d_stride2"), ("keras", "upsample2d"),
         ("torch_dynamo", "upsample2d"), ("tflite_int8_io", "conv2d_3x3"),
         ("keras", "convtranspose2d"), ("brevitas_qonnx", "add")}


def _representative() -> set[tuple[str, str]]:
    """Row k with column k mod (number of columns), and NAMED: every row and every
    column, a few seconds each."""
    cols = [c.name for c in cat.COLUMNS]
    return {(cols[k % len(cols)], r.name) for k, r in enumerate(cat.ROWS)} | NAMED


def _params():
    chosen = _representative()
    for c in cat.COLUMNS:
        for r in cat.ROWS:
            marks = [] if (c.name, r.name) in chosen else [pytest.mark.matrix_full]
            yield pytest.param(c.name, r.name, marks=marks, id=f"{c.name}-{r.name}")


@pytest.mark.parametrize(("col", "row"), list(_params()))
def test_cell_outcome_is_the_recorded_one(col: str, row: str) -> None:
    want = EXPECTED[col][row]
    got = cells.run(col, row)
    assert got.outcome == want, (
        f"{col} / {row}: recorded {want!r}, now {got.outcome!r} ({got.detail}); if the "
        f"change is intended, re-record: {RECORD.format(c=col, r=row)}")


def test_every_cell_is_recorded() -> None:
    assert set(EXPECTED) == {c.name for c in cat.COLUMNS}
    for c in cat.COLUMNS:
        assert set(EXPECTED[c.name]) == {r.name for r in cat.ROWS}, c.name


def test_every_cell_has_a_model_or_a_reason() -> None:
    """A cell is a committed model with its source outputs, or the framework cannot
    write it (n/a, with the reason), or the exporter failed on it (its error kept)."""
    import numpy as np

    for c in cat.COLUMNS:
        outputs = np.load(c.outputs)
        made = cells.not_made(c.name)
        for r in cat.ROWS:
            if cat.not_expressible(c, r):
                assert not cat.model_path(c.name, r.name).exists(), (c.name, r.name)
                assert EXPECTED[c.name][r.name] == "n/a"
            elif r.name in made:
                assert made[r.name] and EXPECTED[c.name][r.name] == "not made"
            else:
                assert cat.model_path(c.name, r.name).is_file(), (c.name, r.name)
                assert r.name in outputs.files, (c.name, r.name)


def test_readme_table_is_generated_from_the_recorded_outcomes() -> None:
    text = table.README.read_text()
    assert table.BEGIN in text and table.END in text
    assert table.splice(text, table.render(EXPECTED)) == text, \
        "README.md's matrix table is stale: python -m tests.matrix.table"


def test_the_table_shows_every_cell() -> None:
    block = table.render(EXPECTED)
    for r in cat.ROWS:
        line = next(ln for ln in block.splitlines() if ln.startswith(f"| {r.what} |"))
        assert line.count("|") == len(cat.COLUMNS) + 2, line


def test_the_committed_files_stay_small() -> None:
    """Tiny models: the matrix's files together stay well under the few MB the
    repository can carry."""
    total = sum(p.stat().st_size for p in cat.HERE.rglob("*") if p.is_file()
                and p.suffix in (".onnx", ".npz", ".json"))
    assert total < 4_000_000, total


def _run_file(col: cat.Column, r: cat.Row, x):
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(str(cat.model_path(col.name, r.name)), options,
                                providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    dtype = {"tensor(int8)": np.int8, "tensor(uint8)": np.uint8}.get(inp.type, np.float32)
    return np.concatenate([sess.run(None, {inp.name: x[k:k + 1].astype(dtype)})[0]
                           for k in range(len(x))]).astype(np.float64)


@pytest.mark.parametrize("col", [c.name for c in cat.COLUMNS if c.name != "brevitas_qonnx"])
def test_the_committed_file_computes_the_source_outputs(col: str) -> None:
    """Each committed ONNX file, run on onnxruntime with the held-out inputs in the
    layout the harness feeds it, gives the outputs its source tool computed: the files,
    the stored outputs and the harness' idea of the input layout agree. Float sources
    within float16 storage; quantized sources within one output code of their tool's
    own kernels (TFLite's and Brevitas' rounding, onnxruntime's), on nearly all values.
    (A QONNX file needs the qonnx package to run; it is its QCDQ twin's model.)"""
    import numpy as np

    c = cat.column(col)
    made = cells.not_made(col)
    for r in cat.ROWS:
        if cat.not_expressible(c, r) or r.name in made:
            continue
        x = cells.inputs(c, r, "held")
        got = _run_file(c, r, x).reshape(len(x), -1)
        if c.name == "tflite_int8_io":  # int8 codes out: in float units as TFLite's
            scale, zero = np.load(c.outputs)[f"{r.name}.output_q"]
            got = (got - zero) * scale
        want = cells.source_outputs(c, r).reshape(len(x), -1)
        assert got.shape == want.shape, (col, r.name)
        scale = float(np.abs(want).max()) or 1.0
        if not c.quantized:
            np.testing.assert_allclose(got, want, atol=2e-3 * scale, err_msg=r.name)
            continue
        step = _code(c, r, want)
        off = np.abs(got - want) > step * 1.01 + 2e-3 * scale
        assert off.mean() <= 0.02, (col, r.name, float(off.mean()))


def _code(c: cat.Column, r: cat.Row, want) -> float:
    """One output code of a quantized source: the output quantizer's scale (TFLite int8
    I/O: recorded; else the smallest step between its distinct outputs)."""
    import numpy as np

    if c.name == "tflite_int8_io":
        return float(np.load(c.outputs)[f"{r.name}.output_q"][0])
    if c.family == "brevitas":
        return cells.output_step(cat.model_path("brevitas_qcdq", r.name)) or 0.0
    values = np.unique(np.round(want.reshape(-1), 6))
    gaps = np.diff(values)
    return float(gaps[gaps > 1e-6].min()) if gaps.size else 0.0


def test_a_hint_is_followed_one_proposal_at_a_time() -> None:
    hint = ("use groups=1, or target MAX78002 for depthwise convolutions; or pass "
            "--cpu-fallback: the Arm core runs the layers the accelerator refuses")
    assert cells.follow(hint, "MAX78000") == [
        ("cpu-fallback", {"cpu_fallback": True}, "MAX78000"),
        ("MAX78002", {}, "MAX78002")]
    assert cells.follow("use dilation 1", "MAX78000") == []
    keras, tflite = cat.column("keras"), cat.column("tflite_int8_io")
    row = cat.row("conv2d_3x3")
    assert cells.sibling(tflite, row, "export the float model") == ("keras", "conv2d_3x3")
    assert cells.sibling(keras, row, "export the float model") is None
    float_io = ("export the model with a float input and output: TFLite's converter "
                "without `inference_input_type` / `inference_output_type`")
    assert cells.sibling(tflite, row, float_io) == ("tflite_float_io", "conv2d_3x3")
    assert cells.sibling(cat.column("tflite_float_io"), row, float_io) is None
    assert cells.sibling(keras, cat.row("upsample2d"),
                         "use ConvTranspose2d (3x3, stride 2) to upsample") == \
        ("keras", "convtranspose2d")


@pytest.mark.parametrize("damage", ["negated", "rolled", "halved"])
def test_the_comparison_catches_a_wrong_result(damage: str, monkeypatch) -> None:
    """The tolerance can fail: a cell that converts, compared with damaged source
    outputs (another sign, another order of values, another scale), is a loss."""
    import numpy as np

    real = cells.source_outputs

    def damaged(col, r):
        y = real(col, r)
        if damage == "negated":
            return -y
        if damage == "rolled":
            return np.roll(y.reshape(len(y), -1), 1, axis=1).reshape(y.shape)
        return y / 2

    assert EXPECTED["torch_ts"]["conv2d_stride2"] == "converts"
    monkeypatch.setattr(cells, "source_outputs", damaged)
    assert cells.run("torch_ts", "conv2d_stride2").outcome == "loss"


def test_an_output_layout_left_to_the_host_is_undone_before_comparing() -> None:
    """A converted model that records `ai8x.output_perm` (its output channels-first,
    the source's channels-last) is compared in the source's layout."""
    import numpy as np
    import onnx

    y = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    model = onnx.ModelProto()
    assert cells._source_layout(model, y) is y
    entry = model.metadata_props.add()
    entry.key, entry.value = "ai8x.output_perm", "[0, 2, 3, 1]"
    np.testing.assert_array_equal(cells._source_layout(model, y), y.transpose(0, 2, 3, 1))
