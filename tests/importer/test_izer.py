"""import-izer: the ONNX file, its names and metadata, and the CLI."""
from __future__ import annotations

import json

import pytest

from onnx2ai8x.devices import MAX78000
from onnx2ai8x.errors import Ai8xError
from tests.conftest import GOLDEN

pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

CASE = GOLDEN / "ai85-kws20_v3"  # 1-D, trained checkpoint with a data-parallel prefix


@pytest.fixture
def case():
    if not (CASE / "network.yaml").is_file():
        pytest.skip("golden corpus absent")
    pytest.importorskip("custom_ops.builder")
    return CASE


def test_cli_writes_model_with_names_and_sidecar_metadata(case, tmp_path, capsys):
    from onnx2ai8x.cli import main

    out = tmp_path / "kws.onnx"
    rc = main(["import-izer", "--config-file", str(case / "network.yaml"),
               "--checkpoint-file", str(case / "checkpoint.pth.tar"),
               "--sample", str(case / "sample.npy"), "--device", "MAX78000",
               "--output", str(out)])
    assert rc == 0, capsys.readouterr()
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    meta = {n.name: {p.key: p.value for p in n.metadata_props} for n in model.graph.node
            if n.metadata_props}
    import yaml

    layer_count = len(yaml.safe_load((case / "network.yaml").read_text())["layers"])
    assert sorted(meta) == sorted(f"layer{i}" for i in range(layer_count))
    first = json.loads(meta["layer0"]["ai8x.sidecar"])
    assert int(first["processors"], 16) > 0 and "out_offset" in first
    assert meta["layer0"]["ai8x.layer_index"] == "0"
    assert {p.key: p.value for p in model.metadata_props}["ai8x.device"] == "MAX78000"
    assert [p for p in tmp_path.iterdir()] == [out]  # no temporary left behind


def test_shape_needs_sample_or_in_dim(case, tmp_path):
    from onnx2ai8x.sidecar.izer import import_project

    with pytest.raises(Ai8xError) as err:
        import_project(case / "network.yaml", case / "checkpoint.pth.tar", MAX78000)
    assert err.value.code == "usage.bad-input"
    assert "in_dim" in err.value.render() and "--sample" in err.value.render()


def test_deterministic(case):
    from onnx2ai8x.sidecar.izer import import_project

    args = (case / "network.yaml", case / "checkpoint.pth.tar", MAX78000,
            case / "sample.npy")
    assert import_project(*args).SerializeToString() == \
        import_project(*args).SerializeToString()
