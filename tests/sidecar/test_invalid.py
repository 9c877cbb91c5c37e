"""Broken sidecars: each gives its own error code and names the layer and the key."""
from __future__ import annotations

import copy

import pytest
import yaml

from onnx2ai8x.errors import Ai8xError
from tests.conftest import GOLDEN

pytest.importorskip("torch")

from onnx2ai8x.api import import_izer  # noqa: E402
from onnx2ai8x.devices import MAX78000

BASE = "ai85-mnist"  # 5 layers: 4x conv2d (1 -> 60 -> 60 -> 56 -> 12 channels) + linear


def _set(layer, **changes):
    def mutate(cfg):
        cfg["layers"][layer].update(changes)
    return mutate


def _drop(layer, key):
    def mutate(cfg):
        del cfg["layers"][layer][key]
    return mutate


def _glob(**changes):
    def mutate(cfg):
        for key, value in changes.items():
            if value is None:
                del cfg[key]
            else:
                cfg[key] = value
    return mutate


def _append_layer(cfg):
    cfg["layers"].append({"processors": 0x3FF, "out_offset": 0, "op": "mlp"})


def _rename(layer, old, new):
    def mutate(cfg):
        cfg["layers"][layer][new] = cfg["layers"][layer].pop(old)
    return mutate


def _both(*fns):
    def mutate(cfg):
        for fn in fns:
            fn(cfg)
    return mutate


# (id, mutation or raw YAML text, error code, layer index or None, key or None, words)
CASES = [
    ("unknown-global-key", _both(_glob(datset="MNIST"), _glob(dataset=None)),
     "sidecar.unknown-key", None, "datset", "did you mean `dataset`"),
    ("misspelled-layer-key", _rename(1, "out_offset", "out_ofset"),
     "sidecar.unknown-key", 1, "out_ofset", "did you mean `out_offset`"),
    ("unknown-layer-key", _set(2, colour="red"), "sidecar.unknown-key", 2, "colour",
     "unknown layer key"),
    ("missing-layers", _glob(layers=None), "sidecar.missing-key", None, "layers", "mandatory"),
    ("missing-arch", _glob(arch=None), "sidecar.missing-key", None, "arch", "mandatory"),
    ("empty-layers", _glob(layers=[]), "sidecar.type", None, "layers", "non-empty"),
    ("processors-wrong-type", _set(1, processors=[1, 2]), "sidecar.type", 1, "processors",
     "hexadecimal"),
    ("processors-bad-hex", _set(1, processors="0xfffz"), "sidecar.type", 1, "processors",
     "hexadecimal"),
    ("processors-missing", _drop(3, "processors"), "sidecar.missing-key", 3, "processors",
     "missing"),
    ("processors-count-mismatch", _set(1, processors=0xFF), "sidecar.processors", 1,
     "processors", "60 input channels need 60 processors"),
    ("output-processors-count", _set(4, output_processors=0xFF), "sidecar.processors", 4,
     "output_processors", "10 output channels"),
    ("bad-op-name", _set(2, op="conv3d"), "sidecar.value", 2, "op", "did you mean"),
    ("op-synonym-conflict", _set(2, operation="conv2d"), "sidecar.conflict", 2, "op",
     "set the same thing"),
    ("negative-out-offset", _set(1, out_offset=-4), "sidecar.value", 1, "out_offset",
     "must be 0"),
    ("out-offset-beyond-memory", _set(1, out_offset=0x9000), "sidecar.value", 1,
     "out_offset", "outside data memory"),
    ("pool-too-large", _set(3, avg_pool=16, pool_stride=16), "sidecar.dimension", 3,
     "avg_pool", "leaves nothing"),
    ("kernel-checkpoint-mismatch", _set(0, kernel_size="1x1", pad=0),
     "sidecar.kernel-mismatch", 0, "kernel_size", "(60, 1, 3, 3)"),
    ("kernel-bad-value", _set(0, kernel_size="5x5"), "sidecar.value", 0, "kernel_size",
     "1x1 or 3x3"),
    ("more-layers-than-checkpoint", _append_layer, "sidecar.layer-count", 5, None,
     "only 5 weight layers"),
    ("in-sequences-out-of-range", _set(2, in_sequences=[7]), "sidecar.reference", 2,
     "in_sequences", "numbered 0 to 4"),
    ("in-sequences-unknown-name", _both(_set(0, name="first"), _set(2, in_sequences="frist")),
     "sidecar.reference", 2, "in_sequences", "did you mean `first`"),
    ("in-sequences-later-layer", _set(1, in_sequences=[3]), "sidecar.sequence", 1,
     "in_sequences", "has not run yet"),
    ("channels-disagree-with-checkpoint", _set(2, in_sequences=["input"], in_offset=0),
     "sidecar.channels", 2, "in_sequences", "expects 60 inputs, but 1 channels arrive"),
    ("concat-channel-mismatch", _set(3, in_sequences=[-1, 2]), "sidecar.channels", 3,
     "in_sequences", "different channel counts (1, 56)"),
    ("quantization-bad-value", _set(1, quantization=3), "sidecar.value", 1, "quantization",
     "1, 2, 4, 8 or binary"),
    ("quantization-too-narrow", _set(1, quantization=2), "sidecar.quantization", 1,
     "quantization", "weights in"),
    ("binary-on-max78000", _set(1, quantization="binary"), "sidecar.device", 1,
     "quantization", "MAX78000"),
    ("bad-activation", _set(1, activate="sigmoid"), "sidecar.value", 1, "activate",
     "ReLU, Abs or None"),
    ("activation-synonym-conflict", _set(1, activation="ReLU"), "sidecar.conflict", 1,
     "activation", "set the same thing"),
    ("output-width-16", _set(4, output_width=16), "sidecar.value", 4, "output_width",
     "8 or 32"),
    ("pad-negative", _set(1, pad=-1), "sidecar.value", 1, "pad", "must be 0"),
    ("pad-three", _set(1, pad=3), "sidecar.value", 1, "pad", "not supported"),
    ("pad-wrong-type", _set(1, pad="one"), "sidecar.type", 1, "pad", "integer"),
    ("duplicate-name", _both(_set(0, name="a"), _set(1, name="A")), "sidecar.duplicate", 1,
     "name", "used twice"),
    ("reserved-name", _set(1, name="input"), "sidecar.value", 1, "name", "reserved"),
    ("next-sequence-jump-on-max78000", _set(1, next_sequence=3), "sidecar.device", 1,
     "next_sequence", "cannot jump"),
    ("groups-on-max78000", _set(1, groups=60), "sidecar.device", 1, "groups", "MAX78000"),
    ("chw-not-first", _set(1, data_format="CHW"), "sidecar.value", 1, "data_format",
     "first layer"),
    ("streaming-after-nonstreaming", _set(1, streaming=True), "sidecar.streaming", 1,
     "streaming", "does not"),
    ("operands-without-eltwise", _set(1, operands=2), "sidecar.value", 1, "operands",
     "element-wise"),
    ("flatten-with-pooling", _set(4, max_pool=2, pool_stride=2), "sidecar.value", 4,
     "flatten", "pooling"),
    ("arch-mismatch", _glob(arch="ai85net6"), "sidecar.arch-mismatch", None, "arch",
     "ai85net5"),
    ("output-shift-too-large", _set(1, output_shift=20), "sidecar.value", 1, "output_shift",
     "must be"),
    ("streaming-wrong-type", _set(0, streaming="yes"), "sidecar.type", 0, "streaming",
     "true or false"),
    ("duplicate-key-yaml", "arch: ai85net5\ndataset: MNIST\nlayers:\n  - processors: 1\n"
     "    pad: 1\n    pad: 2\n", "sidecar.duplicate-key", None, None, "given twice"),
    ("yaml-syntax", "arch: ai85net5\nlayers:\n  - processors: [1\n",
     "sidecar.yaml", None, None, "not valid YAML"),
    ("not-a-mapping", "- just\n- a list\n", "sidecar.structure", None, None, "mapping"),
]


