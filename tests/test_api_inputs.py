"""The Python API and the command line on the inputs users confuse (issue 35, items 5
and 6): every bad input is an Ai8xError, a sidecar comes as a path, text or a dict,
the report's phases are typed fields, hints name keyword arguments through the API and
flags through the command line, and paths the SDK's make cannot take are refused before
anything is written."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from onnx2ai8x import api
from onnx2ai8x.cli import main
from onnx2ai8x.errors import Ai8xError, as_keywords
from onnx2ai8x.makepath import MAKE_UNSAFE, unsafe_character

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.onnx"
SAMPLE = ROOT / "examples" / "digits" / "sample.npy"
FLOAT = ROOT / "examples" / "digits_float" / "digits_float.onnx"


# ---------------------------------------------------------------- api.run

@pytest.mark.parametrize("shape", [(3, 5, 5), (1, 8, 9), (2, 2), (1, 1, 8, 8, 1)])
def test_run_with_a_misshapen_array_is_an_ai8x_error(tmp_path, shape):
    x = np.zeros(shape, dtype=np.int64)
    with pytest.raises(Ai8xError) as from_array:
        api.run(DIGITS, x)
    np.save(tmp_path / "x.npy", x)
    with pytest.raises(Ai8xError) as from_file:
        api.run(DIGITS, tmp_path / "x.npy")
    assert from_array.value.code == from_file.value.code == "usage.bad-input"


def test_run_of_a_float_model_names_it(tmp_path, capsys):
    with pytest.raises(Ai8xError) as err:
        api.run(FLOAT, np.zeros((1, 8, 8), dtype=np.int64))
    assert err.value.code == "model.float" and "quantize" in str(err.value)
    assert main(["run", str(FLOAT), "--input", str(SAMPLE)]) == 1
    assert "error[model.float]" in capsys.readouterr().err


# ---------------------------------------------------------------- sidecar forms

def test_check_takes_back_its_own_sidecar_as_text_and_as_a_dict(tmp_path):
    first = api.check(DIGITS, "MAX78000")
    as_text = api.check(DIGITS, "MAX78000", sidecar=first.sidecar)
    as_dict = api.check(DIGITS, "MAX78000", sidecar=yaml.safe_load(first.sidecar))
    path = tmp_path / "s.yaml"
    path.write_text(first.sidecar)
    as_path = api.check(DIGITS, "MAX78000", sidecar=path)
    as_str_path = api.check(DIGITS, "MAX78000", sidecar=str(path))
    for got in (as_text, as_dict, as_path, as_str_path):
        assert got.report == first.report
    assert as_text.sidecar == as_dict.sidecar  # the same placement, the same text


def test_sidecar_text_errors_name_the_sidecar_and_its_line():
    text = api.check(DIGITS, "MAX78000").sidecar
    bad = text.replace("out_offset: 0x0040", "out_offset: 0x0042", 1)
    line = next(i for i, ln in enumerate(bad.splitlines(), 1) if "0x0042" in ln)
    with pytest.raises(Ai8xError) as err:
        api.check(DIGITS, "MAX78000", sidecar=bad)
    assert err.value.diagnostics[0].where.startswith(f"sidecar:{line}: ")
    assert "onnx2ai8x-sidecar-" not in str(err.value)  # no private temporary path
    # one diagnosis per cause: the reader's derived in_offset (the same 0x0042) is not
    # diagnosed a second time
    assert [d.code for d in err.value.diagnostics] == ["map.alignment"], str(err.value)


@pytest.mark.parametrize("value", [42, 3.5, ["layers"], object()])
def test_a_sidecar_of_another_type_is_an_ai8x_error(value):
    with pytest.raises(Ai8xError) as err:
        api.check(DIGITS, "MAX78000", sidecar=value)
    assert err.value.code == "usage.bad-input"


def test_a_dict_sidecar_with_values_yaml_cannot_write_is_an_ai8x_error():
    data = yaml.safe_load(api.check(DIGITS, "MAX78000").sidecar)
    data["layers"][0]["processors"] = io.BytesIO()
    with pytest.raises(Ai8xError) as err:
        api.check(DIGITS, "MAX78000", sidecar=data)
    assert err.value.code == "usage.bad-input"


# ---------------------------------------------------------------- typed phases

def test_convert_returns_the_phases_as_typed_fields(tmp_path):
    result = api.convert(DIGITS, "MAX78000", tmp_path / "p")
    phases = result.phases
    assert phases is not None
    written = json.loads((tmp_path / "p" / "report.json").read_text())["phases"]
    names = [p.name for p in phases.phases]
    assert names == [p["name"] for p in written["phases"]]
    assert [p.words for p in phases.phases] == [p["words"] for p in written["phases"]]
    assert phases.dominant == written["dominant"]


# ---------------------------------------------------------------- hints per front

def _overlapping_sidecar() -> dict:
    data = yaml.safe_load(api.check(DIGITS, "MAX78000").sidecar)
    fc = next(lay for lay in data["layers"] if lay["name"] == "fc")
    conv3 = next(lay for lay in data["layers"] if lay["name"] == "conv3")
    fc["out_offset"] = conv3["out_offset"]  # the output over its own input
    return data


def test_hints_name_keyword_arguments_through_the_api_and_flags_through_the_cli(
        tmp_path, capsys):
    data = _overlapping_sidecar()
    with pytest.raises(Ai8xError) as err:
        api.check(DIGITS, "MAX78000", sidecar=data)
    assert err.value.code == "map.overlap"
    assert "overlap_data=True" in str(err.value) and "--overlap-data" not in str(err.value)
    # the same diagnostic on the command line
    path = tmp_path / "over.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["check", str(DIGITS), "--sidecar", str(path)]) == 1
    out = capsys.readouterr().err
    assert "--overlap-data" in out and "overlap_data=True" not in out
    # and with the keyword the hint names, the API converts it
    assert api.check(DIGITS, "MAX78000", sidecar=data, overlap_data=True).layers


@pytest.mark.parametrize("cli,kw", [
    ("pass --overlap-data", "pass overlap_data=True"),
    ("or pass --accept-loss", "or pass accept_loss=True"),
    ("--timer 99", "timer=99"),
    ("use --calibration-method max", 'use calibration_method="max"'),
    ("--no-mexpress", "mexpress=False"),
    ("drop --fifo (the input", "drop fifo=True (the input"),
    ("check the --sidecar path", "check the sidecar path"),
    ("--sample-input x.npy", 'sample="x.npy"'),
    ("see onnx2ai8x convert --help", "see onnx2ai8x convert --help"),
    ("drop --build", "drop --build"),
])
def test_options_render_as_keyword_arguments(cli, kw):
    assert as_keywords(cli) == kw


# ---------------------------------------------------------------- confused inputs

def _checkpoint(path: Path, legacy: bool) -> Path:
    torch = pytest.importorskip("torch")
    torch.save({"state_dict": {"w": torch.zeros(2)}}, path,
               _use_new_zipfile_serialization=not legacy)
    return path


@pytest.mark.parametrize("kind", ["checkpoint", "legacy-checkpoint", "directory",
                                  "project", "empty", "npy"])
def test_confused_model_inputs_are_named(tmp_path, capsys, kind):
    if kind in ("checkpoint", "legacy-checkpoint"):
        model = _checkpoint(tmp_path / "net.pth.tar", kind == "legacy-checkpoint")
        needle = "PyTorch checkpoint"
    elif kind == "directory":
        model = tmp_path / "models"
        model.mkdir()
        needle = "a directory"
    elif kind == "project":
        model = tmp_path / "proj"
        model.mkdir()
        for name in ("cnn.c", "main.c"):
            (model / name).write_text("int x;\n")
        needle = "onnx2ai8x verify"
    elif kind == "empty":
        model = tmp_path / "m.onnx"
        model.write_bytes(b"")
        needle = "empty"
    else:
        model = tmp_path / "x.npy"
        np.save(model, np.zeros(3))
        needle = "numpy array"
    with pytest.raises(Ai8xError) as err:
        api.check(model, "MAX78000")
    assert err.value.code == "usage.model-kind" and needle in str(err.value)
    assert main([str(model), "--device", "MAX78000", "-o", str(tmp_path / "out")]) == 2
    text = capsys.readouterr().err
    assert "error[usage.model-kind]" in text and needle in text
    if "checkpoint" in kind:
        assert "import-izer" in text and "Wire format" not in text
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- make paths

@pytest.mark.parametrize("ch", sorted(MAKE_UNSAFE))
def test_output_paths_make_cannot_take_are_refused_before_writing(tmp_path, capsys, ch):
    out = tmp_path / f"my{ch}project"
    with pytest.raises(Ai8xError) as err:
        api.convert(DIGITS, "MAX78000", out)
    assert err.value.code == "usage.make-path" and MAKE_UNSAFE[ch] in str(err.value)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert main([str(DIGITS), "-o", str(out)]) == 2
    assert "error[usage.make-path]" in capsys.readouterr().err
    assert not out.exists()


def test_a_parent_directory_with_a_space_is_refused_too(tmp_path):
    parent = tmp_path / "my models"
    parent.mkdir()
    with pytest.raises(Ai8xError) as err:
        api.convert(DIGITS, "MAX78000", parent / "digits")
    assert "a space" in str(err.value)
    assert list(parent.iterdir()) == []


@pytest.mark.parametrize("ch", list("#=*?[]!~,{}@^+-_.") + ["\u00e9"])
def test_characters_the_sdk_builds_with_are_accepted(tmp_path, ch):
    assert unsafe_character(tmp_path / f"a{ch}b") is None


# ---------------------------------------------------------------- arguments by kind

_WRONG = [None, 123, 1.5, b"garbage", np.zeros(3), [1, 2], {"a": 1}, object(), True]
_PROJECT = ROOT / "no-such-project"


def _calls(v):
    return {
        "check model": lambda: api.check(v, "MAX78000"),
        "check fifo": lambda: api.check(DIGITS, "MAX78000", fifo=v),
        "check calibration": lambda: api.check(DIGITS, "MAX78000", calibration=v),
        "run model": lambda: api.run(v, SAMPLE),
        "run sample": lambda: api.run(DIGITS, v),
        "convert output": lambda: api.convert(DIGITS, "MAX78000", v),
        "convert timer": lambda: api.convert(DIGITS, "MAX78000", "unused", timer=v),
        "convert fifo": lambda: api.convert(DIGITS, "MAX78000", "unused", fifo=v),
        "convert board": lambda: api.convert(DIGITS, "MAX78000", "unused", board=v),
        "verify project": lambda: api.verify(v),
        "verify layer order": lambda: api.verify(_PROJECT, layer_order=v),
        "verify stop_after": lambda: api.verify(_PROJECT, stop_after=v),
        "quantize model": lambda: api.quantize(v, "MAX78000"),
        "quantize calibration": lambda: api.quantize(FLOAT, "MAX78000", calibration=v),
    }


@pytest.mark.parametrize("call", sorted(_calls(None)))
@pytest.mark.parametrize("value", _WRONG, ids=lambda v: type(v).__name__)
def test_every_api_argument_of_the_wrong_kind_is_an_ai8x_error(tmp_path, monkeypatch,
                                                               call, value):
    monkeypatch.chdir(tmp_path)
    try:
        _calls(value)[call]()
    except Ai8xError:
        pass  # refused as a user's mistake (or, for a legal value, a later check)
    assert not (tmp_path / "unused").exists() or call.startswith("convert")


# ---------------------------------------------------------------- found by the campaign

def _npy_with_a_stray_header_byte(path: Path, dtype=np.int64) -> Path:
    """An .npy file whose header dict lost its closing brace to a byte 0xa0 (as the
    campaign's case did): numpy's legacy header filter raises tokenize.TokenError,
    which is neither ValueError nor SyntaxError."""
    buf = io.BytesIO()
    np.save(buf, np.zeros((1, 8, 8), dtype=dtype))
    data = bytearray(buf.getvalue())
    data[data.index(b"}")] = 0xA0
    path.write_bytes(bytes(data))
    return path


def test_a_stray_byte_in_an_npy_header_is_a_damaged_file_not_a_crash(tmp_path, capsys):
    x = _npy_with_a_stray_header_byte(tmp_path / "x.npy")
    for argv in (["run", str(DIGITS), "--input", str(x)],
                 [str(DIGITS), "--sample-input", str(x), "-o", str(tmp_path / "p")],
                 [str(FLOAT), "--device", "MAX78000", "--calibration",
                  str(_npy_with_a_stray_header_byte(tmp_path / "c.npy", np.float32)),
                  "-o", str(tmp_path / "q")]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code in (1, 2) and "internal error" not in err, err
        assert "error[usage.bad-input]" in err


def test_batchnorm_statistics_that_are_not_constants_are_refused(tmp_path):
    """(campaign seed 3535, float case 573: a KeyError for a running variance that no
    initializer, input or node gives)"""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (4, 1, 3, 3))
                                     .astype(np.float32), "w")]
    inits += [numpy_helper.from_array(np.ones(4, np.float32), n)
              for n in ("gamma", "beta", "mean")]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
         helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"],
                          ["y"])], "bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    cal = rng.uniform(-1, 1, (4, 1, 8, 8)).astype(np.float32)
    with pytest.raises(Ai8xError) as err:
        api.check(model.SerializeToString(), "MAX78000", calibration=cal)
    assert "internal" not in err.value.code


def test_foreign_stderr_is_silenced_and_restored(capfd):
    import os

    from onnx2ai8x.console import foreign_stderr_silenced

    with foreign_stderr_silenced():
        os.write(2, b"Traceback (most recent call last): from a C++ library\n")
    os.write(2, b"ours\n")
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ours" in err
