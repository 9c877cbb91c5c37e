"""Hand-tuning you can trust (issue 25): a table of hand edits of the digits example's
sidecar, full and partial, on both devices.

- Every illegal edit is refused with a message naming the key and the line it is on.
- Every legal edit converts and the virtual accelerator passes the project (`verify`).
- Every overlap edit (a layer's output over its own input) is refused without
  --overlap-data, and with it the converter's checker (map/overlap.py) and the virtual
  accelerator (ai8xsim/overlap.py, from the registers of a project converted with the
  check switched off) judge it the same: both accept it or both name the clobber.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from onnx2ai8x.convert import ConvertRequest, convert, plan
from onnx2ai8x.devices import get_device
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.verification import verify

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits"
MODEL = EXAMPLE / "digits.onnx"
SAMPLE = EXAMPLE / "sample.npy"
DEVICES = ("MAX78000", "MAX78002")

pytestmark = pytest.mark.skipif(not MODEL.is_file(), reason="digits example absent")


@cache
def written_sidecar(device: str) -> str:
    """The full sidecar onnx2ai8x writes for the example (the README's hand-tune step)."""
    return plan(MODEL, get_device(device), None).sidecar_text


def edit(text: str, layer: str, key: str, value: str) -> str:
    """`text` with `key: value` set in the entry of `layer` (added when not written)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == f"- name: {layer}")
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip().startswith("- name:")), len(lines))
    for i in range(start + 1, end):
        if re.match(rf"\s+{key}:", lines[i]):
            lines[i] = re.sub(rf"{key}:.*", f"{key}: {value}", lines[i])
            break
    else:
        lines.insert(start + 1, f"    {key}: {value}")
    return "\n".join(lines) + "\n"


def key_line(text: str, layer: str, key: str) -> int:
    """The 1-based line of `key` in the entry of `layer` (computed from the text)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == f"- name: {layer}")
    for i in range(start, len(lines)):
        if re.match(rf"\s+(- )?{key}:", lines[i]):
            return i + 1
    raise AssertionError(f"{key} not in {layer}")


@dataclass(frozen=True)
class Edit:
    """Keys set in layer entries; `code` None: legal."""

    changes: tuple[tuple[str, str, str], ...]  # (layer, key, value)
    code: str | None = None
    blamed: tuple[str, str] | None = None  # (layer, key) the message must point at
    overlap: bool = False  # pass --overlap-data

    def apply(self, text: str) -> str:
        for layer, key, value in self.changes:
            text = edit(text, layer, key, value)
        return text


def _end(device: str) -> int:
    return get_device(device).data_instance_bytes


# Full-sidecar edits: each mapping key moved to a legal and an illegal value. The
# digits network: conv1 1x8x8 -> 16x8x8 (input on processor 0, output on 4-19), conv2
# -> 32x4x4 (max pool 2), conv3 -> 32x2x2 (max pool 2), fc 128 -> 10 (32-bit output).
FULL = {
    "out_offset-legal": Edit((("conv1", "out_offset", "0x1000"),)),
    "out_offset-past-end": Edit((("conv1", "out_offset", "END-0x40"),), "map.data-memory",
                                ("conv1", "out_offset")),
    "out_offset-misaligned": Edit((("conv3", "out_offset", "0x0042"),), "map.alignment",
                                  ("conv3", "out_offset")),
    "out_offset-legal-2": Edit((("conv3", "out_offset", "0x3000"),)),
    "processors-legal": Edit((("conv1", "processors", "0x0000000000000002"),)),
    "processors-count": Edit((("conv3", "processors", "0x00000000000000ff"),),
                             "sidecar.processors", ("conv3", "processors")),
    "output_processors-legal": Edit((("fc", "output_processors", "0x00000000000003ff"),)),
    "output_processors-count": Edit((("fc", "output_processors", "0x0000000000000007"),),
                                    "sidecar.processors", ("fc", "output_processors")),
    "in_offset-legal": Edit((("conv2", "in_offset", "0x0000"),)),
    "in_offset-unwritten": Edit((("conv2", "in_offset", "0x0004"),), "map.read-offset",
                                ("conv2", "in_offset")),
    "data_format-legal": Edit((("conv1", "data_format", "CHW"),)),
    "data_format-not-first": Edit((("conv2", "data_format", "CHW"),), "sidecar.value",
                                  ("conv2", "data_format")),
    "pad-contradicts": Edit((("conv3", "pad", "0"),), "sidecar.contradicts-model",
                            ("conv3", "pad")),
    "pool-contradicts": Edit((("conv2", "max_pool", "3"),), "sidecar.contradicts-model",
                             ("conv2", "max_pool")),
    "flatten-contradicts": Edit((("fc", "flatten", "false"),), "sidecar.contradicts-model",
                                ("fc", "flatten")),
    "overlap-without-flag": Edit((("fc", "out_offset", "0x0040"),), "map.overlap",
                                 ("fc", "out_offset")),
}

