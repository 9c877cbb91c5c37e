"""import-izer along a sidecar's stated layer order (`simulated_sequence`, seed 004).

A MAX78002 sidecar may say which path its known answer assumes a snoop unit takes at
run time: a layer whose `simulated_sequence` jumps past the next layers, or `stop`. The
imported model computes that path (what the vendor's known answer holds), keeps the
layers the path skips (the accelerator holds them) marked `ai8x.skipped`, and converts
with the sidecar and without it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

SHAPE = (16, 8, 8)


def _layer(name: str, out_offset: int, extra: str = "") -> str:
    return (f"  - name: {name}\n    processors: 0x000000000000ffff\n"
            f"    out_offset: 0x{out_offset:04x}\n    operation: conv2d\n"
            f"    kernel_size: 3x3\n    pad: 1\n    activation: relu\n{extra}")


# Layer 0 jumps to layer 3; layers 1 and 2 run only when the snoop unit does not jump,
# and layer 2 writes where layer 0's output is (in the order the sidecar states, it
# never runs, so layer 3 reads layer 0's output there).
SKIP = ("arch: seq\ndataset: seq\nlayers:\n"
        + _layer("l0", 0x4000, "    simulated_sequence: 3\n    snoop_sequence: 3\n")
        + _layer("l1", 0x2000) + _layer("l2", 0x4000) + _layer("l3", 0x0000))
# The same path written without the jump: the two layers the path runs.
DIRECT = ("arch: seq\ndataset: seq\nlayers:\n"
          + _layer("l0", 0x4000) + _layer("l3", 0x0000))
# The known answer stops after layer 0; layer 1 follows it on the hardware.
STOP = ("arch: seq\ndataset: seq\nlayers:\n"
        + _layer("l0", 0x4000, "    simulated_sequence: stop\n") + _layer("l1", 0x0000))


def _weights(seed: int = 11) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.integers(-128, 128, (16, 16, 3, 3)) for name in ("l0", "l1", "l2", "l3")}


def _write(root: Path, sidecar: str, names: tuple[str, ...]) -> tuple[Path, Path, Path]:
    """(sidecar, checkpoint, sample): the weights of `names`, in layer order."""
    import torch

    weights = _weights()
    sd = {}
    for k, name in enumerate(names):
        sd[f"layer{k}.op.weight"] = torch.tensor(weights[name], dtype=torch.float32)
        sd[f"layer{k}.weight_bits"] = torch.tensor([8.0])
        sd[f"layer{k}.output_shift"] = torch.tensor([-3.0])
    root.mkdir(parents=True, exist_ok=True)
    yaml, ckpt, sample = root / "net.yaml", root / "net.pth.tar", root / "sample.npy"
    torch.save({"arch": "seq", "epoch": 0, "state_dict": sd, "extras": {}}, ckpt)
    yaml.write_text(sidecar)
    np.save(sample, np.random.default_rng(5).integers(-128, 128, SHAPE).astype(np.int64))
    return yaml, ckpt, sample


def _import(files: tuple[Path, Path, Path]):
    from onnx2ai8x.devices import MAX78002
    from onnx2ai8x.sidecar.izer import import_project

    yaml, ckpt, sample = files
    return import_project(yaml, ckpt, MAX78002, sample)


def _run(model, sample: Path) -> list[np.ndarray]:
    import custom_ops

    x = np.load(sample)[np.newaxis].astype(np.int8)
    session = custom_ops.session(model)
    return [np.asarray(o) for o in session.run(None, {session.get_inputs()[0].name: x})]


def test_the_model_computes_the_stated_path(tmp_path: Path) -> None:
    skip = _write(tmp_path / "skip", SKIP, ("l0", "l1", "l2", "l3"))
    direct = _write(tmp_path / "direct", DIRECT, ("l0", "l3"))
    got, want = _run(_import(skip), skip[2]), _run(_import(direct), direct[2])
    assert len(got) == len(want) == 1
    assert np.array_equal(got[0], want[0])
    # and not what the layers compute in their index order
    from custom_ops.builder import build_model
    from onnx2ai8x.devices import MAX78002
    from onnx2ai8x.sidecar.izer import resolve_project
    from onnx2ai8x.sidecar.resolve import to_network

    chain = to_network(resolve_project(skip[0], skip[1], MAX78002, skip[2]))
    assert not np.array_equal(_run(build_model(chain), skip[2])[0], got[0])


def test_skipped_layers_stay_in_the_model_marked(tmp_path: Path) -> None:
    from onnx2ai8x.importer.onnx_reader import SKIPPED_KEY, read_model_full

    model = _import(_write(tmp_path, SKIP, ("l0", "l1", "l2", "l3")))
    marked = {n.name.split("/")[0] for n in model.graph.node
              if any(p.key == SKIPPED_KEY for p in n.metadata_props)}
    assert marked == {"l1", "l2"}
    network = read_model_full(model).network
    assert [lay.name for lay in network.layers] == ["l0", "l1", "l2", "l3"]
    assert network.layers[3].in_sequences == (0,)
    assert network.outputs == (3,)


def test_stop_makes_the_stopping_layer_the_output(tmp_path: Path) -> None:
    files = _write(tmp_path, STOP, ("l0", "l1"))
    model = _import(files)
    direct = _write(tmp_path / "one", "arch: seq\ndataset: seq\nlayers:\n"
                    + _layer("l0", 0x4000), ("l0",))
    assert np.array_equal(_run(model, files[2])[0], _run(_import(direct), direct[2])[0])


def test_an_unmarked_layer_nothing_reads_is_refused(tmp_path: Path) -> None:
    from onnx2ai8x.errors import Ai8xError
    from onnx2ai8x.importer.onnx_reader import SKIPPED_KEY, read_model_full

    model = _import(_write(tmp_path, SKIP, ("l0", "l1", "l2", "l3")))
    for node in model.graph.node:
        keep = [(p.key, p.value) for p in node.metadata_props if p.key != SKIPPED_KEY]
        del node.metadata_props[:]
        for key, value in keep:
            node.metadata_props.add(key=key, value=value)
    with pytest.raises(Ai8xError) as err:
        read_model_full(model)
    assert err.value.code == "model.layer-output"
    assert "l2" in str(err.value) and SKIPPED_KEY in str(err.value)


# `snoop` register values (those of the vendor suite's snoop-skipl1 configuration): the
# project programs snoop units, so the order it runs is chosen at run time.
SNOOP = "snoop: [0x249007, 0, 0xbc7f1932, 0, 0, 0, 0x82022005, 0x3201]\n"


def test_converted_project_passes_along_the_stated_path(tmp_path: Path) -> None:
    """Mapped automatically, the project runs every layer in order and layer 3 reads
    layer 0 where the mapping put it: it passes on the virtual accelerator. With the
    sidecar (and its snoop units) the project keeps the vendor's mapping (layer 2 over
    layer 0's output) and is verified along the stated order, as the vendor's is."""
    from onnx2ai8x.cli import main

    files = _write(tmp_path, SNOOP + SKIP, ("l0", "l1", "l2", "l3"))
    model = tmp_path / "net.onnx"
    model.write_bytes(_import(files).SerializeToString())
    common = [str(model), "--device", "MAX78002", "--sample-input", str(files[2]), "--quiet"]
    assert main([*common, "-o", str(tmp_path / "auto"), "--verify"]) == 0
    assert main([*common, "--sidecar", str(files[0]), "-o", str(tmp_path / "side"),
                 "--verify"]) == 0
    assert main(["verify", str(tmp_path / "side"), "--model", str(model),
                 "--layer-order", "0,1,2,3", "--quiet"]) == 1  # the path not taken


def test_a_stated_jump_without_snoop_units_is_warned(tmp_path: Path, capsys) -> None:
    from onnx2ai8x.cli import main

    files = _write(tmp_path, SKIP, ("l0", "l1", "l2", "l3"))
    model = tmp_path / "net.onnx"
    model.write_bytes(_import(files).SerializeToString())
    # (a warning: not under --quiet, which means errors only)
    assert main([str(model), "--device", "MAX78002", "--sidecar", str(files[0]),
                 "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "programs no snoop unit" in err and "0 -> 1 -> 2 -> 3" in err and "l1, l2" in err
    # with the snoop units it is not
    files = _write(tmp_path / "snoop", SNOOP + SKIP, ("l0", "l1", "l2", "l3"))
    assert main([str(model), "--device", "MAX78002", "--sidecar", str(files[0]),
                 "-o", str(tmp_path / "out2")]) == 0
    assert "snoop unit" not in capsys.readouterr().err
