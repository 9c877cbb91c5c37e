"""What keeps a conversion fast (issue 39): the model decoded once, nothing imported that
the convert command does not use. (The time itself: benchmarks/convert_time.py; the
bytes written stay the same: tests/test_project_bytes.py.)"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from onnx2ai8x import api, onnxpb

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.onnx"

pytestmark = pytest.mark.skipif(not DIGITS.is_file(), reason="examples absent")


def _model_with(props: list[tuple[str, str]], tmp: Path) -> Path:
    model = onnxpb.load(DIGITS)
    del model.metadata_props[:]
    for key, value in props:
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    path = tmp / "m.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_metadata_read_alone_is_the_decoded_models(tmp_path: Path) -> None:
    props = [("a", "1"), ("ai8x.device", "MAX78002"), ("ai8x.device", "MAX78000"),
             ("z", "x" * 300)]
    path = _model_with(props, tmp_path)
    assert onnxpb.read_metadata(path) == props
    decoded = [(p.key, p.value) for p in onnxpb.load(path).metadata_props]
    assert onnxpb.read_metadata(path) == decoded
    # the first entry names the device, as a loop over the decoded model finds it
    assert api.device_for(path).name == "MAX78002"


def test_a_truncated_model_is_not_read_as_metadata(tmp_path: Path) -> None:
    data = DIGITS.read_bytes()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(onnxpb.DecodeError):
        onnxpb.read_metadata(cut)


def test_the_model_is_decoded_once(tmp_path: Path, monkeypatch) -> None:
    """Without --device the device comes from the model's metadata, read without
    decoding the graph; the front end decodes the model once."""
    decoded = []
    original = onnxpb.decode

    def counting(data: bytes):
        decoded.append(len(data))
        return original(data)

    monkeypatch.setattr(onnxpb, "decode", counting)
    device = api.device_for(DIGITS, None)
    api.convert(DIGITS, device, tmp_path / "p")
    assert decoded == [DIGITS.stat().st_size]


def test_convert_imports_only_what_it_uses(tmp_path: Path) -> None:
    """The convert command never imports torch, the onnx package, the C reader of the
    virtual accelerator (the phase counts come from the emitter's values) or numpy.ma
    (numpy 2's np.unique imports it)."""
    out = tmp_path / "p"
    code = ("import sys\n"
            "from onnx2ai8x import cli\n"
            f"assert cli.main([{str(DIGITS)!r}, '-o', {str(out)!r}, '--quiet']) == 0\n"
            "bad = [m for m in ('torch', 'onnx', 'ai8xsim.creader', 'numpy.ma')\n"
            "       if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300, cwd=ROOT)