# Per device, what the read gap does: the MAX78000 has none.
READ_GAP = {"MAX78000": Edit((("conv2", "read_gap", "1"),), "map.read-gap",
                             ("conv2", "read_gap")),
            "MAX78002": Edit((("conv1", "write_gap", "1"),), "map.read-gap",
                             ("conv2", "name"))}


def _materialize(text: str, device: str) -> str:
    return text.replace("END-0x40", f"{_end(device) - 0x40:#06x}")


def _plan(path: Path, device: str, overlap: bool):
    return plan(MODEL, get_device(device), path, overlap_data=overlap)


def _refused(path: Path, text: str, device: str, ed: Edit) -> None:
    with pytest.raises(Ai8xError) as info:
        _plan(path, device, ed.overlap)
    first = info.value.diagnostics[0]
    assert first.code == ed.code, info.value.render()
    layer, key = ed.blamed
    line = key_line(text, layer, key)
    assert first.where.startswith(f"{path}:{line}: "), (first.where, line)
    if key != "name":
        assert f"`{key}`" in first.where, first.where


def _converts_and_passes(tmp_path: Path, path: Path, device: str, overlap: bool) -> None:
    out = tmp_path / "project"
    convert(ConvertRequest(model=MODEL, device=get_device(device), output=out,
                           sidecar=path, sample_input=SAMPLE,
                           options={"overlap_data": overlap}))
    result = verify(out)
    assert result.verdict == "PASS", result.text


CASES = [pytest.param(device, name, id=f"{device}-{name}") for device in DEVICES
         for name in [*FULL, "read_gap"]]


@pytest.mark.parametrize("device,name", CASES)
def test_full_sidecar_edit(tmp_path: Path, device: str, name: str) -> None:
    ed = READ_GAP[device] if name == "read_gap" else FULL[name]
    text = _materialize(ed.apply(written_sidecar(device)), device)
    path = tmp_path / "digits.yaml"
    path.write_text(text)
    if ed.code is None:
        _converts_and_passes(tmp_path, path, device, ed.overlap)
    else:
        _refused(path, text, device, ed)


# Partial sidecars: only the pinned keys, the rest inferred.
PARTIAL = {
    "pin-offset-legal": ("  - name: conv3\n    out_offset: 0x1000\n", None, None),
    "pin-processors-legal": ("  - name: conv1\n    processors: 0x2\n", None, None),
    "pin-misaligned": ("  - name: conv3\n    out_offset: 0x0042\n", "sidecar.alignment",
                       ("conv3", "out_offset")),
    "pin-past-end": ("  - name: conv1\n    out_offset: END-0x40\n", "sidecar.value",
                     ("conv1", "out_offset")),
    "pin-processor-count": ("  - name: conv2\n    processors: 0x3\n", "sidecar.value",
                            ("conv2", "processors")),
    "pin-typo": ("  - name: conv2\n    out_ofset: 0x100\n", "sidecar.unknown-key",
                 ("conv2", "out_ofset")),
    # conv3 pinned onto its own input's processors and offset: its pooling window needs
    # the whole input before the first output, so no mapping around the pins works
    "pins-collide": ("  - name: conv2\n    output_processors: 0x00000000ffffffff\n"
                     "    out_offset: 0x0\n  - name: conv3\n"
                     "    output_processors: 0x00000000ffffffff\n    out_offset: 0x0\n",
                     "map.data-memory", ("conv3", "name")),
    # the reading layer (fc) decides where conv3's output goes: a pin it overrides
    "pin-not-kept": ("  - name: conv3\n    output_processors: 0x0000000ffffffff0\n",
                     "sidecar.pin-not-kept", ("conv3", "output_processors")),
}


@pytest.mark.parametrize("device,name", [pytest.param(d, n, id=f"{d}-{n}") for d in DEVICES
                                         for n in PARTIAL])
