"""One regression test per class of hostile input found in issue 15.

Each test builds its bad input from the committed digits example (or by hand), runs the
command line in-process and checks: the exit code, one message naming the input and
the problem, and that every input file is unchanged and nothing temporary is left.
(tests/fuzz runs the same classes with seeded variations, in forked processes.)
"""
from __future__ import annotations

import inspect
import io
import os
import time
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x import onnxpb
from onnx2ai8x.cli import main

DIGITS = Path(__file__).resolve().parents[1] / "examples" / "digits"


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A folder holding a copy of the digits model and sample, plus a user's file."""
    (tmp_path / "model.onnx").write_bytes((DIGITS / "digits.onnx").read_bytes())
    (tmp_path / "sample.npy").write_bytes((DIGITS / "sample.npy").read_bytes())
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _run(args: list[str], capsys) -> tuple[int, str]:
    code = main(args)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err


def _model(work: Path) -> onnxpb.ModelProto:
    return onnxpb.load(work / "model.onnx")


def _save(work: Path, model, name: str = "bad.onnx") -> str:
    (work / name).write_bytes(model.SerializeToString())
    return name


# --------------------------------------------------------------------------- ONNX

def test_deeply_nested_onnx_is_refused_quickly(work, capsys):
    from tests.fuzz.cases import _deep_onnx

    (work / "deep.onnx").write_bytes(_deep_onnx(5000))
    code, err = _run(["check", "deep.onnx"], capsys)
    assert code == 1 and "deep.onnx" in err and "not a readable ONNX file" in err


def test_repeated_graph_field_is_linear(work, capsys):
    from tests.fuzz.cases import _field

    data = _field(7, _field(2, b"g")) * 4000 + (work / "model.onnx").read_bytes()
    (work / "rep.onnx").write_bytes(data)
    start = time.monotonic()
    code, _ = _run(["check", "rep.onnx"], capsys)
    assert time.monotonic() - start < 20
    assert code in (0, 1)


@pytest.mark.parametrize("change, expect", [
    (lambda m: m.graph.initializer[0].dims.append(7), "initializer"),
    (lambda m: setattr(m.graph.initializer[0], "data_type", 0), "unsupported tensor data"),
    (lambda m: setattr(m.graph.initializer[0], "data_type", 16), "unsupported tensor data"),
    (lambda m: m.graph.node[0].attribute[0].__setattr__("type", 0), "unknown type 0"),
    (lambda m: [setattr(a, "type", onnxpb.AttributeProto.STRING)
                for n in m.graph.node for a in n.attribute if a.name == "pads"],
     "attribute `pads` is of type STRING"),
    (lambda m: [setattr(a, "type", onnxpb.AttributeProto.FLOAT)
                for n in m.graph.node for a in n.attribute if a.name == "shift"],
     "attribute `shift` is of type FLOAT"),
    (lambda m: m.graph.node[0].metadata_props.add(key="ai8x.output_shift", value="[]"),
     "not a whole number"),
    (lambda m: m.graph.node[0].metadata_props.add(key="ai8x.sidecar", value="true"),
     "not a JSON object"),
    (lambda m: m.graph.node[0].metadata_props.add(key="ai8x.sidecar", value="[" * 100000),
     "not a JSON object"),
    (lambda m: m.graph.ClearField("node"), "no graph nodes"),
    (lambda m: setattr(m.graph.output[0], "name", m.graph.input[0].name),
     "it is the graph's input"),
    (lambda m: setattr(m.graph.input[0].type.tensor_type.shape.dim[2], "dim_value", 1 << 40),
     "dimension 2 of the input"),
    (lambda m: setattr(m.graph.input[0].type.tensor_type, "elem_type", 11),
     "type DOUBLE"),
    (lambda m: [n.input.__delitem__(slice(1, None)) for n in m.graph.node
                if n.op_type == "ConvInteger"][:1], "needs 2 inputs"),
])
def test_malformed_models_name_the_problem(work, capsys, change, expect):
    model = _model(work)
    change(model)
    name = _save(work, model)
    before = _files(work)
    code, err = _run(["check", name], capsys)  # (onnx's checker may speak first)
    assert code == 1 and name in err, err
    for args in (["sidecar", name], [name, "-o", "out"]):
        code, err = _run(args, capsys)
        assert code == 1, (args, err)
        assert expect in err and name in err, err
    assert _files(work) == before


