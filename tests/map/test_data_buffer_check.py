"""The data buffer in the sidecar path and the memory checker (seed 000, Rolling
Buffers): the sidecar's `data_buffer` becomes Placement.data_buffer, the buffer's words
stay live for the whole network, and only its shift and insert layers may write them."""
from __future__ import annotations

from pathlib import Path

import pytest

from onnx2ai8x.cli import main
from onnx2ai8x.convert import plan
from onnx2ai8x.devices import MAX78000
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.map.memory_check import buffer_kept, buffers, check_placement, last_use
from onnx2ai8x.network import DATA_BUFFER
from tests.emit.data_buffer_nets import ONE, import_net, write_net
from tests.map.examined import examined

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    root = tmp_path_factory.mktemp("one")
    yaml, ckpt, sample = write_net(ONE, root)
    model = import_net(yaml, ckpt, sample, root / "one.onnx")
    return model, yaml


def _edited(one, tmp_path: Path, *edits: tuple[str, str]) -> Path:
    text = one[1].read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "edited.yaml"
    path.write_text(text)
    return path


# tcn0's output moved onto the buffer's processors, over positions 2..4
ONTO_BUFFER = (("output_processors: 0x00000000000000ff\n    in_offset: 0x2000",
                "output_processors: 0x00ff000000000000\n    in_offset: 0x2000"),
               ("out_offset: 0x3000", "out_offset: 0x2008"))


def test_the_sidecar_places_the_buffer(one):
    result = plan(one[0], MAX78000, one[1])
    where = result.placement.data_buffer
    assert (where.processors, where.offset) == (0x00FF000000000000, 0x2000)
    assert result.network.data_buffer.length == 5
    assert DATA_BUFFER not in last_use(result.network)
    region = [b for b in buffers(result.hw)
              if b.producer == DATA_BUFFER]
    assert [(r.start, r.end, r.born, r.dies) for r in region] == [(0x2000, 0x2014, -1, 5)]
    assert check_placement(result.placement) == []


def _problems(one, tmp_path, *edits):
    with pytest.raises(Ai8xError) as err:
        plan(one[0], MAX78000, _edited(one, tmp_path, *edits))
    return [d for d in err.value.diagnostics if d.code == "map.data-buffer"]


def test_another_layer_writing_on_the_buffer_is_refused(one, tmp_path):
    diags = _problems(one, tmp_path, *ONTO_BUFFER)
    assert diags and all("tcn0" in d.where for d in diags)
    assert any("lands on the data buffer `buf`" in d.message for d in diags)


def test_a_reader_off_the_buffer_is_refused(one, tmp_path):
    diags = _problems(one, tmp_path, ("in_offset: 0x2000\n    in_channels: 8\n    in_dim: 5",
                                      "in_offset: 0x2004\n    in_channels: 8\n    in_dim: 5"))
    assert [(d.where.split(": ")[-1], d.hint) for d in diags] == \
        [("layer `tcn0`", "set `in_offset: 0x2000`")]


def test_an_insert_off_the_last_position_is_refused(one, tmp_path):
    diags = _problems(one, tmp_path, ("out_offset: 0x2010", "out_offset: 0x200c"))
    assert [(d.where.split(": ")[-1], d.hint) for d in diags] == \
        [("layer `insert`", "set `out_offset: 0x2010`")]


def test_a_shift_into_the_wrong_place_is_refused(one, tmp_path):
    diags = _problems(one, tmp_path, ("in_offset: 0x2004", "in_offset: 0x2008"))
    assert any("set `in_offset: 0x2004`" == d.hint for d in diags)


def test_the_cli_names_the_layer_without_a_traceback(one, tmp_path, capsys):
    bad = _edited(one, tmp_path, *ONTO_BUFFER)
    code = main([str(one[0]), "--sidecar", str(bad), "-o", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert "tcn0" in err and "data buffer `buf`" in err
    assert not (tmp_path / "out").exists()


def test_the_buffer_needs_one_processor_per_channel(one):
    import dataclasses

    result = plan(one[0], MAX78000, one[1])
    placement = dataclasses.replace(
        result.placement, data_buffer=dataclasses.replace(result.placement.data_buffer,
                                                          processors=0x007F000000000000))
    diags = buffer_kept(examined(placement))
    assert any("8 channels need 8 processors" in d.message for d in diags)


def test_the_shift_layer_writes_over_its_own_input(one):
    """The vendor tool refuses a data-buffer network without --overlap-data; the shift
    layer is what the written sidecar names for it."""
    from onnx2ai8x.map.memory_check import overlapping_layers

    result = plan(one[0], MAX78000, one[1])
    shift = [i for i, lay in enumerate(result.network.layers) if lay.buffer_shift]
    assert shift and set(shift) <= set(overlapping_layers(result.hw))
    assert "--overlap-data" in result.sidecar_text


@pytest.mark.parametrize("edit, key, layer", [
    (("    in_dim: 5\n", ""), "in_dim", "tcn0"),  # a reader needs in_dim (vendor)
    (("    in_channels: 8\n    in_dim: 4\n", "    in_dim: 4\n"), "in_channels", "shift"),
    (("    out_offset: 0x2010\n", ""), "buffer_insert", "insert"),
    (("in_dim: 4\n    in_sequences: buf\n", "in_dim: 4\n"), "buffer_shift", "shift"),
    (("activate: ReLU\n    buffer_insert: 1\n",
      "activate: ReLU\n    buffer_insert: 1\n    buffer_shift: 1\n"), "buffer_shift", "insert"),
], ids=["reader-in_dim", "shift-in_channels", "insert-out_offset", "shift-in_sequences",
        "shift-in-a-convolution"])
def test_sidecar_buffer_keys_the_vendor_requires(one, tmp_path, capsys, edit, key, layer):
    bad = _edited(one, tmp_path, edit)
    assert main([str(one[0]), "--sidecar", str(bad), "-o", str(tmp_path / "out"),
                 "--quiet"]) != 0
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert f"({layer})" in first and f"`{key}`" in first and "Traceback" not in err
    assert "hint:" in err