def test_partial_sidecar_edit(tmp_path: Path, device: str, name: str) -> None:
    body, code, blamed = PARTIAL[name]
    text = _materialize(f"arch: digits\ndataset: digits\nlayers:\n{body}", device)
    path = tmp_path / "pins.yaml"
    path.write_text(text)
    if code is None:
        _converts_and_passes(tmp_path, path, device, False)
        return
    with pytest.raises(Ai8xError) as info:
        _plan(path, device, False)
    first = info.value.diagnostics[0]
    assert first.code == code, info.value.render()
    line = key_line(text, *blamed)
    assert first.where.startswith(f"{path}:{line}: "), first.where
    if blamed[1] != "name":
        assert f"`{blamed[1]}`" in first.where
    if name == "pin-typo":
        assert "did you mean `out_offset`?" in first.hint
    if name == "pins-collide":
        # the pins are named as the cause, with their lines
        pins = [d for d in info.value.diagnostics if d.code == "sidecar.pins"]
        assert pins, info.value.render()
        for layer, key in (("conv2", "out_offset"), ("conv3", "out_offset")):
            assert f"{path}:{key_line(text, layer, key)}" in pins[0].message


# Overlap edits: a layer writing over its own input. conv2 moved to processors 0-15 puts
# conv1's output (the processors conv2 reads) on the input's processor 0, so conv1's
# in_offset/out_offset decide how its 3x3 window (padding 1, 8 columns: it reads 9
# pixels ahead) meets its output.
ON_INPUT = (("conv2", "processors", "0x000000000000ffff"),)
OVERLAPS = {
    # conv3's output (2x2) over its 4x4 input: every output pixel needs the whole input
    "conv3-at-input": (("conv3", "out_offset", "0x0000"),),
    "conv3-at-input-end": (("conv3", "out_offset", "0x0030"),),
    # fc (one output pixel from the whole input) over its input: safe
    "fc-over-input": (("fc", "out_offset", "0x0040"),),
    # conv1 writes 9 words below its input: exactly what the window allows
    "conv1-below-by-window": (*ON_INPUT, ("conv1", "in_offset", "0x0024"),
                              ("conv1", "out_offset", "0x0000")),
    # one word less: output pixel 0 lands on input pixel 8, which output pixel 17 needs
    "conv1-below-by-less": (*ON_INPUT, ("conv1", "in_offset", "0x0020"),
                            ("conv1", "out_offset", "0x0000")),
    "conv1-far-below": (*ON_INPUT, ("conv1", "in_offset", "0x0080"),
                        ("conv1", "out_offset", "0x0000")),
    # writing ahead of input the layer has not read yet
    "conv1-ahead": (*ON_INPUT, ("conv1", "in_offset", "0x0000"),
                    ("conv1", "out_offset", "0x0024")),
    "conv1-same-place": (*ON_INPUT, ("conv1", "in_offset", "0x0000"),
                         ("conv1", "out_offset", "0x0000")),
}
SAFE = {"fc-over-input", "conv1-below-by-window", "conv1-far-below"}


def _forced_project(monkeypatch, tmp_path: Path, path: Path, device: str) -> Path:
    """The project converted with the placement checks switched off: what the vendor's
    tool writes with --overlap-data (it does not check the order)."""
    import onnx2ai8x.map.memory_check as mc
    from onnx2ai8x.map.lowered import HwNetwork
    from onnx2ai8x.map.weights import allocate_weights

    monkeypatch.setattr(mc, "checked",
                        lambda hp: (HwNetwork.of(hp, allocate_weights(hp.placement)), []))
    monkeypatch.setattr(mc, "unpermitted_overlaps", lambda hp: [])
    out = tmp_path / "forced"
    convert(ConvertRequest(model=MODEL, device=get_device(device), output=out,
                           sidecar=path, sample_input=SAMPLE))
    return out


@pytest.mark.parametrize("device,name", [pytest.param(d, n, id=f"{d}-{n}") for d in DEVICES
                                         for n in OVERLAPS])
def test_overlap_is_judged_alike_by_checker_and_simulator(
        tmp_path: Path, monkeypatch, device: str, name: str) -> None:
    text = Edit(OVERLAPS[name]).apply(written_sidecar(device))
    path = tmp_path / "digits.yaml"
    path.write_text(text)
    layer = OVERLAPS[name][-1][0]
    line = key_line(text, layer, "out_offset")
    # with the flag: the checker's verdict
    try:
        _plan(path, device, True)
        checker_clobber = None
    except Ai8xError as err:
        codes = {d.code for d in err.diagnostics}
        assert codes == {"map.overwrite"}, err.render()
        checker_clobber = err.diagnostics[0]
        assert checker_clobber.where.startswith(f"{path}:{line}: layer `{layer}`")
        assert "still needs" in checker_clobber.message
    # without it: refused with one diagnosis, the most specific (issue 35): naming the
    # flag when the flag would make it run, else the clobber the flag would not cure
    with pytest.raises(Ai8xError) as info:
        _plan(path, device, False)
    codes = [d.code for d in info.value.diagnostics if f"layer `{layer}`" in d.where]
    if checker_clobber is None:
        assert codes == ["map.overlap"], info.value.render()
        refusal = info.value.diagnostics[0]
        assert "--overlap-data" in refusal.hint, info.value.render()
        assert refusal.where.startswith(f"{path}:{line}: layer `{layer}`, `out_offset`")
    else:
        assert codes == ["map.overwrite"], info.value.render()
    # the simulator's verdict on the project the vendor's tool would write
    result = verify(_forced_project(monkeypatch, tmp_path, path, device))
    index = ["conv1", "conv2", "conv3", "fc"].index(layer)
    if checker_clobber is None:
        assert result.verdict == "PASS", result.text
    else:
        assert result.verdict == "FAIL", result.text
        assert f"layer {index} writes its output over its own input" in result.text, \
            result.text
    assert (name in SAFE) == (checker_clobber is None)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(SAFE))
