"""The vendor training repository's own ONNX exports (../shared/exports, written by its
`ai8x.py` + torch.onnx.export from the golden zoo checkpoints, four forms each) convert
without calibration data, and the converted network's known answer equals the vendor
synthesis tool's (`expected.json.gz`; `qat-expected.json.gz` for the QAT form)."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import GOLDEN

EXPORTS = Path(__file__).resolve().parents[3] / "shared" / "exports"
FORMS = ("q", "q-sim8", "q-simplified", "qat")


def _cases() -> list[str]:
    if not EXPORTS.is_dir():
        return ["exports-absent"]
    return sorted(p.name for p in EXPORTS.iterdir() if (p / "q.onnx").is_file())


def _shift_quantile(case: str) -> float | None:
    """The QAT policy's shift_quantile, which the export does not carry: read from the
    checkpoint the vendor's quantize.py was given (as the user knows their policy)."""
    torch = pytest.importorskip("torch")
    state = torch.load(EXPORTS / case / "qat-q.pth.tar", map_location="cpu",
                       weights_only=False)["state_dict"]
    values = {float(v.reshape(-1)[0]) for k, v in state.items()
              if k.endswith(".shift_quantile")}
    assert len(values) <= 1
    return values.pop() if values else None


def _expected(case: str, form: str) -> list:
    path = EXPORTS / case / "qat-expected.json.gz" if form == "qat" else \
        GOLDEN / case / "expected.json.gz"
    with gzip.open(path, "rt") as fh:
        return json.load(fh)["expected_output"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", _cases())
def test_vendor_export_known_answer(case: str, form: str) -> None:
    if not (EXPORTS / case / f"{form}.onnx").is_file() or not (GOLDEN / case).is_dir():
        pytest.skip("../shared/exports or ../shared/golden is absent")
    pytest.importorskip("torch")  # the golden case's layout is read from its checkpoint
    import custom_ops
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.quantize import quantize_file
    from tests.golden.case_network import (
        case_network,
        case_outputs,
        case_words,
        compare_words,
        load_sample,
    )

    case_dir = GOLDEN / case
    device = json.loads((case_dir / "case.json").read_text())["device"]
    result = quantize_file(EXPORTS / case / f"{form}.onnx", None, device=get_device(device),
                           shift_quantile=_shift_quantile(case) if form == "qat" else None)
    assert result.summary["exact"] is True and result.summary["calibration_samples"] == 0
    net = case_network(case_dir)
    assert len(result.network.layers) == len(net.layers)
    # The sample in the export's own input units goes through the recorded mapping to
    # exactly the vendor's int8 sample.
    sample = load_sample(case_dir, net)
    own = sample.astype(np.float64) / (1.0 if form == "q-sim8" else 128.0)
    np.testing.assert_array_equal(result.mapping.quantize(own[np.newaxis])[0], sample)
    got = custom_ops.run(custom_ops.session(result.model), sample)
    words = case_words(case_dir, net, [g[0] for g in got], case_outputs(case_dir))
    problems = compare_words(_expected(case, form), words)
    assert not problems, "\n".join(problems)


def test_vendor_export_converts_from_the_command_line(tmp_path: Path) -> None:
    """As a user runs it: no calibration, the sample in the export's units (x / 128)."""
    case = "ai85-mnist"
    if not (EXPORTS / case / "q.onnx").is_file() or not (GOLDEN / case).is_dir():
        pytest.skip("../shared/exports or ../shared/golden is absent")
    sample = tmp_path / "x.npy"
    np.save(sample, np.load(GOLDEN / case / "sample.npy")[np.newaxis] / 128.0)
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(EXPORTS / case /
                                                                     "q.onnx"),
                           "--device", "MAX78000", "-o", str(tmp_path / "proj"),
                           "--sample-input", str(sample), "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "proj" / "cnn.c").is_file()


def test_qat_export_without_the_policys_quantile_warns() -> None:
    """The export loses the QAT policy's shift_quantile: without --shift-quantile the
    conversion says which value it assumed."""
    case = "ai85-mnist"
    if not (EXPORTS / case / "qat.onnx").is_file():
        pytest.skip("../shared/exports is absent")
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.quantize import quantize_file

    result = quantize_file(EXPORTS / case / "qat.onnx", None, device=get_device("MAX78000"))
    assert any(w.startswith("warning[float.vendor-shift-quantile]") for w in result.warnings)
    quiet = quantize_file(EXPORTS / case / "qat.onnx", None, device=get_device("MAX78000"),
                          shift_quantile=1.0)
    assert not any("shift-quantile" in w for w in quiet.warnings)