def test_out_of_range_weight_bits_is_a_diagnostic(work, capsys):
    model = _model(work)
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.name == "weight_bits":
                attr.i = 99
    node = next(n for n in model.graph.node if any(a.name == "weight_bits"
                                                   for a in n.attribute))
    main_node = next(n for n in model.graph.node if n.name == node.name.split("/")[0])
    main_node.metadata_props.add(key="ai8x.weight_bits", value="99")
    code, err = _run(["check", _save(work, model)], capsys)
    assert code == 1 and "99-bit weights are not supported" in err


def test_input_path_too_long_is_a_usage_error(work, capsys):
    for args in (["check", "m" * 300 + ".onnx"], ["model.onnx", "--sidecar", "s" * 300],
                 ["run", "model.onnx", "--input", "i" * 300]):
        code, err = _run(args, capsys)
        assert code == 2 and "cannot be opened" in err, err


# --------------------------------------------------------------------------- samples

def _header(shape, dtype="<i8") -> bytes:
    from tests.fuzz.cases import _npy_header

    return _npy_header(shape, dtype)


@pytest.mark.parametrize("data, expect", [
    (_header((10 ** 12,)), "more than"),
    (_header((1, 28, 28)) + b"\0" * 9, "the file holds 9 bytes"),
    (_header((3,), "|O"), "not numbers"),
    (b"", "it is empty"),
    (b"PK\x03\x04rest", ".npz archive"),
])
def test_bad_samples_are_refused_before_loading(work, capsys, data, expect):
    (work / "x.npy").write_bytes(data)
    for args in (["run", "model.onnx", "--input", "x.npy"],
                 ["model.onnx", "--sample-input", "x.npy", "-o", "out"]):
        code, err = _run(args, capsys)
        assert code == 2 and expect in err and "x.npy" in err, err
    assert not (work / "out").exists()


def test_npz_sample_is_refused_clearly(work, capsys):
    buf = io.BytesIO()
    np.savez(buf, x=np.load(work / "sample.npy"))
    (work / "x.npz").write_bytes(buf.getvalue())
    code, err = _run(["run", "model.onnx", "--input", "x.npz"], capsys)
    assert code == 2 and "a sample is one array" in err


def test_sample_of_wrong_shape_is_a_usage_error(work, capsys):
    np.save(work / "x.npy", np.zeros((3, 5, 5), np.int64))
    code, err = _run(["run", "model.onnx", "--input", "x.npy"], capsys)
    assert code == 2 and "the model takes" in err and "x.npy" in err


@pytest.mark.parametrize("shape, expect", [
    ((3, 4000, 4000), "the sample has shape (3, 4000, 4000), the model takes (1, 8, 8)"),
    ((1, 1, 1, 1, 1, 1), "the model takes 3-D samples"),
    ((7, 1, 8, 8), None),  # a batch: `run` takes it, the known-answer test does not
])
def test_sample_shape_is_refused_from_its_header(work, capsys, monkeypatch, shape, expect):
    """A sample that does not fit the model is refused on its declared shape, before its
    values are read (a 48 MB sample took 15 s to refuse under load: read, range-checked
    and converted to int64 first; tests/fuzz's longest "sample" case)."""
    import onnx2ai8x.runner as runner

    np.save(work / "x.npy", np.zeros(shape, np.int8))

    def no_values(*args):
        raise AssertionError("the sample's values were read")

    load = np.load

    def no_sample_load(path, *args, **kwargs):
        if str(path).endswith("x.npy"):
            no_values()
        return load(path, *args, **kwargs)

    monkeypatch.setattr(runner, "load_sample", no_values)
    monkeypatch.setattr(runner.np, "load", no_sample_load)
    if expect is not None:
        code, err = _run(["run", "model.onnx", "--input", "x.npy", "-o", "y.npy"], capsys)
        assert code == 2 and expect in err and "x.npy" in err, err
    code, err = _run(["model.onnx", "--sample-input", "x.npy", "-o", "out"], capsys)
    assert code == 2 and (expect or "the sample holds a batch of 7") in err, err
    assert not (work / "out").exists() and not (work / "y.npy").exists()