def test_safe_overlap_converts_with_the_flag_and_passes(tmp_path: Path, device: str,
                                                        name: str) -> None:
    path = tmp_path / "digits.yaml"
    path.write_text(Edit(OVERLAPS[name]).apply(written_sidecar(device)))
    _converts_and_passes(tmp_path, path, device, True)


def test_the_table_is_large_enough() -> None:
    """The acceptance: at least 30 hand edits, both devices, full and partial."""
    per_device = len(FULL) + 1 + len(PARTIAL) + len(OVERLAPS)
    assert per_device * len(DEVICES) >= 30
    assert any(e.code is None for e in FULL.values())
    assert any(e.code is not None for e in FULL.values())


# Contradictions of the model in a full sidecar (README: warning[sidecar.contradicts-
# model]): the model's values, computed from the network onnx2ai8x reads, then each
# field moved away from them.
def _model_layer(name: str):
    network = plan(MODEL, get_device("MAX78000"), None).network
    return next(lay for lay in network.layers if lay.name == name)


WARNED = {
    # (layer, key, value written, model value as the message states it)
    "output_shift": ("conv2", "output_shift", "2",
                     lambda lay: str(lay.output_shift - (8 - abs(lay.quantization or 8)))),
    "quantization": ("fc", "quantization", "8",
                     lambda lay: f"{lay.quantization}-bit"),
    "pooling-kind": ("conv2", "avg_pool", "2",
                     lambda lay: "max_pool" if not lay.pool_average else "avg_pool"),
    "output_width": ("conv3", "output_width", "32", lambda lay: str(lay.output_width)),
    "activate": ("conv1", "activate", "None", lambda lay: "ReLU"),
}


@pytest.mark.parametrize("field", sorted(WARNED))
def test_contradiction_is_a_warning_naming_layer_field_and_both_values(
        tmp_path: Path, field: str) -> None:
    layer, key, value, model_value = WARNED[field]
    text = written_sidecar("MAX78000")
    if key == "avg_pool":  # the pooling kind: the key itself says it
        text = text.replace("    max_pool: 2\n", "    avg_pool: 2\n", 1)
    else:
        text = edit(text, layer, key, value)
    path = tmp_path / "digits.yaml"
    path.write_text(text)
    result = _plan(path, "MAX78000", False)
    lay = _model_layer(layer)
    assert len(result.warnings) == 1, result.warnings
    warning = result.warnings[0]
    line = key_line(text, layer, key)
    assert warning.startswith(f"warning[sidecar.contradicts-model] {path}:{line}: "), warning
    assert f"`{key}`" in warning and f"`{layer}`" in warning
    assert model_value(lay) in warning
    assert "checkpoint" not in warning
    # the model is followed: the same project as from the unedited sidecar
    assert result.placement.layers == plan(MODEL, get_device("MAX78000"), None).placement.layers


def test_pad_contradiction_names_the_edited_layer_not_a_checkpoint(tmp_path: Path) -> None:
    """`pad: 1 -> 0` on conv3 used to fail on fc, about a checkpoint nobody passed."""
    text = edit(written_sidecar("MAX78000"), "conv3", "pad", "0")
    path = tmp_path / "digits.yaml"
    path.write_text(text)
    with pytest.raises(Ai8xError) as info:
        _plan(path, "MAX78000", False)
    rendered = info.value.render()
    assert info.value.code == "sidecar.contradicts-model"
    assert f"{path}:{key_line(text, 'conv3', 'pad')}: layer 2 (conv3), `pad`" in rendered
    assert "pad 0" in rendered and "pad 1" in rendered
    assert "checkpoint" not in rendered and "fc" not in rendered