@pytest.fixture
def base_case():
    case_dir = GOLDEN / BASE
    if not (case_dir / "network.yaml").is_file():
        pytest.skip("golden corpus absent")
    return case_dir, yaml.safe_load((case_dir / "network.yaml").read_text())


def _write(tmp_path, base_cfg, change) -> object:
    path = tmp_path / "broken.yaml"
    if isinstance(change, str):
        path.write_text(change)
    else:
        cfg = copy.deepcopy(base_cfg)
        change(cfg)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_enough_cases():
    assert len(CASES) >= 20
    assert len({c[0] for c in CASES}) == len(CASES)


def test_base_case_is_valid(base_case, tmp_path):
    case_dir, cfg = base_case
    path = _write(tmp_path, cfg, lambda c: None)
    out = tmp_path / "ok.onnx"
    from onnx2ai8x.sidecar.izer import resolve_project
    resolved = resolve_project(path, case_dir / "checkpoint.pth.tar", MAX78000,
                               case_dir / "sample.npy")
    assert len(resolved.layers) == 5 and not out.exists()


@pytest.mark.parametrize("cid, change, code, layer, key, words", CASES,
                         ids=[c[0] for c in CASES])
def test_broken_sidecar(base_case, tmp_path, cid, change, code, layer, key, words):
    case_dir, cfg = base_case
    path = _write(tmp_path, cfg, change)
    out = tmp_path / "model.onnx"
    with pytest.raises(Ai8xError) as err:
        import_izer(path, case_dir / "checkpoint.pth.tar", MAX78000,
                    sample=case_dir / "sample.npy", output=out)
    diag = err.value.diagnostics[0]
    assert diag.code == code, err.value.render()
    text = err.value.render()
    assert str(path) in diag.where
    if layer is not None:
        assert f"layer {layer}" in diag.where, text
    if key is not None:
        assert f"`{key}`" in diag.where, text
    assert words in text, text
    assert diag.hint or code in ("sidecar.structure",), "every error carries a fix"
    assert not out.exists()


@pytest.mark.parametrize("cid", ["processors-count-mismatch", "misspelled-layer-key",
                                 "yaml-syntax"])
def test_cli_exits_nonzero_without_traceback(base_case, tmp_path, capsys, cid):
    from onnx2ai8x.cli import main

    case_dir, cfg = base_case
    _, change, code, *_ = next(c for c in CASES if c[0] == cid)
    path = _write(tmp_path, cfg, change)
    out = tmp_path / "model.onnx"
    rc = main(["import-izer", "--config-file", str(path), "--checkpoint-file",
               str(case_dir / "checkpoint.pth.tar"), "--sample", str(case_dir / "sample.npy"),
               "--device", "MAX78000", "--output", str(out)])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert rc == 1
    assert "Traceback" not in text and "internal error" not in text
    assert f"error[{code}]" in text
    assert not out.exists()
