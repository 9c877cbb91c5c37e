"""The command line is a layer over the Python API (issue 27, item 6).

Each command makes its one call into onnx2ai8x.api (a test that fails when a command
goes round it); `convert` on the command line and `api.convert` write byte-identical
projects for an ai8x-ONNX model, a float model with calibration data, a vendor export
recovered without it and a model split with --cpu-fallback; and a bad input gives the
same error, code and exit status from both.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import onnx2ai8x
from onnx2ai8x import api
from tests.float_onnx.helpers import cli

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.onnx"
SAMPLE = ROOT / "examples" / "digits" / "sample.npy"
FLOAT = ROOT / "examples" / "digits_float" / "digits_float.onnx"
CALIBRATION = ROOT / "examples" / "digits_float" / "calibration.npy"
EXPORTS = ROOT.parent / "shared" / "exports"
STEM5 = ROOT / "tests" / "partition" / "keras" / "stem5.onnx"  # a 5x5 stem: CPU-only

pytestmark = pytest.mark.skipif(not DIGITS.is_file() or not FLOAT.is_file(),
                                reason="examples absent")


def _files(project: Path) -> dict[str, bytes]:
    return {str(p.relative_to(project)): p.read_bytes() for p in sorted(project.rglob("*"))
            if p.is_file()}


def _stem5_calibration(tmp: Path) -> Path:
    from tests.partition.models import CASES, calibration

    return calibration(next(c for c in CASES if c.keras == STEM5), tmp)


class _Calls:
    """api.<name> wrapped: the real function runs, each call is recorded."""

    def __init__(self, monkeypatch, name: str, fake=None) -> None:
        self.calls: list[tuple[tuple, dict]] = []
        real = fake or getattr(api, name)

        def recorded(*args, **kwargs):
            self.calls.append((args, kwargs))
            return real(*args, **kwargs)

        monkeypatch.setattr(api, name, recorded)


# ------------------------------------------------------------------ one call into the API

@pytest.mark.parametrize("kind", ["ai8x", "float", "cpu-fallback"])
def test_convert_calls_api_convert(kind: str, tmp_path: Path, monkeypatch) -> None:
    """Whatever the model, the command hands the whole conversion to api.convert (once)
    and only prints, builds or verifies what it gets back."""
    calls = _Calls(monkeypatch, "convert")
    verify = _Calls(monkeypatch, "verify")
    argv = {"ai8x": [DIGITS, "--sample-input", SAMPLE],
            "float": [FLOAT, "--calibration", CALIBRATION],
            "cpu-fallback": [STEM5, "--calibration", _stem5_calibration(tmp_path),
                             "--cpu-fallback"]}[kind]
    code, out, err = cli([*argv, "--device", "MAX78000", "-o", tmp_path / "p", "--verify"])
    assert code == 0, err
    assert len(calls.calls) == 1 and len(verify.calls) == 1
    (model, device, output), kwargs = calls.calls[0]
    assert (Path(model), Path(output), device.name) == (Path(argv[0]), tmp_path / "p",
                                                        "MAX78000")
    assert kwargs["cpu_fallback"] == (kind == "cpu-fallback")
    assert (kwargs["calibration"] is None) == (kind == "ai8x")
    assert "PASS" in out


def test_convert_bypassing_the_api_is_seen(tmp_path: Path, monkeypatch) -> None:
    """The recorder above can fail: api.convert replaced by a function that refuses makes
    the command fail with its error, so no other path converts the model."""
    def refuse(*args, **kwargs):
        raise onnx2ai8x.Ai8xError("usage.test", "api", "api.convert was called", "none",
                                  exit_code=2)

    monkeypatch.setattr(api, "convert", refuse)
    code, _, err = cli([DIGITS, "--device", "MAX78000", "-o", tmp_path / "p"])
    assert code == 2 and "api.convert was called" in err
    assert not (tmp_path / "p").exists()


def test_the_other_commands_call_their_api_function(tmp_path: Path, monkeypatch) -> None:
    """check, sidecar (api.check), quantize, run, verify and import-izer each make their
    one call into the API."""
    project = tmp_path / "p"
    assert cli([DIGITS, "--device", "MAX78000", "-o", project, "-q"])[0] == 0
    imported = []

    def fake_import(config, checkpoint, device, **kwargs):
        imported.append((config, checkpoint, device.name, kwargs))
        return api.Imported(model=None, output=kwargs["output"])

    runs = [
        ("check", ["check", DIGITS]),
        ("check", ["sidecar", FLOAT, "--device", "MAX78000", "--calibration", CALIBRATION]),
        ("quantize", ["quantize", FLOAT, "--device", "MAX78000", "--calibration",
                      CALIBRATION, "-o",
                      tmp_path / "q.onnx"]),
        ("run", ["run", DIGITS, "--input", SAMPLE]),
        ("verify", ["verify", project]),
    ]
    for name, argv in runs:
        with monkeypatch.context() as patch:
            calls = _Calls(patch, name)
            code, _, err = cli(argv)
            assert code == 0, err
            assert len(calls.calls) == 1, argv
    _Calls(monkeypatch, "import_izer", fake_import)
    code, out, err = cli(["import-izer", "--config-file", "net.yaml", "--checkpoint-file",
                          "net.pth.tar", "--device", "MAX78002", "-o", tmp_path / "i.onnx"])
    assert code == 0, err
    assert imported == [(Path("net.yaml"), Path("net.pth.tar"), "MAX78002",
                         {"sample": None, "output": tmp_path / "i.onnx",
                          "overwrite": False})]


# ------------------------------------------------------------- the same project from both

def _both(tmp_path: Path, argv: list, model, **kwargs) -> tuple[dict, dict, api.Converted]:
    """The project the command line writes and the one api.convert writes (each into a
    directory of the same name, so that nothing can differ by the path)."""
    cli_out, api_out = tmp_path / "cli" / "project", tmp_path / "api" / "project"
    code, _, err = cli([*argv, "-o", cli_out, "--quiet"])
    assert code == 0, err
    converted = api.convert(model, "MAX78000", api_out, **kwargs)
    assert converted.output == api_out and converted.model_file.is_file()
    return _files(cli_out), _files(api_out), converted


def test_same_project_for_an_ai8x_model(tmp_path: Path) -> None:
    by_cli, by_api, converted = _both(
        tmp_path, [DIGITS, "--device", "MAX78000", "--sample-input", SAMPLE, "--softmax",
                   "--max-checklines", "4"],
        str(DIGITS), sample=str(SAMPLE), softmax=True, max_checklines=4)
    assert "softmax.c" in by_cli and "cnn.c" in by_cli
    assert by_cli == by_api
    assert converted.quant_table is None and converted.model_file.name == "digits.onnx"


def test_same_project_for_a_float_model_with_calibration(tmp_path: Path) -> None:
    by_cli, by_api, converted = _both(
        tmp_path, [FLOAT, "--device", "MAX78000", "--calibration", CALIBRATION,
                   "--calibration-method", "max"],
        FLOAT, calibration=CALIBRATION, calibration_method="max")
    assert by_cli == by_api and b'"quantization"' in by_api["report.json"]
    assert converted.quant_table is not None and "conv2d" in converted.quant_table
    # the options reach the quantizer: another method, another project
    other = api.convert(FLOAT, "MAX78000", tmp_path / "mse", calibration=CALIBRATION)
    assert _files(other.output)["weights.h"] != by_api["weights.h"]


def _export() -> Path:
    found = sorted(EXPORTS.glob("ai85-*/q.onnx")) if EXPORTS.is_dir() else []
    if not found:
        pytest.skip("../shared/exports is absent")
    return found[0]


def test_same_project_for_a_vendor_export(tmp_path: Path) -> None:
    """A vendor export (a float ONNX file of integer weights) is recovered exactly by
    both, without calibration data."""
    model = _export()
    by_cli, by_api, converted = _both(tmp_path, [model, "--device", "MAX78000"], model)
    assert by_cli == by_api
    assert converted.quant_table is not None  # it went through the float front end


def test_same_project_with_the_cpu_fallback(tmp_path: Path) -> None:
    cal = _stem5_calibration(tmp_path)
    by_cli, by_api, converted = _both(
        tmp_path, [STEM5, "--device", "MAX78000", "--calibration", cal, "--cpu-fallback"],
        STEM5, calibration=cal, cpu_fallback=True)
    assert "cpu_layers.c" in by_api and "SPLIT" in converted.summary
    assert by_cli == by_api


def test_cpu_fallback_from_python_needs_the_model_file(tmp_path: Path) -> None:
    with pytest.raises(onnx2ai8x.Ai8xError) as err:
        api.convert(STEM5.read_bytes(), "MAX78000", tmp_path / "p",
                    calibration=_stem5_calibration(tmp_path), cpu_fallback=True)
    assert err.value.code == "usage.cpu-fallback" and err.value.exit_code == 2
    assert not (tmp_path / "p").exists()


# ------------------------------------------------------------------------- error parity

def _wide_model(tmp: Path) -> Path:
    from custom_ops.builder import build_proto
    from tests.legalize.builders import conv2d, network

    path = tmp / "wide.onnx"
    net = network(conv2d("conv0", cin=3, cout=2048, dim=16),
                  conv2d("conv1", cin=2048, cout=2048, dim=16))
    path.write_bytes(build_proto(net).SerializeToString())
    return path


def _garbage(tmp: Path) -> Path:
    path = tmp / "garbage.onnx"
    path.write_bytes(b"this is not a protobuf \x00\xff\x12")
    return path


BAD = {
    "missing model": (lambda t: t / "nope.onnx", [], {}),
    "unreadable model": (_garbage, [], {}),
    "too wide": (_wide_model, [], {}),
    "float without calibration": (lambda t: FLOAT, [], {}),
    "missing calibration": (lambda t: FLOAT, ["--calibration", "nope.npy"],
                            {"calibration": "nope.npy"}),
    "refused layer, calibration given": (
        lambda t: STEM5, ["--calibration", "CAL"], {"calibration": "CAL"}),
    "cpu fallback without calibration": (lambda t: FLOAT, ["--cpu-fallback"],
                                         {"cpu_fallback": True}),
    "cpu fallback with riscv": (lambda t: FLOAT,
                                ["--cpu-fallback", "--riscv", "--calibration", CALIBRATION],
                                {"cpu_fallback": True, "riscv": True,
                                 "calibration": CALIBRATION}),
    "option out of range": (lambda t: DIGITS, ["--max-checklines", "0"],
                            {"max_checklines": 0}),
}


@pytest.mark.parametrize("case", list(BAD))
def test_errors_are_the_same_from_both(case: str, tmp_path: Path) -> None:
    make, argv, kwargs = BAD[case]
    model = make(tmp_path)
    if "CAL" in argv:
        cal = _stem5_calibration(tmp_path)
        argv = [cal if a == "CAL" else a for a in argv]
        kwargs = {k: cal if v == "CAL" else v for k, v in kwargs.items()}
    with pytest.raises(onnx2ai8x.Ai8xError) as err:
        api.convert(model, "MAX78000", tmp_path / "api", **kwargs)
    code, out, stderr = cli([model, "--device", "MAX78000", "-o", tmp_path / "cli", *argv])
    assert code == err.value.exit_code != 0
    assert stderr.strip() == err.value.render().strip()
    assert not (tmp_path / "api").exists() and not (tmp_path / "cli").exists()
    if case == "refused layer, calibration given":  # both name the way out
        assert "--cpu-fallback" in stderr


def test_run_and_verify_errors_are_the_same_from_both(tmp_path: Path) -> None:
    bad_sample = tmp_path / "x.npy"
    np.save(bad_sample, np.full((1, 28, 28), 300))
    for call, argv in (
            (lambda: api.run(DIGITS, bad_sample), ["run", DIGITS, "--input", bad_sample]),
            (lambda: api.run(DIGITS, tmp_path / "no.npy"),
             ["run", DIGITS, "--input", tmp_path / "no.npy"]),
            (lambda: api.verify(tmp_path / "none"), ["verify", tmp_path / "none"]),
            (lambda: api.verify(tmp_path), ["verify", tmp_path])):
        with pytest.raises(onnx2ai8x.Ai8xError) as err:
            call()
        code, _, stderr = cli(argv)
        assert code == err.value.exit_code == 2, argv
        assert stderr.strip() == err.value.render().strip()