# --------------------------------------------------------------------------- YAML

@pytest.mark.parametrize("text, expect", [
    # our own bound, or a newer PyYAML parser's own depth limit: either way a refusal that
    # names the file, before anything is composed
    ("[" * 100_000 + "]" * 100_000, ("nests more than", "maximum nesting depth")),
    ("a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)), "expands to more than"),
    ("m0: &m0 {k: 1}\n" + "".join(
        f"m{k}: &m{k} {{<<: *m{k - 1}, a: *m{k - 1}, b: *m{k - 1}}}\n" for k in range(1, 40)),
     "expands to more than"),
])
def test_yaml_bombs_and_nesting_are_refused(work, capsys, text, expect):
    (work / "net.yaml").write_text(text)
    start = time.monotonic()
    code, err = _run(["model.onnx", "--sidecar", "net.yaml", "-o", "out"], capsys)
    assert time.monotonic() - start < 20
    expected = (expect,) if isinstance(expect, str) else expect
    assert code == 1 and any(e in err for e in expected) and "net.yaml" in err, err
    assert len(err) < 3000


def test_alias_bomb_in_a_descriptive_key_gives_a_short_message(work, capsys):
    text = ("a: &a [" + ", ".join(["wordy" * 50] * 300) + "]\n"
            "arch: x\ndataset: y\nlayers:\n  - {name: *a, processors: 1}\n")
    (work / "net.yaml").write_text(text)
    code, err = _run(["model.onnx", "--sidecar", "net.yaml", "-o", "out"], capsys)
    assert code in (1, 2) and len(err) < 5000


def test_error_messages_are_bounded():
    from onnx2ai8x.errors import MAX_MESSAGE, Ai8xError

    err = Ai8xError("x", "w" * 10_000, "m" * 10_000_000, "h" * 10_000)
    assert len(err.render()) < 3 * MAX_MESSAGE
    assert "more characters" in err.render()


# --------------------------------------------------------------------------- outputs

@pytest.mark.parametrize("out", ["", ".", "..", "../..", "home", "/", "model.onnx",
                                 "sample.npy", "model.onnx/x", "notes.txt"])
def test_convert_refuses_outputs_that_destroy_inputs(work, capsys, out):
    before = _files(work)
    args = ["model.onnx", "--sample-input", "sample.npy", "-o", out]
    if out != "/":
        args.append("--overwrite")
    code, err = _run(args, capsys)
    assert code == 2, err
    assert _files(work) == before
    assert not [p for p in os.listdir(work) if p.startswith(".")]


def test_convert_refuses_the_folder_holding_the_model(work, capsys):
    sub = work / "models"
    sub.mkdir()
    (sub / "m.onnx").write_bytes((work / "model.onnx").read_bytes())
    (sub / "keep.txt").write_text("keep")
    code, err = _run(["models/m.onnx", "-o", "models", "--overwrite"], capsys)
    assert code == 2 and "contains the input" in err
    assert (sub / "keep.txt").read_text() == "keep" and (sub / "m.onnx").is_file()


@pytest.mark.parametrize("args", [
    ["run", "model.onnx", "--input", "sample.npy", "-o", "sample.npy", "--overwrite"],
    ["run", "model.onnx", "--input", "sample.npy", "-o", "model.onnx", "--overwrite"],
    ["sidecar", "model.onnx", "-o", "model.onnx", "--overwrite"],
    ["run", "model.onnx", "--input", "sample.npy", "-o", "notes.txt"],
    ["run", "model.onnx", "--input", "sample.npy", "-o", "y.txt"],
    ["sidecar", "model.onnx", "-o", "home"],
])
def test_file_outputs_never_replace_inputs_or_files_silently(work, capsys, args):
    before = _files(work)
    code, err = _run(args, capsys)
    assert code == 2, err
    assert _files(work) == before
    assert not [p for p in os.listdir(work) if p.startswith(".")]


def test_run_writes_exactly_the_named_file(work, capsys):
    code, _ = _run(["run", "model.onnx", "--input", "sample.npy", "-o", "y.npy"], capsys)
    assert code == 0 and np.load(work / "y.npy").size > 0
    assert not [p for p in os.listdir(work) if p.startswith(".")]
    code, err = _run(["run", "model.onnx", "--input", "sample.npy", "-o", "y.npy"], capsys)
    assert code == 2 and "--overwrite" in err
    code, _ = _run(["run", "model.onnx", "--input", "sample.npy", "-o", "y.npy",
                    "--overwrite"], capsys)
    assert code == 0


@pytest.mark.parametrize("out, expect", [
    ("/proc/onnx2ai8x-test/x", "/proc"),
    ("x" * 300, "File name too long"),
    ("/dev/null/x", "is a file"),
])
def test_os_errors_while_writing_name_the_path(work, capsys, out, expect):
    code, err = _run(["model.onnx", "-o", out], capsys)
    assert code == 2 and expect in err, err
    assert not [p for p in os.listdir(work) if p.startswith(".")]


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_symlink_output_is_never_replaced(work, capsys, overwrite):
    """Issue 35: a link is the user's; replacing it (dangling or not) would lose it."""
    os.symlink("nowhere/at/all", work / "link")
    code, err = _run(["model.onnx", "-o", "link", *overwrite], capsys)
    assert code == 2 and "symbolic link" in err, err
    assert os.readlink(work / "link") == "nowhere/at/all"


def test_a_failed_write_keeps_the_previous_project(work, capsys, monkeypatch):
    code, _ = _run(["model.onnx", "-o", "out"], capsys)
    assert code == 0
    before = _files(work / "out")
    import onnx2ai8x.fsutil as fsutil

    real = os.replace

    def failing(src, dst):  # the finished project cannot take the old one's place
        if Path(dst) == Path("out") and Path(src).name.startswith(".out."):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(fsutil.os, "replace", failing)
    # the two-rename path (a system without renameat2's exchange)
    monkeypatch.setattr(fsutil, "_exchange", lambda a, b: False)
    code, err = _run(["model.onnx", "-o", "out", "--overwrite"], capsys)
    assert code == 2 and "No space left on device" in err and "free disk space" in err
    assert _files(work / "out") == before
    assert not [p for p in os.listdir(work) if p.startswith(".")]


def test_a_failed_exchange_keeps_the_previous_project(work, capsys, monkeypatch):
    code, _ = _run(["model.onnx", "-o", "out"], capsys)
    assert code == 0
    before = _files(work / "out")
    import onnx2ai8x.fsutil as fsutil

    def failing(a, b):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsutil, "_exchange", failing)
    code, err = _run(["model.onnx", "-o", "out", "--overwrite"], capsys)
    assert code == 2 and "No space left on device" in err
    assert _files(work / "out") == before
    assert not [p for p in os.listdir(work) if p.startswith(".")]


