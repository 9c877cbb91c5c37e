"""Whole pipeline on the golden corpus, as a user runs it.

vendor project --import-izer--> ai8x-ONNX --onnx2ai8x (separate process)--> C project.

- With the case's network.yaml as --sidecar and its vendor_args, the project's trace
  equals the vendor tool's (c2trace "traces are equal").
- Without a sidecar (automatic mapping), the known-answer values equal the golden values.
"""
from __future__ import annotations

import filecmp
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import GOLDEN, golden_params
from tests.golden import pipeline

pytestmark = pytest.mark.skipif(not GOLDEN.is_dir(), reason="golden corpus absent")

# Cases whose trace is known to differ, with the reason. Keep this list short and honest.
REGISTER_EXCEPTIONS: dict[str, str] = {}


@pytest.mark.parametrize("name", golden_params())
def test_sidecar_conversion_is_register_exact(name: str, tmp_path: Path) -> None:
    out, proc = pipeline.convert_case(name, tmp_path, sidecar=True)
    assert proc.returncode == 0, proc.stderr
    cmp = pipeline.c2trace_compare(out, pipeline.expected_trace(name), tmp_path)
    if name in REGISTER_EXCEPTIONS:
        pytest.xfail(REGISTER_EXCEPTIONS[name])
    assert "traces are equal" in cmp.stdout, cmp.stdout + cmp.stderr


@pytest.mark.parametrize("name", golden_params())
def test_auto_mapping_keeps_the_known_answer(name: str, tmp_path: Path) -> None:
    """Without a sidecar the mapping is ours, so the known answer lives elsewhere in data
    memory; unpacked with our placement it must give the reference's values, which
    test_golden_reference shows are the vendor's."""
    import custom_ops
    from custom_ops.builder import build_model
    from onnx2ai8x.convert import plan
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.emit.unload import known_answer_layers
    from onnx2ai8x.network import output_layers
    from tests.golden.case_network import compare_words, output_words

    case = pipeline.case_json(name)
    model = pipeline.imported_model(name, tmp_path)
    # with the case's options: --fifo asks the inferred mapping for FIFO input
    options = pipeline.cli_options(case["vendor_args"])
    out, proc = pipeline.convert_case(name, tmp_path, sidecar=False)
    assert proc.returncode == 0, proc.stderr
    ours = pipeline.trace_of(out)

    # deterministic: the mapping just written
    mapped = plan(model, get_device(case["device"]), None, fifo="--fifo" in options)
    net, placement = mapped.network, mapped.placement
    kat = known_answer_layers(placement)
    sample = np.load(GOLDEN / name / "sample.npy").reshape(net.input_shape)
    values = custom_ops.run(build_model(net, outputs=kat), sample)
    want: dict[int, int] = {}
    for ll, v in zip(kat, values, strict=True):
        pl, lay = placement.layers[ll], net.layers[ll]
        want.update(output_words(np.asarray(v)[0], case["device"], pl.out_offset,
                                 pl.output_processor_map, lay.output_width, pl.write_gap))
    assert ours["expected_output"], "the project has no known-answer test"
    assert compare_words(ours["expected_output"], want) == []
    checked = sum(len(words) for _, _, words in ours["expected_output"])
    assert checked == len(want)  # every output word is checked, none twice

    # the output layers' values are the imported model's outputs (the vendor's known
    # answer; after a stated `simulated_sequence: stop` the final layer is not one)
    session = custom_ops.session(model)
    results = session.run(None, {session.get_inputs()[0].name: sample[np.newaxis].astype(
        np.int8)})
    outputs = output_layers(net)
    assert len(results) >= len(outputs) > 0
    for ll, result in zip(outputs, results, strict=False):
        assert np.array_equal(np.asarray(values[kat.index(ll)]), np.asarray(result))


def test_output_is_deterministic_and_overwrite_guarded(tmp_path: Path) -> None:
    name = "ai85-mnist"
    case = pipeline.case_json(name)
    model = pipeline.imported_model(name, tmp_path)
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        proc = pipeline.convert(model, case["device"], out,
                                "--sample-input", str(GOLDEN / name / "sample.npy"))
        assert proc.returncode == 0, proc.stderr
    names = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(second).as_posix()
                           for p in second.rglob("*") if p.is_file())
    assert ".vscode/settings.json" in names
    match, mismatch, errors = filecmp.cmpfiles(first, second, names, shallow=False)
    assert mismatch == [] and errors == []
    # an existing directory is not replaced without --overwrite
    proc = pipeline.convert(model, case["device"], first)
    assert proc.returncode == 2 and "--overwrite" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = pipeline.convert(model, case["device"], first, "--overwrite")
    assert proc.returncode == 0, proc.stderr


def test_failed_conversion_leaves_no_directory(tmp_path: Path) -> None:
    name = "ai85-mnist"
    model = pipeline.imported_model(name, tmp_path)
    bad = tmp_path / "bad.yaml"
    text = (GOLDEN / name / "network.yaml").read_text()
    bad.write_text(text.replace("processors: 0x0000000000000001",
                                "processors: 0x0000000000000001\n    bogus_key: 1", 1))
    out = tmp_path / "project"
    proc = pipeline.convert(model, "MAX78000", out, "--sidecar", str(bad))
    assert proc.returncode == 1, proc.stderr
    assert "bogus_key" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".project")] == []


def test_streaming_sidecar_implies_the_fifo(tmp_path: Path) -> None:
    """A sidecar that streams its first layer needs the FIFO; without --fifo the project
    is the same as with it (not one that programs no rollover)."""
    name = "ai85-cats-dogs"
    if not (GOLDEN / name).is_dir():
        pytest.skip("golden case absent")
    case = pipeline.case_json(name)
    model = pipeline.imported_model(name, tmp_path)
    base = ("--sidecar", str(GOLDEN / name / "network.yaml"),
            "--sample-input", str(GOLDEN / name / "sample.npy"))
    with_fifo, without = tmp_path / "fifo", tmp_path / "nofifo"
    assert pipeline.convert(model, case["device"], with_fifo, *base, "--fifo").returncode == 0
    assert pipeline.convert(model, case["device"], without, *base).returncode == 0
    for f in ("cnn.c", "main.c"):
        assert (with_fifo / f).read_bytes() == (without / f).read_bytes(), f
    assert "Rollover" in (without / "cnn.c").read_text()