# --------------------------------------------------------------------------- options

@pytest.mark.parametrize("args, expect", [
    (["--timer", "-1"], "--timer"), (["--timer", "99999999999"], "--timer"),
    (["--timer", "4"], "0 to 3"), (["--boost", "-1.0"], "--boost"),
    (["--boost", "2"], "PORT.PIN"), (["--boost", "4.1"], "port 0 to 3"),
    (["--boost", "2.32"], "pin 0 to 31"), (["--max-checklines", "-1"], "1 or more"),
    (["--max-checklines", "0"], "1 or more"),
])
def test_option_values_are_range_checked(work, capsys, args, expect):
    code, err = _run(["model.onnx", "-o", "out", *args], capsys)
    assert code == 2 and expect in err, err
    assert not (work / "out").exists()


def test_in_range_options_convert(work, capsys):
    code, err = _run(["model.onnx", "-o", "out", "--timer", "3", "--boost", "2.5",
                      "--max-checklines", "4"], capsys)
    assert code == 0, err
    assert "MXC_TMR3" in (work / "out" / "cnn.h").read_text()


def test_every_convert_option_has_help():
    from typer.models import ParameterInfo

    from onnx2ai8x.cli import convert_cmd

    missing = []
    for name, param in inspect.signature(convert_cmd).parameters.items():
        for meta in getattr(param.annotation, "__metadata__", ()):
            if isinstance(meta, ParameterInfo) and not meta.help:
                missing.append(name)
    assert not missing


# --------------------------------------------------------------------------- checkpoints

try:
    import torch
except ImportError:  # the checkpoint tests below skip; the rest of this file still runs
    torch = None


@pytest.fixture
def project(work):
    pytest.importorskip("torch")
    from tests.fuzz.test_fuzz import TINY_YAML, _tiny_checkpoint

    ckpt, npy = _tiny_checkpoint()
    (work / "net.yaml").write_bytes(TINY_YAML)
    (work / "net.pth.tar").write_bytes(ckpt)
    (work / "x.npy").write_bytes(npy)
    return work


def _izer(out: str = "net.onnx", config: str = "net.yaml") -> list[str]:
    return ["import-izer", "--config-file", config, "--checkpoint-file", "net.pth.tar",
            "--sample", "x.npy", "--device", "MAX78000", "-o", out]


def _with_state(project: Path, **changes) -> None:
    data = torch.load(project / "net.pth.tar", weights_only=True)
    for key, value in changes.items():
        data["state_dict"][key.replace("__", ".")] = value
    torch.save(data, project / "net.pth.tar")


@pytest.mark.parametrize("value, expect", [
    (lambda w: torch.empty(w.shape, device="meta"), "meta"),
    (lambda w: w.to(torch.complex64), "complex64"),
    (lambda w: w.bool(), "bool"),
    (lambda w: w.to_sparse(), "sparse"),
])
def test_checkpoint_tensors_of_the_wrong_kind(project, capsys, value, expect):
    w = torch.load(project / "net.pth.tar", weights_only=True)["state_dict"][
        "conv1.op.weight"]
    _with_state(project, conv1__op__weight=value(w))
    code, err = _run(_izer(), capsys)
    assert code == 1 and expect in err and "conv1.op.weight" in err, err
    assert not (project / "net.onnx").exists()


def test_fractional_bias_is_refused(project, capsys):
    _with_state(project, conv1__op__bias=torch.full((8,), 0.5))
    code, err = _run(_izer(), capsys)
    assert code == 1 and "conv1.op.bias" in err and "non-integer" in err


def test_sidecar_with_fewer_layers_than_the_checkpoint(project, capsys):
    text = (project / "net.yaml").read_text()
    (project / "short.yaml").write_text(text[:text.rindex("  - ")])
    code, err = _run(_izer(config="short.yaml"), capsys)
    assert code == 1 and "left over: `conv2`" in err


@pytest.mark.parametrize("out", ["net.yaml", "net.pth.tar", "x.npy", "."])
def test_import_izer_never_overwrites_its_inputs(project, capsys, out):
    before = _files(project)
    code, err = _run([*_izer(out), "--overwrite"], capsys)
    assert code == 2, err
    assert _files(project) == before


def test_import_izer_base_case_works(project, capsys):
    code, err = _run(_izer(), capsys)
    assert code == 0, err
    code, err = _run(_izer(), capsys)
    assert code == 2 and "already exists" in err


def test_a_reader_meeting_the_end_of_a_file_says_so(work, capsys, monkeypatch):
    """Click turns an EOFError into "Abort"; the CLI names it instead of "aborted"."""
    import onnx2ai8x.runner as runner

    def truncated(model, sample):
        raise EOFError("No data left in file")

    monkeypatch.setattr(runner, "run_file", truncated)
    code, err = _run(["run", "model.onnx", "--input", "sample.npy"], capsys)
    assert code == 1 and "ended early" in err and "No data left" in err
